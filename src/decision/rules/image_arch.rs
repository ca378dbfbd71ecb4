//! WIN-IMAGE-ARCH-NO-NODE: an image whose Windows platforms are all for
//! architectures none of the cluster's Windows nodes has.

use std::collections::BTreeSet;

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, NEEDS_IMAGE_PLATFORMS};

/// The node label the kubelet sets to its Go architecture.
const ARCH_LABEL: &str = "kubernetes.io/arch";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-IMAGE-ARCH-NO-NODE",
        title: "No Windows node has an architecture the image publishes",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Only where both the registry's facts (`--image-facts`, `--registry`) and the cluster's Windows nodes (the webhook's cluster cache, a live `report`, Node objects in the input) are known: a container of a Windows-targeted pod whose image's Windows platforms are all for architectures (`amd64`, `arm64`) that no Windows node has, by the nodes' `kubernetes.io/arch` label. Nodes without the label are not counted, and without any labelled node there is no verdict; an image with no Windows platform at all is WIN-LINUX-IMAGE's.",
        why: "The kubelet pulls the variant of the image for its own node's OS and architecture. When the image has a Windows variant only for architectures none of the Windows nodes has, the pull fails on every node the pod can go to (`no matching manifest for windows/amd64`) and the container never starts.",
        source: "Layer: the container runtime, every Kubernetes version and runtime: containerd (and Docker) pick the entry of the image index whose `platform` matches the node's `os` and `architecture`, and refuse a single manifest whose config names another architecture. OCI image index specification, `platform.architecture` (Go's GOARCH values); Kubernetes well-known label `kubernetes.io/arch`, which the kubelet sets to its node's GOARCH.",
        doc_url: "https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-arch",
        fix: "Publish the image for the architecture of your Windows nodes (an image index with a `windows/<arch>` entry for each), or add Windows nodes of the architecture the image has.",
        example: "# the cluster's Windows nodes are all amd64\ncontainers:\n- name: edge\n  image: contoso/edge:1   # publishes windows/arm64 only",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap(NEEDS_IMAGE_PLATFORMS),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(nodes) = cx.nodes else { return };
    let archs: BTreeSet<String> = nodes
        .nodes
        .iter()
        .filter_map(|n| n.labels.get(ARCH_LABEL))
        .map(|a| a.to_ascii_lowercase())
        .collect();
    if archs.is_empty() {
        return;
    }
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        let Some(facts) = cx.registry_facts(image) else {
            continue;
        };
        let mut windows = facts.platforms.iter().filter(|p| p.is_windows()).peekable();
        if windows.peek().is_none() {
            continue;
        }
        if windows.any(|p| archs.contains(&p.architecture.to_ascii_lowercase())) {
            continue;
        }
        out.report(
            cx.container_field(&c, &["image"]),
            format!(
                "image {} has platforms {}: no Windows variant for the architecture of any Windows node in the cluster ({ARCH_LABEL}: {})",
                facts.name(image),
                facts.platform_list(),
                archs.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
        );
    }
}
