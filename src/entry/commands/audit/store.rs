//! The workloads `audit` holds: one kube-rs watcher per workload kind (the
//! kinds and order of the live `report`: owners before what they own), each
//! object kept as JSON text without what changes on every status update
//! (`status`, `metadata.resourceVersion`, `metadata.managedFields`), so a
//! status update is no change. Every change marks its namespace to be
//! judged again; a relist replaces the kind's objects only once complete.
//!
//! Text, not a parsed tree: the audit holds every pod of the cluster, and a
//! defaulted pod's 1.7 KiB of JSON takes 17 KiB as a `serde_json::Value`
//! (every object a map of its own); a namespace's objects are parsed only
//! while it is judged (docs/BENCHMARKS.md, the audit's memory).
//!
//! Most pods are one of many of a controller (a ReplicaSet's, a Job's, a
//! DaemonSet's) and differ from their siblings only in their names, uids,
//! creation time, node and service-account token volume: such a pod is
//! kept as a patch of its first sibling ([`super::kept`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::runtime::watcher;
use kube::{Api, Client};

use super::failure::Failure;
use super::kept::Bases;
pub use super::kept::Kept;
use crate::entry::commands::report::live::{Resource, WORKLOADS};
use crate::entry::server::watch_cache::{RelistBackoff, is_expected};

/// (kind order, name) -> object, per namespace.
type Objects = BTreeMap<String, BTreeMap<(usize, String), Kept>>;

/// The watched workloads and the namespaces changed since last judged.
#[derive(Debug, Default)]
pub struct Store {
    inner: Mutex<Inner>,
    /// Only the pods' watcher takes it, before `inner`.
    bases: Mutex<Bases>,
}

#[derive(Debug, Default)]
struct Inner {
    objects: Objects,
    /// A relist of a kind in progress.
    relist: HashMap<usize, Vec<(String, String, Kept)>>,
    synced: [bool; WORKLOADS.len()],
    /// Namespace -> when it first changed since it was last judged.
    dirty: BTreeMap<String, Instant>,
    count: usize,
}

impl Store {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every kind has completed a first list.
    #[must_use]
    pub fn synced(&self) -> bool {
        self.lock().synced.iter().all(|s| *s)
    }

    /// Applies one watcher event of workload kind `kind` (its index in
    /// [`WORKLOADS`]).
    pub fn apply(&self, kind: usize, event: watcher::Event<DynamicObject>) {
        let r = WORKLOADS[kind];
        // The object is written as text before the lock is taken.
        match event {
            watcher::Event::Init => {
                self.lock().relist.insert(kind, Vec::new());
            }
            watcher::Event::InitApply(obj) => {
                if rollout_history(&obj, r) {
                    return;
                }
                if let Some(entry) = self.normalize(obj, r) {
                    self.lock().relist.entry(kind).or_default().push(entry);
                }
            }
            watcher::Event::InitDone => {
                let mut inner = self.lock();
                let listed = inner.relist.remove(&kind).unwrap_or_default();
                inner.replace_kind(kind, listed);
                inner.synced[kind] = true;
            }
            watcher::Event::Apply(obj) if rollout_history(&obj, r) => {
                // Scaled to 0 by a rollout: as if deleted.
                if let Some((ns, name)) = key_of(&obj) {
                    self.lock().put(kind, ns, name, None);
                }
            }
            watcher::Event::Apply(obj) => {
                if let Some((ns, name, value)) = self.normalize(obj, r) {
                    self.lock().put(kind, ns, name, Some(value));
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some((ns, name)) = key_of(&obj) {
                    self.lock().put(kind, ns, name, None);
                }
            }
        }
    }

    /// The namespace, name and kept form of a watched object: a pod with
    /// a controller as its patch from its base, any other object as its
    /// text.
    fn normalize(&self, obj: DynamicObject, r: Resource) -> Option<(String, String, Kept)> {
        let controller = (r.kind == "Pod")
            .then(|| {
                obj.metadata
                    .owner_references
                    .as_ref()?
                    .iter()
                    .find(|o| o.controller == Some(true))
                    .map(|o| o.uid.clone())
            })
            .flatten();
        let Some(uid) = controller else {
            let (ns, name, text) = normalize(obj, r)?;
            return Some((ns, name, Kept::Whole(text.into())));
        };
        let (ns, name) = key_of(&obj)?;
        let pod = serde_json::to_value(trim(obj, r)).ok()?;
        let kept = self
            .bases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keep(&uid, pod)?;
        Some((ns, name, kept))
    }

    /// Marks namespaces to be judged again.
    pub fn mark<'a>(&self, namespaces: impl IntoIterator<Item = &'a str>) {
        let now = Instant::now();
        let mut inner = self.lock();
        for ns in namespaces {
            inner.dirty.entry(ns.to_owned()).or_insert(now);
        }
    }

    /// Marks every namespace with workloads.
    pub fn mark_all(&self) {
        let now = Instant::now();
        let mut inner = self.lock();
        let names: Vec<String> = inner.objects.keys().cloned().collect();
        for ns in names {
            inner.dirty.entry(ns).or_insert(now);
        }
    }

    /// The namespaces changed since last judged, emptied.
    pub fn take_dirty(&self) -> BTreeMap<String, Instant> {
        std::mem::take(&mut self.lock().dirty)
    }

    /// When the oldest change not yet taken happened, and how many
    /// namespaces are pending.
    #[must_use]
    pub fn pending(&self) -> (usize, Option<Instant>) {
        let inner = self.lock();
        (inner.dirty.len(), inner.dirty.values().min().copied())
    }

    /// A namespace's objects, owners before what they own.
    #[must_use]
    pub fn objects_of(&self, ns: &str) -> Vec<Kept> {
        self.lock()
            .objects
            .get(ns)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Workloads held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().count
    }
}

impl Inner {
    /// Sets (`Some`) or removes (`None`) one object; marks its namespace
    /// when that changes anything.
    fn put(&mut self, kind: usize, ns: String, name: String, value: Option<Kept>) {
        let key = (kind, name);
        let changed = match value {
            Some(v) => {
                let objects = self.objects.entry(ns.clone()).or_default();
                let same = objects.get(&key).is_some_and(|old| *old == v);
                if !same && objects.insert(key, v).is_none() {
                    self.count += 1;
                }
                !same
            }
            None => {
                let removed = self.objects.get_mut(&ns).and_then(|m| m.remove(&key));
                if removed.is_some() {
                    self.count -= 1;
                    if self.objects.get(&ns).is_some_and(BTreeMap::is_empty) {
                        self.objects.remove(&ns);
                    }
                }
                removed.is_some()
            }
        };
        if changed {
            self.dirty.entry(ns).or_insert_with(Instant::now);
        }
    }

    /// Replaces every object of `kind` with a completed list.
    fn replace_kind(&mut self, kind: usize, listed: Vec<(String, String, Kept)>) {
        let mut keep: std::collections::HashSet<(String, String)> =
            std::collections::HashSet::new();
        for (ns, name, value) in listed {
            keep.insert((ns.clone(), name.clone()));
            self.put(kind, ns, name, Some(value));
        }
        let gone: Vec<(String, String)> = self
            .objects
            .iter()
            .flat_map(|(ns, m)| {
                m.keys()
                    .filter(|(k, _)| *k == kind)
                    .map(move |(_, name)| (ns.clone(), name.clone()))
            })
            .filter(|k| !keep.contains(k))
            .collect();
        for (ns, name) in gone {
            self.put(kind, ns, name, None);
        }
    }
}

/// A Deployment's ReplicaSet scaled to 0, kept out of the store
/// ([`crate::decision::workload::replica_set_is_rollout_history`]).
fn rollout_history(obj: &DynamicObject, r: Resource) -> bool {
    let controller = obj.metadata.owner_references.as_ref().and_then(|owners| {
        owners
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.kind.as_str())
    });
    r.kind == "ReplicaSet"
        && crate::decision::workload::replica_set_is_rollout_history(
            obj.data
                .pointer("/spec/replicas")
                .and_then(serde_json::Value::as_i64),
            controller,
        )
}

/// The namespace and name of a watched object.
fn key_of(obj: &DynamicObject) -> Option<(String, String)> {
    Some((obj.metadata.namespace.clone()?, obj.metadata.name.clone()?))
}

/// The namespace, name and JSON text of a watched object, written straight
/// from the object (no tree in between).
fn normalize(obj: DynamicObject, r: Resource) -> Option<(String, String, String)> {
    let (ns, name) = key_of(&obj)?;
    Some((ns, name, serde_json::to_string(&trim(obj, r)).ok()?))
}

/// The object without what changes on every status update (`status`,
/// `metadata.resourceVersion`, `metadata.managedFields`), its type set.
fn trim(mut obj: DynamicObject, r: Resource) -> DynamicObject {
    obj.types = Some(TypeMeta {
        api_version: r.api_version.to_owned(),
        kind: r.kind.to_owned(),
    });
    obj.metadata.resource_version = None;
    obj.metadata.managed_fields = None;
    if let Some(data) = obj.data.as_object_mut() {
        data.remove("status");
    }
    obj
}

/// The API resource of a workload kind.
fn api_resource(r: Resource) -> ApiResource {
    let (group, version) = r.api_version.split_once('/').unwrap_or(("", r.api_version));
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: r.api_version.to_owned(),
        kind: r.kind.to_owned(),
        plural: r.plural.to_owned(),
    }
}

/// Objects per page of a list. A page is held as parsed objects (status
/// and managed fields included) while its objects are kept, five kinds
/// listing at once: at 10,000 pods the audit's peak memory was 60 MiB
/// with kube-runtime's default of 500, 49 MiB with 250 and 43 MiB with 100
/// (89 MiB with 2,000), its CPU 1.1-1.2 s, 1.2 s and 1.4-1.7 s
/// (`benches/audit_scale.rs -- 100 1000 10000`, 2026-12-07, a 2-core
/// machine at load 3-8). kube-apiserver v1.37 serves the pages from its
/// watch cache; lists served from that cache without a quorum read
/// (`any_semantic`) changed nothing measurable there.
const LIST_PAGE: u32 = 250;

/// Starts one watcher per workload kind feeding `store`; they run until
/// the runtime stops.
pub fn spawn(client: &Client, store: &Arc<Store>, watch_seconds: u32) {
    for (kind, &r) in WORKLOADS.iter().enumerate() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(r));
        let store = Arc::clone(store);
        let config = watcher::Config::default()
            .timeout(watch_seconds)
            .page_size(LIST_PAGE);
        tokio::spawn(async move {
            watch(
                || watcher(api.clone(), config.clone()).boxed(),
                r,
                |event| {
                    store.apply(kind, event);
                },
            )
            .await;
        });
    }
}

/// How often a failure that persists is logged again at warn level (as
/// the cluster cache does).
const REWARN: Duration = Duration::from_secs(300);

/// One watcher loop, backing off as the cluster cache's watchers do
/// ([`RelistBackoff`]: 0.8 s doubling to 30 s with jitter, reset only once
/// a list completes or a watch delivers). Each failure is logged once at
/// warn level (again after [`REWARN`]), repeats at debug level, and the
/// recovery once.
async fn watch(
    start: impl Fn() -> futures::stream::BoxStream<
        'static,
        watcher::Result<watcher::Event<DynamicObject>>,
    >,
    r: Resource,
    mut apply: impl FnMut(watcher::Event<DynamicObject>),
) {
    let mut stream = start();
    let mut relist = RelistBackoff::default();
    let mut failing: Option<(String, Instant)> = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                if relist.saw(&event) && failing.take().is_some() {
                    tracing::info!(
                        resource = r.display,
                        "audit: {} listed and watched again",
                        r.display
                    );
                }
                apply(event);
            }
            Err(e) => {
                let delay = relist.delay();
                let (verb, message) = describe(r, &e);
                let repeat = failing
                    .as_ref()
                    .is_some_and(|(m, at)| *m == message && at.elapsed() < REWARN);
                if repeat || is_expected(&e) {
                    tracing::debug!(resource = r.display, verb, retry_in = ?delay, "{message}");
                } else {
                    tracing::warn!(
                        resource = r.display,
                        verb,
                        "{message}; retrying with backoff (0.8 s doubling to 30 s)"
                    );
                    failing = Some((message, Instant::now()));
                }
                // The stream is not polled meanwhile: it restarts after this.
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// The verb that failed and a message naming the resource, the failure
/// and its fix (the RBAC fix only for a 403).
fn describe(r: Resource, err: &watcher::Error) -> (&'static str, String) {
    let (verb, source) = match err {
        watcher::Error::InitialListFailed(e) => ("list", e),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => ("watch", e),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
            return (
                "watch",
                format!(
                    "audit: cannot watch {}: {}; listing again",
                    r.display,
                    crate::entry::errors::error_chain(err)
                ),
            );
        }
    };
    let failure = Failure::of(source);
    (
        verb,
        format!(
            "audit: cannot {verb} {}: {} ({}); {}",
            r.display,
            failure.what(),
            Failure::detail(source),
            failure.fix(r.display, "get, list and watch")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, node: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": rv}
        }))
        .unwrap()
    }

    const POD: usize = WORKLOADS.len() - 1;

    fn tree(kept: &Kept) -> serde_json::Value {
        kept.value(&mut HashMap::new()).unwrap()
    }

    /// A ReplicaSet's pod as the API server serves it.
    fn sibling(name: &str, node: &str, token: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "a", "resourceVersion": rv, "uid": format!("uid-{name}"),
                "labels": {"app.kubernetes.io/name": "web", "a~b": "c"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                    "uid": "rs-uid", "controller": true}],
                "managedFields": [{"manager": "kube-controller-manager"}]},
            "spec": {"nodeName": node,
                "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": token, "mountPath": "/var/run"}]}],
                "volumes": [{"name": token, "projected": {"sources": []}}]},
            "status": {"phase": "Running", "podIP": rv}
        }))
        .unwrap()
    }

    #[test]
    fn a_controllers_pods_are_kept_as_patches_that_give_each_pod_back() {
        let s = Store::default();
        s.apply(POD, watcher::Event::Init);
        s.apply(
            POD,
            watcher::Event::InitApply(sibling("web-1-a", "n1", "kube-api-access-aaaaa", "1")),
        );
        s.apply(
            POD,
            watcher::Event::InitApply(sibling("web-1-b", "n2", "kube-api-access-bbbbb", "2")),
        );
        s.apply(POD, watcher::Event::InitDone);
        let kept = s.objects_of("a");
        assert!(matches!(kept[0], Kept::Whole(_)), "the first is the base");
        let Kept::Sibling { base, patch } = &kept[1] else {
            panic!("the second is a patch: {:?}", kept[1]);
        };
        assert!(Arc::ptr_eq(base, kept[0].parts().0), "one base text");
        assert!(patch.len() < base.len(), "{patch}");
        let mut bases = HashMap::new();
        for (k, (name, node, token, rv)) in kept.iter().zip([
            ("web-1-a", "n1", "kube-api-access-aaaaa", "1"),
            ("web-1-b", "n2", "kube-api-access-bbbbb", "2"),
        ]) {
            let want =
                serde_json::to_value(trim(sibling(name, node, token, rv), WORKLOADS[POD])).unwrap();
            assert!(
                want.get("status").is_none() && want["metadata"].get("resourceVersion").is_none()
            );
            assert_eq!(k.value(&mut bases).unwrap(), want);
        }
        s.take_dirty();
        // A status update of either is no change; a new node is.
        s.apply(
            POD,
            watcher::Event::Apply(sibling("web-1-b", "n2", "kube-api-access-bbbbb", "3")),
        );
        s.apply(
            POD,
            watcher::Event::Apply(sibling("web-1-a", "n1", "kube-api-access-aaaaa", "4")),
        );
        assert!(s.take_dirty().is_empty(), "a status update is no change");
        s.apply(
            POD,
            watcher::Event::Apply(sibling("web-1-b", "n3", "kube-api-access-bbbbb", "5")),
        );
        assert_eq!(s.take_dirty().len(), 1);
        assert_eq!(tree(&s.objects_of("a")[1])["spec"]["nodeName"], "n3");
        // The base pod gone, its siblings keep its text.
        s.apply(
            POD,
            watcher::Event::Delete(sibling("web-1-a", "n1", "kube-api-access-aaaaa", "6")),
        );
        assert_eq!(tree(&s.objects_of("a")[0])["metadata"]["name"], "web-1-b");
    }

    #[test]
    fn a_status_update_is_no_change_and_a_relist_replaces_only_when_done() {
        let s = Store::default();
        s.apply(POD, watcher::Event::Init);
        s.apply(POD, watcher::Event::InitApply(pod("a", "p", "n1", "1")));
        assert!(s.len() == 0 && !s.synced());
        s.apply(POD, watcher::Event::InitDone);
        assert_eq!(s.len(), 1);
        let kept = tree(&s.objects_of("a")[0]);
        assert_eq!(
            (&kept["apiVersion"], &kept["kind"]),
            (&"v1".into(), &"Pod".into())
        );
        assert_eq!(kept["spec"]["nodeName"], "n1");
        assert!(kept.get("status").is_none() && kept["metadata"].get("resourceVersion").is_none());
        assert_eq!(s.take_dirty().keys().collect::<Vec<_>>(), ["a"]);
        s.apply(POD, watcher::Event::Apply(pod("a", "p", "n1", "2")));
        assert!(s.take_dirty().is_empty(), "a status update is no change");
        s.apply(POD, watcher::Event::Apply(pod("a", "p", "n2", "3")));
        assert_eq!(s.take_dirty().len(), 1);
        // A relist without the pod deletes it once done.
        s.apply(POD, watcher::Event::Init);
        s.apply(POD, watcher::Event::InitApply(pod("b", "q", "n1", "4")));
        assert_eq!(s.len(), 1);
        s.apply(POD, watcher::Event::InitDone);
        assert_eq!(s.objects_of("a").len(), 0);
        assert_eq!(s.objects_of("b").len(), 1);
        assert_eq!(s.take_dirty().len(), 2);
        s.apply(POD, watcher::Event::Delete(pod("b", "q", "n1", "5")));
        assert_eq!(s.len(), 0);
    }

    fn replica_set(name: &str, replicas: i64, owner: Option<&str>) -> DynamicObject {
        let owners = owner.map_or_else(Vec::new, |kind| {
            vec![
                serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": "web",
                "uid": "u", "controller": true}),
            ]
        });
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "a", "ownerReferences": owners},
            "spec": {"replicas": replicas, "selector": {}, "template": {}}
        }))
        .unwrap()
    }

    fn kind_of(name: &str) -> usize {
        WORKLOADS.iter().position(|r| r.kind == name).unwrap()
    }

    #[test]
    fn a_deployments_replica_set_scaled_to_zero_is_rollout_history_not_a_workload() {
        let rs = kind_of("ReplicaSet");
        let s = Store::default();
        s.apply(rs, watcher::Event::Init);
        s.apply(
            rs,
            watcher::Event::InitApply(replica_set("old", 0, Some("Deployment"))),
        );
        s.apply(
            rs,
            watcher::Event::InitApply(replica_set("new", 2, Some("Deployment"))),
        );
        // No Deployment: someone runs it by hand, it stays a workload.
        s.apply(rs, watcher::Event::InitApply(replica_set("mine", 0, None)));
        s.apply(rs, watcher::Event::InitDone);
        let names = |s: &Store| -> Vec<String> {
            s.objects_of("a")
                .iter()
                .map(|t| tree(t)["metadata"]["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(&s), ["mine", "new"]);
        s.take_dirty();
        // A rollout scales the current one to 0: it leaves, its namespace
        // is judged again.
        s.apply(
            rs,
            watcher::Event::Apply(replica_set("new", 0, Some("Deployment"))),
        );
        assert_eq!(names(&s), ["mine"]);
        assert_eq!(s.take_dirty().len(), 1);
        // A rollback scales an old one up: a workload again.
        s.apply(
            rs,
            watcher::Event::Apply(replica_set("old", 1, Some("Deployment"))),
        );
        assert_eq!(names(&s), ["mine", "old"]);
    }
}
