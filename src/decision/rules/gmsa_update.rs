//! WIN-GMSA-UPDATE: an UPDATE changes a pod's gMSA settings.

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::gmsa::Place;
use crate::decision::rules::cel::Export;
use crate::decision::view::ContainerList;
use crate::decision::workload::Kind;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-GMSA-UPDATE",
        title: "gMSA settings changed on an existing pod",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "On an UPDATE of a Pod, `gmsaCredentialSpecName` and `gmsaCredentialSpec` of the pod and of each container, init container and ephemeral container (matched by name) are what they were, compared as exact text as the upstream gMSA webhook does. An ephemeral container added by the update is judged as on CREATE (existence, contents, authorization) instead. Only where the webhook's gMSA switch is on.",
        why: "The identity of a running pod cannot change, and a change would skip the authorization and contents checks made on CREATE. The upstream gMSA webhook refuses it (403) for the pod and `containers`.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Delete the pod and create it with the new gMSA settings (a Deployment does this when its template changes).",
        example: "# kubectl apply of an existing pod with another gmsaCredentialSpecName",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "the API server already refuses changes to a pod's windowsOptions (pod spec immutability); nothing to add",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(previous) = cx.gmsa.and_then(|f| f.previous.as_ref()) else {
        return;
    };
    if cx.workload.kind != Kind::Pod {
        return;
    }
    for o in gmsa_pod::options(cx) {
        let old = previous.iter().find(|p| p.place == o.place);
        if old.is_none()
            && matches!(
                o.place,
                Place::Container(ContainerList::EphemeralContainers, _)
            )
        {
            continue;
        }
        let (old_name, old_contents) =
            old.map_or((None, None), |p| (p.name.as_deref(), p.contents.as_deref()));
        let name = old_name != o.options.gmsa_credential_spec_name.as_deref();
        let contents = old_contents != o.options.gmsa_credential_spec.as_deref();
        let what = match (name, contents) {
            (false, false) => continue,
            (true, false) => "name",
            (false, true) => "contents",
            (true, true) => "name and contents",
        };
        out.report(
            o.path.clone(),
            format!(
                "cannot update an existing pod's GMSA settings (GMSA {what} modified on {}): delete the pod and create it anew",
                o.place
            ),
        );
    }
}
