//! WIN-GMSA-AUTHZ-UNKNOWN: whether the pod's service account may `use` the
//! GMSACredentialSpec it names could not be asked.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-AUTHZ-UNKNOWN",
        title: "gMSA credential spec authorization not checked",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Any,
        what: "For each `gmsaCredentialSpecName` of the pod, its containers, init containers and ephemeral containers: `winadmit report` against a cluster asks with a SubjectAccessReview whether the pod's service account may `use` it; this rule reports the names it could not ask about (the report's identity may not create `subjectaccessreviews.authorization.k8s.io`, or the call failed).",
        why: "The answer is unknown, which is not a refusal: the report says so rather than call the pod unauthorized (WIN-GMSA-NOT-AUTHORIZED) or pass it in silence. The webhook never reports this: it refuses a pod whose authorization it cannot ask.",
        source: "Kubernetes docs, 'Authorization: checking API access' (SubjectAccessReview) and 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access",
        fix: "Run the report as an identity that may create SubjectAccessReviews (a ClusterRole with `apiGroups: [authorization.k8s.io]`, `resources: [subjectaccessreviews]`, `verbs: [create]`), or check with `kubectl auth can-i use gmsacredentialspecs.windows.k8s.io/NAME --as system:serviceaccount:NAMESPACE:ACCOUNT -n NAMESPACE`.",
        example: "spec:\n  serviceAccountName: web   # the report may not ask whether web may use webapp1\n  securityContext:\n    windowsOptions:\n      gmsaCredentialSpecName: webapp1",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "says that the live report could not ask a SubjectAccessReview; an admission policy asks nothing: nothing to export",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some((facts, namespace, account)) = gmsa_pod::user(cx) else {
        return;
    };
    for (name, field) in gmsa_pod::spec_names(cx) {
        if facts.authz(namespace, account, name).is_some() {
            continue;
        }
        if let Some(why) = facts.unasked(namespace, account, name) {
            out.report(
                field,
                format!(
                    "whether service account {account:?} may `use` GMSA cred spec {name:?} is unknown: {why}; check with `kubectl auth can-i use gmsacredentialspecs.windows.k8s.io/{name} --as system:serviceaccount:{namespace}:{account} -n {namespace}`"
                ),
            );
        }
    }
}
