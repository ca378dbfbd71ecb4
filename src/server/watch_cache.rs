//! What the webhook knows of the cluster beyond each AdmissionReview:
//! namespace labels (per-namespace mode and isolation) and RuntimeClasses
//! (a RuntimeClass can make a pod a Windows pod), kept current by kube-rs
//! watchers so no request waits on the API server.
//!
//! Two layers:
//! - [`ClusterCache`]: plain data, fed [`Change`]s, read by
//!   [`crate::admission`] through [`ClusterView`]. Namespaces keep only
//!   their name and the labels the policy reads; RuntimeClasses are
//!   published as an immutable [`RuntimeClasses`] snapshot swapped
//!   atomically on change, so each review takes a snapshot for the cost of
//!   a reference count. Unit-tested without a cluster.
//! - [`spawn`]: the watchers (list, then watch; relist on desync; retry
//!   with kube's default backoff, 0.8 s doubling to 30 s). An error never
//!   reaches the admission path: the cache keeps its last good data (none
//!   at first), logs what failed (verb, resource, why, what to do) and
//!   retries.

use crate::errors::error_chain;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::cluster::ClusterView;
use crate::cluster::{WindowsNode, WindowsNodes};
use crate::gmsa::CredSpec;
use crate::policy::Policy;
use crate::targeting::{RuntimeClassInfo, RuntimeClasses};

/// A resource the cache watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Namespaces,
    RuntimeClasses,
    /// Windows nodes only (label selector `kubernetes.io/os=windows`).
    Nodes,
    /// `gmsacredentialspecs.windows.k8s.io` (with `serve --gmsa`).
    GmsaCredentialSpecs,
}

impl Watched {
    /// The name `kubectl auth can-i` and RBAC rules use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::RuntimeClasses => "runtimeclasses.node.k8s.io",
            Self::Nodes => "nodes",
            Self::GmsaCredentialSpecs => "gmsacredentialspecs.windows.k8s.io",
        }
    }

    /// The metric label.
    fn label(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::RuntimeClasses => "runtimeclasses",
            Self::Nodes => "nodes",
            Self::GmsaCredentialSpecs => "gmsacredentialspecs",
        }
    }

    /// What the webhook does without this resource.
    fn without(self) -> &'static str {
        match self {
            Self::Namespaces => {
                "namespace labels (per-namespace mode, isolation) are ignored until this succeeds"
            }
            Self::RuntimeClasses => {
                "runtimeClassName only marks a pod as Windows through the policy's windowsRuntimeClasses until this succeeds"
            }
            Self::Nodes => {
                "verdicts use the flags', the policy's or the default Kubernetes version and runtime, and no Windows builds are known, until this succeeds"
            }
            Self::GmsaCredentialSpecs => {
                "each review reads the credential specs it names with a get until this succeeds"
            }
        }
    }
}

/// One step of a watch, reduced to names and the data kept for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<V> {
    /// A (re)list starts: what follows replaces everything once complete.
    Relist,
    /// An object of the (re)list.
    Listed(String, V),
    /// The (re)list is complete.
    ListDone,
    /// An object was added or changed.
    Applied(String, V),
    /// An object was deleted.
    Deleted(String),
}

impl<V> Change<V> {
    /// Reduces a watcher event with `extract` (name and kept data; `None`
    /// drops the object).
    pub fn from_event<K>(
        event: watcher::Event<K>,
        extract: impl Fn(&K) -> Option<(String, V)>,
    ) -> Option<Self>
    where
        K: Resource,
    {
        Some(match event {
            watcher::Event::Init => Self::Relist,
            watcher::Event::InitApply(k) => {
                let (name, v) = extract(&k)?;
                Self::Listed(name, v)
            }
            watcher::Event::InitDone => Self::ListDone,
            watcher::Event::Apply(k) => {
                let (name, v) = extract(&k)?;
                Self::Applied(name, v)
            }
            watcher::Event::Delete(k) => Self::Deleted(k.meta().name.clone()?),
        })
    }
}

/// A name-keyed mirror of one resource. A relist is buffered and replaces
/// the live data only when complete, so readers never see half a list;
/// until the first list completes the mirror is empty.
#[derive(Debug)]
pub struct Mirror<V> {
    live: HashMap<String, V>,
    relist: Option<HashMap<String, V>>,
    synced: bool,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Self {
            live: HashMap::new(),
            relist: None,
            synced: false,
        }
    }
}

impl<V> Mirror<V> {
    /// Applies one change; true when the live data changed.
    pub fn apply(&mut self, change: Change<V>) -> bool {
        match change {
            Change::Relist => {
                self.relist = Some(HashMap::new());
                false
            }
            Change::Listed(name, v) => {
                match &mut self.relist {
                    Some(buffer) => {
                        buffer.insert(name, v);
                    }
                    // A listed object without a relist start: keep it.
                    None => {
                        self.live.insert(name, v);
                        return true;
                    }
                }
                false
            }
            Change::ListDone => {
                if let Some(buffer) = self.relist.take() {
                    self.live = buffer;
                }
                self.synced = true;
                true
            }
            Change::Applied(name, v) => {
                self.live.insert(name, v);
                true
            }
            Change::Deleted(name) => self.live.remove(&name).is_some(),
        }
    }

    #[must_use]
    pub fn get(&self, name: &str) -> Option<&V> {
        self.live.get(name)
    }

    /// Objects in the live data.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// A first list has completed.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.live.iter()
    }
}

/// Which watched resources have completed their first list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    pub namespaces: bool,
    pub runtime_classes: bool,
    pub nodes: bool,
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
pub struct ClusterCache {
    /// The namespace label keys kept (those the policy reads).
    label_keys: Vec<String>,
    namespaces: RwLock<Mirror<BTreeMap<String, String>>>,
    runtime_class_mirror: Mutex<Mirror<RuntimeClassInfo>>,
    /// The published snapshot of `runtime_class_mirror`.
    runtime_classes: ArcSwap<RuntimeClasses>,
    /// The cluster's Windows nodes (a small projection of each).
    node_mirror: Mutex<Mirror<WindowsNode>>,
    /// The published snapshot of `node_mirror`.
    nodes: ArcSwap<WindowsNodes>,
    /// The cluster's GMSACredentialSpecs (with `serve --gmsa`).
    gmsa_mirror: Mutex<Mirror<CredSpec>>,
    /// The published snapshot of `gmsa_mirror`, once listed.
    gmsa_specs: ArcSwap<Option<BTreeMap<String, CredSpec>>>,
    synced: watch::Sender<Synced>,
}

impl Debug for ClusterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCache")
            .field("label_keys", &self.label_keys)
            .field("synced", &*self.synced.borrow())
            .finish_non_exhaustive()
    }
}

impl ClusterCache {
    /// A cache keeping the namespace labels named in `label_keys`.
    #[must_use]
    pub fn new(label_keys: Vec<String>) -> Self {
        Self {
            label_keys,
            namespaces: RwLock::new(Mirror::default()),
            runtime_class_mirror: Mutex::new(Mirror::default()),
            runtime_classes: ArcSwap::from_pointee(RuntimeClasses::default()),
            node_mirror: Mutex::new(Mirror::default()),
            nodes: ArcSwap::from_pointee(WindowsNodes::default()),
            gmsa_mirror: Mutex::new(Mirror::default()),
            gmsa_specs: ArcSwap::from_pointee(None),
            synced: watch::channel(Synced::default()).0,
        }
    }

    /// A cache keeping the namespace labels `policy` reads: its
    /// `namespaceModeLabel` and `mutation.isolationNamespaceLabel`.
    #[must_use]
    pub fn for_policy(policy: &Policy) -> Self {
        let mut keys = vec![policy.namespace_mode_label.clone()];
        if let Some(k) = &policy.mutation.isolation_namespace_label {
            keys.push(k.clone());
        }
        keys.retain(|k| !k.is_empty());
        keys.dedup();
        Self::new(keys)
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

    /// What winadmit keeps of a Node: only Windows nodes, projected
    /// (name, labels, kubelet and runtime versions).
    #[must_use]
    pub fn node_entry(node: &Node) -> Option<(String, WindowsNode)> {
        let value = serde_json::to_value(node).ok()?;
        let n = WindowsNode::from_object(&value)?;
        Some((n.name.clone(), n))
    }

    /// Applies a Node change, publishing a new snapshot when the data
    /// changed; returns how many Windows nodes are cached.
    pub fn apply_node(&self, change: Change<WindowsNode>) -> usize {
        let done = matches!(change, Change::ListDone);
        let mut m = self
            .node_mirror
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if m.apply(change) {
            let snapshot = WindowsNodes {
                nodes: m.iter().map(|(_, n)| n.clone()).collect(),
            };
            self.nodes.store(Arc::new(snapshot));
        }
        let n = m.len();
        drop(m);
        if done {
            self.synced.send_modify(|s| s.nodes = true);
        }
        n
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

impl ClusterView for ClusterCache {
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
}

/// The cache's metrics, registered with the server's registry.
#[derive(Debug, Clone, Default)]
pub struct ClusterMetrics {
    objects: Family<[(&'static str, &'static str); 1], Gauge>,
    synced: Family<[(&'static str, &'static str); 1], Gauge>,
    last_sync: Family<[(&'static str, &'static str); 1], Gauge>,
    errors: Family<[(&'static str, &'static str); 2], Counter>,
}

impl ClusterMetrics {
    /// Registers the cache's metrics (no samples until the cache runs).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "cluster_cache_objects",
            "Objects in the cluster cache, by resource",
            m.objects.clone(),
        );
        registry.register(
            "cluster_cache_synced",
            "1 once the cluster cache has completed a first list of the resource",
            m.synced.clone(),
        );
        registry.register(
            "cluster_cache_last_sync_timestamp_seconds",
            "Unix time of the last completed (re)list of the resource",
            m.last_sync.clone(),
        );
        registry.register(
            "cluster_cache_errors",
            "Failed list and watch calls of the cluster cache, by resource and verb",
            m.errors.clone(),
        );
        m
    }

    fn objects(&self, w: Watched, n: usize) {
        self.objects
            .get_or_create(&[("resource", w.label())])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    fn synced(&self, w: Watched) {
        self.synced.get_or_create(&[("resource", w.label())]).set(1);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_sync
            .get_or_create(&[("resource", w.label())])
            .set(now);
    }

    fn error(&self, w: Watched, verb: &'static str) {
        self.errors
            .get_or_create(&[("resource", w.label()), ("verb", verb)])
            .inc();
    }
}

/// How long the cache waits on the API server. Every call has a deadline,
/// so a silent or trickling API server makes the watcher fail and retry
/// (logged, counted in `cluster_cache_errors`), never hang for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Time to connect (TCP and TLS) to the API server.
    pub connect: Duration,
    /// Longest silence accepted from the API server within one call (and
    /// the write deadline): above `watch_seconds`, so only a stalled server
    /// hits it.
    pub read: Duration,
    /// The server-side timeout of each watch call (`timeoutSeconds`).
    pub watch_seconds: u32,
    /// Longest wait for one page of a list, however the server trickles it.
    pub list_page: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            connect: CONNECT_TIMEOUT,
            read: READ_TIMEOUT,
            watch_seconds: WATCH_SECONDS,
            list_page: LIST_PAGE,
        }
    }
}

impl Deadlines {
    /// Sets the client-side deadlines on the configuration the cache's
    /// client is built from.
    pub fn apply_to(&self, config: &mut kube::Config) {
        config.connect_timeout = Some(self.connect);
        config.read_timeout = Some(self.read);
        config.write_timeout = Some(self.read);
    }
}

/// Starts the watchers on the current tokio runtime, with the server-side
/// watch timeout and list-page deadline of `deadlines` (its client-side
/// ones belong on `client`: [`Deadlines::apply_to`]). They run until the
/// runtime stops.
pub fn spawn(
    client: Client,
    cache: Arc<ClusterCache>,
    metrics: ClusterMetrics,
    deadlines: Deadlines,
) {
    {
        let cache = Arc::clone(&cache);
        let metrics = metrics.clone();
        let api: Api<Namespace> = Api::all(client.clone());
        tokio::spawn(async move {
            let c = Arc::clone(&cache);
            run(api, Watched::Namespaces, &metrics, deadlines, move |ev| {
                Change::from_event(ev, |ns| c.namespace_entry(ns)).map(|ch| c.apply_namespace(ch))
            })
            .await;
        });
    }
    {
        let cache = Arc::clone(&cache);
        let metrics = metrics.clone();
        let api: Api<RuntimeClass> = Api::all(client.clone());
        tokio::spawn(async move {
            run(
                api,
                Watched::RuntimeClasses,
                &metrics,
                deadlines,
                move |ev| {
                    Change::from_event(ev, ClusterCache::runtime_class_entry)
                        .map(|ch| cache.apply_runtime_class(ch))
                },
            )
            .await;
        });
    }
    let api: Api<Node> = Api::all(client);
    tokio::spawn(async move {
        run(api, Watched::Nodes, &metrics, deadlines, move |ev| {
            Change::from_event(ev, ClusterCache::node_entry).map(|ch| cache.apply_node(ch))
        })
        .await;
    });
}

/// A `GMSACredentialSpec` as the watch reads it: its name and contents.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct GmsaCredentialSpecObject {
    pub metadata: kube::api::ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credspec: Option<serde_json::Value>,
}

impl Resource for GmsaCredentialSpecObject {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        crate::gmsa::KIND.into()
    }
    fn group((): &()) -> std::borrow::Cow<'_, str> {
        crate::gmsa::GROUP.into()
    }
    fn version((): &()) -> std::borrow::Cow<'_, str> {
        crate::gmsa::VERSION.into()
    }
    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        crate::gmsa::RESOURCE.into()
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

impl GmsaCredentialSpecObject {
    /// Its name and what winadmit reads of it: the reader `lint` uses.
    #[must_use]
    pub fn entry(&self) -> Option<(String, CredSpec)> {
        let mut value = serde_json::to_value(self).ok()?;
        value["apiVersion"] = format!("{}/{}", crate::gmsa::GROUP, crate::gmsa::VERSION).into();
        value["kind"] = crate::gmsa::KIND.into();
        CredSpec::from_object(&value)
    }
}

/// Starts the watch of the cluster's GMSACredentialSpecs (`serve --gmsa`).
pub fn spawn_gmsa(
    client: Client,
    cache: Arc<ClusterCache>,
    metrics: ClusterMetrics,
    deadlines: Deadlines,
) {
    let api: Api<GmsaCredentialSpecObject> = Api::all(client);
    tokio::spawn(async move {
        run(
            api,
            Watched::GmsaCredentialSpecs,
            &metrics,
            deadlines,
            move |ev| {
                Change::from_event(ev, GmsaCredentialSpecObject::entry)
                    .map(|ch| cache.apply_gmsa(ch))
            },
        )
        .await;
    });
}

/// One watcher loop: events into `apply` (which returns the object count),
/// errors logged once per distinct failure and retried with backoff.
async fn run<K>(
    api: Api<K>,
    what: Watched,
    metrics: &ClusterMetrics,
    deadlines: Deadlines,
    mut apply: impl FnMut(watcher::Event<K>) -> Option<usize>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    // The API server ends each watch after `watch_seconds`, so a healthy
    // watch is never silent for the read deadline; a silent server is cut off.
    // Nodes: only the Windows ones, so memory stays small in big clusters.
    let start = || {
        let config = watcher::Config::default().timeout(deadlines.watch_seconds);
        let config = match what {
            Watched::Nodes => config.labels("kubernetes.io/os=windows"),
            _ => config,
        };
        watcher(api.clone(), config).default_backoff().boxed()
    };
    let mut stream = start();
    // The last failure logged and when: a repeat is logged at debug level,
    // with a reminder at warn level every REWARN.
    let mut failing: Option<String> = None;
    let mut warned = Instant::now();
    let mut synced_once = false;
    let mut relist = watcher::DefaultBackoff::default();
    // While a list is in progress each page must arrive within `list_page`:
    // a server that trickles bytes defeats the read timeout, not this.
    let mut listing = true;
    loop {
        let item = if listing {
            match tokio::time::timeout(deadlines.list_page, stream.next()).await {
                Ok(item) => item,
                Err(_) => {
                    metrics.error(what, "list");
                    tracing::warn!(
                        resource = what.as_str(),
                        verb = "list",
                        "cluster cache: cannot list {}: the API server sent no complete page within {:?}; {}; listing again",
                        what.as_str(),
                        deadlines.list_page,
                        what.without()
                    );
                    // Not at once: a server that keeps the list going
                    // (an endless continue token) is retried with the
                    // watcher's own backoff, with jitter.
                    tokio::time::sleep(relist.next().unwrap_or(Duration::from_secs(30))).await;
                    stream = start();
                    continue;
                }
            }
        } else {
            stream.next().await
        };
        let Some(item) = item else { break };
        match item {
            Ok(event) => {
                if matches!(event, watcher::Event::Init) {
                    listing = true;
                }
                let done = matches!(event, watcher::Event::InitDone);
                if done {
                    listing = false;
                    kube::runtime::utils::Backoff::reset(&mut relist);
                }
                if let Some(n) = apply(event) {
                    metrics.objects(what, n);
                    if done {
                        metrics.synced(what);
                        if failing.take().is_some() {
                            tracing::info!(
                                resource = what.as_str(),
                                objects = n,
                                "cluster cache: {} listed after earlier failures; the cache is current",
                                what.as_str()
                            );
                        } else if !synced_once {
                            tracing::info!(
                                resource = what.as_str(),
                                objects = n,
                                "cluster cache: {} listed",
                                what.as_str()
                            );
                        }
                        synced_once = true;
                    }
                }
            }
            Err(err) => {
                let (verb, message) = describe(what, &err);
                metrics.error(what, verb);
                if is_expected(&err) {
                    // A watch older than the API server's history: the
                    // watcher relists, as designed.
                    tracing::debug!(resource = what.as_str(), verb, "{message}");
                } else if failing.as_deref() == Some(message.as_str()) && warned.elapsed() < REWARN
                {
                    tracing::debug!(resource = what.as_str(), verb, "{message}");
                } else {
                    tracing::warn!(resource = what.as_str(), verb, "{message}");
                    failing = Some(message);
                    warned = Instant::now();
                }
            }
        }
    }
}

/// Default of [`Deadlines::connect`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`Deadlines::read`].
pub const READ_TIMEOUT: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 30);
/// Default of [`Deadlines::watch_seconds`].
pub const WATCH_SECONDS: u32 = 60;
/// Default of [`Deadlines::list_page`].
pub const LIST_PAGE: Duration = Duration::from_secs(60);

/// How often a failure that persists is logged again at warn level.
const REWARN: Duration = Duration::from_secs(300);

/// `410 Gone` on a watch: routine, the watcher relists.
fn is_expected(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// The verb that failed and a message naming it, the resource, why, what
/// the webhook does meanwhile and what to do.
fn describe(what: Watched, err: &watcher::Error) -> (&'static str, String) {
    let (verb, source) = match err {
        watcher::Error::InitialListFailed(e) => ("list", Some(e)),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => ("watch", Some(e)),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => ("watch", None),
    };
    let resource = what.as_str();
    let why = match (source, err) {
        (Some(kube::Error::Api(status)), _) | (None, watcher::Error::WatchError(status)) => {
            let detail = if status.message.is_empty() {
                String::new()
            } else {
                format!(" ({})", status.message)
            };
            match status.code {
                403 => format!(
                    "forbidden{detail}; grant get, list and watch on {resource} to the webhook's service account (manifests/base/rbac.yaml)"
                ),
                401 => format!(
                    "unauthorized{detail}; check the service account token or kubeconfig user"
                ),
                404 => format!("not found{detail}; the API server does not serve {resource}"),
                410 => format!("expired{detail}; relisting"),
                code => format!("HTTP {code} {}{detail}", status.reason),
            }
        }
        (Some(e), _) => format!("cannot reach the API server: {}", error_chain(e)),
        (None, e) => e.to_string(),
    };
    (
        verb,
        format!(
            "cluster cache: cannot {verb} {resource}: {why}; {}; retrying with backoff",
            what.without()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targeting::Os;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

    fn cache() -> ClusterCache {
        ClusterCache::new(vec!["winadmit.io/mode".into(), "iso".into()])
    }

    fn feed_ns(c: &ClusterCache, ev: watcher::Event<Namespace>) -> Option<usize> {
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
            Change::from_event(ev, ClusterCache::runtime_class_entry)
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

    /// The admission door reads the cache through its trait: no cluster,
    /// no network, the same `review` the server calls.
    #[test]
    fn admission_uses_the_cached_labels_and_runtime_classes() {
        use crate::admission::{Admission, Endpoint, review};
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
        let (name, info) = ClusterCache::runtime_class_entry(&win).unwrap();
        c.apply_runtime_class(Change::Listed(name, info));
        c.apply_runtime_class(Change::ListDone);
        let adm = Admission {
            policy: Policy::default_policy(),
            cluster: crate::cluster::Cluster::default(),
            namespaces: Some(Box::new(Arc::clone(&c))),
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

    #[test]
    fn the_policy_decides_which_labels_are_kept() {
        let mut p = Policy::default_policy();
        p.namespace_mode_label = "example.com/mode".into();
        p.mutation.isolation_namespace_label = Some("example.com/iso".into());
        let c = ClusterCache::for_policy(&p);
        assert_eq!(c.label_keys, ["example.com/mode", "example.com/iso"]);
    }

    #[test]
    fn errors_name_the_verb_and_resource() {
        let status = kube::core::Status::failure(
            "namespaces is forbidden: User \"x\" cannot watch resource \"namespaces\"",
            "Forbidden",
        )
        .with_code(403);
        let err = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status)));
        let (verb, msg) = describe(Watched::Namespaces, &err);
        assert_eq!(verb, "watch");
        assert!(
            msg.starts_with("cluster cache: cannot watch namespaces: forbidden ("),
            "{msg}"
        );
        assert!(msg.contains("rbac.yaml"), "{msg}");
        let status = kube::core::Status::failure("nope", "Forbidden").with_code(403);
        let err = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        let (verb, msg) = describe(Watched::RuntimeClasses, &err);
        assert_eq!(verb, "list");
        assert!(
            msg.starts_with("cluster cache: cannot list runtimeclasses.node.k8s.io: forbidden"),
            "{msg}"
        );
        assert!(!is_expected(&err));
        let gone =
            kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        assert!(is_expected(&watcher::Error::WatchError(Box::new(gone))));
    }
}
