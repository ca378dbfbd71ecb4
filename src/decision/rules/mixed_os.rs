//! WIN-MIXED-OS: Windows and Linux containers in one pod.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, image_in};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-MIXED-OS",
        title: "Windows and Linux containers cannot share a pod",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "A pod with a Windows image (`params.windowsImages`, or a tag naming a Windows build) and an image known to run only on Linux (`params.linuxImages`: nginx, busybox, alpine, ubuntu, debian, redis, postgres, envoyproxy/envoy, istio/proxyv2, ...; or a Linux distribution word in the tag such as `alpine`, `bookworm`, `ubuntu`). Multi-OS images (registry.k8s.io/pause, agnhost, CSI sidecars) are never counted as Linux. Where the registry's facts are known (`--image-facts`, `--registry`), they decide instead of the name: an image with only Windows platforms is Windows, one with no Windows platform is Linux.",
        why: "All containers of a pod run on one node, under one OS. A pod mixing Windows and Linux images cannot start anywhere: on a Windows node the Linux image has no matching platform, and the reverse.",
        source: "Layer: the scheduler and the container runtime, every Kubernetes version and runtime: all containers of a pod run on one node, and the runtime pulls each image for that node's OS, so the Linux image on a Windows node (or the Windows image on a Linux node) fails to pull (no matching manifest) and the pod never starts. Kubernetes Windows docs, 'Compute': you cannot deploy Windows and Linux containers in the same Pod; all containers of a Pod are scheduled onto a single node, where each node represents a specific platform and architecture (Kubernetes 1.18 documentation, 'Intro to Windows support in Kubernetes'; Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes').",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#windows-nodes-in-kubernetes",
        fix: "Split the pod: one Windows pod, one Linux pod, talking over a Service. Use the Windows build of a sidecar where one exists; if an image is wrongly taken for Linux-only, override `params.linuxImages` in the policy.",
        example: "nodeSelector:\n  kubernetes.io/os: windows\ncontainers:\n- name: web\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022\n- name: proxy\n  image: envoyproxy/envoy:v1.30.1",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(windows) = cx
        .containers()
        .filter_map(|c| c.container.image.as_deref())
        .find(|i| cx.windows_only(i))
    else {
        return;
    };
    let windows = match cx.registry_facts(windows) {
        Some(f) => format!("{} with platforms {}", f.name(windows), f.platform_list()),
        None => windows.to_owned(),
    };
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        if !cx.linux_only(image) {
            continue;
        }
        let image = match cx.registry_facts(image) {
            Some(f) => format!("{} with platforms {}", f.name(image), f.platform_list()),
            None => image.to_owned(),
        };
        out.report(
            cx.container_field(&c, &["image"]),
            format!(
                "image {image} runs only on Linux but {windows} in the same pod is a Windows image; a pod runs on one node, under one OS"
            ),
        );
    }
}

/// WIN-MIXED-OS as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!("variables.anyWindowsImage && {}", image_in("linuxImages")),
            &["image"],
        )],
        "the image runs only on Linux (params.linuxImages, params.linuxTagWords) but the pod also has a Windows image; a pod runs on one node, under one OS",
    )
}
