//! The admission handlers (`/validate`, `/mutate`, `/admit`): read the
//! body, resolve the facts the decision needs (gMSA credential specs,
//! image facts), run [`crate::entry::admission::review_with`] inline or on a
//! review slot, and log and count the answer.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

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
    admit(state, Endpoint::Validate, body).await
}

pub(super) async fn mutate(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    admit(state, Endpoint::Mutate, body).await
}

/// `/admit`: `/mutate` and `/validate` in one call, for an install that
/// registers only a mutating webhook.
pub(super) async fn admit_once(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    admit(state, Endpoint::Admit, body).await
}

async fn admit(
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

/// Resolves the facts the decision needs, then reviews `body`: inline when
/// small, else on a review slot. `None` when the review panicked (logged).
async fn review(
    state: &Arc<ServerState>,
    endpoint: Endpoint,
    body: Bytes,
) -> Option<Result<admission::Reviewed, admission::ReviewError>> {
    // The gMSA facts are resolved before the decision, which stays pure.
    let gmsa = match state.gmsa.get() {
        Some(resolver) => Some(
            resolver
                .facts(&state.admission.policy, endpoint, &body)
                .await,
        ),
        None => None,
    };
    // So are the image facts (`--registry`), within the review's deadline.
    let images = match state.images.get() {
        Some(cache) => cache.facts(&state.admission.policy, &body).await,
        None => None,
    };
    if body.len() <= INLINE_REVIEW_MAX_BYTES {
        state.run_inline(|| {
            admission::review_with(
                &state.admission,
                endpoint,
                &body,
                admission::Resolved {
                    gmsa: gmsa.as_ref(),
                    images: images.as_ref(),
                },
            )
        })
    } else {
        let shared = Arc::clone(state);
        state
            .run_bounded(move || {
                let result = admission::review_with(
                    &shared.admission,
                    endpoint,
                    &body,
                    admission::Resolved {
                        gmsa: gmsa.as_ref(),
                        images: images.as_ref(),
                    },
                );
                // The body is freed on this thread, right away.
                drop(body);
                result
            })
            .await
    }
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
