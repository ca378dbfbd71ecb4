//! WIN-MOUNT-PROPAGATION: mount propagation is not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Field, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-MOUNT-PROPAGATION",
        title: "mount propagation is ignored on Windows",
        level: super::level::warning,
        intent_lost: true,
        scope: Scope::Windows,
        what: "`volumeMounts[].mountPropagation` other than `None`.",
        why: "Windows does not support mount propagation: volume mounts cannot project files or directories back to the host.",
        source: "The Windows kubelet forces private propagation (pkg/kubelet/kubelet_pods.go): HostToContainer and Bidirectional are ignored, so mounts made later on either side are not seen by the other. Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Remove `mountPropagation` (or set it to `None`). Node-level storage plugins use csi-proxy or HostProcess containers.",
        example: "volumeMounts:\n- name: pods\n  mountPath: C:\\var\\lib\\kubelet\n  mountPropagation: Bidirectional",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
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
                    format!(
                        "mountPropagation {mode} is ignored on Windows nodes (mounts stay private)"
                    ),
                );
            }
        }
    }
}

/// WIN-MOUNT-PROPAGATION as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe {
            scope: ProbeScope::Mount,
            container_hit: None,
            hit: "has(m.mountPropagation) && m.mountPropagation != 'None'".to_owned(),
            field: Field::Keys(&["mountPropagation"]),
            removable: false,
        }],
        "mountPropagation is ignored on Windows nodes (mounts stay private)",
    )
}
