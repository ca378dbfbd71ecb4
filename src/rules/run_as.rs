//! WIN-RUNASUSER and WIN-RUNASGROUP: Windows has no numeric UIDs or GIDs.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RUN_AS_USER: Rule = Rule {
    info: RuleInfo {
        id: "WIN-RUNASUSER",
        title: "runAsUser is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`runAsUser` in the pod or any container security context.",
        why: "Windows identifies users by SIDs in a SAM database that is not shared between host and container; there is no integer UID to run as.",
        source: "Kubernetes Windows docs, 'API' > V1.PodSecurityContext/V1.Container: `runAsUser` - provides a UID, not supported on Windows; 'Security': RunAsUser is not currently supported on Windows (seeds 001, 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `runAsUser` and set `securityContext.windowsOptions.runAsUserName` (e.g. `ContainerUser`).",
        example: "securityContext:\n  runAsUser: 1000",
        since: None,
        until: None,
    },
    check: check_user,
};

pub static RUN_AS_GROUP: Rule = Rule {
    info: RuleInfo {
        id: "WIN-RUNASGROUP",
        title: "runAsGroup is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`runAsGroup` in the pod or any container security context.",
        why: "Windows has no GIDs: group membership comes from the SID-based user identity.",
        source: "Kubernetes Windows docs, 'API' > V1.PodSecurityContext/V1.Container: `runAsGroup` - provides a GID, not supported on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `runAsGroup`; grant access through the Windows user set in `windowsOptions.runAsUserName`.",
        example: "securityContext:\n  runAsGroup: 3000",
        since: None,
        until: None,
    },
    check: check_group,
};

fn check_user(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "runAsUser is not supported on Windows nodes (no numeric user ids); use windowsOptions.runAsUserName";
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.run_as_user.is_some());
    let container = |c: &SecurityContextView<'_>| Hit::from(c.run_as_user.is_some());
    security_field(
        cx,
        out,
        "runAsUser",
        message,
        Some(&pod),
        Some(&container),
        "",
    );
}

fn check_group(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "runAsGroup is not supported on Windows nodes (no numeric group ids); use windowsOptions.runAsUserName";
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.run_as_group.is_some());
    let container = |c: &SecurityContextView<'_>| Hit::from(c.run_as_group.is_some());
    security_field(
        cx,
        out,
        "runAsGroup",
        message,
        Some(&pod),
        Some(&container),
        "",
    );
}
