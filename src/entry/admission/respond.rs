//! One decoded request to its answer: the workload read after the cheap
//! checks (`decoded`), the decision (with the server's facts about the
//! cluster and the request), and each endpoint's response built from it.
//!
//! `/admit` is `/mutate` and `/validate` in one call: `/mutate`'s patch,
//! then `/validate`'s verdict on the object with that patch applied, which
//! is what the two webhooks answer between them when no other mutating
//! webhook runs after winadmit's. The patched object is the decision's own
//! patch applied to the object's tree, judged with the same request.

use kube::core::TypeMeta;
use kube::core::admission::AdmissionResponse;
use kube::core::response::StatusSummary;

use super::decoded::{Decoded, Subject, Undecided, with_workload};
use super::envelope::{RequestIn, text};
use super::{
    Admission, Counted, Endpoint, Resolved, ReviewSummary, ReviewVerdict, allow, invalid, skip,
};
use crate::decision::decide::{self, Decision, Verdict};
use crate::decision::engine::{Context, Evaluation};
use crate::decision::finding::FixKind;
use crate::decision::patch;
use crate::decision::workload::Workload;

impl Undecided {
    pub(super) fn answer(self, types: &TypeMeta, summary: &mut ReviewSummary) -> AdmissionResponse {
        match self {
            Self::Skip(verdict, note) => {
                skip(summary, verdict, note);
                allow(types, &summary.uid)
            }
            Self::Invalid(reason) => {
                skip(summary, ReviewVerdict::Invalid, reason.clone());
                invalid(types, &summary.uid, &reason)
            }
        }
    }
}

/// What one request's answer is built from.
pub(super) struct Review<'r, 'b> {
    pub(super) adm: &'r Admission,
    pub(super) endpoint: Endpoint,
    pub(super) decoded: &'r Decoded<'b>,
    pub(super) req: &'r RequestIn<'b>,
    pub(super) types: &'r TypeMeta,
    pub(super) resolved: Resolved<'r>,
}

pub(super) fn respond(review: &Review<'_, '_>, summary: &mut ReviewSummary) -> AdmissionResponse {
    let answered = with_workload(&review.adm.policy, review.decoded, review.req, |subject| {
        if summary.name.is_empty() {
            subject.workload.name.clone_into(&mut summary.name);
        }
        let patch = match review.endpoint {
            Endpoint::Mutate | Endpoint::Admit => decide::PatchSource::Patch(review.decoded),
            Endpoint::Validate => decide::PatchSource::None,
        };
        let decision = decide_review(review, &subject, patch);
        endpoint_response(review, decision, &subject, summary)
    });
    answered.unwrap_or_else(|undecided| undecided.answer(review.types, summary))
}

/// The endpoint's answer on the decision: an exempt object is allowed
/// untouched; `/admit` with nothing to patch answers as `/validate`.
fn endpoint_response(
    review: &Review<'_, '_>,
    decision: Decision,
    subject: &Subject<'_, '_>,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    let (workload, types) = (&subject.workload, review.types);
    if let Some(exemption) = &decision.exemption {
        let note = exemption.reason().to_owned();
        return Undecided::Skip(ReviewVerdict::Exempt, note).answer(types, summary);
    }
    match review.endpoint {
        // Nothing to patch: `/validate`'s answer on this decision, with
        // the warnings `/mutate` would give first.
        Endpoint::Admit if decision.patch.is_empty() => {
            let mut r = validate_response(&decision, workload, types, summary);
            r.warnings = joined(Some(decision.patch_warnings()), r.warnings.take());
            r
        }
        Endpoint::Admit => admit_response(review, decision, subject, summary),
        Endpoint::Mutate => mutate_response(decision, workload, types, summary),
        Endpoint::Validate => validate_response(&decision, workload, types, summary),
    }
}

/// The object of a review as a tree, for a patch to settle on: built from
/// the body at most once per review.
impl decide::Tree for Decoded<'_> {
    fn tree(&self) -> Option<std::borrow::Cow<'_, serde_json::Value>> {
        self.trees(false)
            .object
            .as_ref()
            .map(std::borrow::Cow::Borrowed)
    }
}

/// `/admit` with a patch: the patch, refused instead when `/validate`
/// would deny the patched object. A denial carries no patch; an allowed
/// object gets the patch and the warnings of both.
fn admit_response(
    review: &Review<'_, '_>,
    decision: Decision,
    subject: &Subject<'_, '_>,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    let types = review.types;
    let patched = match patched_object(review.decoded, &decision.patch.ops) {
        Ok(patched) => patched,
        Err(reason) => {
            let reason = format!("internal error: {reason}");
            return Undecided::Invalid(reason).answer(types, summary);
        }
    };
    let warnings = mark_patched(&decision, &subject.workload, summary);
    let (patch_ops, patch_rules) = (summary.patch_ops, summary.patch_rules.clone());
    let mut r = match validate_patched(review, subject, &patched, summary) {
        Ok(Some(r)) => r,
        // Nothing the validating webhook would judge: allowed.
        Ok(None) => allow(types, &summary.uid),
        Err(undecided) => return undecided.answer(types, summary),
    };
    r.warnings = joined(Some(warnings), r.warnings.take());
    if !r.allowed {
        summary.patch_ops = 0;
        summary.patch_rules.clear();
        return r;
    }
    summary.verdict = ReviewVerdict::Patched;
    summary.patch_ops = patch_ops;
    summary.patch_rules = patch_rules;
    with_patch(r, decision.patch.ops, types, summary)
}

/// `/validate`'s answer on the patched object, judged with the same
/// request; `None` when it is no workload to judge, or exempt.
fn validate_patched(
    review: &Review<'_, '_>,
    subject: &Subject<'_, '_>,
    patched: &serde_json::Value,
    summary: &mut ReviewSummary,
) -> Result<Option<AdmissionResponse>, Undecided> {
    let view = review
        .adm
        .policy
        .pod_templates
        .read(patched)
        .map_err(|e| Undecided::Invalid(format!("winadmit: {e}")))?;
    let Some(mut workload) = Workload::from_view(&view).filter(|w| w.note().is_none()) else {
        return Ok(None);
    };
    if workload.namespace.is_none() {
        workload.namespace = subject.workload.namespace;
    }
    let after = Subject {
        workload,
        old: subject.old.clone(),
        ephemeral: subject.ephemeral,
    };
    let validation = decide_review(review, &after, decide::PatchSource::None);
    if validation.exemption.is_some() {
        return Ok(None);
    }
    Ok(Some(validate_response(
        &validation,
        &after.workload,
        review.types,
        summary,
    )))
}

/// The review's object with `ops` applied, as the API server sends it to
/// the validating webhook after the mutating one.
fn patched_object(
    decoded: &Decoded<'_>,
    ops: &[crate::decision::finding::PatchOperation],
) -> Result<serde_json::Value, String> {
    let mut object = decoded
        .object_tree_owned()
        .ok_or("the review has no request.object")?;
    patch::apply(&mut object, ops).map_err(|e| format!("the patch does not apply: {e}"))?;
    Ok(object)
}

/// The warnings of two answers, the first's first, with no repeats.
fn joined(first: Option<Vec<String>>, second: Option<Vec<String>>) -> Option<Vec<String>> {
    let mut all = first.unwrap_or_default();
    for w in second.into_iter().flatten() {
        if !all.contains(&w) {
            all.push(w);
        }
    }
    (!all.is_empty()).then_some(all)
}

/// The decision on a review's object, with what the server knows of the
/// cluster and of the request.
fn decide_review(
    review: &Review<'_, '_>,
    subject: &Subject<'_, '_>,
    patch: decide::PatchSource<'_>,
) -> Decision {
    let (adm, req) = (review.adm, review.req);
    // The groups are copied only when the policy exempts some.
    let groups: Vec<String> = if adm.policy.exemptions.groups.is_empty() {
        Vec::new()
    } else {
        req.user_info
            .iter()
            .flat_map(|u| u.groups.iter().flatten())
            .map(ToString::to_string)
            .collect()
    };
    let labels = |ns: &str, key: &str| adm.lookup.as_ref()?.label(ns, key);
    let request = decide::Request {
        labels: &labels,
        mode: None,
        user: req
            .user_info
            .as_ref()
            .map(|u| (text(u.username.as_ref()), groups.as_slice())),
        operation: if text(req.operation.as_ref()) == "UPDATE" {
            decide::Operation::Update {
                old: subject.old.as_ref(),
                ephemeral: subject.ephemeral,
            }
        } else {
            decide::Operation::Create
        },
        patch,
        reach: true,
    };
    // One snapshot for the whole review (and its settle rounds).
    let runtime_classes = adm.lookup.as_ref().and_then(|n| n.runtime_classes());
    let nodes = adm.lookup.as_ref().and_then(|n| n.nodes());
    let exceptions = adm
        .lookup
        .as_ref()
        .and_then(|n| n.exceptions(crate::entry::exceptions::clock()));
    let cx = Context {
        cluster: adm.target.clone(),
        runtime_classes: runtime_classes.as_deref(),
        nodes: nodes.as_deref().filter(|n| n.any_known()),
        images: review.resolved.images,
        gmsa: review.resolved.gmsa,
        exceptions: exceptions.as_deref(),
    };
    decide::decide(&adm.policy, &cx, &subject.workload, &request)
}

/// `/mutate`'s answer: the settled patch and its explanations.
fn mutate_response(
    decision: Decision,
    workload: &Workload<'_, '_>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    let mut r = allow(types, &summary.uid);
    if decision.patch.is_empty() {
        summary.verdict = ReviewVerdict::Allowed;
        let warnings = decision.patch_warnings();
        if !warnings.is_empty() {
            r.warnings = Some(warnings);
        }
        return r;
    }
    r.warnings = Some(mark_patched(&decision, workload, summary));
    with_patch(r, decision.patch.ops, types, summary)
}

/// Counts a patch in the summary (its operations and the rules behind it)
/// and returns its warnings.
fn mark_patched(
    decision: &Decision,
    workload: &Workload<'_, '_>,
    summary: &mut ReviewSummary,
) -> Vec<String> {
    let spec = workload.spec_path.pointer();
    summary.verdict = ReviewVerdict::Patched;
    summary.patch_ops = decision.patch.ops.len();
    summary.patch_rules = patch_rules(&decision.evaluation, &decision.patch, &spec);
    decision.patch_warnings()
}

/// `r` with the patch `ops`, or `invalid` when the patch cannot be
/// serialized.
fn with_patch(
    r: AdmissionResponse,
    ops: Vec<crate::decision::finding::PatchOperation>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    r.with_patch(json_patch::Patch(ops)).unwrap_or_else(|e| {
        let reason = format!("internal error: cannot serialize the patch: {e}");
        skip(summary, ReviewVerdict::Invalid, reason.clone());
        invalid(types, &summary.uid, &reason)
    })
}

/// `/validate`'s answer: the decision's verdict on the object as given.
fn validate_response(
    decision: &Decision,
    workload: &Workload<'_, '_>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    summary.findings = decision
        .counted_findings()
        .map(|(f, c)| Counted {
            rule: f.rule,
            severity: f.severity,
            mode: c.mode,
        })
        .collect();
    let mut r = allow(types, &summary.uid);
    if !decision.audited.is_empty() {
        r.audit_annotations
            .insert("winadmit.io/audit".to_owned(), decision.audited.join(","));
    }
    summary.verdict = match decision.validation {
        Verdict::Deny => ReviewVerdict::Denied,
        Verdict::Warn => ReviewVerdict::Warned,
        Verdict::Allow if !decision.audited.is_empty() => ReviewVerdict::Audited,
        Verdict::Allow => ReviewVerdict::Allowed,
    };
    if let Some(message) = decision.denial_message(workload) {
        r = r.deny(message);
        r.result.code = 403;
        r.result.reason = "Forbidden".to_owned();
        r.result.status = Some(StatusSummary::Failure);
    }
    let warnings = decision.warnings();
    if !warnings.is_empty() {
        r.warnings = Some(warnings);
    }
    r
}

/// The rules behind a patch: findings whose fix operations it holds, the
/// scheduling findings when it changes node selection, and the rules whose
/// findings the later rounds of settling fixed.
fn patch_rules(eval: &Evaluation, m: &patch::Mutation, spec_pointer: &str) -> Vec<&'static str> {
    let targeting = m
        .ops
        .iter()
        .any(|op| patch::changes_targeting(op, spec_pointer));
    let mut ids: Vec<&'static str> = Vec::new();
    let mut add = |id: &'static str| {
        if !ids.contains(&id) {
            ids.push(id);
        }
    };
    for f in &eval.findings {
        let Some(fix) = &f.fix else { continue };
        let behind = match fix.kind {
            FixKind::Scheduling | FixKind::PinByImages => targeting,
            FixKind::RemoveNoOp | FixKind::EmptyDirOffMemory | FixKind::InlineCredentialSpec => fix
                .ops
                .iter()
                .any(|op| m.ops.iter().any(|o| o.path() == op.path())),
        };
        if behind {
            add(f.rule);
        }
    }
    for id in m.fixed_rules() {
        add(id);
    }
    ids
}
