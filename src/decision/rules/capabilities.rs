//! WIN-CAPABILITIES: POSIX capabilities are not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-CAPABILITIES",
        title: "added POSIX capabilities are not granted on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`securityContext.capabilities.add` (non-empty) in any container. A drop-only list is not reported: Pod Security Admission restricted requires `drop: [ALL]` of pods without `spec.os`.",
        why: "POSIX capabilities are not implemented on Windows. `drop: [ALL]` is hardening boilerplate that Windows ignores; the API server rejects any capabilities on pods with `spec.os.name: windows`.",
        source: "Ignored by the Windows kubelet and runtime (no POSIX capabilities; containerd internal/cri/server/container_create.go). A drop-only list is required by Pod Security Admission restricted for pods without spec.os (policy/check_capabilities_restricted.go), so only `add` is reported. Kubernetes documentation 'Windows containers in Kubernetes' > Security.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `capabilities.add`; for node-level work use a HostProcess container. The mutating webhook removes it (`mutation.removeNoOpFields`), except with `--strict`.",
        example: "securityContext:\n  capabilities:\n    add: [NET_ADMIN]",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        let adds = c
            .security_context()
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref())
            .is_some_and(|add| !add.is_empty());
        if adds {
            out.report_maybe_removable(
                !cx.cluster.is_strict(),
                cx.container_field(&c, &["securityContext", "capabilities", "add"]),
                "capabilities.add is ignored on Windows nodes: the capability is not granted",
                "remove capabilities.add, which Windows ignores",
            );
        }
    }
}

/// WIN-CAPABILITIES as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    let strict = cx.cluster.is_strict();
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Container,
                format!(
                    "{} && has(c.securityContext.capabilities.add) && size(c.securityContext.capabilities.add) > 0",
                    c_sc("capabilities")
                ),
                &["securityContext", "capabilities", "add"],
            )
            .removable(!strict),
        ],
        "capabilities.add is ignored on Windows nodes: the capability is not granted",
    )
}
