//! A real Kubernetes control plane for the end-to-end tests: kube-apiserver
//! v1.37, etcd and kubectl, built from the Go module in `tests/apiserver/`
//! into `target/controlplane/bin` (`tests/apiserver/build.sh`; about
//! 5 minutes cold, seconds once Go's caches are warm) and started on loopback
//! with certificates made here (rcgen). The version matrix
//! (`tests/cluster/version_matrix.rs`) starts older API servers the same way
//! ([`apiserver_of`], [`ControlPlane::start_with`]), each built from its
//! module folder `tests/apiserver/v1.NN/`.
//!
//! One control plane per test process, shared by its tests, each working in
//! namespaces of its own. `tests/apiserver/run.sh` supervises it: it stops
//! the API server first, then etcd, when the test process goes away, even
//! when a test panics or the process is killed.
//!
//! `cargo test` builds none of them: `build.rs` sets `cfg(no_control_plane)`
//! when they are not in `target/controlplane/bin` (and `cfg(no_apiserver_1_NN)`
//! for each older API server), and each test carries
//! `#[cfg_attr(no_control_plane, ignore = "...")]` naming the command that
//! builds them. With `WINADMIT_REQUIRE_APISERVER` set (`.ci/run` builds them
//! and sets it), they run, and a missing binary fails them.

#![allow(dead_code)] // each test target uses a part

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

fn apiserver_module() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apiserver")
}

/// `target/controlplane/bin`, next to cargo's own output.
fn bin_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("controlplane/bin")
}

fn required() -> bool {
    std::env::var_os("WINADMIT_REQUIRE_APISERVER").is_some()
}

/// The directory holding `kube-apiserver`, `etcd` and `kubectl` v1.37,
/// built by `tests/apiserver/build.sh`.
///
/// # Panics
/// They are not built (the tests that get here were built with them in
/// place, or require the control plane).
pub fn binaries(test: &str) -> PathBuf {
    let dir = bin_dir();
    let missing: Vec<&str> = ["kube-apiserver", "etcd", "kubectl"]
        .into_iter()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "{test}: {} not built in {}: run tests/apiserver/build.sh (Go 1.26; about 5 minutes cold)",
        missing.join(", "),
        dir.display()
    );
    dir
}

/// The minor versions of the version matrix (`tests/cluster/version_matrix.rs`):
/// kube-apiserver 1.34 to 1.36 from their own module folders
/// (`tests/apiserver/v1.NN/`), 1.37 from `tests/apiserver/`.
pub const MATRIX: &[u32] = &[34, 35, 36, 37];

/// The directory holding kube-apiserver v1.`minor` (of [`MATRIX`]), built
/// by `tests/apiserver/v1.NN/build.sh` into `target/controlplane/v1.NN/bin`;
/// etcd and kubectl are always [`binaries`]'s. An error says how to build
/// it.
pub fn apiserver_of(minor: u32) -> Result<PathBuf, String> {
    if minor == 37 {
        return Ok(bin_dir());
    }
    let out_dir = bin_dir().parent().unwrap().join(format!("v1.{minor}/bin"));
    if out_dir.join("kube-apiserver").is_file() {
        Ok(out_dir)
    } else {
        Err(format!(
            "kube-apiserver v1.{minor} is not built in {}: run tests/apiserver/v1.{minor}/build.sh",
            out_dir.display()
        ))
    }
}

/// Whether the control plane is required (`WINADMIT_REQUIRE_APISERVER`):
/// a test that cannot build it then fails instead of skipping.
pub fn is_required() -> bool {
    required()
}

/// kubectl v1.37 from `target/controlplane/bin` when it is built, else
/// `kubectl` on PATH (client-only uses: `kubectl kustomize`).
pub fn kubectl_program() -> PathBuf {
    let built = bin_dir().join("kubectl");
    if built.is_file() {
        return built;
    }
    PathBuf::from("kubectl")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running etcd and kube-apiserver, and an admin kubeconfig.
pub struct ControlPlane {
    pub bin: PathBuf,
    pub work: PathBuf,
    pub port: u16,
    pub kubeconfig: PathBuf,
    /// The CA that signed the API server's serving certificate.
    pub ca_pem: String,
    supervisor: Mutex<(Child, Option<ChildStdin>)>,
}

/// The control plane of the calling test file, started on first use: the
/// tests of one file share it, and each file of a test binary has its
/// own, so that what one file installs (webhooks, CRDs, nodes) is never
/// seen by another's tests.
#[track_caller]
pub fn shared(test: &str) -> &'static ControlPlane {
    let file = std::panic::Location::caller().file();
    shared_by(file, test)
}

/// The control plane kept under `key` (a test file's path), started on
/// first use.
pub fn shared_by(key: &'static str, test: &str) -> &'static ControlPlane {
    once_per(key).get_or_init(|| ControlPlane::start(&binaries(test)))
}

/// A value per key for the whole process, each started once.
pub fn once_per<T: Send + Sync + 'static>(key: &'static str) -> &'static OnceLock<T> {
    static CELLS: Mutex<
        Vec<(
            &'static str,
            std::any::TypeId,
            &'static (dyn std::any::Any + Send + Sync),
        )>,
    > = Mutex::new(Vec::new());
    let mut cells = CELLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let ty = std::any::TypeId::of::<T>();
    let found = cells
        .iter()
        .find(|(k, t, _)| *k == key && *t == ty)
        .map(|(_, _, c)| *c);
    let cell = found.unwrap_or_else(|| {
        let cell: &'static OnceLock<T> = Box::leak(Box::new(OnceLock::new()));
        cells.push((key, ty, cell));
        cell
    });
    cell.downcast_ref::<OnceLock<T>>()
        .expect("one type per key and type id")
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

impl ControlPlane {
    /// A control plane of its own (most tests share [`shared`]'s), for a
    /// test that must start from an empty cluster.
    pub fn start(bin: &Path) -> Self {
        Self::start_with(bin, &bin.join("kube-apiserver"), &[])
    }

    /// A control plane of its own whose API server is `apiserver` (another
    /// version than `bin`'s), started with `flags` added (feature gates,
    /// runtime-config); etcd and kubectl are `bin`'s.
    pub fn start_with(bin: &Path, apiserver: &Path, flags: &[&str]) -> Self {
        let work = tempfile::Builder::new()
            .prefix("winadmit-controlplane-")
            .tempdir()
            .unwrap()
            .keep();
        let pki = work.join("pki");
        std::fs::create_dir_all(&pki).unwrap();
        let write = |name: &str, text: &str| std::fs::write(pki.join(name), text).unwrap();

        let server_ca = ca("winadmit-test-apiserver-ca");
        let mut p = CertificateParams::new(vec![
            "127.0.0.1".into(),
            "localhost".into(),
            "10.0.0.1".into(),
        ])
        .unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let key = KeyPair::generate().unwrap();
        write(
            "apiserver.crt",
            &p.signed_by(&key, &server_ca).unwrap().pem(),
        );
        write("apiserver.key", &key.serialize_pem());
        write("ca.crt", &server_ca.pem());

        let client_ca = ca("winadmit-test-client-ca");
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        p.distinguished_name.push(DnType::CommonName, "admin");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        write("admin.crt", &p.signed_by(&key, &client_ca).unwrap().pem());
        write("admin.key", &key.serialize_pem());
        write("client-ca.crt", &client_ca.pem());

        // Service-account tokens (TokenRequest): ES256.
        let sa = KeyPair::generate().unwrap();
        write("sa.key", &sa.serialize_pem());
        write("sa.pub", &sa.public_key_pem());

        let port = free_port();
        let kubeconfig = work.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: test, cluster: {{server: \"https://127.0.0.1:{port}\", certificate-authority: \"{ca}\"}}}}]\n\
                 users: [{{name: admin, user: {{client-certificate: \"{crt}\", client-key: \"{key}\"}}}}]\n\
                 contexts: [{{name: test, context: {{cluster: test, user: admin}}}}]\n\
                 current-context: test\n",
                ca = pki.join("ca.crt").display(),
                crt = pki.join("admin.crt").display(),
                key = pki.join("admin.key").display(),
            ),
        )
        .unwrap();

        let mut child = Command::new(apiserver_module().join("run.sh"))
            .env("BIN", bin)
            .env("WORK", &work)
            .env("ETCD_PORT", free_port().to_string())
            .env("PEER_PORT", free_port().to_string())
            .env("API_PORT", port.to_string())
            .env("APISERVER", apiserver)
            .env("APISERVER_FLAGS", flags.join(" "))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let cp = Self {
            bin: bin.to_path_buf(),
            work,
            port,
            kubeconfig,
            ca_pem: server_ca.pem(),
            supervisor: Mutex::new((child, stdin)),
        };
        cp.wait_ready();
        cp
    }

    /// Waits for `/readyz` (60 s at most).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.kubectl(&["get", "--raw", "/readyz"]).status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the API server did not become ready in 60 s:\n{}",
                self.apiserver_log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Stops the API server and starts it again (same port, same etcd).
    pub fn restart_apiserver(&self) {
        {
            let mut sup = self.supervisor.lock().unwrap();
            let stdin = sup.1.as_mut().unwrap();
            writeln!(stdin, "restart-apiserver").unwrap();
            stdin.flush().unwrap();
        }
        // The old server needs a moment to stop listening.
        std::thread::sleep(Duration::from_millis(500));
        self.wait_ready();
    }

    /// Has the supervisor kill `pid` when the test process goes away: for
    /// processes held in statics, which are never dropped.
    pub fn adopt(&self, pid: u32) {
        let mut sup = self.supervisor.lock().unwrap();
        let stdin = sup.1.as_mut().unwrap();
        writeln!(stdin, "adopt {pid}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn apiserver_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.work.join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn kubectl_cmd(&self) -> Command {
        let mut c = Command::new(self.bin.join("kubectl"));
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd().args(args).output().unwrap()
    }

    /// kubectl with `input` on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .kubectl_cmd()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A kubeconfig in `dir` for ServiceAccount `ns/sa`, with a token from
    /// the TokenRequest API (`kubectl create token`, valid 2 hours).
    pub fn service_account_kubeconfig(&self, dir: &Path, ns: &str, sa: &str) -> PathBuf {
        let token = self.kubectl_ok(&["create", "token", sa, "-n", ns, "--duration", "2h"]);
        let path = dir.join(format!("{ns}-{sa}.kubeconfig"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: test, cluster: {{server: \"https://127.0.0.1:{}\", certificate-authority: \"{}\"}}}}]\n\
                 users: [{{name: {sa}, user: {{token: \"{}\"}}}}]\n\
                 contexts: [{{name: test, context: {{cluster: test, user: {sa}}}}}]\n\
                 current-context: test\n",
                self.port,
                self.work.join("pki/ca.crt").display(),
                token.trim()
            ),
        )
        .unwrap();
        path
    }

    /// Sets the status of Node `name` (nodeInfo, capacity...: a
    /// subresource, which `apply` does not write); must succeed.
    pub fn set_node_status(&self, name: &str, status: &serde_json::Value) {
        let patch = serde_json::json!({"status": status}).to_string();
        self.kubectl_ok(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// `kubectl apply --server-side -f -` of JSON or YAML objects; must succeed.
    pub fn apply(&self, objects: &str) {
        let out = self.kubectl_stdin(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            objects,
        );
        assert!(
            out.status.success(),
            "kubectl apply: {}\n{objects}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The object as the API server stores it.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.kubectl_ok(&["get", resource, "-n", ns, name, "-o", "json"]))
            .unwrap()
    }

    /// Creates a namespace with labels (all tests' namespaces carry
    /// `winadmit-e2e: <setup>`, which scopes the webhook registrations and
    /// policy bindings of one setup to its own namespaces).
    pub fn namespace(&self, name: &str, labels: &[(&str, &str)]) {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).into()))
            .collect();
        self.apply(
            &serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels}
            })
            .to_string(),
        );
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let mut sup = self.supervisor.lock().unwrap();
        // End of input: run.sh stops the API server, then etcd.
        drop(sup.1.take());
        let _ = sup.0.wait();
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// An API server's answer to a request: status code, body (the object, or
/// a `Status`) and the warnings it sent (`Warning` headers).
#[derive(Debug, Clone)]
pub struct Answer {
    pub code: u16,
    pub body: serde_json::Value,
    pub warnings: Vec<String>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// The `Status` message of a refusal ("" when accepted).
    pub fn message(&self) -> &str {
        if self.ok() {
            return "";
        }
        self.body["message"].as_str().unwrap_or_default()
    }

    /// The fields of a refusal's causes whose message contains `text`.
    pub fn cause_fields(&self, text: &str) -> std::collections::BTreeSet<String> {
        self.body["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["message"].as_str().is_some_and(|m| m.contains(text)))
            .filter_map(|c| c["field"].as_str().map(str::to_owned))
            .collect()
    }
}

/// The REST path of a built-in workload kind's collection in `ns`.
pub fn collection_path(api_version: &str, kind: &str, ns: &str) -> Option<String> {
    let plural = match kind {
        "Pod" => "pods",
        "ReplicationController" => "replicationcontrollers",
        "PodTemplate" => "podtemplates",
        "Deployment" => "deployments",
        "ReplicaSet" => "replicasets",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        "Job" => "jobs",
        "CronJob" => "cronjobs",
        _ => return None,
    };
    let prefix = if api_version == "v1" {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{api_version}")
    };
    Some(format!("{prefix}/namespaces/{ns}/{plural}"))
}

impl ControlPlane {
    /// A kube client of the API server, as the tests' admin.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// A server-side dry-run create of one object ([`Self::dry_run_create_all`]).
    pub fn dry_run_create(&self, object: &serde_json::Value) -> Answer {
        self.dry_run_create_all(std::slice::from_ref(object))
            .remove(0)
    }

    /// Server-side dry-run creates of `objects` (built-in workload kinds,
    /// each in its `metadata.namespace`), eight at a time, straight to the
    /// API server with the admin credentials: kubectl's answers without a
    /// process per object.
    pub fn dry_run_create_all(&self, objects: &[serde_json::Value]) -> Vec<Answer> {
        use futures::StreamExt as _;
        // kube's rustls client needs a process-wide provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = self.client().await;
            futures::stream::iter(objects.iter().map(|obj| {
                let client = client.clone();
                async move {
                    let path = collection_path(
                        obj["apiVersion"].as_str().unwrap_or_default(),
                        obj["kind"].as_str().unwrap_or_default(),
                        obj["metadata"]["namespace"].as_str().unwrap_or("default"),
                    )
                    .unwrap_or_else(|| panic!("not a built-in workload kind: {obj}"));
                    let request = hyper::Request::post(format!("{path}?dryRun=All"))
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(serde_json::to_vec(obj).unwrap()))
                        .unwrap();
                    // Connection errors (an API server restarting) are
                    // answers too: code 0, the error as the message.
                    let response = match client.send(request).await {
                        Ok(r) => r,
                        Err(e) => {
                            return Answer {
                                code: 0,
                                body: serde_json::json!({"message": e.to_string()}),
                                warnings: Vec::new(),
                            };
                        }
                    };
                    let code = response.status().as_u16();
                    let warnings = response
                        .headers()
                        .get_all("warning")
                        .iter()
                        .filter_map(|v| v.to_str().ok())
                        .map(warning_text)
                        .collect();
                    let bytes = response
                        .into_body()
                        .collect_bytes()
                        .await
                        .unwrap_or_default();
                    Answer {
                        code,
                        body: serde_json::from_slice(&bytes).unwrap_or_default(),
                        warnings,
                    }
                }
            }))
            .buffered(8)
            .collect()
            .await
        })
    }
}

/// The text of a `Warning: 299 - "text"` header.
fn warning_text(header: &str) -> String {
    let text = header
        .split_once(" - ")
        .map_or(header, |(_, t)| t)
        .trim()
        .trim_matches('"');
    text.replace("\\\"", "\"").replace("\\\\", "\\")
}
