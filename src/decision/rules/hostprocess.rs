//! WIN-HOSTPROCESS: HostProcess pods must be HostProcess throughout, and
//! on the host network. Mirrors the API server's
//! `validateWindowsHostProcessPod`, which runs on every pod.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{
    C_HOST_PROCESS, Export, ExportContext, Field, Probe, ProbeScope, cel_list,
};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-HOSTPROCESS";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "HostProcess pods must be consistent and use the host network",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "Pods with any HostProcess container (`windowsOptions.hostProcess: true` on the pod or a container): every container must be HostProcess, `hostNetwork` must be true, and pod and container values must agree where both are set; the target must run HostProcess (Kubernetes 1.22 or later, containerd); the RuntimeClass must not be Hyper-V isolated.",
        why: "A HostProcess container runs directly on the host, in the host's network; Windows cannot mix host processes and isolated containers in one pod sandbox. The API server rejects such pods with the same messages.",
        source: "The API server refuses inconsistent HostProcess pods on every pod (kubernetes/kubernetes pkg/apis/core/validation/validation.go validateWindowsHostProcessPod). HostProcess exists from Kubernetes 1.22 and needs containerd 1.6+; Docker and Hyper-V isolation cannot run it (test/e2e/windows/host_process.go). Kubernetes documentation 'Create a Windows HostProcess Pod'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/",
        fix: "Set `hostNetwork: true` and `windowsOptions.hostProcess: true` at pod level (or on every container), and remove conflicting container-level values.",
        example: "spec:\n  securityContext:\n    windowsOptions:\n      hostProcess: true\n  containers:\n  - name: agent",
        since: None,
        until: None,
    },
    check,
    export,
};

/// Is this container HostProcess (its own value, else the pod's)?
#[must_use]
pub fn is_host_process(
    cx: &RuleContext<'_, '_, '_>,
    c: &crate::decision::view::ContainerRef<'_, '_>,
) -> bool {
    crate::decision::targeting::is_host_process_container(c.container, cx.host_process.pod)
}

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
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
    let at = first_host_process_field(cx);
    if !cx.cluster.version_at_least(1, 22) {
        out.report(
            at.clone(),
            format!(
                "HostProcess containers do not exist before Kubernetes 1.22 (target: {}): the pod would start as an ordinary container",
                cx.cluster.version_fact()
            ),
        );
    } else if cx.cluster.is_docker() {
        out.report(
            at.clone(),
            format!(
                "Docker cannot run HostProcess containers (target: {}): the pod would start as an ordinary container",
                cx.cluster.runtime_fact()
            ),
        );
    }
    if cx.hyperv {
        out.report(
            at,
            "HostProcess containers cannot run under a Hyper-V isolated RuntimeClass",
        );
    }
}

/// Where HostProcess is switched on: the pod's value, else the first container's.
fn first_host_process_field(cx: &RuleContext<'_, '_, '_>) -> crate::decision::path::FieldPath {
    if cx.host_process.pod == Some(true) {
        return cx.spec_field(&["securityContext", "windowsOptions", "hostProcess"]);
    }
    cx.containers()
        .find(|c| is_host_process(cx, c))
        .map_or_else(
            || cx.workload.spec_path.clone(),
            |c| cx.container_field(&c, &["securityContext", "windowsOptions", "hostProcess"]),
        )
}

/// WIN-HOSTPROCESS as CEL, for `winadmit admission-policy`: consistency,
/// hostNetwork, and the target's support.
fn export(cx: &ExportContext<'_>) -> Export {
    let own_set = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess)";
    let mut probes = vec![
        Probe::new(
            ProbeScope::Container,
            format!(
                "variables.podHostProcessSet && {own_set} && c.securityContext.windowsOptions.hostProcess != variables.podHostProcess"
            ),
            &["securityContext", "windowsOptions", "hostProcess"],
        ),
        Probe::new(
            ProbeScope::Pod,
            "variables.anyHostProcess && !variables.allHostProcess",
            &[],
        ),
        Probe::new(
            ProbeScope::Pod,
            "variables.anyHostProcess && !(has(variables.spec.hostNetwork) && variables.spec.hostNetwork == true)",
            &["hostNetwork"],
        ),
    ];
    let unsupported = !cx.cluster.version_at_least(1, 22) || cx.cluster.is_docker();
    // The first HostProcess field: the pod's, else the first HostProcess container's.
    let first = "[variables.podHostProcess ? variables.prefix + '.securityContext.windowsOptions.hostProcess' : (variables.initContainers.filter(c, HP).map(c, variables.prefix + '.initContainers[' + string(variables.initContainersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess') + variables.containers.filter(c, HP).map(c, variables.prefix + '.containers[' + string(variables.containersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess') + variables.ephemeralContainers.filter(c, HP).map(c, variables.prefix + '.ephemeralContainers[' + string(variables.ephemeralContainersNames.indexOf(c.name)) + '].securityContext.windowsOptions.hostProcess'))[0]]"
        .replace("HP", C_HOST_PROCESS);
    if unsupported {
        probes.push(Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: "variables.anyHostProcess".to_owned(),
            field: Field::Absolute(first.clone()),
            removable: false,
        });
    }
    let hyperv = &cx.params.hyperv_runtime_classes;
    if !hyperv.is_empty() {
        probes.push(Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: format!(
                "variables.anyHostProcess && has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                cel_list(hyperv)
            ),
            field: Field::Absolute(first),
            removable: false,
        });
    }
    Export::cel(
        probes,
        "HostProcess pods must be consistent (all containers or none, the same value on pod and containers), use hostNetwork: true, and need Kubernetes 1.22+ on containerd outside Hyper-V isolation",
    )
    .partly(
        "Hyper-V isolation is recognised by the RuntimeClass names in params.hypervRuntimeClasses only; a class known as Hyper-V only by its handler (hypervRuntimeHandlers) needs the live RuntimeClass",
    )
    .with_windows_signal()
}
