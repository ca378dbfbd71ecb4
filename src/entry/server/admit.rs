//! The admission handlers (`/validate`, `/mutate`, `/admit`): read the
//! body, decode it once, resolve the facts the decision needs (gMSA
//! credential specs, image facts), answer with
//! [`crate::entry::admission::review_decoded`] inline or on a review slot,
//! and log and count the answer.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use yoke::Yoke;

use super::{INLINE_REVIEW_MAX_BYTES, ServerState, plain};
use crate::entry::admission::{self, Endpoint};

/// Requires `Content-Type: application/json` before the body is read.
pub(super) struct JsonContentType;

impl FromRequestParts<Arc<ServerState>> for JsonContentType {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ServerState>,
    ) -> Result<Self, Self::Rejection> {
        let ct = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let essence = ct.split(';').next().unwrap_or("").trim();
        if essence.eq_ignore_ascii_case("application/json") {
            Ok(Self)
        } else {
            let endpoint = match parts.uri.path() {
                "/mutate" => Endpoint::Mutate,
                "/admit" => Endpoint::Admit,
                _ => Endpoint::Validate,
            };
            state.metrics.reject(endpoint, "415");
            Err(plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "expected Content-Type: application/json (an AdmissionReview), got {:?}\n",
                    if ct.is_empty() { "nothing" } else { ct }
                ),
            ))
        }
    }
}

pub(super) async fn validate(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(state, Endpoint::Validate, body).await
}

pub(super) async fn mutate(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(state, Endpoint::Mutate, body).await
}

/// `/admit`: `/mutate` and `/validate` in one call, for an install that
/// registers only a mutating webhook.
pub(super) async fn admit(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(state, Endpoint::Admit, body).await
}

/// One admission request: read, reviewed, answered.
async fn handle(
    state: Arc<ServerState>,
    endpoint: Endpoint,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(rej) => return unreadable(&state, endpoint, &rej),
    };
    let _in_flight = state.metrics.in_flight();
    let start = Instant::now();
    let result = review(&state, endpoint, body).await;
    let Some(result) = result else {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error: the webhook failed on this request (logged); it keeps serving\n",
        );
    };
    let elapsed = start.elapsed();
    match result {
        Ok(outcome) => answered(&state, endpoint, outcome, elapsed),
        Err(err) => {
            state.metrics.reject(endpoint, "400");
            // The parser's message can quote the body; the client gets it
            // in the 400, the log only says what kind of problem it was.
            let logged = match &err {
                admission::ReviewError::Malformed(_) => {
                    "request body is not a valid AdmissionReview (details in the 400 response)"
                        .to_owned()
                }
                other => other.to_string(),
            };
            tracing::warn!(endpoint = endpoint.as_str(), error = %logged, "bad admission request");
            plain(StatusCode::BAD_REQUEST, format!("{err}\n"))
        }
    }
}

/// The answer to a body that could not be read (too large, cut off).
fn unreadable(state: &ServerState, endpoint: Endpoint, rej: &BytesRejection) -> Response {
    let status = rej.status();
    state.metrics.reject(endpoint, status_label(status));
    let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!(
            "request body is over the {} byte limit (--max-body-bytes)\n",
            state.limits.max_body_bytes
        )
    } else {
        format!("cannot read the request body: {}\n", rej.body_text())
    };
    tracing::warn!(
        endpoint = endpoint.as_str(),
        status = status.as_u16(),
        "{}",
        msg.trim_end()
    );
    plain(status, msg)
}

/// Decodes `body` once, resolves the facts its decision needs, and reviews
/// it from that decode: inline when small, else on a review slot (the
/// decode on one, the decision on the next, with no slot held while the
/// facts are resolved). `None` when the review panicked (logged).
async fn review(
    state: &Arc<ServerState>,
    endpoint: Endpoint,
    body: Bytes,
) -> Option<Result<admission::Reviewed, admission::ReviewError>> {
    let want = admission::Want {
        gmsa: state.gmsa.get().is_some(),
        images: state.images.get().is_some(),
    };
    let policy = &state.admission.policy;
    if body.len() <= INLINE_REVIEW_MAX_BYTES {
        let decoded = state.run_inline(|| {
            admission::decode(&body).map(|decoded| {
                let wanted = decoded.wanted(policy, endpoint, want);
                (decoded, wanted)
            })
        })?;
        let (decoded, wanted) = match decoded {
            Ok(decoded) => decoded,
            Err(e) => return Some(Err(e)),
        };
        let facts = resolve(state, wanted).await;
        return state.run_inline(|| {
            admission::review_decoded(&state.admission, endpoint, &decoded, facts.resolved())
        });
    }
    let shared = Arc::clone(state);
    // The decode stays borrowed from its body, which it owns, so it can
    // wait for the facts off the slot.
    let decoded = state
        .run_bounded(move || {
            let decoded = Yoke::<admission::Decoded<'static>, Vec<u8>>::try_attach_to_cart(
                Vec::from(body),
                admission::decode,
            )?;
            let wanted = decoded
                .get()
                .wanted(&shared.admission.policy, endpoint, want);
            Ok((decoded, wanted))
        })
        .await?;
    let (decoded, wanted) = match decoded {
        Ok(decoded) => decoded,
        Err(e) => return Some(Err(e)),
    };
    let facts = resolve(state, wanted).await;
    let shared = Arc::clone(state);
    state
        .run_bounded(move || {
            let result = admission::review_decoded(
                &shared.admission,
                endpoint,
                decoded.get(),
                facts.resolved(),
            );
            // The body is freed on this thread, right away.
            drop(decoded);
            result
        })
        .await
}

/// The facts resolved for one review.
struct Facts {
    gmsa: Option<crate::decision::gmsa::Facts>,
    images: Option<crate::decision::images::KnownImages>,
}

impl Facts {
    fn resolved(&self) -> admission::Resolved<'_> {
        admission::Resolved {
            gmsa: self.gmsa.as_ref(),
            images: self.images.as_ref(),
        }
    }
}

/// Resolves what a review wants, before the decision, which stays pure:
/// the gMSA facts whenever the resolver is on (they make the gMSA rules
/// speak), the image facts (`--registry`) when the object names images.
async fn resolve(state: &ServerState, wanted: admission::Wanted) -> Facts {
    let gmsa = match state.gmsa.get() {
        Some(resolver) => Some(resolver.facts(wanted.gmsa.as_ref()).await),
        None => None,
    };
    let images = match (state.images.get(), wanted.images) {
        (Some(cache), Some(images)) => Some(cache.facts(images).await),
        _ => None,
    };
    Facts { gmsa, images }
}

/// A review's answer: counted, logged in one line, sent as JSON.
fn answered(
    state: &ServerState,
    endpoint: Endpoint,
    outcome: admission::Reviewed,
    elapsed: std::time::Duration,
) -> Response {
    let s = &outcome.summary;
    state.metrics.observe(endpoint, s, elapsed);
    tracing::info!(
        endpoint = endpoint.as_str(),
        // `&str`, not `%` (Display): recorded as a string, not
        // through `fmt`, the same JSON.
        uid = s.uid.as_str(),
        kind = s.kind.as_str(),
        namespace = s.namespace.as_str(),
        name = s.name.as_str(),
        operation = s.operation.as_str(),
        dry_run = s.dry_run,
        verdict = s.verdict.as_str(),
        rules = s.rule_ids().as_str(),
        patch_ops = s.patch_ops,
        note = s.note.as_deref().unwrap_or(""),
        latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        "admission review"
    );
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from(outcome.body),
    )
        .into_response()
}

fn status_label(s: StatusCode) -> &'static str {
    match s.as_u16() {
        400 => "400",
        408 => "408",
        413 => "413",
        415 => "415",
        _ => "other",
    }
}
