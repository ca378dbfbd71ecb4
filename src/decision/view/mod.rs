//! A narrow, borrowed view of the fields the rules read.
//!
//! The engine never looks at a Kubernetes object through k8s-openapi types:
//! those silently drop fields their API version lacks, and a full typed parse
//! costs several times a narrow one. This view deserializes from JSON bytes
//! (the webhook) or from a `serde_json::Value` (lint, reports), borrowing
//! strings where it can. Unknown fields are ignored, so the same view reads
//! every API version of every workload kind.
//!
//! Fields whose mere presence matters (the API server rejects them on
//! `spec.os.name: windows` pods whatever their value) are `Option<Present>`;
//! an explicit JSON `null` counts as unset, as it does for the API server.
//!
//! The scalar types the views are built from (`Text`, `StrMap`, `Present`,
//! `Names`) are in `text`; the pod's containers, each with the list it
//! comes from, are listed by `containers`.

mod containers;
mod text;

pub use containers::{ContainerList, ContainerRef, containers_of};
pub use text::{Names, Present, StrMap, Text};

use serde::Deserialize;

/// The parts of any object winadmit reads: its type, its metadata, and every
/// place a pod spec can live (`spec`, `spec.template`, `spec.jobTemplate`,
/// and `template` for PodTemplate). `items` holds the members of a `List`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectView<'a> {
    #[serde(borrow)]
    pub api_version: Option<Text<'a>>,
    #[serde(borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow)]
    pub metadata: Option<MetaView<'a>>,
    #[serde(borrow)]
    pub spec: Option<Box<SpecView<'a>>>,
    #[serde(borrow)]
    pub template: Option<Box<TemplateView<'a>>>,
    /// The pod template at a path the policy declares (`podTemplates`), for
    /// kinds the view has no field for; filled in by
    /// [`crate::decision::workload::PodTemplates::read`], never by deserializing.
    #[serde(skip)]
    pub declared: Option<Box<DeclaredTemplate<'a>>>,
}

/// A pod template found at a declared path.
#[derive(Debug, Clone)]
pub struct DeclaredTemplate<'a> {
    /// Where the template is, from the object root (`spec.podTemplate`).
    pub path: crate::decision::path::FieldPath,
    pub template: TemplateView<'a>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetaView<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub generate_name: Option<Text<'a>>,
    #[serde(borrow)]
    pub namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub labels: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub annotations: Option<StrMap<'a>>,
    /// Only how many there are: an owned object was made by a controller.
    pub owner_references: Option<Vec<serde::de::IgnoredAny>>,
}

/// A pod template: `metadata` plus a pod `spec`.
///
/// An OpenKruise AdvancedCronJob's `spec.template` is not a pod template
/// but holds one of two job templates (`jobTemplate`, `broadcastJobTemplate`);
/// they are read here too, so the parse stays single-pass.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplateView<'a> {
    #[serde(borrow)]
    pub metadata: Option<MetaView<'a>>,
    #[serde(borrow)]
    pub spec: Option<SpecView<'a>>,
    #[serde(borrow)]
    pub job_template: Option<Box<JobTemplateView<'a>>>,
    #[serde(borrow)]
    pub broadcast_job_template: Option<Box<JobTemplateView<'a>>>,
}

/// `spec.jobTemplate` of a CronJob: `metadata` and a Job spec.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobTemplateView<'a> {
    #[serde(borrow)]
    pub spec: Option<Box<SpecView<'a>>>,
}

/// A pod spec, plus the fields by which workload specs nest a pod
/// template (`template`, `jobTemplate`, KEDA ScaledJob's `jobTargetRef`, a
/// Job spec). One struct for all keeps the parse single-pass whatever the
/// kind; the kind decides which part is read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SpecView<'a> {
    #[serde(borrow)]
    pub template: Option<Box<TemplateView<'a>>>,
    #[serde(borrow)]
    pub job_template: Option<Box<JobTemplateView<'a>>>,
    #[serde(borrow)]
    pub job_target_ref: Option<Box<SpecView<'a>>>,
    /// Argo Rollouts' `spec.workloadRef`: the pod template lives in another
    /// object.
    #[serde(borrow)]
    pub workload_ref: Option<WorkloadRefView<'a>>,

    /// `spec.nodeName`: the pod is bound to this node, past the scheduler.
    #[serde(borrow)]
    pub node_name: Option<Text<'a>>,
    #[serde(borrow)]
    pub node_selector: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub os: Option<PodOsView<'a>>,
    #[serde(borrow)]
    pub affinity: Option<AffinityView<'a>>,
    #[serde(borrow)]
    pub tolerations: Option<Vec<TolerationView<'a>>>,
    #[serde(borrow)]
    pub runtime_class_name: Option<Text<'a>>,
    pub host_network: Option<bool>,
    #[serde(rename = "hostPID")]
    pub host_pid: Option<bool>,
    #[serde(rename = "hostIPC")]
    pub host_ipc: Option<bool>,
    pub share_process_namespace: Option<bool>,
    pub host_users: Option<bool>,
    #[serde(borrow)]
    pub dns_policy: Option<Text<'a>>,
    #[serde(borrow)]
    pub dns_config: Option<DnsConfigView<'a>>,
    #[serde(borrow)]
    pub resources: Option<ResourcesView<'a>>,
    #[serde(borrow)]
    pub security_context: Option<PodSecurityContextView<'a>>,
    #[serde(borrow)]
    pub containers: Option<Vec<ContainerView<'a>>>,
    #[serde(borrow)]
    pub init_containers: Option<Vec<ContainerView<'a>>>,
    #[serde(borrow)]
    pub ephemeral_containers: Option<Vec<ContainerView<'a>>>,
    #[serde(borrow)]
    pub volumes: Option<Vec<VolumeView<'a>>>,
    /// The pod's service account (the gMSA rules ask what it may use).
    #[serde(borrow)]
    pub service_account_name: Option<Text<'a>>,
    /// The deprecated alias of `serviceAccountName`.
    #[serde(borrow)]
    pub service_account: Option<Text<'a>>,
    /// The Secrets the pod's images are pulled with (`--registry-pull-secrets`).
    #[serde(borrow)]
    pub image_pull_secrets: Option<Names<'a>>,
}

/// Argo Rollouts' `spec.workloadRef` (an `ObjectRef`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadRefView<'a> {
    #[serde(borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodOsView<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AffinityView<'a> {
    #[serde(borrow)]
    pub node_affinity: Option<NodeAffinityView<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeAffinityView<'a> {
    #[serde(borrow)]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelectorView<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorView<'a> {
    #[serde(borrow)]
    pub node_selector_terms: Option<Vec<NodeSelectorTermView<'a>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorTermView<'a> {
    #[serde(borrow)]
    pub match_expressions: Option<Vec<RequirementView<'a>>>,
    /// Requirements on the node's fields: only `metadata.name` exists.
    #[serde(borrow)]
    pub match_fields: Option<Vec<RequirementView<'a>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequirementView<'a> {
    #[serde(borrow)]
    pub key: Option<Text<'a>>,
    #[serde(borrow)]
    pub operator: Option<Text<'a>>,
    #[serde(borrow)]
    pub values: Option<Vec<Text<'a>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TolerationView<'a> {
    #[serde(borrow)]
    pub key: Option<Text<'a>>,
    #[serde(borrow)]
    pub operator: Option<Text<'a>>,
    #[serde(borrow)]
    pub value: Option<Text<'a>>,
    #[serde(borrow)]
    pub effect: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DnsConfigView<'a> {
    #[serde(borrow)]
    pub searches: Option<Vec<Text<'a>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSecurityContextView<'a> {
    pub run_as_user: Option<Present>,
    pub run_as_group: Option<Present>,
    pub run_as_non_root: Option<bool>,
    pub supplemental_groups: Option<Present>,
    pub supplemental_groups_policy: Option<Present>,
    pub sysctls: Option<Present>,
    pub fs_group: Option<Present>,
    pub fs_group_change_policy: Option<Present>,
    #[serde(rename = "seLinuxOptions")]
    pub se_linux_options: Option<Present>,
    #[serde(rename = "seLinuxChangePolicy", borrow)]
    pub se_linux_change_policy: Option<Text<'a>>,
    #[serde(borrow)]
    pub seccomp_profile: Option<SeccompView<'a>>,
    pub app_armor_profile: Option<Present>,
    #[serde(borrow)]
    pub windows_options: Option<WindowsOptionsView<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityContextView<'a> {
    pub privileged: Option<bool>,
    pub allow_privilege_escalation: Option<bool>,
    #[serde(borrow)]
    pub capabilities: Option<CapabilitiesView<'a>>,
    /// `Default` is what the API server fills in; only other values count.
    #[serde(borrow)]
    pub proc_mount: Option<Text<'a>>,
    pub read_only_root_filesystem: Option<bool>,
    pub run_as_user: Option<Present>,
    pub run_as_group: Option<Present>,
    pub run_as_non_root: Option<bool>,
    #[serde(rename = "seLinuxOptions")]
    pub se_linux_options: Option<Present>,
    #[serde(borrow)]
    pub seccomp_profile: Option<SeccompView<'a>>,
    pub app_armor_profile: Option<Present>,
    #[serde(borrow)]
    pub windows_options: Option<WindowsOptionsView<'a>>,
}

impl<'a> SpecView<'a> {
    /// The terms of the required node affinity, when it has any (an empty
    /// list is refused by the API server; read as no constraint).
    #[must_use]
    pub fn required_node_terms(&self) -> Option<&[NodeSelectorTermView<'a>]> {
        self.affinity
            .as_ref()?
            .node_affinity
            .as_ref()?
            .required_during_scheduling_ignored_during_execution
            .as_ref()?
            .node_selector_terms
            .as_deref()
            .filter(|t| !t.is_empty())
    }
}

impl SecurityContextView<'_> {
    /// A `procMount` other than the API server's default.
    #[must_use]
    pub fn custom_proc_mount(&self) -> Option<&str> {
        self.proc_mount.as_deref().filter(|p| *p != "Default")
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CapabilitiesView<'a> {
    #[serde(borrow)]
    pub add: Option<Vec<Text<'a>>>,
    #[serde(borrow)]
    pub drop: Option<Vec<Text<'a>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SeccompView<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WindowsOptionsView<'a> {
    pub host_process: Option<bool>,
    #[serde(borrow)]
    pub run_as_user_name: Option<Text<'a>>,
    #[serde(borrow)]
    pub gmsa_credential_spec_name: Option<Text<'a>>,
    #[serde(borrow)]
    pub gmsa_credential_spec: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerView<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub image: Option<Text<'a>>,
    #[serde(borrow)]
    pub security_context: Option<SecurityContextView<'a>>,
    #[serde(borrow)]
    pub volume_mounts: Option<Vec<VolumeMountView<'a>>>,
    pub volume_devices: Option<Present>,
    #[serde(borrow)]
    pub resources: Option<ResourcesView<'a>>,
    #[serde(borrow)]
    pub termination_message_path: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeMountView<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub mount_path: Option<Text<'a>>,
    #[serde(borrow)]
    pub sub_path: Option<Text<'a>>,
    #[serde(borrow)]
    pub sub_path_expr: Option<Text<'a>>,
    #[serde(borrow)]
    pub mount_propagation: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourcesView<'a> {
    #[serde(borrow)]
    pub limits: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub requests: Option<StrMap<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeView<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub empty_dir: Option<EmptyDirView<'a>>,
    pub nfs: Option<Present>,
    #[serde(borrow)]
    pub host_path: Option<HostPathView<'a>>,
    pub secret: Option<ModeView>,
    pub config_map: Option<ModeView>,
    pub projected: Option<ModeView>,
    pub downward_api: Option<ModeView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EmptyDirView<'a> {
    #[serde(borrow)]
    pub medium: Option<Text<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostPathView<'a> {
    #[serde(borrow)]
    pub path: Option<Text<'a>>,
    /// `type`: `Socket`, `CharDevice`, `BlockDevice`, `Directory`, ...
    #[serde(rename = "type", borrow)]
    pub kind: Option<Text<'a>>,
}

/// Volume sources with file modes (`secret`, `configMap`, `projected`, `downwardAPI`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModeView {
    pub default_mode: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn borrows_from_json_and_reads_nested_templates() {
        let json = br#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},
            "spec":{"jobTemplate":{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"windows"},
            "containers":[{"name":"a","securityContext":{"privileged":true,"runAsUser":null}}]}}}}}}"#;
        let obj: ObjectView<'_> = serde_json::from_slice(json).unwrap();
        assert!(
            matches!(obj.kind, Some(Text(Cow::Borrowed("CronJob")))),
            "strings are borrowed"
        );
        let pod = obj
            .spec
            .unwrap()
            .job_template
            .unwrap()
            .spec
            .unwrap()
            .template
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(
            pod.node_selector.unwrap().get("kubernetes.io/os"),
            Some("windows")
        );
        let sc = pod.containers.unwrap().remove(0).security_context.unwrap();
        assert_eq!(sc.privileged, Some(true));
        assert_eq!(sc.run_as_user, None, "explicit null means unset");
    }

    #[test]
    fn string_maps_keep_non_string_scalars_as_text() {
        let v = serde_json::json!({"vm": 0, "on": true});
        let m = StrMap::deserialize(&v).unwrap();
        assert_eq!(m.get("vm"), Some("0"));
        assert_eq!(m.get("on"), Some("true"));
    }
}
