//! The settled patch of a decision and the verdict after it: the first
//! round from the view, settled on the view when it models every
//! operation and on the tree otherwise, and, for a preview, the patched
//! object evaluated again.

use serde_json::Value;

use super::{Decision, Operation, Request, Tree, Verdict, verdict};
use crate::decision::engine::{self, Context, Evaluation};
use crate::decision::finding::PatchOperation;
use crate::decision::patch::{self, Mutation, MutationContext};
use crate::decision::policy::Policy;
use crate::decision::workload::Workload;

/// The settled patch, its warnings and the verdict after it.
pub(super) fn patch_and_verdict(
    policy: &Policy,
    cx: &Context<'_>,
    w: &Workload<'_, '_>,
    request: &Request<'_>,
    tree: &dyn Tree,
    preview: bool,
    decision: &mut Decision,
) {
    let labels = |key: &str| (request.labels)(w.namespace?, key);
    let isolation = policy
        .mutation
        .isolation_namespace_label
        .as_deref()
        .and_then(labels);
    let (create, pod_update, ephemeral) = match request.operation {
        Operation::Create => (true, false, false),
        Operation::Update { ephemeral, .. } => (
            false,
            w.kind == crate::decision::workload::Kind::Pod,
            ephemeral,
        ),
    };
    let mcx = MutationContext {
        create,
        namespace_isolation: isolation.as_deref(),
        psa_restricted_before_1_25: patch::psa_restricted_before_1_25(
            labels(patch::PSA_ENFORCE_LABEL).as_deref(),
            labels(patch::PSA_ENFORCE_VERSION_LABEL).as_deref(),
        ),
        images: cx.images,
        nodes: cx.nodes,
    };
    // A pod's spec is immutable but for ephemeral containers.
    let keep = |op: &PatchOperation| {
        !pod_update || (ephemeral && op.path().as_str().starts_with("/spec/ephemeralContainers/"))
    };
    // The first round needs only the view. Only a change of targeting
    // (spec.os, nodeSelector) can make the next evaluation find new
    // fixes (patch::changes_targeting): then the patch is settled on the
    // tree.
    let mut m = patch::mutation(policy, w, &decision.evaluation, mcx);
    m.retain(&keep);
    if m.is_empty() {
        decision.patch = m;
        return;
    }
    let spec = w.spec_path.pointer();
    let targeting = m.ops.iter().any(|op| patch::changes_targeting(op, &spec));
    if targeting && !preview {
        // Settled on the view when it models every operation (the
        // webhook's fast path); the tree is the reference otherwise.
        let on_view =
            patch::settle_on_view(policy, cx, mcx, w, &decision.evaluation, &keep, m.clone());
        if let Some(settled) = on_view {
            if !settled.is_empty() {
                decision.verdict = decision.verdict.max(Verdict::Warn);
            }
            decision.patch = settled;
            return;
        }
    }
    let needs_tree = targeting || preview;
    let Some(doc) = needs_tree.then(|| tree.tree()).flatten() else {
        decision.verdict = decision.verdict.max(Verdict::Warn);
        decision.patch = m;
        return;
    };
    if targeting {
        // The first round is the one just made from the view.
        m = patch::settle_from(policy, cx, mcx, &doc, w.namespace, &keep, Some(m));
    }
    if preview && !m.is_empty() {
        evaluate_preview(policy, cx, w.namespace, doc.into_owned(), &m, decision);
    }
    if !m.is_empty() {
        // /mutate explains each change in a warning: the client sees them.
        decision.verdict = decision.verdict.max(Verdict::Warn);
    }
    decision.patch = m;
}

/// A preview's patched object (`patched`, the document the patch applies
/// to) and its evaluation, which gives the verdict after the patch.
fn evaluate_preview(
    policy: &Policy,
    cx: &Context<'_>,
    namespace: Option<&str>,
    mut patched: Value,
    m: &Mutation,
    decision: &mut Decision,
) {
    // The operations apply to this document (settle checks it; the
    // first round's come from its own view).
    let after = patch::apply(&mut patched, &m.ops)
        .ok()
        .and_then(|()| evaluate_value(policy, cx, &patched, namespace));
    if let Some(after) = after {
        decision.verdict = verdict(policy, &after, decision.mode);
        decision.after = Some(after);
    }
    decision.patched = Some(patched);
}

/// The evaluation of a document, `None` when it is not a workload.
fn evaluate_value(
    policy: &Policy,
    cx: &Context<'_>,
    doc: &Value,
    namespace: Option<&str>,
) -> Option<Evaluation> {
    let view = policy.pod_templates.read(doc).ok()?;
    let mut w = Workload::from_view(&view)?;
    if w.namespace.is_none() {
        w.namespace = namespace;
    }
    Some(engine::evaluate(policy, &w, cx))
}
