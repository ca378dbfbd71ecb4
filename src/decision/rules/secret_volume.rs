//! WIN-SECRET-VOLUME: Secret volumes are written to the node's disk in
//! clear text on Windows. Off in the default policy (advice).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SECRET-VOLUME",
        title: "Secret volumes are stored on the Windows node's disk in clear text",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A `secret` volume in a Windows pod. Advice, not a defect: the rule is `off` in the default policy; turn it on (`rules: {WIN-SECRET-VOLUME: warning}`) to list where secrets reach Windows node disks.",
        why: "On Linux, Secret volumes live in tmpfs (memory). Windows has no tmpfs: the kubelet writes Secret volumes to the node's volume in clear text, where they persist on disk and are readable by anyone with administrator access to the node or its disk.",
        source: "Layer: the Windows kubelet, every Kubernetes version and runtime: secret volumes are written to the node's disk, as Windows has no tmpfs (mount-utils mount_windows.go makes a tmpfs a directory). Kubernetes Windows docs, 'Security' (Kubernetes 1.18 documentation, 'Intro to Windows support in Kubernetes'; Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'): Secrets are written in clear text on the node's volume (as compared to tmpfs/in-memory on Linux); customers should restrict access with file ACLs and use volume-level encryption (BitLocker).",
        doc_url: "https://kubernetes.io/docs/concepts/security/windows-security/#protection-for-secrets",
        fix: "Mitigate on the node: restrict the kubelet directory with file ACLs (only SYSTEM and Administrators), encrypt node disks with BitLocker, and limit who can log on to Windows nodes. Consider reading secrets at run time from a vault (Azure Key Vault / Secrets Store CSI driver) instead of volumes; environment variables avoid the disk copy but are visible to the container's processes.",
        example: "volumes:\n- name: tls\n  secret:\n    secretName: web-tls",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("left to the webhook in this version"),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        if v.secret.is_some() {
            let name = v.name.as_deref().unwrap_or_default();
            out.report(
                cx.spec_field(&["volumes"]).index(i).key("secret"),
                format!(
                    "secret volume {name} is written to the Windows node's disk in clear text (no tmpfs on Windows); protect node disks with ACLs and BitLocker"
                ),
            );
        }
    }
}
