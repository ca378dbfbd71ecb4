//! WIN-BUILD-MIXED, WIN-BUILD-NODE-MISMATCH and WIN-BUILD-NO-NODE: a
//! Windows image's build must be one its node's build runs
//! ([`runs_on`]: the same build below 10.0.20348, the previous LTSC's
//! builds up to the node's from it on).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::images::ImageFacts;
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, image_in};
use crate::decision::view::ContainerRef;
use crate::decision::windows_builds::{self, Build, WINDOWS_BUILD_LABEL, runs_on};

pub static MIXED: Rule = Rule {
    info: RuleInfo {
        id: "WIN-BUILD-MIXED",
        title: "Images in one pod need different Windows builds",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "Containers of one pod whose images need different Windows builds, read from their tags with the table in `policies/windows-builds.yaml` (`ltsc2019`/`1809` = 10.0.17763, `ltsc2022` = 10.0.20348, `ltsc2025` = 10.0.26100, `10.0.17763.5830`, `4.8-windowsservercore-ltsc2022`, `nanoserver-1809`, ...). HostProcess pods are exempt: HostProcess containers run on the host and need no matching build.",
        why: "With process isolation, the default on Windows nodes, a container shares the node's kernel, so its base image's Windows build must be one the node's build runs: the same build below Windows Server 2022 (10.0.20348), and from it on any build from the previous LTSC release up to the node's (a 10.0.26100 node runs 10.0.20348 and 10.0.26100 images). Images no one node build runs together cannot all start: one container never starts. Under Hyper-V isolation the containers of a pod share one utility VM, which boots one build, so the images must still agree with each other.",
        source: "Layer: the container runtime, every Kubernetes version: the pod's containers share one node, whose build must run each image. containerd's platform matcher, which picks the Windows manifest it pulls: `checkWindowsHostAndContainerCompat` in github.com/containerd/platforms (`platform_compat_windows.go` v0.2.1 in containerd 1.7.19 and later 1.7; `platform_windows_compat.go` v1.0.0-rc.1 in containerd 2.0.2 to 2.1, v1.0.0-rc.2 in containerd 2.2 with ltsc2025 in `compatLTSCReleases`): an exact build below 10.0.20348, from it on any build from the previous LTSC up to the host's; containerd 1.7.6 to 1.7.18 call hcsshim's `osversion.CheckHostAndContainerCompat` (the same check), containerd 1.7.0 to 1.7.5 match the host's build exactly (`platforms/defaults_windows.go`). hcsshim (v0.11 to v0.14, `cmd/containerd-shim-runhcs-v1`, `internal/hcsoci`) makes no image-build check of its own before starting a process-isolated container: the host's compute service refuses a build it does not run. Microsoft, 'Windows container version compatibility' (Windows Server 2025 hosts run Windows Server 2022 images with process isolation); Azure/AKS #5608. Kubernetes Windows docs, 'Windows OS version compatibility': the host OS version must match the container base image OS version (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'; Kubernetes 1.9 documentation, 'Windows Server Containers', 'Operating system restrictions'; 'Image Version Matching': otherwise the container will not be able to start). Microsoft, 'Windows container version compatibility'.",
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
        what: "A container image whose Windows build (from its tag, or the registry's facts) is not one the build the pod selects runs, with `nodeSelector: {node.kubernetes.io/windows-build: ...}` or through its RuntimeClass's `scheduling.nodeSelector`: below 10.0.20348 the builds must be equal; a 10.0.20348 node runs only 10.0.20348 images; a 10.0.26100 node runs 10.0.20348 to 10.0.26100. Skipped for HostProcess pods. For pods whose RuntimeClass is a Hyper-V one (`params.hypervRuntimeClasses` / `params.hypervRuntimeHandlers`) only an image the registry shows to be an index is judged: Hyper-V isolation starts older builds, but containerd pulls an index's Windows entry by the node's build whatever the RuntimeClass.",
        why: "The pod can only be scheduled onto nodes of the selected build, where containerd finds no manifest of an index to pull (`no match for platform in manifest`) or a process-isolated container of a build the host does not run fails to start (`The container operating system does not match the host operating system`).",
        source: "Layer: the scheduler (the kubelet labels each Windows node with node.kubernetes.io/windows-build, Kubernetes 1.17 and later) and the container runtime. containerd's platform matcher, which picks the Windows manifest it pulls: `checkWindowsHostAndContainerCompat` in github.com/containerd/platforms (`platform_compat_windows.go` v0.2.1 in containerd 1.7.19 and later 1.7; `platform_windows_compat.go` v1.0.0-rc.1 in containerd 2.0.2 to 2.1, v1.0.0-rc.2 in containerd 2.2 with ltsc2025 in `compatLTSCReleases`): an exact build below 10.0.20348, from it on any build from the previous LTSC up to the host's; containerd 1.7.6 to 1.7.18 call hcsshim's `osversion.CheckHostAndContainerCompat` (the same check), containerd 1.7.0 to 1.7.5 match the host's build exactly (`platforms/defaults_windows.go`). hcsshim (v0.11 to v0.14, `cmd/containerd-shim-runhcs-v1`, `internal/hcsoci`) makes no image-build check of its own before starting a process-isolated container: the host's compute service refuses a build it does not run. Microsoft, 'Windows container version compatibility' (Windows Server 2025 hosts run Windows Server 2022 images with process isolation); Azure/AKS #5608. Hyper-V isolation (containerd runhcs-wcow-hypervisor) starts older builds, but the image is pulled first with the node's platform: containerd 2.2 `internal/cri/server/images/image_pull.go` (`PullImage` receives the runtime handler of KEP-4216, gate RuntimeClassInImageCriApi, and pulls with `platforms.DefaultSpec()`, the node's build; `snapshotterFromPodSandboxConfig` reads the handler for the snapshotter only), containerd 1.7 `pkg/cri/server/image_pull.go` (the client's default platform); `core/images/image.go` filters an index's children only, so a single manifest of an older build is pulled. Kubernetes Windows docs, 'Windows OS version compatibility' and 'Ensuring OS-specific workloads land on the appropriate container host' (the node.kubernetes.io/windows-build label); Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes' > 'Operating system restrictions': the host OS version must match the container base image OS version.",
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
        what: "Only when the cluster's Windows nodes are known (the webhook's cluster cache, a live `report`, or Node objects in the input): a `node.kubernetes.io/windows-build` selector no Windows node has, or a process-isolated image whose Windows build no Windows node runs (the same build below 10.0.20348; from it on the previous LTSC's builds up to the node's: 10.0.26100 nodes run 10.0.20348 images, not 10.0.17763 ones). A node's build is its `node.kubernetes.io/windows-build` label, else its AKS `kubernetes.azure.com/os-sku` (Windows2019, Windows2022, Windows2025); a node whose runtime is containerd before 1.7.6 (`status.nodeInfo.containerRuntimeVersion`) runs only its own build. Under a Hyper-V RuntimeClass only images the registry shows to be an index are judged.",
        why: "The scheduler finds no node with the selected build, so the pod stays Pending forever; or no node runs the image's build, so it cannot be pulled or a process-isolated container cannot start on any of them.",
        source: "The scheduler's node selector matching, and the runtime: containerd's platform matcher, which picks the Windows manifest it pulls: `checkWindowsHostAndContainerCompat` in github.com/containerd/platforms (`platform_compat_windows.go` v0.2.1 in containerd 1.7.19 and later 1.7; `platform_windows_compat.go` v1.0.0-rc.1 in containerd 2.0.2 to 2.1, v1.0.0-rc.2 in containerd 2.2 with ltsc2025 in `compatLTSCReleases`): an exact build below 10.0.20348, from it on any build from the previous LTSC up to the host's; containerd 1.7.6 to 1.7.18 call hcsshim's `osversion.CheckHostAndContainerCompat` (the same check), containerd 1.7.0 to 1.7.5 match the host's build exactly (`platforms/defaults_windows.go`). hcsshim (v0.11 to v0.14, `cmd/containerd-shim-runhcs-v1`, `internal/hcsoci`) makes no image-build check of its own before starting a process-isolated container: the host's compute service refuses a build it does not run. Microsoft, 'Windows container version compatibility' (Windows Server 2025 hosts run Windows Server 2022 images with process isolation); Azure/AKS #5608. Hyper-V pods: containerd pulls with the node's platform whatever the runtime handler (containerd 2.2 `internal/cri/server/images/image_pull.go`, 1.7 `pkg/cri/server/image_pull.go`). Kubernetes documentation 'Windows containers in Kubernetes' > 'Windows OS version compatibility'. The node builds come from the nodes' `node.kubernetes.io/windows-build` labels, else AKS's `kubernetes.azure.com/os-sku`.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Use images built for a Windows build your nodes run (or select that build), add a node pool of the build the image needs, or run it under a Hyper-V RuntimeClass.",
        example: "# the cluster's Windows nodes are all 10.0.26100 (ltsc2025)\ncontainers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2019",
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
    if cx.host_process.all {
        return;
    }
    for ImageBuilds {
        container,
        image,
        builds: needs,
        facts,
    } in image_builds(cx)
    {
        // Under Hyper-V isolation only an index's pull is judged (`is_index`).
        if cx.hyperv && !is_index(facts) {
            continue;
        }
        let mut held_back: Option<(&str, Build, String)> = None;
        let runs = nodes.nodes.iter().any(|n| {
            let Some(host) = n.build().and_then(|b| b.parse::<Build>().ok()) else {
                return false;
            };
            needs.iter().any(|b| {
                if !runs_on(host, *b) {
                    return false;
                }
                if *b != host && n.pulls_stable_abi() == Some(false) {
                    let runtime = match (n.containerd_version, n.containerd_patch) {
                        (Some(v), Some(p)) => format!("containerd {v}.{p}"),
                        _ => "containerd".to_owned(),
                    };
                    held_back.get_or_insert((n.name.as_str(), host, runtime));
                    return false;
                }
                true
            })
        });
        if runs {
            continue;
        }
        let why = match held_back {
            Some((node, host, runtime)) => format!(
                "; node {node} ({host}) would run it, but its runtime {runtime} pulls only images of its own build (containerd 1.7.6 and later pull the previous LTSC's images)"
            ),
            None => String::new(),
        };
        let what = if cx.hyperv {
            "containerd pulls only the image's Windows manifests the node's build runs, whatever the RuntimeClass"
        } else {
            "a process-isolated container cannot start on any of them"
        };
        out.report(
            cx.container_field(&container, &["image"]),
            format!(
                "{} but the cluster's Windows nodes have {}: {what}{why}",
                needs_text(image, &needs, facts),
                known()
            ),
        );
    }
}

/// Is the image, by the registry's facts, an index (more than one
/// platform)? Hyper-V isolation starts an older build in its utility VM,
/// but containerd's CRI pulls with the node's own platform matcher whatever
/// the pod's runtime handler: containerd 2.2
/// `internal/cri/server/images/image_pull.go` (`PullImage` receives the
/// runtime handler of KEP-4216 and pulls with `platforms.DefaultSpec()`,
/// the node's build) and 1.7 `pkg/cri/server/image_pull.go` (the client's
/// default platform). So an index's Windows entries must still be builds
/// the node runs ([`runs_on`]); a single manifest is not filtered
/// (`core/images/image.go` `Manifest` checks the platforms of an index's
/// children only), and a tag alone does not say which it is.
fn is_index(facts: Option<&ImageFacts>) -> bool {
    facts.is_some_and(|f| f.platforms.len() > 1)
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
    // The first image (its name and what it needs), and the builds of the
    // images so far that some one host build runs together.
    let mut first: Option<(String, String)> = None;
    let mut kept: Vec<Vec<Build>> = Vec::new();
    for ImageBuilds {
        container,
        image,
        builds,
        facts,
    } in image_builds(cx)
    {
        let Some((first_name, first_needs)) = &first else {
            first = Some(needs_parts(image, &builds, facts));
            kept.push(builds);
            continue;
        };
        // A build set already kept adds nothing (and keeps this linear in
        // the containers: a pod of thousands has a handful of sets).
        if kept.contains(&builds) {
            continue;
        }
        kept.push(builds);
        if one_host_runs_all(&kept) {
            continue;
        }
        let builds = kept.pop().unwrap_or_default();
        out.report(
            cx.container_field(&container, &["image"]),
            format!(
                "{} but {first_name} in the same pod {first_needs}; no Windows build runs both, so one of them cannot start on the node",
                needs_text(image, &builds, facts),
            ),
        );
    }
}

/// Is there a host build that runs, for each image, one of its builds? A
/// host that runs a set of builds is never needed newer than the newest of
/// them ([`runs_on`] only narrows as the host grows), so the images' own
/// builds are the hosts to try.
pub fn one_host_runs_all(images: &[Vec<Build>]) -> bool {
    // Distinct hosts against distinct build sets: a pod of thousands of
    // containers has a handful of each, so this stays linear in the
    // containers (every host against every image was quadratic: 16,000
    // containers, 256 million comparisons).
    let mut hosts: Vec<Build> = images.iter().flatten().copied().collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut sets: Vec<&Vec<Build>> = images.iter().collect();
    sets.sort_unstable();
    sets.dedup();
    hosts.iter().any(|host| {
        sets.iter()
            .all(|builds| builds.iter().any(|b| runs_on(*host, *b)))
    })
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
    if cx.host_process.all {
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
        // Under Hyper-V isolation only an index's pull is judged.
        if cx.hyperv && !is_index(facts) {
            continue;
        }
        if !builds.iter().any(|b| runs_on(node, *b)) {
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
                    "{} but {via} nodes with {WINDOWS_BUILD_LABEL}={selected}; {}",
                    needs_text(image, &builds, facts),
                    if cx.hyperv {
                        "containerd pulls only the image's Windows manifests the node's build runs, whatever the RuntimeClass"
                    } else {
                        "a process-isolated container of a build the node does not run does not start"
                    }
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
        "the image needs a Windows build (by its tag) that no one Windows build runs together with the first image of the pod with a known build; one of them cannot start on the node",
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
        "the image needs a Windows build (by its tag) that the build the pod selects with nodeSelector node.kubernetes.io/windows-build does not run; a process-isolated container of such a build does not start",
    )
    .partly(
        "the build is read from the pod's nodeSelector only (the webhook also reads a RuntimeClass's scheduling.nodeSelector), and Hyper-V isolation is recognised by the names in params.hypervRuntimeClasses only (the webhook also reads RuntimeClass handlers)",
    )
}
