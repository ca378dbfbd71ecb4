//! Which objects carry a pod spec, and where.
//!
//! Every workload kind is reduced to one pod-spec view plus the field path
//! of that spec from the object root, so rules are written once against a
//! pod spec and report paths the user can find in their own manifest.
//!
//! The custom resources known without being told are in `custom`; the
//! kinds a policy declares under `podTemplates` in `templates`.

use crate::decision::path::FieldPath;
use crate::decision::view::{MetaView, ObjectView, SpecView, StrMap, TemplateView};

mod custom;
mod templates;

pub use custom::{CUSTOM_RESOURCES, CustomResource};
pub use templates::{DeclaredKind, PodTemplates, PodTemplatesError, ReadError};

/// An object's `apiVersion` and `kind`, when both are strings.
#[must_use]
pub fn type_of(value: &serde_json::Value) -> Option<(&str, &str)> {
    Some((
        value.get("apiVersion")?.as_str()?,
        value.get("kind")?.as_str()?,
    ))
}

/// The kinds winadmit checks. Everything else is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Kind {
    Pod,
    PodTemplate,
    ReplicationController,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    /// `argoproj.io` Rollout.
    Rollout,
    /// `apps.kruise.io` CloneSet.
    CloneSet,
    /// `apps.kruise.io` StatefulSet (OpenKruise's Advanced StatefulSet), not `apps` StatefulSet.
    KruiseStatefulSet,
    /// `apps.kruise.io` DaemonSet (OpenKruise's Advanced DaemonSet), not `apps` DaemonSet.
    KruiseDaemonSet,
    /// `apps.kruise.io` BroadcastJob.
    BroadcastJob,
    /// `apps.kruise.io` AdvancedCronJob.
    AdvancedCronJob,
    /// `keda.sh` ScaledJob.
    ScaledJob,
    /// A kind the policy names under `podTemplates`.
    Declared,
}
/// The group of an `apiVersion` (`""` for the core group).
#[must_use]
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

impl Kind {
    /// The kind for an `apiVersion`/`kind` pair, in any API version the kind
    /// was ever served in. Custom resources that reuse a kind name in another
    /// group (`example.com/v1 Deployment`) are not workloads, unless they are
    /// in [`CUSTOM_RESOURCES`]. Kinds a policy declares are found by
    /// [`PodTemplates::kind_of`].
    #[must_use]
    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        let group = group_of(api_version);
        let core = match kind {
            "Pod" => Some(Self::Pod),
            "PodTemplate" => Some(Self::PodTemplate),
            "ReplicationController" => Some(Self::ReplicationController),
            "Deployment" => Some(Self::Deployment),
            "ReplicaSet" => Some(Self::ReplicaSet),
            "StatefulSet" => Some(Self::StatefulSet),
            "DaemonSet" => Some(Self::DaemonSet),
            "Job" => Some(Self::Job),
            "CronJob" => Some(Self::CronJob),
            _ => None,
        };
        let served = |k: &Self| match k {
            Self::Pod | Self::PodTemplate | Self::ReplicationController => group.is_empty(),
            Self::Deployment | Self::ReplicaSet | Self::DaemonSet => {
                matches!(group, "apps" | "extensions")
            }
            Self::StatefulSet => group == "apps",
            _ => group == "batch",
        };
        core.filter(served).or_else(|| {
            CUSTOM_RESOURCES
                .iter()
                .find(|r| r.group == group && r.name == kind)
                .map(|r| r.kind)
        })
    }

    /// The kind's name (a declared kind's is the object's own).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pod => "Pod",
            Self::PodTemplate => "PodTemplate",
            Self::ReplicationController => "ReplicationController",
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet | Self::KruiseStatefulSet => "StatefulSet",
            Self::DaemonSet | Self::KruiseDaemonSet => "DaemonSet",
            Self::Job => "Job",
            Self::CronJob => "CronJob",
            Self::Rollout => "Rollout",
            Self::CloneSet => "CloneSet",
            Self::BroadcastJob => "BroadcastJob",
            Self::AdvancedCronJob => "AdvancedCronJob",
            Self::ScaledJob => "ScaledJob",
            Self::Declared => "CustomResource",
        }
    }

    /// Where this kind's pod template is, and the template, in a parsed object.
    fn locate<'v, 'a>(self, obj: &'v ObjectView<'a>) -> (FieldPath, Option<&'v TemplateView<'a>>) {
        let spec = obj.spec.as_deref();
        let spec_template = || spec.and_then(|s| s.template.as_deref());
        match self {
            Self::Pod => (FieldPath::root(), None),
            Self::PodTemplate => (FieldPath::keys(&["template"]), obj.template.as_deref()),
            Self::CronJob => (
                FieldPath::keys(&["spec", "jobTemplate", "spec", "template"]),
                spec.and_then(|s| s.job_template.as_deref())
                    .and_then(|j| j.spec.as_deref())
                    .and_then(|s| s.template.as_deref()),
            ),
            Self::ScaledJob => (
                FieldPath::keys(&["spec", "jobTargetRef", "template"]),
                spec.and_then(|s| s.job_target_ref.as_deref())
                    .and_then(|j| j.template.as_deref()),
            ),
            Self::AdvancedCronJob => {
                let outer = spec_template();
                let (key, job) = match outer.and_then(|t| t.broadcast_job_template.as_deref()) {
                    Some(b) if outer.and_then(|t| t.job_template.as_deref()).is_none() => {
                        ("broadcastJobTemplate", Some(b))
                    }
                    _ => ("jobTemplate", outer.and_then(|t| t.job_template.as_deref())),
                };
                (
                    FieldPath::keys(&["spec", "template", key, "spec", "template"]),
                    job.and_then(|j| j.spec.as_deref())
                        .and_then(|s| s.template.as_deref()),
                )
            }
            Self::Declared => match obj.declared.as_deref() {
                Some(d) => (d.path.clone(), Some(&d.template)),
                None => (FieldPath::root(), None),
            },
            _ => (FieldPath::keys(&["spec", "template"]), spec_template()),
        }
    }
}

/// A workload as the engine sees it: its identity, its own metadata, the
/// metadata and spec of the pods it makes, and where that spec lives.
#[derive(Debug, Clone)]
pub struct Workload<'v, 'a> {
    pub kind: Kind,
    /// The object's own `kind` (what to show: a declared kind's name).
    pub kind_name: &'v str,
    pub api_version: &'v str,
    pub name: &'v str,
    pub namespace: Option<&'v str>,
    pub labels: Option<&'v StrMap<'a>>,
    pub annotations: Option<&'v StrMap<'a>>,
    pub pod_meta: Option<&'v MetaView<'a>>,
    /// `None` when the object has no pod spec at all (an empty template):
    /// nothing to check, but not an error either.
    pub spec: Option<&'v SpecView<'a>>,
    /// Where the pod template is (`metadata` and `spec`): the root for a Pod.
    pub template_path: FieldPath,
    pub spec_path: FieldPath,
    /// An Argo Rollout that takes its pod template from another workload
    /// (`spec.workloadRef`): that workload's kind and name.
    pub template_ref: Option<(&'v str, &'v str)>,
    /// The object has `ownerReferences`: a controller made it.
    pub owned: bool,
}

/// Whether a ReplicaSet is rollout history: one a Deployment controls and
/// has scaled to 0, kept by the Deployment (`revisionHistoryLimit`) and
/// running nothing. Its template is an old one: judged, it would keep a
/// fixed Deployment's old findings under the ReplicaSet's name, so the
/// audit and `report` leave it out. Scaled up again (a rollback), it is a
/// workload again; a ReplicaSet of no Deployment scaled to 0 is still
/// judged (someone runs it by hand). `replicas` is its `spec.replicas`,
/// `controller` the kind of its controller owner.
#[must_use]
pub fn replica_set_is_rollout_history(replicas: Option<i64>, controller: Option<&str>) -> bool {
    replicas == Some(0) && controller == Some("Deployment")
}

impl<'v, 'a> Workload<'v, 'a> {
    /// Reads the workload out of a parsed object, or `None` when the object
    /// is not a kind winadmit checks. Declared kinds are workloads once
    /// [`PodTemplates::read`] has found their template.
    #[must_use]
    pub fn from_view(obj: &'v ObjectView<'a>) -> Option<Self> {
        let api_version = obj.api_version.as_deref()?;
        let kind_name = obj.kind.as_deref()?;
        let kind = match Kind::from_type(api_version, kind_name) {
            Some(k) => k,
            None if obj.declared.is_some() => Kind::Declared,
            None => return None,
        };
        let meta = obj.metadata.as_ref();
        let (template_path, pod_meta, spec) = if kind == Kind::Pod {
            (FieldPath::root(), meta, obj.spec.as_deref())
        } else {
            let (path, t) = kind.locate(obj);
            (
                path,
                t.and_then(|t| t.metadata.as_ref()),
                t.and_then(|t| t.spec.as_ref()),
            )
        };
        let template_ref = if kind == Kind::Rollout && spec.is_none() {
            obj.spec
                .as_deref()
                .and_then(|s| s.workload_ref.as_ref())
                .map(|r| {
                    (
                        r.kind.as_deref().unwrap_or("Deployment"),
                        r.name.as_deref().unwrap_or_default(),
                    )
                })
        } else {
            None
        };
        Some(Self {
            kind,
            kind_name,
            api_version,
            name: meta
                .and_then(|m| m.name.as_deref().or(m.generate_name.as_deref()))
                .unwrap_or_default(),
            namespace: meta.and_then(|m| m.namespace.as_deref()),
            labels: meta.and_then(|m| m.labels.as_ref()),
            annotations: meta.and_then(|m| m.annotations.as_ref()),
            pod_meta,
            spec,
            spec_path: template_path.key("spec"),
            template_path,
            template_ref,
            owned: meta
                .and_then(|m| m.owner_references.as_ref())
                .is_some_and(|o| !o.is_empty()),
        })
    }

    /// Path from the object root to the metadata of the pods it creates.
    #[must_use]
    pub fn pod_metadata_path(&self) -> FieldPath {
        self.template_path.key("metadata")
    }

    /// Why there is nothing to check although the kind has a pod template:
    /// an Argo Rollout whose template is another workload's
    /// (`spec.workloadRef`). That workload is checked on its own.
    #[must_use]
    pub fn note(&self) -> Option<String> {
        let (kind, name) = self.template_ref?;
        Some(format!(
            "{} {}: no pod template to check: spec.workloadRef takes it from {kind}/{name}, which is checked on its own",
            self.kind_name, self.name
        ))
    }

    /// An annotation on the object itself or on its pod template (the pod's
    /// own annotation wins, as that is what reaches the kubelet).
    #[must_use]
    pub fn annotation(&self, key: &str) -> Option<&'v str> {
        self.pod_meta
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(key))
            .or_else(|| self.annotations.and_then(|a| a.get(key)))
    }

    /// The annotations of the pods this workload creates.
    #[must_use]
    pub fn pod_annotations(&self) -> Option<&'v StrMap<'a>> {
        self.pod_meta.and_then(|m| m.annotations.as_ref())
    }

    /// Labels of the pods this workload creates.
    #[must_use]
    pub fn pod_labels(&self) -> Option<&'v StrMap<'a>> {
        self.pod_meta.and_then(|m| m.labels.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_in_every_served_api_version() {
        assert_eq!(
            Kind::from_type("extensions/v1beta1", "Deployment"),
            Some(Kind::Deployment)
        );
        assert_eq!(
            Kind::from_type("apps/v1beta2", "DaemonSet"),
            Some(Kind::DaemonSet)
        );
        assert_eq!(
            Kind::from_type("batch/v1beta1", "CronJob"),
            Some(Kind::CronJob)
        );
        assert_eq!(
            Kind::from_type("batch/v2alpha1", "CronJob"),
            Some(Kind::CronJob)
        );
        assert_eq!(Kind::from_type("v1", "Pod"), Some(Kind::Pod));
        assert_eq!(Kind::from_type("example.com/v1", "Deployment"), None);
        assert_eq!(Kind::from_type("v1", "ConfigMap"), None);
        assert_eq!(Kind::from_type("tekton.dev/v1", "TaskRun"), None);
    }

    #[test]
    fn custom_resources_match_on_group_and_kind_in_any_version() {
        assert_eq!(
            Kind::from_type("argoproj.io/v1alpha1", "Rollout"),
            Some(Kind::Rollout)
        );
        assert_eq!(
            Kind::from_type("apps.kruise.io/v1beta1", "StatefulSet"),
            Some(Kind::KruiseStatefulSet)
        );
        assert_eq!(
            Kind::from_type("apps.kruise.io/v1alpha1", "StatefulSet"),
            Some(Kind::KruiseStatefulSet)
        );
        assert_eq!(
            Kind::from_type("apps/v1", "StatefulSet"),
            Some(Kind::StatefulSet)
        );
        assert_eq!(
            Kind::from_type("apps.kruise.io/v1alpha1", "DaemonSet"),
            Some(Kind::KruiseDaemonSet)
        );
        assert_eq!(
            Kind::from_type("apps.kruise.io/v1alpha1", "Deployment"),
            None,
            "OpenKruise has no Deployment"
        );
        assert_eq!(
            Kind::from_type("keda.sh/v1alpha1", "ScaledJob"),
            Some(Kind::ScaledJob)
        );
        assert_eq!(Kind::from_type("keda.sh/v1alpha1", "ScaledObject"), None);
        assert_eq!(Kind::from_type("example.com/v1", "Rollout"), None);
        assert_eq!(Kind::KruiseStatefulSet.as_str(), "StatefulSet");
        for r in CUSTOM_RESOURCES {
            assert_eq!(
                Kind::from_type(&format!("{}/v9", r.group), r.name),
                Some(r.kind)
            );
        }
    }

    #[test]
    fn advanced_cron_jobs_hold_a_job_or_a_broadcast_job_template() {
        let read = |template: &str| {
            let json = format!(
                r#"{{"apiVersion":"apps.kruise.io/v1alpha1","kind":"AdvancedCronJob","metadata":{{"name":"n"}},
                "spec":{{"schedule":"* * * * *","template":{template}}}}}"#
            );
            let v: ObjectView<'_> = serde_json::from_str(&json).unwrap();
            let w = Workload::from_view(&v).unwrap();
            (w.spec_path.to_string(), w.spec.and_then(|s| s.host_network))
        };
        assert_eq!(
            read(r#"{"jobTemplate":{"spec":{"template":{"spec":{"hostNetwork":true}}}}}"#),
            (
                "spec.template.jobTemplate.spec.template.spec".into(),
                Some(true)
            )
        );
        assert_eq!(
            read(r#"{"broadcastJobTemplate":{"spec":{"template":{"spec":{"hostNetwork":true}}}}}"#),
            (
                "spec.template.broadcastJobTemplate.spec.template.spec".into(),
                Some(true)
            )
        );
        assert_eq!(
            read("{}"),
            ("spec.template.jobTemplate.spec.template.spec".into(), None)
        );
    }

    #[test]
    fn a_declared_kind_needs_its_template() {
        let templates = PodTemplates::new(vec![DeclaredKind {
            group: "example.com".into(),
            kind: "Worker".into(),
            path: "spec.pod".into(),
        }])
        .unwrap();
        assert_eq!(
            templates.kind_of("example.com/v2", "Worker"),
            Some(Kind::Declared)
        );
        assert_eq!(templates.kind_of("other.com/v1", "Worker"), None);
        let ok = serde_json::json!({"apiVersion":"example.com/v1","kind":"Worker","metadata":{"name":"w"},
            "spec":{"pod":{"metadata":{"labels":{"a":"b"}},"spec":{"hostPID":true}}}});
        let view = templates.read(&ok).unwrap();
        let w = Workload::from_view(&view).unwrap();
        assert_eq!(w.kind, Kind::Declared);
        assert_eq!(w.kind_name, "Worker");
        assert_eq!(w.spec_path.to_string(), "spec.pod.spec");
        assert_eq!(w.pod_metadata_path().to_string(), "spec.pod.metadata");
        assert_eq!(w.spec.unwrap().host_pid, Some(true));
        for (bad, problem) in [
            (serde_json::json!({"pod": 3}), "is not an object"),
            (
                serde_json::json!({"pod": {"metadata": {}}}),
                "has no pod spec",
            ),
            (serde_json::json!({}), "does not exist"),
        ] {
            let obj = serde_json::json!({"apiVersion":"example.com/v1","kind":"Worker","metadata":{"name":"w"},"spec":bad});
            let e = templates.read(&obj).unwrap_err().to_string();
            assert!(e.starts_with("Worker w: spec.pod "), "{e}");
            assert!(e.contains(problem), "{e}");
        }
    }

    #[test]
    fn finds_the_pod_spec_of_each_kind() {
        let cron: ObjectView<'_> = serde_json::from_str(
            r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"n"},
            "spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"a":"b"}},"spec":{"hostPID":true}}}}}}"#,
        )
        .unwrap();
        let w = Workload::from_view(&cron).unwrap();
        assert_eq!(
            w.spec_path.to_string(),
            "spec.jobTemplate.spec.template.spec"
        );
        assert_eq!(w.spec.unwrap().host_pid, Some(true));
        assert_eq!(w.annotation("a"), Some("b"));
        assert_eq!(
            w.pod_metadata_path().to_string(),
            "spec.jobTemplate.spec.template.metadata"
        );
    }
}
