//! WIN-HOSTPID, WIN-HOSTIPC, WIN-SHAREPROCESSNS: Windows shares no host or
//! pod namespaces other than the network.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static HOST_PID: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPID",
        title: "hostPID is ignored on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`hostPID: true` on a pod that is not HostProcess (on a HostProcess pod it is redundant: WIN-HOSTPROCESS-REDUNDANT).",
        why: "Windows cannot share the host's process namespace with a container.",
        source: "Ignored on Windows: the kubelet and runtime build no process namespace sharing for Windows containers (pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); the API server forbids it with spec.os.name: windows (pkg/apis/core/validation/validation.go validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Pod.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `hostPID`. HostProcess containers already run as host processes.",
        example: "spec:\n  hostPID: true",
        since: None,
        until: None,
    },
    check: |cx, out| {
        if !cx.host_process.any {
            flag(cx, out, cx.spec.host_pid, "hostPID");
        }
    },
    export: export_host_pid,
};

pub static HOST_IPC: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTIPC",
        title: "hostIPC is ignored on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`hostIPC: true` on a pod that is not HostProcess.",
        why: "Windows cannot share the host's IPC namespace with a container.",
        source: "Ignored on Windows (no IPC namespace sharing; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); the API server forbids it with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Pod.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `hostIPC`; use named pipes or the network for inter-process communication.",
        example: "spec:\n  hostIPC: true",
        since: None,
        until: None,
    },
    check: |cx, out| {
        if !cx.host_process.any {
            flag(cx, out, cx.spec.host_ipc, "hostIPC");
        }
    },
    export: export_host_ipc,
};

pub static SHARE_PROCESS_NAMESPACE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SHAREPROCESSNS",
        title: "shareProcessNamespace is ignored on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`shareProcessNamespace: true`.",
        why: "Process namespace sharing depends on Linux namespaces; Windows containers in a pod can share only the network, not processes or the root filesystem.",
        source: "Ignored on Windows: containers of a pod share only the network (pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); forbidden by the API server with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Pod.",
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
    export: export_share_process_namespace,
};

fn flag(
    cx: &RuleContext<'_, '_, '_>,
    out: &mut RuleFindings,
    value: Option<bool>,
    key: &'static str,
) {
    if value == Some(true) {
        out.report(
            cx.spec_field(&[key]),
            format!("{key}: true is ignored on Windows nodes: the namespace is not shared"),
        );
    }
}

/// WIN-HOSTPID as CEL, for `winadmit admission-policy`.
fn export_host_pid(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.hostPID) && variables.spec.hostPID == true && !variables.anyHostProcess",
            &["hostPID"],
        )],
        "hostPID: true is ignored on Windows nodes: the namespace is not shared",
    )
}

/// WIN-HOSTIPC as CEL, for `winadmit admission-policy`.
fn export_host_ipc(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.hostIPC) && variables.spec.hostIPC == true && !variables.anyHostProcess",
            &["hostIPC"],
        )],
        "hostIPC: true is ignored on Windows nodes: the namespace is not shared",
    )
}

/// WIN-SHAREPROCESSNS as CEL, for `winadmit admission-policy`.
fn export_share_process_namespace(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == true",
            &["shareProcessNamespace"],
        )],
        "shareProcessNamespace: true is ignored on Windows nodes: the namespace is not shared",
    )
}
