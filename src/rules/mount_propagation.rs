//! WIN-MOUNT-PROPAGATION: mount propagation is not supported on Windows.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-MOUNT-PROPAGATION",
        title: "mount propagation is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`volumeMounts[].mountPropagation` other than `None`.",
        why: "Windows does not support mount propagation: volume mounts cannot project files or directories back to the host.",
        source: "Kubernetes Windows docs, 'API' > V1.Pod: `v1.VolumeMount.mountPropagation` - mount propagation is not supported on Windows; 'Storage': mount projections / volume mounts cannot project back to the host (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Remove `mountPropagation` (or set it to `None`). Node-level storage plugins use csi-proxy or HostProcess containers.",
        example: "volumeMounts:\n- name: pods\n  mountPath: C:\\var\\lib\\kubelet\n  mountPropagation: Bidirectional",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    for c in cx.containers() {
        for (j, m) in c.container.volume_mounts.iter().flatten().enumerate() {
            let Some(mode) = m.mount_propagation.as_deref() else {
                continue;
            };
            if mode != "None" {
                let path = cx
                    .container_field(&c, &["volumeMounts"])
                    .index(j)
                    .key("mountPropagation");
                out.report(
                    path,
                    format!("mountPropagation {mode} is not supported on Windows nodes"),
                );
            }
        }
    }
}
