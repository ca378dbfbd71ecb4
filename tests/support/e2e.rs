//! winadmit in front of the real API server (`controlplane.rs`): `winadmit
//! serve` started as a process with its own certificate, and registered
//! with the webhook configurations of its own rendered install (`winadmit
//! manifests --overlay ...`), the Service replaced by a URL and the
//! caBundle set to the server's CA, as controller-runtime's envtest does.
//!
//! Registrations are cluster-wide, so each one is named after its setup
//! and scoped to namespaces labelled `winadmit-e2e: <setup>`; tests of one
//! setup make their namespaces with that label.

#![allow(dead_code)] // each test target uses a part

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::controlplane::ControlPlane;
use super::server::Server;

pub fn parse_yaml(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// The objects of `winadmit manifests --overlay <overlay>`.
pub fn rendered(overlay: &str) -> Vec<Value> {
    let out = super::binary::winadmit(&["manifests", "--overlay", overlay]);
    assert!(
        out.status.success(),
        "winadmit manifests --overlay {overlay}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_yaml(&String::from_utf8(out.stdout).unwrap())
}

pub fn kind(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

/// The policy the overlay's Deployment loads (its ConfigMap).
pub fn overlay_policy(objects: &[Value]) -> String {
    objects
        .iter()
        .find(|o| kind(o) == "ConfigMap" && o["metadata"]["name"] == "winadmit-policy")
        .and_then(|o| o["data"]["policy.yaml"].as_str())
        .expect("the overlay has the winadmit-policy ConfigMap")
        .to_owned()
}

/// A running `winadmit serve` with a self-signed certificate for 127.0.0.1.
pub struct Webhook {
    pub server: Server,
    pub ca_pem: Vec<u8>,
    pub dir: tempfile::TempDir,
}

impl Webhook {
    /// `winadmit serve --self-signed` with `policy` (YAML) and `extra` flags.
    pub fn start(policy: &str, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let policy_file = dir.path().join("policy.yaml");
        std::fs::write(&policy_file, policy).unwrap();
        let certs = dir.path().join("certs");
        let mut args = vec![
            "--self-signed",
            "--self-signed-dir",
            certs.to_str().unwrap(),
            "--policy",
            policy_file.to_str().unwrap(),
        ];
        args.extend(extra);
        let server = Server::start(&args);
        let ca_pem = std::fs::read(certs.join("ca.pem")).unwrap();
        Self {
            server,
            ca_pem,
            dir,
        }
    }

    /// `winadmit serve --tls-cert --tls-key` on `certs` (reloaded when the
    /// files change), with `policy` and `extra` flags.
    pub fn start_tls(policy: &str, certs: &super::server::Certs, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let policy_file = write(dir.path(), "policy.yaml", policy);
        let mut args = super::server::tls_args(certs);
        args.extend(["--policy".into(), policy_file.display().to_string()]);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Self {
            server: Server::start(&refs),
            ca_pem: certs.ca.pem().into_bytes(),
            dir,
        }
    }

    /// Leaves the process to `cp`'s supervisor to stop when the tests end
    /// (a webhook kept in a static is never dropped).
    pub fn adopted_by(self, cp: &ControlPlane) -> Self {
        cp.adopt(self.server.child.id());
        self
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.server.addr.port())
    }

    /// The review log lines for objects named `name` (each call the API
    /// server made: endpoint, operation, verdict, rules...).
    pub fn reviews_of(&self, name: &str) -> Vec<Value> {
        self.server
            .stdout
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["message"] == "admission review" && v["name"] == name)
            .collect()
    }
}

impl Webhook {
    /// Waits (20 s at most) until `--gmsa auto` has turned the gMSA checks
    /// on and the cache has listed the credential specs.
    pub fn wait_gmsa_on(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(self.server.logs_contain("gmsa: on (--gmsa auto)")
            && self
                .server
                .logs_contain("cluster cache: gmsacredentialspecs.windows.k8s.io listed"))
        {
            assert!(
                Instant::now() < deadline,
                "gMSA never turned on: {}",
                self.server.all_logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (10 s at most) for a review log line of `name` that `matches`:
    /// the log line may trail the API server's answer.
    pub fn wait_review(&self, name: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(r) = self.reviews_of(name).into_iter().find(|r| matches(r)) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "no matching review of {name} in winadmit's log: {:#?}",
                self.reviews_of(name)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Rewrites a rendered webhook configuration to call `url_base` with `ca`
/// as its caBundle, names it `winadmit-<setup>` (`winadmit-gmsa`:
/// `winadmit-<setup>-gmsa`) and scopes it to namespaces labelled
/// `winadmit-e2e: <setup>`.
fn point_at(config: &mut Value, setup: &str, url_base: &str, ca: &[u8]) {
    let name = config["metadata"]["name"].as_str().unwrap_or("winadmit");
    let rest = name.strip_prefix("winadmit").unwrap_or(name).to_owned();
    config["metadata"]["name"] = json!(format!("winadmit-{setup}{rest}"));
    if let Some(annotations) = config["metadata"]
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        // cert-manager's CA injection: the test sets the caBundle itself.
        annotations.remove("cert-manager.io/inject-ca-from");
    }
    for hook in config["webhooks"].as_array_mut().unwrap() {
        let path = hook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap()
            .to_owned();
        hook["clientConfig"] = json!({
            "url": format!("{url_base}{path}"),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
        });
        scope(&mut hook["namespaceSelector"], setup);
    }
}

/// Adds `winadmit-e2e In [setup]` to a namespaceSelector.
/// Scopes every binding of an exported admission policy (`docs`) to the
/// namespaces of `setup` ([`scope`]).
pub fn scope_bindings(docs: &mut [Value], setup: &str) {
    for d in docs {
        if kind(d).ends_with("Binding") {
            scope(&mut d["spec"]["matchResources"]["namespaceSelector"], setup);
        }
    }
}

pub fn scope(selector: &mut Value, setup: &str) {
    if selector.is_null() {
        *selector = json!({});
    }
    let exprs = selector
        .as_object_mut()
        .unwrap()
        .entry("matchExpressions")
        .or_insert_with(|| json!([]));
    exprs.as_array_mut().unwrap().push(json!({
        "key": "winadmit-e2e", "operator": "In", "values": [setup]
    }));
}

/// The webhook configurations of `objects`, pointed at `webhook`.
pub fn registrations(objects: &[Value], setup: &str, webhook: &Webhook) -> Vec<Value> {
    registrations_at(objects, setup, &webhook.url(""), &webhook.ca_pem)
}

/// The webhook configurations of `objects`, pointed at `url_base` with
/// `ca` as their caBundle (a fake server, or a bundle of several CAs).
pub fn registrations_at(objects: &[Value], setup: &str, url_base: &str, ca: &[u8]) -> Vec<Value> {
    objects
        .iter()
        .filter(|o| kind(o).ends_with("WebhookConfiguration"))
        .cloned()
        .map(|mut c| {
            point_at(&mut c, setup, url_base, ca);
            c
        })
        .collect()
}

pub fn to_list(objects: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}

/// A pod named `name` in `ns` with `spec` (containers default to one
/// Windows IIS container).
pub fn pod(ns: &str, name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{
            "name": "web", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"
        }]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// `kubectl create -f -` of `object`, with `--dry-run=server` when asked;
/// the output, whatever the outcome.
pub fn create(cp: &ControlPlane, object: &Value, dry_run: bool) -> Output {
    let mut args = vec!["create", "-o", "json", "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    cp.kubectl_stdin(&args, &object.to_string())
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Retries a server-side dry-run create of a probe pod in `ns` until the
/// webhook at `webhook` has been called for it (registrations take effect
/// after a short delay): `calls` review lines, from both registrations.
pub fn wait_registered(cp: &ControlPlane, webhook: &Webhook, ns: &str, calls: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        let name = format!("probe-{attempt}");
        let probe = pod(
            ns,
            &name,
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        );
        let _ = create(cp, &probe, true);
        std::thread::sleep(Duration::from_millis(200));
        // The log line may trail the answer: look at every probe so far.
        if (0..=attempt).any(|a| webhook.reviews_of(&format!("probe-{a}")).len() >= calls) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook registration did not take effect in 30 s; winadmit's log:\n{}",
            webhook.server.all_logs()
        );
    }
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
