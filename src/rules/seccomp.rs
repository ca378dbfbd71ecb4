//! WIN-SECCOMP: seccompProfile is not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SECCOMP",
        title: "seccompProfile is not supported on Windows",
        severity: Severity::Error,
        containerd: Some(Severity::Warning),
        scope: Scope::Windows,
        what: "`seccompProfile` in the pod or any container security context.",
        why: "Seccomp is a Linux kernel facility; Windows has none. `RuntimeDefault` is common hardening boilerplate that Windows ignores, and the API server rejects any seccompProfile on pods with `spec.os.name: windows`.",
        source: "Kubernetes Windows docs, 'Security': Linux-specific pod security context privileges such as SELinux, AppArmor, Seccomp, or capabilities (POSIX capabilities) are not supported (seeds 001, 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `seccompProfile`. The mutating webhook removes `type: RuntimeDefault` automatically (`mutation.removeNoOpFields`).",
        example: "securityContext:\n  seccompProfile:\n    type: RuntimeDefault",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "seccompProfile is not supported on Windows nodes (no seccomp)";
    let hit = |s: Option<&crate::view::SeccompView<'_>>| match s {
        None => Hit::No,
        Some(s) if s.kind.as_deref() == Some("RuntimeDefault") => Hit::NoOp,
        Some(_) => Hit::Yes,
    };
    let pod = |p: &PodSecurityContextView<'_>| hit(p.seccomp_profile.as_ref());
    let container = |c: &SecurityContextView<'_>| hit(c.seccomp_profile.as_ref());
    let fix = "remove seccompProfile RuntimeDefault, which has no effect on Windows";
    security_field(
        cx,
        out,
        "seccompProfile",
        message,
        Some(&pod),
        Some(&container),
        fix,
    );
}
