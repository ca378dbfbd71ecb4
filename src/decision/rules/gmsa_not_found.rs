//! WIN-GMSA-NOT-FOUND: the pod names a GMSACredentialSpec the cluster does
//! not have.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::gmsa::CredSpec;
use crate::decision::rules::cel::{Export, NEEDS_GMSA_OBJECTS};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-NOT-FOUND",
        title: "gMSA credential spec not found",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "`windowsOptions.gmsaCredentialSpecName` of the pod, every container, init container and ephemeral container, against the cluster's `GMSACredentialSpec` objects (`windows.k8s.io`, cluster-scoped). Silent when they are not known: the webhook without its gMSA switch, `lint` and `report` without GMSACredentialSpec objects in their input.",
        why: "Admission fills `gmsaCredentialSpec` in from the named object; without it the container gets no Active Directory identity. The upstream gMSA webhook refuses such a pod from its mutating webhook (404 `cred spec NAME does not exist`), and only for the pod and `containers`: winadmit checks init and ephemeral containers too.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Create the GMSACredentialSpec (`apiVersion: windows.k8s.io/v1`, `kind: GMSACredentialSpec`, with its `credspec`), or name one that exists.",
        example: "securityContext:\n  windowsOptions:\n    gmsaCredentialSpecName: webapp1   # no GMSACredentialSpec webapp1",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap(NEEDS_GMSA_OBJECTS),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(facts) = cx.gmsa else { return };
    for (name, field) in gmsa_pod::spec_names(cx) {
        // An empty name is WIN-WINDOWSOPTIONS-FORMAT's.
        if !name.is_empty() && facts.spec(name) == Some(&CredSpec::Missing) {
            out.report(
                field,
                format!(
                    "GMSACredentialSpec {name:?} does not exist (cred spec {name} does not exist): create it or name one that exists"
                ),
            );
        }
    }
}
