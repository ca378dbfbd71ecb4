//! WIN-RUNASUSER and WIN-RUNASGROUP: Windows has no numeric UIDs or GIDs.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope, removable_if, security_field};
use crate::decision::rules::cel::{Export, ExportContext, container_field, pod_field};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RUN_AS_USER: Rule = Rule {
    info: RuleInfo {
        id: "WIN-RUNASUSER",
        title: "runAsUser is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`runAsUser` in the pod or any container security context.",
        why: "Windows identifies users by SIDs in a SAM database that is not shared between host and container; there is no integer UID to run as.",
        source: "Ignored by the Windows kubelet and runtime: Windows has no numeric user ids; only windowsOptions.runAsUserName is used (pkg/kubelet/kuberuntime/kuberuntime_container_windows.go). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext and 'Configure RunAsUserName for Windows pods and containers'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `runAsUser` and set `securityContext.windowsOptions.runAsUserName` (e.g. `ContainerUser`).",
        example: "securityContext:\n  runAsUser: 1000",
        since: None,
        until: None,
    },
    check: check_user,
    export: export_run_as_user,
};

pub static RUN_AS_GROUP: Rule = Rule {
    info: RuleInfo {
        id: "WIN-RUNASGROUP",
        title: "runAsGroup is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`runAsGroup` in the pod or any container security context.",
        why: "Windows has no GIDs: group membership comes from the SID-based user identity.",
        source: "Ignored by the Windows kubelet and runtime (no numeric group ids; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `runAsGroup`; grant access through the Windows user set in `windowsOptions.runAsUserName`.",
        example: "securityContext:\n  runAsGroup: 3000",
        since: None,
        until: None,
    },
    check: check_group,
    export: export_run_as_group,
};

fn check_user(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "runAsUser is ignored on Windows nodes (no numeric user ids); use windowsOptions.runAsUserName";
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.run_as_user.is_some());
    let container = |c: &SecurityContextView<'_>| removable_if(c.run_as_user.is_some());
    security_field(
        cx,
        out,
        "runAsUser",
        message,
        Some(&pod),
        Some(&container),
        "remove a setting Windows ignores",
    );
}

fn check_group(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "runAsGroup is ignored on Windows nodes (no numeric group ids); use windowsOptions.runAsUserName";
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.run_as_group.is_some());
    let container = |c: &SecurityContextView<'_>| removable_if(c.run_as_group.is_some());
    security_field(
        cx,
        out,
        "runAsGroup",
        message,
        Some(&pod),
        Some(&container),
        "remove a setting Windows ignores",
    );
}

/// WIN-RUNASUSER as CEL, for `winadmit admission-policy`.
fn export_run_as_user(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            pod_field("runAsUser", &["securityContext", "runAsUser"]).removable(true),
            container_field("runAsUser", &["securityContext", "runAsUser"]).removable(true),
        ],
        "runAsUser is ignored on Windows nodes (no numeric user ids); use windowsOptions.runAsUserName",
    )
}

/// WIN-RUNASGROUP as CEL, for `winadmit admission-policy`.
fn export_run_as_group(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            pod_field("runAsGroup", &["securityContext", "runAsGroup"]).removable(true),
            container_field("runAsGroup", &["securityContext", "runAsGroup"]).removable(true),
        ],
        "runAsGroup is ignored on Windows nodes (no numeric group ids); use windowsOptions.runAsUserName",
    )
}
