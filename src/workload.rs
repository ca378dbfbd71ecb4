//! Which objects carry a pod spec, and where.
//!
//! Every workload kind is reduced to one pod-spec view plus the field path
//! of that spec from the object root, so rules are written once against a
//! pod spec and report paths the user can find in their own manifest.

use crate::path::FieldPath;
use crate::view::{MetaView, ObjectView, SpecView, StrMap};

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
}

impl Kind {
    /// The kind for an `apiVersion`/`kind` pair, in any API version the kind
    /// was ever served in. Custom resources that reuse a kind name in another
    /// group (`example.com/v1 Deployment`) are not workloads.
    #[must_use]
    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let k = match kind {
            "Pod" => Self::Pod,
            "PodTemplate" => Self::PodTemplate,
            "ReplicationController" => Self::ReplicationController,
            "Deployment" => Self::Deployment,
            "ReplicaSet" => Self::ReplicaSet,
            "StatefulSet" => Self::StatefulSet,
            "DaemonSet" => Self::DaemonSet,
            "Job" => Self::Job,
            "CronJob" => Self::CronJob,
            _ => return None,
        };
        let served = match k {
            Self::Pod | Self::PodTemplate | Self::ReplicationController => group.is_empty(),
            Self::Deployment | Self::ReplicaSet | Self::DaemonSet => {
                matches!(group, "apps" | "extensions")
            }
            Self::StatefulSet => group == "apps",
            Self::Job | Self::CronJob => group == "batch",
        };
        served.then_some(k)
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pod => "Pod",
            Self::PodTemplate => "PodTemplate",
            Self::ReplicationController => "ReplicationController",
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
            Self::Job => "Job",
            Self::CronJob => "CronJob",
        }
    }

    /// Path from the object root to its pod spec.
    #[must_use]
    pub fn spec_path(self) -> &'static [&'static str] {
        match self {
            Self::Pod => &["spec"],
            Self::PodTemplate => &["template", "spec"],
            Self::CronJob => &["spec", "jobTemplate", "spec", "template", "spec"],
            _ => &["spec", "template", "spec"],
        }
    }

    /// Path from the object root to the metadata of the pods it creates.
    #[must_use]
    pub fn pod_metadata_path(self) -> &'static [&'static str] {
        match self {
            Self::Pod => &["metadata"],
            Self::PodTemplate => &["template", "metadata"],
            Self::CronJob => &["spec", "jobTemplate", "spec", "template", "metadata"],
            _ => &["spec", "template", "metadata"],
        }
    }
}

/// A workload as the engine sees it: its identity, its own metadata, the
/// metadata and spec of the pods it makes, and where that spec lives.
#[derive(Debug)]
pub struct Workload<'v, 'a> {
    pub kind: Kind,
    pub api_version: &'v str,
    pub name: &'v str,
    pub namespace: Option<&'v str>,
    pub labels: Option<&'v StrMap<'a>>,
    pub annotations: Option<&'v StrMap<'a>>,
    pub pod_meta: Option<&'v MetaView<'a>>,
    /// `None` when the object has no pod spec at all (an empty template):
    /// nothing to check, but not an error either.
    pub spec: Option<&'v SpecView<'a>>,
    pub spec_path: FieldPath,
}

impl<'v, 'a> Workload<'v, 'a> {
    /// Reads the workload out of a parsed object, or `None` when the object
    /// is not a kind winadmit checks.
    #[must_use]
    pub fn from_view(obj: &'v ObjectView<'a>) -> Option<Self> {
        let kind = Kind::from_type(obj.api_version.as_deref()?, obj.kind.as_deref()?)?;
        let meta = obj.metadata.as_ref();
        let (pod_meta, spec) = match kind {
            Kind::Pod => (meta, obj.spec.as_deref()),
            Kind::PodTemplate => {
                let t = obj.template.as_deref();
                (
                    t.and_then(|t| t.metadata.as_ref()),
                    t.and_then(|t| t.spec.as_ref()),
                )
            }
            Kind::CronJob => {
                let t = obj
                    .spec
                    .as_deref()
                    .and_then(|s| s.job_template.as_deref())
                    .and_then(|j| j.spec.as_deref())
                    .and_then(|s| s.template.as_deref());
                (
                    t.and_then(|t| t.metadata.as_ref()),
                    t.and_then(|t| t.spec.as_ref()),
                )
            }
            _ => {
                let t = obj.spec.as_deref().and_then(|s| s.template.as_deref());
                (
                    t.and_then(|t| t.metadata.as_ref()),
                    t.and_then(|t| t.spec.as_ref()),
                )
            }
        };
        Some(Self {
            kind,
            api_version: obj.api_version.as_deref().unwrap_or_default(),
            name: meta
                .and_then(|m| m.name.as_deref().or(m.generate_name.as_deref()))
                .unwrap_or_default(),
            namespace: meta.and_then(|m| m.namespace.as_deref()),
            labels: meta.and_then(|m| m.labels.as_ref()),
            annotations: meta.and_then(|m| m.annotations.as_ref()),
            pod_meta,
            spec,
            spec_path: FieldPath::keys(kind.spec_path()),
        })
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
        assert_eq!(Kind::CronJob.pod_metadata_path().last(), Some(&"metadata"));
    }
}
