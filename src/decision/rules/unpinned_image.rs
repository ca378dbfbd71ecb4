//! WIN-UNPINNED-IMAGE: Windows images in a pod nothing pins to Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind, PatchOperation};
use crate::decision::rules::cel::{
    CONTAINER_LISTS, Export, ExportContext, Field, Probe, ProbeScope, image_in,
};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-UNPINNED-IMAGE";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "Windows image without Windows node selection",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "A container whose image matches the policy's Windows image patterns (`mcr.microsoft.com/windows/*`, servercore, nanoserver, ...) in a pod spec that no nodeSelector, `spec.os.name`, affinity or RuntimeClass pins to Windows. An image whose registry facts are known is left to WIN-IMAGE-WINDOWS-ONLY. When an image of the pod can only be a Windows image by its name (its repository is in `params.certainWindowsImages`: Microsoft's Windows base images and their well-known derivatives; or its tag names a Windows base or release: `windowsservercore`, `nanoserver`, `ltsc2022`, a Windows build) and no image lacks a Windows variant, the mutating webhook pins the pod to Windows (`mutation.pinWindowsImages`, the default); a name that only looks Windows (`*servercore*` on any repository) stays a warning.",
        why: "Without a Windows node selector the scheduler may place the pod on a Linux node, where the image cannot run (exec format / no matching manifest errors, ImagePullBackOff).",
        source: "Layer: the scheduler, every Kubernetes version and runtime: a pod that selects no OS may be placed on a Linux node, where the runtime cannot pull or run a Windows image (the pod fails there). A warning, as the image's OS is inferred from its name. Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': without nodeSelectors, pods can be scheduled onto any node; Windows containers must target Windows nodes with kubernetes.io/os: windows.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Add `nodeSelector: {kubernetes.io/os: windows}`. The mutating webhook does for an image that can only be Windows (`mutation.pinWindowsImages: true`, the default), and for every image that looks Windows when the policy sets `mutation.inferFromImages: true`.",
        example: "spec:\n  containers:\n  - name: iis\n    image: mcr.microsoft.com/windows/servercore/iis",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.target.is_windows() {
        return;
    }
    let linux = cx.target.is_linux();
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        // With the registry's facts, WIN-IMAGE-WINDOWS-ONLY decides.
        if !cx.image(image).windows || cx.registry_facts(image).is_some() {
            continue;
        }
        let path = cx.container_field(&c, &["image"]);
        if linux {
            out.report(
                path,
                format!("image {image} is a Windows image but the pod targets Linux nodes"),
            );
        } else if let Some(certain) = cx
            .containers()
            .filter_map(|c| c.container.image.as_deref())
            .find(|i| cx.image(i).certain_windows && cx.registry_facts(i).is_none())
            .filter(|_| all_windows_capable(cx))
        {
            // A name that can only be Windows: pinned by default
            // (`mutation.pinWindowsImages`).
            let fix = Fix {
                kind: FixKind::PinByImages,
                description: format!(
                    "add nodeSelector kubernetes.io/os=windows (image {certain} can only run on Windows)"
                ),
                ops: vec![node_selector_op(cx)],
            };
            out.report_with_fix(
                path,
                format!("image {image} is a Windows image but nothing pins the pod to Windows nodes; the scheduler may place it on Linux"),
                fix,
            );
        } else {
            let fix = Fix {
                kind: FixKind::Scheduling,
                description: "add nodeSelector kubernetes.io/os=windows".into(),
                ops: vec![node_selector_op(cx)],
            };
            out.report_with_fix(
                path,
                format!("image {image} is a Windows image but nothing pins the pod to Windows nodes; the scheduler may place it on Linux"),
                fix,
            );
        }
        return;
    }
}

/// No image of the pod is known to lack a Windows variant: pinning it to
/// Windows cannot break a container that would have run on Linux.
fn all_windows_capable(cx: &RuleContext<'_, '_, '_>) -> bool {
    cx.containers()
        .filter_map(|c| c.container.image.as_deref())
        .all(|i| !cx.linux_only(i))
}

/// The operation that adds `kubernetes.io/os: windows` to the pod spec's
/// node selector, whether or not the selector exists.
#[must_use]
pub fn node_selector_op(cx: &RuleContext<'_, '_, '_>) -> PatchOperation {
    crate::decision::targeting::add_node_selector(&cx.workload.spec_path, cx.spec)
}

/// WIN-UNPINNED-IMAGE as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    // The first container with a Windows image, as the rule reports.
    let lists: Vec<String> = CONTAINER_LISTS
        .iter()
        .map(|l| {
            format!(
                "variables.{l}.filter(c, {}).map(c, variables.prefix + '.{l}[' + string(variables.{l}Names.indexOf(c.name)) + '].image')",
                image_in("windowsImages")
            )
        })
        .collect();
    Export::cel(
        vec![Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: "!variables.windows && size(variables.windowsImages) > 0".to_owned(),
            field: Field::Absolute(format!(
                "[{}].map(l, size(l) > 0 ? [l[0]] : [])[0]",
                lists.join(" + ")
            )),
            removable: false,
        }],
        "a Windows image (params.windowsImages) in a pod that nothing pins to Windows nodes (no OS node selector, spec.os.name, affinity or Windows RuntimeClass): the scheduler may place it on a Linux node, where it cannot run",
    )
}
