//! `winadmit audit` through the scheduling cluster (`support/scheduling.rs`:
//! the real kube-scheduler and kube-controller-manager, and KWOK's simulated
//! kubelets, beside the real API server). Deployments are created before
//! the audit starts, with no webhook in front of them: the ReplicaSet
//! controller makes their pods, the scheduler places them on two Linux and
//! two Windows Server 2022 nodes, KWOK runs them. Then the audit, at its
//! default intervals (a pass every 2 s, the policy checked every 10 s):
//! every wrong workload is in a Report with rule, field path, message and
//! fix, its ReplicaSets and pods folded into it; then a policy change, the
//! Windows pool replaced by Windows Server 2019 nodes while the workloads
//! run (the ReplicaSet controller replaces the pods of the deleted nodes),
//! and the API server restarted (same etcd), then a workload fixed by a
//! rollout (its old ReplicaSet, scaled to 0, is history and not reported);
//! the reports follow each, and the gauges equal the reports at the end.
//!
//! Each step prints the time from the change to the reports reflecting it
//! (`cargo test --test cluster -- --nocapture`; the numbers are in
//! docs/BENCHMARKS.md). The waits are bounded by [`FOLLOW`], not timed.
//!
//! Without the control plane and KWOK built (`tests/apiserver/build.sh`,
//! `tests/kwok/build.sh`) the test is ignored, with those commands
//! (`build.rs`), unless `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run`
//! builds them and sets it).

use crate::audit;
use crate::scheduling_kit as scheduling;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use audit::{Audit, has, pairs, results};
use scheduling::{Node, Nodes, Os};

/// How long the reports may take to follow a change before the test
/// fails (a bound, not a measurement: the measured times are printed).
const FOLLOW: Duration = Duration::from_secs(120);

const LTSC2019: &str = "mcr.microsoft.com/windows/servercore:ltsc2019";
const LTSC2022: &str = "mcr.microsoft.com/windows/servercore:ltsc2022";
const IIS: &str = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022";

const NS: &str = "audit-sched";

/// A Deployment of two replicas named `name`, its pods labelled `app:
/// name`, with pod spec `spec`.
fn deployment(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    })
}

/// A pod spec pinned to Windows running `image`, with `extra` fields.
fn windows(image: &str, extra: Value) -> Value {
    let mut spec = json!({
        "nodeSelector": {"kubernetes.io/os": "windows"},
        "containers": [{"name": "app", "image": image}],
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

/// The workloads, made before the audit starts: (name, pod spec).
fn workloads() -> Vec<(&'static str, Value)> {
    let privileged = json!({"privileged": true});
    vec![
        (
            "privileged",
            windows(
                LTSC2022,
                json!({"containers": [{"name": "app", "image": LTSC2022, "securityContext": privileged}]}),
            ),
        ),
        (
            "host-network",
            windows(LTSC2022, json!({"hostNetwork": true})),
        ),
        // An ltsc2019 image: no Windows Server 2019 node to run it.
        ("legacy", windows(LTSC2019, json!({}))),
        // An ltsc2022 image: clean while the pool is Windows Server 2022.
        ("current", windows(LTSC2022, json!({}))),
        // A Windows image with no OS selector: the scheduler puts some of
        // its pods on Linux nodes.
        (
            "unpinned-iis",
            json!({"containers": [{"name": "app", "image": IIS}]}),
        ),
        (
            "nginx",
            json!({"nodeSelector": {"kubernetes.io/os": "linux"},
                   "containers": [{"name": "app", "image": "nginx:1.27"}]}),
        ),
    ]
}

/// Waits until `NS`'s results satisfy `ok`; prints and returns the time
/// since `since`.
fn follow(
    nodes: &Nodes,
    audit: &Audit,
    step: &str,
    since: Instant,
    ok: impl Fn(&[Value]) -> bool,
) -> (Vec<Value>, Duration) {
    let deadline = Instant::now() + FOLLOW;
    loop {
        let r = results(nodes.cp(), NS);
        if let Some(r) = &r
            && ok(r)
        {
            let took = since.elapsed();
            println!("audit through the scheduling cluster: {step}: {took:.1?}");
            return (r.clone(), took);
        }
        assert!(
            Instant::now() < deadline,
            "{step}: not in the reports of {NS} within {FOLLOW:?}; results: {:?}\naudit log:\n{}",
            r.as_deref().map(pairs),
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every result is a Deployment's (its ReplicaSets and pods folded into
/// it), once per (workload, rule), with a field under the pod template
/// that its message names, and a fix.
fn assert_folded_and_explained(results: &[Value]) {
    let p = pairs(results);
    let mut unique = p.clone();
    unique.dedup();
    assert_eq!(p, unique, "a finding reported twice (pods not folded?)");
    for r in results {
        assert_eq!(r["resources"][0]["kind"], "Deployment", "{r}");
        assert!(matches!(r["result"].as_str(), Some("fail" | "warn")), "{r}");
        let field = r["properties"]["field"].as_str().unwrap_or_default();
        assert!(field.starts_with("spec.template.spec."), "{r}");
        assert!(
            r["message"].as_str().unwrap_or_default().contains(field),
            "{r}"
        );
        let fix = r["properties"]["fix"].as_str().unwrap_or_default();
        assert!(!fix.is_empty(), "{r}");
    }
}

/// Makes `NS` afresh with [`workloads`], and waits until their pods run.
fn create_workloads(nodes: &Nodes) {
    let cp = nodes.cp();
    cp.kubectl(&["delete", "namespace", NS, "--wait=true"]);
    cp.namespace(NS, &[]);
    for (name, spec) in workloads() {
        cp.apply(&deployment(name, spec).to_string());
    }
    for (name, _) in workloads() {
        nodes.wait_pods(NS, &format!("app={name}"), 2, &["Running"]);
    }
    // The scheduler alone decided: the unpinned Windows image has pods on
    // Linux nodes or not, by chance; the pinned ones are on Windows.
    let pinned = nodes.pods(NS, "app=current");
    assert!(pinned.iter().all(|p| p.os == Some(Os::Windows)));
}

/// The first full audit: every wrong workload, and nothing of the clean
/// ones.
fn first_audit(nodes: &Nodes, audit: &Audit, started: Instant) {
    let (first, _) = follow(
        nodes,
        audit,
        "first audit (start to every workload reported)",
        started,
        |r| {
            has(r, "privileged", "WIN-PRIVILEGED")
                && has(r, "host-network", "WIN-HOSTNETWORK")
                && has(r, "legacy", "WIN-BUILD-NO-NODE")
                && has(r, "unpinned-iis", "WIN-UNPINNED-IMAGE")
        },
    );
    let named: Vec<(String, String)> = pairs(&first);
    assert!(
        !named.iter().any(|(w, _)| w == "current" || w == "nginx"),
        "{named:?}"
    );
    assert_folded_and_explained(&first);
    // The controllers' objects exist: what was folded was there.
    let rs = nodes
        .cp()
        .kubectl_ok(&["get", "replicasets", "-n", NS, "-o", "name"]);
    assert_eq!(rs.lines().count(), workloads().len(), "{rs}");
}

/// The Windows Server 2022 pool replaced by a Windows Server 2019 one while
/// the workloads run: the new nodes join, the old ones are deleted with
/// their pods (as a drained, deleted node pool leaves them), the
/// ReplicaSet controller makes new pods, which the scheduler places on the
/// new nodes. The ltsc2022 image now has no node; the ltsc2019 one has.
fn replace_windows_pool(nodes: &mut Nodes, audit: &Audit) -> Duration {
    let new = [Node::windows_2019("win19-1"), Node::windows_2019("win19-2")];
    let old = nodes.of(Os::Windows);
    let joining = Instant::now();
    nodes.join(&new);
    follow(
        nodes,
        audit,
        "Windows Server 2019 nodes joined (created to reports)",
        joining,
        |r| !has(r, "legacy", "WIN-BUILD-NO-NODE"),
    );
    let changed = Instant::now();
    nodes.remove(&old);
    let (_, took) = follow(
        nodes,
        audit,
        "Windows pool replaced (2022 nodes deleted to reports)",
        changed,
        |r| has(r, "current", "WIN-BUILD-NO-NODE") && !has(r, "legacy", "WIN-BUILD-NO-NODE"),
    );
    // The workloads kept running, on the new pool.
    let pods = nodes.wait_pods(NS, "app=current", 2, &["Running"]);
    assert!(
        pods.iter()
            .all(|p| p.node.as_deref().is_some_and(|n| n.starts_with("win19-"))),
        "{:?}",
        pods.iter().map(|p| &p.node).collect::<Vec<_>>()
    );
    took
}

/// A policy change: WIN-PRIVILEGED turned off in the policy file; the
/// running audit reads it again.
fn change_policy(nodes: &Nodes, audit: &Audit, policy: &std::path::Path) -> Duration {
    let changed = Instant::now();
    std::fs::write(
        policy,
        "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nrules:\n  WIN-PRIVILEGED: off\n",
    )
    .unwrap();
    let (_, took) = follow(
        nodes,
        audit,
        "policy change (WIN-PRIVILEGED off, file written to reports)",
        changed,
        |r| !has(r, "privileged", "WIN-PRIVILEGED") && has(r, "host-network", "WIN-HOSTNETWORK"),
    );
    took
}

/// The API server restarted (same etcd): the audit's watches break and
/// resume; a workload fixed after the restart leaves the reports.
fn restart_apiserver(nodes: &Nodes, audit: &mut Audit) -> (Duration, Duration) {
    let cp = nodes.cp();
    let stopped = Instant::now();
    cp.restart_apiserver();
    let restart = stopped.elapsed();
    println!(
        "audit through the scheduling cluster: API server restart (stop to ready): {restart:.1?}"
    );
    assert!(audit.alive(), "the audit exited:\n{}", audit.logs());
    let fixed = windows(LTSC2022, json!({}));
    let changed = Instant::now();
    cp.apply(&deployment("host-network", fixed).to_string());
    // The deployment controller rolls out a new ReplicaSet and scales the
    // old one to 0, keeping it as history: not a workload, so no
    // WIN-HOSTNETWORK is left, under the Deployment's name or the old
    // ReplicaSet's.
    let (_, took) = follow(
        nodes,
        audit,
        "after the API server restart (workload fixed to reports)",
        changed,
        |r| {
            !pairs(r).iter().any(|(_, rule)| rule == "WIN-HOSTNETWORK")
                && has(r, "current", "WIN-BUILD-NO-NODE")
        },
    );
    let history: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "replicasets",
        "-n",
        NS,
        "-l",
        "app=host-network",
        "-o",
        "json",
    ]))
    .unwrap();
    let replicas: Vec<i64> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rs| rs["spec"]["replicas"].as_i64().unwrap_or(1))
        .collect();
    assert!(
        replicas.contains(&0) && replicas.len() >= 2,
        "the old ReplicaSet kept as history, scaled to 0: {replicas:?}"
    );
    // Stable: the rollout's last steps do not bring it back.
    std::thread::sleep(Duration::from_secs(3));
    let r = results(cp, NS).unwrap_or_default();
    assert!(
        !pairs(&r).iter().any(|(_, rule)| rule == "WIN-HOSTNETWORK"),
        "{:?}",
        pairs(&r)
    );
    assert!(audit.alive(), "the audit exited:\n{}", audit.logs());
    (restart, took)
}

/// `winadmit_audit_findings` of `NS` sums to the reports' results.
fn gauges_equal_reports(nodes: &Nodes, audit: &Audit) {
    let deadline = Instant::now() + FOLLOW;
    loop {
        let reported = results(nodes.cp(), NS).unwrap_or_default().len();
        let gauged: f64 = audit
            .metrics()
            .into_iter()
            .filter(|(k, _)| {
                k.starts_with("winadmit_audit_findings{")
                    && k.contains(&format!("namespace=\"{NS}\""))
            })
            .map(|(_, v)| v)
            .sum();
        if reported > 0 && (gauged - reported as f64).abs() < 0.5 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "gauges {gauged} != {reported} results\n{}",
            audit.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn the_audit_follows_workloads_policy_node_pool_and_apiserver_restart() {
    let cluster = scheduling::shared("audit_scheduling");
    audit::install_report_crds(cluster.cp);
    let mut nodes = cluster.nodes(&[
        Node::linux("linux-1"),
        Node::linux("linux-2"),
        Node::windows("win22-1"),
        Node::windows("win22-2"),
    ]);
    create_workloads(&nodes);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: winadmit.io/v1alpha1\nkind: Policy\n").unwrap();

    let started = Instant::now();
    let mut audit = Audit::start_with_defaults(nodes.cp(), &policy, &[]);
    first_audit(&nodes, &audit, started);
    gauges_equal_reports(&nodes, &audit);
    change_policy(&nodes, &audit, &policy);
    replace_windows_pool(&mut nodes, &audit);
    restart_apiserver(&nodes, &mut audit);
    gauges_equal_reports(&nodes, &audit);

    audit.kill();
    nodes
        .cp()
        .kubectl(&["delete", "namespace", NS, "--wait=false"]);
}
