//! WIN-LINUX-IMAGE and WIN-LINUX-IMAGE-TAG: a Linux-only image in a pod
//! that targets Windows nodes.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, image_in};

pub static LISTED: Rule = Rule {
    info: RuleInfo {
        id: "WIN-LINUX-IMAGE",
        title: "Linux-only image in a Windows pod",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A container of a Windows-targeted pod (HostProcess pods included) whose image has no Windows platform: by the facts its registry gives (`--image-facts`, `--registry`: the image index or manifest lists no `windows` platform), or, for an image without facts, because it comes from a repository the policy knows to publish only Linux images (`params.linuxImages`: nginx, busybox, alpine, ubuntu, debian, redis, postgres, envoyproxy/envoy, istio/proxyv2, ..., matched on the repository after `docker.io/` and `library/` are stripped). A tag naming Windows (`nanoserver`, `windowsservercore`, `windows-*`, `ltsc2022`, a Windows build) is never Linux-only by name. The registry's facts win over the name. A pod that also has a Windows image gets WIN-MIXED-OS for the image instead.",
        why: "A Windows node pulls the image's `windows` variant; a repository that publishes only Linux images has none, so the pull fails (`no matching manifest for windows/amd64`) and the container never starts. A HostProcess container is no exception: it still runs a Windows image.",
        source: "Layer: the container runtime, every Kubernetes version and runtime: the kubelet asks the runtime to pull the image for the node's platform (windows/amd64 and its build), and an image without a Windows variant cannot be pulled there (the pod stays in ErrImagePull / ImagePullBackOff). Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': Windows containers run only on Windows nodes and Linux containers only on Linux nodes; 'Windows OS version compatibility': the container base image must be a Windows image for the host's build.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Use a Windows image (or the Windows tag of a multi-OS image), or run the container in a Linux pod. If the repository does publish Windows images, remove it from `params.linuxImages` in the policy.",
        example: "nodeSelector:\n  kubernetes.io/os: windows\ncontainers:\n- name: web\n  image: nginx:1.27",
        since: None,
        until: None,
    },
    check: check_listed,
    export: export_listed,
};

pub static TAG_WORD: Rule = Rule {
    info: RuleInfo {
        id: "WIN-LINUX-IMAGE-TAG",
        title: "Image tag names a Linux distribution in a Windows pod",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A container of a Windows-targeted pod whose image tag has a word naming a Linux distribution (`params.linuxTagWords`: alpine, debian, ubuntu, bookworm, bullseye, buster, stretch, jammy, focal, noble, bionic, centos, ubi8, ubi9; tags are split at `-` and `_`, so `python:3.12-alpine` and `powershell:lts-debian-12` count, `slim` alone does not) while its repository is not in `params.linuxImages`, and no registry facts are known for it (with facts, WIN-LINUX-IMAGE decides). A tag that also names Windows never counts. A pod that also has a Windows image gets WIN-MIXED-OS for the image instead.",
        why: "Such a tag almost always names a Linux-only build, which a Windows node cannot pull (`no matching manifest for windows/amd64`). It is a guess from the name, so a warning: some registries publish Windows builds under those tags.",
        source: "Layer: the container runtime, as for WIN-LINUX-IMAGE: a Windows node pulls only an image's Windows variant. The tag words are a heuristic (official images put the Linux distribution in the tag: `-alpine`, `-bookworm`, `-jammy`); Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Use the image's Windows tag (e.g. `-nanoserver-ltsc2022`, `-windowsservercore-ltsc2022`), or run the container in a Linux pod. If the registry publishes a Windows build under this tag, skip the rule for the pod with `winadmit.io/skip.WIN-LINUX-IMAGE-TAG`.",
        example: "nodeSelector:\n  kubernetes.io/os: windows\ncontainers:\n- name: app\n  image: python:3.12-alpine",
        since: None,
        until: None,
    },
    check: check_tag_word,
    export: export_tag_word,
};

/// The pod has a Windows image, so WIN-MIXED-OS reports its Linux images.
fn has_windows_image(cx: &RuleContext<'_, '_, '_>) -> bool {
    cx.containers()
        .filter_map(|c| c.container.image.as_deref())
        .any(|i| cx.windows_only(i))
}

fn check_listed(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if has_windows_image(cx) {
        return;
    }
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        let message = match cx.registry_facts(image) {
            Some(f) if f.no_windows() => format!(
                "image {} has platforms {}: no Windows variant to pull on the Windows nodes the pod targets",
                f.name(image),
                f.platform_list()
            ),
            Some(_) => continue,
            None if cx.image(image).linux_listed => format!(
                "image {image} runs only on Linux (its repository is in params.linuxImages) but the pod targets Windows nodes: there is no Windows variant to pull"
            ),
            None => continue,
        };
        out.report(cx.container_field(&c, &["image"]), message);
    }
}

fn check_tag_word(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if has_windows_image(cx) {
        return;
    }
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            continue;
        };
        // The registry's facts, when known, are WIN-LINUX-IMAGE's to judge.
        if cx.registry_facts(image).is_some() {
            continue;
        }
        let facts = cx.image(image);
        if facts.linux && !facts.linux_listed {
            let word = cx.params.linux_tag_word(image).unwrap_or_default();
            out.report(
                cx.container_field(&c, &["image"]),
                format!(
                    "image {image} has the Linux tag word {word} (params.linuxTagWords) but the pod targets Windows nodes: a Linux-only build has no Windows variant to pull"
                ),
            );
        }
    }
}

/// WIN-LINUX-IMAGE-TAG as CEL, for `winadmit admission-policy`.
fn export_tag_word(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "!variables.anyWindowsImage && {}",
                image_in("taggedLinuxImages")
            ),
            &["image"],
        )],
        "the image tag has a Linux distribution word (params.linuxTagWords) but the pod targets Windows nodes: a Linux-only build has no Windows variant to pull",
    )
}

/// WIN-LINUX-IMAGE as CEL, for `winadmit admission-policy`.
fn export_listed(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Container,
            format!(
                "!variables.anyWindowsImage && {}",
                image_in("listedLinuxImages")
            ),
            &["image"],
        )],
        "the image runs only on Linux (its repository is in params.linuxImages) but the pod targets Windows nodes: there is no Windows variant to pull",
    )
    .partly(
        "images are judged by their names (params.linuxImages); the platforms their registries list (--image-facts, --registry) are not read",
    )
}
