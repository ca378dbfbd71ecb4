//! Settling a mutation on the tree: apply the patch to a copy, evaluate
//! again, append what the next round would patch, until nothing new
//! appears; without `spec.os` when the settled object would be refused.

use serde_json::Value;

use super::{Mutation, MutationContext, apply, mutation};
use crate::decision::finding::PatchOperation;
use crate::decision::policy::Policy;
use crate::decision::workload::Workload;

/// Rounds of re-evaluation before giving up on a fixpoint.
pub(super) const SETTLE_ROUNDS: usize = 4;

/// Does this operation change how the pod is targeted (`spec.os`,
/// `nodeSelector`)? Only then can the next evaluation find new fixes:
/// removals only remove findings; tolerations and annotations carry none.
#[must_use]
pub fn changes_targeting(op: &PatchOperation, spec_pointer: &str) -> bool {
    op.path()
        .as_str()
        .strip_prefix(spec_pointer)
        .is_some_and(|rest| {
            rest == "/os" || rest.starts_with("/os/") || rest.starts_with("/nodeSelector")
        })
}

/// The mutation for a document, settled to a fixpoint.
///
/// One fix can make another necessary: setting `spec.os.name: windows`
/// makes the API server reject Linux-only fields it ignored before (even
/// `allowPrivilegeEscalation: false`). This applies the patch to a copy of
/// the document, evaluates the result with the same engine and policy, and
/// appends what the next round would patch, until nothing new appears, so
/// one answer is reinvocation-safe. If the settled object would still carry
/// a field the API server forbids on `spec.os.name: windows` pods, setting
/// `spec.os.name` would get the object rejected: the mutation is computed
/// again without it. `keep` filters operations (e.g. a pod UPDATE may only
/// touch ephemeral containers); `namespace` fills in an object without one.
#[must_use]
pub fn settle(
    policy: &Policy,
    cx: &crate::decision::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
) -> Mutation {
    settle_from(policy, cx, mcx, doc, namespace, keep, None)
}

/// [`settle`], given the first round's mutation when the caller has it
/// already ([`mutation`] of the same document's evaluation, filtered by
/// `keep`): the document is then evaluated from the second round on.
#[must_use]
pub fn settle_from(
    policy: &Policy,
    cx: &crate::decision::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Option<Mutation>,
) -> Mutation {
    let settled = mutate_doc(policy, cx, mcx, doc, namespace, keep, first, true);
    let Some((m, settled)) = settled else {
        return Mutation::default();
    };
    if m.sets_os() && forbids_os_fields(policy, cx, &settled, namespace) {
        return mutate_doc(policy, cx, mcx, doc, namespace, keep, None, false)
            .map(|(m, _)| m)
            .unwrap_or_default();
    }
    m
}

/// One settled mutation and the patched document, or `None` when the
/// document is not a workload. `first` is the first round's mutation, when
/// known; `set_os_name: false` overrides the policy.
#[allow(clippy::too_many_arguments)] // settle's inputs, passed through
pub(super) fn mutate_doc(
    policy: &Policy,
    cx: &crate::decision::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Option<Mutation>,
    set_os_name: bool,
) -> Option<(Mutation, Value)> {
    let mut patched = doc.clone();
    let start = usize::from(first.is_some());
    let mut m = first.unwrap_or_default();
    let mut applied = 0;
    let policy = if set_os_name {
        policy
    } else {
        policy.without_os_name()
    };
    for round in start..=SETTLE_ROUNDS {
        if apply(&mut patched, &m.ops[applied..]).is_err() {
            // A generated patch that does not apply is a bug: send nothing
            // rather than something the API server would refuse.
            m.truncate(applied);
            return Some((m, patched));
        }
        applied = m.ops.len();
        let view = policy.pod_templates.read(&patched).ok()?;
        let mut w = Workload::from_view(&view)?;
        if w.namespace.is_none() {
            w.namespace = namespace;
        }
        let eval = crate::decision::engine::evaluate(policy, &w, cx);
        let mut next = mutation(policy, &w, &eval, mcx);
        next.retain(keep);
        let more = m.absorb(next, &w.spec_path.pointer());
        if !more || round == SETTLE_ROUNDS {
            break;
        }
    }
    if apply(&mut patched, &m.ops[applied..]).is_err() {
        m.truncate(applied);
    }
    Some((m, patched))
}

/// Would the API server reject this (patched) object for a field it
/// forbids on Windows pods?
pub(super) fn forbids_os_fields(
    policy: &Policy,
    cx: &crate::decision::engine::Context<'_>,
    doc: &Value,
    namespace: Option<&str>,
) -> bool {
    let Ok(view) = policy.pod_templates.read(doc) else {
        return false;
    };
    let Some(mut w) = Workload::from_view(&view) else {
        return false;
    };
    if w.namespace.is_none() {
        w.namespace = namespace;
    }
    forbids_os_fields_in(policy, cx, &w)
}

/// [`forbids_os_fields`] of a workload already read (the settled tree's,
/// or the view with the patch applied).
pub(super) fn forbids_os_fields_in(
    policy: &Policy,
    cx: &crate::decision::engine::Context<'_>,
    w: &Workload<'_, '_>,
) -> bool {
    // Only the API server mirror, so that fields other rules report (and
    // a policy may have turned off) are counted too.
    !crate::decision::engine::evaluate(policy.api_server_mirror(), w, cx)
        .findings
        .is_empty()
}

impl Mutation {
    /// Appends the next settling round: its operations and explanations,
    /// and its notes not given yet. Returns whether that round changes
    /// targeting (`spec_pointer` is the pod spec's), so another round
    /// must follow.
    pub(super) fn absorb(&mut self, next: Mutation, spec_pointer: &str) -> bool {
        let more = next
            .ops
            .iter()
            .any(|op| changes_targeting(op, spec_pointer));
        self.ops.extend(next.ops);
        self.explanations.extend(next.explanations);
        self.fixes.extend(next.fixes);
        for note in next.notes {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        more
    }

    /// Does this patch set `spec.os`?
    pub(super) fn sets_os(&self) -> bool {
        self.ops
            .iter()
            .any(|op| op.path().as_str().ends_with("/os"))
    }

    /// Keeps the operations (and their explanations) that `keep` accepts.
    pub fn retain(&mut self, keep: &dyn Fn(&PatchOperation) -> bool) {
        let kept: Vec<bool> = self.ops.iter().map(keep).collect();
        let mut k = kept.iter();
        self.ops.retain(|_| *k.next().unwrap_or(&false));
        let mut k = kept.iter();
        self.explanations.retain(|_| *k.next().unwrap_or(&false));
        let mut k = kept.iter();
        self.fixes.retain(|_| *k.next().unwrap_or(&false));
    }
}
