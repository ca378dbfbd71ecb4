//! WIN-EMPTYDIR-MEMORY: Windows has no RAM disk for emptyDir.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, Removal};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-EMPTYDIR-MEMORY";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "emptyDir on Memory is disk-backed on Windows",
        level: super::level::error_on_docker,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`volumes[].emptyDir.medium: Memory`.",
        why: "Windows has no built-in RAM disk; the node's default medium is disk and memory as a storage medium is not supported, so the volume cannot be created.",
        source: "Windows has no tmpfs: with containerd the kubelet makes a plain disk directory, so the volume is not RAM and sizeLimit is not a tmpfs size (staging/src/k8s.io/mount-utils/mount_windows.go); Docker-era nodes did not support it (Kubernetes 1.5-1.19 Windows documentation, 'Storage'). Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `medium: Memory` to use node disk. The mutating webhook removes it with the default policy (`mutation.emptyDirOffMemory: true`; set it to `false` to keep the field and the finding).",
        example: "volumes:\n- name: cache\n  emptyDir:\n    medium: Memory",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        let medium = v.empty_dir.as_ref().and_then(|e| e.medium.as_deref());
        if medium == Some("Memory") {
            let path = cx
                .spec_field(&["volumes"])
                .index(i)
                .key("emptyDir")
                .key("medium");
            let fix = Fix {
                kind: FixKind::EmptyDirOffMemory,
                description: "remove medium: Memory so the emptyDir uses node disk".into(),
                ops: vec![crate::decision::finding::remove_op(&path)],
            };
            let message = if cx.cluster.is_docker() {
                format!(
                    "emptyDir medium Memory is not supported on Docker Windows nodes ({})",
                    cx.cluster.runtime_fact()
                )
            } else {
                "emptyDir medium Memory is a disk directory on Windows nodes (no RAM disk; sizeLimit is not a tmpfs size)".to_owned()
            };
            out.report_with_fix(path, message, fix);
        }
    }
}

/// WIN-EMPTYDIR-MEMORY as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    let docker = cx.cluster.is_docker();
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Volume,
                "has(v.emptyDir) && has(v.emptyDir.medium) && v.emptyDir.medium == 'Memory'",
                &["emptyDir", "medium"],
            )
            .removable(cx.empty_dir_off_memory),
        ],
        if docker {
            "emptyDir medium Memory is not supported on Docker Windows nodes"
        } else {
            "emptyDir medium Memory is a disk directory on Windows nodes (no RAM disk; sizeLimit is not a tmpfs size)"
        },
    )
    // `mutation.emptyDirOffMemory` decides, whatever `removeNoOpFields`.
    .removed(Removal::OwnSwitch)
}
