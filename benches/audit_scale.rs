//! `winadmit audit` at scale, against a real kube-apiserver v1.37 with etcd
//! (the end-to-end suite's control plane, `tests/support/`): NAMESPACES
//! namespaces with WORKLOADS Deployments in all, each with a ReplicaSet and
//! PODS/WORKLOADS Pods owned as the controllers would own them (the pods
//! are objects only: no scheduler or kubelet runs), half of the
//! Deployments with an ltsc2019 image on a cluster whose one Windows node
//! runs 10.0.20348 (WIN-BUILD-NO-NODE) and privileged (WIN-PRIVILEGED).
//!
//! Measured: the first full audit (start to the ClusterReport counting
//! every workload: wall time, the audit's CPU time and peak resident
//! memory), the report writes and their sizes, and the time from a Windows
//! node of build 10.0.17763 joining to the reports no longer holding
//! WIN-BUILD-NO-NODE.
//!
//! With `--kwok`, the pods are on simulated nodes: KWOK v0.8.0
//! (`tests/kwok/build.sh`, as the scheduling cluster of
//! `tests/support/scheduling.rs` runs it) manages 20 Windows Server 2022
//! nodes, each pod is bound to one of them (`spec.nodeName`, round robin:
//! the scheduler and the controller manager do not run, they would manage
//! the hand-made ReplicaSets), and the audit starts once KWOK reports every
//! pod Running, so the pods carry a kubelet's status. Also measured then:
//! the API server's CPU time while the first audit runs and its resident
//! memory, and the audit's report writes (`winadmit_audit_report_writes_total`).
//!
//! With `--kwok-kyverno` (implies `--kwok`), Kyverno v1.19.1's reports
//! controller scans the same workloads first, out of cluster, with the
//! latency benchmark's Windows policy (`benches/kyverno/policy.yaml`) as a
//! background policy: see `kyverno_scan` (KYVERNO_REPORTS names a built
//! reports controller, else `benches/kyverno/build.sh` builds one). It is stopped before `winadmit
//! audit` starts.
//!
//!     cargo bench --bench audit_scale -- [--kwok|--kwok-kyverno] [NAMESPACES] [WORKLOADS] [PODS]
//!
//! (default 100 1000 10000; the audit binary is `target/release/winadmit`
//! when it exists, else the debug one: say which with AUDIT_BIN).

#[path = "../tests/support/audit.rs"]
mod audit;
#[path = "../tests/support/controlplane.rs"]
mod controlplane;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
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

fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// `kubectl get KIND -n NS -o json` names -> uids.
fn uids(
    cp: &controlplane::ControlPlane,
    kind: &str,
    ns: &str,
) -> std::collections::HashMap<String, String> {
    let v: Value =
        serde_json::from_str(&cp.kubectl_ok(&["get", kind, "-n", ns, "-o", "json"])).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["metadata"]["uid"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
}

fn create(
    cp: &controlplane::ControlPlane,
    namespaces: usize,
    workloads: usize,
    pods: usize,
    nodes: &[String],
) {
    let mut placed = 0usize;
    let per_ns = workloads.div_ceil(namespaces);
    let pods_per = pods / workloads.max(1);
    for n in 0..namespaces {
        let ns = format!("scale-{n:03}");
        cp.namespace(&ns, &[]);
        let names: Vec<String> = (0..per_ns).map(|i| format!("w{i:04}")).collect();
        let deployments = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name, i % 2 == 0)}})
            })
            .collect();
        cp.kubectl_stdin(&["create", "-f", "-"], &list(deployments));
        let d = uids(cp, "deployments", &ns);
        let sets = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": format!("{name}-1"), "namespace": ns, "ownerReferences": owner("Deployment", name, &d[name])},
                    "spec": {"replicas": pods_per, "selector": {"matchLabels": {"app": name}}, "template": template(name, i % 2 == 0)}})
            })
            .collect();
        cp.kubectl_stdin(&["create", "-f", "-"], &list(sets));
        let r = uids(cp, "replicasets", &ns);
        let mut pods: Vec<Value> = names
            .iter()
            .enumerate()
            .flat_map(|(i, name)| {
                let rs = format!("{name}-1");
                let uid = r[&rs].clone();
                let ns = ns.clone();
                (0..pods_per).map(move |p| {
                    let t = template(name, i % 2 == 0);
                    json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": format!("{rs}-{p}"), "namespace": &ns, "labels": t["metadata"]["labels"],
                            "ownerReferences": owner("ReplicaSet", &rs, &uid)},
                        "spec": t["spec"]})
                })
            })
            .collect();
        if !nodes.is_empty() {
            for pod in &mut pods {
                pod["spec"]["nodeName"] = nodes[placed % nodes.len()].clone().into();
                placed += 1;
            }
        }
        for chunk in pods.chunks(500) {
            cp.kubectl_stdin(&["create", "-f", "-"], &list(chunk.to_vec()));
        }
    }
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

fn reports_bytes(cp: &controlplane::ControlPlane) -> (usize, usize, usize) {
    let v: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "reports.openreports.io",
        "-A",
        "-o",
        "json",
    ]))
    .unwrap();
    let items = v["items"].as_array().unwrap();
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

/// KWOK, built by `tests/kwok/build.sh` when missing, managing the nodes
/// annotated `kwok.x-k8s.io/node: fake` (the scheduling cluster's flags);
/// the control plane's supervisor stops it.
fn start_kwok(cp: &controlplane::ControlPlane) -> std::process::Child {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/controlplane/kwok");
    let built = Command::new(root.join("tests/kwok/build.sh"))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(built.success(), "tests/kwok/build.sh failed");
    let log = std::fs::File::create(cp.work.join("kwok.err.log")).unwrap();
    let child = Command::new(dir.join("kwok"))
        .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
        .args([
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.0.0.10",
        ])
        .arg(format!("--config={}", dir.join("stages.yaml").display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    cp.adopt(child.id());
    child
}

/// `n` Windows Server 2022 nodes KWOK manages, room for `pods` pods in
/// all; their names once every one is Ready.
fn kwok_nodes(cp: &controlplane::ControlPlane, n: usize, pods: usize) -> Vec<String> {
    let capacity = json!({"cpu": "256", "memory": "1Ti", "pods": (pods / n + 10).to_string()});
    let names: Vec<String> = (0..n).map(|i| format!("kwok-win22-{i:02}")).collect();
    for name in &names {
        cp.apply(&json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"kubernetes.io/os": "windows", "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name, "node.kubernetes.io/windows-build": "10.0.20348"}}})
        .to_string());
        let status = json!({"capacity": capacity, "allocatable": capacity, "nodeInfo": {
            "architecture": "amd64", "operatingSystem": "windows", "kubeletVersion": "v1.37.2",
            "containerRuntimeVersion": "containerd://2.2.1", "osImage": "Windows Server 2022 Datacenter",
            "kernelVersion": "10.0.20348.2762", "bootID": "", "machineID": "", "systemUUID": "",
            "kubeProxyVersion": ""}});
        cp.set_node_status(name, &status);
    }
    let started = Instant::now();
    loop {
        let ready = cp.kubectl_ok(&["get", "nodes", "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}"]);
        if ready.lines().filter(|l| l.trim() == "True").count() >= n {
            return names;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "KWOK nodes not Ready"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until `pods` pods are Running (KWOK's status).
fn wait_running(cp: &controlplane::ControlPlane, pods: usize) {
    let started = Instant::now();
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
            started.elapsed() < Duration::from_secs(3600),
            "{running} of {pods} pods Running after an hour"
        );
        std::thread::sleep(Duration::from_secs(2));
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

fn main() {
    let namespaces = arg(1, 100);
    let workloads = arg(2, 1000);
    let pods = arg(3, 10_000);
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
    let with_kyverno = std::env::args().any(|a| a == "--kwok-kyverno");
    let kwok = with_kyverno || std::env::args().any(|a| a == "--kwok");
    let _kwok = kwok.then(|| start_kwok(cp));
    let nodes = if kwok {
        kwok_nodes(cp, 20, pods)
    } else {
        Vec::new()
    };
    let started = Instant::now();
    create(cp, namespaces, workloads, pods, &nodes);
    eprintln!(
        "created {namespaces} namespaces, {workloads} Deployments and ReplicaSets, {pods} Pods in {:.1?}",
        started.elapsed()
    );
    if kwok {
        wait_running(cp, pods);
        eprintln!(
            "every pod Running (KWOK) {:.1?} after the first create",
            started.elapsed()
        );
    }
    let apiserver = apiserver_pid(cp).expect("the kube-apiserver process");
    if with_kyverno {
        kyverno_scan(cp, apiserver, pods);
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
            "--report-writes-per-second",
            "50",
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    cp.adopt(child.id());
    let expected = workloads as u64;
    loop {
        if let Some(s) = cluster_summary(cp) {
            // Clean workloads count once in pass; a wrong one has 2 results.
            let pass = s["pass"].as_u64().unwrap_or(0);
            let fail = s["fail"].as_u64().unwrap_or(0);
            let warn = s["warn"].as_u64().unwrap_or(0);
            // The cluster report is written after every namespace's.
            if pass == expected / 2
                && fail + warn >= expected / 2
                && reports_bytes(cp).0 >= namespaces
            {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "no complete audit in 30 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let first = started.elapsed();
    let (cpu, hwm) = usage(child.id());
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
        "report writes: {writes}; API server while the first audit ran: {:.2} s CPU, {:.1} MiB resident at its end",
        usage(apiserver).0 - apiserver_before,
        rss(apiserver) as f64 / 1024.0
    );

    let changed = Instant::now();
    cp.apply(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "win-2019", "labels": {"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.17763"}}}).to_string());
    loop {
        let v: Value = serde_json::from_str(&cp.kubectl_ok(&[
            "get",
            "reports.openreports.io",
            "-A",
            "-o",
            "json",
        ]))
        .unwrap();
        let left = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["results"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["rule"] == "WIN-BUILD-NO-NODE")
            .count();
        if left == 0 {
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(600),
            "reports still hold {left} WIN-BUILD-NO-NODE"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (cpu2, hwm2) = usage(child.id());
    println!(
        "Windows node of another build joined -> reports reflect it: {:.2?} (CPU since start {cpu2:.2} s, peak RSS {:.1} MiB)",
        changed.elapsed(),
        hwm2 as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
}
