//! What the webhook knows of the cluster beyond each AdmissionReview:
//! namespace labels (per-namespace mode and isolation), RuntimeClasses (a
//! RuntimeClass can make a pod a Windows pod), the Windows nodes (versions,
//! runtime, builds) and, with `serve --gmsa`, the GMSACredentialSpecs,
//! kept current by kube-rs watchers so no request waits on the API server.
//!
//! Two layers:
//! - [`WatchCache`]: plain data, fed [`Change`]s, read by
//!   [`crate::entry::admission`] through [`ClusterLookup`]. Namespaces keep only
//!   their name and the labels the policy reads; RuntimeClasses, Windows
//!   nodes and credential specs are published as immutable snapshots of
//!   what winadmit reads of them, swapped atomically on change, so each
//!   review takes a snapshot for the cost of a reference count. A relist
//!   replaces the data only once complete ([`Mirror`]). Unit-tested
//!   without a cluster.
//! - [`spawn`] (module `watchers`): list, then watch; relist on
//!   desync; retry with kube's default backoff, 0.8 s doubling to 30 s.
//!   An error never reaches the admission path: the cache keeps its last
//!   good data (none at first), logs what failed (verb, resource, why,
//!   what to do) and retries.
//!
//! Why not kube-runtime's reflector `Store`: it keeps each object whole as
//! the watcher decoded it, and its readers get those objects, so a review
//! would parse every RuntimeClass and Windows node it reads. This cache
//! keeps a fraction of the reflector's heap (even with each object trimmed
//! to the fields winadmit reads before it is stored), and one review's
//! reads take microseconds instead of milliseconds; applying a full list
//! costs the same (`cargo bench --bench watch_cache`, docs/BENCHMARKS.md,
//! "Watch cache").
//! Publishing parsed snapshots from a reflector would keep the reads but
//! hold the trimmed objects on top of the snapshots.

mod backoff;
mod exceptions;
mod metrics;
mod mirror;
mod watchers;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use arc_swap::ArcSwap;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::node::v1::RuntimeClass;
use tokio::sync::watch;

use crate::decision::cluster::{ClusterLookup, KnownNode, LinuxNode, WindowsNodes};
use crate::decision::exceptions::{ExceptionSet, Timestamp};
use crate::decision::gmsa::CredSpec;
use crate::decision::policy::Policy;
use crate::decision::targeting::{RuntimeClassInfo, RuntimeClasses};

pub use backoff::{RelistBackoff, is_expected};
pub use exceptions::{ExceptionCache, spawn_exceptions};
pub use metrics::ClusterMetrics;
pub use mirror::{Change, Mirror};
pub use watchers::{
    CONNECT_TIMEOUT, Deadlines, GmsaCredentialSpecObject, LIST_PAGE, READ_TIMEOUT, WATCH_SECONDS,
    Watched, spawn, spawn_gmsa,
};

/// Which watched resources have completed their first list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    pub namespaces: bool,
    pub runtime_classes: bool,
    pub nodes: bool,
    /// The nodes that are not Windows nodes (not part of [`Synced::all`]:
    /// until they are listed, no pod is taken for a Windows pod by its
    /// node selection alone).
    pub linux_nodes: bool,
    /// GMSACredentialSpecs (watched only with `serve --gmsa`; not part of
    /// [`Synced::all`]).
    pub gmsa: bool,
}

impl Synced {
    #[must_use]
    pub fn all(self) -> bool {
        self.namespaces && self.runtime_classes && self.nodes
    }
}

/// Namespace labels and RuntimeClasses, as the watchers last saw them.
pub struct WatchCache {
    /// The namespace label keys kept (those the policy reads).
    label_keys: Vec<String>,
    namespaces: RwLock<Mirror<BTreeMap<String, String>>>,
    runtime_class_mirror: Mutex<Mirror<RuntimeClassInfo>>,
    /// The published snapshot of `runtime_class_mirror`.
    runtime_classes: ArcSwap<RuntimeClasses>,
    /// The nodes labelled Windows (a small projection of each): Windows
    /// nodes, and those whose OS facts contradict each other.
    node_mirror: Mutex<Mirror<KnownNode>>,
    /// The names, labels and taints of the other nodes.
    linux_node_mirror: Mutex<Mirror<LinuxNode>>,
    /// The published snapshot of both node mirrors.
    nodes: ArcSwap<WindowsNodes>,
    /// The cluster's GMSACredentialSpecs (with `serve --gmsa`).
    gmsa_mirror: Mutex<Mirror<CredSpec>>,
    /// The published snapshot of `gmsa_mirror`, once listed.
    gmsa_specs: ArcSwap<Option<BTreeMap<String, CredSpec>>>,
    synced: watch::Sender<Synced>,
    /// Counts the published node snapshots, for those who act on a change
    /// ([`WatchCache::node_changes`]).
    node_changes: watch::Sender<u64>,
    /// The cluster's PolicyExceptions, once [`WatchCache::track_exceptions`].
    exceptions: std::sync::OnceLock<Arc<ExceptionCache>>,
}

impl Debug for WatchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCache")
            .field("label_keys", &self.label_keys)
            .field("synced", &*self.synced.borrow())
            .finish_non_exhaustive()
    }
}

impl WatchCache {
    /// A cache keeping the namespace labels named in `label_keys`.
    #[must_use]
    pub fn new(label_keys: Vec<String>) -> Self {
        Self {
            label_keys,
            namespaces: RwLock::new(Mirror::default()),
            runtime_class_mirror: Mutex::new(Mirror::default()),
            runtime_classes: ArcSwap::from_pointee(RuntimeClasses::default()),
            node_mirror: Mutex::new(Mirror::default()),
            linux_node_mirror: Mutex::new(Mirror::default()),
            nodes: ArcSwap::from_pointee(WindowsNodes::default()),
            gmsa_mirror: Mutex::new(Mirror::default()),
            gmsa_specs: ArcSwap::from_pointee(None),
            synced: watch::channel(Synced::default()).0,
            node_changes: watch::channel(0).0,
            exceptions: std::sync::OnceLock::new(),
        }
    }

    /// Keeps the cluster's PolicyExceptions in `cache` from now on (the
    /// watchers [`spawn`] starts feed it).
    pub fn track_exceptions(&self, cache: ExceptionCache) {
        let _ = self.exceptions.set(Arc::new(cache));
    }

    /// The PolicyException mirror, when tracked.
    #[must_use]
    pub fn exception_cache(&self) -> Option<Arc<ExceptionCache>> {
        self.exceptions.get().cloned()
    }

    /// A cache keeping the namespace labels `policy` reads: its
    /// `namespaceModeLabel`, `mutation.isolationNamespaceLabel` and
    /// `reach.optOutNamespaceLabels` (a namespace opted out is judged on
    /// the gMSA rules alone when the gMSA registration sends its pods).
    #[must_use]
    pub fn for_policy(policy: &Policy) -> Self {
        let mut keys = vec![policy.namespace_mode_label.clone()];
        if let Some(k) = &policy.mutation.isolation_namespace_label {
            keys.push(k.clone());
        }
        keys.extend(policy.reach.opt_out_namespace_labels.keys().cloned());
        keys.retain(|k| !k.is_empty());
        keys.dedup();
        Self::new(keys)
    }

    /// The namespace label keys kept (those the policy reads).
    #[must_use]
    pub fn label_keys(&self) -> &[String] {
        &self.label_keys
    }

    /// The name and kept labels of a Namespace.
    #[must_use]
    pub fn namespace_entry(&self, ns: &Namespace) -> Option<(String, BTreeMap<String, String>)> {
        let name = ns.metadata.name.clone()?;
        let labels = ns
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| self.label_keys.iter().any(|key| key == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some((name, labels))
    }

    /// The name and what winadmit reads of a RuntimeClass: the same parser
    /// `lint` and `report` use on RuntimeClass manifests.
    #[must_use]
    pub fn runtime_class_entry(rc: &RuntimeClass) -> Option<(String, RuntimeClassInfo)> {
        let value = serde_json::to_value(rc).ok()?;
        RuntimeClasses::info_from_object(&value)
    }

    /// Applies a namespace change; returns how many namespaces are cached.
    pub fn apply_namespace(&self, change: Change<BTreeMap<String, String>>) -> usize {
        let done = matches!(change, Change::ListDone);
        let mut m = self
            .namespaces
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        m.apply(change);
        let n = m.len();
        drop(m);
        if done {
            self.synced.send_modify(|s| s.namespaces = true);
        }
        n
    }

    /// Applies a RuntimeClass change, publishing a new snapshot when the
    /// data changed; returns how many RuntimeClasses are cached.
    pub fn apply_runtime_class(&self, change: Change<RuntimeClassInfo>) -> usize {
        let done = matches!(change, Change::ListDone);
        let mut m = self
            .runtime_class_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if m.apply(change) {
            let mut snapshot = RuntimeClasses::default();
            for (name, info) in m.iter() {
                snapshot.insert_info(name.clone(), info.clone());
            }
            self.runtime_classes.store(Arc::new(snapshot));
        }
        let n = m.len();
        drop(m);
        if done {
            self.synced.send_modify(|s| s.runtime_classes = true);
        }
        n
    }

    /// What winadmit keeps of a Node labelled Windows, projected (name,
    /// labels, taints, kubelet and runtime versions): a Windows node, or,
    /// when its OS facts contradict each other, a node of the other kind
    /// with [`LinuxNode::os_conflict`] set.
    #[must_use]
    pub fn node_entry(node: &Node) -> Option<(String, KnownNode)> {
        let value = serde_json::to_value(node).ok()?;
        let n = KnownNode::from_object(&value)?;
        Some((n.name().to_owned(), n))
    }

    /// What winadmit keeps of a node that is not labelled Windows: name,
    /// labels and taints (and [`LinuxNode::os_conflict`] when its kubelet
    /// reports Windows).
    #[must_use]
    pub fn linux_node_entry(node: &Node) -> Option<(String, LinuxNode)> {
        let value = serde_json::to_value(node).ok()?;
        let n = match KnownNode::from_object(&value)? {
            KnownNode::Linux(n) => n,
            // Labelled Windows after all (a label changed between the
            // watch's selection and now): the other watch keeps it.
            KnownNode::Windows(_) => return None,
        };
        Some((n.name.clone(), n))
    }

    /// Applies a Windows Node change, publishing a new snapshot when the
    /// data changed; returns how many Windows nodes are cached.
    pub fn apply_node(&self, change: Change<KnownNode>) -> usize {
        let done = matches!(change, Change::ListDone);
        let mut windows = self
            .node_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if windows.apply(change) {
            let linux = self
                .linux_node_mirror
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.publish_nodes(&windows, &linux);
        }
        let n = windows.len();
        drop(windows);
        if done {
            self.synced.send_modify(|s| s.nodes = true);
            self.node_changes.send_modify(|n| *n += 1);
        }
        n
    }

    /// Applies a change of another node, publishing a new snapshot when
    /// the data changed; returns how many such nodes are cached.
    pub fn apply_linux_node(&self, change: Change<LinuxNode>) -> usize {
        let done = matches!(change, Change::ListDone);
        // The same lock order as `apply_node`: Windows, then the others.
        let windows = self
            .node_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut linux = self
            .linux_node_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if linux.apply(change) {
            self.publish_nodes(&windows, &linux);
        }
        let n = linux.len();
        drop((linux, windows));
        if done {
            self.synced.send_modify(|s| s.linux_nodes = true);
            self.node_changes.send_modify(|n| *n += 1);
        }
        n
    }

    /// Publishes both node mirrors (locked by the caller) as one snapshot.
    /// A node labelled Windows whose OS facts contradict each other goes
    /// with the other nodes, and is logged when it first does.
    fn publish_nodes(&self, windows: &Mirror<KnownNode>, linux: &Mirror<LinuxNode>) {
        let mut snapshot = WindowsNodes {
            nodes: Vec::new(),
            linux: linux.iter().map(|(_, n)| n.clone()).collect(),
            linux_known: linux.is_synced(),
        };
        for (_, node) in windows.iter() {
            match node {
                KnownNode::Windows(n) => snapshot.nodes.push(n.clone()),
                KnownNode::Linux(n) => snapshot.linux.push(n.clone()),
            }
        }
        let before = self.nodes.load();
        for (name, conflict) in snapshot.os_conflicts() {
            if !before
                .os_conflicts()
                .any(|(n, c)| n == name && c == conflict)
            {
                tracing::warn!(
                    node = %name,
                    conflict = %conflict,
                    "cluster cache: node {name} is {conflict}; winadmit takes it for no Windows node (no Windows verdict or mutation follows from it) until its labels and its kubelet agree"
                );
            }
        }
        self.nodes.store(Arc::new(snapshot));
        self.node_changes.send_modify(|n| *n += 1);
    }

    /// A receiver that sees each new snapshot of the nodes as it is
    /// published (`changed().await`), so that an action on a node change
    /// waits for no poll.
    #[must_use]
    pub fn node_changes(&self) -> watch::Receiver<u64> {
        self.node_changes.subscribe()
    }

    /// How many nodes have OS facts that contradict each other.
    #[must_use]
    pub fn os_conflicts(&self) -> usize {
        self.nodes.load().os_conflicts().count()
    }

    /// Applies a GMSACredentialSpec change, publishing a new snapshot once
    /// the first list is complete; returns how many are cached.
    pub fn apply_gmsa(&self, change: Change<CredSpec>) -> usize {
        let mut m = self
            .gmsa_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let changed = m.apply(change);
        let first = m.is_synced() && self.gmsa_specs.load().is_none();
        if m.is_synced() && (changed || first) {
            let snapshot: BTreeMap<String, CredSpec> =
                m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            self.gmsa_specs.store(Arc::new(Some(snapshot)));
        }
        let n = m.len();
        drop(m);
        if first {
            self.synced.send_modify(|s| s.gmsa = true);
        }
        n
    }

    /// The cluster's GMSACredentialSpecs, once listed.
    #[must_use]
    pub fn gmsa_snapshot(&self) -> Arc<Option<BTreeMap<String, CredSpec>>> {
        self.gmsa_specs.load_full()
    }

    /// The current RuntimeClasses snapshot.
    #[must_use]
    pub fn runtime_class_snapshot(&self) -> Arc<RuntimeClasses> {
        self.runtime_classes.load_full()
    }

    /// Which resources have completed a first list.
    #[must_use]
    pub fn synced(&self) -> Synced {
        *self.synced.borrow()
    }

    /// Resolves when the GMSACredentialSpecs have completed a first list.
    pub async fn wait_gmsa_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| s.gmsa).await;
    }

    /// Resolves when both resources have completed a first list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        // The sender lives in `self`, so this cannot fail while we wait.
        let _ = rx.wait_for(|s| s.all()).await;
    }
}

impl ClusterLookup for WatchCache {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.namespaces
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(namespace)
            .and_then(|labels| labels.get(key))
            .cloned()
    }

    fn runtime_classes(&self) -> Option<Arc<RuntimeClasses>> {
        Some(self.runtime_class_snapshot())
    }

    fn nodes(&self) -> Option<Arc<WindowsNodes>> {
        Some(self.nodes.load_full())
    }

    fn exceptions(&self, now: Timestamp) -> Option<Arc<ExceptionSet>> {
        self.exceptions.get().map(|c| c.at(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::cluster::WindowsNode;
    use crate::decision::targeting::Os;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::watcher;
    use std::time::Duration;

    fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    fn rc(name: &str, json: serde_json::Value) -> RuntimeClass {
        let mut v = json;
        v["apiVersion"] = "node.k8s.io/v1".into();
        v["kind"] = "RuntimeClass".into();
        v["metadata"] = serde_json::json!({"name": name});
        serde_json::from_value(v).unwrap()
    }

    fn cache() -> WatchCache {
        WatchCache::new(vec!["winadmit.io/mode".into(), "iso".into()])
    }

    fn feed_ns(c: &WatchCache, ev: watcher::Event<Namespace>) -> Option<usize> {
        Change::from_event(ev, |n| c.namespace_entry(n)).map(|ch| c.apply_namespace(ch))
    }

    #[test]
    fn keeps_only_the_labels_the_policy_reads() {
        let c = cache();
        let (name, labels) = c
            .namespace_entry(&ns(
                "web",
                &[
                    ("winadmit.io/mode", "warn"),
                    ("team", "a"),
                    ("iso", "hyperv"),
                ],
            ))
            .unwrap();
        assert_eq!(name, "web");
        assert_eq!(labels.len(), 2);
        assert!(!labels.contains_key("team"));
    }

    #[test]
    fn a_list_is_visible_only_when_complete() {
        let c = cache();
        feed_ns(&c, watcher::Event::Init);
        feed_ns(
            &c,
            watcher::Event::InitApply(ns("web", &[("winadmit.io/mode", "warn")])),
        );
        assert_eq!(c.label("web", "winadmit.io/mode"), None);
        assert!(!c.synced().namespaces);
        assert_eq!(feed_ns(&c, watcher::Event::InitDone), Some(1));
        assert_eq!(c.label("web", "winadmit.io/mode").as_deref(), Some("warn"));
        assert!(c.synced().namespaces && !c.synced().all());
        assert_eq!(c.label("web", "team"), None);
        assert_eq!(c.label("other", "winadmit.io/mode"), None);
    }

    #[test]
    fn credential_specs_are_known_once_listed_even_when_there_are_none() {
        let c = cache();
        let feed = |ev: watcher::Event<GmsaCredentialSpecObject>| {
            Change::from_event(ev, GmsaCredentialSpecObject::entry).map(|ch| c.apply_gmsa(ch))
        };
        let object = |name: &str, credspec: Option<serde_json::Value>| GmsaCredentialSpecObject {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            credspec,
        };
        assert!(c.gmsa_snapshot().is_none());
        feed(watcher::Event::Init);
        feed(watcher::Event::InitDone);
        assert_eq!(
            c.gmsa_snapshot().as_ref().as_ref().map(BTreeMap::len),
            Some(0)
        );
        feed(watcher::Event::Apply(object(
            "webapp1",
            Some(serde_json::json!({"CmsPlugins": ["ActiveDirectory"]})),
        )));
        feed(watcher::Event::Apply(object("empty", None)));
        let snapshot = c.gmsa_snapshot();
        let specs = snapshot.as_ref().as_ref().unwrap();
        assert_eq!(
            specs.get("webapp1"),
            Some(&CredSpec::Found(Some(
                serde_json::json!({"CmsPlugins": ["ActiveDirectory"]})
            )))
        );
        assert_eq!(specs.get("empty"), Some(&CredSpec::Found(None)));
        feed(watcher::Event::Delete(object("webapp1", None)));
        assert!(
            !c.gmsa_snapshot()
                .as_ref()
                .as_ref()
                .unwrap()
                .contains_key("webapp1")
        );
    }

    #[test]
    fn watch_events_update_and_delete() {
        let c = cache();
        feed_ns(&c, watcher::Event::Init);
        feed_ns(&c, watcher::Event::InitDone);
        feed_ns(
            &c,
            watcher::Event::Apply(ns("web", &[("winadmit.io/mode", "audit")])),
        );
        assert_eq!(c.label("web", "winadmit.io/mode").as_deref(), Some("audit"));
        feed_ns(&c, watcher::Event::Apply(ns("web", &[])));
        assert_eq!(c.label("web", "winadmit.io/mode"), None);
        feed_ns(
            &c,
            watcher::Event::Apply(ns("web", &[("winadmit.io/mode", "warn")])),
        );
        assert_eq!(feed_ns(&c, watcher::Event::Delete(ns("web", &[]))), Some(0));
        assert_eq!(c.label("web", "winadmit.io/mode"), None);
    }

    #[test]
    fn a_relist_replaces_the_data_and_drops_what_is_gone() {
        let c = cache();
        feed_ns(&c, watcher::Event::Init);
        feed_ns(
            &c,
            watcher::Event::InitApply(ns("old", &[("winadmit.io/mode", "warn")])),
        );
        feed_ns(&c, watcher::Event::InitDone);
        // Desync: relist. The old data serves until the new list completes.
        feed_ns(&c, watcher::Event::Init);
        feed_ns(
            &c,
            watcher::Event::InitApply(ns("new", &[("winadmit.io/mode", "audit")])),
        );
        assert_eq!(c.label("old", "winadmit.io/mode").as_deref(), Some("warn"));
        assert_eq!(c.label("new", "winadmit.io/mode"), None);
        feed_ns(&c, watcher::Event::InitDone);
        assert_eq!(c.label("old", "winadmit.io/mode"), None);
        assert_eq!(c.label("new", "winadmit.io/mode").as_deref(), Some("audit"));
    }

    #[test]
    fn runtime_class_snapshots_are_swapped_not_mutated() {
        let c = cache();
        let feed = |ev| {
            Change::from_event(ev, WatchCache::runtime_class_entry)
                .map(|ch| c.apply_runtime_class(ch))
        };
        let win = rc(
            "win",
            serde_json::json!({"handler": "runhcs-wcow-process",
                "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows",
                    "node.kubernetes.io/windows-build": "10.0.20348"}}}),
        );
        let hv = rc(
            "hv",
            serde_json::json!({"handler": "runhcs-wcow-hypervisor"}),
        );
        feed(watcher::Event::Init);
        feed(watcher::Event::InitApply(win.clone()));
        let before = c.runtime_class_snapshot();
        assert!(before.is_empty());
        assert_eq!(feed(watcher::Event::InitDone), Some(1));
        assert!(c.synced().runtime_classes);
        let listed = c.runtime_class_snapshot();
        assert_eq!(listed.os_of("win"), Some(Os::Windows));
        assert_eq!(
            listed.get("win").unwrap().windows_build.as_deref(),
            Some("10.0.20348")
        );
        feed(watcher::Event::Apply(hv));
        let now = c.runtime_classes().unwrap();
        assert_eq!(
            now.get("hv").and_then(|i| i.handler.as_deref()),
            Some("runhcs-wcow-hypervisor")
        );
        // A runhcs-wcow handler pins Windows even without a selector.
        assert_eq!(now.os_of("hv"), Some(Os::Windows));
        // A snapshot taken earlier is unchanged (a review in flight keeps its view).
        assert!(listed.get("hv").is_none());
        feed(watcher::Event::Delete(win));
        assert_eq!(c.runtime_class_snapshot().os_of("win"), None);
        assert_eq!(listed.os_of("win"), Some(Os::Windows));
    }

    /// The admission entry point reads the cache through its trait: no cluster,
    /// no network, the same `review` the server calls.
    #[test]
    fn admission_uses_the_cached_labels_and_runtime_classes() {
        use crate::entry::admission::{Admission, Endpoint, review};
        let c = Arc::new(cache());
        c.apply_namespace(Change::Relist);
        c.apply_namespace(Change::ListDone);
        c.apply_namespace(Change::Applied(
            "legacy".into(),
            BTreeMap::from([("winadmit.io/mode".into(), "warn".into())]),
        ));
        c.apply_runtime_class(Change::Relist);
        let win = rc(
            "win",
            serde_json::json!({"handler": "runhcs-wcow-process",
                "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows"}}}),
        );
        let (name, info) = WatchCache::runtime_class_entry(&win).unwrap();
        c.apply_runtime_class(Change::Listed(name, info));
        c.apply_runtime_class(Change::ListDone);
        let adm = Admission {
            policy: Policy::default_policy(),
            target: crate::decision::cluster::TargetCluster::default(),
            lookup: Some(Box::new(Arc::clone(&c))),
        };
        let body = |ns: &str| {
            serde_json::to_vec(&serde_json::json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "namespace": ns, "operation": "CREATE",
                    "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "spec": {"runtimeClassName": "win", "hostNetwork": true, "containers": [{"name": "c", "image": "i",
                            "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]}}}
            }))
            .unwrap()
        };
        let shop = review(&adm, Endpoint::Validate, &body("shop")).unwrap();
        assert_eq!(shop.summary.verdict.as_str(), "denied");
        let legacy = review(&adm, Endpoint::Validate, &body("legacy")).unwrap();
        assert_eq!(legacy.summary.verdict.as_str(), "warned");
        // The class goes away: the pod is no longer a Windows pod.
        c.apply_runtime_class(Change::Deleted("win".into()));
        let gone = review(&adm, Endpoint::Validate, &body("shop")).unwrap();
        assert_eq!(gone.summary.verdict.as_str(), "allowed");
    }

    #[tokio::test]
    async fn wait_synced_needs_every_resource() {
        let c = Arc::new(cache());
        let waiter = tokio::spawn({
            let c = Arc::clone(&c);
            async move { c.wait_synced().await }
        });
        c.apply_namespace(Change::Relist);
        c.apply_namespace(Change::ListDone);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        c.apply_runtime_class(Change::Relist);
        c.apply_runtime_class(Change::ListDone);
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "the Windows nodes are not listed yet"
        );
        c.apply_node(Change::Relist);
        c.apply_node(Change::ListDone);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }

    /// The other nodes are known once their first list completes (even an
    /// empty one), and each snapshot holds both kinds.
    #[test]
    fn the_other_nodes_are_known_once_listed() {
        let c = cache();
        let win = WindowsNode {
            name: "win-1".into(),
            ..WindowsNode::default()
        };
        let linux = |name: &str| LinuxNode {
            name: name.into(),
            ..LinuxNode::default()
        };
        c.apply_node(Change::Relist);
        c.apply_node(Change::Listed("win-1".into(), KnownNode::Windows(win)));
        c.apply_node(Change::ListDone);
        assert!(!c.nodes().unwrap().linux_known);
        c.apply_linux_node(Change::Relist);
        c.apply_linux_node(Change::Listed("l-1".into(), linux("l-1")));
        assert!(!c.nodes().unwrap().linux_known, "a list in progress");
        c.apply_linux_node(Change::ListDone);
        let snapshot = c.nodes().unwrap();
        assert!(snapshot.linux_known && snapshot.linux.len() == 1 && snapshot.nodes.len() == 1);
        c.apply_linux_node(Change::Deleted("l-1".into()));
        c.apply_node(Change::Applied(
            "win-2".into(),
            KnownNode::Windows(WindowsNode::default()),
        ));
        let snapshot = c.nodes().unwrap();
        assert!(snapshot.linux.is_empty() && snapshot.nodes.len() == 2 && snapshot.linux_known);
    }

    #[test]
    fn the_policy_decides_which_labels_are_kept() {
        let mut p = Policy::default_policy();
        p.namespace_mode_label = "example.com/mode".into();
        p.mutation.isolation_namespace_label = Some("example.com/iso".into());
        let c = WatchCache::for_policy(&p);
        assert_eq!(
            c.label_keys,
            ["example.com/mode", "example.com/iso", "winadmit.io/ignore"]
        );
    }
}
