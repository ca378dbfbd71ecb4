//! WIN-NFS: NFS volumes are not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-NFS",
        title: "NFS volumes are not supported on Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`volumes[].nfs`.",
        why: "Windows nodes cannot mount NFS-based storage into containers.",
        source: "The Windows mounter only mounts SMB/CIFS shares (staging/src/k8s.io/mount-utils/mount_windows.go): an NFS volume fails with FailedMount. Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Use SMB (csi-driver-smb), Azure Files, or another CSI driver with Windows support.",
        example: "volumes:\n- name: data\n  nfs:\n    server: nfs.example.com\n    path: /exports",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str =
    "NFS volumes are not supported on Windows nodes; use SMB or a CSI driver with Windows support";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        if v.nfs.is_some() {
            out.report(cx.spec_field(&["volumes"]).index(i).key("nfs"), MESSAGE);
        }
    }
}

/// WIN-NFS as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(ProbeScope::Volume, "has(v.nfs)", &["nfs"])],
        MESSAGE,
    )
}
