//! What follows the evaluation, once, for every door: what each finding
//! does under the mode, the settled patch, and the verdict the API server
//! would reach after that patch (mutating admission runs before validation,
//! so an error the patch removes is no error).
//!
//! Pure: no I/O, no clock. The webhook, `lint` and `report` call these
//! instead of keeping their own copies of the mode table.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{self, Context, Evaluation};
use crate::finding::{PatchOp, Severity};
use crate::patch::{self, Mutation, MutationContext};
use crate::policy::{Mode, Policy};

/// What admission does with one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The request is denied.
    Deny,
    /// Allowed, with an admission warning.
    Warn,
    /// Allowed; recorded in the audit annotation, logs and metrics.
    Audit,
    /// Advice (info): for lint and reports only.
    Silent,
}

/// The one table of what a finding of `severity` does in `mode`.
#[must_use]
pub fn outcome(severity: Severity, mode: Mode) -> Outcome {
    match (severity, mode) {
        (Severity::Info, _) => Outcome::Silent,
        (_, Mode::Audit) => Outcome::Audit,
        (Severity::Error, Mode::Enforce) => Outcome::Deny,
        _ => Outcome::Warn,
    }
}

/// What admission would do with an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Admitted without a word.
    Allow,
    /// Admitted, with warnings returned to the client.
    Warn,
    /// Rejected.
    Deny,
}

impl Verdict {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Warn => "warn",
            Self::Deny => "deny",
        }
    }
}

/// The verdict `/validate` gives an evaluated object, in the mode the
/// namespace label (if any) selects, with per-rule modes applied: the
/// strongest of its findings' outcomes; an exempt object is allowed.
#[must_use]
pub fn verdict(policy: &Policy, eval: &Evaluation, namespace_mode: Option<Mode>) -> Verdict {
    if eval.exempt.is_some() {
        return Verdict::Allow;
    }
    eval.findings
        .iter()
        .map(
            |f| match outcome(f.severity, policy.mode_for(f.rule, namespace_mode)) {
                Outcome::Deny => Verdict::Deny,
                Outcome::Warn => Verdict::Warn,
                Outcome::Audit | Outcome::Silent => Verdict::Allow,
            },
        )
        .max()
        .unwrap_or(Verdict::Allow)
}

/// One object's decision: its findings, the settled patch `/mutate` would
/// return, and the verdict after that patch.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The object as written.
    pub evaluation: Evaluation,
    /// The settled, reinvocation-safe patch (empty when nothing changes).
    pub patch: Mutation,
    /// The object with the patch applied, when there is a patch.
    pub patched: Option<Value>,
    /// What the client gets once both webhooks have answered: `/validate`'s
    /// verdict on the patched object, and at least a warning when there is
    /// a patch (`/mutate` explains each change in one).
    pub verdict: Verdict,
}

/// What a door knows of the request beyond the object.
pub struct Request<'r> {
    pub mutation: MutationContext<'r>,
    /// Fills in an object without a namespace.
    pub namespace: Option<&'r str>,
    /// The namespace's mode label (or a previewed mode).
    pub namespace_mode: Option<Mode>,
    /// Filters patch operations (a pod UPDATE may only touch ephemeral
    /// containers).
    pub keep: &'r dyn Fn(&PatchOp) -> bool,
}

/// Decides one object: `doc` is the object, `evaluation` the engine's
/// evaluation of it (the caller already has it).
#[must_use]
pub fn decide(
    policy: &Policy,
    cx: &Context<'_>,
    doc: &Value,
    evaluation: Evaluation,
    request: &Request<'_>,
) -> Decision {
    let Request {
        mutation: mcx,
        namespace,
        namespace_mode,
        keep,
    } = *request;
    let patch = if evaluation.exempt.is_some() {
        Mutation::default()
    } else {
        patch::settle(policy, cx, mcx, doc, namespace, keep)
    };
    let mut patched = None;
    let verdict = if patch.is_empty() {
        verdict(policy, &evaluation, namespace_mode)
    } else {
        let mut v = doc.clone();
        // settle only returns operations that apply to this document.
        let after = patch::apply(&mut v, &patch.ops)
            .ok()
            .and_then(|()| evaluate_value(policy, cx, &v, namespace));
        patched = Some(v);
        let after = match after {
            Some(after) => verdict(policy, &after, namespace_mode),
            None => verdict(policy, &evaluation, namespace_mode),
        };
        // /mutate explains each change in a warning: the client sees them.
        after.max(Verdict::Warn)
    };
    Decision {
        evaluation,
        patch,
        patched,
        verdict,
    }
}

fn evaluate_value(
    policy: &Policy,
    cx: &Context<'_>,
    doc: &Value,
    namespace: Option<&str>,
) -> Option<Evaluation> {
    use serde::Deserialize as _;
    let view = crate::view::ObjectView::deserialize(doc).ok()?;
    let mut w = crate::workload::Workload::from_view(&view)?;
    if w.namespace.is_none() {
        w.namespace = namespace;
    }
    Some(engine::evaluate(policy, &w, cx))
}
