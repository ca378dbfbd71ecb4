//! The webhook's cluster cache against a fake Kubernetes API over real
//! HTTPS: the real `winadmit serve` binary, started with `--kubeconfig`
//! pointing at the fake API (`report_support::fake_api`, which also serves
//! watches), reviews posted over TLS. Namespace labels and RuntimeClasses
//! come from tests/fixtures/cluster/.
//!
//! - `legacy` is labelled `winadmit.io/mode: warn` and
//!   `winadmit.io/isolation: hyperv`; `shop` has no label.
//! - RuntimeClass `windows-2022` selects `kubernetes.io/os: windows`;
//!   `gvisor` selects nothing.

use crate::report_support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use report_support::fake_api::{Behaviour, FakeApi, TOKEN, kubeconfig_for};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster")
}

/// A running `winadmit serve --self-signed`, with its log lines.
struct Server {
    child: Child,
    addr: SocketAddr,
    ca: String,
    logs: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .arg("--self-signed")
            .arg("--self-signed-dir")
            .arg(dir.path())
            .args(args)
            // No kubeconfig or in-cluster config from the machine running the tests.
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let sink = Arc::clone(&logs);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let addr = logs.lock().unwrap().iter().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                v["message"]
                    .as_str()?
                    .starts_with("winadmit is serving")
                    .then(|| v["addr"].as_str()?.parse::<SocketAddr>().ok())?
            });
            if let Some(addr) = addr {
                let ca = std::fs::read_to_string(dir.path().join("ca.pem")).unwrap();
                return Self {
                    child,
                    addr,
                    ca,
                    logs,
                    _dir: dir,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("winadmit exited with {status}: {:?}", logs.lock().unwrap());
            }
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn logs_contain(&self, needle: &str) -> bool {
        self.logs.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    /// Waits for a log line containing `needle` (the log reader lags a little).
    async fn wait_log(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.logs_contain(needle) {
            assert!(
                Instant::now() < deadline,
                "no log line with {needle:?}:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    async fn request(&self, method: &str, path: &str, body: Vec<u8>) -> (u16, String) {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let tls = TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Polls /readyz until it answers 200; returns how long that took.
    async fn wait_ready(&self, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let (status, _) = self.request("GET", "/readyz", Vec::new()).await;
            if status == 200 {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "not ready within {within:?}; logs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// POSTs a pod review to /validate; returns the AdmissionReview response.
    async fn validate(&self, namespace: &str, spec: Value) -> Value {
        let (status, body) = self
            .request("POST", "/validate", pod_review(namespace, spec))
            .await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["response"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pod CREATE review, shaped like the API server's.
fn pod_review(namespace: &str, spec: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "8f1d2c3b-0000-4000-8000-00000000c0de",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "web",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": spec
            },
            "dryRun": false
        }
    }))
    .unwrap()
}

/// hostNetwork without HostProcess: an error on Windows (WIN-HOSTNETWORK).
fn host_network_spec(extra: Value) -> Value {
    let mut spec = json!({
        "hostNetwork": true,
        "containers": [{
            "name": "app",
            "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
            "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}
        }]
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

fn windows_selector() -> Value {
    json!({"nodeSelector": {"kubernetes.io/os": "windows"}})
}

fn cluster_api(forbid: Option<&'static str>) -> (FakeApi, tempfile::TempDir, PathBuf) {
    let api = FakeApi::start(Behaviour {
        forbid,
        fixtures: Some(fixtures()),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path(), TOKEN);
    (api, dir, kubeconfig)
}

/// The server against the fake cluster, ready and with its cache listed.
async fn serve_with_cluster() -> (FakeApi, tempfile::TempDir, Server) {
    let (api, dir, kubeconfig) = cluster_api(None);
    let server = Server::start(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--cluster-cache-sync-timeout",
            "20s",
        ],
        &[],
    );
    server.wait_ready(Duration::from_secs(20)).await;
    // Ready means listed: no polling needed from here on.
    server.wait_log("cluster cache: first list complete").await;
    (api, dir, server)
}

#[tokio::test]
async fn namespace_labels_and_runtime_classes_come_from_the_cluster() {
    let (api, _dir, server) = serve_with_cluster().await;

    // The default (enforce) denies; the namespace's warn label allows with warnings.
    let shop = server
        .validate("shop", host_network_spec(windows_selector()))
        .await;
    assert_eq!(shop["allowed"], false, "{shop}");
    let legacy = server
        .validate("legacy", host_network_spec(windows_selector()))
        .await;
    assert_eq!(legacy["allowed"], true, "{legacy}");
    let warnings = legacy["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("WIN-HOSTNETWORK ")),
        "{legacy}"
    );

    // runtimeClassName alone makes the pod a Windows pod, by the cluster's RuntimeClass.
    let rc = server
        .validate(
            "shop",
            host_network_spec(json!({"runtimeClassName": "windows-2022"})),
        )
        .await;
    assert_eq!(rc["allowed"], false, "{rc}");
    let message = rc["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("targets Windows by runtimeClassName windows-2022=windows"),
        "{message}"
    );
    assert!(message.contains("[WIN-HOSTNETWORK]"), "{message}");
    // A RuntimeClass that selects no OS does not.
    let gvisor = server
        .validate(
            "shop",
            host_network_spec(json!({"runtimeClassName": "gvisor"})),
        )
        .await;
    assert_eq!(gvisor["allowed"], true, "{gvisor}");
    assert!(!gvisor.to_string().contains("WIN-HOSTNETWORK"), "{gvisor}");

    // /report uses the same RuntimeClasses.
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": host_network_spec(json!({"runtimeClassName": "windows-2022"}))});
    let (status, body) = server
        .request("POST", "/report", serde_json::to_vec(&pod).unwrap())
        .await;
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["objects"][0]["verdict"], "deny", "{body}");
    // ...and the namespaces' mode labels: `legacy` is labelled warn.
    let mut legacy = pod.clone();
    legacy["metadata"]["namespace"] = json!("legacy");
    let (status, body) = server
        .request("POST", "/report", serde_json::to_vec(&legacy).unwrap())
        .await;
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["objects"][0]["verdict"], "warn", "{body}");

    // The cache's metrics.
    let (_, metrics) = server.request("GET", "/metrics", Vec::new()).await;
    assert!(
        metrics.contains("winadmit_cluster_cache_objects{resource=\"namespaces\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("winadmit_cluster_cache_objects{resource=\"runtimeclasses\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("winadmit_cluster_cache_synced{resource=\"runtimeclasses\"} 1"),
        "{metrics}"
    );

    // A label change arrives by watch, without a restart.
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.watchers() < 2 {
        assert!(
            Instant::now() < deadline,
            "the server did not start watching"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.push_event(
        "namespaces",
        "MODIFIED",
        &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "resourceVersion": "9200",
                "labels": {"kubernetes.io/metadata.name": "shop", "winadmit.io/mode": "audit"}}}),
    );
    loop {
        let r = server
            .validate("shop", host_network_spec(windows_selector()))
            .await;
        if r["allowed"] == true {
            // The fixture's Windows nodes are tainted os=windows:NoSchedule
            // and the pod does not tolerate it: WIN-TAINT-TOLERATION too.
            assert_eq!(
                r["auditAnnotations"]["winadmit.io/audit"], "WIN-HOSTNETWORK,WIN-TAINT-TOLERATION",
                "{r}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the label change did not arrive: {r}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/api/v1/namespaces?") && r.contains("watch=true")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn the_namespace_isolation_label_reaches_mutate() {
    let (_api, dir, kubeconfig) = cluster_api(None);
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nmutation:\n  injectNodeSelector: true\n  setOsName: false\n  removeNoOpFields: true\n  emptyDirOffMemory: false\n  inferFromImages: false\n  isolation: process\n  isolationNamespaceLabel: winadmit.io/isolation\n  tolerations: []\n",
    )
    .unwrap();
    let server = Server::start(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &[],
    );
    server.wait_ready(Duration::from_secs(20)).await;
    let isolation = |namespace: &'static str| {
        let server = &server;
        async move {
            let spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"},
                "containers": [{"name": "app", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                    "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]});
            let (status, body) = server
                .request("POST", "/mutate", pod_review(namespace, spec))
                .await;
            assert_eq!(status, 200, "{body}");
            let r: Value = serde_json::from_str(&body).unwrap();
            let patch = r["response"]["patch"].as_str().expect("a patch");
            let patch: Value = serde_json::from_slice(
                &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).unwrap(),
            )
            .unwrap();
            patch.to_string()
        }
    };
    // The policy's default, and the namespace label's override.
    assert!(
        isolation("shop").await.contains("\"process\""),
        "shop: {}",
        isolation("shop").await
    );
    let legacy = isolation("legacy").await;
    assert!(legacy.contains("\"hyperv\""), "legacy: {legacy}");
}

#[tokio::test]
async fn a_forbidden_resource_is_logged_and_the_webhook_serves_without_it() {
    let (_api, _dir, kubeconfig) = cluster_api(Some("namespaces"));
    let server = Server::start(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--cluster-cache-sync-timeout",
            "1s",
        ],
        &[],
    );
    server.wait_ready(Duration::from_secs(15)).await;
    server
        .wait_log("cluster cache: cannot list namespaces: forbidden")
        .await;
    server.wait_log("--cluster-cache-sync-timeout").await;
    // Logged once per distinct failure, not once per retry; kube's own
    // per-retry warnings are filtered out.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = server.logs();
    assert_eq!(logs.matches("cannot list namespaces").count(), 1, "{logs}");
    assert!(!logs.contains("watch list error"), "{logs}");
    // Without namespace labels the policy's mode applies...
    let legacy = server
        .validate("legacy", host_network_spec(windows_selector()))
        .await;
    assert_eq!(legacy["allowed"], false, "{legacy}");
    // ...and RuntimeClasses, which may be listed, still work.
    let rc = server
        .validate(
            "shop",
            host_network_spec(json!({"runtimeClassName": "windows-2022"})),
        )
        .await;
    assert_eq!(rc["allowed"], false, "{rc}");
    let (_, metrics) = server.request("GET", "/metrics", Vec::new()).await;
    assert!(
        metrics
            .contains("winadmit_cluster_cache_errors_total{resource=\"namespaces\",verb=\"list\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_unreachable_api_server_never_stops_the_webhook() {
    // A port nothing listens on (with a well-formed kubeconfig).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (api, dir, _) = cluster_api(None);
    let kubeconfig = kubeconfig_for(
        dir.path(),
        &format!("https://127.0.0.1:{port}"),
        &api.ca_pem,
        TOKEN,
    );
    let server = Server::start(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--cluster-cache-sync-timeout",
            "1s",
        ],
        &[],
    );
    // Not ready at once: the cache gets its bounded chance first.
    let (status, body) = server.request("GET", "/readyz", Vec::new()).await;
    if status != 200 {
        assert!(body.contains("cluster cache"), "{body}");
    }
    server.wait_ready(Duration::from_secs(15)).await;
    let r = server
        .validate("shop", host_network_spec(windows_selector()))
        .await;
    assert_eq!(r["allowed"], false, "{r}");
    server
        .wait_log("cluster cache: cannot list namespaces: cannot reach the API server")
        .await;
}

#[tokio::test]
async fn without_a_cluster_configuration_auto_runs_without_and_on_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    let server = Server::start(&[], &[("KUBECONFIG", missing.to_str().unwrap())]);
    let took = server.wait_ready(Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    server.wait_log("no cluster configuration found").await;
    let r = server
        .validate("legacy", host_network_spec(windows_selector()))
        .await;
    assert_eq!(r["allowed"], false, "{r}");

    let out = Command::new(BIN)
        .args(["serve", "--self-signed", "--listen", "127.0.0.1:0"])
        .arg("--self-signed-dir")
        .arg(dir.path())
        .args(["--cluster-cache", "on"])
        .env("KUBECONFIG", &missing)
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--cluster-cache on: no cluster configuration found"),
        "{stderr}"
    );

    // An explicit --kubeconfig that cannot be read is a start-up error too.
    let out = Command::new(BIN)
        .args(["serve", "--self-signed", "--listen", "127.0.0.1:0"])
        .arg("--self-signed-dir")
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read --kubeconfig"), "{stderr}");
}

/// The cluster's Windows nodes decide version-dependent verdicts: a subPath
/// pod is denied on the Docker node pool and allowed on the containerd one,
/// and an image build no node runs is an error.
#[tokio::test]
async fn windows_nodes_decide_version_dependent_verdicts() {
    let (api, _dir, server) = serve_with_cluster().await;
    let subpath = |pool: &str| {
        json!({
            "nodeSelector": {"kubernetes.io/os": "windows", "agentpool": pool},
            "containers": [{
                "name": "app",
                "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
                "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                "volumeMounts": [{"name": "cfg", "mountPath": "C:\\app\\web.config", "subPath": "web.config"}]
            }],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}]
        })
    };
    let docker = server.validate("shop", subpath("dockerpool")).await;
    assert_eq!(docker["allowed"], false, "{docker}");
    let message = docker["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("[WIN-SUBPATH]") && message.contains("Windows node akswin-docker"),
        "the denial names the node the fact came from: {message}"
    );
    let containerd = server.validate("shop", subpath("ctrdpool")).await;
    assert_eq!(containerd["allowed"], true, "{containerd}");

    // Every Windows node runs 10.0.20348: an ltsc2019 image can start on none.
    let ltsc2019 = json!({
        "nodeSelector": {"kubernetes.io/os": "windows", "agentpool": "ctrdpool"},
        "containers": [{
            "name": "app",
            "image": "mcr.microsoft.com/windows/servercore:ltsc2019",
            "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}
        }]
    });
    let old = server.validate("shop", ltsc2019).await;
    assert_eq!(old["allowed"], false, "{old}");
    let message = old["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("[WIN-BUILD-NO-NODE]") && message.contains("10.0.20348"),
        "{message}"
    );
    drop(api);
}
