//! WIN-READONLY-ROOTFS: read-only root filesystems are not supported on Windows.

use super::{Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, security_field};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-READONLY-ROOTFS",
        title: "readOnlyRootFilesystem is ignored on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`readOnlyRootFilesystem: true` in any container.",
        why: "Windows needs write access to the container's registry hive and SAM database to run system processes, so the root filesystem cannot be read-only. Read-only volume mounts do work.",
        source: "Ignored on Windows: the container's root filesystem stays writable because the registry and SAM database need write access (pkg/kubelet/kuberuntime/kuberuntime_container_windows.go). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Container securityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `readOnlyRootFilesystem`; mount data volumes with `readOnly: true` instead.",
        example: "securityContext:\n  readOnlyRootFilesystem: true",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str = "readOnlyRootFilesystem: true is not supported on Windows nodes (the registry needs write access)";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = MESSAGE;
    let container =
        |c: &SecurityContextView<'_>| Reported::from(c.read_only_root_filesystem == Some(true));
    security_field(
        cx,
        out,
        "readOnlyRootFilesystem",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Reported>,
        Some(&container),
        "",
    );
}

/// WIN-READONLY-ROOTFS as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "{} && c.securityContext.readOnlyRootFilesystem == true",
                c_sc("readOnlyRootFilesystem")
            ),
            &["securityContext", "readOnlyRootFilesystem"],
        )],
        MESSAGE,
    )
}
