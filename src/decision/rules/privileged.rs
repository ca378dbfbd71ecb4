//! WIN-PRIVILEGED: privileged containers do not exist on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{C_HOST_PROCESS, Export, ExportContext, Probe, ProbeScope, c_sc};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-PRIVILEGED",
        title: "privileged is ignored on Windows outside HostProcess containers",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`securityContext.privileged: true` on a container that is not HostProcess (on a HostProcess container it is redundant: WIN-HOSTPROCESS-REDUNDANT). The mutating webhook removes it, except from a container with a `mountPropagation: Bidirectional` mount, which the API server refuses in an unprivileged container.",
        why: "Windows isolates every container in a Job object with namespace filtering that cannot be turned off, so system privileges cannot be asserted on the host: there is no privileged mode. The pod fails to start or runs without the privileges it expects.",
        source: "Windows kubelet and containerd build only the Windows container config, which has no privileged mode, so the field is ignored and the container runs unprivileged (kubernetes/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container_windows.go; containerd internal/cri/server/container_create.go). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Container securityContext; 'Create a Windows HostProcess Pod'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `privileged`. For node-level work (CNI, CSI, log collection) use a HostProcess container: `securityContext.windowsOptions.hostProcess: true` with `hostNetwork: true`; CSI plugins use csi-proxy.",
        example: "containers:\n- name: agent\n  securityContext:\n    privileged: true",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str = "privileged: true is ignored on Windows nodes (the container runs unprivileged); use a HostProcess container for node-level work";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        if c.security_context().and_then(|s| s.privileged) == Some(true)
            && !super::hostprocess::is_host_process(cx, &c)
        {
            // Without privileged a Bidirectional mount is refused by the
            // API server (WIN-API-REFUSED): the patch keeps it.
            out.report_maybe_removable(
                !cx.cluster.is_strict() && !super::api_refused::has_bidirectional_mount(&c),
                cx.container_field(&c, &["securityContext", "privileged"]),
                MESSAGE,
                "remove privileged: true, which Windows ignores",
            );
        }
    }
}

/// WIN-PRIVILEGED as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    // Kept on a container with a Bidirectional mount, which the API
    // server refuses unprivileged (WIN-API-REFUSED), as /mutate does.
    let strict = cx.cluster.is_strict();
    Export::cel(
        [false, true]
            .into_iter()
            .map(|bidirectional| {
                Probe::new(
                    ProbeScope::Container,
                    format!(
                        "{} && c.securityContext.privileged == true && !{C_HOST_PROCESS} && {}{C_BIDIRECTIONAL}",
                        c_sc("privileged"),
                        if bidirectional { "" } else { "!" },
                    ),
                    &["securityContext", "privileged"],
                )
                .removable(!strict && !bidirectional)
            })
            .collect(),
        MESSAGE,
    )
}

/// The container `c` has a mount with Bidirectional propagation.
const C_BIDIRECTIONAL: &str = "(has(c.volumeMounts) && c.volumeMounts.exists(m, has(m.mountPropagation) && m.mountPropagation == 'Bidirectional'))";
