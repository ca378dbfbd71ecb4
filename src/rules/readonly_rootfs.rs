//! WIN-READONLY-ROOTFS: read-only root filesystems are not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-READONLY-ROOTFS",
        title: "read-only root filesystems are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`readOnlyRootFilesystem: true` in any container.",
        why: "Windows needs write access to the container's registry hive and SAM database to run system processes, so the root filesystem cannot be read-only. Read-only volume mounts do work.",
        source: "Kubernetes Windows docs, 'Storage': read-only filesystems are not supported because write access is always required for the Windows registry and SAM database; 'API' > V1.Container: `readOnlyRootFilesystem` (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `readOnlyRootFilesystem`; mount data volumes with `readOnly: true` instead.",
        example: "securityContext:\n  readOnlyRootFilesystem: true",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "readOnlyRootFilesystem: true is not supported on Windows nodes (the registry needs write access)";
    let container =
        |c: &SecurityContextView<'_>| Hit::from(c.read_only_root_filesystem == Some(true));
    security_field(
        cx,
        out,
        "readOnlyRootFilesystem",
        message,
        None::<&dyn Fn(&PodSecurityContextView<'_>) -> Hit>,
        Some(&container),
        "",
    );
}
