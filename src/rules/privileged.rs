//! WIN-PRIVILEGED: privileged containers do not exist on Windows.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-PRIVILEGED",
        title: "privileged containers are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`securityContext.privileged: true` on any container, init container or ephemeral container.",
        why: "Windows isolates every container in a Job object with namespace filtering that cannot be turned off, so system privileges cannot be asserted on the host: there is no privileged mode. The pod fails to start or runs without the privileges it expects.",
        source: "Kubernetes Windows docs, 'API' > V1.Container: `v1.Container.SecurityContext.privileged` - Windows doesn't support privileged containers (seeds 001 'Limitations', 004 'API').",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `privileged`. For node-level work (CNI, CSI, log collection) use a HostProcess container: `securityContext.windowsOptions.hostProcess: true` with `hostNetwork: true`; CSI plugins use csi-proxy.",
        example: "containers:\n- name: agent\n  securityContext:\n    privileged: true",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    for c in cx.containers() {
        if c.security_context().and_then(|s| s.privileged) == Some(true) {
            out.report(
                cx.container_field(&c, &["securityContext", "privileged"]),
                "privileged: true is not supported on Windows nodes; use a HostProcess container for node-level work",
            );
        }
    }
}
