//! Which of the known nodes a pod's node constraints admit, as the
//! scheduler and the kubelet read them: `spec.nodeName`, the
//! `nodeSelector` (every pair), and the required node affinity (any term;
//! in a term, every `matchExpressions` requirement on the node's labels and
//! every `matchFields` requirement on its name). Kubernetes'
//! `component-helpers/scheduling/corev1/nodeaffinity` is the reference.
//!
//! Taints are not read: a pod that does not tolerate a node's taint is kept
//! off it (Pending), not sent elsewhere, and WIN-TAINT-TOLERATION says so.

use std::collections::BTreeMap;

use super::nodes::{WindowsNode, WindowsNodes};
use crate::decision::view::{NodeSelectorTermView, RequirementView, SpecView};

/// Does the pod spec constrain its nodes at all (a node name, a node
/// selector, or required node affinity)?
#[must_use]
pub fn constrains(spec: &SpecView<'_>) -> bool {
    spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || spec.node_selector.as_ref().is_some_and(|s| !s.is_empty())
        || spec.required_node_terms().is_some()
}

/// Does the pod spec admit the node `name` with `labels`?
#[must_use]
pub fn admits(spec: &SpecView<'_>, name: &str, labels: &BTreeMap<String, String>) -> bool {
    if let Some(bound) = spec.node_name.as_deref().filter(|n| !n.is_empty())
        && bound != name
    {
        return false;
    }
    let selected = spec.node_selector.as_ref().is_none_or(|s| {
        s.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v))
    });
    selected
        && spec
            .required_node_terms()
            .is_none_or(|terms| terms.iter().any(|t| term_admits(t, name, labels)))
}

/// The known nodes a pod spec admits, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted<'n> {
    /// The Windows nodes it admits, by name.
    pub windows: Vec<&'n str>,
    /// How many other nodes it admits.
    pub linux: usize,
}

impl WindowsNodes {
    /// The Windows nodes a pod with this spec may land on: those its node
    /// name, selector and affinity admit; all of them when they admit none
    /// (so that a typo does not hide the facts).
    #[must_use]
    pub fn for_pod(&self, spec: &SpecView<'_>) -> Vec<&WindowsNode> {
        let admitted: Vec<&WindowsNode> = self
            .nodes
            .iter()
            .filter(|n| admits(spec, &n.name, &n.labels))
            .collect();
        if admitted.is_empty() {
            self.nodes.iter().collect()
        } else {
            admitted
        }
    }

    /// The known nodes `spec`'s node constraints admit.
    #[must_use]
    pub fn admitted(&self, spec: &SpecView<'_>) -> Admitted<'_> {
        Admitted {
            windows: self
                .nodes
                .iter()
                .filter(|n| admits(spec, &n.name, &n.labels))
                .map(|n| n.name.as_str())
                .collect(),
            linux: self
                .linux
                .iter()
                .filter(|n| admits(spec, &n.name, &n.labels))
                .count(),
        }
    }
}

/// A term admits a node when every requirement holds; a term with none
/// admits no node.
fn term_admits(
    term: &NodeSelectorTermView<'_>,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|r| {
        holds(
            r,
            r.key
                .as_deref()
                .and_then(|k| labels.get(k))
                .map(String::as_str),
        )
    }) && fields.iter().all(|r| {
        let value = (r.key.as_deref() == Some("metadata.name")).then_some(name);
        holds(r, value)
    })
}

/// One requirement on a label (or field) whose value is `value` (`None`
/// when the node has no such label).
fn holds(r: &RequirementView<'_>, value: Option<&str>) -> bool {
    let values = || r.values.iter().flatten().map(|v| &**v);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_deref() {
        Some("In") => value.is_some_and(|v| values().any(|x| x == v)),
        Some("NotIn") => value.is_none_or(|v| values().all(|x| x != v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        Some(op @ ("Gt" | "Lt")) => {
            let (Some(have), Some(bound)) =
                (value.and_then(number), values().next().and_then(number))
            else {
                return false;
            };
            if op == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> String {
        json.to_string()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn admits_json(json: &str, name: &str, l: &BTreeMap<String, String>) -> bool {
        let s: SpecView<'_> = serde_json::from_str(json).unwrap();
        admits(&s, name, l)
    }

    #[test]
    fn node_name_selector_and_affinity_as_the_scheduler_reads_them() {
        let win = labels(&[
            ("kubernetes.io/os", "windows"),
            ("agentpool", "win22"),
            ("rank", "7"),
        ]);
        let lin = labels(&[("kubernetes.io/os", "linux"), ("agentpool", "sys")]);
        let by_name = spec(serde_json::json!({"nodeName": "win-1"}));
        assert!(admits_json(&by_name, "win-1", &win));
        assert!(!admits_json(&by_name, "lin-1", &lin));
        let pool = spec(serde_json::json!({"nodeSelector": {"agentpool": "win22"}}));
        assert!(admits_json(&pool, "win-1", &win) && !admits_json(&pool, "lin-1", &lin));
        let terms = |terms: serde_json::Value| {
            spec(serde_json::json!({"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
        };
        let fields = terms(serde_json::json!([{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["win-1"]}]}]));
        assert!(admits_json(&fields, "win-1", &win) && !admits_json(&fields, "lin-1", &lin));
        let not_linux = terms(serde_json::json!([{"matchExpressions": [
            {"key": "kubernetes.io/os", "operator": "NotIn", "values": ["linux"]}]}]));
        assert!(admits_json(&not_linux, "win-1", &win) && !admits_json(&not_linux, "lin-1", &lin));
        // Terms are ORed; requirements in a term are ANDed.
        let either = terms(serde_json::json!([
            {"matchExpressions": [{"key": "agentpool", "operator": "In", "values": ["sys"]}]},
            {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["5"]},
                                  {"key": "gpu", "operator": "DoesNotExist"}]}]));
        assert!(admits_json(&either, "win-1", &win) && admits_json(&either, "lin-1", &lin));
        let lower = terms(serde_json::json!([{"matchExpressions": [
            {"key": "rank", "operator": "Lt", "values": ["5"]}]}]));
        assert!(!admits_json(&lower, "win-1", &win) && !admits_json(&lower, "lin-1", &lin));
        // An empty term admits no node.
        let empty = terms(serde_json::json!([{}]));
        assert!(!admits_json(&empty, "win-1", &win));
        let none = spec(serde_json::json!({}));
        assert!(admits_json(&none, "win-1", &win));
        let s: SpecView<'_> = serde_json::from_str(&none).unwrap();
        assert!(!constrains(&s));
    }
}
