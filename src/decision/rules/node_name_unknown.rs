//! WIN-NODE-NAME-UNKNOWN: a pod bound by `spec.nodeName` to a node the
//! cluster does not have (yet).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-NODE-NAME-UNKNOWN",
        title: "Pod bound to a node the cluster does not have",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Any,
        what: "A pod with no owner whose `spec.nodeName` names no node of the cluster, when the cluster's nodes are known (the webhook's cluster cache once listed, a live `report`, Node objects in the input). Info in the default policy; `rules: {WIN-NODE-NAME-UNKNOWN: error}` refuses such pods.",
        why: "A pod created with `spec.nodeName` skips the scheduler: it runs on whatever node of that name joins the cluster later, Windows or Linux. Until then winadmit cannot tell its OS, so it judges only what holds on every OS (it never denies a Linux pod for a Windows rule), and `winadmit audit` judges it again when the node joins. No core controller creates such pods (the scheduler binds through `pods/binding`; static pods' mirror pods name a node that exists), so a cluster can refuse them.",
        source: "Layer: the API server and the kubelet, every Kubernetes version: a pod with `spec.nodeName` is stored as it is whether or not the node exists, and the kubelet of a node that registers under that name runs it (Kubernetes docs, 'Assigning Pods to Nodes', nodeName: 'If the named node does not exist, the Pod will not run, and in some cases may be automatically deleted').",
        doc_url: "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        fix: "Select the node by its labels (`nodeSelector`, node affinity) and let the scheduler place the pod, or create the pod once the node has joined.",
        example: "spec:\n  nodeName: win-7   # no such node yet\n  containers:\n  - name: app\n    image: registry.example/app:1",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("needs the cluster's nodes, which an admission policy cannot read"),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(name) = cx.spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
        return;
    };
    // A pod a controller made was bound by the scheduler to a node that
    // existed then; one that outlives its node is the node's, not this.
    if cx.workload.owned {
        return;
    }
    // Only a complete list of the nodes tells a missing one.
    let Some(nodes) = cx.nodes.filter(|n| n.linux_known) else {
        return;
    };
    let known =
        nodes.nodes.iter().any(|n| n.name == name) || nodes.linux.iter().any(|n| n.name == name);
    if !known {
        out.report(
            cx.spec_field(&["nodeName"]),
            format!(
                "node {name} is not a node of the cluster (yet): its OS is unknown, so only what holds on every OS was judged, and the pod runs on whatever node of that name joins"
            ),
        );
    }
}
