//! `winadmit report` against a live cluster: the real binary, the real
//! kube-rs client, TLS and pagination, against a local HTTPS process that
//! answers the list API from recorded list responses.

use crate::report_support;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use report_support::fake_api::{Behaviour, FakeApi, TOKEN, kubeconfig_for};
use serde_json::{Value, json};

fn winadmit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// (kind, namespace/name, verdict, rules at fields): what must agree
/// between the live and the file report.
fn essentials(report: &Value) -> BTreeSet<String> {
    report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            // A file's findings come in file order, the cluster's in rule
            // order: compare them as sets.
            let mut findings: Vec<String> = o["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    format!(
                        "{}@{}",
                        f["rule"].as_str().unwrap(),
                        f["field"].as_str().unwrap()
                    )
                })
                .collect();
            findings.sort();
            format!(
                "{} {}/{} {} {}",
                o["kind"].as_str().unwrap(),
                o["namespace"].as_str().unwrap_or("-"),
                o["name"].as_str().unwrap(),
                o["verdict"].as_str().unwrap(),
                findings.join(",")
            )
        })
        .collect()
}

#[test]
fn lists_every_workload_kind_page_by_page_and_folds_owned_pods() {
    let api = FakeApi::start(Behaviour::default());
    let dir = tempfile::tempdir().unwrap();
    let kc = api.kubeconfig(dir.path(), TOKEN);
    let out = winadmit(&[
        "report",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--format",
        "json",
        "--page-size",
        "2",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "findings exit 1; stderr: {stderr}\nstdout: {}",
        text(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    // Every resource was listed in pages of 2, following continue tokens.
    let requests = api.requests();
    for path in [
        "/apis/batch/v1/cronjobs",
        "/apis/apps/v1/deployments",
        "/apis/batch/v1/jobs",
        "/apis/apps/v1/replicasets",
        "/apis/apps/v1/statefulsets",
        "/apis/apps/v1/daemonsets",
        "/api/v1/replicationcontrollers",
        "/api/v1/pods",
    ] {
        assert!(
            requests
                .iter()
                .any(|r| r.starts_with(&format!("{path}?")) && r.contains("limit=2")),
            "{path} not listed with limit=2: {requests:#?}"
        );
    }
    let pod_pages = requests
        .iter()
        .filter(|r| r.starts_with("/api/v1/pods?") && r.contains("limit=2"))
        .count();
    // 7 pods in pages of 2: 4 pages (plus the access check with limit=1).
    assert_eq!(pod_pages, 4, "{requests:#?}");
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/api/v1/pods?") && r.contains("continue="))
    );
    assert!(
        stderr.contains("pods in all namespaces: 7 listed in 4 page(s)"),
        "{stderr}"
    );

    let s = &report["summary"];
    // The facts behind the verdicts: the cluster's Windows node.
    assert_eq!(s["target"]["kubernetesVersion"], "1.31", "{s}");
    assert_eq!(
        s["target"]["containerRuntimeFrom"],
        json!({"from": "node", "detail": "akswin000000"}),
        "{s}"
    );
    assert_eq!(s["objects"], 14);
    assert_eq!(s["folded"], 8, "{s}");
    assert_eq!(s["reported"], 6);
    let names = essentials(&report);
    let expected = [
        // The namespace's mode label (`winadmit.io/mode: warn`) turns the deny into a warn.
        // (WIN-MEMORY-LIMITS: Windows containers should set memory limits equal to requests.)
        "Deployment web/iis warn WIN-PRIVILEGED@spec.template.spec.containers[0].securityContext.privileged,WIN-MEMORY-LIMITS@spec.template.spec.containers[0].resources.requests[memory]",
        // `kubectl debug` added a privileged ephemeral container: reported apart from its ReplicaSet.
        "Pod web/iis-7b9f6c5d8-tz7m2 warn WIN-PRIVILEGED@spec.containers[0].securityContext.privileged,WIN-PRIVILEGED@spec.ephemeralContainers[0].securityContext.privileged,WIN-RUNASUSER@spec.ephemeralContainers[0].securityContext.runAsUser,WIN-MEMORY-LIMITS@spec.containers[0].resources.requests[memory]",
        // Windows by its RuntimeClass (listed from node.k8s.io).
        "CronJob batch/nightly warn WIN-MEMORY-LIMITS@spec.jobTemplate.spec.template.spec.containers[0].resources",
        "Pod ops/win-probe deny WIN-HOSTNETWORK@spec.hostNetwork,WIN-MEMORY-LIMITS@spec.containers[0].resources",
        "DaemonSet kube-system/kube-proxy-windows allow WIN-MEMORY-LIMITS@spec.template.spec.containers[0].resources",
        "Deployment shop/shop-frontend allow ",
    ];
    // Findings sorted, as `essentials` sorts them.
    let expected: BTreeSet<String> = expected
        .iter()
        .map(|s| {
            let (head, findings) = s.rsplit_once(' ').unwrap();
            let mut findings: Vec<&str> = findings.split(',').collect();
            findings.sort_unstable();
            format!("{head} {}", findings.join(","))
        })
        .collect();
    assert_eq!(names, expected);
    let differing = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "iis-7b9f6c5d8-tz7m2")
        .unwrap();
    assert_eq!(differing["owner"], "ReplicaSet/iis-7b9f6c5d8");
    let probe = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "win-probe")
        .unwrap();
    assert_eq!(
        probe["targetReason"],
        "nodeSelector kubernetes.io/os=windows"
    );
    assert_eq!(probe["findings"][0]["file"], "<cluster>");
    assert_eq!(probe["findings"][0]["line"], 0);

    // The same objects from `kubectl get ... -A -o json` give the same report.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/report/kubectl-get-all.json"
    );
    let from_file = winadmit(&["report", "--from-file", file, "--format", "json"]);
    let file_report: Value = serde_json::from_slice(&from_file.stdout).unwrap();
    assert_eq!(essentials(&file_report), names);
}

#[test]
fn namespaces_narrow_the_list_calls() {
    let api = FakeApi::start(Behaviour::default());
    let dir = tempfile::tempdir().unwrap();
    let kc = api.kubeconfig(dir.path(), TOKEN);
    let out = winadmit(&[
        "report",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--context",
        "fake",
        "-n",
        "web",
        "-n",
        "ops",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/apis/apps/v1/namespaces/web/deployments?"))
    );
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/api/v1/namespaces/ops/pods?"))
    );
    assert!(!requests.iter().any(|r| r.starts_with("/api/v1/pods?")));
    let namespaces: BTreeSet<&str> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, BTreeSet::from(["ops", "web"]));
}

#[test]
fn a_refused_list_names_the_verb_and_resource() {
    let api = FakeApi::start(Behaviour {
        forbid: Some("deployments"),
        ..Behaviour::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let kc = api.kubeconfig(dir.path(), TOKEN);
    let out = winadmit(&["report", "--kubeconfig", kc.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("forbidden: cannot list deployments.apps in all namespaces"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot list resource \"deployments\" in API group \"apps\""),
        "{stderr}"
    );
    // Access is checked before any output is written.
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn bad_credentials_and_unreachable_servers_are_clear_errors() {
    let api = FakeApi::start(Behaviour::default());
    let dir = tempfile::tempdir().unwrap();
    let kc = api.kubeconfig(dir.path(), "wrong-token");
    let out = winadmit(&["report", "--kubeconfig", kc.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unauthorized:") && stderr.contains("list cronjobs.batch"),
        "{stderr}"
    );

    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let kc = kubeconfig_for(dir.path(), &format!("https://{closed}"), &api.ca_pem, TOKEN);
    let out = winadmit(&["report", "--kubeconfig", kc.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the Kubernetes API server at https://{closed}"
        )),
        "{stderr}"
    );

    let out = winadmit(&["report", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(2));
    // Said once, the path without doubled quotes, the cause once.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot read kubeconfig /nonexistent/kubeconfig: ")
            && stderr.matches("/nonexistent/kubeconfig").count() == 1
            && stderr.matches("os error 2").count() == 1
            && !stderr.contains("'\""),
        "{stderr}"
    );
    // No kubeconfig anywhere: where it was looked for, once.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .arg("report")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("WINADMIT_KUBECONFIG")
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let config = format!("{}/.kube/config", home.path().display());
    assert!(
        stderr.contains("no cluster configuration found")
            && stderr.matches(config.as_str()).count() == 1
            && stderr.matches("os error 2").count() == 1
            && !stderr.contains("'\""),
        "{stderr}"
    );
}

/// Custom resources with a pod template are listed when the cluster serves
/// them (found through discovery), before the built-in kinds so their
/// ReplicaSets and Pods fold into them; groups the cluster does not serve
/// (KEDA here) are skipped without a word. Kinds a policy declares are
/// listed the same way.
#[test]
fn lists_the_custom_resources_the_cluster_serves() {
    let api = FakeApi::start(Behaviour {
        fixtures: Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/live-crd"),
        ),
        ..Behaviour::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let kc = api.kubeconfig(dir.path(), TOKEN);
    let policy = format!(
        "{}/tests/fixtures/crd/policy-agones.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = winadmit(&[
        "report",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--policy",
        &policy,
        "--format",
        "json",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = api.requests();
    for path in [
        "/apis/argoproj.io/v1alpha1/rollouts?",
        "/apis/apps.kruise.io/v1beta1/clonesets?",
        "/apis/apps.kruise.io/v1beta1/statefulsets?",
        "/apis/agones.dev/v1/gameservers?",
        "/apis/apps/v1/statefulsets?",
    ] {
        assert!(
            requests.iter().any(|r| r.starts_with(path)),
            "{path} not listed: {requests:#?}"
        );
    }
    assert!(
        requests.iter().any(|r| r == "/apis/keda.sh"),
        "{requests:#?}"
    );
    assert!(
        !requests.iter().any(|r| r.contains("scaledjobs")),
        "KEDA is not served: {requests:#?}"
    );
    assert!(
        !stderr.contains("keda") && !stderr.contains("error"),
        "{stderr}"
    );
    assert!(stderr.contains("rollouts.argoproj.io"), "{stderr}");

    let names = essentials(&report);
    let expected: BTreeSet<String> = [
        "Rollout shop/win-web deny WIN-HOSTNETWORK@spec.template.spec.hostNetwork",
        "CloneSet shop/win-sample deny WIN-HOSTNETWORK@spec.template.spec.hostNetwork",
        "StatefulSet shop/db allow ",
        "GameServer games/win-game deny WIN-HOSTNETWORK@spec.template.spec.hostNetwork",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(names, expected, "{report:#}");
    // The Rollout's ReplicaSet says nothing the Rollout does not: folded.
    assert_eq!(report["summary"]["folded"], 1, "{report:#}");
    let db = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "db")
        .unwrap();
    assert_eq!(db["apiVersion"], "apps.kruise.io/v1beta1");
}
