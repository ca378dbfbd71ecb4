//! WIN-CAPABILITIES: POSIX capabilities are not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-CAPABILITIES",
        title: "POSIX capabilities are not supported on Windows",
        severity: Severity::Error,
        containerd: Some(Severity::Warning),
        scope: Scope::Windows,
        what: "`securityContext.capabilities` in any container, whatever its value (`drop: [ALL]` included).",
        why: "POSIX capabilities are not implemented on Windows. `drop: [ALL]` is hardening boilerplate that Windows ignores; the API server rejects any capabilities on pods with `spec.os.name: windows`.",
        source: "Kubernetes Windows docs, 'API' > V1.Container: `v1.Container.SecurityContext.Capabilities` - POSIX capabilities are not implemented on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `capabilities`. The mutating webhook removes drop-only capabilities automatically (`mutation.removeNoOpFields`).",
        example: "securityContext:\n  capabilities:\n    drop: [ALL]",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "capabilities are not supported on Windows nodes (no POSIX capabilities)";
    let container = |c: &SecurityContextView<'_>| match &c.capabilities {
        None => Hit::No,
        Some(caps) if caps.add.as_ref().is_none_or(Vec::is_empty) => Hit::NoOp,
        Some(_) => Hit::Yes,
    };
    let fix = "remove capabilities that only drop, which has no effect on Windows";
    security_field(
        cx,
        out,
        "capabilities",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Hit>,
        Some(&container),
        fix,
    );
}
