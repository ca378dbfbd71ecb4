//! WIN-GMSA-INLINE: `gmsaCredentialSpecName` without the contents the
//! kubelet reads; `/mutate` fills them in.

use serde_json::Value;

use super::gmsa_pod;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind};
use crate::decision::gmsa::{self, CredSpec};
use crate::decision::rules::cel::Export;
use crate::decision::workload::Kind;

/// The rule's id.
pub const ID: &str = "WIN-GMSA-INLINE";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "gMSA credential spec to fill in",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Any,
        what: "A Pod whose pod, container, init container or ephemeral container sets `gmsaCredentialSpecName` but not `gmsaCredentialSpec`, naming a GMSACredentialSpec that has contents. Its fix, applied by `/mutate` on CREATE (and `lint --fix`), adds `gmsaCredentialSpec`: the object's `credspec` as compact JSON with sorted keys and `<`, `>`, `&` escaped, byte for byte what the upstream gMSA webhook writes. Pod templates (Deployments and the like) are not filled in: their pods are, when created, so a later change of the credential spec reaches them.",
        why: "The kubelet passes only `gmsaCredentialSpec` to the container runtime; the name alone gives the container no Active Directory identity. The upstream gMSA webhook fills in the pod and `containers` only; winadmit fills in init and ephemeral containers too.",
        source: "The upstream Windows gMSA admission webhook (kubernetes-sigs/windows-gmsa, admission-webhook/webhook.go); Kubernetes docs, 'Configure GMSA for Windows Pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-gmsa/",
        fix: "Nothing to do where winadmit's mutating webhook runs; otherwise copy the GMSACredentialSpec's `credspec` as JSON into `gmsaCredentialSpec`.",
        example: "windowsOptions:\n  gmsaCredentialSpecName: webapp1",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "a mutation from a GMSACredentialSpec's contents, which an admission policy cannot read: live facts",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(facts) = cx.gmsa else { return };
    if cx.workload.kind != Kind::Pod {
        return;
    }
    for o in gmsa_pod::options(cx) {
        let Some(name) = o.options.gmsa_credential_spec_name.as_deref() else {
            continue;
        };
        if o.options.gmsa_credential_spec.is_some() {
            continue;
        }
        let Some(CredSpec::Found(Some(stored))) = facts.spec(name) else {
            continue;
        };
        let field = o.path.key("gmsaCredentialSpec");
        let fix = Fix {
            kind: FixKind::InlineCredentialSpec,
            description: format!("fill in gmsaCredentialSpec from GMSACredentialSpec {name}"),
            ops: vec![crate::decision::finding::add_op(
                &field,
                Value::String(gmsa::canonical_json(stored)),
            )],
        };
        out.report_with_fix(
            field,
            format!(
                "gmsaCredentialSpec is not set: the kubelet reads only the contents, which the mutating webhook fills in from GMSACredentialSpec {name:?}"
            ),
            fix,
        );
    }
}
