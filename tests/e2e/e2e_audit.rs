//! `winadmit audit` against a real kube-apiserver v1.37 (tests/apiserver/)
//! with the report CRDs the chart ships (charts/winadmit/files/crds/, as
//! their projects publish them): workloads created before the audit
//! starts appear in openreports.io Reports with rule, field path, message
//! and fix, and leave them when fixed or deleted; a policy change and a
//! Windows node change (Node objects created and relabelled directly) are
//! reflected without a restart; the gauges equal the reports' counts; two
//! replicas with leader election never both write; killing the leader
//! loses nothing; a tampered report is repaired; a rollout's old
//! ReplicaSet is not reported; with the chart's writer policy, a leader
//! paused past its Lease cannot write once another leads. Without an API
//! server: an unreachable one is retried with backoff and named, and no
//! cluster configuration is said plainly.
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
/// How long a change may take to reach the reports: a bound for a loaded
/// machine (the whole e2e suite shares one API server); a test that
/// passes returns as soon as the reports show it.
const FOLLOW: Duration = Duration::from_secs(90);

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

/// `winadmit report --format json` against the cluster, for namespace
/// `ns`: the report.
fn live_report_json(cp: &ControlPlane, ns: &str, extra: &[&str]) -> Value {
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
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `winadmit report --format json` against the cluster: (workload, rule)
/// pairs of namespace `ns`.
fn live_report(cp: &ControlPlane, ns: &str, extra: &[&str]) -> Vec<(String, String)> {
    let report = live_report_json(cp, ns, extra);
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
    // Verified every second: what the API server returns of a
    // PolicyReport hashes as what was written, so nothing is rewritten.
    let audit = Audit::start(
        cp,
        &policy,
        &[
            "--report-api",
            "policyreport",
            "--report-verify-interval",
            "1s",
        ],
    );
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
    // This namespace's report is not written again while nothing in it
    // changes (the audit verifies it every second). Its resourceVersion
    // is compared, not the audit's write count: other tests' namespaces
    // are written meanwhile.
    let version = || {
        let out = cp.kubectl(&[
            "get",
            "policyreports.wgpolicyk8s.io",
            "-n",
            ns,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}",
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    std::thread::sleep(Duration::from_secs(2));
    let before = version();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(version(), before, "rewritten unchanged:\n{}", audit.logs());
    assert!(
        !audit.logs().contains("changed by someone else"),
        "{}",
        audit.logs()
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

/// The report `winadmit-<ns>` as JSON.
fn report(cp: &ControlPlane, ns: &str) -> Value {
    cp.get("reports.openreports.io", ns, &format!("winadmit-{ns}"))
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_tampered_report_is_repaired_by_the_leader_and_by_a_new_leader() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-tamper";
    cp.namespace(ns, &[]);
    cp.apply(&windows_deployment(ns, "hidden", LTSC2022, true).to_string());
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let verify = ["--report-verify-interval", "2s"];
    let mut audit = Audit::start(cp, &policy, &verify);
    wait_results(cp, &audit, ns, "the finding", |r| {
        has(r, "hidden", "WIN-PRIVILEGED")
    });
    // Several verify rounds with nothing changed: nothing is rewritten
    // (what the API server returns hashes as what was written).
    std::thread::sleep(Duration::from_secs(5));
    let writes = |a: &Audit, result: &str| {
        a.metrics()
            .into_iter()
            .filter(|(k, _)| {
                k.starts_with("winadmit_audit_report_writes_total{")
                    && k.contains(&format!("result=\"{result}\""))
            })
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let applied = writes(&audit, "applied");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(writes(&audit, "applied"), applied, "{}", audit.logs());
    assert_eq!(writes(&audit, "repaired"), 0.0, "{}", audit.logs());

    // Emptied, the content-hash annotation kept: put back within the
    // verify interval (2 s here; a bound of FOLLOW).
    let tamper = || {
        let stored: Value = serde_json::from_str(&cp.kubectl_ok(&[
            "patch",
            "reports.openreports.io",
            "-n",
            ns,
            &format!("winadmit-{ns}"),
            "--type",
            "merge",
            "-p",
            r#"{"results": [], "summary": {"pass": 999, "fail": 0}}"#,
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(stored["summary"]["pass"], 999);
        assert!(stored["metadata"]["annotations"]["winadmit.io/content-hash"].is_string());
    };
    tamper();
    let started = Instant::now();
    wait_results(cp, &audit, ns, "the tampered report repaired", |r| {
        has(r, "hidden", "WIN-PRIVILEGED")
    });
    let took = started.elapsed();
    assert_ne!(report(cp, ns)["summary"]["pass"], 999);
    assert!(writes(&audit, "repaired") >= 1.0, "{}", audit.logs());
    assert!(
        audit.logs().contains("changed by someone else"),
        "{}",
        audit.logs()
    );
    eprintln!("repaired in {took:?} with --report-verify-interval 2s");

    // Tampered while no audit runs: a new leader, with the default
    // interval (5 minutes), repairs it on taking the lead.
    audit.kill();
    tamper();
    let audit = Audit::start(cp, &policy, &[]);
    wait_results(cp, &audit, ns, "repaired by the next leader", |r| {
        has(r, "hidden", "WIN-PRIVILEGED")
    });
    assert_ne!(report(cp, ns)["summary"]["pass"], 999);
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "hidden"]);
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_rollout_leaves_the_old_replica_set_out_of_the_reports() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-rollout";
    cp.namespace(ns, &[]);
    let deployment = |host_network: bool| {
        let mut d = windows_deployment(ns, "web", LTSC2022, false);
        d["spec"]["template"]["spec"]["hostNetwork"] = host_network.into();
        d
    };
    // What kube-controller-manager's deployment controller does on a
    // rollout, step by step: the Deployment's ReplicaSet for each pod
    // template, the new one scaled up, the old one scaled to 0 and kept
    // as history (revisionHistoryLimit).
    let replica_set = |name: &str, replicas: u32, d: &Value| {
        let uid = cp.get("deployment", ns, "web")["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned();
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": uid, "controller": true}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                "template": d["spec"]["template"]}
        })
        .to_string()
    };
    let old = deployment(true);
    cp.apply(&old.to_string());
    cp.apply(&replica_set("web-1", 1, &old));
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let audit = Audit::start(cp, &policy, &[]);
    wait_results(cp, &audit, ns, "hostNetwork reported", |r| {
        pairs(r).iter().any(|(_, rule)| rule == "WIN-HOSTNETWORK")
    });
    // hostNetwork removed: a new ReplicaSet, the old one scaled to 0.
    let new = deployment(false);
    cp.apply(&new.to_string());
    cp.apply(&replica_set("web-2", 1, &new));
    cp.apply(&replica_set("web-1", 0, &old));
    let r = wait_results(cp, &audit, ns, "the fixed Deployment's finding gone", |r| {
        !pairs(r).iter().any(|(_, rule)| rule == "WIN-HOSTNETWORK")
    });
    assert!(
        !pairs(&r).iter().any(|(w, _)| w == "web-1"),
        "{:?}",
        pairs(&r)
    );
    // Stable: not back on a later pass.
    std::thread::sleep(Duration::from_secs(2));
    let r = results(cp, ns).unwrap_or_default();
    assert!(
        !pairs(&r).iter().any(|(_, rule)| rule == "WIN-HOSTNETWORK"),
        "{:?}",
        pairs(&r)
    );
    cp.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// The audit's RBAC and writer policy as the chart renders them for a
/// release in namespace `ns`, with `--set` values `set`.
fn chart_audit_objects(ns: &str, set: &[&str]) -> Vec<Value> {
    let helm = crate::helm_support::helm("e2e_audit");
    let chart = crate::helm_support::chart();
    let mut args = vec![
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--namespace",
        ns,
        "--set",
        "audit.enabled=true",
        "--show-only",
        "templates/audit.yaml",
        "--show-only",
        "templates/audit-writer.yaml",
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    let text = helm.ok(&args);
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|v| {
            matches!(
                v["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "Role"
                        | "RoleBinding"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
            )
        })
        .collect()
}

#[test]
#[cfg_attr(
    any(no_control_plane, no_helm),
    ignore = "needs kube-apiserver and helm, which are not built: run tests/apiserver/build.sh and tests/helm/build.sh"
)]
fn a_paused_leader_cannot_write_once_another_holds_the_lease() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let ns = "audit-fence";
    cp.namespace(ns, &[]);
    for o in chart_audit_objects(ns, &[]) {
        cp.apply(&o.to_string());
    }
    let dir = tempfile::tempdir().unwrap();
    let sa = cp.service_account_kubeconfig(dir.path(), ns, "winadmit-audit");
    // The policy is enforced once the API server has loaded it: until
    // then a write without a writer may pass. Wait for a refusal, with a
    // Lease some other replica holds.
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "winadmit-audit", "namespace": ns},
        "spec": {"holderIdentity": "replica-x"}
    });
    cp.apply(&lease.to_string());
    let refused = |writer: &str| {
        let r = json!({
            "apiVersion": "openreports.io/v1alpha1", "kind": "Report",
            "metadata": {"name": "winadmit-forged", "namespace": ns,
                "labels": {"app.kubernetes.io/managed-by": "winadmit"},
                "annotations": {"winadmit.io/writer": writer}},
            "summary": {"pass": 999}, "results": []
        });
        cp.kubectl_cmd()
            .args(["--kubeconfig", sa.to_str().unwrap(), "apply", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(r.to_string().as_bytes())?;
                c.wait_with_output()
            })
            .unwrap()
    };
    let started = Instant::now();
    let deadline = started + 3 * FOLLOW;
    loop {
        let stderr = String::from_utf8_lossy(&refused("nobody").stderr).into_owned();
        if stderr.contains("winadmit-audit-writer") {
            break;
        }
        cp.kubectl(&[
            "delete",
            "reports.openreports.io",
            "-n",
            ns,
            "winadmit-forged",
        ]);
        assert!(
            Instant::now() < deadline,
            "the writer policy is not enforced: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "the writer policy enforced {:?} after it was applied",
        started.elapsed()
    );
    // The audit's account cannot delete the Lease to write unchecked.
    let can_delete = cp
        .kubectl_cmd()
        .args(["--kubeconfig", sa.to_str().unwrap()])
        .args(["auth", "can-i", "delete", "leases", "-n", ns])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&can_delete.stdout).trim(),
        "no",
        "the audit may delete its Lease"
    );
    // No Lease (no replica has led yet) refuses nobody: the API server
    // looks the parameter up before the match conditions, so refusing
    // then would refuse the administrator and the namespace controller.
    cp.kubectl_ok(&["delete", "lease", "-n", ns, "winadmit-audit"]);
    let deadline = Instant::now() + FOLLOW;
    while !refused("nobody").status.success() {
        assert!(
            Instant::now() < deadline,
            "a write is still refused without a Lease"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    cp.kubectl_ok(&[
        "delete",
        "reports.openreports.io",
        "-n",
        ns,
        "winadmit-forged",
    ]);

    cp.apply(&windows_deployment(ns, "first", LTSC2022, true).to_string());
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let flags = |me: &'static str| {
        vec![
            "--audit-interval",
            "200ms",
            "--leader-election",
            "--lease-namespace",
            ns,
            "--lease-duration",
            "3s",
            "--lease-identity",
            me,
        ]
    };
    let a = Audit::start_as(cp, &sa, &policy, &flags("replica-a"));
    let b = Audit::start_as(cp, &sa, &policy, &flags("replica-b"));
    wait_results(cp, &a, ns, "the first workload", |r| {
        has(r, "first", "WIN-PRIVILEGED")
    });
    let first = holder(cp, ns).expect("a Lease holder");
    let (paused, other) = if first == "replica-a" {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let writer = |cp: &ControlPlane| {
        report(cp, ns)["metadata"]["annotations"]["winadmit.io/writer"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(writer(cp), first);

    // Paused: the other replica takes the Lease once it expires.
    paused.signal("STOP");
    let deadline = Instant::now() + FOLLOW;
    let second = loop {
        match holder(cp, ns) {
            Some(h) if h != first => break h,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "no takeover while {first} is paused:\n{}",
            other.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    cp.apply(&windows_deployment(ns, "second", LTSC2022, true).to_string());
    wait_results(
        cp,
        other,
        ns,
        "the second workload, by the new leader",
        |r| has(r, "second", "WIN-PRIVILEGED"),
    );
    assert_eq!(writer(cp), second);

    // What the paused replica would send on waking: refused by the API
    // server, whichever way it is written.
    let out = refused(&first);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("winadmit-audit-writer"),
        "a write naming {first} was not refused: {stderr}"
    );
    assert!(stderr.contains(&second), "{stderr}");
    let stamp = cp
        .kubectl_cmd()
        .args([
            "--kubeconfig",
            sa.to_str().unwrap(),
            "annotate",
            "--overwrite",
            "reports.openreports.io",
            "-n",
            ns,
            &format!("winadmit-{ns}"),
            &format!("winadmit.io/writer={first}"),
        ])
        .output()
        .unwrap();
    assert!(
        !stamp.status.success()
            && String::from_utf8_lossy(&stamp.stderr).contains("winadmit-audit-writer"),
        "{first} stamped a report before deleting it: {}",
        String::from_utf8_lossy(&stamp.stderr)
    );

    // Resumed: it stands by (the Lease names the other), its gauge says
    // so, and the reports stay correct.
    paused.signal("CONT");
    let deadline = Instant::now() + FOLLOW;
    loop {
        let leading = (
            paused.metric("winadmit_audit_leader"),
            other.metric("winadmit_audit_leader"),
        );
        if leading == (0.0, 1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "leader gauges (resumed, other) {leading:?}\nresumed:\n{}",
            paused.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for _ in 0..10 {
        let both = paused.metric("winadmit_audit_leader") + other.metric("winadmit_audit_leader");
        assert!(both <= 1.0, "both lead");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A replica that believes it leads (as a paused leader does in the
    // instant it wakes, before it reads the Lease): one run without leader
    // election, under the same service account. Once it has judged, a
    // change gives it something to write; the API server refuses it, and
    // it says so.
    let rogue = Audit::start_as(
        cp,
        &sa,
        &policy,
        &["--audit-interval", "200ms", "--lease-identity", "replica-c"],
    );
    let deadline = Instant::now() + FOLLOW;
    while rogue.metric("winadmit_audit_passes_total") < 1.0 {
        assert!(Instant::now() < deadline, "{}", rogue.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "first"]);
    while !rogue
        .logs()
        .contains("refused by the ValidatingAdmissionPolicy winadmit-audit-writer")
    {
        assert!(
            Instant::now() < deadline,
            "the rogue replica's writes were not refused:\n{}",
            rogue.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "{}",
        rogue
            .logs()
            .lines()
            .find(|l| l.contains("refused by the ValidatingAdmissionPolicy"))
            .unwrap_or_default()
    );
    drop(rogue);

    let r = wait_results(cp, other, ns, "the deleted workload gone", |r| {
        !pairs(r).iter().any(|(w, _)| w == "first") && has(r, "second", "WIN-PRIVILEGED")
    });
    assert_eq!(writer(cp), second, "{:?}", pairs(&r));
    cp.kubectl_ok(&["delete", "deployment", "-n", ns, "second"]);
    // The last workload gone, its report is deleted (stamped, then
    // deleted, as the holder).
    let deadline = Instant::now() + FOLLOW;
    while results(cp, ns).is_some() {
        assert!(
            Instant::now() < deadline,
            "the report of {ns} was not deleted:\n{}",
            other.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The holder's writes all passed the policy, the cluster report's too.
    let failed: f64 = other
        .metrics()
        .into_iter()
        .filter(|(k, _)| {
            k.starts_with("winadmit_audit_report_writes_total{") && k.contains("failed")
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(failed, 0.0, "{}", other.logs());
    let cluster_report: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "clusterreports.openreports.io",
        "winadmit-cluster",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        cluster_report["metadata"]["annotations"]["winadmit.io/writer"],
        second.as_str()
    );
    assert!(
        paused.logs().contains("not leading: standing by"),
        "the resumed replica:\n{}",
        paused.logs()
    );
    // Nothing else is held back: an admin still edits and deletes reports.
    cp.kubectl(&[
        "delete",
        "reports.openreports.io",
        "-n",
        ns,
        "winadmit-forged",
    ]);
}

/// A kubeconfig for an API server at `port` where nothing listens.
fn unreachable_kubeconfig(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("nowhere.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: x, cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: x, user: {{token: t}}}}]\n\
             contexts: [{{name: x, context: {{cluster: x, user: x}}}}]\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn an_unreachable_api_server_is_retried_with_backoff_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path(), controlplane::free_port());
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    let run_for = Duration::from_secs(10);
    let mut child = Command::new(BIN)
        .args(["audit", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--policy")
        .arg(&policy)
        .args(["--gmsa", "off", "--log-format", "json"])
        // Info for everything, and each retry of the audit's watchers.
        .args(["--log-level", "info,winadmit::entry::commands::audit=debug"])
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(run_for);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let message = |l: &Value| {
        l["fields"]["message"]
            .as_str()
            .or_else(|| l["message"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let level = |l: &Value| l["level"].as_str().unwrap_or_default().to_uppercase();
    let logged: Vec<&Value> = lines.iter().filter(|l| level(l) != "DEBUG").collect();
    // Bounded: a line per watched resource and a few more, not a line a
    // second for each.
    assert!(
        logged.len() <= 25,
        "{} lines at info and above in {run_for:?}:\n{text}",
        logged.len()
    );
    // Backoff: 0.8 s doubling (at least) between the attempts of one
    // resource: at most 4 attempts in 10 s, not one a second.
    let attempts = lines
        .iter()
        .filter(|l| message(l).starts_with("audit: cannot list deployments.apps"))
        .count();
    assert!(
        (1..=5).contains(&attempts),
        "{attempts} attempts to list deployments in {run_for:?}:\n{text}"
    );
    // The failure is named, and its fix is not RBAC's.
    let warning = lines
        .iter()
        .map(message)
        .find(|m| m.starts_with("audit: cannot list deployments.apps"))
        .unwrap();
    assert!(
        warning.contains("connection refused") && warning.contains("nothing listens"),
        "{warning}"
    );
    for l in &logged {
        let m = message(l);
        assert!(
            !m.contains("grant") && !m.contains("watched again"),
            "a refused connection gets no RBAC hint and no recovery: {m}"
        );
    }
}

#[test]
fn without_a_cluster_configuration_the_audit_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["audit", "--gmsa", "off"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no cluster configuration found") && stderr.contains("--kubeconfig"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("report from files with --from-file"),
        "audit has no --from-file: {stderr}"
    );
}

/// A PolicyException as the API server stores it: `rules` of the objects
/// named `name`, in `ns`, ending at `expires`.
fn exception(ns: &str, name: &str, expires: winadmit::decision::exceptions::Timestamp) -> Value {
    json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": format!("legacy-{name}"), "namespace": ns},
        "spec": {"rules": ["WIN-PRIVILEGED"], "match": {"names": [name]},
            "reason": "the legacy agent needs the host", "ticket": "OPS-7",
            "expiresAt": expires.to_string()}})
}

/// `kubectl get RESOURCE -n ns` as a user reads it: the value of column
/// `column` in the row of report `name`. Columns are found by where their
/// header starts (kubectl aligns them; a report of a namespace leaves its
/// KIND and NAME scope columns blank).
fn column(cp: &ControlPlane, resource: &str, ns: &str, name: &str, column: &str) -> String {
    let table = cp.kubectl_ok(&["get", resource, "-n", ns]);
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let at = header
        .match_indices(column)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || header.as_bytes()[i - 1] == b' ')
        .unwrap_or_else(|| panic!("no column {column}:\n{table}"));
    lines
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|row| row.get(at..))
        .and_then(|cell| cell.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
}

#[test]
#[cfg_attr(
    any(no_control_plane, no_helm),
    ignore = "needs kube-apiserver and helm, which are not built: run tests/apiserver/build.sh and tests/helm/build.sh"
)]
fn a_covered_finding_is_skip_in_both_report_apis_and_agrees_with_lint_and_the_live_report() {
    use winadmit::decision::exceptions::Timestamp;
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cp = cluster();
    let crd: Vec<Value> = crate::e2e::rendered("base")
        .into_iter()
        .filter(|o| crate::e2e::kind(o) == "CustomResourceDefinition")
        .collect();
    cp.apply(&crate::e2e::to_list(&crd));
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/policyexceptions.winadmit.io",
    ]);
    let (ns, grants) = ("audit-exc", "audit-exc-grants");
    cp.namespace(ns, &[]);
    cp.namespace(grants, &[]);
    let now = winadmit::entry::exceptions::clock();
    let day = Timestamp(now.0 + winadmit::decision::exceptions::DAY);
    // `legacy` is covered by an exception in the namespace the audit
    // trusts; `other` by one in its own namespace, which counts nowhere.
    cp.apply(&crate::e2e::to_list(&[
        windows_deployment(ns, "legacy", LTSC2022, true),
        windows_deployment(ns, "other", LTSC2022, true),
        exception(grants, "legacy", day),
        exception(ns, "other", day),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();
    // The audit as the chart runs it: its service account and RBAC, its
    // namespace as winadmit's own.
    let install_rbac = |report_api: &str| {
        for o in chart_audit_objects(grants, &[&format!("audit.reportApi={report_api}")]) {
            if matches!(
                crate::e2e::kind(&o),
                "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding"
            ) {
                cp.apply(&o.to_string());
            }
        }
    };
    install_rbac("openreports");
    let sa = cp.service_account_kubeconfig(dir.path(), grants, "winadmit-audit");
    let flags = |api: &'static str| {
        [
            "--audit-interval",
            "200ms",
            "--own-namespace",
            grants,
            "--report-api",
            api,
        ]
    };
    let audit = Audit::start_as(cp, &sa, &policy, &flags("openreports"));
    let of = |r: &[Value], result: &str| {
        sorted(
            r.iter()
                .filter(|r| r["rule"] == "WIN-PRIVILEGED" && r["result"] == result)
                .map(|r| &r["resources"][0]["name"]),
        )
    };
    let results = wait_results(cp, &audit, ns, "the covered finding as skip", |r| {
        of(r, "skip") == ["legacy"] && of(r, "warn") == ["other"]
    });
    let skip = results.iter().find(|r| r["result"] == "skip").unwrap();
    assert_eq!(
        skip["properties"]["exception"],
        format!("{grants}/legacy-legacy"),
        "{skip}"
    );
    assert_eq!(skip["properties"]["ticket"], "OPS-7", "{skip}");

    // What a user sees: the Skip and Fail columns the CRD prints, the
    // gauge of covered findings.
    let stored = report(cp, ns);
    let name = format!("winadmit-{ns}");
    let summary = |key: &str| stored["summary"][key].as_u64().unwrap().to_string();
    assert_eq!(summary("skip"), "1", "{stored}");
    let resource = "reports.openreports.io";
    assert_eq!(column(cp, resource, ns, &name, "SKIP"), "1");
    assert_eq!(column(cp, resource, ns, &name, "WARN"), summary("warn"));
    let excepted =
        format!("winadmit_audit_findings_excepted{{namespace=\"{ns}\",rule=\"WIN-PRIVILEGED\"}}");
    let gauge = || audit.metrics().into_iter().find(|(k, _)| *k == excepted);
    assert_eq!(gauge().map(|(_, v)| v), Some(1.0), "{:?}", audit.metrics());

    // The live report and lint on the same objects (as the API server
    // stores them, creation times included) say the same.
    let live = live_report_json(cp, ns, &["--own-namespace", grants]);
    let live_of = |key: &str| {
        sorted(
            live["objects"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| {
                    o[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|f| f["rule"] == "WIN-PRIVILEGED")
                })
                .map(|o| &o["name"]),
        )
    };
    assert_eq!(
        (live_of("skipped"), live_of("findings")),
        (of(&results, "skip"), of(&results, "warn")),
        "the live report: {live}"
    );
    let mut stored_objects = Vec::new();
    for (resource, namespace) in [
        ("deployments", ns),
        ("policyexceptions", ns),
        ("policyexceptions", grants),
    ] {
        let list: Value =
            serde_json::from_str(&cp.kubectl_ok(&["get", resource, "-n", namespace, "-o", "json"]))
                .unwrap();
        stored_objects.extend(list["items"].as_array().unwrap().iter().cloned());
    }
    let input = dir.path().join("stored.json");
    std::fs::write(&input, crate::e2e::to_list(&stored_objects)).unwrap();
    let out = Command::new(BIN)
        .arg("lint")
        .arg(&input)
        .args(["--own-namespace", grants, "--format", "json"])
        .env_remove("WINADMIT_NAMESPACE")
        .output()
        .unwrap();
    let lint: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let lint_of = |key: &str| {
        sorted(
            lint[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f["rule"] == "WIN-PRIVILEGED")
                .map(|f| &f["name"]),
        )
    };
    assert_eq!(
        (lint_of("excepted"), lint_of("findings")),
        (of(&results, "skip"), of(&results, "warn")),
        "lint: {lint}"
    );

    // The exception ends: the audit judges again, without a restart.
    let ends = Timestamp(winadmit::entry::exceptions::clock().0 + 3);
    cp.apply(&exception(grants, "legacy", ends).to_string());
    wait_results(
        cp,
        &audit,
        ns,
        "the ended exception no longer counted",
        |r| of(r, "skip").is_empty() && of(r, "warn") == ["legacy", "other"],
    );
    assert!(
        winadmit::entry::exceptions::clock().0 >= ends.0,
        "counted as ended before its end date"
    );
    assert_eq!(gauge().map(|(_, v)| v), None, "{:?}", audit.metrics());
    drop(audit);

    // The wgpolicyk8s.io PolicyReport prints the same Skip column.
    cp.apply(&exception(grants, "legacy", day).to_string());
    install_rbac("policyreport");
    let audit = Audit::start_as(cp, &sa, &policy, &flags("policyreport"));
    let deadline = Instant::now() + FOLLOW;
    while column_or_none(cp, "policyreports.wgpolicyk8s.io", ns, &name, "SKIP").as_deref()
        != Some("1")
    {
        assert!(
            Instant::now() < deadline,
            "no PolicyReport with one skip in {ns}:\n{}",
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cp.kubectl_ok(&["delete", "namespace", ns, grants, "--wait=false"]);
}

/// The names (JSON strings) of `names`, sorted.
fn sorted<'a>(names: impl Iterator<Item = &'a Value>) -> Vec<String> {
    let mut names: Vec<String> = names.map(|n| n.as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

/// [`column`], or `None` while the report or the row is not there.
fn column_or_none(
    cp: &ControlPlane,
    resource: &str,
    ns: &str,
    name: &str,
    col: &str,
) -> Option<String> {
    let out = cp.kubectl(&["get", resource, "-n", ns, name]);
    if !out.status.success() {
        return None;
    }
    Some(column(cp, resource, ns, name, col))
}
