//! `winadmit audit` at scale, against a real kube-apiserver v1.37 with etcd
//! (the end-to-end suite's control plane, `tests/support/`): NAMESPACES
//! namespaces with WORKLOADS Deployments in all (spread evenly), each with
//! a ReplicaSet and its share of PODS Pods owned as the controllers would
//! own them (the scheduler and the controller manager do not run: they
//! would manage the hand-made ReplicaSets), every other Deployment with an
//! ltsc2019 image on a cluster whose Windows nodes run 10.0.20348
//! (WIN-BUILD-NO-NODE) and privileged (WIN-PRIVILEGED).
//!
//! Measured: how long the objects take to create (the crate's kube client,
//! `--create-concurrency` requests in flight, default 16); the first full
//! audit (start to the ClusterReport counting every workload and every
//! namespace's Report written: wall time, the audit's CPU time and peak
//! resident memory); the report writes and their sizes; the API server's
//! CPU time while the first audit runs and its resident memory; then
//! three changes, each timed until the Reports follow:
//!
//! - a Windows node pool of build 10.0.17763 joins (one node without
//!   KWOK, as before; a tenth of the Windows nodes with `--nodes`): no
//!   Report holds WIN-BUILD-NO-NODE any more;
//! - that pool is deleted: every ltsc2019 workload has its
//!   WIN-BUILD-NO-NODE again;
//! - the policy file changes (WIN-PRIVILEGED off): no Report holds
//!   WIN-PRIVILEGED. The audit checks its policy every second here
//!   (`--policy-reload-interval 1s`; the default is 10 s, which bounds
//!   this time in a cluster).
//!
//! The audit runs with `--audit-interval 500ms` and
//! `--report-writes-per-second 50` (`--writes-per-second=N` changes it:
//! at 10,000 namespaces, one Report each, 50 a second is 200 s of writes).
//!
//! Without KWOK the pods are objects only on no node, beside one Windows
//! node object `win-2022`. With `--kwok`, the pods are on simulated nodes:
//! KWOK v0.8.0 (`tests/kwok/build.sh`, as the scheduling cluster of
//! `tests/support/scheduling.rs` runs it) manages `--nodes=N` nodes (default
//! 20), `--windows-nodes=N` of them Windows Server 2022 (default: all; the
//! others Linux, holding no pod: they are the API server's load of a big
//! cluster's nodes and the audit's view of the node pools), each pod bound
//! to a Windows one (`spec.nodeName`, round robin), and the audit starts
//! once KWOK reports every pod Running, so the pods carry a kubelet's
//! status. `--objects-only` gives KWOK its node stage alone (no pod stage:
//! the pods stay as created, with no status) and does not wait; the output
//! says which. KWOK's node leases last `--node-lease-seconds=S` (default
//! 3600, KWOK's `--node-lease-duration-seconds`; KWOK renews a lease every
//! quarter of it, `pkg/kwok/controllers/controller.go`): at KWOK's default
//! of 40 s, 5,000 nodes renew 500 Leases a second, which would be most of
//! the API server's work; no node controller runs here to mark a node whose
//! lease lapses NotReady. `--nodes` implies `--kwok`.
//!
//! With `--kwok-kyverno` (implies `--kwok`), Kyverno v1.19.1's reports
//! controller scans the same workloads first, out of cluster, with the
//! latency benchmark's Windows policy (`benches/kyverno/policy.yaml`) as a
//! background policy: see `kyverno_scan` (KYVERNO_REPORTS names a built
//! reports controller, else `benches/kyverno/build.sh` builds one). It is stopped before `winadmit
//! audit` starts.
//!
//!     cargo bench --bench audit_scale -- [--kwok|--kwok-kyverno] [--nodes=N]
//!         [--windows-nodes=N] [--node-lease-seconds=S] [--objects-only]
//!         [--writes-per-second=N] [--create-concurrency=N]
//!         [NAMESPACES] [WORKLOADS] [PODS]
//!
//! (default 100 1000 10000; the audit binary is `target/release/winadmit`
//! when it exists, else the debug one: say which with AUDIT_BIN). The size
//! of GitHub issue 56: `--nodes=5000 --windows-nodes=500 --objects-only
//! --writes-per-second=500 10000 15000 150000`.

#[path = "../tests/support/audit.rs"]
mod audit;
#[path = "../tests/support/controlplane.rs"]
mod controlplane;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// `--NAME=VALUE` as a number.
fn option(name: &str) -> Option<usize> {
    let prefix = format!("--{name}=");
    std::env::args().find_map(|a| {
        a.strip_prefix(&prefix).map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--{name}={v}: expected a number"))
        })
    })
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// What the command line asks for.
struct Args {
    namespaces: usize,
    workloads: usize,
    pods: usize,
    kwok: bool,
    kyverno: bool,
    nodes: usize,
    windows_nodes: usize,
    lease_seconds: usize,
    objects_only: bool,
    writes_per_second: usize,
    concurrency: usize,
}

impl Args {
    fn parse() -> Self {
        let kyverno = flag("--kwok-kyverno");
        let nodes = option("nodes");
        let kwok = kyverno || flag("--kwok") || nodes.is_some();
        let nodes = nodes.unwrap_or(20).max(1);
        let windows_nodes = option("windows-nodes").unwrap_or(nodes).clamp(1, nodes);
        let args = Self {
            namespaces: arg(1, 100).max(1),
            workloads: arg(2, 1000).max(1),
            pods: arg(3, 10_000),
            kwok,
            kyverno,
            nodes,
            windows_nodes,
            lease_seconds: option("node-lease-seconds").unwrap_or(3600),
            objects_only: flag("--objects-only"),
            writes_per_second: option("writes-per-second").unwrap_or(50),
            concurrency: option("create-concurrency").unwrap_or(16).max(1),
        };
        assert!(
            args.workloads >= args.namespaces,
            "WORKLOADS ({}) must be at least NAMESPACES ({}): every namespace gets a Deployment",
            args.workloads,
            args.namespaces
        );
        args
    }

    /// Namespace `n`'s Deployments: (global index of its first, how many).
    fn workloads_of(&self, n: usize) -> (usize, usize) {
        let (each, extra) = (
            self.workloads / self.namespaces,
            self.workloads % self.namespaces,
        );
        (n * each + n.min(extra), each + usize::from(n < extra))
    }

    /// Deployment `g`'s pods.
    fn pods_of(&self, g: usize) -> usize {
        self.pods / self.workloads + usize::from(g < self.pods % self.workloads)
    }

    /// Deployments with the ltsc2019 image and privileged: the even ones.
    fn bad(&self) -> usize {
        self.workloads.div_ceil(2)
    }
}

fn template(name: &str, bad: bool) -> Value {
    let image = if bad {
        "mcr.microsoft.com/windows/servercore:ltsc2019"
    } else {
        "mcr.microsoft.com/windows/servercore:ltsc2022"
    };
    json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "app", "image": image,
                "securityContext": {"privileged": bad}}]}
    })
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
}

fn namespace_name(n: usize) -> String {
    format!("scale-{n:03}")
}

/// Where an object of the bench's kinds is created.
fn collection(obj: &Value) -> String {
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    match obj["kind"].as_str().unwrap_or_default() {
        "Namespace" => "/api/v1/namespaces".to_owned(),
        "Node" => "/api/v1/nodes".to_owned(),
        "Pod" => format!("/api/v1/namespaces/{ns}/pods"),
        "Deployment" => format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        "ReplicaSet" => format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
        other => panic!("the bench creates no {other}"),
    }
}

/// One request; (status, body), status 0 for a connection error.
async fn send(
    client: &kube::Client,
    request: hyper::Request<kube::client::Body>,
) -> (u16, Vec<u8>) {
    match client.send(request).await {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            (status, body)
        }
        Err(_) => (0, Vec::new()),
    }
}

/// Creates one object, retrying what a busy API server answers (429, 5xx,
/// a dropped connection; an earlier try that did create it is read back);
/// its uid.
async fn create_one(client: &kube::Client, obj: &Value) -> String {
    let path = collection(obj);
    let body = serde_json::to_vec(obj).unwrap();
    for attempt in 0.. {
        let request = hyper::Request::post(&path)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.clone()))
            .unwrap();
        let (status, answer) = send(client, request).await;
        let answer = match status {
            201 | 200 => answer,
            409 if attempt > 0 => {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                let get = hyper::Request::get(format!("{path}/{name}"))
                    .body(kube::client::Body::empty())
                    .unwrap();
                send(client, get).await.1
            }
            0 | 429 | 500..=599 if attempt < 20 => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            _ => panic!(
                "create {path}: {status} {}",
                String::from_utf8_lossy(&answer)
            ),
        };
        let v: Value = serde_json::from_slice(&answer).unwrap_or_default();
        return v["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    }
    unreachable!()
}

/// Creates `objects` with `concurrency` requests in flight; with `uids`,
/// returns (namespace/name) -> uid of each.
async fn create_all(
    client: &kube::Client,
    objects: impl Iterator<Item = Value>,
    concurrency: usize,
    uids: bool,
) -> HashMap<String, String> {
    futures::stream::iter(objects.map(|obj| {
        let client = client.clone();
        async move {
            let uid = create_one(&client, &obj).await;
            let key = format!(
                "{}/{}",
                obj["metadata"]["namespace"].as_str().unwrap_or_default(),
                obj["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, uid)
        }
    }))
    .buffer_unordered(concurrency)
    .fold(HashMap::new(), |mut out, (key, uid)| async move {
        if uids {
            out.insert(key, uid);
        }
        out
    })
    .await
}

/// Creates the namespaces, Deployments, ReplicaSets and Pods, each kind
/// all at once (`concurrency` requests in flight), pods bound round robin
/// to `nodes`; prints how long each kind took.
async fn create(client: &kube::Client, a: &Args, nodes: &[String]) {
    let c = a.concurrency;
    let took = |what: &str, n: usize, started: Instant| {
        let s = started.elapsed().as_secs_f64();
        eprintln!(
            "created {n} {what} in {s:.1} s ({:.0} a second, {c} in flight)",
            n as f64 / s.max(1e-3)
        );
    };
    let started = Instant::now();
    let namespaces = (0..a.namespaces).map(|n| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace_name(n)}})
    });
    create_all(client, namespaces, c, false).await;
    took("namespaces", a.namespaces, started);
    let each = |f: &dyn Fn(String, usize, usize) -> Value| -> Vec<Value> {
        (0..a.namespaces)
            .flat_map(|n| {
                let (first, count) = a.workloads_of(n);
                (0..count).map(move |i| (n, i, first + i))
            })
            .map(|(n, i, g)| f(namespace_name(n), i, g))
            .collect()
    };
    let started = Instant::now();
    let deployments = each(&|ns, i, g| {
        let name = format!("w{i:04}");
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(&name, g % 2 == 0)}})
    });
    let d = create_all(client, deployments.into_iter(), c, true).await;
    took("Deployments", a.workloads, started);
    let started = Instant::now();
    let sets = each(&|ns, i, g| {
        let name = format!("w{i:04}");
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("{name}-1"), "namespace": ns,
                "ownerReferences": owner("Deployment", &name, &d[&format!("{ns}/{name}")])},
            "spec": {"replicas": a.pods_of(g), "selector": {"matchLabels": {"app": name}},
                "template": template(&name, g % 2 == 0)}})
    });
    let r = create_all(client, sets.into_iter(), c, true).await;
    took("ReplicaSets", a.workloads, started);
    let started = Instant::now();
    let placed = std::cell::Cell::new(0usize);
    let pods = (0..a.namespaces).flat_map(|n| {
        let (first, count) = a.workloads_of(n);
        let ns = namespace_name(n);
        let r = &r;
        let placed = &placed;
        (0..count).flat_map(move |i| {
            let g = first + i;
            let rs = format!("w{i:04}-1");
            let uid = r[&format!("{ns}/{rs}")].clone();
            let t = template(&format!("w{i:04}"), g % 2 == 0);
            let ns = ns.clone();
            (0..a.pods_of(g)).map(move |p| {
                let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{rs}-{p}"), "namespace": &ns,
                        "labels": t["metadata"]["labels"],
                        "ownerReferences": owner("ReplicaSet", &rs, &uid)},
                    "spec": t["spec"]});
                if !nodes.is_empty() {
                    pod["spec"]["nodeName"] = nodes[placed.get() % nodes.len()].clone().into();
                    placed.set(placed.get() + 1);
                }
                pod
            })
        })
    });
    create_all(client, pods, c, false).await;
    took("Pods", a.pods, started);
}

/// (utime+stime seconds, VmHWM KiB) of a process.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|f| f.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0);
    let hwm = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmHWM:")
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    (ticks / 100.0, hwm)
}

fn cluster_summary(cp: &controlplane::ControlPlane) -> Option<Value> {
    let out = cp.kubectl(&[
        "get",
        "clusterreports.openreports.io",
        "winadmit-cluster",
        "-o",
        "json",
    ]);
    out.status
        .success()
        .then(|| serde_json::from_slice::<Value>(&out.stdout).ok())?
        .map(|v| v["summary"].clone())
}

/// Every Report (`--chunk-size`, as a big cluster's are listed).
fn reports(cp: &controlplane::ControlPlane) -> Vec<Value> {
    let v: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "reports.openreports.io",
        "-A",
        "--chunk-size=2000",
        "-o",
        "json",
    ]))
    .unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

fn reports_bytes(cp: &controlplane::ControlPlane) -> (usize, usize, usize) {
    let items = reports(cp);
    let sizes: Vec<usize> = items
        .iter()
        .map(|r| serde_json::to_vec(r).unwrap().len())
        .collect();
    (
        items.len(),
        sizes.iter().sum(),
        sizes.iter().copied().max().unwrap_or(0),
    )
}

/// Results of `rule` in every Report.
fn results_of(cp: &controlplane::ControlPlane, rule: &str) -> usize {
    reports(cp)
        .iter()
        .flat_map(|r| r["results"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["rule"] == rule)
        .count()
}

/// Prints how long the reports took to follow `what`, with `detail` and
/// the audit's CPU time and peak resident memory so far.
fn followed(what: &str, took: Duration, detail: &str, audit: u32) {
    let (cpu, hwm) = usage(audit);
    println!(
        "{what} -> reports reflect it: {took:.2?} ({detail}; CPU since start {cpu:.2} s, peak RSS {:.1} MiB)",
        hwm as f64 / 1024.0
    );
}

/// Waits until the Reports hold `want` results of `rule`: the
/// ClusterReport's `fail + warn` is polled every 250 ms until it is
/// `summary` (it is written after the namespaces' Reports), then the
/// Reports are read; how long it took from `since`.
fn wait_reports(
    cp: &controlplane::ControlPlane,
    since: Instant,
    summary: u64,
    rule: &str,
    want: usize,
) -> Duration {
    loop {
        let s = cluster_summary(cp).unwrap_or_default();
        let fw = s["fail"].as_u64().unwrap_or(0) + s["warn"].as_u64().unwrap_or(0);
        if fw == summary {
            let left = results_of(cp, rule);
            if left == want {
                return since.elapsed();
            }
        }
        assert!(
            since.elapsed() < Duration::from_secs(900),
            "after 15 minutes the ClusterReport says {s}, not {summary} fail+warn, or the Reports do not hold {want} {rule}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// KWOK, built by `tests/kwok/build.sh` when missing, managing the nodes
/// annotated `kwok.x-k8s.io/node: fake` (the scheduling cluster's flags),
/// their Leases lasting `lease_seconds`; with `objects_only`, its node
/// stage alone (KWOK v0.8.0 runs no pod stage when its configuration has
/// none: "No pod stages found", `pkg/kwok/cmd/root.go`). The control
/// plane's supervisor stops it.
fn start_kwok(
    cp: &controlplane::ControlPlane,
    lease_seconds: usize,
    objects_only: bool,
) -> std::process::Child {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/controlplane/kwok");
    if !(dir.join("kwok").exists() && dir.join("stages.yaml").exists()) {
        let built = Command::new(root.join("tests/kwok/build.sh"))
            .arg(&dir)
            .status()
            .unwrap();
        assert!(built.success(), "tests/kwok/build.sh failed");
    }
    let mut stages = dir.join("stages.yaml");
    if objects_only {
        let all = std::fs::read_to_string(&stages).unwrap();
        let nodes: Vec<&str> = all
            .split("---\n")
            .filter(|doc| doc.contains("kind: Stage") && !doc.contains("    kind: Pod\n"))
            .collect();
        stages = cp.work.join("kwok-node-stages.yaml");
        std::fs::write(&stages, format!("---\n{}", nodes.join("---\n"))).unwrap();
    }
    let log = std::fs::File::create(cp.work.join("kwok.err.log")).unwrap();
    let child = Command::new(dir.join("kwok"))
        .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
        .args([
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.0.0.10",
        ])
        .arg(format!("--node-lease-duration-seconds={lease_seconds}"))
        .arg(format!("--config={}", stages.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    cp.adopt(child.id());
    child
}

/// A node KWOK manages: Windows of `build` (Server 2022: 10.0.20348,
/// 2019: 10.0.17763) or Linux; room for `pods` pods. Nodes take their
/// status on create.
fn node(name: &str, windows: Option<&str>, pods: usize) -> Value {
    let capacity = json!({"cpu": "256", "memory": "1Ti", "pods": pods.to_string()});
    let (os, labels, image, kernel) = match windows {
        Some(build) => (
            "windows",
            json!({"kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name, "node.kubernetes.io/windows-build": build}),
            if build == "10.0.17763" {
                "Windows Server 2019 Datacenter"
            } else {
                "Windows Server 2022 Datacenter"
            },
            format!("{build}.2762"),
        ),
        None => (
            "linux",
            json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name}),
            "Debian GNU/Linux 13 (trixie)",
            "6.12.0".to_owned(),
        ),
    };
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
        "status": {"capacity": capacity, "allocatable": capacity, "nodeInfo": {
            "architecture": "amd64", "operatingSystem": os, "kubeletVersion": "v1.37.2",
            "containerRuntimeVersion": "containerd://2.2.1", "osImage": image,
            "kernelVersion": kernel, "bootID": "", "machineID": "", "systemUUID": "",
            "kubeProxyVersion": ""}}})
}

/// Nodes whose Ready condition is True.
fn ready_nodes(cp: &controlplane::ControlPlane) -> usize {
    let ready = cp.kubectl_ok(&[
        "get",
        "nodes",
        "--chunk-size=2000",
        "-o",
        "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
    ]);
    ready.lines().filter(|l| l.trim() == "True").count()
}

/// Waits until `n` nodes are Ready (KWOK's node stage).
fn wait_ready(cp: &controlplane::ControlPlane, n: usize) {
    let started = Instant::now();
    while ready_nodes(cp) < n {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "KWOK nodes not Ready"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Waits until `pods` pods are Running (KWOK's status), polling less often
/// the more pods there are.
fn wait_running(cp: &controlplane::ControlPlane, pods: usize) {
    let started = Instant::now();
    let every = Duration::from_secs((pods as u64 / 10_000).clamp(2, 15));
    loop {
        let out = cp.kubectl_ok(&[
            "get",
            "pods",
            "-A",
            "--field-selector=status.phase=Running",
            "-o",
            "name",
            "--chunk-size=5000",
        ]);
        let running = out.lines().count();
        if running >= pods {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3 * 3600),
            "{running} of {pods} pods Running after three hours"
        );
        std::thread::sleep(every);
    }
}

/// The kube-apiserver serving `cp`'s port (its command line names it).
fn apiserver_pid(cp: &controlplane::ControlPlane) -> Option<u32> {
    let port = format!("--secure-port={}", cp.port);
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.contains("kube-apiserver") && cmd.split('\0').any(|a| a == port)).then_some(pid)
    })
}

/// VmRSS KiB of a process.
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// Kyverno's reports controller (the binary `KYVERNO_REPORTS` names, else
/// built by `benches/kyverno/build.sh`), and the folder of Kyverno's
/// CustomResourceDefinitions in its Go module.
fn kyverno_build() -> (std::path::PathBuf, std::path::PathBuf) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let program = match std::env::var("KYVERNO_REPORTS") {
        Ok(p) if !p.is_empty() => p.into(),
        _ => {
            let bin = root.join("target/kyverno/bin");
            let built = Command::new(root.join("benches/kyverno/build.sh"))
                .arg(&bin)
                .status()
                .unwrap();
            assert!(built.success(), "benches/kyverno/build.sh failed");
            bin.join("reports-controller")
        }
    };
    let dir = Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", "github.com/kyverno/kyverno"])
        .current_dir(root.join("benches/kyverno"))
        .output()
        .unwrap();
    assert!(
        dir.status.success(),
        "go list -m github.com/kyverno/kyverno"
    );
    let dir = String::from_utf8(dir.stdout).unwrap();
    (
        program,
        std::path::Path::new(dir.trim()).join("config/crds"),
    )
}

/// PolicyReports (wgpolicyk8s.io, one per scanned resource) by the kind of
/// the resource they are about: (reports, reports with a failed result).
fn kyverno_reports(
    cp: &controlplane::ControlPlane,
) -> std::collections::BTreeMap<String, (usize, usize)> {
    let out = cp.kubectl_ok(&[
        "get",
        "policyreports.wgpolicyk8s.io",
        "-A",
        "--chunk-size=5000",
        "-o",
        "jsonpath={range .items[*]}{.scope.kind} {.summary.fail}{\"\\n\"}{end}",
    ]);
    let mut kinds = std::collections::BTreeMap::new();
    for line in out.lines() {
        let (kind, fail) = line.split_once(' ').unwrap_or((line, ""));
        let e: &mut (usize, usize) = kinds.entry(kind.to_owned()).or_default();
        e.0 += 1;
        e.1 += usize::from(fail.trim().parse::<u64>().unwrap_or(0) > 0);
    }
    kinds
}

/// Kyverno v1.19.1's reports controller (`cmd/reports-controller`) out of
/// cluster, measured from its start until its reports are complete: every
/// Pod has its PolicyReport, and exactly the privileged half has a failed
/// result (the policy's `windows-privileged` rule). Kyverno reports on the
/// Pods alone: the policy's `patchesJSON6902` rule (`windows-run-as-user`)
/// turns off its rules for pod controllers for the whole policy
/// (`CanAutoGen` in Kyverno's `pkg/autogen/v1/autogen.go`), so Deployments
/// and ReplicaSets get no PolicyReport; the 5,000 failing Pods name every
/// privileged Deployment's pods. Its CRDs come from its Go module
/// (`config/crds`), its policy is `benches/kyverno/policy.yaml` with
/// `background: true`.
///
/// Out of cluster it needs, from `cmd/internal` and
/// `cmd/reports-controller/main.go`: `--kubeconfig`; the `kyverno`
/// namespace (its leader-election Lease) with the ConfigMaps `INIT_CONFIG`
/// and `METRICS_CONFIG` name (empty: no resource filters); the
/// `KYVERNO_*` variables naming its namespace, service account, deployment
/// and pod (the Lease holder); a free `--metricsPort`.
/// `--admissionReports=false` and `--validatingAdmissionPolicyReports=false`
/// leave out what the benchmark has none of; the background scan
/// (`--backgroundScan`, default true) and its defaults stay as released.
/// Reports go to wgpolicyk8s.io PolicyReports (`--openreportsEnabled`
/// false, its default) so they never mix with winadmit's.
fn kyverno_scan(cp: &controlplane::ControlPlane, apiserver: u32, pods: usize) {
    let (program, crds) = kyverno_build();
    cp.kubectl_ok(&["apply", "--server-side", "-R", "-f", crds.to_str().unwrap()]);
    cp.kubectl_ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout",
        "60s",
        "crd/clusterpolicies.kyverno.io",
        "crd/policyreports.wgpolicyk8s.io",
        "crd/ephemeralreports.reports.kyverno.io",
    ]);
    cp.namespace("kyverno", &[]);
    for name in ["kyverno", "kyverno-metrics"] {
        cp.apply(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "kyverno"}})
            .to_string(),
        );
    }
    let policy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/kyverno/policy.yaml"
    ))
    .unwrap()
    .replace("background: false", "background: true");
    cp.kubectl_stdin(&["apply", "-f", "-"], &policy);
    let log = std::fs::File::create(cp.work.join("kyverno-reports.log")).unwrap();
    let apiserver_before = usage(apiserver).0;
    let started = Instant::now();
    let mut child = Command::new(&program)
        .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
        .arg(format!("--metricsPort={}", controlplane::free_port()))
        .args([
            "--admissionReports=false",
            "--validatingAdmissionPolicyReports=false",
        ])
        .env("KYVERNO_NAMESPACE", "kyverno")
        .env("KYVERNO_SERVICEACCOUNT_NAME", "kyverno-reports-controller")
        .env("KYVERNO_DEPLOYMENT", "kyverno-reports-controller")
        .env("KYVERNO_POD_NAME", "kyverno-reports-controller-bench")
        .env("INIT_CONFIG", "kyverno")
        .env("METRICS_CONFIG", "kyverno-metrics")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    cp.adopt(child.id());
    let mut shown = Instant::now();
    let kinds = loop {
        let kinds = kyverno_reports(cp);
        if kinds.get("Pod") == Some(&(pods, pods / 2)) {
            break kinds;
        }
        if shown.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "kyverno after {:.0?}: (reports, failing) {kinds:?}",
                started.elapsed()
            );
            shown = Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600) && child.try_wait().unwrap().is_none(),
            "Kyverno's reports not complete (or it exited): {kinds:?}; log {}",
            cp.work.join("kyverno-reports.log").display()
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let done = started.elapsed();
    let (cpu, hwm) = usage(child.id());
    println!(
        "kyverno reports-controller complete: {done:.2?} wall, {cpu:.2} s CPU, peak RSS {:.1} MiB; \
         (PolicyReports, failing) by kind {kinds:?}; API server meanwhile {:.2} s CPU",
        hwm as f64 / 1024.0,
        usage(apiserver).0 - apiserver_before
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Counted results of the first full audit: the ClusterReport's
/// `fail + warn`, and the Reports' WIN-BUILD-NO-NODE and WIN-PRIVILEGED.
struct Counts {
    failing: u64,
    build: usize,
    privileged: usize,
}

fn main() {
    let a = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = controlplane::shared("audit_scale");
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/charts/winadmit/files/crds");
    cp.kubectl_ok(&["apply", "--server-side", "-f", crds]);
    cp.kubectl_ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout",
        "60s",
        "crd/reports.openreports.io",
        "crd/clusterreports.openreports.io",
    ]);
    cp.apply(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "win-2022", "labels": {"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}}}).to_string());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(cp.client());
    let _kwok = a
        .kwok
        .then(|| start_kwok(cp, a.lease_seconds, a.objects_only));
    let nodes = if a.kwok {
        let started = Instant::now();
        let per_node = a.pods / a.windows_nodes + 10;
        let windows: Vec<String> = (0..a.windows_nodes)
            .map(|i| format!("kwok-win22-{i:04}"))
            .collect();
        let all = windows
            .iter()
            .map(|n| node(n, Some("10.0.20348"), per_node))
            .chain(
                (0..a.nodes - a.windows_nodes)
                    .map(|i| node(&format!("kwok-linux-{i:04}"), None, 110)),
            );
        rt.block_on(create_all(&client, all, a.concurrency, false));
        wait_ready(cp, a.nodes);
        eprintln!(
            "{} KWOK nodes ({} Windows Server 2022, {} Linux) Ready in {:.1?}; node Leases of {} s (--node-lease-duration-seconds), pods {}",
            a.nodes,
            a.windows_nodes,
            a.nodes - a.windows_nodes,
            started.elapsed(),
            a.lease_seconds,
            if a.objects_only {
                "objects only (KWOK runs no pod stage: no status)"
            } else {
                "made Running by KWOK"
            }
        );
        windows
    } else {
        Vec::new()
    };
    let started = Instant::now();
    rt.block_on(create(&client, &a, &nodes));
    eprintln!(
        "created {} namespaces, {} Deployments and ReplicaSets, {} Pods in {:.1?}",
        a.namespaces,
        a.workloads,
        a.pods,
        started.elapsed()
    );
    if a.kwok && !a.objects_only {
        wait_running(cp, a.pods);
        eprintln!(
            "every pod Running (KWOK) {:.1?} after the first create",
            started.elapsed()
        );
    }
    let apiserver = apiserver_pid(cp).expect("the kube-apiserver process");
    if a.kyverno {
        kyverno_scan(cp, apiserver, a.pods);
    }
    let apiserver_before = usage(apiserver).0;

    let release = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/winadmit");
    let debug = concat!(env!("CARGO_MANIFEST_DIR"), "/target/debug/winadmit");
    let bin = std::env::var("AUDIT_BIN").unwrap_or_else(|_| {
        if std::path::Path::new(release).exists() {
            release.into()
        } else {
            debug.into()
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let port = controlplane::free_port();
    let started = Instant::now();
    let mut child = Command::new(&bin)
        .args(["audit", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .arg("--policy")
        .arg(&policy)
        .args([
            "--gmsa",
            "off",
            "--audit-interval",
            "500ms",
            "--policy-reload-interval",
            "1s",
            "--report-writes-per-second",
            &a.writes_per_second.to_string(),
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    cp.adopt(child.id());
    let expected = a.workloads as u64;
    let failing = loop {
        if let Some(s) = cluster_summary(cp) {
            // Clean workloads count once in pass; a wrong one has 2 results.
            let pass = s["pass"].as_u64().unwrap_or(0);
            let fail = s["fail"].as_u64().unwrap_or(0);
            let warn = s["warn"].as_u64().unwrap_or(0);
            // The cluster report is written after every namespace's.
            if pass == expected - a.bad() as u64
                && fail + warn >= a.bad() as u64
                && reports_bytes(cp).0 >= a.namespaces
            {
                break fail + warn;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "no complete audit in 30 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let first = started.elapsed();
    let (cpu, hwm) = usage(child.id());
    let apiserver_cpu = usage(apiserver).0 - apiserver_before;
    let (n, bytes, largest) = reports_bytes(cp);
    println!(
        "first full audit: {first:.2?} wall, {cpu:.2} s CPU, peak RSS {:.1} MiB",
        hwm as f64 / 1024.0
    );
    println!("reports: {n} Reports, {bytes} bytes in all, the largest {largest} bytes");
    let writes = audit::http_get(&format!("http://127.0.0.1:{port}/metrics"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("winadmit_audit_report_writes_total"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>();
    println!(
        "report writes: {writes}; API server while the first audit ran: {apiserver_cpu:.2} s CPU, {:.1} MiB resident at its end",
        rss(apiserver) as f64 / 1024.0
    );
    let counts = Counts {
        failing,
        build: results_of(cp, "WIN-BUILD-NO-NODE"),
        privileged: results_of(cp, "WIN-PRIVILEGED"),
    };
    node_pool(cp, &client, &rt, &a, &counts, child.id());
    policy_change(cp, &policy, &counts, child.id());
    let _ = child.kill();
    let _ = child.wait();
}

/// A pool of Windows Server 2019 nodes joins, then is deleted; each time
/// until the Reports follow.
fn node_pool(
    cp: &controlplane::ControlPlane,
    client: &kube::Client,
    rt: &tokio::runtime::Runtime,
    a: &Args,
    counts: &Counts,
    audit: u32,
) {
    let size = if a.kwok {
        (a.windows_nodes / 10).max(1)
    } else {
        1
    };
    let pool = (0..size).map(|i| {
        let mut n = node(&format!("win-2019-{i:03}"), Some("10.0.17763"), 110);
        n["metadata"]["labels"]["winadmit-bench/pool"] = "ltsc2019".into();
        n
    });
    let changed = Instant::now();
    rt.block_on(create_all(client, pool, a.concurrency, false));
    let took = wait_reports(
        cp,
        changed,
        counts.failing - counts.build as u64,
        "WIN-BUILD-NO-NODE",
        0,
    );
    followed(
        "Windows node of another build joined",
        took,
        &format!(
            "{size} nodes of 10.0.17763; {} WIN-BUILD-NO-NODE gone",
            counts.build
        ),
        audit,
    );
    let changed = Instant::now();
    cp.kubectl_ok(&[
        "delete",
        "nodes",
        "-l",
        "winadmit-bench/pool=ltsc2019",
        "--wait=false",
    ]);
    let took = wait_reports(
        cp,
        changed,
        counts.failing,
        "WIN-BUILD-NO-NODE",
        counts.build,
    );
    println!(
        "that Windows node pool deleted -> reports reflect it: {took:.2?} ({} WIN-BUILD-NO-NODE back)",
        counts.build
    );
}

/// The policy file turns WIN-PRIVILEGED off; until the Reports follow.
fn policy_change(
    cp: &controlplane::ControlPlane,
    policy: &std::path::Path,
    counts: &Counts,
    audit: u32,
) {
    let changed = Instant::now();
    std::fs::write(
        policy,
        "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nrules:\n  WIN-PRIVILEGED: off\n",
    )
    .unwrap();
    let took = wait_reports(
        cp,
        changed,
        counts.failing - counts.privileged as u64,
        "WIN-PRIVILEGED",
        0,
    );
    followed(
        "policy file changed (WIN-PRIVILEGED off)",
        took,
        &format!(
            "{} WIN-PRIVILEGED gone; --policy-reload-interval 1s",
            counts.privileged
        ),
        audit,
    );
}
