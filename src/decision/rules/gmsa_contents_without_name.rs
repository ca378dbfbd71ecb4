//! WIN-GMSA-CONTENTS-WITHOUT-NAME: `gmsaCredentialSpec` without
//! `gmsaCredentialSpecName`.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-CONTENTS-WITHOUT-NAME",
        title: "gMSA credential spec contents without a name",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "`gmsaCredentialSpec` set without `gmsaCredentialSpecName`, on the pod, a container, an init container or an ephemeral container. Only where the cluster's GMSACredentialSpecs are known (the webhook's gMSA switch, or such objects in `lint`'s input): elsewhere, inline contents are how a pod without the gMSA webhook gets its identity.",
        why: "Without a name there is no GMSACredentialSpec to authorize and compare the contents against: the pod could claim any Active Directory identity. The upstream gMSA webhook refuses it (422) for the pod and `containers`; winadmit checks init and ephemeral containers too.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Replace `gmsaCredentialSpec` by `gmsaCredentialSpecName`, the name of the GMSACredentialSpec that holds these contents.",
        example: "windowsOptions:\n  gmsaCredentialSpec: '{\"CmsPlugins\":[\"ActiveDirectory\"]}'",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "exported in policy winadmit-gmsa (admission_policy::gmsa), which refuses it whether or not the cluster serves GMSACredentialSpecs, not among each rule's validations",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.gmsa.is_none() {
        return;
    }
    for o in gmsa_pod::options(cx) {
        if o.options.gmsa_credential_spec.is_some() && o.options.gmsa_credential_spec_name.is_none()
        {
            out.report(
                o.path.key("gmsaCredentialSpec"),
                format!(
                    "{} has a GMSA cred spec set, but does not define the name of the corresponding resource: set gmsaCredentialSpecName instead",
                    o.place
                ),
            );
        }
    }
}
