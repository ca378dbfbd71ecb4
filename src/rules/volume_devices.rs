//! WIN-VOLUME-DEVICES: raw block volumes (volumeDevices) are not supported on Windows.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-VOLUME-DEVICES",
        title: "raw block volumes (volumeDevices) are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`volumeDevices` in any container.",
        why: "Windows cannot attach raw block devices to pods.",
        source: "Kubernetes Windows docs, 'API' > V1.Pod: `v1.Pod.volumeDevices` - not implemented on Windows; Windows cannot attach raw block devices to pods; 'Storage': block device mapping (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Use `volumeMounts` with a filesystem volume (`volumeMode: Filesystem`) instead of `volumeDevices`.",
        example: "containers:\n- name: db\n  volumeDevices:\n  - name: data\n    devicePath: /dev/xvda",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    for c in cx.containers() {
        if c.container.volume_devices.is_some() {
            out.report(
                cx.container_field(&c, &["volumeDevices"]),
                "volumeDevices (raw block volumes) are not supported on Windows nodes",
            );
        }
    }
}
