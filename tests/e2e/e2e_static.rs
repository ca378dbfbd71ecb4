//! The static admission configuration (`winadmit manifests --static` and
//! `winadmit admission-policy --static`) loaded by a real kube-apiserver
//! v1.37 started with the generated `--admission-control-config-file`.
//!
//! One control plane, started with the files (no winadmit API object is
//! ever created for the guard). Its namespaces:
//! - `st-guard`: everything static applies: the webhooks (which call a
//!   port where nothing listens until [`webhook_down_then_a_regenerated_directory_is_taken_up`]
//!   regenerates them) and the policies;
//! - `st-policy`: the static policies alone (the static webhooks leave it
//!   out, `--exempt-namespace`);
//! - `st-objects`: the API-object export alone (`winadmit admission-policy`
//!   applied through the API, its bindings scoped to this namespace; every
//!   static registration leaves it out), to compare the two exports.
//!
//! The tests that create or delete admission objects through the API hold
//! [`API_OBJECTS`], so that one's deletion of every such object does not
//! remove another's.

use crate::binary;
use crate::controlplane::{self, ControlPlane};
use crate::corpus_dir;
use crate::e2e::{self, Webhook};
use crate::e2e_admission_policy::{Answer, corpus_objects, generated_objects, submit};
use crate::server;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;

const GUARD_NS: &str = "st-guard";
const POLICY_NS: &str = "st-policy";
const OBJECTS_NS: &str = "st-objects";
/// Labelled to opt out (`winadmit.io/ignore`) and to audit only
/// (`winadmit.io/mode`), which the static form does not read.
const LABELLED_NS: &str = "st-labelled";
const SUFFIX: &str = ".static.k8s.io";

/// The kinds of API object an install of winadmit consists of.
const ADMISSION_RESOURCES: &str = "validatingwebhookconfigurations,mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingadmissionpolicies,mutatingadmissionpolicybindings";

struct Setup {
    cp: ControlPlane,
    /// The output directory of both commands.
    dir: PathBuf,
    /// The webhook's certificates, made before the API server starts (the
    /// static files carry its CA).
    certs: server::Certs,
}

fn setup(test: &str) -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let bin = controlplane::binaries(test);
        let dir = tempfile::Builder::new()
            .prefix("winadmit-static-")
            .tempdir()
            .unwrap()
            .keep();
        let certs = server::certs();
        // Nothing listens there: the webhook is down.
        let down = format!("https://127.0.0.1:{}", controlplane::free_port());
        write_webhooks(&dir, &down, &certs.ca.pem());
        let out = binary::winadmit(&[
            "admission-policy",
            "--static",
            dir.to_str().unwrap(),
            "--exempt-namespace",
            OBJECTS_NS,
        ]);
        assert!(out.status.success(), "{}", e2e::stderr(&out));
        let config = dir.join("admission-configuration.yaml");
        let flag = format!("--admission-control-config-file={}", config.display());
        let cp = ControlPlane::start_with(&bin, &bin.join("kube-apiserver"), &[&flag]);
        for (ns, setup) in [
            (GUARD_NS, "guard"),
            (POLICY_NS, "policy"),
            (OBJECTS_NS, "objects"),
        ] {
            cp.namespace(ns, &[("winadmit-e2e", setup)]);
        }
        cp.namespace("winadmit", &[]);
        cp.namespace(
            LABELLED_NS,
            &[
                ("winadmit.io/ignore", "true"),
                ("winadmit.io/mode", "audit"),
            ],
        );
        Setup { cp, dir, certs }
    })
}

/// `winadmit manifests --static DIR` pointed at `url`, leaving out the
/// namespaces of the policy comparison.
fn write_webhooks(dir: &Path, url: &str, ca_pem: &str) {
    // Next to the directory: a file in it is not the command's.
    let ca = dir.with_extension("ca.crt");
    std::fs::write(&ca, ca_pem).unwrap();
    let out = binary::winadmit(&[
        "manifests",
        "--static",
        dir.to_str().unwrap(),
        "--webhook-url",
        url,
        "--ca-bundle",
        ca.to_str().unwrap(),
        "--exempt-namespace",
        POLICY_NS,
        "--exempt-namespace",
        OBJECTS_NS,
        "--exempt-namespace",
        LABELLED_NS,
    ]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
}

fn windows_host_network(ns: &str, name: &str) -> Value {
    e2e::pod(
        ns,
        name,
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    )
}

/// `kubectl create --dry-run=server` of `object`: (admitted, stderr).
fn create(cp: &ControlPlane, object: &Value) -> (bool, String) {
    let out = e2e::create(cp, object, true);
    (out.status.success(), e2e::stderr(&out))
}

fn no_winadmit_api_objects(cp: &ControlPlane) {
    let listed = cp.kubectl_ok(&[
        "get",
        ADMISSION_RESOURCES,
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    assert!(
        listed.trim().is_empty(),
        "admission objects exist through the API: {listed}"
    );
}

/// Before any winadmit object exists through the API, a Windows pod with
/// hostNetwork is refused: by the static ValidatingAdmissionPolicy where
/// only the policies apply, also in a namespace labelled to opt out and to
/// audit only, and where the static webhooks apply too (the webhook is
/// down: failurePolicy Fail) it is refused as well.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn static_guard_refuses_before_any_api_object_exists() {
    let s = setup("static_guard_refuses_before_any_api_object_exists");
    no_winadmit_api_objects(&s.cp);
    // Namespace labels are API objects too: the static policies do not
    // read the opt-out and mode labels.
    for ns in [POLICY_NS, LABELLED_NS] {
        let (admitted, stderr) = create(&s.cp, &windows_host_network(ns, "hn"));
        assert!(!admitted, "{ns}: {stderr}");
        assert!(
            stderr.contains("winadmit-errors.static.k8s.io") && stderr.contains("WIN-HOSTNETWORK"),
            "{ns}: refused by the static policy: {stderr}"
        );
    }
    let (admitted, stderr) = create(&s.cp, &windows_host_network(GUARD_NS, "hn"));
    assert!(!admitted, "{stderr}");
}

/// Deleting every webhook configuration, policy and binding through the
/// API leaves the guard: the static objects are not among them, cannot be
/// deleted by name, and an object named with the reserved suffix cannot be
/// created through the API.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn deleting_every_api_object_leaves_the_static_guard() {
    let s = setup("deleting_every_api_object_leaves_the_static_guard");
    let cp = &s.cp;
    let _api_objects = API_OBJECTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // An API object the deletion must remove, to show it removes something.
    cp.apply(
        &json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "st-decoy"},
            "spec": {"failurePolicy": "Ignore",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "validations": [{"expression": "true"}]}})
        .to_string(),
    );
    let deleted = cp.kubectl_ok(&["delete", ADMISSION_RESOURCES, "--all", "--wait"]);
    assert!(deleted.contains("st-decoy"), "{deleted}");
    no_winadmit_api_objects(cp);
    for (resource, name) in [
        ("validatingadmissionpolicy", "winadmit-errors.static.k8s.io"),
        ("validatingwebhookconfiguration", "winadmit.static.k8s.io"),
    ] {
        let out = cp.kubectl(&["delete", resource, name]);
        assert!(!out.status.success());
        assert!(
            e2e::stderr(&out).contains("NotFound") || e2e::stderr(&out).contains("not found"),
            "{}",
            e2e::stderr(&out)
        );
    }
    // Give the API server time to drop what was deleted.
    std::thread::sleep(Duration::from_secs(2));
    for ns in [POLICY_NS, GUARD_NS] {
        let (admitted, stderr) = create(cp, &windows_host_network(ns, "after-delete"));
        assert!(!admitted, "{ns}: admitted after the deletion: {stderr}");
    }
    // The reserved suffix through the API.
    for kind in [
        "ValidatingAdmissionPolicy",
        "MutatingAdmissionPolicy",
        "ValidatingWebhookConfiguration",
    ] {
        let mut obj = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("winadmit-errors{SUFFIX}")}});
        if kind == "ValidatingWebhookConfiguration" {
            obj["webhooks"] = json!([]);
        } else {
            obj["spec"] = json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                "validations": [{"expression": "true"}],
                "mutations": [{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": "Object{}"}}]});
            if kind == "ValidatingAdmissionPolicy" {
                obj["spec"].as_object_mut().unwrap().remove("mutations");
            } else {
                obj["spec"].as_object_mut().unwrap().remove("validations");
            }
        }
        let out = cp.kubectl_stdin(&["create", "-f", "-"], &obj.to_string());
        assert!(!out.status.success(), "{kind} created through the API");
        assert!(
            e2e::stderr(&out).contains("reserved for static manifest-based configurations"),
            "{kind}: {}",
            e2e::stderr(&out)
        );
    }
}

/// The hash kube-apiserver's loader computes of a directory: sha256 over
/// each `.yaml`/`.yml`/`.json` file's content followed by a zero byte, in
/// file name order.
fn directory_hash(dir: &Path) -> String {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    names.sort();
    let mut h = sha2::Sha256::new();
    for p in names {
        h.update(std::fs::read(p).unwrap());
        h.update([0u8]);
    }
    let digest = h.finalize();
    let mut out = String::from("sha256:");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The lines of the API server's metrics named `name`.
fn metric_lines(cp: &ControlPlane, name: &str) -> Vec<String> {
    cp.kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| l.starts_with(name))
        .map(str::to_owned)
        .collect()
}

/// Held by the tests that read the policy directories' state or write into
/// them.
static POLICY_FILES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The `apiserver_manifest_admission_config_controller_*` metrics show
/// each plugin's directory loaded, with the hash of the files as written.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn metrics_show_the_static_files_loaded() {
    let s = setup("metrics_show_the_static_files_loaded");
    let _files = POLICY_FILES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let reloads = metric_lines(
        &s.cp,
        "apiserver_manifest_admission_config_controller_automatic_reloads_total",
    );
    let info = metric_lines(
        &s.cp,
        "apiserver_manifest_admission_config_controller_last_config_info",
    );
    for (plugin, dir) in [
        ("MutatingAdmissionWebhook", "mutating-webhooks"),
        ("ValidatingAdmissionWebhook", "validating-webhooks"),
        ("MutatingAdmissionPolicy", "mutating-policies"),
        ("ValidatingAdmissionPolicy", "validating-policies"),
    ] {
        assert!(
            reloads
                .iter()
                .any(|l| l.contains(&format!("plugin=\"{plugin}\""))
                    && l.contains("status=\"success\"")),
            "{plugin}: no successful load in {reloads:#?}"
        );
        // The webhooks' hash changes when a test regenerates their files.
        if dir.ends_with("policies") {
            let hash = directory_hash(&s.dir.join(dir));
            assert!(
                info.iter()
                    .any(|l| l.contains(&format!("plugin=\"{plugin}\""))
                        && l.contains(&format!("hash=\"{hash}\""))),
                "{plugin}: no last_config_info with the hash {hash} of {dir}: {info:#?}"
            );
        }
    }
}

/// With the webhook down, pods in kube-system (a static pod's mirror pod)
/// and winadmit's own pods are created, a Linux pod is not sent to the
/// webhook, and a Windows pod the registrations cover (failurePolicy
/// Fail) is refused. Then the webhook directory is regenerated to call a
/// running webhook, and the running API server takes it up without a
/// restart: the time it took is printed.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn webhook_down_then_a_regenerated_directory_is_taken_up() {
    let s = setup("webhook_down_then_a_regenerated_directory_is_taken_up");
    let cp = &s.cp;
    // A mirror pod: what the kubelet creates for a static pod.
    let mut mirror = e2e::pod(
        "kube-system",
        "kube-proxy-win-node1",
        json!({"nodeName": "win-node1", "nodeSelector": {"kubernetes.io/os": "windows"},
               "hostNetwork": true}),
    );
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
    let (admitted, stderr) = create(cp, &mirror);
    assert!(admitted, "kube-system mirror pod refused: {stderr}");
    // winadmit's own pods, as its Deployment makes them.
    let deployment = e2e::rendered("base")
        .into_iter()
        .find(|o| e2e::kind(o) == "Deployment")
        .unwrap();
    let mut own = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "winadmit-abc", "namespace": "winadmit"},
        "spec": deployment["spec"]["template"]["spec"].clone()});
    own["metadata"]["labels"] = deployment["spec"]["template"]["metadata"]["labels"].clone();
    let (admitted, stderr) = create(cp, &own);
    assert!(admitted, "winadmit's own pod refused: {stderr}");
    let linux = e2e::pod(
        GUARD_NS,
        "linux",
        json!({"containers": [{"name": "c", "image": "nginx:1.27"}]}),
    );
    let (admitted, stderr) = create(cp, &linux);
    assert!(admitted, "a Linux pod refused: {stderr}");
    let windows = e2e::pod(
        GUARD_NS,
        "windows",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
    );
    let (admitted, stderr) = create(cp, &windows);
    assert!(
        !admitted,
        "a covered Windows pod admitted with the webhook down"
    );
    assert!(
        stderr.contains("failed calling webhook") && stderr.contains("winadmit.io"),
        "{stderr}"
    );

    // The webhook comes up; the directory is regenerated for its address.
    let objects = e2e::rendered("base");
    let webhook = Webhook::start_tls(
        &e2e::overlay_policy(&objects),
        &s.certs,
        &["--cluster-cache", "off"],
    )
    .adopted_by(cp);
    let written = Instant::now();
    write_webhooks(&s.dir, &webhook.url(""), &s.certs.ca.pem());
    let deadline = written + Duration::from_secs(120);
    let taken_up = loop {
        let name = format!("probe-{}", written.elapsed().as_millis());
        let probe = e2e::pod(
            GUARD_NS,
            &name,
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        );
        let (admitted, stderr) = create(cp, &probe);
        std::thread::sleep(Duration::from_millis(200));
        if admitted || !webhook.reviews_of(&name).is_empty() {
            break written.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "the regenerated directory was not taken up in 120 s: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    eprintln!(
        "the running API server took up the regenerated webhook directory in {:.1} s",
        taken_up.as_secs_f64()
    );
    let (admitted, stderr) = create(cp, &windows_host_network(GUARD_NS, "hn-live"));
    assert!(!admitted);
    assert!(
        stderr.contains("WIN-HOSTNETWORK"),
        "refused for its finding: {stderr}"
    );

    // Once per registration that matches: the static ones alone call
    // /mutate once and /validate once; with the install's registrations
    // also created through the API, each of the four calls once.
    let _api_objects = API_OBJECTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(calls(cp, &webhook, "count-static"), [1, 1]);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, "guard", &webhook,
    )));
    e2e::wait_registered(cp, &webhook, GUARD_NS, 4);
    assert_eq!(calls(cp, &webhook, "count-both"), [2, 2]);
    cp.kubectl_ok(&[
        "delete",
        "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "winadmit-guard",
    ]);

    rotate_the_ca_without_a_window(s, &webhook);
}

/// Waits (30 s at most) until both webhook plugins of the API server have
/// loaded their directories as they are now (`last_config_info`'s hash).
fn wait_webhooks_loaded(s: &Setup) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = metric_lines(
            &s.cp,
            "apiserver_manifest_admission_config_controller_last_config_info",
        );
        let loaded = [
            ("MutatingAdmissionWebhook", "mutating-webhooks"),
            ("ValidatingAdmissionWebhook", "validating-webhooks"),
        ]
        .iter()
        .all(|(plugin, dir)| {
            let hash = directory_hash(&s.dir.join(dir));
            info.iter().any(|l| {
                l.contains(&format!("plugin=\"{plugin}\""))
                    && l.contains(&format!("hash=\"{hash}\""))
            })
        });
        if loaded {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook directories were not loaded in 30 s: {info:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The CA rotation of docs/install.md, with Windows pods created all along
/// and every one of them judged by winadmit: (1) the bundle holds the old
/// and the new CA, (2) winadmit serves a certificate of the new CA, (3) the
/// bundle holds the new CA alone. Skipping (2) would refuse the pods after
/// (3), so the last pods show the new certificate in use.
fn rotate_the_ca_without_a_window(s: &Setup, webhook: &Webhook) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cp = &s.cp;
    let url = webhook.url("");
    let new_ca = server::Ca::new("test CA 2");
    // A bundle without the CA of the certificate winadmit serves: the API
    // server does not trust whoever answers at the URL, and refuses.
    write_webhooks(&s.dir, &url, &new_ca.pem());
    wait_webhooks_loaded(s);
    let (admitted, stderr) = create(cp, &windows_host_network(GUARD_NS, "untrusted"));
    assert!(!admitted, "admitted through an untrusted webhook");
    assert!(
        stderr.contains("failed calling webhook") && stderr.contains("certificate"),
        "{stderr}"
    );
    let stop = AtomicBool::new(false);
    let failures = Mutex::new(Vec::new());
    let names = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let name = format!("rotate-{i}");
                let pod = e2e::pod(
                    GUARD_NS,
                    &name,
                    json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
                );
                let (admitted, stderr) = create(cp, &pod);
                if !admitted {
                    failures.lock().unwrap().push(stderr);
                }
                names.lock().unwrap().push(name);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        // (1) Both CAs.
        let both = format!("{}{}", s.certs.ca.pem(), new_ca.pem());
        write_webhooks(&s.dir, &url, &both);
        wait_webhooks_loaded(s);
        std::thread::sleep(Duration::from_secs(1));
        // (2) The new certificate, reloaded by winadmit.
        let (cert, key, _) = new_ca.leaf("second");
        server::write_pair(s.certs.cert.parent().unwrap(), &cert, &key);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !webhook
            .server
            .all_logs()
            .contains("reloaded the TLS certificate")
        {
            assert!(
                Instant::now() < deadline,
                "winadmit did not reload its certificate in 30 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(1));
        // (3) The new CA alone.
        write_webhooks(&s.dir, &url, &new_ca.pem());
        wait_webhooks_loaded(s);
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
    });
    let failures = failures.into_inner().unwrap();
    let names = names.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} pods refused during the rotation: {failures:#?}",
        failures.len(),
        names.len()
    );
    assert!(names.len() > 10, "too few pods: {}", names.len());
    std::thread::sleep(Duration::from_secs(1));
    let last = names.last().unwrap();
    assert!(
        !webhook.reviews_of(last).is_empty(),
        "{last} was not judged by winadmit after the rotation"
    );
}

/// Held by the tests that create or delete admission objects through the
/// API, which would otherwise see each other's.
static API_OBJECTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Creates (server-side dry run) a Windows pod named `name` that needs a
/// change (runAsUser is removed) in `st-guard`, and counts the webhook's
/// calls for it: [/mutate, /validate].
fn calls(cp: &ControlPlane, webhook: &Webhook, name: &str) -> [usize; 2] {
    let pod = e2e::pod(
        GUARD_NS,
        name,
        json!({"nodeSelector": {"kubernetes.io/os": "windows"},
               "securityContext": {"runAsUser": 1000}}),
    );
    let (admitted, stderr) = create(cp, &pod);
    assert!(admitted, "{stderr}");
    // The log lines may trail the answer.
    std::thread::sleep(Duration::from_secs(1));
    let reviews = webhook.reviews_of(name);
    let count = |endpoint: &str| reviews.iter().filter(|r| r["endpoint"] == endpoint).count();
    [count("mutate"), count("validate")]
}

/// The fields two answers must share: the verdict, the rule ids denied
/// and warned about, the stored object, another refusal's text.
fn comparable(a: &Answer) -> Answer {
    Answer {
        stderr: String::new(),
        ..a.clone()
    }
}

fn compare(cp: &ControlPlane, label: &str, objects: &[(String, Value)]) {
    let threads = 3;
    let results: Vec<(String, Answer, Answer)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    objects
                        .iter()
                        .skip(t)
                        .step_by(threads)
                        .map(|(name, o)| {
                            (
                                name.clone(),
                                submit(cp, POLICY_NS, o),
                                submit(cp, OBJECTS_NS, o),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut report = String::new();
    let (mut differing, mut denied) = (0, 0);
    for (name, st, obj) in &results {
        denied += usize::from(!st.admitted);
        let (a, b) = (comparable(st), comparable(obj));
        if a != b {
            differing += 1;
            let _ = writeln!(
                report,
                "- {name}:\n    static  {a:?}\n    objects {b:?}\n    static stderr {}\n    objects stderr {}",
                st.stderr.trim(),
                obj.stderr.trim()
            );
        }
    }
    let mutated = results
        .iter()
        .filter(|(_, st, _)| {
            st.object.as_ref().is_some_and(|o| {
                o["metadata"]["annotations"]
                    .as_object()
                    .is_some_and(|a| a.keys().any(|k| k.starts_with("winadmit.io/removed.")))
            })
        })
        .count();
    eprintln!(
        "{label}: {} objects, {differing} differ; the static policies refused {denied} and changed {mutated}",
        results.len()
    );
    assert!(
        differing == 0,
        "{label}: the static policies and the API-object export differ on {differing} of {}:\n{report}",
        results.len()
    );
    assert!(
        denied > 0 && mutated > 0,
        "{label}: the comparison must cover refusals and changes"
    );
}

/// The API-object export, applied through the API, scoped to `st-objects`
/// (again each time: a test deletes every admission object), once in
/// force. The caller holds [`API_OBJECTS`].
fn api_object_export(cp: &ControlPlane) {
    {
        let out = binary::winadmit(&["admission-policy"]);
        assert!(out.status.success(), "{}", e2e::stderr(&out));
        let mut docs = e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap());
        e2e::scope_bindings(&mut docs, "objects");
        cp.apply(&e2e::to_list(&docs));
        // In force, the validating and the mutating policies (each takes
        // effect on its own): a Windows hostNetwork pod refused, and a
        // Windows pod's runAsUser removed, in st-objects.
        let mutate = e2e::pod(
            OBJECTS_NS,
            "probe-mutate",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostPID": true,
                   "securityContext": {"runAsUser": 1000}}),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (admitted, stderr) = create(cp, &windows_host_network(OBJECTS_NS, "probe"));
            let mutated = submit(cp, OBJECTS_NS, &mutate);
            let removed = mutated.object.as_ref().is_some_and(|o| {
                o["spec"]
                    .get("securityContext")
                    .is_none_or(|sc| sc.get("runAsUser").is_none())
            });
            if !admitted && stderr.contains("WIN-HOSTNETWORK") && removed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the API-object export did not take effect in 30 s: {stderr}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// The static policies alone refuse and change the generated workloads as
/// the API-object export does.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn static_policies_agree_with_the_api_object_export_on_generated_workloads() {
    let s = setup("static_policies_agree_with_the_api_object_export_on_generated_workloads");
    let _api_objects = API_OBJECTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    api_object_export(&s.cp);
    compare(&s.cp, "generated", &generated_objects());
}

/// The same on every workload of the corpus.
#[test]
#[cfg_attr(
    all(no_corpus, not(no_control_plane)),
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn static_policies_agree_with_the_api_object_export_on_the_corpus() {
    let test = "static_policies_agree_with_the_api_object_export_on_the_corpus";
    let dir = corpus_dir::corpus_dir(test);
    let s = setup(test);
    let _api_objects = API_OBJECTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    api_object_export(&s.cp);
    compare(&s.cp, "corpus", &corpus_objects(&dir));
}

/// A file written into a policy directory while the API server runs that
/// breaks a loader rule (a name without the reserved suffix) is refused at
/// reload, counted as a failure, and the previous configuration stays in
/// force; removed, the directory loads again.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_bad_file_at_reload_keeps_the_previous_configuration() {
    let s = setup("a_bad_file_at_reload_keeps_the_previous_configuration");
    let _files = POLICY_FILES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let failures = || {
        metric_lines(
            &s.cp,
            "apiserver_manifest_admission_config_controller_automatic_reloads_total",
        )
        .iter()
        .filter(|l| {
            l.contains("plugin=\"ValidatingAdmissionPolicy\"") && l.contains("status=\"failure\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
    };
    let before = failures();
    let dir = s.dir.join("validating-policies");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: no-suffix\nspec:\n  validations:\n  - expression: 'false'\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while failures() <= before {
        assert!(
            Instant::now() < deadline,
            "the bad file was not refused in 90 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (admitted, stderr) = create(&s.cp, &windows_host_network(POLICY_NS, "bad-file"));
    std::fs::remove_file(&bad).unwrap();
    assert!(!admitted, "the previous policies are gone: {stderr}");
    assert!(stderr.contains("winadmit-errors.static.k8s.io"), "{stderr}");
    // Removed, the directory (as it was) loads again.
    let hash = directory_hash(&dir);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !metric_lines(
        &s.cp,
        "apiserver_manifest_admission_config_controller_last_config_info",
    )
    .iter()
    .any(|l| l.contains("plugin=\"ValidatingAdmissionPolicy\"") && l.contains(&hash))
    {
        assert!(
            Instant::now() < deadline,
            "the directory did not load again"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
