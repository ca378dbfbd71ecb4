//! WIN-PROCMOUNT: procMount is not supported on Windows.

use super::{Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, security_field};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-PROCMOUNT",
        title: "procMount Unmasked is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`securityContext.procMount` in any container, other than the API server default `Default`.",
        why: "Windows has no /proc filesystem.",
        source: "Ignored on Windows (no /proc; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); any value is forbidden with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Container securityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `procMount`.",
        example: "securityContext:\n  procMount: Unmasked",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "procMount Unmasked is ignored on Windows nodes (no /proc filesystem)";
    let container =
        |c: &SecurityContextView<'_>| super::removable_if(c.custom_proc_mount().is_some());
    security_field(
        cx,
        out,
        "procMount",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Reported>,
        Some(&container),
        "remove procMount, which Windows ignores",
    );
}

/// WIN-PROCMOUNT as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Container,
                format!(
                    "{} && c.securityContext.procMount != 'Default'",
                    c_sc("procMount")
                ),
                &["securityContext", "procMount"],
            )
            .removable(true),
        ],
        "procMount Unmasked is ignored on Windows nodes (no /proc filesystem)",
    )
}
