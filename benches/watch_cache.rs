//! The webhook's watch cache (`server::watch_cache::WatchCache`) against
//! kube-runtime's reflector `Store`, holding the same cluster: heap kept
//! per object (dhat's live bytes, exact), time to apply a full list, and
//! what one review reads (two namespace labels, the RuntimeClasses and the
//! Windows nodes). Numbers: docs/BENCHMARKS.md, "Watch cache".
//!
//! `cargo bench --bench watch_cache [-- NAMESPACES NODES]` (default 10000
//! namespaces, 1000 Windows nodes, 20 RuntimeClasses).
//!
//! Three stores:
//! - `hand-written`: the cache as the webhook runs it (namespace names and
//!   the policy's labels; Windows nodes and RuntimeClasses as parsed
//!   snapshots swapped on change).
//! - `reflector`: `reflector::store()` fed the watcher's objects as they
//!   arrive.
//! - `reflector, trimmed`: the same with each object cut to what winadmit
//!   reads before it is stored (no managedFields, annotations, images or
//!   conditions), the smallest a reflector can hold.
//!
//! The reflector's readers get `Arc<K>` objects, so a review there parses
//! the RuntimeClasses and Windows nodes it reads; the hand-written cache
//! parsed them once, when they changed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::Event;
use serde_json::json;
use winadmit::decision::cluster::{ClusterLookup, WindowsNodes};
use winadmit::decision::targeting::RuntimeClasses;
use winadmit::entry::server::watch_cache::{Change, WatchCache};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const MODE: &str = "winadmit.io/mode";
const ISOLATION: &str = "winadmit.io/isolation";

/// A namespace as a cluster holds it after `kubectl apply`.
fn namespace(i: usize) -> Namespace {
    let name = format!("team-{i:05}");
    let mut labels = json!({
        "kubernetes.io/metadata.name": name,
        "app.kubernetes.io/managed-by": "argocd",
        "team": format!("t{}", i % 97),
        "env": if i.is_multiple_of(3) { "prod" } else { "dev" },
    });
    if i.is_multiple_of(10) {
        labels[MODE] = "warn".into();
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": name, "uid": format!("6f1c2a9e-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-01-05T10:00:00Z",
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": format!(
                    "{{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{{\"annotations\":{{}},\"labels\":{{\"app.kubernetes.io/managed-by\":\"argocd\",\"team\":\"t{}\"}},\"name\":\"{name}\"}}}}\n",
                    i % 97
                )
            },
            "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update",
                "apiVersion": "v1", "time": "2026-01-05T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {".": {},
                    "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    "f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}, "f:team": {},
                        "f:env": {}, "f:kubernetes.io/metadata.name": {}}}}
            }]
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    }))
    .unwrap()
}

/// A Windows node as a managed cluster reports it (25 cached images).
fn node(i: usize) -> Node {
    let name = format!("akswin{i:06}");
    let images: Vec<_> = (0..25)
        .map(|k| {
            json!({
                "names": [
                    format!("mcr.microsoft.com/windows/servercore@sha256:{k:064x}"),
                    format!("mcr.microsoft.com/windows/servercore:ltsc2022-{k}")
                ],
                "sizeBytes": 2_000_000_000u64 + k
            })
        })
        .collect();
    let managed: Vec<_> = ["kubelet", "kube-controller-manager", "cloud-node-manager"]
        .iter()
        .map(|m| {
            json!({"manager": m, "operation": "Update", "apiVersion": "v1",
                "time": "2026-01-05T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:kubernetes.io/os": {},
                    "f:kubernetes.io/arch": {}, "f:node.kubernetes.io/windows-build": {},
                    "f:topology.kubernetes.io/zone": {}}},
                    "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
                        "f:lastHeartbeatTime": {}, "f:status": {}}}, "f:images": {},
                        "f:nodeInfo": {"f:kubeletVersion": {}}}}})
        })
        .collect();
    let conditions: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| {
            json!({"type": t, "status": if *t == "Ready" { "True" } else { "False" },
            "lastHeartbeatTime": "2026-11-26T07:00:00Z",
            "lastTransitionTime": "2026-01-05T10:00:00Z",
            "reason": format!("Kubelet{t}"), "message": format!("kubelet reports {t}")})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("0b7d3c1e-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 200_000 + i),
            "creationTimestamp": "2026-01-05T10:00:00Z",
            "labels": {
                "kubernetes.io/os": "windows", "beta.kubernetes.io/os": "windows",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/windows-build": "10.0.20348",
                "node.kubernetes.io/instance-type": "Standard_D4s_v5",
                "topology.kubernetes.io/region": "westeurope",
                "topology.kubernetes.io/zone": format!("westeurope-{}", i % 3 + 1),
                "agentpool": "win22", "kubernetes.azure.com/agentpool": "win22",
                "kubernetes.azure.com/os-sku": "Windows2022",
                "kubernetes.azure.com/node-image-version": "AKSWindows-2022-containerd-20348.2966.241211",
                "kubernetes.azure.com/role": "agent"
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"disk.csi.azure.com\":\"{name}\"}}")
            },
            "managedFields": managed
        },
        "spec": {"podCIDR": format!("10.244.{}.0/24", i % 256),
            "providerID": format!("azure:///subscriptions/0000/resourceGroups/mc/providers/Microsoft.Compute/virtualMachineScaleSets/akswin/virtualMachines/{i}")},
        "status": {
            "capacity": {"cpu": "4", "memory": "16776692Ki", "pods": "30",
                "ephemeral-storage": "133703676Ki", "attachable-volumes-azure-disk": "8"},
            "allocatable": {"cpu": "3860m", "memory": "12664308Ki", "pods": "30",
                "ephemeral-storage": "133703676Ki", "attachable-volumes-azure-disk": "8"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": format!("10.224.{}.{}", i / 256 % 256, i % 256)},
                {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": name, "systemUUID": format!("{i:032x}"),
                "bootID": "", "kernelVersion": "10.0.20348.2966", "osImage": "Windows Server 2022 Datacenter",
                "containerRuntimeVersion": "containerd://1.7.20+azure", "kubeletVersion": "v1.33.4",
                "kubeProxyVersion": "v1.33.4", "operatingSystem": "windows", "architecture": "amd64"},
            "images": images
        }
    }))
    .unwrap()
}

fn runtime_class(i: usize) -> RuntimeClass {
    serde_json::from_value(json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": format!("windows-{i}")},
        "handler": if i.is_multiple_of(2) { "runhcs-wcow-process" } else { "runhcs-wcow-hypervisor" },
        "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows",
            "node.kubernetes.io/windows-build": "10.0.20348"}}
    }))
    .unwrap()
}

/// What winadmit reads of a Namespace: name and labels.
fn trim_namespace(ns: &mut Namespace) {
    ns.metadata.managed_fields = None;
    ns.metadata.annotations = None;
    ns.spec = None;
    ns.status = None;
}

/// What winadmit reads of a Node: name, labels, `status.nodeInfo`.
fn trim_node(n: &mut Node) {
    n.metadata.managed_fields = None;
    n.metadata.annotations = None;
    n.spec = None;
    if let Some(s) = &mut n.status {
        let info = s.node_info.take();
        *s = k8s_openapi::api::core::v1::NodeStatus {
            node_info: info,
            ..Default::default()
        };
    }
}

/// A list as the watcher delivers it.
fn list<K: Clone>(objects: &[K]) -> Vec<Event<K>> {
    std::iter::once(Event::Init)
        .chain(objects.iter().cloned().map(Event::InitApply))
        .chain(std::iter::once(Event::InitDone))
        .collect()
}

struct Cluster {
    namespaces: Vec<Namespace>,
    nodes: Vec<Node>,
    classes: Vec<RuntimeClass>,
}

impl Cluster {
    fn trimmed(&self) -> Self {
        let mut t = Self {
            namespaces: self.namespaces.clone(),
            nodes: self.nodes.clone(),
            classes: self.classes.clone(),
        };
        t.namespaces.iter_mut().for_each(trim_namespace);
        t.nodes.iter_mut().for_each(trim_node);
        t
    }
}

fn hand_written(c: &Cluster) -> WatchCache {
    let cache = WatchCache::new(vec![MODE.into(), ISOLATION.into()]);
    for ev in list(&c.namespaces) {
        if let Some(ch) = Change::from_event(ev, |n| cache.namespace_entry(n)) {
            cache.apply_namespace(ch);
        }
    }
    for ev in list(&c.classes) {
        if let Some(ch) = Change::from_event(ev, WatchCache::runtime_class_entry) {
            cache.apply_runtime_class(ch);
        }
    }
    for ev in list(&c.nodes) {
        if let Some(ch) = Change::from_event(ev, WatchCache::node_entry) {
            cache.apply_node(ch);
        }
    }
    cache
}

struct Reflected {
    namespaces: Store<Namespace>,
    nodes: Store<Node>,
    classes: Store<RuntimeClass>,
}

fn reflected(c: &Cluster) -> Reflected {
    let (namespaces, mut w) = reflector::store();
    for ev in list(&c.namespaces) {
        w.apply_watcher_event(&ev);
    }
    let (nodes, mut wn) = reflector::store();
    for ev in list(&c.nodes) {
        wn.apply_watcher_event(&ev);
    }
    let (classes, mut wc) = reflector::store();
    for ev in list(&c.classes) {
        wc.apply_watcher_event(&ev);
    }
    // The writers own nothing the readers need once the list is applied.
    drop((w, wn, wc));
    Reflected {
        namespaces,
        nodes,
        classes,
    }
}

/// What a review reads from the hand-written cache.
fn review_hand_written(cache: &WatchCache, ns: &str) -> usize {
    let mode = cache.label(ns, MODE);
    let iso = cache.label(ns, ISOLATION);
    let classes = cache.runtime_classes().unwrap();
    let nodes = cache.nodes().unwrap();
    usize::from(mode.is_some())
        + usize::from(iso.is_some())
        + usize::from(classes.get("windows-0").is_some())
        + nodes.nodes.len()
}

/// The same from reflector stores: the objects parsed as the review needs them.
fn review_reflected(r: &Reflected, ns: &str) -> usize {
    let namespace = r.namespaces.get(&ObjectRef::new(ns));
    let label = |key: &str| {
        namespace
            .as_ref()
            .and_then(|n| n.metadata.labels.as_ref()?.get(key).cloned())
    };
    let (mode, iso) = (label(MODE), label(ISOLATION));
    let mut classes = RuntimeClasses::default();
    for rc in r.classes.state() {
        if let Some((name, info)) = WatchCache::runtime_class_entry(&rc) {
            classes.insert_info(name, info);
        }
    }
    let nodes = WindowsNodes {
        nodes: r
            .nodes
            .state()
            .iter()
            .filter_map(|n| match WatchCache::node_entry(n)?.1 {
                winadmit::decision::cluster::KnownNode::Windows(n) => Some(n),
                winadmit::decision::cluster::KnownNode::Linux(_) => None,
            })
            .collect(),
        ..Default::default()
    };
    usize::from(mode.is_some())
        + usize::from(iso.is_some())
        + usize::from(classes.get("windows-0").is_some())
        + nodes.nodes.len()
}

/// Live heap bytes that `build` leaves behind.
fn kept<T>(build: impl FnOnce() -> T) -> (T, u64) {
    let before = dhat::HeapStats::get().curr_bytes;
    let t = build();
    let after = dhat::HeapStats::get().curr_bytes;
    (t, (after as u64).saturating_sub(before as u64))
}

/// The median of `rounds` timings of `f`, each over `iters` calls, per call.
fn per_call(rounds: usize, iters: usize, mut f: impl FnMut(usize)) -> Duration {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for i in 0..iters {
                f(i);
            }
            start.elapsed() / u32::try_from(iters).unwrap()
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[allow(clippy::cast_precision_loss)]
fn main() {
    // `cargo bench` passes `--bench`; the sizes are the numeric arguments.
    let sizes: Vec<usize> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let n_ns = sizes.first().copied().unwrap_or(10_000);
    let n_nodes = sizes.get(1).copied().unwrap_or(1_000);
    let full = Cluster {
        namespaces: (0..n_ns).map(namespace).collect(),
        nodes: (0..n_nodes).map(node).collect(),
        classes: (0..20).map(runtime_class).collect(),
    };
    let trimmed = full.trimmed();
    let objects = (n_ns + n_nodes + 20) as f64;
    println!(
        "{n_ns} namespaces, {n_nodes} Windows nodes, 20 RuntimeClasses; VmRSS {} MiB with the objects built",
        vm_rss_kib() / 1024
    );

    // Heap kept, exact: each store built and measured while the others are alive.
    let profiler = dhat::Profiler::builder().testing().build();
    let (hand, hand_bytes) = kept(|| hand_written(&full));
    let (refl, refl_bytes) = kept(|| reflected(&full));
    let (trim, trim_bytes) = kept(|| reflected(&trimmed));
    drop(profiler);
    for (name, bytes) in [
        ("hand-written", hand_bytes),
        ("reflector", refl_bytes),
        ("reflector, trimmed", trim_bytes),
    ] {
        println!(
            "heap kept  {name:<20} {:>8.1} MiB  {:>6.0} B/object",
            bytes as f64 / 1_048_576.0,
            bytes as f64 / objects
        );
    }

    // Applying a full list (the watcher's deserialising is the same for all
    // three and not counted; trimming is counted for the trimmed reflector).
    let apply_hand = per_call(5, 1, |_| drop(black_box(hand_written(&full))));
    let apply_refl = per_call(5, 1, |_| drop(black_box(reflected(&full))));
    let apply_trim = per_call(5, 1, |_| drop(black_box(reflected(&full.trimmed()))));
    for (name, t) in [
        ("hand-written", apply_hand),
        ("reflector", apply_refl),
        ("reflector, trimmed", apply_trim),
    ] {
        println!(
            "apply list {name:<20} {:>8.1} ms  {:>6.0} ns/object",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e9 / objects
        );
    }

    // What one review reads (a namespace that has the mode label).
    let names: Vec<String> = (0..n_ns)
        .step_by(10)
        .map(|i| format!("team-{i:05}"))
        .collect();
    let want = review_hand_written(&hand, &names[0]);
    assert_eq!(want, review_reflected(&refl, &names[0]));
    assert_eq!(want, review_reflected(&trim, &names[0]));
    let pick = |i: usize| names[i % names.len()].as_str();
    let read_hand = per_call(11, 20_000, |i| {
        black_box(review_hand_written(&hand, pick(i)));
    });
    let read_refl = per_call(11, 20, |i| {
        black_box(review_reflected(&refl, pick(i)));
    });
    let read_trim = per_call(11, 20, |i| {
        black_box(review_reflected(&trim, pick(i)));
    });
    for (name, t) in [
        ("hand-written", read_hand),
        ("reflector", read_refl),
        ("reflector, trimmed", read_trim),
    ] {
        println!("per review {name:<20} {:>10.2} µs", t.as_secs_f64() * 1e6);
    }
    black_box((hand, refl, trim));
}
