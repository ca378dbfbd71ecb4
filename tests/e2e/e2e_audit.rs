//! `winadmit audit` against a real kube-apiserver v1.37 (tests/apiserver/)
//! with the report CRDs the chart ships (charts/winadmit/files/crds/, as
//! their projects publish them): workloads created before the audit
//! starts appear in openreports.io Reports with rule, field path, message
//! and fix, and leave them when fixed or deleted; a policy change and a
//! Windows node change (Node objects created and relabelled directly) are
//! reflected without a restart; the gauges equal the reports' counts; two
//! replicas with leader election never both write; killing the leader
//! loses nothing.
//!
//! Every audit watches the whole cluster and writes the cluster report, so
//! the tests take turns (`ONE_AT_A_TIME`).
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::audit;
use crate::controlplane;

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use audit::{Audit, BIN, has, pairs, results};
use controlplane::ControlPlane;

/// How long a report may take to follow a change in these tests (an
/// audit pass every 200 ms; a bound, not a measurement).
const FOLLOW: Duration = Duration::from_secs(30);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The control plane with the report CRDs installed.
fn cluster() -> &'static ControlPlane {
    let cp = controlplane::shared("e2e_audit");
    audit::install_report_crds(cp);
    cp
}

fn windows_deployment(ns: &str, name: &str, image: &str, privileged: bool) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
                "containers": [{"name": "app", "image": image,
                    "securityContext": {"privileged": privileged}}]}}}
    })
}

fn node(name: &str, build: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/os": "windows",
            "node.kubernetes.io/windows-build": build}}
    })
}

const LTSC2019: &str = "mcr.microsoft.com/windows/servercore:ltsc2019";
const LTSC2022: &str = "mcr.microsoft.com/windows/servercore:ltsc2022";

/// Waits until `ns`'s results satisfy `ok`.
fn wait_results(
    cp: &ControlPlane,
    audit: &Audit,
    ns: &str,
    what: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + FOLLOW;
    loop {
        let r = results(cp, ns);
        if let Some(r) = &r
            && ok(r)
        {
            return r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not in the reports of {ns} within {FOLLOW:?}; results: {:?}\naudit log:\n{}",
            r.as_deref().map(pairs),
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn reports_follow_workloads_policy_and_windows_nodes() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-follow";
    cp.namespace(ns, &[]);
    cp.apply(&node("audit-win-1", "10.0.20348").to_string());
    // Before the audit starts.
    for d in [
        windows_deployment(ns, "privileged", LTSC2022, true),
        windows_deployment(ns, "old-image", LTSC2019, false),
        windows_deployment(ns, "clean", LTSC2022, false),
    ] {
        cp.apply(&d.to_string());
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let audit = Audit::start(cp, &policy, &[]);

    let first = wait_results(
        cp,
        &audit,
        ns,
        "the workloads created before the audit",
        |r| has(r, "privileged", "WIN-PRIVILEGED") && has(r, "old-image", "WIN-BUILD-NO-NODE"),
    );
    assert!(
        !pairs(&first).iter().any(|(w, _)| w == "clean"),
        "{:?}",
        pairs(&first)
    );
    for r in &first {
        assert!(matches!(r["result"].as_str(), Some("fail" | "warn")), "{r}");
        assert_eq!(r["resources"][0]["kind"], "Deployment", "{r}");
        assert!(
            r["properties"]["field"]
                .as_str()
                .unwrap()
                .starts_with("spec.template.spec."),
            "{r}"
        );
        assert!(
            !r["properties"]["fix"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{r}"
        );
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .contains(r["properties"]["field"].as_str().unwrap()),
            "{r}"
        );
    }
    // A cluster report sums the namespaces'.
    let cluster_report: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "clusterreports.openreports.io",
        "winadmit-cluster",
        "-o",
        "json",
    ]))
    .unwrap();
    assert!(
        cluster_report["summary"]["fail"].as_u64().unwrap()
            + cluster_report["summary"]["warn"].as_u64().unwrap()
            >= first.len() as u64
    );

    // The gauges equal the reports' counts.
    gauges_equal_reports(cp, &audit, ns);

    // Fixed: the object's own update.
    cp.apply(&windows_deployment(ns, "privileged", LTSC2022, false).to_string());
    wait_results(cp, &audit, ns, "the fixed workload gone", |r| {
        !has(r, "privileged", "WIN-PRIVILEGED")
    });

    // A Windows node of the old build joins: the old image can run.
    cp.apply(&node("audit-win-2019", "10.0.17763").to_string());
    wait_results(cp, &audit, ns, "the node added", |r| {
        !has(r, "old-image", "WIN-BUILD-NO-NODE")
    });
    // Relabelled to the new build: it cannot again.
    cp.kubectl_ok(&[
        "label",
        "node",
        "audit-win-2019",
        "node.kubernetes.io/windows-build=10.0.20348",
        "--overwrite",
    ]);
    wait_results(cp, &audit, ns, "the node relabelled", |r| {
        has(r, "old-image", "WIN-BUILD-NO-NODE")
    });
    // Removed and added back with the old build, then removed: as before.
    cp.apply(&node("audit-win-2019", "10.0.17763").to_string());
    wait_results(cp, &audit, ns, "the node with the old build", |r| {
        !has(r, "old-image", "WIN-BUILD-NO-NODE")
    });
    cp.kubectl_ok(&["delete", "node", "audit-win-2019"]);
    wait_results(cp, &audit, ns, "the node removed", |r| {
        has(r, "old-image", "WIN-BUILD-NO-NODE")
    });

    // A taint on every Windows node: a workload without its toleration
    // cannot be scheduled; the taint removed, it can again.
    cp.kubectl_ok(&["taint", "node", "audit-win-1", "os=windows:NoSchedule"]);
    wait_results(cp, &audit, ns, "the Windows nodes tainted", |r| {
        has(r, "clean", "WIN-TAINT-TOLERATION")
    });
    cp.kubectl_ok(&["taint", "node", "audit-win-1", "os=windows:NoSchedule-"]);
    wait_results(cp, &audit, ns, "the taint removed", |r| {
        !has(r, "clean", "WIN-TAINT-TOLERATION")
    });

    // A policy change, without a restart.
    cp.apply(&windows_deployment(ns, "privileged", LTSC2022, true).to_string());
    wait_results(cp, &audit, ns, "privileged again", |r| {
        has(r, "privileged", "WIN-PRIVILEGED")
    });
    std::fs::write(
        &policy,
        "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nrules:\n  WIN-PRIVILEGED: off\n",
    )
    .unwrap();
    wait_results(cp, &audit, ns, "the rule turned off", |r| {
        !has(r, "privileged", "WIN-PRIVILEGED")
    });
    std::fs::write(
        &policy,
        "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nrules:\n  WIN-PRIVILEGED: error\n",
    )
    .unwrap();
    let r = wait_results(cp, &audit, ns, "the rule back as an error", |r| {
        has(r, "privileged", "WIN-PRIVILEGED")
    });
    let privileged = r.iter().find(|x| x["rule"] == "WIN-PRIVILEGED").unwrap();
    assert_eq!(privileged["result"], "fail", "{privileged}");

    // Deleted: its results go; the last workload deleted, the report goes.
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "old-image"]);
    wait_results(cp, &audit, ns, "the deleted workload gone", |r| {
        !pairs(r).iter().any(|(w, _)| w == "old-image")
    });
    gauges_equal_reports(cp, &audit, ns);
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "privileged", "clean"]);
    let deadline = Instant::now() + FOLLOW;
    while results(cp, ns).is_some() {
        assert!(
            Instant::now() < deadline,
            "reports of {ns} left after its workloads were deleted:\n{}",
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cp.kubectl_ok(&["delete", "node", "audit-win-1"]);
}

/// `winadmit_audit_findings` of `ns` by (rule, level) equals the reports'
/// results, once the audit has nothing pending.
fn gauges_equal_reports(cp: &ControlPlane, audit: &Audit, ns: &str) {
    let deadline = Instant::now() + FOLLOW;
    loop {
        let reports = results(cp, ns).unwrap_or_default();
        let mut from_reports: Vec<(String, String)> = reports
            .iter()
            .map(|r| {
                let level = if r["result"] == "fail" {
                    "error"
                } else {
                    "warning"
                };
                (r["rule"].as_str().unwrap().to_owned(), level.to_owned())
            })
            .collect();
        from_reports.sort();
        let mut from_gauges: Vec<(String, String)> = Vec::new();
        for (k, v) in audit.metrics() {
            if !k.starts_with("winadmit_audit_findings{")
                || !k.contains(&format!("namespace=\"{ns}\""))
            {
                continue;
            }
            let label = |name: &str| {
                let start = k.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                k[start..].split('"').next().unwrap().to_owned()
            };
            for _ in 0..(v as usize) {
                from_gauges.push((label("rule"), label("level")));
            }
        }
        from_gauges.sort();
        if !from_reports.is_empty() && from_reports == from_gauges {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "gauges {from_gauges:?} != reports {from_reports:?}\n{}",
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The Lease's holder.
fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let out = cp.kubectl(&[
        "get",
        "lease",
        "-n",
        ns,
        "winadmit-audit",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    let h = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !h.is_empty()).then_some(h)
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn one_writer_among_replicas_and_a_killed_leader_loses_nothing() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-lease";
    cp.namespace(ns, &[]);
    cp.apply(&windows_deployment(ns, "first", LTSC2022, true).to_string());
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let lease = [
        "--leader-election",
        "--lease-namespace",
        ns,
        "--lease-duration",
        "4s",
    ];
    let mut a = Audit::start(
        cp,
        &policy,
        &[&lease[..], &["--lease-identity", "replica-a"]].concat(),
    );
    let mut b = Audit::start(
        cp,
        &policy,
        &[&lease[..], &["--lease-identity", "replica-b"]].concat(),
    );
    wait_results(cp, &a, ns, "the first workload", |r| {
        has(r, "first", "WIN-PRIVILEGED")
    });
    let leader = holder(cp, ns).expect("a Lease holder");
    // While both run, only the holder writes; sampled over a few passes
    // with a change to write in between.
    cp.apply(&windows_deployment(ns, "second", LTSC2022, true).to_string());
    wait_results(cp, &a, ns, "the second workload", |r| {
        has(r, "second", "WIN-PRIVILEGED")
    });
    for _ in 0..10 {
        let leading = a.metric("winadmit_audit_leader") + b.metric("winadmit_audit_leader");
        assert!(
            leading <= 1.0,
            "both replicas lead\nA:\n{}\nB:\n{}",
            a.logs(),
            b.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (writer, standby) = if leader == "replica-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    let writes = |x: &Audit| x.metric("winadmit_audit_report_writes_total");
    assert!(
        writes(writer) > 0.0,
        "the leader wrote nothing:\n{}",
        writer.logs()
    );
    assert_eq!(
        writes(standby),
        0.0,
        "the standby wrote:\n{}",
        standby.logs()
    );

    // Killed mid-work: changes made while no one leads are not lost.
    writer.kill();
    cp.apply(&windows_deployment(ns, "third", LTSC2022, true).to_string());
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "first"]);
    wait_results(
        cp,
        standby,
        ns,
        "the changes after the leader was killed",
        |r| {
            has(r, "third", "WIN-PRIVILEGED")
                && has(r, "second", "WIN-PRIVILEGED")
                && !pairs(r).iter().any(|(w, _)| w == "first")
        },
    );
    assert_eq!(
        holder(cp, ns).as_deref(),
        Some(if leader == "replica-a" {
            "replica-b"
        } else {
            "replica-a"
        })
    );
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "second", "third"]);
}

/// `winadmit report --format json` against the cluster: (workload, rule)
/// pairs of namespace `ns`.
fn live_report(cp: &ControlPlane, ns: &str, extra: &[&str]) -> Vec<(String, String)> {
    let out = Command::new(BIN)
        .args(["report", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["-n", ns, "--format", "json", "--quiet", "--allow-empty"])
        .args(extra)
        .env_remove("KUBECONFIG")
        .env_remove("WINADMIT_NAMESPACE")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "winadmit report {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut pairs: Vec<(String, String)> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| {
            o["findings"].as_array().unwrap().iter().map(|f| {
                (
                    o["name"].as_str().unwrap().to_owned(),
                    f["rule"].as_str().unwrap().to_owned(),
                )
            })
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn what_if_the_windows_pool_ran_another_build() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-what-if";
    cp.namespace(ns, &[]);
    cp.apply(&node("what-if-2019", "10.0.17763").to_string());
    cp.apply(&windows_deployment(ns, "legacy", LTSC2019, false).to_string());
    let now = live_report(cp, ns, &[]);
    assert!(
        !now.contains(&("legacy".into(), "WIN-BUILD-NO-NODE".into())),
        "{now:?}"
    );
    // The pool moved to Windows Server 2025: the ltsc2019 image cannot start.
    let upgraded = live_report(cp, ns, &["--windows-build", "10.0.26100"]);
    assert!(
        upgraded.contains(&("legacy".into(), "WIN-BUILD-NO-NODE".into())),
        "{upgraded:?}"
    );
    // The cluster itself is unchanged.
    assert_eq!(live_report(cp, ns, &[]), now);
    let bad = Command::new(BIN)
        .args(["report", "--windows-build", "2025", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("10.0.26100"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    cp.kubectl_ok(&["delete", "node", "what-if-2019"]);
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "legacy"]);
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn policyreports_with_pods_folded_into_their_controllers() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-fold";
    cp.namespace(ns, &[]);
    let deployment = windows_deployment(ns, "web", LTSC2022, true);
    cp.apply(&deployment.to_string());
    let uid = |kind: &str, name: &str| {
        cp.get(kind, ns, name)["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // What the controllers would make: a ReplicaSet of the Deployment and
    // a Pod of the ReplicaSet, with the same pod template.
    let template = deployment["spec"]["template"].clone();
    let owner = |kind: &str, name: &str, uid: String| json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}]);
    cp.apply(
        &json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": ns,
                "ownerReferences": owner("Deployment", "web", uid("deployment", "web"))},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template}
        })
        .to_string(),
    );
    let mut pod_spec = template["spec"].clone();
    pod_spec["nodeName"] = "audit-fold-node".into();
    cp.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1-a", "namespace": ns, "labels": {"app": "web"},
                "ownerReferences": owner("ReplicaSet", "web-1", uid("replicaset", "web-1"))},
            "spec": pod_spec
        })
        .to_string(),
    );
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let audit = Audit::start(cp, &policy, &["--report-api", "policyreport"]);
    let deadline = Instant::now() + FOLLOW;
    let report = loop {
        let out = cp.kubectl(&[
            "get",
            "policyreports.wgpolicyk8s.io",
            "-n",
            ns,
            "winadmit-audit-fold",
            "-o",
            "json",
        ]);
        if out.status.success() {
            break serde_json::from_slice::<Value>(&out.stdout).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no PolicyReport in {ns}:\n{}",
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let subjects: Vec<(String, String)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["resources"][0]["kind"].as_str().unwrap().to_owned(),
                r["resources"][0]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        subjects.contains(&("Deployment".into(), "web".into())),
        "{subjects:?}"
    );
    assert!(
        subjects.iter().all(|(k, _)| k == "Deployment"),
        "the ReplicaSet and the Pod are folded into the Deployment: {subjects:?}"
    );
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "WIN-PRIVILEGED")
    );
    let cluster_report = cp.kubectl(&[
        "get",
        "clusterpolicyreports.wgpolicyk8s.io",
        "winadmit-cluster",
    ]);
    assert!(
        cluster_report.status.success(),
        "{}",
        String::from_utf8_lossy(&cluster_report.stderr)
    );
    cp.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}
