//! WIN-IMAGE-WINDOWS-ONLY: an image whose registry facts have only Windows
//! platforms, in a pod that does not target Windows (`--image-facts`,
//! `--registry`).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind};
use crate::decision::rules::cel::{Export, NEEDS_IMAGE_PLATFORMS};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-IMAGE-WINDOWS-ONLY";

pub static WINDOWS_ONLY: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "Image with only Windows platforms in a pod not pinned to Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "Only where the registry's facts are known (`--image-facts`, `--registry`): a container whose image lists only `windows` platforms, in a pod that targets Linux nodes, or that nothing pins to Windows nodes (no OS node selector, `spec.os.name`, affinity or Windows RuntimeClass).",
        why: "A Linux node cannot pull an image that has only Windows platforms (`no matching manifest for linux/amd64`): a Linux-targeted pod never starts, and an untargeted one fails wherever the scheduler places it on a Linux node. Unlike WIN-UNPINNED-IMAGE, which guesses from the name, the registry says so: an error, and `/mutate` adds the Windows node selector (with `mutation.injectNodeSelector`, the default).",
        source: "Layer: the scheduler and the container runtime, every Kubernetes version and runtime: the scheduler places a pod without an OS selector on any node, and the runtime pulls the image's variant for that node's platform, which an image with only Windows platforms does not have on Linux. Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': Windows containers must target Windows nodes with `kubernetes.io/os: windows`. The platforms are the image index's (or the single manifest's config) `os` fields (OCI image index specification).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Add `nodeSelector: {kubernetes.io/os: windows}` (the mutating webhook does); in a Linux pod, use a Linux image.",
        example: "# contoso/payments:4.2 publishes windows/amd64 10.0.20348 only\ncontainers:\n- name: api\n  image: contoso/payments:4.2",
        since: None,
        until: None,
    },
    check: check_windows_only,
    export: |_| Export::Gap(NEEDS_IMAGE_PLATFORMS),
};

fn check_windows_only(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.target.is_windows() || cx.registry.is_none() {
        return;
    }
    let linux = cx.target.is_linux();
    // The selector helps only when no image is Linux-only.
    let all_windows_capable = cx
        .containers()
        .filter_map(|c| c.container.image.as_deref())
        .all(|i| !cx.linux_only(i));
    let mut fixed = false;
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        let Some(facts) = cx.registry_facts(image).filter(|f| f.windows_only()) else {
            continue;
        };
        let path = cx.container_field(&c, &["image"]);
        let named = format!(
            "image {} has platforms {}",
            facts.name(image),
            facts.platform_list()
        );
        if linux {
            out.report(
                path,
                format!("{named}: only Windows, but the pod targets Linux nodes"),
            );
        } else if all_windows_capable && !fixed {
            fixed = true;
            let fix = Fix {
                kind: FixKind::Scheduling,
                description: format!(
                    "add nodeSelector kubernetes.io/os=windows ({named}: only Windows)"
                ),
                ops: vec![super::unpinned_image::node_selector_op(cx)],
            };
            out.report_with_fix(
                path,
                format!("{named}: only Windows, but nothing pins the pod to Windows nodes; on a Linux node it cannot be pulled"),
                fix,
            );
        } else {
            out.report(
                path,
                format!("{named}: only Windows, but nothing pins the pod to Windows nodes; on a Linux node it cannot be pulled"),
            );
        }
    }
}
