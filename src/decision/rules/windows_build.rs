//! WIN-BUILD-MIXED and WIN-BUILD-NODE-MISMATCH: Windows images must match
//! the node's Windows build under process isolation.

use super::{ContainerRef, Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::admission_policy::cel::{Export, ExportContext, Probe, ProbeScope, image_in};
use crate::decision::images::ImageFacts;
use crate::decision::windows_builds::{self, Build, WINDOWS_BUILD_LABEL};

pub static MIXED: Rule = Rule {
    info: RuleInfo {
        id: "WIN-BUILD-MIXED",
        title: "Images in one pod need different Windows builds",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "Containers of one pod whose images need different Windows builds, read from their tags with the table in `policies/windows-builds.yaml` (`ltsc2019`/`1809` = 10.0.17763, `ltsc2022` = 10.0.20348, `ltsc2025` = 10.0.26100, `10.0.17763.5830`, `4.8-windowsservercore-ltsc2022`, `nanoserver-1809`, ...). HostProcess pods are exempt: HostProcess containers run on the host and need no matching build.",
        why: "With process isolation, the default on Windows nodes, a container shares the node's kernel, so its base image's Windows build must equal the node's. Images of two builds cannot both match one node: one container never starts. Under Hyper-V isolation the containers of a pod share one utility VM, which boots one build, so the images must still agree with each other.",
        source: "Layer: the container runtime (HCS), every Kubernetes version, Docker and containerd alike: a process-isolated container's base image must be the host's Windows build, else the runtime refuses to start it; the pod's containers share one node, so images of two builds cannot all start. Kubernetes Windows docs, 'Windows OS version compatibility': the host OS version must match the container base image OS version (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'; Kubernetes 1.9 documentation, 'Windows Server Containers', 'Operating system restrictions'; 'Image Version Matching': otherwise the container will not be able to start). Microsoft, 'Windows container version compatibility'.",
        doc_url: "https://learn.microsoft.com/virtualization/windowscontainers/deploy-containers/version-compatibility",
        fix: "Rebuild or retag the images on one Windows base (e.g. all `ltsc2022`), then pin the pod with `nodeSelector: {node.kubernetes.io/windows-build: '10.0.20348'}`.",
        example: "containers:\n- name: app\n  image: mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022\n- name: logger\n  image: mcr.microsoft.com/windows/nanoserver:1809",
        since: None,
        until: None,
    },
    check: check_mixed,
    export: export_mixed,
};

pub static NODE_MISMATCH: Rule = Rule {
    info: RuleInfo {
        id: "WIN-BUILD-NODE-MISMATCH",
        title: "Image Windows build contradicts the pod's windows-build node selector",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "A container image whose Windows build (from its tag) differs from the build the pod selects with `nodeSelector: {node.kubernetes.io/windows-build: ...}` or through its RuntimeClass's `scheduling.nodeSelector`. Skipped for HostProcess pods and for pods whose RuntimeClass is a Hyper-V one (`params.hypervRuntimeClasses` / `params.hypervRuntimeHandlers`): Hyper-V isolation runs older builds on newer hosts.",
        why: "The pod can only be scheduled onto nodes of the selected build, where a process-isolated container of another build fails to start (`The container operating system does not match the host operating system`).",
        source: "Layer: the scheduler (the kubelet labels each Windows node with node.kubernetes.io/windows-build, Kubernetes 1.17 and later) and the container runtime, which refuses a process-isolated image of another build; Hyper-V isolation (containerd runhcs-wcow-hypervisor) runs older builds. Kubernetes Windows docs, 'Windows OS version compatibility' and 'Ensuring OS-specific workloads land on the appropriate container host' (the node.kubernetes.io/windows-build label); Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes' > 'Operating system restrictions': the host OS version must match the container base image OS version.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Use images built for the selected Windows build, or select the build the images need; to run an older build on a newer host, use a Hyper-V RuntimeClass (handler `runhcs-wcow-hypervisor`).",
        example: "nodeSelector:\n  kubernetes.io/os: windows\n  node.kubernetes.io/windows-build: '10.0.17763'\ncontainers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
        since: None,
        until: None,
    },
    check: check_node,
    export: export_node_mismatch,
};

pub static NO_NODE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-BUILD-NO-NODE",
        title: "No Windows node in the cluster has the build the pod needs",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Only when the cluster's Windows nodes are known (the webhook's cluster cache, a live `report`, or Node objects in the input): a `node.kubernetes.io/windows-build` selector, or a process-isolated image's Windows build, that no Windows node has.",
        why: "The scheduler finds no node with the selected build, so the pod stays Pending forever; or the image's build matches no node, so a process-isolated container cannot start on any of them.",
        source: "The scheduler's node selector matching and the Windows container version compatibility rules (Kubernetes documentation 'Windows containers in Kubernetes' > 'Windows OS version compatibility'; Microsoft, 'Windows container version compatibility'). The node builds come from the nodes' `node.kubernetes.io/windows-build` labels.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Use images built for a Windows build your nodes run (or select that build), add a node pool of the build the image needs, or run it under a Hyper-V RuntimeClass.",
        example: "# the cluster's Windows nodes are all 10.0.20348 (ltsc2022)\ncontainers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2019",
        since: None,
        until: None,
    },
    check: check_no_node,
    export: |_| Export::Gap("needs the builds of the cluster's Windows nodes: live facts"),
};

fn check_no_node(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(nodes) = cx.nodes else { return };
    let builds = nodes.builds();
    if builds.is_empty() {
        return;
    }
    let known = || {
        builds
            .iter()
            .map(|(b, node)| format!("{b} (node {node})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(selected) = cx
        .spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(WINDOWS_BUILD_LABEL))
    {
        if !builds.contains_key(selected) {
            out.report(
                cx.spec_field(&["nodeSelector"]).map_key(WINDOWS_BUILD_LABEL),
                format!(
                    "no Windows node in the cluster has {WINDOWS_BUILD_LABEL}={selected} (the nodes have {}): the pod stays Pending",
                    known()
                ),
            );
        }
        return;
    }
    if cx.host_process.all || cx.hyperv {
        return;
    }
    for ImageBuilds {
        container,
        image,
        builds: needs,
        facts,
    } in image_builds(cx)
    {
        if !needs
            .iter()
            .any(|b| builds.contains_key(b.to_string().as_str()))
        {
            out.report(
                cx.container_field(&container, &["image"]),
                format!(
                    "{} but the cluster's Windows nodes have {}: a process-isolated container cannot start on any of them",
                    needs_text(image, &needs, facts),
                    known()
                ),
            );
        }
    }
}

/// A container whose image's Windows build(s) are known.
pub struct ImageBuilds<'v, 'a, 'e> {
    pub container: ContainerRef<'v, 'a>,
    pub image: &'v str,
    /// The builds it can run on under process isolation (one from a
    /// name; one per Windows platform from the registry's facts).
    pub builds: Vec<Build>,
    /// The registry's facts the builds come from, if they do.
    pub facts: Option<&'e ImageFacts>,
}

/// Each container with an image whose build(s) are known: from the
/// registry's facts where known, else from the image's name.
pub fn image_builds<'c, 'e, 'v, 'a>(
    cx: &'c RuleContext<'e, 'v, 'a>,
) -> impl Iterator<Item = ImageBuilds<'v, 'a, 'e>> + use<'c, 'e, 'v, 'a> {
    cx.containers().filter_map(|container| {
        let image: &'v str = container.container.image.as_deref()?;
        let (builds, facts) = cx.windows_builds(image);
        (!builds.is_empty()).then_some(ImageBuilds {
            container,
            image,
            builds,
            facts,
        })
    })
}

/// `image X needs Windows build 10.0.17763 (ltsc2019)`, or with facts
/// `image X (sha256:...) has Windows platforms for 10.0.17763 (ltsc2019),
/// 10.0.20348 (ltsc2022) only`.
fn needs_text(image: &str, builds: &[Build], facts: Option<&ImageFacts>) -> String {
    let (name, needs) = needs_parts(image, builds, facts);
    format!("image {name} {needs}")
}

/// The image's name (with its digest, from facts) and what it needs.
fn needs_parts(image: &str, builds: &[Build], facts: Option<&ImageFacts>) -> (String, String) {
    let list = builds
        .iter()
        .map(|b| describe(*b))
        .collect::<Vec<_>>()
        .join(", ");
    match facts {
        Some(f) => (
            f.name(image),
            format!("has Windows platforms for {list} only"),
        ),
        None => (image.to_owned(), format!("needs Windows build {list}")),
    }
}

/// `10.0.17763 (ltsc2019)`, or the bare build.
pub fn describe(b: Build) -> String {
    match windows_builds::release_name(b) {
        Some(name) => format!("{b} ({name})"),
        None => b.to_string(),
    }
}

fn check_mixed(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.host_process.all {
        return;
    }
    // The first image (its name and what it needs) and the builds every
    // image so far can share.
    let mut first: Option<((String, String), Vec<Build>)> = None;
    for ImageBuilds {
        container,
        image,
        builds,
        facts,
    } in image_builds(cx)
    {
        match &mut first {
            None => first = Some((needs_parts(image, &builds, facts), builds)),
            Some(((first_name, first_needs), common)) => {
                let shared: Vec<Build> = common
                    .iter()
                    .copied()
                    .filter(|b| builds.contains(b))
                    .collect();
                if shared.is_empty() {
                    out.report(
                        cx.container_field(&container, &["image"]),
                        format!(
                            "{} but {first_name} in the same pod {first_needs}; one of them cannot match the node",
                            needs_text(image, &builds, facts),
                        ),
                    );
                } else {
                    *common = shared;
                }
            }
        }
    }
}

/// The build the pod selects, and where: its nodeSelector, else its RuntimeClass.
pub fn selected_build<'e>(cx: &RuleContext<'e, '_, '_>) -> Option<(&'e str, &'static str)> {
    if let Some(v) = cx
        .spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(WINDOWS_BUILD_LABEL))
    {
        return Some((v, "nodeSelector"));
    }
    cx.runtime_class
        .and_then(|rc| rc.windows_build.as_deref())
        .map(|v| (v, "RuntimeClass"))
}

fn check_node(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.host_process.all || cx.hyperv {
        return;
    }
    let Some((selected, source)) = selected_build(cx) else {
        return;
    };
    let Ok(node) = selected.parse::<Build>() else {
        return;
    };
    for ImageBuilds {
        container,
        image,
        builds,
        facts,
    } in image_builds(cx)
    {
        if !builds.contains(&node) {
            let via = match source {
                "RuntimeClass" => format!(
                    "RuntimeClass {} selects",
                    cx.spec.runtime_class_name.as_deref().unwrap_or_default()
                ),
                _ => "the pod selects".to_owned(),
            };
            out.report(
                cx.container_field(&container, &["image"]),
                format!(
                    "{} but {via} nodes with {WINDOWS_BUILD_LABEL}={selected}; a process-isolated container of another build does not start",
                    needs_text(image, &builds, facts)
                ),
            );
        }
    }
}

/// WIN-BUILD-MIXED as CEL, for `winadmit admission-policy`.
fn export_mixed(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "!variables.allHostProcess && {}",
                image_in("otherBuildImages")
            ),
            &["image"],
        )],
        "the image needs another Windows build (by its tag) than the first image of the pod with a known build; one of them cannot match the node",
    )
}

/// WIN-BUILD-NODE-MISMATCH as CEL, for `winadmit admission-policy`.
fn export_node_mismatch(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "!variables.allHostProcess && !variables.hyperv && {}",
                image_in("mismatchImages")
            ),
            &["image"],
        )],
        "the image needs another Windows build (by its tag) than the pod selects with nodeSelector node.kubernetes.io/windows-build; a process-isolated container of another build does not start",
    )
    .partly(
        "the build is read from the pod's nodeSelector only (the webhook also reads a RuntimeClass's scheduling.nodeSelector), and Hyper-V isolation is recognised by the names in params.hypervRuntimeClasses only (the webhook also reads RuntimeClass handlers)",
    )
}
