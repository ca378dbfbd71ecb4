//! WIN-GMSA-CONTENTS-MISMATCH: `gmsaCredentialSpec` is not what the named
//! GMSACredentialSpec holds.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::gmsa::{self, CredSpec, Mismatch};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-CONTENTS-MISMATCH",
        title: "gMSA credential spec contents differ from the named resource",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "Where both `gmsaCredentialSpecName` and `gmsaCredentialSpec` are set (pod, containers, init and ephemeral containers), the contents equal the named object's `credspec` as JSON: byte for byte, or as JSON objects (key order and whitespace do not matter), as the upstream gMSA webhook compares them. Silent when the cluster's credential specs are not known; when the webhook cannot read the named object (an API error or its deadline), contents set in the pod are refused, as upstream does (500): they could claim any identity.",
        why: "The kubelet gives the container the identity written in `gmsaCredentialSpec`, whatever the name says: contents written by hand can claim an identity the service account was never granted. The upstream gMSA webhook refuses them (422) for the pod and `containers`; winadmit checks init and ephemeral containers too.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Remove `gmsaCredentialSpec` and keep only `gmsaCredentialSpecName`: the mutating webhook fills the contents in from the resource.",
        example: "windowsOptions:\n  gmsaCredentialSpecName: webapp1\n  gmsaCredentialSpec: '{\"CmsPlugins\":[\"ActiveDirectory\"]}'   # not webapp1's",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "exported in policy winadmit-gmsa (admission_policy::gmsa), which cannot read the GMSACredentialSpec and so refuses every gmsaCredentialSpec set with a name, not among each rule's validations",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(facts) = cx.gmsa else { return };
    for o in gmsa_pod::options(cx) {
        let (Some(name), Some(contents)) = (
            o.options.gmsa_credential_spec_name.as_deref(),
            o.options.gmsa_credential_spec.as_deref(),
        ) else {
            continue;
        };
        let stored = match facts.spec(name) {
            Some(CredSpec::Found(Some(stored))) => stored,
            Some(CredSpec::Unavailable(why)) => {
                out.report(
                    o.path.key("gmsaCredentialSpec"),
                    format!(
                        "the GMSA cred spec contents cannot be checked against GMSA resource {name:?} (unable to retrieve the contents of cred spec {name}: {why}): retry, or remove gmsaCredentialSpec and let the webhook fill it in"
                    ),
                );
                continue;
            }
            _ => continue,
        };
        let detail = match gmsa::compare(contents, stored) {
            Ok(()) => continue,
            Err(Mismatch::Different) => String::new(),
            Err(Mismatch::PodNotAnObject(e)) => {
                format!(" (unable to parse the contents as a JSON object: {e})")
            }
            Err(Mismatch::StoredNotAnObject) => {
                format!(" (unable to parse GMSACredentialSpec {name:?} as a JSON object)")
            }
        };
        out.report(
            o.path.key("gmsaCredentialSpec"),
            format!(
                "the GMSA cred spec contents for {} does not match the contents of GMSA resource {name:?}{detail}: remove gmsaCredentialSpec and let the webhook fill it in",
                o.place
            ),
        );
    }
}
