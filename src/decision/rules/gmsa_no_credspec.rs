//! WIN-GMSA-NO-CREDSPEC: the named GMSACredentialSpec has no contents.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::gmsa::CredSpec;
use crate::decision::rules::cel::{Export, NEEDS_GMSA_OBJECTS};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-NO-CREDSPEC",
        title: "gMSA credential spec without contents",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "The `GMSACredentialSpec` a pod or any of its containers names has a `credspec` key with contents. Silent when the cluster's credential specs are not known.",
        why: "The CRD does not require `credspec`, but there is nothing to give the container without it. The upstream gMSA webhook refuses the pod (417 `cred spec NAME does not have a credspec key`).",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Add the credential spec's JSON (as `New-CredentialSpec` writes it) under `credspec` in the GMSACredentialSpec object.",
        example: "apiVersion: windows.k8s.io/v1\nkind: GMSACredentialSpec\nmetadata:\n  name: webapp1   # no credspec",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap(NEEDS_GMSA_OBJECTS),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(facts) = cx.gmsa else { return };
    for (name, field) in gmsa_pod::spec_names(cx) {
        if facts.spec(name) == Some(&CredSpec::Found(None)) {
            out.report(
                field,
                format!(
                    "GMSACredentialSpec {name:?} has no contents (cred spec {name} does not have a credspec key): add them under credspec"
                ),
            );
        }
    }
}
