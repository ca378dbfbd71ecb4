//! WIN-SYSCTLS: sysctls are not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SYSCTLS",
        title: "sysctls are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "Pod `securityContext.sysctls`.",
        why: "sysctls are part of the Linux kernel interface; Windows has no equivalent mechanism.",
        source: "Kubernetes Windows docs, 'API' > V1.PodSecurityContext: `sysctls` - these are part of the Linux sysctl interface; there's no equivalent on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `sysctls`; configure the equivalent through Windows registry settings in the image.",
        example: "securityContext:\n  sysctls:\n  - name: net.core.somaxconn\n    value: \"1024\"",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "sysctls are not supported on Windows nodes (no sysctl interface)";
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.sysctls.is_some());
    security_field(
        cx,
        out,
        "sysctls",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Hit>,
        "",
    );
}
