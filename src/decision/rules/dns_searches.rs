//! WIN-DNS-SEARCHES: Windows pods use one DNS search suffix.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-DNS-SEARCHES",
        title: "Windows pods use only one DNS search suffix",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`dnsConfig.searches` with more than one suffix on a Windows pod.",
        why: "Windows resolves with a single DNS suffix, the one of the pod's namespace, and treats any name containing a dot as fully qualified (no partial-name resolution). Extra search suffixes are ignored, so short names that resolve on Linux fail on Windows.",
        source: "Layer: name resolution inside the Windows container (the Windows DNS client), every Kubernetes version and runtime; the API server and the kubelet accept the field. Kubernetes Windows docs, 'DNS' (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'): on Windows there is only one DNS suffix, the one associated with the pod's namespace; Windows treats all names with a '.' as FQDNs and skips PQDN resolution.",
        doc_url: "https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/#dns-windows",
        fix: "Keep one search suffix and use fully qualified names (`svc.other-ns.svc.cluster.local`) for everything else.",
        example: "dnsConfig:\n  searches:\n  - ns1.svc.cluster.local\n  - my.dns.search.suffix",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(searches) = cx
        .spec
        .dns_config
        .as_ref()
        .and_then(|d| d.searches.as_ref())
    else {
        return;
    };
    if searches.len() > 1 {
        out.report(
            cx.spec_field(&["dnsConfig", "searches"]),
            format!(
                "{} DNS search suffixes; Windows uses only one (the pod namespace's) and ignores the rest: use fully qualified names",
                searches.len()
            ),
        );
    }
}

/// WIN-DNS-SEARCHES as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.dnsConfig) && has(variables.spec.dnsConfig.searches) && size(variables.spec.dnsConfig.searches) > 1",
            &["dnsConfig", "searches"],
        )],
        "Windows uses only one DNS search suffix (the pod namespace's) and ignores the rest: use fully qualified names",
    )
}
