//! WIN-HOSTNETWORK: only HostProcess pods may use the host network.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTNETWORK",
        title: "hostNetwork requires a HostProcess pod on Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`hostNetwork: true` on a pod none of whose containers is a HostProcess container.",
        why: "Windows cannot share the host's network namespace with an ordinary (process- or Hyper-V-isolated) container; only HostProcess containers run in the host's network. The setting is ignored or the sandbox fails to start.",
        source: "containerd gives host networking only to HostProcess containers (internal/cri/server/helpers.go hostNetwork()); the pod gets a CNI address but the kubelet reports the node IP as the pod IP (pkg/kubelet/kubelet_pods.go), so Services route to nothing. Kubernetes documentation 'Windows containers in Kubernetes' > Networking and 'Create a Windows HostProcess Pod'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `hostNetwork`, or make every container a HostProcess container (`securityContext.windowsOptions.hostProcess: true`).",
        example: "spec:\n  hostNetwork: true\n  containers:\n  - name: agent",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str = "hostNetwork: true without HostProcess is not honoured on Windows nodes: the pod gets its own address but reports the node IP, so Services route to nothing";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.spec.host_network == Some(true) && !cx.host_process.any {
        out.report(cx.spec_field(&["hostNetwork"]), MESSAGE);
    }
}

/// WIN-HOSTNETWORK as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.hostNetwork) && variables.spec.hostNetwork == true && !variables.anyHostProcess",
            &["hostNetwork"],
        )],
        MESSAGE,
    )
}
