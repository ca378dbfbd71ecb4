//! One decoded request to its answer: the cheap checks before the object is
//! read (operation, kind, subresource), the workload, the decision (with
//! the server's facts about the cluster and the request), and each
//! endpoint's response built from it.

use std::borrow::Cow;

use kube::core::TypeMeta;
use kube::core::admission::AdmissionResponse;
use kube::core::response::StatusSummary;

use super::admit::joined;
use super::envelope::{RequestIn, raw_object, raw_objects, text};
use super::{
    Admission, Counted, Endpoint, Resolved, ReviewSummary, ReviewVerdict, allow, invalid, skip,
};
use crate::decision::decide::{self, Decision, Verdict};
use crate::decision::engine::{Context, Evaluation};
use crate::decision::finding::FixKind;
use crate::decision::patch;
use crate::decision::policy::Policy;
use crate::decision::workload::{Kind, Workload};

/// A review answered before any decision: skipped (not something winadmit
/// checks) or invalid (unusable), with the note for logs.
enum Undecided {
    Skip(ReviewVerdict, String),
    Invalid(String),
}

impl Undecided {
    fn answer(self, types: &TypeMeta, summary: &mut ReviewSummary) -> AdmissionResponse {
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

pub(super) fn respond(
    adm: &Admission,
    endpoint: Endpoint,
    body: &[u8],
    req: &RequestIn<'_>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
    resolved: Resolved<'_>,
) -> AdmissionResponse {
    let (kind, ephemeral) = match triage(&adm.policy, req, summary) {
        Ok(k) => k,
        Err(early) => return early.answer(types, summary),
    };
    let Some(view) = req.object.as_ref() else {
        return Undecided::Invalid("request.object is missing".to_owned()).answer(types, summary);
    };
    // A declared kind's template is read from the object as a tree: the
    // view has no field for a path only the policy knows.
    let trees = if kind == Kind::Declared {
        raw_objects(body)
    } else {
        (None, None)
    };
    let templates = &adm.policy.pod_templates;
    let declared = match trees.0.as_ref().map(|t| templates.read(t)).transpose() {
        Ok(d) => d,
        Err(e) => return Undecided::Invalid(format!("winadmit: {e}")).answer(types, summary),
    };
    let declared_old = trees.1.as_ref().and_then(|t| templates.read(t).ok());
    let view = declared.as_ref().unwrap_or(view);
    let old_view = declared_old.as_ref().or(req.old_object.as_ref());
    let Some(mut workload) = Workload::from_view(view) else {
        let note = "request.object is not a workload (apiVersion/kind)";
        return Undecided::Skip(ReviewVerdict::Skipped, note.to_owned()).answer(types, summary);
    };
    if let Some(note) = workload.note() {
        return Undecided::Skip(ReviewVerdict::Skipped, note).answer(types, summary);
    }
    let request_ns = text(req.namespace.as_ref());
    if workload.namespace.is_none() && !request_ns.is_empty() {
        workload.namespace = Some(request_ns);
    }
    if summary.name.is_empty() {
        workload.name.clone_into(&mut summary.name);
    }
    let old = if summary.operation == "UPDATE" {
        old_view.and_then(Workload::from_view)
    } else {
        None
    };
    let tree = ReviewTree {
        declared: trees.0.as_ref(),
        body,
    };
    let patch = match endpoint {
        Endpoint::Mutate | Endpoint::Admit => decide::PatchSource::Patch(&tree),
        Endpoint::Validate => decide::PatchSource::None,
    };
    let decision = decide_review(
        adm,
        req,
        &workload,
        old.as_ref(),
        ephemeral,
        patch,
        resolved,
    );
    endpoint_response(endpoint, decision, &workload, types, summary)
}

/// The endpoint's answer on the decision: an exempt object is allowed
/// untouched; `/admit` with nothing to patch answers as `/validate`.
fn endpoint_response(
    endpoint: Endpoint,
    decision: Decision,
    workload: &Workload<'_, '_>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    if let Some(exemption) = &decision.exemption {
        let note = exemption.reason().to_owned();
        return Undecided::Skip(ReviewVerdict::Exempt, note).answer(types, summary);
    }
    match endpoint {
        // Nothing to patch: `/validate`'s answer on this decision, with
        // the warnings `/mutate` would give first.
        Endpoint::Admit if decision.patch.is_empty() => {
            let mut r = validate_response(&decision, workload, types, summary);
            r.warnings = joined(Some(decision.patch_warnings()), r.warnings.take());
            r
        }
        Endpoint::Mutate | Endpoint::Admit => mutate_response(decision, workload, types, summary),
        Endpoint::Validate => validate_response(&decision, workload, types, summary),
    }
}

/// The object of a review as a tree, for a patch to settle on: a declared
/// kind's was read already; otherwise it is parsed only when needed.
struct ReviewTree<'b> {
    declared: Option<&'b serde_json::Value>,
    body: &'b [u8],
}

impl decide::Tree for ReviewTree<'_> {
    fn tree(&self) -> Option<Cow<'_, serde_json::Value>> {
        match self.declared {
            Some(tree) => Some(Cow::Borrowed(tree)),
            None => raw_object(self.body)
                .and_then(|o| serde_json::from_str(o.get()).ok())
                .map(Cow::Owned),
        }
    }
}

/// The cheap checks, before touching the object: the operation, the kind
/// and the subresource. Returns the kind and whether only the ephemeral
/// containers are judged.
fn triage(
    policy: &Policy,
    req: &RequestIn<'_>,
    summary: &ReviewSummary,
) -> Result<(Kind, bool), Undecided> {
    let operation = summary.operation.as_str();
    if matches!(operation, "DELETE" | "CONNECT") {
        let note = format!("{operation} is not checked");
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note));
    }
    let gvk = req.kind.as_ref();
    let group = text(gvk.and_then(|k| k.group.as_ref()));
    let version = text(gvk.and_then(|k| k.version.as_ref()));
    let api_version = if group.is_empty() {
        Cow::Borrowed(version)
    } else {
        Cow::Owned(format!("{group}/{version}"))
    };
    let Some(kind) = policy.pod_templates.kind_of(&api_version, &summary.kind) else {
        let note = "kind is not a workload".to_owned();
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note));
    };
    match text(req.sub_resource.as_ref()) {
        "" => Ok((kind, false)),
        "ephemeralcontainers" if kind == Kind::Pod => Ok((kind, true)),
        other => {
            let note = format!("subresource {other} is not checked");
            Err(Undecided::Skip(ReviewVerdict::Skipped, note))
        }
    }
}

/// The decision on a review's object, with what the server knows of the
/// cluster and of the request.
fn decide_review(
    adm: &Admission,
    req: &RequestIn<'_>,
    workload: &Workload<'_, '_>,
    old: Option<&Workload<'_, '_>>,
    ephemeral: bool,
    patch: decide::PatchSource<'_>,
    resolved: Resolved<'_>,
) -> Decision {
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
    let labels = |ns: &str, key: &str| adm.namespaces.as_ref()?.label(ns, key);
    let request = decide::Request {
        labels: &labels,
        mode: None,
        user: req
            .user_info
            .as_ref()
            .map(|u| (text(u.username.as_ref()), groups.as_slice())),
        operation: if text(req.operation.as_ref()) == "UPDATE" {
            decide::Operation::Update { old, ephemeral }
        } else {
            decide::Operation::Create
        },
        patch,
        reach: true,
    };
    // One snapshot for the whole review (and its settle rounds).
    let runtime_classes = adm.namespaces.as_ref().and_then(|n| n.runtime_classes());
    let nodes = adm.namespaces.as_ref().and_then(|n| n.nodes());
    let cx = Context {
        cluster: adm.cluster.clone(),
        runtime_classes: runtime_classes.as_deref(),
        nodes: nodes.as_deref().filter(|n| !n.is_empty()),
        images: resolved.images,
        gmsa: resolved.gmsa,
    };
    decide::decide(&adm.policy, &cx, workload, &request)
}

/// `/mutate`'s answer: the settled patch and its explanations.
fn mutate_response(
    decision: Decision,
    workload: &Workload<'_, '_>,
    types: &TypeMeta,
    summary: &mut ReviewSummary,
) -> AdmissionResponse {
    let uid = summary.uid.clone();
    let mut r = allow(types, &uid);
    if decision.patch.is_empty() {
        summary.verdict = ReviewVerdict::Allowed;
        let warnings = decision.patch_warnings();
        if !warnings.is_empty() {
            r.warnings = Some(warnings);
        }
        return r;
    }
    let spec = workload.spec_path.pointer();
    summary.verdict = ReviewVerdict::Patched;
    summary.patch_ops = decision.patch.ops.len();
    summary.patch_rules = patch_rules(&decision.evaluation, &decision.patch, &spec);
    let warnings = decision.patch_warnings();
    let mut r = match r.with_patch(json_patch::Patch(decision.patch.ops)) {
        Ok(r) => r,
        Err(e) => {
            let reason = format!("internal error: cannot serialize the patch: {e}");
            skip(summary, ReviewVerdict::Invalid, reason.clone());
            return invalid(types, &uid, &reason);
        }
    };
    r.warnings = Some(warnings);
    r
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
