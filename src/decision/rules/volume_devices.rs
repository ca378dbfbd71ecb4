//! WIN-VOLUME-DEVICES: raw block volumes (volumeDevices) are not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-VOLUME-DEVICES",
        title: "raw block volumes (volumeDevices) are not supported on Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`volumeDevices` in any container.",
        why: "Windows cannot attach raw block devices to pods.",
        source: "The Windows runtime cannot attach raw block devices to a container (containerd internal/cri/opts/spec_windows_opts.go): the pod stays in ContainerCreating. Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Use `volumeMounts` with a filesystem volume (`volumeMode: Filesystem`) instead of `volumeDevices`.",
        example: "containers:\n- name: db\n  volumeDevices:\n  - name: data\n    devicePath: /dev/xvda",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str = "volumeDevices (raw block volumes) are not supported on Windows nodes";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        if c.container.volume_devices.is_some() {
            out.report(cx.container_field(&c, &["volumeDevices"]), MESSAGE);
        }
    }
}

/// WIN-VOLUME-DEVICES as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            "has(c.volumeDevices)",
            &["volumeDevices"],
        )],
        MESSAGE,
    )
}
