//! WIN-HOSTPID, WIN-HOSTIPC, WIN-SHAREPROCESSNS: Windows shares no host or
//! pod namespaces other than the network.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static HOST_PID: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPID",
        title: "hostPID is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`hostPID: true`, HostProcess pods included (they see host processes already; the flag itself is still unsupported).",
        why: "Windows cannot share the host's process namespace with a container.",
        source: "Kubernetes Windows docs, 'API' > V1.Pod: `v1.Pod.hostIPC`, `v1.Pod.hostPID` - host namespace sharing is not possible on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `hostPID`. HostProcess containers already run as host processes.",
        example: "spec:\n  hostPID: true",
        since: None,
        until: None,
    },
    check: |cx, out| flag(cx, out, cx.spec.host_pid, "hostPID"),
};

pub static HOST_IPC: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTIPC",
        title: "hostIPC is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`hostIPC: true`.",
        why: "Windows cannot share the host's IPC namespace with a container.",
        source: "Kubernetes Windows docs, 'API' > V1.Pod: `v1.Pod.hostIPC`, `v1.Pod.hostPID` - host namespace sharing is not possible on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `hostIPC`; use named pipes or the network for inter-process communication.",
        example: "spec:\n  hostIPC: true",
        since: None,
        until: None,
    },
    check: |cx, out| flag(cx, out, cx.spec.host_ipc, "hostIPC"),
};

pub static SHARE_PROCESS_NAMESPACE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SHAREPROCESSNS",
        title: "shareProcessNamespace is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`shareProcessNamespace: true`.",
        why: "Process namespace sharing depends on Linux namespaces; Windows containers in a pod can share only the network, not processes or the root filesystem.",
        source: "Kubernetes Windows docs, 'API' > V1.Pod: `v1.Pod.shareProcessNamespace` - Windows cannot share process namespaces or the container's root filesystem; only the network can be shared (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `shareProcessNamespace`; communicate between containers over the pod network or a shared volume.",
        example: "spec:\n  shareProcessNamespace: true",
        since: None,
        until: None,
    },
    check: |cx, out| {
        flag(
            cx,
            out,
            cx.spec.share_process_namespace,
            "shareProcessNamespace",
        );
    },
};

fn flag(cx: &Cx<'_, '_, '_>, out: &mut Sink, value: Option<bool>, key: &str) {
    if value == Some(true) {
        out.report(
            cx.spec_field(&[key]),
            format!("{key}: true is not supported on Windows nodes (Windows cannot share this namespace)"),
        );
    }
}
