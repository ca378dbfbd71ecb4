//! WIN-PRIV-ESCALATION: allowPrivilegeEscalation is not supported on Windows.

use super::{Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, security_field};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-PRIV-ESCALATION",
        title: "allowPrivilegeEscalation: true is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`allowPrivilegeEscalation: true` in any container.",
        why: "Privilege escalation (setuid, file capabilities) is a Linux mechanism; none of the capabilities it governs exist on Windows.",
        source: "Ignored on Windows (no setuid/no_new_privs; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go). `false` is required by Pod Security Admission restricted for pods without spec.os (policy/check_allowPrivilegeEscalation.go), so only `true` is reported. Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Container securityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `allowPrivilegeEscalation`.",
        example: "securityContext:\n  allowPrivilegeEscalation: true",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "allowPrivilegeEscalation: true is not supported on Windows nodes";
    let container = |c: &SecurityContextView<'_>| {
        super::removable_if(c.allow_privilege_escalation == Some(true))
    };
    security_field(
        cx,
        out,
        "allowPrivilegeEscalation",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Reported>,
        Some(&container),
        "remove allowPrivilegeEscalation: true, which Windows ignores",
    );
}

/// WIN-PRIV-ESCALATION as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Container,
                format!(
                    "{} && c.securityContext.allowPrivilegeEscalation == true",
                    c_sc("allowPrivilegeEscalation")
                ),
                &["securityContext", "allowPrivilegeEscalation"],
            )
            .removable(true),
        ],
        "allowPrivilegeEscalation: true is not supported on Windows nodes",
    )
}
