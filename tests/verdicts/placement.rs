//! Every way a pod reaches a Windows node, judged with the nodes known: a
//! pod whose node name, selector or affinity admit only Windows nodes is a
//! Windows pod (and gets the Windows node selector); one that admits both
//! kinds is judged as a pod that selects no OS. The same through `lint`
//! with Node objects in its input. Where the pods then land is shown by
//! `tests/cluster/scheduling.rs` (`every_way_onto_a_windows_node_is_judged`).

use std::process::Command;

use serde::Deserialize;
use serde_json::{Value, json};
use winadmit::decision::cluster::{KnownNode, WindowsNodes};
use winadmit::decision::engine::{Context, evaluate};
use winadmit::decision::patch::{self, MutationContext};
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;

use crate::ways;

use ways::{both_sides_ways, windows_only_ways};

/// An image whose name says nothing of its OS.
const APP: &str = "registry.example/app:1";

/// Two Linux and two Windows nodes, as the pools of managed clusters label
/// them; the Windows nodes tainted.
fn node_objects() -> Vec<Value> {
    let node = |name: &str, os: &str, pool: &str| {
        let mut labels = json!({"kubernetes.io/os": os, "kubernetes.io/hostname": name});
        for (k, v) in ways::pool_labels(pool) {
            labels[k] = json!(v);
        }
        let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}});
        if os == "windows" {
            n["spec"] =
                json!({"taints": [{"key": "os", "value": "windows", "effect": "NoSchedule"}]});
        }
        n
    };
    vec![
        node("linux-1", "linux", "sys"),
        node("linux-2", "linux", "sys"),
        node("win22-1", "windows", "win22"),
        node("win22-2", "windows", "win22"),
    ]
}

fn nodes() -> WindowsNodes {
    let mut n = WindowsNodes::default();
    for o in node_objects() {
        n.push(KnownNode::from_object(&o).unwrap());
    }
    n.linux_known = true;
    n
}

fn pod(fragment: &Value, image: &str, host_network: bool) -> Value {
    let mut spec = fragment.clone();
    spec["containers"] = json!([{"name": "main", "image": image}]);
    if host_network {
        spec["hostNetwork"] = json!(true);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "web"}, "spec": spec})
}

/// (Windows pod?, rule ids, the patch's node selector) for `doc`.
fn judged(doc: &Value, nodes: &WindowsNodes) -> (bool, Vec<String>, Value) {
    let policy = Policy::default_policy();
    let view = ObjectView::deserialize(doc).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    let cx = Context {
        nodes: Some(nodes),
        ..Context::default()
    };
    let eval = evaluate(&policy, &workload, &cx);
    let m = patch::mutation(
        &policy,
        &workload,
        &eval,
        MutationContext {
            create: true,
            nodes: Some(nodes),
            ..MutationContext::default()
        },
    );
    let mut out = doc.clone();
    patch::apply(&mut out, &m.ops).unwrap();
    let rules = eval.findings.iter().map(|f| f.rule.to_owned()).collect();
    (
        eval.target.is_windows(),
        rules,
        out["spec"]["nodeSelector"].clone(),
    )
}

#[test]
fn a_pod_that_can_only_land_on_windows_nodes_is_a_windows_pod() {
    let nodes = nodes();
    for (way, fragment) in windows_only_ways() {
        let (windows, rules, selector) = judged(&pod(&fragment, APP, true), &nodes);
        assert!(windows, "{way}: not taken for a Windows pod");
        assert!(
            rules.iter().any(|r| r == "WIN-HOSTNETWORK"),
            "{way}: {rules:?}"
        );
        let (_, rules, selector_clean) = judged(&pod(&fragment, APP, false), &nodes);
        assert!(
            !rules.iter().any(|r| r == "WIN-HOSTNETWORK"),
            "{way}: {rules:?}"
        );
        for s in [selector, selector_clean] {
            assert_eq!(s["kubernetes.io/os"], "windows", "{way}: patched to {s}");
        }
    }
}

#[test]
fn a_pod_that_can_land_on_both_kinds_is_judged_as_selecting_no_os() {
    let nodes = nodes();
    for (way, fragment) in both_sides_ways() {
        let (windows, rules, selector) = judged(&pod(&fragment, APP, true), &nodes);
        assert!(!windows, "{way}: taken for a Windows pod ({rules:?})");
        assert!(
            !rules.iter().any(|r| r == "WIN-HOSTNETWORK"),
            "{way}: {rules:?}"
        );
        assert_eq!(selector.get("kubernetes.io/os"), None, "{way}");
        // Linux-only images are pinned to Linux wherever the pod may land.
        let (_, rules, selector) = judged(&pod(&fragment, "nginx:1.27", true), &nodes);
        assert!(
            rules.iter().any(|r| r == "WIN-LINUX-UNPINNED"),
            "{way}: {rules:?}"
        );
        assert_eq!(selector["kubernetes.io/os"], "linux", "{way}");
    }
}

/// Without the other nodes known (a webhook whose cache has not listed
/// them yet), a pool label is not enough: the pod is judged as selecting
/// no OS.
#[test]
fn a_pool_label_needs_the_other_nodes_known() {
    let mut nodes = nodes();
    nodes.linux.clear();
    nodes.linux_known = false;
    let way = json!({"nodeSelector": {"env": "prod"}});
    let (windows, rules, _) = judged(&pod(&way, APP, true), &nodes);
    assert!(!windows, "{rules:?}");
    // With the Linux nodes listed, the same label admits both kinds.
    let (windows, _, _) = judged(&pod(&way, APP, true), &self::nodes());
    assert!(!windows);
}

/// `lint` reads the Node objects of its input as the cluster's nodes.
#[test]
fn lint_judges_them_with_the_input_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs: Vec<String> = node_objects()
        .iter()
        .map(|n| serde_json::to_string(n).unwrap())
        .collect();
    let mut by_name = pod(&json!({"nodeName": "win22-1"}), APP, true);
    by_name["metadata"]["name"] = json!("by-name");
    let mut both = pod(&json!({"tolerations": [{"operator": "Exists"}]}), APP, true);
    both["metadata"]["name"] = json!("both");
    docs.push(serde_json::to_string(&by_name).unwrap());
    docs.push(serde_json::to_string(&both).unwrap());
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, docs.join("\n---\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pairs: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("name"), s("rule"))
        })
        .collect();
    let has = |name: &str, rule: &str| pairs.iter().any(|(n, r)| n == name && r == rule);
    assert!(has("by-name", "WIN-HOSTNETWORK"), "{text}");
    assert!(!has("both", "WIN-HOSTNETWORK"), "{text}");
}
