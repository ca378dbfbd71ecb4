//! WIN-HOSTPROCESS-REDUNDANT, WIN-HOSTPROCESS-USER, WIN-HOSTPROCESS-NONROOT:
//! what is redundant, missing or not enforced on a HostProcess pod that is
//! otherwise valid (WIN-HOSTPROCESS checks validity).

use super::hostprocess::is_host_process;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{
    C_HOST_PROCESS, Export, ExportContext, Probe, ProbeScope, c_sc, pod_sc,
};

const HOSTPROCESS_DOC: &str =
    "https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/";

pub static REDUNDANT: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPROCESS-REDUNDANT",
        title: "privileged, hostPID and hostIPC are redundant on a HostProcess pod",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`privileged: true` on a HostProcess container; `hostPID: true` or `hostIPC: true` on a HostProcess pod.",
        why: "A HostProcess container already runs as a process on the host, with the host's process view and the rights of its user; these Linux settings add nothing and are ignored by the Windows kubelet and containerd. Harmless (no verdict), but they suggest the manifest was written for Linux. With `spec.os.name: windows` the API server refuses them (WIN-OS-FIELDS).",
        source: "Ignored by the Windows kubelet (pkg/kubelet/kuberuntime/kuberuntime_container_windows.go builds only the Windows config) and containerd (internal/cri/server/container_create.go). Kubernetes documentation 'Create a Windows HostProcess Pod'.",
        doc_url: HOSTPROCESS_DOC,
        fix: "Remove `privileged`, `hostPID` and `hostIPC` from the HostProcess pod.",
        example: "spec:\n  hostNetwork: true\n  hostPID: true\n  securityContext:\n    windowsOptions:\n      hostProcess: true\n      runAsUserName: \"NT AUTHORITY\\\\SYSTEM\"",
        since: None,
        until: None,
    },
    check: check_redundant,
    export: |_| Export::Gap("left to the webhook in this version"),
};

pub static USER: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPROCESS-USER",
        title: "HostProcess container without runAsUserName",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A HostProcess container with no effective `windowsOptions.runAsUserName` (neither its own nor the pod's).",
        why: "A HostProcess container runs as a user of the host. The documentation requires one (`NT AUTHORITY\\SYSTEM`, `NT AUTHORITY\\Local service`, `NT AUTHORITY\\NetworkService` or a local group); without it the image's default user is used, which does not exist on the host, and the container may fail to start.",
        source: "Kubernetes documentation 'Create a Windows HostProcess Pod' > Choosing a user account; containerd internal/cri/server/container_create_windows.go (the HostProcess user).",
        doc_url: HOSTPROCESS_DOC,
        fix: "Set `securityContext.windowsOptions.runAsUserName` on the pod (e.g. `NT AUTHORITY\\SYSTEM`) or on each container.",
        example: "spec:\n  hostNetwork: true\n  securityContext:\n    windowsOptions:\n      hostProcess: true",
        since: None,
        until: None,
    },
    check: check_user,
    export: export_user,
};

pub static NON_ROOT: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPROCESS-NONROOT",
        title: "runAsNonRoot is not enforced on HostProcess containers",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`runAsNonRoot: true` (pod or container) on a HostProcess container.",
        why: "The kubelet's non-root check compares the user with ContainerAdministrator only; HostProcess containers run as SYSTEM or a service account, which it does not recognise, so the setting promises a protection that does not exist.",
        source: "pkg/kubelet/kuberuntime/security_context_windows.go (verifyRunAsNonRoot); Kubernetes documentation 'Create a Windows HostProcess Pod'.",
        doc_url: HOSTPROCESS_DOC,
        fix: "Remove `runAsNonRoot` from the HostProcess pod, or run the work in an ordinary Windows container as `ContainerUser`.",
        example: "securityContext:\n  runAsNonRoot: true\n  windowsOptions:\n    hostProcess: true\n    runAsUserName: \"NT AUTHORITY\\\\SYSTEM\"",
        since: None,
        until: None,
    },
    check: check_non_root,
    export: export_non_root,
};

fn check_redundant(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !cx.host_process.any {
        return;
    }
    for (key, value) in [("hostPID", cx.spec.host_pid), ("hostIPC", cx.spec.host_ipc)] {
        if value == Some(true) {
            out.report(
                cx.spec_field(&[key]),
                format!(
                    "{key}: true is redundant on a HostProcess pod: it already runs on the host"
                ),
            );
        }
    }
    for c in cx.containers() {
        if c.security_context().and_then(|s| s.privileged) == Some(true) && is_host_process(cx, &c)
        {
            out.report(
                cx.container_field(&c, &["securityContext", "privileged"]),
                "privileged: true is redundant on a HostProcess container: it already runs on the host",
            );
        }
    }
}

fn check_user(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !cx.host_process.any {
        return;
    }
    let pod_user = cx
        .pod_security_context()
        .and_then(|p| p.windows_options.as_ref())
        .and_then(|w| w.run_as_user_name.as_deref())
        .is_some_and(|u| !u.is_empty());
    if pod_user {
        return;
    }
    for c in cx.containers() {
        if !is_host_process(cx, &c) {
            continue;
        }
        let own = c
            .security_context()
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.run_as_user_name.as_deref())
            .is_some_and(|u| !u.is_empty());
        if !own {
            out.report(
                cx.container_field(&c, &["securityContext", "windowsOptions", "runAsUserName"]),
                format!(
                    "HostProcess container {} has no runAsUserName (pod or container): the image's user does not exist on the host",
                    c.name()
                ),
            );
        }
    }
}

fn check_non_root(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !cx.host_process.any {
        return;
    }
    let message = "runAsNonRoot: true is not enforced for HostProcess containers (SYSTEM and service accounts pass the check)";
    if cx.pod_security_context().and_then(|p| p.run_as_non_root) == Some(true) {
        out.report(cx.spec_field(&["securityContext", "runAsNonRoot"]), message);
    }
    for c in cx.containers() {
        if is_host_process(cx, &c)
            && c.security_context().and_then(|s| s.run_as_non_root) == Some(true)
        {
            out.report(
                cx.container_field(&c, &["securityContext", "runAsNonRoot"]),
                message,
            );
        }
    }
}

/// WIN-HOSTPROCESS-USER as CEL, for `winadmit admission-policy`.
fn export_user(_: &ExportContext<'_>) -> Export {
    let pod_user = "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.runAsUserName) && variables.spec.securityContext.windowsOptions.runAsUserName != ''";
    let own_user = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.runAsUserName) && c.securityContext.windowsOptions.runAsUserName != ''";
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "variables.anyHostProcess && !({pod_user}) && {C_HOST_PROCESS} && !({own_user})"
            ),
            &["securityContext", "windowsOptions", "runAsUserName"],
        )],
        "HostProcess container has no runAsUserName (pod or container): the image's user does not exist on the host",
    )
}

/// WIN-HOSTPROCESS-NONROOT as CEL, for `winadmit admission-policy`.
fn export_non_root(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Pod,
                format!(
                    "variables.anyHostProcess && {} && variables.spec.securityContext.runAsNonRoot == true",
                    pod_sc("runAsNonRoot")
                ),
                &["securityContext", "runAsNonRoot"],
            ),
            Probe::new(
                ProbeScope::Container,
                format!(
                    "variables.anyHostProcess && {C_HOST_PROCESS} && {} && c.securityContext.runAsNonRoot == true",
                    c_sc("runAsNonRoot")
                ),
                &["securityContext", "runAsNonRoot"],
            ),
        ],
        "runAsNonRoot: true is not enforced for HostProcess containers (SYSTEM and service accounts pass the check)",
    )
}
