//! WIN-SELINUX: seLinuxOptions are not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SELINUX",
        title: "seLinuxOptions are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`seLinuxOptions` in the pod or any container security context.",
        why: "Windows has no SELinux.",
        source: "Kubernetes Windows docs, 'API' > V1.PodSecurityContext/V1.Container: `seLinuxOptions` - not possible on Windows as there is no SELinux; 'Security': Linux-specific pod security context privileges such as SELinux are not supported (seeds 001, 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `seLinuxOptions` from the Windows pod spec.",
        example: "securityContext:\n  seLinuxOptions:\n    level: s0:c123,c456",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "seLinuxOptions is not supported on Windows nodes (no SELinux)";
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.se_linux_options.is_some());
    let container = |c: &SecurityContextView<'_>| Hit::from(c.se_linux_options.is_some());
    security_field(
        cx,
        out,
        "seLinuxOptions",
        message,
        Some(&pod),
        Some(&container),
        "",
    );
}
