//! The one decision every entry point shares: from (policy, cluster facts,
//! object, request context) to a [`Decision`] — whether the object targets
//! Windows and why, its findings, the exemption that applied, what each
//! finding does under the mode, the admission warnings and denial text,
//! the settled patch `/mutate` returns and the verdict the API server
//! reaches after that patch (mutating admission runs before validation, so
//! an error the patch removes is no error).
//!
//! `/validate`, `/mutate`, `/report`, `lint`, `lint --fix`, `report
//! --from-file` and the live `report` all call [`decide`]; the entry points only
//! decode their input and encode the decision. Pure: no I/O, no clock.
//! What an entry point knows of the cluster comes in through [`Request::labels`]
//! and the engine [`Context`].
//!
//! The settled patch and the verdict after it are worked out in `patching`;
//! the warning and denial texts in `messages`.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decision::engine::{self, Context, Evaluation};
use crate::decision::finding::{Finding, Severity};
use crate::decision::patch::Mutation;
use crate::decision::policy::{Mode, Policy};
use crate::decision::workload::{Kind, Workload};

pub(crate) mod messages;
mod patching;
mod reach;
use patching::patch_and_verdict;
use reach::Reached;

pub use messages::MAX_WARNING_KEPT_CHARS;

/// Kubernetes' guidance for a warning's length: 120 characters.
pub const MAX_WARNING_CHARS: usize = 120;
/// Beyond this many warnings the rest are summarized in one line.
pub const MAX_WARNINGS: usize = 20;
/// The denial message lists at most this many findings, then says how many
/// more there are: a pod with thousands of containers must not get a
/// message of megabytes (the API server stores it in events and logs).
pub const MAX_DENIAL_FINDINGS: usize = 50;

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
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Admitted without a word.
    #[default]
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

impl From<Outcome> for Verdict {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Deny => Self::Deny,
            Outcome::Warn => Self::Warn,
            Outcome::Audit | Outcome::Silent => Self::Allow,
        }
    }
}

/// Why an object is not judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "by", content = "reason")]
pub enum Exemption {
    /// The requesting user or group is exempt by policy: nothing is
    /// evaluated.
    User(String),
    /// The policy exempts the object (namespace, labels): no findings.
    Policy(String),
    /// The webhook is not called for the namespace (`reach`): admission
    /// never sees it, so the verdict is allow; the findings stay, for the
    /// operator to read. An opt-out label never covers the security
    /// boundary ([`crate::decision::rules::BOUNDARY`]): with a boundary
    /// finding the object is judged on those findings alone, and carries
    /// no exemption.
    Reach(String),
}

impl Exemption {
    #[must_use]
    pub fn reason(&self) -> &str {
        match self {
            Self::User(r) | Self::Policy(r) | Self::Reach(r) => r,
        }
    }
}

/// What the request does (admission's operation; files and reports are
/// previewed as a CREATE).
#[derive(Clone, Copy)]
pub enum Operation<'r> {
    /// A new object: every finding counts, and the patch may set fields
    /// that are immutable on pods.
    Create,
    /// An UPDATE: only what it introduces counts, so an object admitted
    /// earlier (or under audit) stays deletable, labelable and
    /// finalizable.
    Update {
        /// The object before the update, when the request has it.
        old: Option<&'r Workload<'r, 'r>>,
        /// The `ephemeralcontainers` subresource: only the ephemeral
        /// containers are judged and patched.
        ephemeral: bool,
    },
}

/// The object as a tree, for the patch to settle on.
pub trait Tree {
    /// The tree, or `None` when the object cannot be read as one.
    fn tree(&self) -> Option<Cow<'_, Value>>;
}

impl Tree for Value {
    fn tree(&self) -> Option<Cow<'_, Value>> {
        Some(Cow::Borrowed(self))
    }
}

/// What an entry point needs of the patch, and where the object's tree comes
/// from (asked for only when there is something to patch: the webhook
/// keeps only a borrowed view on its fast path).
#[derive(Clone, Copy)]
pub enum PatchSource<'r> {
    /// No patch: `/validate` (in a cluster, the API server has already
    /// applied `/mutate`'s patch to what it sends).
    None,
    /// The settled patch only (`/mutate`): the verdict after it is not
    /// computed, and the object's tree is asked for only when the patch
    /// changes targeting and the view cannot settle it.
    Patch(&'r dyn Tree),
    /// The settled patch, the patched object and the verdict after the
    /// patch (reports, `lint --fix`).
    Preview(&'r dyn Tree),
}

/// What an entry point knows of the request beyond the object.
pub struct Request<'r> {
    /// A label of a namespace, as far as the entry point knows the cluster (the
    /// webhook's cache, the report's Namespace objects).
    pub labels: &'r dyn Fn(&str, &str) -> Option<String>,
    /// A mode that overrides the namespace's mode label (`report --mode`).
    pub mode: Option<Mode>,
    /// The requesting user and groups, when known.
    pub user: Option<(&'r str, &'r [String])>,
    pub operation: Operation<'r>,
    pub patch: PatchSource<'r>,
    /// Judge as the webhook does, within its reach (admission, reports);
    /// `lint` judges a manifest wherever it is applied.
    pub reach: bool,
}

impl Request<'_> {
    /// A manifest (`lint`): a CREATE, nobody asking, no labels known, the
    /// webhook's reach not applied.
    #[must_use]
    pub fn manifest(patch: PatchSource<'_>) -> Request<'_> {
        Request {
            labels: &|_, _| None,
            mode: None,
            user: None,
            operation: Operation::Create,
            patch,
            reach: false,
        }
    }
}

/// One counted finding: its index in `evaluation.findings`, the mode that
/// applied and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingOutcome {
    pub index: usize,
    pub mode: Mode,
    pub outcome: Outcome,
}

/// One object's decision.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// Targeting and its reason, every finding, skipped rules.
    pub evaluation: Evaluation,
    pub exemption: Option<Exemption>,
    /// The mode the namespace (or the entry point) selects; rules may override it.
    pub mode: Option<Mode>,
    /// The findings admission acts on (an UPDATE counts only what it
    /// introduces), with their outcome.
    pub counted: Vec<FindingOutcome>,
    /// What `/validate` answers for the object as given.
    pub validation: Verdict,
    /// The rules whose findings only the audit annotation records.
    pub audited: Vec<&'static str>,
    /// The denied rules the policy lets an annotation skip here (the
    /// denial offers the opt-out for these only).
    pub skippable: Vec<&'static str>,
    /// The settled, reinvocation-safe patch (empty when nothing changes, or
    /// when the entry point asked for none).
    pub patch: Mutation,
    /// The object with the patch applied, when there is a patch.
    pub patched: Option<Value>,
    /// The evaluation of the patched object (a [`PatchSource::Preview`]
    /// with a patch): which findings the patch removes.
    pub after: Option<Evaluation>,
    /// What the client gets once both webhooks have answered: `/validate`'s
    /// verdict on the patched object, and at least a warning when there is
    /// a patch (`/mutate` explains each change in one). Computed with
    /// [`PatchSource::Preview`]; otherwise it is `validation`, raised to a
    /// warning when there is a patch.
    pub verdict: Verdict,
}

impl Decision {
    /// The findings `/validate` denies, in order.
    pub fn denied(&self) -> impl Iterator<Item = &Finding> {
        self.counted
            .iter()
            .filter(|c| c.outcome == Outcome::Deny)
            .map(|c| &self.evaluation.findings[c.index])
    }

    /// The denial message, when `/validate` denies: what kubectl prints
    /// after `admission webhook "..." denied the request: `.
    #[must_use]
    pub fn denial_message(&self, workload: &Workload<'_, '_>) -> Option<String> {
        let denied: Vec<&Finding> = self.denied().collect();
        (!denied.is_empty())
            .then(|| messages::denial(workload, &self.evaluation, &denied, &self.skippable))
    }

    /// `/validate`'s warnings: one per finding it warns about, written to
    /// fit, at most [`MAX_WARNINGS`] lines.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        let mut warned = self
            .counted_findings()
            .filter(|(_, c)| c.outcome == Outcome::Warn);
        let lines: Vec<String> = warned
            .by_ref()
            .take(MAX_WARNINGS)
            .map(|(f, _)| messages::warning(f))
            .collect();
        let more = warned.count();
        let mut lines = if lines.is_empty() {
            lines
        } else {
            messages::cap_warnings(lines, more)
        };
        lines.extend(self.exception_warnings());
        lines
    }

    /// One warning per rule an exception covers: the rule, the exception
    /// and its end date ([`messages::exceptions`]).
    #[must_use]
    pub fn exception_warnings(&self) -> Vec<String> {
        messages::exceptions(&self.evaluation)
    }

    /// `/mutate`'s warnings: one per change of the patch, then its notes.
    #[must_use]
    pub fn patch_warnings(&self) -> Vec<String> {
        let m = &self.patch;
        let lines: Vec<String> = m
            .explanations
            .iter()
            .zip(&m.fixes)
            .map(|(why, fixed)| messages::mutation_warning(why, fixed.as_ref()))
            .chain(m.notes.iter().cloned())
            .collect();
        if lines.is_empty() {
            lines
        } else {
            messages::cap_warnings(lines, 0)
        }
    }

    /// The counted findings with their outcome.
    pub fn counted_findings(&self) -> impl Iterator<Item = (&Finding, &FindingOutcome)> {
        self.counted
            .iter()
            .map(|c| (&self.evaluation.findings[c.index], c))
    }
}

/// Decides one workload: `w` is the object as the entry point read it, its
/// namespace filled in from the request when the object names none.
#[must_use]
pub fn decide(
    policy: &Policy,
    cx: &Context<'_>,
    w: &Workload<'_, '_>,
    request: &Request<'_>,
) -> Decision {
    if let Some((user, groups)) = request.user
        && let Some(reason) = policy.exempt_user(user, groups)
    {
        return Decision {
            exemption: Some(Exemption::User(reason)),
            ..Decision::default()
        };
    }
    // On an UPDATE of a Pod, the gMSA rules compare with the pod before it.
    let with_previous;
    let updated;
    let cx = match (request.operation, cx.gmsa) {
        (Operation::Update { old: Some(old), .. }, Some(facts))
            if w.kind == Kind::Pod && old.kind == Kind::Pod =>
        {
            with_previous = crate::decision::gmsa::Facts {
                previous: Some(
                    old.spec
                        .map(crate::decision::gmsa::previous)
                        .unwrap_or_default(),
                ),
                ..facts.clone()
            };
            updated = Context {
                gmsa: Some(&with_previous),
                ..cx.clone()
            };
            &updated
        }
        _ => cx,
    };
    let mut decision = Decision {
        evaluation: engine::evaluate(policy, w, cx),
        ..Decision::default()
    };
    let reached = reach::exempt(policy, w, request, &mut decision);
    if reached == Reached::Exempt {
        return decision;
    }
    let labels = |key: &str| (request.labels)(w.namespace?, key);
    let mode = request.mode.or_else(|| namespace_mode(policy, labels));
    decision.mode = mode;
    count(policy, cx, w, request, &mut decision);
    decision.validation = decision
        .counted
        .iter()
        .map(|c| Verdict::from(c.outcome))
        .max()
        .unwrap_or(Verdict::Allow);
    decision.verdict = decision.validation;
    if reached == Reached::BoundaryOnly {
        // Nothing else is judged or patched there.
        return decision;
    }
    match request.patch {
        PatchSource::None => {}
        PatchSource::Patch(tree) => {
            patch_and_verdict(policy, cx, w, request, tree, false, &mut decision);
        }
        PatchSource::Preview(tree) => {
            patch_and_verdict(policy, cx, w, request, tree, true, &mut decision);
        }
    }
    decision
}

/// Which findings count, and what each does under the mode.
fn count(
    policy: &Policy,
    cx: &Context<'_>,
    w: &Workload<'_, '_>,
    request: &Request<'_>,
    decision: &mut Decision,
) {
    let (preexisting, ephemeral) = match request.operation {
        Operation::Create => (HashSet::new(), false),
        Operation::Update { old, ephemeral } => {
            let old = old
                .filter(|o| o.kind == w.kind)
                .map(|o| {
                    engine::evaluate(policy, o, cx)
                        .findings
                        .into_iter()
                        .map(|f| (f.rule, f.field.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            (old, ephemeral)
        }
    };
    // Built only for the ephemeralcontainers subresource.
    let ephemeral_key = ephemeral.then(|| w.spec_path.key("ephemeralContainers"));
    for (index, f) in decision.evaluation.findings.iter().enumerate() {
        if !preexisting.is_empty() && preexisting.contains(&(f.rule, f.field.to_string())) {
            continue;
        }
        if ephemeral_key
            .as_ref()
            .is_some_and(|k| !f.field.starts_with(k))
        {
            continue;
        }
        let mode = policy.mode_for(f.rule, decision.mode);
        let outcome = outcome(f.severity, mode);
        decision.counted.push(FindingOutcome {
            index,
            mode,
            outcome,
        });
        if outcome == Outcome::Audit && !decision.audited.contains(&f.rule) {
            decision.audited.push(f.rule);
        }
        if outcome == Outcome::Deny
            && !decision.skippable.contains(&f.rule)
            && policy.skippable(f.rule, w.namespace)
        {
            decision.skippable.push(f.rule);
        }
    }
}

/// `1 error`, `2 errors`: a count with the word its number needs.
#[must_use]
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The mode a namespace selects with the policy's `namespaceModeLabel`
/// (`labels` reads the namespace's labels), if it names one.
pub fn namespace_mode(policy: &Policy, labels: impl Fn(&str) -> Option<String>) -> Option<Mode> {
    labels(&policy.namespace_mode_label).and_then(|v| v.parse::<Mode>().ok())
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
        .map(|f| Verdict::from(outcome(f.severity, policy.mode_for(f.rule, namespace_mode))))
        .max()
        .unwrap_or(Verdict::Allow)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_exceptions;
