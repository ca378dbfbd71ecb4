//! The ways a pod reaches a Windows node, as pod spec fragments, for a
//! cluster whose nodes are labelled as managed pools label them: Linux
//! nodes `linux-1`, `linux-2` (`agentpool: sys`, os-sku `Ubuntu`, GKE
//! `cos`) and Windows nodes `win22-1`, `win22-2` (`agentpool: win22`,
//! os-sku `Windows2022`, GKE `windows_ltsc`), each with its
//! `kubernetes.io/hostname`, all with `env: prod`, the Windows ones tainted
//! `os=windows:NoSchedule`.

use serde_json::{Value, json};

/// The labels of a node of pool `pool` (`sys` or `win22`).
pub fn pool_labels(pool: &str) -> [(&'static str, &'static str); 4] {
    let windows = pool == "win22";
    [
        ("agentpool", if windows { "win22" } else { "sys" }),
        (
            "kubernetes.azure.com/os-sku",
            if windows { "Windows2022" } else { "Ubuntu" },
        ),
        (
            "cloud.google.com/gke-os-distribution",
            if windows { "windows_ltsc" } else { "cos" },
        ),
        ("env", "prod"),
    ]
}

pub fn required(expressions: Value) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [expressions]}}})
}

/// The ways whose constraints admit only the Windows nodes, each a pod
/// spec fragment.
pub fn windows_only_ways() -> Vec<(&'static str, Value)> {
    vec![
        ("nodeName", json!({"nodeName": "win22-1"})),
        (
            "hostname selector",
            json!({"nodeSelector": {"kubernetes.io/hostname": "win22-2"}}),
        ),
        (
            "pool label",
            json!({"nodeSelector": {"agentpool": "win22"}}),
        ),
        (
            "GKE OS label",
            json!({"nodeSelector": {"cloud.google.com/gke-os-distribution": "windows_ltsc"}}),
        ),
        // The API server accepts one value for a field selector's `In`.
        (
            "matchFields",
            json!({"affinity": required(json!({"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["win22-2"]}]}))}),
        ),
        (
            "AKS os-sku affinity",
            json!({"affinity": required(json!({"matchExpressions": [
                {"key": "kubernetes.azure.com/os-sku", "operator": "In", "values": ["Windows2022"]}]}))}),
        ),
        (
            "os NotIn [linux]",
            json!({"affinity": required(json!({"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["linux"]}]}))}),
        ),
    ]
}

/// The ways that admit both kinds of node.
pub fn both_sides_ways() -> Vec<(&'static str, Value)> {
    vec![
        (
            "preferred affinity only",
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}}]}}}),
        ),
        (
            "toleration of the Windows taint",
            json!({"tolerations": [{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}]}),
        ),
        (
            "tolerates everything",
            json!({"tolerations": [{"operator": "Exists"}]}),
        ),
        ("no selector at all", json!({})),
        (
            "a label every node has",
            json!({"nodeSelector": {"env": "prod"}}),
        ),
    ]
}
