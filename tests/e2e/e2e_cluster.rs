//! winadmit reading the cluster through a real kube-apiserver v1.37: the
//! serve cluster cache (Namespaces, RuntimeClasses, Windows Nodes) with the
//! ServiceAccount and RBAC of the rendered install, verdicts that follow
//! what the test creates and changes, a cache that survives an API server
//! restart, and the live `winadmit report`.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::e2e;

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary;
use controlplane::{Answer, ControlPlane};
use e2e::{Webhook, pod, stderr};

/// The install's RBAC objects (Namespace, ServiceAccount, ClusterRole,
/// ClusterRoleBinding) and the PolicyException CRD its cache watches,
/// applied as rendered.
fn apply_rbac(cp: &ControlPlane, objects: &[Value]) {
    let rbac: Vec<Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                e2e::kind(o),
                "Namespace"
                    | "ServiceAccount"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "CustomResourceDefinition"
            )
        })
        .cloned()
        .collect();
    assert_eq!(
        rbac.len(),
        5,
        "the install's RBAC objects and PolicyException CRD"
    );
    cp.apply(&e2e::to_list(&rbac));
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/policyexceptions.winadmit.io",
    ]);
}

struct Setup {
    cp: &'static ControlPlane,
    webhook: Webhook,
    /// Tests that change cluster-wide objects (Nodes, the API server) take
    /// turns.
    cluster_wide: Mutex<()>,
}

fn setup(test: &str) -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    let cp = controlplane::shared(test);
    SETUP.get_or_init(|| {
        let objects = e2e::rendered("base");
        apply_rbac(cp, &objects);
        let dir = tempfile::tempdir().unwrap().keep();
        let kubeconfig = cp.service_account_kubeconfig(&dir, "winadmit", "winadmit");
        let webhook = Webhook::start(
            &e2e::overlay_policy(&objects),
            &[
                "--cluster-cache",
                "on",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--log-level",
                "debug",
            ],
        )
        .adopted_by(cp);
        cp.apply(&e2e::to_list(&e2e::registrations(
            &objects, "cluster", &webhook,
        )));
        cp.namespace("cluster-probe", &[("winadmit-e2e", "cluster")]);
        e2e::wait_registered(cp, &webhook, "cluster-probe", 2);
        Setup {
            cp,
            webhook,
            cluster_wide: Mutex::new(()),
        }
    })
}

/// Retries `obj` until `done` holds for the answer (the cache follows the
/// cluster through a watch, a moment behind): 20 s at most.
fn eventually(
    cp: &ControlPlane,
    obj: &Value,
    what: &str,
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = cp.dry_run_create(obj);
        if done(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {answer:?} after 20 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn denied_for(answer: &Answer, rule: &str) -> bool {
    !answer.ok()
        && answer
            .message()
            .contains(r#"admission webhook "validate.winadmit.io" denied"#)
        && answer.message().contains(rule)
}

/// With the install's ServiceAccount and ClusterRole, every list and watch
/// of the cache is allowed: it lists Namespaces, RuntimeClasses and Nodes
/// and logs no failure.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_cache_runs_with_the_install_rbac() {
    let s = setup("the_cache_runs_with_the_install_rbac");
    // Not while another test restarts the API server (its authorizer
    // refuses everything for a moment after a start).
    let _turn = s.cluster_wide.lock().unwrap();
    let objects = e2e::rendered("base");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig =
        s.cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    for resource in ["namespaces", "runtimeclasses.node.k8s.io", "nodes"] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !webhook
            .server
            .logs_contain(&format!("cluster cache: {resource} listed"))
        {
            assert!(
                Instant::now() < deadline,
                "{resource} never listed: {}",
                webhook.server.all_logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let logs = webhook.server.all_logs();
    assert!(
        !logs.contains("forbidden") && !logs.contains("\"level\":\"WARN\""),
        "the cache failed with the install's RBAC:\n{logs}"
    );
}

/// The check above can fail: a ClusterRole without `watch` on Nodes is
/// logged as forbidden.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_missing_verb_is_logged_as_forbidden() {
    let s = setup("a_missing_verb_is_logged_as_forbidden");
    let mut objects = e2e::rendered("base");
    for o in &mut objects {
        let rename = |o: &mut Value| o["metadata"]["name"] = json!("winadmit-no-watch");
        match e2e::kind(o) {
            "ServiceAccount" => rename(o),
            "ClusterRole" => {
                rename(o);
                for rule in o["rules"].as_array_mut().unwrap() {
                    if rule["resources"] == json!(["nodes"]) {
                        rule["verbs"] = json!(["get", "list"]);
                    }
                }
            }
            "ClusterRoleBinding" => {
                rename(o);
                o["roleRef"]["name"] = json!("winadmit-no-watch");
                o["subjects"][0]["name"] = json!("winadmit-no-watch");
            }
            _ => {}
        }
    }
    apply_rbac(s.cp, &objects);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig =
        s.cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit-no-watch");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(webhook.server.logs_contain("forbidden") && webhook.server.logs_contain("nodes")) {
        assert!(
            Instant::now() < deadline,
            "no forbidden watch logged: {}",
            webhook.server.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The namespace label `winadmit.io/mode` applies as soon as it changes:
/// `warn` admits with warnings, `enforce` denies.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_namespace_mode_label_follows_the_cluster() {
    let s = setup("the_namespace_mode_label_follows_the_cluster");
    let ns = "cluster-mode";
    s.cp.namespace(
        ns,
        &[("winadmit-e2e", "cluster"), ("winadmit.io/mode", "warn")],
    );
    let obj = pod(
        ns,
        "hostnet",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    );
    let answer = eventually(s.cp, &obj, "mode warn", Answer::ok);
    assert!(
        answer
            .warnings
            .iter()
            .any(|w| w.contains("WIN-HOSTNETWORK")),
        "{answer:?}"
    );
    s.cp.kubectl_ok(&[
        "label",
        "namespace",
        ns,
        "winadmit.io/mode=enforce",
        "--overwrite",
    ]);
    eventually(s.cp, &obj, "mode enforce", |a| {
        denied_for(a, "WIN-HOSTNETWORK")
    });
}

/// A RuntimeClass that pins Windows (its scheduling.nodeSelector) makes a
/// Deployment that names it a Windows workload, once the cache has it.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_windows_runtime_class_follows_the_cluster() {
    let s = setup("a_windows_runtime_class_follows_the_cluster");
    let ns = "cluster-rc";
    s.cp.namespace(ns, &[("winadmit-e2e", "cluster")]);
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "iis", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "iis"}},
            "template": {
                "metadata": {"labels": {"app": "iis"}},
                "spec": {
                    "runtimeClassName": "windows-2022",
                    "hostNetwork": true,
                    "containers": [{"name": "app", "image": "contoso/app:1.0"}]
                }
            }
        }
    });
    let answer = s.cp.dry_run_create(&deploy);
    assert!(answer.ok(), "no such RuntimeClass yet: {answer:?}");
    s.cp.apply(
        &json!({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "windows-2022"},
            "handler": "runhcs-wcow-process",
            "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows"}}
        })
        .to_string(),
    );
    eventually(s.cp, &deploy, "RuntimeClass created", |a| {
        denied_for(a, "WIN-HOSTNETWORK")
    });
}

/// A Windows node's kubelet version decides version-dependent verdicts:
/// sysctls are refused by the Windows kubelet from 1.27 (an error), and
/// only ignored by a 1.26 kubelet (a warning). The verdict follows the node
/// as it is created and deleted, and the cache keeps following after the
/// API server restarts.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn windows_nodes_and_an_api_server_restart() {
    let s = setup("windows_nodes_and_an_api_server_restart");
    let _turn = s.cluster_wide.lock().unwrap();
    let ns = "cluster-nodes";
    s.cp.namespace(ns, &[("winadmit-e2e", "cluster")]);
    let obj = pod(
        ns,
        "sysctls",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"},
               "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}}),
    );
    eventually(s.cp, &obj, "no Windows node: 1.37", |a| {
        denied_for(a, "WIN-SYSCTLS")
    });

    let node = |name: &str, kubelet: &str| {
        s.cp.apply(
            &json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/os": "windows"}}})
            .to_string(),
        );
        let status = json!({"nodeInfo": {
            "kubeletVersion": kubelet, "containerRuntimeVersion": "containerd://1.7.20",
            "kubeProxyVersion": "", "operatingSystem": "windows", "architecture": "amd64",
            "osImage": "Windows Server 2022 Datacenter", "kernelVersion": "10.0.20348.2527",
            "machineID": "", "systemUUID": "", "bootID": ""
        }});
        s.cp.set_node_status(name, &status);
    };
    node("akswin-old", "v1.26.3");
    let answer = eventually(s.cp, &obj, "a 1.26 Windows node", Answer::ok);
    assert!(
        answer.warnings.iter().any(|w| w.contains("WIN-SYSCTLS")),
        "{answer:?}"
    );

    s.cp.restart_apiserver();
    s.cp.kubectl_ok(&["delete", "node", "akswin-old"]);
    eventually(s.cp, &obj, "node deleted after a restart", |a| {
        denied_for(a, "WIN-SYSCTLS")
    });
    node("akswin-old-2", "v1.26.3");
    eventually(s.cp, &obj, "node created after a restart", Answer::ok);
    s.cp.kubectl_ok(&["delete", "node", "akswin-old-2"]);
    // The restart broke the watches; they resumed from a resource version
    // the new API server no longer has (410 Gone) and listed again.
    let logs = s.webhook.server.all_logs();
    assert!(
        logs.contains("expired (too old resource version")
            && logs.contains("listed after earlier failures"),
        "no relist after the restart:\n{logs}"
    );
    eventually(s.cp, &obj, "node deleted", |a| denied_for(a, "WIN-SYSCTLS"));
}

/// The live `winadmit report` against the API server: the workloads of a
/// namespace, each with the verdict the webhook gives.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn live_report_lists_the_cluster_with_the_webhooks_verdicts() {
    let s = setup("live_report_lists_the_cluster_with_the_webhooks_verdicts");
    // Stored without the webhooks (no setup label), as before an install.
    let ns = "cluster-report";
    s.cp.namespace(ns, &[]);
    let spec = |extra: Value| {
        let mut spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "app", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
                            "resources": {"limits": {"memory": "1Gi"}}}]});
        e2e_merge(&mut spec, &extra);
        spec
    };
    for (name, extra) in [
        ("clean", json!({})),
        ("hostnet", json!({"hostNetwork": true})),
        (
            "privileged",
            json!({"containers": [{"name": "app", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022", "securityContext": {"privileged": true}, "resources": {"limits": {"memory": "1Gi"}}}]}),
        ),
    ] {
        let out = e2e::create(
            s.cp,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}}, "spec": spec(extra)}}}),
            false,
        );
        assert!(out.status.success(), "{name}: {}", stderr(&out));
    }
    let out = binary::winadmit(&[
        "report",
        "--kubeconfig",
        s.cp.kubeconfig.to_str().unwrap(),
        "-n",
        ns,
        "--mode",
        "enforce",
        "--format",
        "json",
    ]);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "winadmit report: {}",
        stderr(&out)
    );
    // This cluster has no GMSACredentialSpec CRD: said once, nothing fails.
    assert!(
        stderr(&out).contains("does not serve gmsacredentialspecs.windows.k8s.io/v1"),
        "{}",
        stderr(&out)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<(String, String)> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_owned(),
                o["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("clean".to_owned(), "allow".to_owned()),
            ("hostnet".to_owned(), "deny".to_owned()),
            ("privileged".to_owned(), "warn".to_owned()),
        ],
        "{report:#}"
    );
}

/// JSON merge (objects merge, everything else replaces).
fn e2e_merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                e2e_merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// Deletes the named nodes when dropped, so that a failed test leaves the
/// shared control plane as the other tests expect it.
struct NodesCreated<'a>(&'a ControlPlane, Vec<&'static str>);

impl Drop for NodesCreated<'_> {
    fn drop(&mut self) {
        for name in &self.1 {
            self.0.kubectl(&["delete", "node", name, "--wait=false"]);
        }
    }
}

/// A Node with `labels`, whose kubelet reports `os` in its status.
fn node_reporting(cp: &ControlPlane, name: &str, labels: &Value, os: &str) {
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels}})
        .to_string(),
    );
    let status = json!({"nodeInfo": {
        "kubeletVersion": "v1.37.2", "containerRuntimeVersion": "containerd://2.2.1",
        "kubeProxyVersion": "", "operatingSystem": os, "architecture": "amd64",
        "osImage": "", "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""
    }});
    cp.set_node_status(name, &status);
}

/// A Linux node relabelled `kubernetes.io/os=windows` (its kubelet still
/// reports `operatingSystem: linux`) is no Windows node: a Linux pod bound
/// to it keeps its `runAsUser` and `runAsGroup` and gets no Windows node
/// selector, while a pod bound to a true Windows node does; the cache
/// logs the node.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_linux_node_labelled_windows_is_no_windows_node() {
    let s = setup("a_linux_node_labelled_windows_is_no_windows_node");
    let _turn = s.cluster_wide.lock().unwrap();
    let _nodes = NodesCreated(s.cp, vec!["relabelled-1", "win-real-1"]);
    let ns = "cluster-relabelled";
    s.cp.namespace(ns, &[("winadmit-e2e", "cluster")]);
    let windows = json!({"kubernetes.io/os": "windows"});
    node_reporting(s.cp, "relabelled-1", &windows, "linux");
    node_reporting(s.cp, "win-real-1", &windows, "windows");
    let bound = |name: &str, node: &str| {
        pod(
            ns,
            name,
            json!({"nodeName": node, "containers": [{"name": "app", "image": "registry.example/app:1",
                   "securityContext": {"runAsUser": 1000, "runAsGroup": 1000}}]}),
        )
    };
    // Watch events come in order: once the later node is known, so is the
    // relabelled one with its status.
    eventually(
        s.cp,
        &bound("real", "win-real-1"),
        "the Windows node",
        |a| a.ok() && a.body["spec"]["nodeSelector"]["kubernetes.io/os"] == "windows",
    );
    let answer = s.cp.dry_run_create(&bound("relabelled", "relabelled-1"));
    assert!(answer.ok(), "{answer:?}");
    assert_eq!(answer.body["spec"].get("nodeSelector"), None, "{answer:?}");
    let sc = &answer.body["spec"]["containers"][0]["securityContext"];
    assert_eq!(
        (sc["runAsUser"].as_i64(), sc["runAsGroup"].as_i64()),
        (Some(1000), Some(1000)),
        "{answer:?}"
    );
    let logs = s.webhook.server.all_logs();
    assert!(
        logs.contains("relabelled-1 is labelled kubernetes.io/os=windows but its kubelet reports operatingSystem linux"),
        "{logs}"
    );
}

/// A pod bound by `spec.nodeName` to a node the cluster does not have is
/// judged without the node's OS and admitted by default; with
/// `WIN-NODE-NAME-UNKNOWN: error` in the policy it is refused, and a pod
/// bound to a node that exists is still admitted.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_pod_bound_to_an_unknown_node_is_refused_when_the_policy_says_so() {
    let s = setup("a_pod_bound_to_an_unknown_node_is_refused_when_the_policy_says_so");
    let _turn = s.cluster_wide.lock().unwrap();
    let _nodes = NodesCreated(s.cp, vec!["known-linux-1"]);
    node_reporting(
        s.cp,
        "known-linux-1",
        &json!({"kubernetes.io/os": "linux"}),
        "linux",
    );
    let objects = e2e::rendered("base");
    let dir = tempfile::tempdir().unwrap();
    let strict = dir.path().join("strict.yaml");
    std::fs::write(&strict, "rules:\n  WIN-NODE-NAME-UNKNOWN: error\n").unwrap();
    let kubeconfig =
        s.cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit");
    let strict_webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--policy",
            strict.to_str().unwrap(),
        ],
    );
    let registrations = e2e::registrations(&objects, "unknown-node", &strict_webhook);
    s.cp.apply(&e2e::to_list(&registrations));
    let strict_ns = "cluster-unknown-node";
    s.cp.namespace(strict_ns, &[("winadmit-e2e", "unknown-node")]);
    e2e::wait_registered(s.cp, &strict_webhook, strict_ns, 2);
    let default_ns = "cluster-unknown-node-default";
    s.cp.namespace(default_ns, &[("winadmit-e2e", "cluster")]);
    let bound = |ns: &str, node: &str| {
        pod(
            ns,
            "bound",
            json!({"nodeName": node, "containers": [{"name": "app", "image": "registry.example/app:1"}]}),
        )
    };
    eventually(s.cp, &bound(strict_ns, "win-7"), "the strict policy", |a| {
        denied_for(a, "WIN-NODE-NAME-UNKNOWN")
    });
    eventually(
        s.cp,
        &bound(strict_ns, "known-linux-1"),
        "a node that exists",
        Answer::ok,
    );
    let default = s.cp.dry_run_create(&bound(default_ns, "win-7"));
    assert!(default.ok(), "the default policy: {default:?}");
    for r in &registrations {
        s.cp.kubectl(&[
            "delete",
            &e2e::kind(r).to_lowercase(),
            r["metadata"]["name"].as_str().unwrap(),
        ]);
    }
}

/// The README's PolicyReport pipe, under `set -o pipefail`, on an API
/// server of its own: without the wgpolicyk8s.io CRDs `kubectl apply`
/// says `no matches for kind "PolicyReport"`; with the chart's copies
/// applied (as the README says) the pipe works with `--fail-on never`, and
/// fails without it when the report finds errors, although `kubectl apply`
/// succeeded.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn readme_policyreport_pipe_needs_the_crds_and_fail_on_never() {
    let test = "readme_policyreport_pipe_needs_the_crds_and_fail_on_never";
    let cp = ControlPlane::start(&controlplane::binaries(test));
    cp.namespace("shop", &[]);
    let dir = tempfile::tempdir().unwrap();
    let denied = pod(
        "shop",
        "iis",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    );
    let file = dir.path().join("pods.json");
    std::fs::write(&file, denied.to_string()).unwrap();
    let pipe = |fail_on: &str| {
        let script = format!(
            "set -o pipefail; {bin} report --from-file {file} --format policyreport {fail_on} | {kubectl} --kubeconfig {kubeconfig} apply -f -",
            bin = binary::BIN,
            file = file.display(),
            kubectl = cp.bin.join("kubectl").display(),
            kubeconfig = cp.kubeconfig.display(),
        );
        std::process::Command::new("bash")
            .args(["-c", &script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };

    let out = pipe("--fail-on never");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no matches for kind \"PolicyReport\""),
        "{}",
        stderr(&out)
    );

    let crds = ["policyreports", "clusterpolicyreports"]
        .map(|k| format!("charts/winadmit/files/crds/wgpolicyk8s.io_{k}.yaml"));
    let out = cp
        .kubectl_cmd()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["apply", "-f", &crds[0], "-f", &crds[1]])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/policyreports.wgpolicyk8s.io",
        "--timeout=30s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    let out = pipe("--fail-on never");
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = cp.kubectl_ok(&[
        "get",
        "policyreports.wgpolicyk8s.io",
        "-n",
        "shop",
        "-o",
        "json",
    ]);
    assert!(reports.contains("WIN-HOSTNETWORK"), "{reports}");

    // Without it: kubectl apply succeeds, the report's exit 1 fails the pipe.
    let out = pipe("");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("unchanged")
            || String::from_utf8_lossy(&out.stdout).contains("configured"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
