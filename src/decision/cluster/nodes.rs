//! What the cluster's Windows nodes say: the projection of each Node
//! winadmit keeps, the facts they agree on, and a [`TargetCluster`](super::TargetCluster)
//! narrowed to them.

use super::{Observed, Runtime, Source, TargetCluster};
use crate::decision::tolerations::Taint;
use crate::decision::version::KubeVersion;

/// What winadmit keeps of one Windows node: a small projection of the Node
/// object (name, the labels and taints scheduling reads, kubelet and
/// runtime versions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowsNode {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub kubelet_version: Option<KubeVersion>,
    pub runtime: Option<Runtime>,
    /// `major.minor` of containerd, when the node runs it.
    pub containerd_version: Option<KubeVersion>,
    /// containerd's patch release (`22` of `1.7.22`), when it says one.
    pub containerd_patch: Option<u32>,
    /// The taints that keep pods without a toleration off the node
    /// (`NoSchedule`, `NoExecute`), less those Kubernetes sets itself on
    /// any node for a while (`node.kubernetes.io/not-ready`,
    /// `unreachable`, `unschedulable`... and the cloud provider's
    /// `node.cloudprovider.kubernetes.io/uninitialized`).
    pub taints: Vec<Taint>,
}

/// The AKS node label naming a Windows node's OS release
/// (`Windows2019`, `Windows2022`, `Windows2025`).
pub const AKS_OS_SKU_LABEL: &str = "kubernetes.azure.com/os-sku";

/// The build of an AKS `os-sku` value.
#[must_use]
pub fn os_sku_build(sku: &str) -> Option<&'static str> {
    match sku.to_ascii_lowercase().as_str() {
        "windows2019" => Some("10.0.17763"),
        "windows2022" => Some("10.0.20348"),
        "windows2025" => Some("10.0.26100"),
        _ => None,
    }
}

/// What winadmit keeps of a node that is not a Windows node: what the node
/// selection of a pod reads (name and labels), so that winadmit can tell a
/// pod whose constraints admit only Windows nodes, and its taints, so that
/// a taint the Linux nodes carry too is never taken for the Windows nodes'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxNode {
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    /// As [`WindowsNode::taints`].
    pub taints: Vec<Taint>,
    /// Set when the node's OS labels and the operating system its kubelet
    /// reports disagree: such a node is never taken for a Windows node.
    pub os_conflict: Option<OsConflict>,
}

/// A node whose facts about its operating system contradict each other:
/// its `kubernetes.io/os` (or `beta.kubernetes.io/os`) label says one OS,
/// and `status.nodeInfo.operatingSystem` (which the kubelet reports from
/// the OS it runs on) or the other OS label says another. A kubelet may
/// set its own labels, so a label alone is not proof; winadmit takes such
/// a node for no Windows node, for any verdict or mutation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsConflict {
    /// What the labels say: `kubernetes.io/os=windows`, for example; empty
    /// when the node has no OS label.
    pub labels: String,
    /// What the kubelet reports (`status.nodeInfo.operatingSystem`), when it does.
    pub reported: Option<String>,
}

impl std::fmt::Display for OsConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.labels.is_empty() {
            f.write_str("with no OS label")?;
        } else {
            write!(f, "labelled {}", self.labels)?;
        }
        match &self.reported {
            Some(os) => write!(f, " but its kubelet reports operatingSystem {os}"),
            None => Ok(()),
        }
    }
}

/// The node's OS labels and reported operating system, and whether they
/// make it a Windows node: `Err` when they contradict each other.
fn node_os(
    labels: &std::collections::BTreeMap<String, String>,
    value: &serde_json::Value,
) -> Result<bool, OsConflict> {
    let stable = labels.get("kubernetes.io/os").map(String::as_str);
    let beta = labels.get("beta.kubernetes.io/os").map(String::as_str);
    let reported = value
        .pointer("/status/nodeInfo/operatingSystem")
        .and_then(serde_json::Value::as_str)
        .filter(|os| !os.is_empty());
    let said: Vec<&str> = [stable, beta, reported].into_iter().flatten().collect();
    let windows = stable == Some("windows") || beta == Some("windows");
    // Unlabelled but reporting Windows is no agreement either: the
    // scheduler cannot select the node as a Windows node.
    let agree = said.windows(2).all(|w| w[0] == w[1]) && (windows || reported != Some("windows"));
    if agree {
        return Ok(windows);
    }
    let label_text = [
        ("kubernetes.io/os", stable),
        ("beta.kubernetes.io/os", beta),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some(format!("{k}={}", v?)))
    .collect::<Vec<_>>()
    .join(", ");
    Err(OsConflict {
        labels: label_text,
        reported: reported.map(str::to_owned),
    })
}

/// A Node as winadmit keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KnownNode {
    Windows(WindowsNode),
    /// Labelled `kubernetes.io/os: linux`, or with no OS label, or with OS
    /// facts that contradict each other ([`LinuxNode::os_conflict`]).
    Linux(LinuxNode),
}

impl KnownNode {
    /// Reads a Node object (any JSON form of `v1/Node`); `None` for other
    /// kinds.
    #[must_use]
    pub fn from_object(value: &serde_json::Value) -> Option<Self> {
        if value.get("kind")?.as_str()? != "Node" {
            return None;
        }
        let labels: std::collections::BTreeMap<String, String> = value
            .pointer("/metadata/labels")
            .and_then(serde_json::Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let name = value
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Some(match node_os(&labels, value) {
            Ok(true) => Self::Windows(WindowsNode::from_parts(value, name, labels)),
            Ok(false) => Self::Linux(LinuxNode {
                name,
                labels,
                taints: hard_taints(value),
                os_conflict: None,
            }),
            Err(conflict) => Self::Linux(LinuxNode {
                name,
                labels,
                taints: hard_taints(value),
                os_conflict: Some(conflict),
            }),
        })
    }

    /// The node's name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Windows(n) => &n.name,
            Self::Linux(n) => &n.name,
        }
    }
}

impl WindowsNode {
    /// Reads a Node object (any JSON form of `v1/Node`). `None` for nodes
    /// that are not labelled `kubernetes.io/os: windows` (or the beta label),
    /// and for those whose OS facts contradict each other.
    #[must_use]
    pub fn from_object(value: &serde_json::Value) -> Option<Self> {
        match KnownNode::from_object(value)? {
            KnownNode::Windows(node) => Some(node),
            KnownNode::Linux(_) => None,
        }
    }

    fn from_parts(
        value: &serde_json::Value,
        name: String,
        labels: std::collections::BTreeMap<String, String>,
    ) -> Self {
        let info = |key: &str| {
            value
                .pointer(&format!("/status/nodeInfo/{key}"))
                .and_then(serde_json::Value::as_str)
        };
        let (runtime, containerd_version) = info("containerRuntimeVersion")
            .map(parse_runtime)
            .unwrap_or_default();
        let containerd_patch = info("containerRuntimeVersion")
            .and_then(|v| v.strip_prefix("containerd://"))
            .and_then(|v| v.trim_start_matches('v').split(['.', '-', '+']).nth(2))
            .and_then(|p| p.parse().ok());
        Self {
            name,
            labels,
            kubelet_version: info("kubeletVersion").and_then(|v| v.parse().ok()),
            runtime,
            containerd_version,
            containerd_patch,
            taints: hard_taints(value),
        }
    }

    /// The node's `node.kubernetes.io/windows-build` label, else the build
    /// of its AKS `kubernetes.azure.com/os-sku` label.
    #[must_use]
    pub fn build(&self) -> Option<&str> {
        self.labels
            .get(crate::decision::windows_builds::WINDOWS_BUILD_LABEL)
            .map(String::as_str)
            .or_else(|| {
                self.labels
                    .get(AKS_OS_SKU_LABEL)
                    .and_then(|s| os_sku_build(s))
            })
    }

    /// Does the node's runtime pull an image's Windows manifest of another
    /// build than the node's when the stable ABI allows it? containerd
    /// before 1.7.6 matched the host's build exactly (`platforms/
    /// defaults_windows.go`: `strings.HasPrefix(p.OSVersion,
    /// m.osVersionPrefix)`); 1.7.6 and later use the stable-ABI check.
    /// `None` when the runtime or its version is unknown.
    #[must_use]
    pub fn pulls_stable_abi(&self) -> Option<bool> {
        if self.runtime? != super::Runtime::Containerd {
            return None;
        }
        let v = self.containerd_version?;
        let v17 = KubeVersion::new(1, 7);
        if v != v17 {
            return Some(v > v17);
        }
        Some(self.containerd_patch? >= 6)
    }
}

/// The node's `NoSchedule` and `NoExecute` taints an operator set (see
/// [`WindowsNode::taints`]).
fn hard_taints(node: &serde_json::Value) -> Vec<Taint> {
    let Some(list) = node
        .pointer("/spec/taints")
        .and_then(serde_json::Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|t| {
            let key = t.get("key")?.as_str()?;
            let effect = t.get("effect")?.as_str()?;
            let automatic = key.starts_with("node.kubernetes.io/")
                || key.starts_with("node.cloudprovider.kubernetes.io/");
            (!automatic && matches!(effect, "NoSchedule" | "NoExecute")).then(|| Taint {
                key: key.to_owned(),
                value: t
                    .get("value")
                    .and_then(serde_json::Value::as_str)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned),
                effect: effect.to_owned(),
            })
        })
        .collect()
}

/// `containerd://1.7.22` -> (containerd, 1.7); `docker://20.10.9` -> docker.
fn parse_runtime(v: &str) -> (Option<Runtime>, Option<KubeVersion>) {
    let (scheme, version) = v.split_once("://").unwrap_or((v, ""));
    match scheme {
        "containerd" => (Some(Runtime::Containerd), version.parse().ok()),
        "docker" => (Some(Runtime::Docker), None),
        _ => (None, None),
    }
}

/// The cluster's Windows nodes, as learnt from the API server or the input,
/// and the names and labels of its other nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowsNodes {
    pub nodes: Vec<WindowsNode>,
    /// The nodes that are not Windows nodes.
    pub linux: Vec<LinuxNode>,
    /// `linux` is the whole list of them (the input's Node objects are the
    /// cluster's; the webhook's cache has listed them): only then can a
    /// node selection that matches only Windows nodes be told.
    pub linux_known: bool,
}

impl WindowsNodes {
    /// No Windows node is known (Linux nodes may be).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether anything is known of the cluster's nodes: a Windows node, or
    /// the whole list of the others (a cluster with no Windows node, once
    /// listed). The entry points pass the nodes to the decision only then.
    #[must_use]
    pub fn any_known(&self) -> bool {
        !self.is_empty() || self.linux_known
    }

    /// Keeps a node in the list of its kind.
    pub fn push(&mut self, node: KnownNode) {
        match node {
            KnownNode::Windows(n) => self.nodes.push(n),
            KnownNode::Linux(n) => self.linux.push(n),
        }
    }

    /// The oldest kubelet and the weakest runtime among `nodes` (Docker
    /// before containerd, then the oldest containerd), each with its node.
    #[must_use]
    pub fn observed(nodes: &[&WindowsNode]) -> Observed {
        let kubernetes_version = nodes
            .iter()
            .filter_map(|n| Some((n.kubelet_version?, n)))
            .min_by_key(|(v, _)| *v)
            .map(|(v, n)| (v, n.name.clone()));
        let container_runtime = nodes
            .iter()
            .filter_map(|n| Some((n.runtime?, n)))
            .min_by_key(|(r, n)| (*r == Runtime::Containerd, n.containerd_version))
            .map(|(r, n)| (r, n.name.clone()));
        let containerd_version = nodes.iter().filter_map(|n| n.containerd_version).min();
        Observed {
            kubernetes_version,
            container_runtime,
            containerd_version,
        }
    }

    /// The Windows nodes' taint, learnt: each `NoSchedule` taint that every
    /// Windows node carries and no other node carries (see
    /// [`WindowsNode::taints`]), with the first Windows node's name. Empty
    /// while the other nodes are not known ([`WindowsNodes::linux_known`]).
    ///
    /// Never a taint only some Windows nodes carry (a dedicated or fenced
    /// pool: a pod that names one of its nodes gains no toleration for it)
    /// and never a `NoExecute` taint (it evicts: only the policy's
    /// `params.windowsTaint` names one).
    #[must_use]
    pub fn windows_taints(&self) -> Vec<(&Taint, &str)> {
        let Some((first, rest)) = self.nodes.split_first() else {
            return Vec::new();
        };
        if !self.linux_known {
            return Vec::new();
        }
        first
            .taints
            .iter()
            .filter(|t| t.effect == "NoSchedule")
            .filter(|t| rest.iter().all(|n| n.taints.contains(t)))
            .filter(|t| !self.linux.iter().any(|n| n.taints.contains(t)))
            .map(|t| (t, first.name.as_str()))
            .collect()
    }

    /// The nodes whose OS facts contradict each other, with what they say.
    pub fn os_conflicts(&self) -> impl Iterator<Item = (&str, &OsConflict)> {
        self.linux
            .iter()
            .filter_map(|n| Some((n.name.as_str(), n.os_conflict.as_ref()?)))
    }

    /// Every `node.kubernetes.io/windows-build` value (or the build of the
    /// node's AKS `os-sku`), with a node that has it.
    #[must_use]
    pub fn builds(&self) -> std::collections::BTreeMap<&str, &str> {
        let mut out = std::collections::BTreeMap::new();
        for n in &self.nodes {
            if let Some(b) = n.build() {
                out.entry(b).or_insert(n.name.as_str());
            }
        }
        out
    }
}

impl TargetCluster {
    /// This cluster with what `observed` says of the nodes (all of them, or
    /// those a pod may land on) in place of every fact no flag or policy
    /// stated.
    #[must_use]
    pub fn narrowed(&self, observed: &Observed) -> Self {
        let stated = |s: &Source| matches!(s, Source::Flag | Source::Policy);
        let mut c = self.clone();
        if !stated(&c.kubernetes_version_from)
            && let Some((v, node)) = &observed.kubernetes_version
        {
            c.kubernetes_version = *v;
            c.kubernetes_version_from = Source::Node(node.clone());
        }
        if !stated(&c.container_runtime_from)
            && let Some((r, node)) = &observed.container_runtime
        {
            c.container_runtime = *r;
            c.container_runtime_from = Source::Node(node.clone());
            c.containerd_version = (*r == Runtime::Containerd).then(|| {
                observed
                    .containerd_version
                    .unwrap_or(KubeVersion::new(1, 7))
            });
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, build: &str, kubelet: &str, runtime: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/os": "windows",
                "node.kubernetes.io/windows-build": build, "pool": name}},
            "status": {"nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": runtime}}})
    }

    #[test]
    fn the_oldest_kubelet_and_the_weakest_runtime_decide() {
        let nodes = WindowsNodes {
            linux: Vec::new(),
            linux_known: false,
            nodes: vec![
                WindowsNode::from_object(&node(
                    "a",
                    "10.0.20348",
                    "v1.30.2",
                    "containerd://1.7.22",
                ))
                .unwrap(),
                WindowsNode::from_object(&node("b", "10.0.17763", "v1.29.1", "docker://20.10.9"))
                    .unwrap(),
            ],
        };
        let all: Vec<&WindowsNode> = nodes.nodes.iter().collect();
        let l = WindowsNodes::observed(&all);
        assert_eq!(
            l.kubernetes_version,
            Some((KubeVersion::new(1, 29), "b".into()))
        );
        assert_eq!(l.container_runtime, Some((Runtime::Docker, "b".into())));
        // A pod that selects pool a sees only node a.
        let spec: crate::decision::view::SpecView<'_> =
            serde_json::from_str(r#"{"nodeSelector": {"pool": "a"}}"#).unwrap();
        let a = nodes.for_pod(&spec);
        let l = WindowsNodes::observed(&a);
        assert_eq!(l.container_runtime, Some((Runtime::Containerd, "a".into())));
        assert_eq!(l.containerd_version, Some(KubeVersion::new(1, 7)));
        assert_eq!(nodes.builds().len(), 2);
        let linux = serde_json::json!({"kind": "Node", "metadata": {"name": "l", "labels": {"kubernetes.io/os": "linux"}}});
        assert!(WindowsNode::from_object(&linux).is_none());
    }

    fn tainted(name: &str, os: &str, taints: &[(&str, &str, &str)]) -> KnownNode {
        let taints: Vec<serde_json::Value> = taints
            .iter()
            .map(|(k, v, e)| serde_json::json!({"key": k, "value": v, "effect": e}))
            .collect();
        KnownNode::from_object(&serde_json::json!({"kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/os": os}},
            "spec": {"taints": taints},
            "status": {"nodeInfo": {"operatingSystem": os}}}))
        .unwrap()
    }

    fn cluster(nodes: Vec<KnownNode>) -> WindowsNodes {
        let mut c = WindowsNodes {
            linux_known: true,
            ..WindowsNodes::default()
        };
        for n in nodes {
            c.push(n);
        }
        c
    }

    fn learnt(c: &WindowsNodes) -> Vec<String> {
        c.windows_taints()
            .into_iter()
            .map(|(t, _)| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.as_deref().unwrap_or(""),
                    t.effect
                )
            })
            .collect()
    }

    #[test]
    fn the_windows_taint_is_carried_by_every_windows_node_and_no_other() {
        let os = ("os", "windows", "NoSchedule");
        let c = cluster(vec![
            tainted("win-1", "windows", &[os]),
            tainted(
                "win-2",
                "windows",
                &[
                    os,
                    ("dedicated", "teama", "NoSchedule"),
                    ("example.com/quarantine", "true", "NoExecute"),
                ],
            ),
            tainted("linux-1", "linux", &[]),
        ]);
        assert_eq!(learnt(&c), ["os=windows:NoSchedule"]);
        // One Windows node only, dedicated and quarantined: its NoExecute
        // taint is never learnt.
        let alone = cluster(vec![
            tainted(
                "win-2",
                "windows",
                &[os, ("example.com/quarantine", "true", "NoExecute")],
            ),
            tainted("linux-1", "linux", &[]),
        ]);
        assert_eq!(learnt(&alone), ["os=windows:NoSchedule"]);
        // A taint the Linux nodes carry too is no Windows taint.
        let everywhere = cluster(vec![
            tainted("win-1", "windows", &[("team", "a", "NoSchedule")]),
            tainted("linux-1", "linux", &[("team", "a", "NoSchedule")]),
        ]);
        assert!(learnt(&everywhere).is_empty());
        // The other nodes not known: nothing is learnt.
        let mut unknown = c.clone();
        unknown.linux_known = false;
        assert!(learnt(&unknown).is_empty());
    }

    #[test]
    fn os_facts_that_contradict_each_other_make_no_windows_node() {
        let node = |labels: serde_json::Value, reported: Option<&str>| {
            let mut n = serde_json::json!({"kind": "Node",
                "metadata": {"name": "n", "labels": labels}});
            if let Some(os) = reported {
                n["status"] = serde_json::json!({"nodeInfo": {"operatingSystem": os}});
            }
            KnownNode::from_object(&n).unwrap()
        };
        let conflict = |n: &KnownNode| match n {
            KnownNode::Linux(l) => l.os_conflict.as_ref().map(ToString::to_string),
            KnownNode::Windows(_) => None,
        };
        let liar = node(
            serde_json::json!({"kubernetes.io/os": "windows"}),
            Some("linux"),
        );
        assert!(matches!(liar, KnownNode::Linux(_)));
        assert_eq!(
            conflict(&liar).as_deref(),
            Some("labelled kubernetes.io/os=windows but its kubelet reports operatingSystem linux")
        );
        let beta = node(
            serde_json::json!({"kubernetes.io/os": "linux", "beta.kubernetes.io/os": "windows"}),
            None,
        );
        assert!(conflict(&beta).is_some(), "the labels disagree");
        let unlabelled = node(serde_json::json!({}), Some("windows"));
        assert_eq!(
            conflict(&unlabelled).as_deref(),
            Some("with no OS label but its kubelet reports operatingSystem windows")
        );
        assert!(matches!(
            node(
                serde_json::json!({"kubernetes.io/os": "windows"}),
                Some("windows")
            ),
            KnownNode::Windows(_)
        ));
        assert!(matches!(
            node(serde_json::json!({"kubernetes.io/os": "windows"}), None),
            KnownNode::Windows(_)
        ));
        let linux = node(
            serde_json::json!({"kubernetes.io/os": "linux"}),
            Some("linux"),
        );
        assert!(matches!(linux, KnownNode::Linux(_)) && conflict(&linux).is_none());
        let c = cluster(vec![liar, linux]);
        assert!(c.is_empty(), "no Windows node");
        assert_eq!(c.os_conflicts().count(), 1);
    }
}
