//! WIN-DNS-HOSTNET: dnsPolicy ClusterFirstWithHostNet is not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-DNS-HOSTNET",
        title: "ClusterFirstWithHostNet on a HostProcess pod uses the node DNS",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`dnsPolicy: ClusterFirstWithHostNet`.",
        why: "Windows does not support host networking for ordinary containers, and treats every name containing a '.' as fully qualified, so partial-name resolution through ClusterFirstWithHostNet does not work.",
        source: "On a HostProcess pod the node's DNS configuration is used, so cluster names may not resolve; elsewhere the policy acts as ClusterFirst. Kubernetes documentation 'Create a Windows HostProcess Pod' and 'Windows containers in Kubernetes' > Networking.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Use `dnsPolicy: ClusterFirst` (the default).",
        example: "spec:\n  dnsPolicy: ClusterFirstWithHostNet",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The finding's message, in the check and in the export.
const MESSAGE: &str = "dnsPolicy ClusterFirstWithHostNet on a HostProcess pod uses the node's DNS settings: cluster names may not resolve";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    // Without HostProcess the policy acts as ClusterFirst: nothing to say.
    if cx.host_process.any && cx.spec.dns_policy.as_deref() == Some("ClusterFirstWithHostNet") {
        out.report(cx.spec_field(&["dnsPolicy"]), MESSAGE);
    }
}

/// WIN-DNS-HOSTNET as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            "variables.anyHostProcess && has(variables.spec.dnsPolicy) && variables.spec.dnsPolicy == 'ClusterFirstWithHostNet'",
            &["dnsPolicy"],
        )],
        MESSAGE,
    )
}
