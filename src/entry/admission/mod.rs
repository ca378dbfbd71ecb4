//! AdmissionReview bytes in, AdmissionReview bytes out: the webhook's entry point
//! to the engine, without I/O, async or clocks.
//!
//! The envelope is decoded in one pass into a purpose-built borrowed struct
//! whose `object`/`oldObject` are read straight into [`ObjectView`], the
//! same narrow view `lint` uses. No `DynamicObject` or `serde_json::Value`
//! tree is built on the hot path: the one pass is faster than kube's
//! `AdmissionReview<DynamicObject>` and than keeping the object as a
//! `&RawValue` and parsing it in a second pass (docs/BENCHMARKS.md,
//! "Decoding", has the measurements). The object's tree is built at most
//! once per review, when a patch is applied to it or a declared kind's
//! template is read; the raw envelope is also read to name the uid of a
//! request whose object cannot be read. Responses are built with
//! `kube::core::admission` types, in the request's API version.
//!
//! The verdict is [`engine::evaluate`]'s, post-processed only by the
//! admission mode (enforce, warn, audit) and request semantics (operation,
//! subresource, requesting user); no rule logic lives here.
//!
//! A body is decoded once ([`decode`]): the server asks the decode which
//! facts to resolve ([`Decoded::wanted`]) and then answers from it
//! ([`review_decoded`]). `envelope` holds the envelope's types and checks,
//! `decoded` the decode and the request's workload, `respond` turns one
//! decoded request into each endpoint's answer (`/admit` included) and
//! `recover` answers a body the one-pass decode refused.

use base64::Engine as _;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, TypeMeta};
use serde::Serialize;

use crate::decision::cluster::ClusterLookup;
use crate::decision::finding::Severity;
use crate::decision::policy::{Mode, Policy};

/// `admission.k8s.io/v1`.
pub const V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1`, for old clusters.
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";
pub use crate::decision::decide::{
    MAX_DENIAL_FINDINGS, MAX_WARNING_CHARS, MAX_WARNING_KEPT_CHARS, MAX_WARNINGS,
};

mod decoded;
mod envelope;
mod recover;
mod respond;
pub use decoded::{Decoded, GmsaWanted, ImagesWanted, Want, Wanted, decode};
pub use envelope::{Envelope, envelope};
use envelope::{envelope_header, text};
use recover::recover;
use respond::{Review, respond};

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

/// What the admission entry point needs: the policy, the Kubernetes version the
/// rules apply to, and what it knows about the cluster.
pub struct Admission {
    pub policy: Policy,
    /// The target cluster the verdicts are about.
    pub target: crate::decision::cluster::TargetCluster,
    /// What the entry point can look up in the cluster (namespace labels,
    /// RuntimeClasses, Windows nodes: the server's watch cache), when it
    /// can.
    pub lookup: Option<Box<dyn ClusterLookup>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("target", &self.target)
            .field("lookup", &self.lookup.is_some())
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
/// A serialized AdmissionReview response and its summary.
#[derive(Debug)]
pub struct Reviewed {
    pub body: Vec<u8>,
    pub summary: ReviewSummary,
}

/// Reviews one AdmissionReview body for `endpoint`.
///
/// # Errors
/// The body is not an AdmissionReview this server can answer and carries no
/// uid (HTTP 400). Requests with a uid are always answered with a review,
/// `invalid` when unusable.
pub fn review(adm: &Admission, endpoint: Endpoint, body: &[u8]) -> Result<Reviewed, ReviewError> {
    review_decoded(adm, endpoint, &decode(body)?, Resolved::default())
}

/// What the server resolved for one request before the decision, which
/// stays pure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resolved<'r> {
    /// The gMSA facts (`server::gmsa`): `None` keeps the gMSA rules silent.
    pub gmsa: Option<&'r crate::decision::gmsa::Facts>,
    /// The image facts (`server::images`): an image without them is
    /// judged by its name.
    pub images: Option<&'r crate::decision::images::KnownImages>,
}

/// [`review`] of a decoded body, with the facts the server resolved for it.
///
/// # Errors
/// As [`review`].
pub fn review_decoded(
    adm: &Admission,
    endpoint: Endpoint,
    decoded: &Decoded<'_>,
    resolved: Resolved<'_>,
) -> Result<Reviewed, ReviewError> {
    let (response, summary) = answer(adm, endpoint, decoded, resolved)?;
    Ok(Reviewed {
        body: encode(response),
        summary,
    })
}

/// A review's answer before it is serialized, and its summary.
type Answer = (AdmissionResponse, ReviewSummary);

/// One endpoint's answer to a decoded review.
fn answer(
    adm: &Admission,
    endpoint: Endpoint,
    decoded: &Decoded<'_>,
    resolved: Resolved<'_>,
) -> Result<Answer, ReviewError> {
    let envelope = match &decoded.review {
        Ok(e) => e,
        Err(e) => return recover(adm, decoded.body, e),
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
    let review = Review {
        adm,
        endpoint,
        decoded,
        req,
        types: &types,
        resolved,
    };
    let response = respond(&review, &mut summary);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::decide::messages::{
        cap_warnings, fit_warning, mutation_warning, truncate,
    };

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
        let fixed = crate::decision::patch::Fixed {
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
            target: crate::decision::cluster::TargetCluster::default(),
            lookup: None,
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
            assert!(
                crate::decision::rules::find(id).is_some(),
                "{id} is a rule id"
            );
        }
    }

    /// `/admit` of a pod that is patched, names a gMSA credential spec and
    /// pulls with a Secret: the server's questions, the patch and the
    /// verdict on the patched object all come from one decode of the body
    /// and at most one tree of the object.
    #[test]
    fn a_review_is_decoded_once() {
        let adm = Admission {
            policy: Policy::default_policy(),
            target: crate::decision::cluster::TargetCluster::default(),
            lookup: None,
        };
        let mut review: serde_json::Value = serde_json::from_slice(
            &std::fs::read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/admission/pod-windows-fixable.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let spec = review.pointer_mut("/request/object/spec").unwrap();
        spec["securityContext"]["windowsOptions"] =
            serde_json::json!({"gmsaCredentialSpecName": "webapp01"});
        spec["imagePullSecrets"] = serde_json::json!([{"name": "regcred"}, "not-a-reference"]);
        let body = serde_json::to_vec(&review).unwrap();

        let before = decoded::counts::now();
        let decoded = decode(&body).unwrap();
        let want = Want {
            gmsa: true,
            images: true,
        };
        let wanted = decoded.wanted(&adm.policy, Endpoint::Admit, want);
        let out = review_decoded(&adm, Endpoint::Admit, &decoded, Resolved::default()).unwrap();
        let after = decoded::counts::now();

        assert_eq!(out.summary.verdict, ReviewVerdict::Patched);
        let gmsa = wanted.gmsa.expect("the gMSA name is wanted");
        assert_eq!(gmsa.names, ["webapp01"]);
        assert!(gmsa.authorize, "a CREATE gives the pod an identity");
        let images = wanted.images.expect("the images are wanted");
        assert!(!images.images.is_empty());
        assert_eq!(images.pull_secrets, ["regcred"]);
        assert_eq!(after.0 - before.0, 1, "decodes of the body");
        assert!(after.1 - before.1 <= 1, "trees of the object");
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
