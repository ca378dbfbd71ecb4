//! WIN-WINDOWSOPTIONS-LINUX: Windows options on a Linux pod.

use super::{RuleContext, Rule, RuleInfo, Scope, RuleFindings};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-WINDOWSOPTIONS-LINUX",
        title: "windowsOptions on a Linux-targeted pod",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Linux,
        what: "`securityContext.windowsOptions` (pod or container) on a pod that targets Linux nodes.",
        why: "Linux nodes ignore windowsOptions, so the identity (runAsUserName, gMSA) or HostProcess mode it asks for never applies; for pods with `spec.os.name: linux` the API server rejects it outright.",
        source: "API server validateLinux: windows options cannot be set for a linux pod; Kubernetes docs 'Configure RunAsUserName for Windows pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-runasusername/",
        fix: "Remove `windowsOptions`, or target the pod at Windows nodes.",
        example: "spec:\n  nodeSelector:\n    kubernetes.io/os: linux\n  securityContext:\n    windowsOptions:\n      runAsUserName: ContainerUser",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    const MESSAGE: &str = "windows options cannot be set for a linux pod";
    if cx
        .pod_security_context()
        .is_some_and(|p| p.windows_options.is_some())
    {
        out.report(
            cx.spec_field(&["securityContext", "windowsOptions"]),
            MESSAGE,
        );
    }
    for c in cx.containers() {
        if c.security_context()
            .is_some_and(|s| s.windows_options.is_some())
        {
            out.report(
                cx.container_field(&c, &["securityContext", "windowsOptions"]),
                MESSAGE,
            );
        }
    }
}
