//! The admission setups the benchmarks through a real kube-apiserver share
//! (`benches/admission_latency.rs`, `benches/concurrent_creates.rs`): the
//! pods they create, the no-op webhook, Kyverno and OPA Gatekeeper as
//! processes beside the API server, and winadmit's exported admission
//! policies scoped to one setup's namespaces.

#![allow(dead_code)] // each benchmark uses a part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::controlplane::{self, ControlPlane};
use super::{binary, e2e, server};

/// One admission setup: its name (each benchmark names its namespace
/// after it), what it is, and whether it refuses the denied pod.
pub struct Setup {
    pub name: &'static str,
    pub what: &'static str,
    pub refuses: bool,
}

/// The Windows Server 2022 IIS image every Windows pod runs.
pub const IIS: &str = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022";

/// A pod of `kind` named `name` in `ns`: a Windows pod winadmit admits as
/// it is (`pass`), one it patches (`patched`: `runAsUser`, which Windows
/// ignores), one it denies (`denied`: `hostNetwork` without HostProcess),
/// a Linux pod pinned to Linux (`linux`), which the registrations'
/// matchConditions keep away from the webhook, and one that selects no OS
/// (`unpinned`: nginx), which only the `pin-linux.winadmit.io`
/// registration sends.
pub fn pod(ns: &str, name: &str, kind: &str) -> Value {
    let windows = json!({"kubernetes.io/os": "windows"});
    let container = json!({"name": "web", "image": IIS,
        "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}});
    let spec = match kind {
        "pass" => json!({"os": {"name": "windows"},
                         "nodeSelector": {"kubernetes.io/os": "windows",
                                          "node.kubernetes.io/windows-build": "10.0.20348"},
                         "containers": [container]}),
        "patched" => json!({"nodeSelector": windows, "securityContext": {"runAsUser": 1000},
                            "containers": [container]}),
        "denied" => {
            json!({"nodeSelector": windows, "hostNetwork": true, "containers": [container]})
        }
        "linux" => json!({"nodeSelector": {"kubernetes.io/os": "linux"},
                          "containers": [{"name": "web", "image": "nginx:1.27"}]}),
        "unpinned" => json!({"containers": [{"name": "web", "image": "nginx:1.27"}]}),
        _ => panic!("no pod of kind {kind:?}"),
    };
    e2e::pod(ns, name, spec)
}

/// A webhook other than winadmit, as a process.
pub struct Process {
    pub child: Child,
    pub port: u16,
    /// The CA of its serving certificate (empty for Kyverno, which
    /// registers itself).
    pub ca: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Process {
    /// The no-op webhook, with its own certificate.
    pub fn noop(cp: &ControlPlane) -> Self {
        let program = std::env::var("NOOP_SERVER").unwrap_or_else(|_| {
            panic!(
                "NOOP_SERVER names the no-op server's binary: run benches/admission-latency.sh or benches/concurrent-creates.sh, or cargo build --release --example noop_server first"
            )
        });
        let dir = tempfile::tempdir().unwrap();
        let port = controlplane::free_port();
        let child = Command::new(&program)
            .arg(format!("127.0.0.1:{port}"))
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        cp.adopt(child.id());
        let ca_path = dir.path().join("ca.pem");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ca_path.is_file() || std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the no-op server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            ca: std::fs::read(&ca_path).unwrap(),
            child,
            port,
            _dir: dir,
        }
    }

    /// Kyverno's admission controller out of cluster, as its DEVELOPMENT.md
    /// runs it: its CRDs and ConfigMaps applied first, its webhooks
    /// registered by itself (by URL) and scoped to the namespaces labelled
    /// `winadmit-e2e: <setup>` by its `webhooks` setting. `None` when
    /// `KYVERNO` names no binary (benches/kyverno/build.sh builds one).
    pub fn kyverno(cp: &ControlPlane, setup: &str) -> Option<Self> {
        let program = std::env::var("KYVERNO").ok().filter(|p| !p.is_empty())?;
        let crds = std::env::var("KYVERNO_CRDS").expect(
            "KYVERNO_CRDS names Kyverno's config/crds folder (benches/webhooks.sh sets it)",
        );
        for entry in walk(Path::new(&crds)) {
            let out = cp.kubectl(&["apply", "--server-side", "-f", entry.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "kubectl apply {}: {}",
                entry.display(),
                e2e::stderr(&out)
            );
        }
        cp.namespace("kyverno", &[]);
        let scope = json!({"namespaceSelector": {"matchExpressions": [
            {"key": "winadmit-e2e", "operator": "In", "values": [setup]}]}});
        let config = |name: &str, data: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "kyverno"}, "data": data})
        };
        cp.apply(&e2e::to_list(&[
            config("kyverno", json!({"webhooks": scope.to_string()})),
            config("kyverno-metrics", json!({})),
        ]));
        let dir = tempfile::tempdir().unwrap();
        let port = controlplane::free_port();
        let metrics = controlplane::free_port();
        let log = std::fs::File::create(dir.path().join("kyverno.log")).unwrap();
        let child = Command::new(&program)
            .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
            .arg(format!("--serverIP=127.0.0.1:{port}"))
            .arg("--webhookServerHost=127.0.0.1")
            .arg(format!("--webhookServerPort={port}"))
            .arg(format!("--metricsPort={metrics}"))
            .arg("--controllerRuntimeMetricsAddress=0")
            .arg("--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca")
            .arg("--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair")
            .arg("--backgroundServiceAccountName=system:serviceaccount:kyverno:kyverno-background-controller")
            .arg("--reportsServiceAccountName=system:serviceaccount:kyverno:kyverno-reports-controller")
            .env("KYVERNO_NAMESPACE", "kyverno")
            .env("KYVERNO_SERVICEACCOUNT_NAME", "kyverno-admission-controller")
            .env("KYVERNO_DEPLOYMENT", "kyverno-admission-controller")
            .env("KYVERNO_POD_NAME", "kyverno-admission-controller-bench")
            .env("INIT_CONFIG", "kyverno")
            .env("METRICS_CONFIG", "kyverno-metrics")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        cp.adopt(child.id());
        apply_policy(
            cp,
            "Kyverno",
            "benches/kyverno/policy.yaml",
            &dir.path().join("kyverno.log"),
        );
        Some(Self {
            child,
            port,
            ca: Vec::new(),
            _dir: dir,
        })
    }

    /// OPA Gatekeeper out of cluster, one process with the operations of
    /// its release's `gatekeeper-controller-manager` (`webhook`,
    /// `mutation-webhook`) and `generate`, which makes each constraint's
    /// kind (the release runs it in the audit Deployment; audit itself is
    /// not started). Its CustomResourceDefinitions come from its release
    /// manifest (`GATEKEEPER_MANIFEST`), its certificate from here instead of
    /// its rotator, its policy from `benches/gatekeeper/policy.yaml`; the
    /// manifest's webhook configurations are returned for `install` to
    /// register. `None` when `GATEKEEPER` names no binary
    /// (benches/gatekeeper/build.sh builds one).
    pub fn gatekeeper(cp: &ControlPlane, setup: &str) -> Option<(Self, Vec<Value>)> {
        let program = std::env::var("GATEKEEPER").ok().filter(|p| !p.is_empty())?;
        let manifest = std::env::var("GATEKEEPER_MANIFEST")
            .expect("GATEKEEPER_MANIFEST names Gatekeeper's release manifest (the script sets it)");
        let objects = e2e::parse_yaml(
            &std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{manifest}: {e}")),
        );
        let crds = only(objects.clone(), "CustomResourceDefinition");
        assert!(!crds.is_empty(), "{manifest}: no CustomResourceDefinition");
        cp.apply(&e2e::to_list(&crds));
        let names: Vec<String> = crds
            .iter()
            .map(|c| format!("crd/{}", c["metadata"]["name"].as_str().unwrap()))
            .collect();
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        wait.extend(names.iter().map(String::as_str));
        cp.kubectl_ok(&wait);
        let namespace = "gatekeeper-system";
        cp.namespace(namespace, &[]);

        let dir = tempfile::tempdir().unwrap();
        let ca = server::Ca::new("gatekeeper-bench");
        let (cert, key, _) = ca.leaf("gatekeeper-webhook-service");
        server::write_pair(dir.path(), &cert, &key);
        let port = controlplane::free_port();
        let health = controlplane::free_port();
        let metrics = controlplane::free_port();
        let log = std::fs::File::create(dir.path().join("gatekeeper.log")).unwrap();
        let child = Command::new(&program)
            .arg(format!("--kubeconfig={}", cp.kubeconfig.display()))
            .arg("--host=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--cert-dir={}", dir.path().display()))
            .arg("--disable-cert-rotation")
            .arg("--debug-use-fake-pod")
            .arg(format!("--health-addr=127.0.0.1:{health}"))
            .arg(format!("--prometheus-port={metrics}"))
            .arg("--operation=webhook")
            .arg("--operation=mutation-webhook")
            .arg("--operation=generate")
            .arg(format!("--exempt-namespace={namespace}"))
            .arg("--disable-opa-builtin={http.send}")
            .arg(format!(
                "--validating-webhook-configuration-name=winadmit-{setup}"
            ))
            .arg(format!(
                "--mutating-webhook-configuration-name=winadmit-{setup}"
            ))
            .env("POD_NAMESPACE", namespace)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        cp.adopt(child.id());
        // The templates first; each constraint once Gatekeeper has made its
        // kind.
        apply_policy(
            cp,
            "Gatekeeper",
            "benches/gatekeeper/policy.yaml",
            &dir.path().join("gatekeeper.log"),
        );
        let url = format!("https://127.0.0.1:{port}");
        let registrations = e2e::registrations_at(&objects, setup, &url, ca.pem().as_bytes());
        Some((
            Self {
                child,
                port,
                ca: ca.pem().into_bytes(),
                _dir: dir,
            },
            registrations,
        ))
    }
}

/// Applies `file` (under the crate root) until `who` accepts it: its
/// webhooks and the kinds it makes come up after it starts. Panics after
/// 120 s with kubectl's error and `who`'s log.
fn apply_policy(cp: &ControlPlane, who: &str, file: &str, log: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let policy =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = cp.kubectl_stdin(&["apply", "-f", "-"], &policy);
        if out.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{who} did not accept its policy in 120 s: {}\n{}",
            e2e::stderr(&out),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The YAML files under `dir`, in order.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path.extension().is_some_and(|x| x == "yaml") {
            files.push(path);
        }
    }
    files
}

pub fn only(objects: Vec<Value>, kind: &str) -> Vec<Value> {
    objects
        .into_iter()
        .filter(|o| e2e::kind(o) == kind)
        .collect()
}

/// `winadmit admission-policy`'s objects for `setup`, renamed so each
/// setup has its own, and bound to the setup's namespace only.
/// `LATENCY_POLICIES` names a file to use instead (to measure a variant).
pub fn exported_policies(setup: &str, ns: &str) -> Vec<Value> {
    let text = if let Ok(file) = std::env::var("LATENCY_POLICIES") {
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("LATENCY_POLICIES {file}: {e}"))
    } else {
        let out = binary::winadmit(&["admission-policy"]);
        assert!(out.status.success(), "{}", e2e::stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let keep = |name: &str| match setup {
        "policy-errors" => name.starts_with("winadmit-errors"),
        "policy-warnings" => name.starts_with("winadmit-warnings"),
        "policy-mutate" => name.starts_with("winadmit-mutate"),
        _ => true,
    };
    let mut policies = e2e::parse_yaml(&text);
    policies.retain(|p| keep(p["metadata"]["name"].as_str().unwrap_or_default()));
    for p in &mut policies {
        let name = format!("{}-{setup}", p["metadata"]["name"].as_str().unwrap());
        p["metadata"]["name"] = json!(name);
        if e2e::kind(p).ends_with("Binding") {
            let policy = format!("{}-{setup}", p["spec"]["policyName"].as_str().unwrap());
            p["spec"]["policyName"] = json!(policy);
            let selector = &mut p["spec"]["matchResources"]["namespaceSelector"];
            e2e::scope(selector, ns);
        }
    }
    policies
}

/// The names of the setups to run, of `names`: those `var` names
/// (comma-separated) or all, `none` always; `kyverno` and `gatekeeper`
/// only when `KYVERNO` and `GATEKEEPER` name their binaries.
///
/// # Panics
/// `var` names a setup not in `names`.
pub fn chosen(var: &str, names: &[&'static str]) -> Vec<&'static str> {
    let wanted = std::env::var(var).unwrap_or_default();
    let wanted: Vec<&str> = wanted
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    for w in &wanted {
        assert!(
            names.contains(w),
            "{var}: unknown setup {w:?}; the setups are {names:?}"
        );
    }
    let mut missing = Vec::new();
    for (name, binary) in [("kyverno", "KYVERNO"), ("gatekeeper", "GATEKEEPER")] {
        if names.contains(&name) && !std::env::var(binary).is_ok_and(|b| !b.is_empty()) {
            eprintln!(
                "{name}: left out ({binary} names no binary; benches/{name}/build.sh builds one)"
            );
            missing.push(name);
        }
    }
    names
        .iter()
        .copied()
        .filter(|n| *n == "none" || wanted.is_empty() || wanted.contains(n))
        .filter(|n| !missing.contains(n))
        .collect()
}
