//! WIN-HOSTPROCESS: HostProcess pods must be HostProcess throughout, and
//! on the host network. Mirrors the API server's
//! `validateWindowsHostProcessPod`, which runs on every pod.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPROCESS",
        title: "HostProcess pods must be consistent and use the host network",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Any,
        what: "Pods with any HostProcess container (`windowsOptions.hostProcess: true` on the pod or a container): every container must be HostProcess, `hostNetwork` must be true, and pod and container values must agree where both are set.",
        why: "A HostProcess container runs directly on the host, in the host's network; Windows cannot mix host processes and isolated containers in one pod sandbox. The API server rejects such pods with the same messages.",
        source: "Kubernetes docs, 'Create a Windows HostProcess Pod' (HostProcess containers: all containers in the pod must be HostProcess and hostNetwork must be true); API server validateWindowsHostProcessPod.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/",
        fix: "Set `hostNetwork: true` and `windowsOptions.hostProcess: true` at pod level (or on every container), and remove conflicting container-level values.",
        example: "spec:\n  securityContext:\n    windowsOptions:\n      hostProcess: true\n  containers:\n  - name: agent",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let hp = cx.host_process;
    if let Some(pod) = hp.pod {
        for c in cx.containers() {
            let own = c
                .security_context()
                .and_then(|s| s.windows_options.as_ref())
                .and_then(|w| w.host_process);
            if own.is_some_and(|own| own != pod) {
                out.report(
                    cx.container_field(&c, &["securityContext", "windowsOptions", "hostProcess"]),
                    format!(
                        "pod hostProcess value must be identical if both are specified, was {pod}"
                    ),
                );
            }
        }
    }
    if !hp.any {
        return;
    }
    if !hp.all {
        out.report(
            cx.workload.spec_path.clone(),
            "If pod contains any hostProcess containers then all containers must be HostProcess containers",
        );
    }
    if cx.spec.host_network != Some(true) {
        out.report(
            cx.spec_field(&["hostNetwork"]),
            "hostNetwork must be true if pod contains any hostProcess containers",
        );
    }
}
