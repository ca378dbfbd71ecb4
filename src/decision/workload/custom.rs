//! The custom resources winadmit knows the pod template of without being
//! told (Argo Rollouts, OpenKruise, KEDA), each with the upstream source of
//! its template path.

use super::Kind;

/// A custom resource winadmit knows the pod template of without being told.
#[derive(Debug, Clone, Copy)]
pub struct CustomResource {
    pub kind: Kind,
    pub group: &'static str,
    /// The kind's name (`StatefulSet` for [`Kind::KruiseStatefulSet`]).
    pub name: &'static str,
    /// The REST resource (`rollouts`), for webhook rules and list calls.
    pub plural: &'static str,
    /// Where the pod template is, from the object root, in Kubernetes
    /// notation; alternatives are separated by ` or `.
    pub template: &'static str,
    /// Where that path was checked: the project's own API types.
    pub source: &'static str,
}

/// The built-in table of custom resources with a pod template (owners
/// before what they own: AdvancedCronJob makes BroadcastJobs), matched on
/// group and kind in every version the group serves (their controllers
/// convert between versions, and the template keeps its place in all of them).
///
/// Each path was checked against the project's API types (the Go structs
/// their CRDs are generated from):
/// - Argo Rollouts `RolloutSpec.Template corev1.PodTemplateSpec json:"template"`
///   and `WorkloadRef *ObjectRef json:"workloadRef"` (a Rollout that points at a
///   Deployment has no template of its own).
/// - OpenKruise CloneSet, Advanced StatefulSet, Advanced DaemonSet and
///   BroadcastJob each have `Template corev1.PodTemplateSpec json:"template"`
///   in their spec (read in `apis/apps/v1alpha1/{cloneset,daemonset,broadcastjob}_types.go`
///   and `apis/apps/v1beta1/statefulset_types.go`; the group's other versions
///   convert to and from these). AdvancedCronJob's
///   `Template CronJobTemplate json:"template"` holds either `jobTemplate`
///   (a `batch` `JobTemplateSpec`) or `broadcastJobTemplate` (a
///   `BroadcastJobTemplateSpec`, whose `spec` is a BroadcastJob spec), so its
///   pod template is `spec.template.jobTemplate.spec.template` or
///   `spec.template.broadcastJobTemplate.spec.template` (the same in
///   `apis/apps/v1alpha1` and `apis/apps/v1beta1`; see also
///   <https://openkruise.io/docs/user-manuals/advancedcronjob>).
/// - KEDA `ScaledJobSpec.JobTargetRef *batchv1.JobSpec json:"jobTargetRef"`,
///   so its pod template is the Job spec's `template`.
pub const CUSTOM_RESOURCES: [CustomResource; 7] = [
    CustomResource {
        kind: Kind::Rollout,
        group: "argoproj.io",
        name: "Rollout",
        plural: "rollouts",
        template: "spec.template",
        source: "https://github.com/argoproj/argo-rollouts/blob/master/pkg/apis/rollouts/v1alpha1/types.go",
    },
    CustomResource {
        kind: Kind::CloneSet,
        group: KRUISE,
        name: "CloneSet",
        plural: "clonesets",
        template: "spec.template",
        source: "https://github.com/openkruise/kruise/blob/master/apis/apps/v1alpha1/cloneset_types.go",
    },
    CustomResource {
        kind: Kind::KruiseStatefulSet,
        group: KRUISE,
        name: "StatefulSet",
        plural: "statefulsets",
        template: "spec.template",
        source: "https://github.com/openkruise/kruise/blob/master/apis/apps/v1beta1/statefulset_types.go",
    },
    CustomResource {
        kind: Kind::KruiseDaemonSet,
        group: KRUISE,
        name: "DaemonSet",
        plural: "daemonsets",
        template: "spec.template",
        source: "https://github.com/openkruise/kruise/blob/master/apis/apps/v1alpha1/daemonset_types.go",
    },
    CustomResource {
        kind: Kind::AdvancedCronJob,
        group: KRUISE,
        name: "AdvancedCronJob",
        plural: "advancedcronjobs",
        template: "spec.template.jobTemplate.spec.template or spec.template.broadcastJobTemplate.spec.template",
        source: "https://github.com/openkruise/kruise/blob/master/apis/apps/v1alpha1/advancedcronjob_types.go",
    },
    CustomResource {
        kind: Kind::BroadcastJob,
        group: KRUISE,
        name: "BroadcastJob",
        plural: "broadcastjobs",
        template: "spec.template",
        source: "https://github.com/openkruise/kruise/blob/master/apis/apps/v1alpha1/broadcastjob_types.go",
    },
    CustomResource {
        kind: Kind::ScaledJob,
        group: "keda.sh",
        name: "ScaledJob",
        plural: "scaledjobs",
        template: "spec.jobTargetRef.template",
        source: "https://github.com/kedacore/keda/blob/main/apis/keda/v1alpha1/scaledjob_types.go",
    },
];

const KRUISE: &str = "apps.kruise.io";
