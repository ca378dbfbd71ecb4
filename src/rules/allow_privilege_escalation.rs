//! WIN-PRIV-ESCALATION: allowPrivilegeEscalation is not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-PRIV-ESCALATION",
        title: "allowPrivilegeEscalation is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`allowPrivilegeEscalation: true` in any container.",
        why: "Privilege escalation (setuid, file capabilities) is a Linux mechanism; none of the capabilities it governs exist on Windows.",
        source: "Kubernetes Windows docs, 'API' > V1.Container: `v1.Container.SecurityContext.allowPrivilegeEscalation` - not possible on Windows; none of the capabilities are hooked up (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `allowPrivilegeEscalation`.",
        example: "securityContext:\n  allowPrivilegeEscalation: true",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "allowPrivilegeEscalation: true is not supported on Windows nodes";
    let container =
        |c: &SecurityContextView<'_>| Hit::from(c.allow_privilege_escalation == Some(true));
    security_field(
        cx,
        out,
        "allowPrivilegeEscalation",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Hit>,
        Some(&container),
        "",
    );
}
