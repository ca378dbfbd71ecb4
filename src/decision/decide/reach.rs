//! Which exemption applies to an evaluated object: the policy's, then the
//! webhook's reach; and the one exemption that never covers the security
//! boundary, a namespace's opt-out label.

use super::{Decision, Exemption, Request};
use crate::decision::policy::Policy;
use crate::decision::rules;
use crate::decision::workload::Workload;

/// What the exemptions leave of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reached {
    /// Judged on every finding.
    Judged,
    /// Exempt: not judged.
    Exempt,
    /// Opted out by a namespace label, judged on its boundary findings
    /// alone (the others are dropped).
    BoundaryOnly,
}

/// Sets `decision.exemption` from its evaluation and the request, and
/// says what is left to judge. A namespace's labels are its author's to
/// set: an opt-out label (`reach.optOutNamespaceLabels`) takes the
/// namespace out of every rule but the security boundary (the gMSA
/// registrations, which leave the label out of their namespaceSelector,
/// still send its pods). A namespace excluded by name stays exempt.
pub(super) fn exempt(
    policy: &Policy,
    w: &Workload<'_, '_>,
    request: &Request<'_>,
    decision: &mut Decision,
) -> Reached {
    let labels = |key: &str| (request.labels)(w.namespace?, key);
    decision.exemption = match &decision.evaluation.exempt {
        Some(reason) => Some(Exemption::Policy(reason.clone())),
        None => w
            .namespace
            .filter(|_| request.reach)
            .and_then(|ns| policy.outside_reach(ns, labels))
            .map(Exemption::Reach),
    };
    if decision.exemption.is_none() {
        return Reached::Judged;
    }
    let by_label = matches!(decision.exemption, Some(Exemption::Reach(_)))
        && w.namespace
            .is_some_and(|ns| !policy.reach.excluded_namespaces.iter().any(|n| n == ns));
    let findings = &mut decision.evaluation.findings;
    if by_label && findings.iter().any(|f| rules::is_boundary(f.rule)) {
        findings.retain(|f| rules::is_boundary(f.rule));
        decision.exemption = None;
        return Reached::BoundaryOnly;
    }
    Reached::Exempt
}
