//! Mutation from Windows knowledge: the `node.kubernetes.io/windows-build`
//! selector (policy opt-in) and the toleration for the policy's Windows taint.

use serde::Deserialize;
use serde_json::{Value, json};
use winadmit::decision::cluster::{WindowsNode, WindowsNodes};
use winadmit::decision::engine::{Context, evaluate};
use winadmit::decision::patch::{self, MutationContext};
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;

/// A cluster whose Windows nodes are Windows Server 2022 (10.0.20348): the
/// one build `injectWindowsBuild` can pin an ltsc2022 image to (with a
/// Windows Server 2025 node too, the image would run on both and nothing is
/// pinned; `patch::tests::windows_build_from_image_facts`).
fn ws2022_nodes() -> WindowsNodes {
    let node = WindowsNode::from_object(&json!({"kind": "Node", "metadata": {"name": "win22",
        "labels": {"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}}}))
    .unwrap();
    WindowsNodes {
        nodes: vec![node],
        ..Default::default()
    }
}

/// The patched object, after the mutation a policy asks for, on a cluster of
/// Windows Server 2022 nodes.
fn mutated(policy: &Policy, doc: &Value) -> (Value, Vec<String>) {
    mutated_on(policy, doc, &ws2022_nodes())
}

/// [`mutated`] on a cluster of `nodes`.
fn mutated_on(policy: &Policy, doc: &Value, nodes: &WindowsNodes) -> (Value, Vec<String>) {
    let view = ObjectView::deserialize(doc).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    let cx = Context {
        nodes: Some(nodes),
        ..Context::default()
    };
    let eval = evaluate(policy, &workload, &cx);
    let m = patch::mutation(
        policy,
        &workload,
        &eval,
        MutationContext {
            create: true,
            namespace_isolation: None,
            psa_restricted_before_1_25: false,
            images: None,
            nodes: Some(nodes),
        },
    );
    let mut out = doc.clone();
    patch::apply(&mut out, &m.ops).unwrap();
    // Reinvocation is a no-op.
    let view2 = ObjectView::deserialize(&out).unwrap();
    let w2 = Workload::from_view(&view2).unwrap();
    let e2 = evaluate(policy, &w2, &Context::default());
    let again = patch::mutation(policy, &w2, &e2, MutationContext::default());
    assert!(
        again.is_empty(),
        "second pass patched again: {:?}",
        again.ops
    );
    (out, m.explanations)
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
}

fn iis() -> Value {
    json!([{"name": "iis", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"},
           {"name": "tools", "image": "mcr.microsoft.com/powershell:lts-nanoserver-ltsc2022"}])
}

#[test]
fn windows_build_selector_is_opt_in() {
    let doc = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": iis()}));
    let (out, _) = mutated(&Policy::default_policy(), &doc);
    assert_eq!(out, doc, "off by default");

    let on = Policy::from_yaml(
        "p",
        "mutation:\n  injectNodeSelector: true\n  setOsName: false\n  removeNoOpFields: true\n  emptyDirOffMemory: false\n  inferFromImages: false\n  isolation: null\n  isolationNamespaceLabel: null\n  tolerations: []\n  injectWindowsBuild: true\n",
    )
    .unwrap();
    let (out, why) = mutated(&on, &doc);
    assert_eq!(
        out["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"})
    );
    assert!(why.iter().any(|w| w.contains("10.0.20348")), "{why:?}");

    // No node selector at all: both labels arrive together.
    let bare = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"os": {"name": "windows"}, "containers": iis()}});
    let (out, _) = mutated(&on, &bare);
    assert_eq!(
        out["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"})
    );

    // Images of two builds, an existing build selector, a Hyper-V RuntimeClass:
    // nothing to add.
    let mixed = pod(
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": [
        {"name": "a", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"},
        {"name": "b", "image": "mcr.microsoft.com/windows/nanoserver:1809"}]}),
    );
    assert_eq!(mutated(&on, &mixed).0, mixed);
    let chosen = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows",
        "node.kubernetes.io/windows-build": "10.0.20348"}, "containers": iis()}));
    assert_eq!(mutated(&on, &chosen).0, chosen);
    let hv = Policy::from_yaml(
        "hv",
        "params:\n  hypervRuntimeClasses: [hyperv]\nmutation:\n  injectNodeSelector: true\n  setOsName: false\n  removeNoOpFields: true\n  emptyDirOffMemory: false\n  inferFromImages: false\n  isolation: null\n  isolationNamespaceLabel: null\n  tolerations: []\n  injectWindowsBuild: true\n",
    )
    .unwrap();
    let hyperv = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"},
        "runtimeClassName": "hyperv", "containers": iis()}));
    assert_eq!(mutated(&hv, &hyperv).0, hyperv);
}

#[test]
fn windows_taint_toleration_is_added_once() {
    let p = Policy::from_yaml(
        "p",
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\n",
    )
    .unwrap();
    let want =
        json!({"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"});
    let doc = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": iis()}));
    let (out, _) = mutated(&p, &doc);
    assert_eq!(out["spec"]["tolerations"], json!([want]));

    let other = json!({"key": "gpu", "operator": "Exists"});
    let with = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"},
        "tolerations": [other], "containers": iis()}));
    let (out, _) = mutated(&p, &with);
    assert_eq!(out["spec"]["tolerations"], json!([other, want]));

    // Already tolerated (by key, or by a wildcard): nothing added.
    let tolerated = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"},
        "tolerations": [{"key": "os", "operator": "Exists"}], "containers": iis()}));
    assert_eq!(mutated(&p, &tolerated).0, tolerated);

    // Linux pods never get the Windows toleration; with Windows nodes in
    // the cluster, a Linux-only image is pinned to Linux (WIN-LINUX-UNPINNED).
    let linux = pod(json!({"containers": [{"name": "web", "image": "nginx:1.27"}]}));
    let out = mutated(&p, &linux).0;
    assert_eq!(out["spec"].get("tolerations"), None);
    assert_eq!(
        out["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "linux"})
    );

    // The policy can keep the rule but not the mutation.
    let no = Policy::from_yaml(
        "p",
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\nmutation:\n  injectNodeSelector: true\n  setOsName: false\n  removeNoOpFields: true\n  emptyDirOffMemory: false\n  inferFromImages: false\n  isolation: null\n  isolationNamespaceLabel: null\n  tolerations: []\n  tolerateWindowsTaint: false\n",
    )
    .unwrap();
    assert!(mutated(&no, &doc).0["spec"].get("tolerations").is_none());
}

/// Windows nodes with `taints` (each `(key, value, effect)`).
fn tainted(names: &[&str], taints: &[(&str, &str, &str)]) -> WindowsNodes {
    let taints: Vec<Value> = taints
        .iter()
        .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
        .collect();
    WindowsNodes {
        nodes: names
            .iter()
            .map(|n| {
                WindowsNode::from_object(&json!({"kind": "Node",
                    "metadata": {"name": n, "labels": {"kubernetes.io/os": "windows"}},
                    "spec": {"taints": taints}}))
                .unwrap()
            })
            .collect(),
        // These are all the cluster's nodes.
        linux_known: true,
        ..Default::default()
    }
}

/// The rules' findings (id, message) for `doc` on a cluster of `nodes`.
fn findings_on(policy: &Policy, doc: &Value, nodes: &WindowsNodes) -> Vec<(String, String)> {
    let view = ObjectView::deserialize(doc).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    let cx = Context {
        nodes: Some(nodes),
        ..Context::default()
    };
    evaluate(policy, &workload, &cx)
        .findings
        .iter()
        .map(|f| (f.rule.to_owned(), f.message.clone()))
        .collect()
}

/// With no `params.windowsTaint`, the taint every Windows node has is the
/// Windows taint: a Windows pod without its toleration is warned about and
/// gets it; Kubernetes' own `node.kubernetes.io/*` taints and a taint only
/// some nodes have are not; a Linux workload that tolerates everything is
/// warned about.
#[test]
fn windows_taint_learnt_from_the_nodes() {
    let p = Policy::default_policy();
    let nodes = tainted(
        &["win-a", "win-b"],
        &[
            ("os", "windows", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "", "NoExecute"),
            ("dedicated", "batch", "PreferNoSchedule"),
        ],
    );
    let doc = pod(json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": iis()}));
    let found = findings_on(&p, &doc, &nodes);
    let taint: Vec<&(String, String)> = found
        .iter()
        .filter(|(r, _)| r == "WIN-TAINT-TOLERATION")
        .collect();
    assert_eq!(taint.len(), 1, "{found:?}");
    assert!(
        taint[0].1.contains("os=windows:NoSchedule") && taint[0].1.contains("win-a"),
        "{taint:?}"
    );
    let (out, _) = mutated_on(&p, &doc, &nodes);
    assert_eq!(
        out["spec"]["tolerations"],
        json!([{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}])
    );

    // A taint only one node has keeps the pod off that node only.
    let mut mixed = tainted(&["win-a"], &[("os", "windows", "NoSchedule")]);
    mixed.nodes.extend(tainted(&["win-b"], &[]).nodes);
    assert!(
        !findings_on(&p, &doc, &mixed)
            .iter()
            .any(|(r, _)| r == "WIN-TAINT-TOLERATION")
    );

    // A NoExecute taint every Windows node carries is never learnt (only
    // the policy names one), nor a taint a Linux node carries too.
    let quarantined = tainted(
        &["win-a", "win-b"],
        &[("example.com/quarantine", "true", "NoExecute")],
    );
    assert!(
        !findings_on(&p, &doc, &quarantined)
            .iter()
            .any(|(r, _)| r == "WIN-TAINT-TOLERATION")
    );
    let (out, _) = mutated_on(&p, &doc, &quarantined);
    assert_eq!(out["spec"].get("tolerations"), None, "{out}");
    let mut shared = tainted(&["win-a"], &[("os", "windows", "NoSchedule")]);
    shared.linux.push(winadmit::decision::cluster::LinuxNode {
        name: "linux-a".into(),
        taints: vec![winadmit::decision::tolerations::Taint {
            key: "os".into(),
            value: Some("windows".into()),
            effect: "NoSchedule".into(),
        }],
        ..Default::default()
    });
    assert!(
        !findings_on(&p, &doc, &shared)
            .iter()
            .any(|(r, _)| r == "WIN-TAINT-TOLERATION")
    );

    // An unpinned workload that tolerates every taint.
    let agent = pod(json!({"tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "agent", "image": "example.com/agent:1"}]}));
    let found = findings_on(&p, &agent, &nodes);
    assert!(
        found
            .iter()
            .any(|(r, m)| r == "WIN-LINUX-TOLERATES-WINDOWS" && m.contains("os=windows")),
        "{found:?}"
    );
    // Untainted nodes: nothing to tolerate.
    let plain = tainted(&["win-a"], &[]);
    assert!(
        !findings_on(&p, &agent, &plain)
            .iter()
            .any(|(r, _)| r.starts_with("WIN-TAINT") || r == "WIN-LINUX-TOLERATES-WINDOWS")
    );
}
