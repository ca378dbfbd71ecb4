//! AdmissionReview bytes in, AdmissionReview bytes out: the webhook's door
//! to the engine, without I/O, async or clocks.
//!
//! The envelope is decoded in one pass into a purpose-built borrowed struct
//! whose `object`/`oldObject` are read straight into [`ObjectView`], the
//! same narrow view `lint` uses. No `DynamicObject` or `serde_json::Value`
//! tree is built on the hot path (docs/BENCHMARKS.md, "Decoding",
//! has the measurements: about 3x faster than kube's
//! `AdmissionReview<DynamicObject>` on a 4 KiB pod, 6x on 30 KiB, and a
//! quarter faster than keeping the object as a `&RawValue` and parsing it
//! in a second pass). The raw object is only re-read when a patch must be
//! settled, or to name the uid of a request whose object cannot be read. Responses are
//! built with `kube::core::admission` types, in the request's API version.
//!
//! The verdict is [`engine::evaluate`]'s, post-processed only by the
//! admission mode (enforce, warn, audit) and request semantics (operation,
//! subresource, requesting user); no rule logic lives here.

use std::borrow::Cow;

use base64::Engine as _;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::response::StatusSummary;
use kube::core::{DynamicObject, TypeMeta};
use serde::Serialize;

use crate::cluster::ClusterView;
use crate::decide::messages::truncate;
use crate::decide::{self, Decision, Verdict};
use crate::engine::{Context, Evaluation};
use crate::finding::{FixKind, Severity};
use crate::patch;
use crate::policy::{Mode, Policy};
use crate::workload::{Kind, Workload};

/// `admission.k8s.io/v1`.
pub const V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1`, for old clusters.
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";
pub use crate::decide::{
    MAX_DENIAL_FINDINGS, MAX_WARNING_CHARS, MAX_WARNING_KEPT_CHARS, MAX_WARNINGS,
};

mod envelope;
pub use envelope::{Envelope, envelope};
use envelope::{RawReviewIn, RequestIn, ReviewIn, envelope_header, raw_object, raw_objects, text};

/// Which webhook is being called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Validate,
    Mutate,
    /// Both in one call (`/admit`, registered as the only, mutating,
    /// webhook): the patch `/mutate` would return, refused instead when
    /// `/validate` would deny the patched object.
    Admit,
}

impl Endpoint {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
            Self::Admit => "admit",
        }
    }
}

/// What the admission door needs: the policy, the Kubernetes version the
/// rules apply to, and what it knows about the cluster.
pub struct Admission {
    pub policy: Policy,
    /// The target cluster the verdicts are about.
    pub cluster: crate::cluster::Cluster,
    /// Namespace labels and cluster RuntimeClasses (the server's watch
    /// cache), when known.
    pub namespaces: Option<Box<dyn ClusterView>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("cluster", &self.cluster)
            .field("namespaces", &self.namespaces.is_some())
            .finish_non_exhaustive()
    }
}

/// A body that is not a usable AdmissionReview and carries no uid to answer
/// to: the server answers HTTP 400 with this message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    /// The body is not JSON, or not shaped like an AdmissionReview.
    #[error("request body is not a valid AdmissionReview: {0}")]
    Malformed(String),
    /// `apiVersion` is missing.
    #[error(
        "AdmissionReview has no apiVersion: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"
    )]
    MissingVersion,
    /// `apiVersion` is not one this server answers.
    #[error(
        "unsupported AdmissionReview apiVersion {0:?}: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"
    )]
    UnsupportedVersion(String),
    /// `kind` is not `AdmissionReview`.
    #[error("expected kind AdmissionReview, got {0:?}")]
    WrongKind(String),
    /// `request` is missing.
    #[error("AdmissionReview has no `request`")]
    MissingRequest,
    /// `request.uid` is missing or empty.
    #[error("AdmissionReview `request.uid` is missing or empty")]
    MissingUid,
}

/// The outcome of one review, for the response, logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewVerdict {
    /// Allowed with no findings (or findings only the warn mode shows).
    Allowed,
    /// Allowed, with warnings returned.
    Warned,
    /// Allowed; error findings counted and logged only (audit mode).
    Audited,
    /// Denied (enforce mode, error findings).
    Denied,
    /// Mutate: a patch was returned.
    Patched,
    /// Not evaluated: DELETE/CONNECT, a kind or subresource winadmit does
    /// not check.
    Skipped,
    /// Exempt by user, group, namespace or label selector.
    Exempt,
    /// The uid was known but the request was unusable; answered `invalid`.
    Invalid,
}

impl ReviewVerdict {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Warned => "warned",
            Self::Audited => "audited",
            Self::Denied => "denied",
            Self::Patched => "patched",
            Self::Skipped => "skipped",
            Self::Exempt => "exempt",
            Self::Invalid => "invalid",
        }
    }
}

/// One finding as reported to metrics and logs: never object contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub rule: &'static str,
    pub severity: Severity,
    pub mode: Mode,
}

/// What a review decided, with the identity of the object (no contents).
#[derive(Debug, Clone)]
pub struct ReviewSummary {
    pub uid: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub operation: String,
    pub dry_run: bool,
    pub verdict: ReviewVerdict,
    pub findings: Vec<Counted>,
    /// Why an object was skipped, exempt or invalid.
    pub note: Option<String>,
    pub patch_ops: usize,
    /// The rules whose findings the patch fixes (mutating webhook).
    pub patch_rules: Vec<&'static str>,
}

impl ReviewSummary {
    /// The distinct rule ids found, or behind the patch, comma-separated
    /// (for logs).
    #[must_use]
    pub fn rule_ids(&self) -> String {
        let mut ids: Vec<&str> = Vec::new();
        for id in self
            .findings
            .iter()
            .map(|c| c.rule)
            .chain(self.patch_rules.iter().copied())
        {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.join(",")
    }
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
            FixKind::Scheduling => targeting,
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

/// A serialized AdmissionReview response and its summary.
#[derive(Debug)]
pub struct Reviewed {
    pub body: Vec<u8>,
    pub summary: ReviewSummary,
}

/// The one-pass decode failed: if the envelope itself is sound and has a
/// uid, answer `invalid` to that uid; otherwise it is a 400.
fn recover(adm: &Admission, body: &[u8], err: &serde_json::Error) -> Result<Answer, ReviewError> {
    let raw: RawReviewIn<'_> =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    let req = raw.request.as_ref();
    let (types, uid) = envelope_header(
        raw.api_version.as_ref(),
        raw.kind.as_ref(),
        req.is_some(),
        req.and_then(|r| r.uid.as_ref()),
    )?;
    // Where it failed, by field path: `request.dryRun` is not the object.
    let located = std::str::from_utf8(body)
        .ok()
        .and_then(crate::strict::located::<ReviewIn<'_>>);
    let what = match located.as_ref().map(|(path, _)| path.as_str()) {
        Some(path) if path.starts_with("request.object") => "request.object".to_owned(),
        Some(path) if path.starts_with("request.oldObject") => "request.oldObject".to_owned(),
        Some(path) if path.starts_with("request.") => path.to_owned(),
        _ if req.and_then(|r| r.object).is_some() => "request.object".to_owned(),
        _ => "request".to_owned(),
    };
    let reason = match &located {
        Some((path, e))
            if path.starts_with("request.object.") || path.starts_with("request.oldObject.") =>
        {
            format!("{what} cannot be read: {path}: {e}")
        }
        _ => format!("{what} cannot be read: {err}"),
    };
    // For logs: serde's message can quote values from the object.
    let note = format!(
        "{what} cannot be read ({:?} error at line {}, column {})",
        err.classify(),
        err.line(),
        err.column()
    );
    let namespace = text(req.and_then(|r| r.namespace.as_ref()));
    let mut summary = ReviewSummary {
        uid: uid.to_owned(),
        kind: String::new(),
        namespace: namespace.to_owned(),
        name: String::new(),
        operation: String::new(),
        dry_run: false,
        verdict: ReviewVerdict::Invalid,
        findings: Vec::new(),
        note: Some(note),
        patch_ops: 0,
        patch_rules: Vec::new(),
    };
    // Audit and warn never deny: an object that cannot be read is allowed,
    // and the audit log (or the warning) says why.
    let policy = &adm.policy;
    let ns_mode = adm
        .namespaces
        .as_ref()
        .filter(|_| !namespace.is_empty())
        .and_then(|n| crate::decide::namespace_mode(policy, |key| n.label(namespace, key)));
    let mode = ns_mode.unwrap_or(policy.mode);
    if mode != Mode::Enforce {
        let mut r = allow(&types, uid);
        r.audit_annotations.insert(
            "winadmit.io/unreadable".to_owned(),
            format!(
                "{what} could not be read; allowed in {} mode",
                format!("{mode:?}").to_lowercase()
            ),
        );
        if mode == Mode::Warn {
            r.warnings = Some(vec![truncate(format!("winadmit: {reason}"))]);
        }
        summary.verdict = if mode == Mode::Warn {
            ReviewVerdict::Warned
        } else {
            ReviewVerdict::Audited
        };
        return Ok((r, summary));
    }
    Ok((invalid(&types, uid, &reason), summary))
}

/// Reviews one AdmissionReview body for `endpoint`.
///
/// # Errors
/// The body is not an AdmissionReview this server can answer and carries no
/// uid (HTTP 400). Requests with a uid are always answered with a review,
/// `invalid` when unusable.
pub fn review(adm: &Admission, endpoint: Endpoint, body: &[u8]) -> Result<Reviewed, ReviewError> {
    review_with(adm, endpoint, body, Resolved::default())
}

/// What the server resolved for one request before the decision, which
/// stays pure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resolved<'r> {
    /// The gMSA facts (`server::gmsa`): `None` keeps the gMSA rules silent.
    pub gmsa: Option<&'r crate::gmsa::Facts>,
    /// The image facts (`server::images`): an image without them is
    /// judged by its name.
    pub images: Option<&'r crate::images::KnownImages>,
}

/// [`review`] with the facts the server resolved for this request.
///
/// # Errors
/// As [`review`].
pub fn review_with(
    adm: &Admission,
    endpoint: Endpoint,
    body: &[u8],
    resolved: Resolved<'_>,
) -> Result<Reviewed, ReviewError> {
    let (response, summary) = if endpoint == Endpoint::Admit {
        admit_once(adm, body, resolved)?
    } else {
        answer(adm, endpoint, body, resolved)?
    };
    Ok(Reviewed {
        body: encode(response),
        summary,
    })
}

/// A review's answer before it is serialized, and its summary.
type Answer = (AdmissionResponse, ReviewSummary);

/// `/admit`: `/mutate`'s patch, then `/validate`'s verdict on the object
/// with that patch applied, which is what the two webhooks answer between
/// them when no other mutating webhook runs after winadmit's. A denial
/// carries no patch; an allowed object gets the patch and the warnings of
/// both. An object with nothing to patch is decided once: the first answer
/// is already `/validate`'s, with `/mutate`'s warnings ([`respond`]).
fn admit_once(adm: &Admission, body: &[u8], resolved: Resolved<'_>) -> Result<Answer, ReviewError> {
    let (mutated, mutated_summary) = answer(adm, Endpoint::Admit, body, resolved)?;
    let Some(patch) = mutated.patch.as_ref().filter(|_| mutated.allowed) else {
        return Ok((mutated, mutated_summary));
    };
    let (patched_body, ops) = match with_patched_object(body, patch) {
        Ok(patched) => patched,
        Err(reason) => {
            let mut summary = mutated_summary;
            let reason = format!("internal error: {reason}");
            skip(&mut summary, ReviewVerdict::Invalid, reason.clone());
            return Ok((invalid(&mutated.types, &summary.uid, &reason), summary));
        }
    };
    let (mut validated, mut summary) = answer(adm, Endpoint::Validate, &patched_body, resolved)?;
    let warnings = joined(mutated.warnings, validated.warnings.take());
    if !validated.allowed {
        validated.warnings = warnings;
        return Ok((validated, summary));
    }
    validated = match validated.with_patch(ops) {
        Ok(r) => r,
        Err(e) => {
            let reason = format!("internal error: cannot serialize the patch: {e}");
            skip(&mut summary, ReviewVerdict::Invalid, reason.clone());
            return Ok((invalid(&mutated.types, &summary.uid, &reason), summary));
        }
    };
    validated.warnings = warnings;
    summary.verdict = ReviewVerdict::Patched;
    summary.patch_ops = mutated_summary.patch_ops;
    summary.patch_rules = mutated_summary.patch_rules;
    Ok((validated, summary))
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

/// The review body with the JSON Patch applied to `request.object`, as the
/// API server sends it to the validating webhook after the mutating one,
/// and the patch's operations.
fn with_patched_object(body: &[u8], patch: &[u8]) -> Result<(Vec<u8>, json_patch::Patch), String> {
    let mut review: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("cannot re-read the review: {e}"))?;
    let ops: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| format!("cannot re-read the patch: {e}"))?;
    let object = review
        .pointer_mut("/request/object")
        .ok_or("the review has no request.object")?;
    json_patch::patch(object, &ops).map_err(|e| format!("the patch does not apply: {e}"))?;
    let body =
        serde_json::to_vec(&review).map_err(|e| format!("cannot write the patched review: {e}"))?;
    Ok((body, ops))
}

/// One endpoint's answer to a review body.
fn answer(
    adm: &Admission,
    endpoint: Endpoint,
    body: &[u8],
    resolved: Resolved<'_>,
) -> Result<Answer, ReviewError> {
    // JSON is UTF-8 (RFC 8259). The borrowed one-pass decode skips fields
    // it does not read without checking them, so check the whole body
    // first: otherwise a body with invalid UTF-8 in, say, managedFields
    // would be answered, and patched, as if it were JSON. (Found by the
    // admission_review fuzz target.)
    // Then parse it as the `str` it is: serde_json validates every string
    // it reads from a byte slice again, not from a `str`.
    let json = match std::str::from_utf8(body) {
        Ok(json) => json,
        Err(e) => {
            return Err(ReviewError::Malformed(format!(
                "invalid UTF-8 at byte {}",
                e.valid_up_to()
            )));
        }
    };
    let envelope: ReviewIn<'_> = match crate::strict::from_str(json) {
        Ok(e) => e,
        Err(e) => return recover(adm, body, &e),
    };
    let (types, uid) = envelope_header(
        envelope.api_version.as_ref(),
        envelope.kind.as_ref(),
        envelope.request.is_some(),
        envelope.request.as_ref().and_then(|r| r.uid.as_ref()),
    )?;
    let Some(req) = envelope.request.as_ref() else {
        return Err(ReviewError::MissingRequest);
    };
    let gvk = req.kind.as_ref();
    let mut summary = ReviewSummary {
        uid: uid.to_owned(),
        kind: text(gvk.and_then(|k| k.kind.as_ref())).to_owned(),
        namespace: text(req.namespace.as_ref()).to_owned(),
        name: text(req.name.as_ref()).to_owned(),
        operation: text(req.operation.as_ref()).to_owned(),
        dry_run: req.dry_run.unwrap_or(false),
        verdict: ReviewVerdict::Allowed,
        findings: Vec::new(),
        note: None,
        patch_ops: 0,
        patch_rules: Vec::new(),
    };
    let response = respond(adm, endpoint, body, req, &types, &mut summary, resolved);
    Ok((response, summary))
}

/// Serializes the answer. `AdmissionResponse.patch` is a `Vec<u8>`, which
/// serde writes as an array of numbers; the API server also reads that,
/// but the Kubernetes wire format for `[]byte` is a base64 string, about a
/// quarter of the size, so the patch is written as one.
fn encode(mut response: AdmissionResponse) -> Vec<u8> {
    #[derive(Serialize)]
    struct ResponseOut<'r> {
        #[serde(flatten)]
        response: &'r AdmissionResponse,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ReviewOut<'r> {
        api_version: &'r str,
        kind: &'r str,
        response: ResponseOut<'r>,
    }
    let patch = response
        .patch
        .take()
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p));
    let review: AdmissionReview<DynamicObject> = response.into_review();
    let out = ReviewOut {
        api_version: &review.types.api_version,
        kind: &review.types.kind,
        response: ResponseOut {
            response: review
                .response
                .as_ref()
                .expect("into_review sets the response"),
            patch,
        },
    };
    // Plain structs of strings, bools and maps: serialization cannot fail.
    serde_json::to_vec(&out).expect("an AdmissionReview serializes")
}

/// An allowed response to `uid`, in the request's API version.
fn allow(types: &TypeMeta, uid: &str) -> AdmissionResponse {
    let mut r = AdmissionResponse::invalid("");
    r.types = types.clone();
    r.uid = uid.to_owned();
    r.allowed = true;
    r.result = kube::core::Status::default();
    r
}

fn invalid(types: &TypeMeta, uid: &str, reason: &str) -> AdmissionResponse {
    let mut r = AdmissionResponse::invalid(reason);
    r.types = types.clone();
    r.uid = uid.to_owned();
    r.result.code = 400;
    r
}

fn skip(summary: &mut ReviewSummary, verdict: ReviewVerdict, note: impl Into<String>) {
    summary.verdict = verdict;
    summary.note = Some(note.into());
}

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

fn respond(
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
    if let Some(exemption) = &decision.exemption {
        let note = exemption.reason().to_owned();
        return Undecided::Skip(ReviewVerdict::Exempt, note).answer(types, summary);
    }
    match endpoint {
        // Nothing to patch: `/validate`'s answer on this decision, with
        // the warnings `/mutate` would give first.
        Endpoint::Admit if decision.patch.is_empty() => {
            let mut r = validate_response(&decision, &workload, types, summary);
            r.warnings = joined(Some(decision.patch_warnings()), r.warnings.take());
            r
        }
        Endpoint::Mutate | Endpoint::Admit => mutate_response(decision, &workload, types, summary),
        Endpoint::Validate => validate_response(&decision, &workload, types, summary),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::messages::{cap_warnings, fit_warning, mutation_warning, truncate};

    #[test]
    fn warnings_are_cut_on_char_boundaries_at_a_word() {
        let s = truncate("é ".repeat(200));
        assert!(s.chars().count() <= MAX_WARNING_KEPT_CHARS, "{s}");
        assert!(s.ends_with("é…"), "{s}");
        assert_eq!(truncate("short".into()), "short");
    }

    #[test]
    fn warnings_keep_the_rule_and_the_whole_path_first() {
        let path = "spec.template.spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpecName";
        let head = format!("WIN-GMSA {path}");
        let message = "gMSA credential spec \"webapp01\" is not found in the cluster: create the GMSACredentialSpec resource first, or remove the field";
        // Too long for 120 with the message: the rule's title fits.
        let pod =
            "WIN-GMSA spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpecName";
        let w = fit_warning(
            pod,
            &[Some(message), Some("gMSA credential spec not found")],
        );
        assert_eq!(w, format!("{pod}: gMSA credential spec not found"));
        assert!(w.chars().count() <= MAX_WARNING_CHARS);
        let seccomp = "spec.template.spec.containers[0].securityContext.seccompProfile";
        let description = "remove seccompProfile RuntimeDefault, which has no effect on Windows";
        let fixed = crate::patch::Fixed {
            rule: "WIN-SECCOMP",
            field: seccomp.to_owned(),
            description: description.to_owned(),
        };
        let w = mutation_warning(
            &format!("winadmit: {description} (WIN-SECCOMP: {seccomp})"),
            Some(&fixed),
        );
        assert_eq!(
            w,
            format!("WIN-SECCOMP {seccomp}: remove seccompProfile RuntimeDefault")
        );
        assert!(w.chars().count() <= MAX_WARNING_CHARS, "{w}");
        // Neither fits 120: the message, under the API server's 256.
        let w = fit_warning(
            &head,
            &[Some(message), Some("gMSA credential spec not found")],
        );
        assert_eq!(w, format!("{head}: {message}"));
        // A long message is cut at a word, never inside the path.
        let long = "word ".repeat(80);
        let w = fit_warning(&head, &[Some(&long), None]);
        assert!(w.starts_with(&format!("{head}: word")), "{w}");
        assert!(w.ends_with("word…"), "{w}");
        assert!(w.chars().count() <= MAX_WARNING_KEPT_CHARS);
        // A path too long for any reason: the whole path, no reason.
        let huge = format!("WIN-X metadata.annotations[{}]", "k".repeat(300));
        assert_eq!(fit_warning(&huge, &[Some(message), Some("title")]), huge);
    }

    #[test]
    fn a_patched_request_logs_the_rules_behind_the_patch() {
        let adm = Admission {
            policy: Policy::default_policy(),
            cluster: crate::cluster::Cluster::default(),
            namespaces: None,
        };
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission/pod-windows-fixable.json"
        ))
        .unwrap();
        let out = review(&adm, Endpoint::Mutate, &body).unwrap();
        assert_eq!(out.summary.verdict, ReviewVerdict::Patched);
        assert!(out.summary.patch_ops > 0);
        let rules = out.summary.rule_ids();
        assert!(!rules.is_empty(), "rules= must not be empty");
        for id in rules.split(',') {
            assert!(crate::rules::find(id).is_some(), "{id} is a rule id");
        }
    }

    #[test]
    fn too_many_warnings_are_summarized() {
        let w = cap_warnings((0..30).map(|i| format!("w{i}")).collect(), 0);
        assert_eq!(w.len(), MAX_WARNINGS);
        assert!(w.last().unwrap().contains("and 11 more"));
        let w = cap_warnings((0..20).map(|i| format!("w{i}")).collect(), 10);
        assert_eq!(w.len(), MAX_WARNINGS);
        assert!(w.last().unwrap().contains("and 11 more"));
        let w = cap_warnings((0..20).map(|i| format!("w{i}")).collect(), 0);
        assert_eq!(w.len(), MAX_WARNINGS);
        assert_eq!(w.last().unwrap(), "w19");
    }
}
