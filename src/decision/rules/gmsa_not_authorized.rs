//! WIN-GMSA-NOT-AUTHORIZED: the pod's service account may not `use` the
//! GMSACredentialSpec it names.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::gmsa;
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-NOT-AUTHORIZED",
        title: "service account may not use the gMSA credential spec",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "For each `gmsaCredentialSpecName` of the pod, its containers, init containers and ephemeral containers: may the pod's service account (`spec.serviceAccountName`, `default` when unset) `use` that `gmsacredentialspecs` object in the pod's namespace? The webhook asks the API server with a LocalSubjectAccessReview on CREATE (and for containers added through `ephemeralcontainers`). Silent when the answer is not known (`lint`, `report --from-file`).",
        why: "A gMSA is an Active Directory identity: a pod that may name any credential spec may run as any of them. The upstream gMSA webhook refuses the pod (403) for the pod and `containers` only; winadmit checks init and ephemeral containers too, and checks a pod without `serviceAccountName` as `default` (the upstream checks the empty name). When the API server cannot be asked (an error or the deadline), the webhook refuses as the upstream does: this answer is the security boundary, so it is never assumed.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/#configure-cluster-role-to-enable-rbac-on-specific-gmsa-credential-specs",
        fix: "Grant the service account verb `use` on the credential spec: a ClusterRole with `apiGroups: [windows.k8s.io]`, `resources: [gmsacredentialspecs]`, `verbs: [use]`, `resourceNames: [NAME]`, and a RoleBinding in the pod's namespace to the ServiceAccount.",
        example: "spec:\n  serviceAccountName: web   # no RoleBinding grants it use on webapp1\n  securityContext:\n    windowsOptions:\n      gmsaCredentialSpecName: webapp1",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "exported in policy winadmit-gmsa (admission_policy::gmsa), which asks CEL's authorizer.serviceAccount() whether the pod's service account may `use` each credential spec it names, not among each rule's validations",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some((facts, namespace, account)) = gmsa_pod::user(cx) else {
        return;
    };
    for (name, field) in gmsa_pod::spec_names(cx) {
        let Some(answer) = facts.authz(namespace, account, name) else {
            continue;
        };
        if !answer.allowed {
            let reason = if answer.reason.is_empty() {
                String::new()
            } else {
                format!(", reason: {:?}", answer.reason)
            };
            out.report(
                field,
                format!(
                    "service account {account:?} is not authorized to `use` GMSA cred spec {name:?}{reason}: {}",
                    gmsa::grant_hint(namespace, account, name)
                ),
            );
        }
    }
}
