//! WIN-SECCOMP: seccompProfile is not supported on Windows.

use super::{Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, security_field};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc, pod_sc};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SECCOMP",
        title: "seccompProfile Unconfined is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`seccompProfile` of a type other than `RuntimeDefault` or `Localhost` (that is, `Unconfined`) in the pod or any container security context.",
        why: "Seccomp is a Linux kernel facility; Windows has none. `RuntimeDefault` is common hardening boilerplate that Windows ignores, and the API server rejects any seccompProfile on pods with `spec.os.name: windows`.",
        source: "Ignored by the Windows kubelet and runtime (no seccomp; containerd internal/cri/server/container_create.go builds only the Windows config). RuntimeDefault and Localhost are required by Pod Security Admission restricted for pods without spec.os (kubernetes/pod-security-admission policy/check_seccompProfile_restricted.go), so only Unconfined is reported. Kubernetes documentation 'Windows containers in Kubernetes' > Security, 'Pod Security Standards'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `seccompProfile`. The mutating webhook removes `type: RuntimeDefault` automatically (`mutation.removeNoOpFields`).",
        example: "securityContext:\n  seccompProfile:\n    type: RuntimeDefault",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "seccompProfile Unconfined is ignored on Windows nodes (no seccomp)";
    let hit = |s: Option<&crate::decision::view::SeccompView<'_>>| match s {
        None => Reported::No,
        // Required by Pod Security Admission restricted for pods without
        // spec.os; ignored by Windows. WIN-OS-FIELDS covers spec.os set.
        Some(s) if matches!(s.kind.as_deref(), Some("RuntimeDefault" | "Localhost")) => {
            Reported::No
        }
        Some(_) => Reported::Removable,
    };
    let pod = |p: &PodSecurityContextView<'_>| hit(p.seccomp_profile.as_ref());
    let container = |c: &SecurityContextView<'_>| hit(c.seccomp_profile.as_ref());
    let fix = "remove a seccompProfile Windows ignores";
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

/// WIN-SECCOMP as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    let not_default = |base: &str| {
        format!(
            "!(has({base}.seccompProfile.type) && {base}.seccompProfile.type in ['RuntimeDefault', 'Localhost'])"
        )
    };
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Pod,
                format!(
                    "{} && {}",
                    pod_sc("seccompProfile"),
                    not_default("variables.spec.securityContext")
                ),
                &["securityContext", "seccompProfile"],
            )
            .removable(true),
            Probe::new(
                ProbeScope::Container,
                format!(
                    "{} && {}",
                    c_sc("seccompProfile"),
                    not_default("c.securityContext")
                ),
                &["securityContext", "seccompProfile"],
            )
            .removable(true),
        ],
        "seccompProfile Unconfined is ignored on Windows nodes (no seccomp)",
    )
}
