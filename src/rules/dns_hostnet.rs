//! WIN-DNS-HOSTNET: dnsPolicy ClusterFirstWithHostNet is not supported on Windows.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-DNS-HOSTNET",
        title: "dnsPolicy ClusterFirstWithHostNet is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`dnsPolicy: ClusterFirstWithHostNet`.",
        why: "Windows does not support host networking for ordinary containers, and treats every name containing a '.' as fully qualified, so partial-name resolution through ClusterFirstWithHostNet does not work.",
        source: "Kubernetes Windows docs, 'Networking' > DNS: ClusterFirstWithHostNet is not supported for DNS; 'API' > V1.Pod: `v1.Pod.dnsPolicy` - ClusterFirstWithHostNet is not supported because host networking is not supported (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Use `dnsPolicy: ClusterFirst` (the default).",
        example: "spec:\n  dnsPolicy: ClusterFirstWithHostNet",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    if cx.spec.dns_policy.as_deref() == Some("ClusterFirstWithHostNet") {
        out.report(
            cx.spec_field(&["dnsPolicy"]),
            "dnsPolicy ClusterFirstWithHostNet is not supported on Windows nodes; use ClusterFirst",
        );
    }
}
