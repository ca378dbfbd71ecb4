//! WIN-LINUX-UNPINNED: a pod with only Linux images that nothing pins to an
//! OS, in a cluster that has Windows nodes.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind};
use crate::decision::rules::cel::Export;
use crate::decision::targeting::Os;

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-LINUX-UNPINNED";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "Linux-only images in a pod not pinned to Linux, in a cluster with Windows nodes",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "In a cluster that has Windows nodes (the webhook's cluster cache, the Node objects in `lint` and `report` input, a live report), a pod spec that no nodeSelector, `spec.os.name`, affinity, RuntimeClass or Windows setting pins to an OS, whose every image has no Windows variant: by the registry's facts (`--image-facts`, `--registry`), or, without facts, because its repository is in `params.linuxImages` (nginx, busybox, redis, fluent/fluent-bit, ...). Tolerating the Windows nodes' taint, or every taint (`operator: Exists`, as most monitoring and logging DaemonSets do), makes no difference: with or without a taint, nothing keeps the pod off the Windows nodes. The mutating webhook adds `kubernetes.io/os: linux` (`mutation.pinLinuxImages`, the default).",
        why: "The scheduler places a pod that selects no OS on any node whose taints it tolerates; Windows node pools are often untainted, and a tolerate-everything toleration defeats the taint. On a Windows node the image has no Windows variant to pull: the pod stays in ImagePullBackOff there, and a DaemonSet has one such pod on every Windows node.",
        source: "Layer: the scheduler and the container runtime, every Kubernetes version and runtime: without an OS selector the pod may be placed on a Windows node, whose runtime pulls only an image's Windows variant. Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': Linux pods should select `kubernetes.io/os: linux` in a cluster with Windows nodes; taints keep off only the pods that do not tolerate them.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Add `nodeSelector: {kubernetes.io/os: linux}` (the mutating webhook does when `mutation.pinLinuxImages` is true, the default).",
        example: "# the cluster has Windows nodes\nspec:\n  tolerations:\n  - operator: Exists\n  containers:\n  - name: agent\n    image: fluent/fluent-bit:3.2",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "needs to know whether the cluster has Windows nodes, which an admission policy cannot see; the webhook's pin-linux registration judges it",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !cx.target.windows.is_empty() || !cx.target.linux.is_empty() {
        return;
    }
    let Some(nodes) = cx.nodes.filter(|n| !n.is_empty()) else {
        return;
    };
    let mut first = None;
    for c in cx.containers() {
        let Some(image) = c.container.image.as_deref() else {
            return;
        };
        let why = match cx.registry_facts(image) {
            Some(f) if f.no_windows() => format!("has platforms {}", f.platform_list()),
            Some(_) => return,
            None if cx.image(image).linux_listed => {
                "runs only on Linux (params.linuxImages)".to_owned()
            }
            None => return,
        };
        first.get_or_insert((c, image, why));
    }
    let Some((c, image, why)) = first else { return };
    let names: Vec<&str> = nodes
        .nodes
        .iter()
        .take(3)
        .map(|n| n.name.as_str())
        .collect();
    let more = if nodes.nodes.len() > names.len() {
        ", ..."
    } else {
        ""
    };
    let fix = Fix {
        kind: FixKind::PinByImages,
        description: format!(
            "add nodeSelector kubernetes.io/os=linux (image {image} has no Windows variant)"
        ),
        ops: vec![crate::decision::targeting::add_os_node_selector(
            &cx.workload.spec_path,
            cx.spec,
            Os::Linux,
        )],
    };
    out.report_with_fix(
        cx.container_field(&c, &["image"]),
        format!(
            "image {image} {why} but nothing pins the pod to Linux nodes, and the cluster has Windows nodes ({}{more}) where the scheduler may place it",
            names.join(", ")
        ),
        fix,
    );
}
