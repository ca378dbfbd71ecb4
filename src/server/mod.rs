//! The HTTPS webhook: `router(state)` with thin handlers over
//! [`crate::admission::review`], health, readiness and metrics; TLS with
//! certificate reload; the accept loop with graceful draining.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;
use tower_http::catch_panic::CatchPanicLayer;

use crate::admission::{self, Admission, Endpoint};

pub mod api_limits;
pub mod budget;
pub mod gmsa;
pub mod images;
pub mod jsonlog;
pub mod listener;
pub mod logwriter;
pub mod metrics;
mod report;
pub mod tls;
pub mod watch_cache;

pub use metrics::Metrics;

/// Limits that keep one client from hurting the others.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body accepted (the API server's own limit is 3 MiB).
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once, all connections and streams
    /// together; a request that does not fit is answered 503 at once.
    pub max_body_bytes_in_flight: usize,
    /// Time to read a whole request body and answer it.
    pub request_timeout: Duration,
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for a client to send a request's headers (HTTP/1.1), including
    /// idle keep-alive time between requests.
    pub header_timeout: Duration,
    /// Connections served at once. At the cap, one is closed gracefully
    /// for the new one (idle, else with stalled request bodies, else one
    /// that never sent a request); clients wait in the backlog only while
    /// every connection has a request making progress.
    pub max_connections: usize,
    /// Time a connection may go without a request in progress (after the
    /// handshake, between requests, an HTTP/2 connection with no stream:
    /// PINGs do not count) before it is closed.
    pub idle_timeout: Duration,
    /// Largest `/report` answer (objects past it are left out, and the
    /// answer says so).
    pub report_max_bytes: usize,
    /// Time a `/report` client has to read the answer.
    pub report_write_timeout: Duration,
    /// Reports computed or sent at once.
    pub report_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 3 * 1024 * 1024,
            max_body_bytes_in_flight: 64 * 1024 * 1024,
            request_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(60),
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            report_max_bytes: 8 * 1024 * 1024,
            report_write_timeout: Duration::from_secs(10),
            report_concurrency: 1,
        }
    }
}

/// Everything the handlers share.
#[derive(Debug)]
pub struct ServerState {
    pub admission: Admission,
    pub metrics: Metrics,
    pub limits: Limits,
    /// Request bodies held at once (`--max-body-bytes-in-flight`).
    pub body_budget: Arc<budget::BodyBudget>,
    ready: AtomicBool,
    /// Large reviews (over [`INLINE_REVIEW_MAX_BYTES`]) evaluated at once,
    /// off the I/O threads (on tokio's blocking pool): one per CPU. Further
    /// ones wait for a slot, within their `--request-timeout`, while health
    /// checks and metrics keep answering. Small reviews run inline.
    review_slots: Arc<Semaphore>,
    /// Reports computed or sent at once (`--report-concurrency`), apart
    /// from the review slots.
    report_slots: Arc<Semaphore>,
    /// Readiness also waits for the cluster cache's first list (bounded by
    /// `--cluster-cache-sync-timeout`).
    cluster_pending: AtomicBool,
    /// The gMSA facts resolver, when `--gmsa` is on.
    gmsa: std::sync::OnceLock<gmsa::Resolver>,
    /// Readiness also waits for `--gmsa`: `auto`'s decision, and the first
    /// list of the GMSACredentialSpecs when the cluster cache watches them
    /// (bounded by `--cluster-cache-sync-timeout`).
    gmsa_pending: AtomicBool,
    /// The image facts cache, when `--registry` is on.
    images: std::sync::OnceLock<images::ImageFactsCache>,
}

impl ServerState {
    /// A state that is not ready until [`ServerState::set_ready`] (the
    /// listener sets it once bound, and clears it when draining).
    #[must_use]
    pub fn new(admission: Admission, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            admission,
            metrics: Metrics::new(),
            limits,
            body_budget: Arc::new(budget::BodyBudget::new(limits.max_body_bytes_in_flight)),
            ready: AtomicBool::new(false),
            review_slots: Arc::new(Semaphore::new(review_slots())),
            report_slots: Arc::new(Semaphore::new(limits.report_concurrency.max(1))),
            cluster_pending: AtomicBool::new(false),
            gmsa: std::sync::OnceLock::new(),
            gmsa_pending: AtomicBool::new(false),
            images: std::sync::OnceLock::new(),
        })
    }

    /// Turns the gMSA checks on with `resolver` (once).
    pub fn set_gmsa(&self, resolver: gmsa::Resolver) {
        let _ = self.gmsa.set(resolver);
    }

    /// Whether the gMSA checks are on.
    #[must_use]
    pub fn gmsa_on(&self) -> bool {
        self.gmsa.get().is_some()
    }

    /// While true, `/readyz` answers 503 even once bound: `--gmsa` is not
    /// settled yet.
    pub fn set_gmsa_pending(&self, pending: bool) {
        self.gmsa_pending.store(pending, Ordering::SeqCst);
    }

    /// Turns registry lookups on with `cache` (once).
    pub fn set_images(&self, cache: images::ImageFactsCache) {
        let _ = self.images.set(cache);
    }

    /// The image facts cache, when `--registry` is on.
    #[must_use]
    pub fn image_cache(&self) -> Option<&images::ImageFactsCache> {
        self.images.get()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// While true, `/readyz` answers 503 even once bound: the cluster
    /// cache has not completed its first list yet.
    pub fn set_cluster_pending(&self, pending: bool) {
        self.cluster_pending.store(pending, Ordering::SeqCst);
    }

    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
            && !self.cluster_pending.load(Ordering::SeqCst)
            && !self.gmsa_pending.load(Ordering::SeqCst)
    }

    /// Runs a small review `f` right here, on the I/O thread that read its
    /// body: a few to a few tens of microseconds, less than the hand-off to
    /// the blocking pool costs (two thread wake-ups and context switches
    /// per request: about 15 us of CPU per review on one pinned core,
    /// docs/BENCHMARKS.md). A panic is caught and reported as by
    /// [`ServerState::run_bounded`].
    pub fn run_inline<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(out) => Some(out),
            Err(p) => {
                let detail = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "unknown panic".to_owned());
                tracing::error!(panic = %detail, "review panicked; answered 500");
                None
            }
        }
    }

    /// Runs CPU-bound work `f` on the blocking pool once a review slot is
    /// free. The slot stays taken until `f` returns, even when the caller
    /// has given up (timed out): so abandoned work still counts, and the
    /// pool stays bounded. `None` when `f` panicked (logged).
    pub async fn run_bounded<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let permit = Arc::clone(&self.review_slots).acquire_owned().await.ok()?;
        let task = tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
            out
        });
        match task.await {
            Ok(out) => Some(out),
            Err(e) => {
                let detail = e.try_into_panic().ok().map_or_else(
                    || "cancelled".to_owned(),
                    |p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "unknown panic".to_owned())
                    },
                );
                tracing::error!(panic = %detail, "review panicked; answered 500");
                None
            }
        }
    }
}

/// Bodies up to this size are reviewed inline on the I/O thread (at most
/// some 50 us of work, see `examples/review_latency.rs`); larger ones on
/// the blocking pool, bounded by the review slots, so a burst of big
/// reviews cannot hold up the I/O threads, health checks and metrics.
pub const INLINE_REVIEW_MAX_BYTES: usize = 64 * 1024;

/// One review slot per CPU (at least one).
fn review_slots() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// The optional endpoints the webhook's HTTPS router serves besides
/// `/validate`, `/mutate`, `/healthz` and `/readyz`.
#[derive(Debug, Clone, Copy)]
pub struct Endpoints {
    /// `GET /metrics`.
    pub metrics: bool,
    /// `POST /report`.
    pub report: bool,
}

impl Default for Endpoints {
    fn default() -> Self {
        Self {
            metrics: true,
            report: true,
        }
    }
}

/// The webhook's routes with the middleware stack, every endpoint on.
pub fn router(state: Arc<ServerState>) -> Router {
    router_with(state, Endpoints::default())
}

/// The webhook's routes with the optional endpoints chosen.
pub fn router_with(state: Arc<ServerState>, endpoints: Endpoints) -> Router {
    let limits = state.limits;
    let mut routes = Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/admit", post(admit_once))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    if endpoints.metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    let report = endpoints.report.then(|| report::routes(&state));
    let mut routes = routes
        .fallback(not_found(route_list(true, endpoints)))
        .with_state(state);
    if let Some(report) = report {
        routes = routes.merge(report);
    }
    layers(
        routes.layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        &limits,
    )
}

/// The router for a separate report listener (`--report=separate`):
/// `POST /report` with `/healthz` and `/readyz`.
pub fn report_router(state: Arc<ServerState>) -> Router {
    let limits = state.limits;
    let report = report::routes(&state);
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found(route_list(
            false,
            Endpoints {
                metrics: false,
                report: true,
            },
        )))
        .with_state(state)
        .merge(report)
        .layer(DefaultBodyLimit::max(limits.max_body_bytes));
    layers(routes, &limits)
}

/// The router for a plain-HTTP metrics listener (`--metrics-listen`):
/// `/healthz` and `/readyz`, with `GET /metrics` and `POST /report` as
/// chosen.
pub fn metrics_router(state: Arc<ServerState>, endpoints: Endpoints) -> Router {
    let limits = state.limits;
    let mut routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    if endpoints.metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    let report = endpoints.report.then(|| report::routes(&state));
    let mut routes = routes
        .fallback(not_found(route_list(false, endpoints)))
        .with_state(state);
    if let Some(report) = report {
        routes = routes.merge(report);
    }
    layers(
        routes.layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        &limits,
    )
}

/// The middleware every router gets: a panic becomes a logged 500 and the
/// server keeps serving; a request that takes longer than
/// `--request-timeout` (a stalled body, or a review that does not finish)
/// gets 408 with a Kubernetes `Status` body, which the API server reports
/// as a failed webhook call, so the webhook's `failurePolicy` applies.
pub fn layers(router: Router, limits: &Limits) -> Router {
    let timeout = limits.request_timeout;
    router
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let path = req.uri().path().to_owned();
                match tokio::time::timeout(timeout, next.run(req)).await {
                    Ok(resp) => resp,
                    Err(_) => timed_out(&path, timeout),
                }
            },
        ))
        .layer(CatchPanicLayer::custom(panic_response))
}

/// The answer to a request that ran out of `--request-timeout`.
fn timed_out(path: &str, timeout: Duration) -> Response {
    let message = format!(
        "winadmit did not answer {path} within {timeout:?} (--request-timeout): the request body \
         was too slow or the review too large; the webhook's failurePolicy decides"
    );
    tracing::warn!(path, timeout = ?timeout, "request timed out; answered 408");
    status_response(StatusCode::REQUEST_TIMEOUT, "Timeout", &message)
}

/// An error answer with a Kubernetes `Status` body, which the API server
/// reports as a failed webhook call (the webhook's `failurePolicy`
/// applies).
pub(crate) fn status_response(status: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status.as_u16(),
    });
    let mut resp = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

fn panic_response(err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = detail, "handler panicked; answered 500");
    plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the webhook failed on this request (logged); it keeps serving\n",
    )
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        text.into(),
    )
        .into_response()
}

/// Requires `Content-Type: application/json` before the body is read.
struct JsonContentType;

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

async fn validate(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    admit(state, Endpoint::Validate, body).await
}

async fn mutate(
    State(state): State<Arc<ServerState>>,
    _: JsonContentType,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    admit(state, Endpoint::Mutate, body).await
}

/// `/admit`: `/mutate` and `/validate` in one call, for an install that
/// registers only a mutating webhook.
async fn admit_once(
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
        Err(rej) => {
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
            return plain(status, msg);
        }
    };
    let _in_flight = state.metrics.in_flight();
    let start = Instant::now();
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
    let result = if body.len() <= INLINE_REVIEW_MAX_BYTES {
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
        let shared = Arc::clone(&state);
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
    };
    let Some(result) = result else {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error: the webhook failed on this request (logged); it keeps serving\n",
        );
    };
    let elapsed = start.elapsed();
    match result {
        Ok(outcome) => {
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

fn status_label(s: StatusCode) -> &'static str {
    match s.as_u16() {
        400 => "400",
        408 => "408",
        413 => "413",
        415 => "415",
        _ => "other",
    }
}

async fn healthz() -> Response {
    plain(StatusCode::OK, "ok\n")
}

async fn readyz(State(state): State<Arc<ServerState>>) -> Response {
    if state.is_ready() {
        plain(StatusCode::OK, "ready\n")
    } else if state.cluster_pending.load(Ordering::SeqCst) {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready (waiting for the cluster cache's first list; at most --cluster-cache-sync-timeout)\n",
        )
    } else if state.gmsa_pending.load(Ordering::SeqCst) {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready (waiting for --gmsa: whether the API server serves gmsacredentialspecs.windows.k8s.io, and their first list; at most --cluster-cache-sync-timeout)\n",
        )
    } else {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready (starting or draining)\n",
        )
    }
}

async fn metrics(State(state): State<Arc<ServerState>>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// The routes a listener serves, as `METHOD /path` joined by ", ": for
/// the start-up log line and the 404 text.
#[must_use]
pub fn route_list(webhook: bool, endpoints: Endpoints) -> String {
    let mut routes = Vec::new();
    if webhook {
        routes.extend(["POST /validate", "POST /mutate", "POST /admit"]);
    }
    if endpoints.report {
        routes.push("POST /report");
    }
    routes.extend(["GET /healthz", "GET /readyz"]);
    if endpoints.metrics {
        routes.push("GET /metrics");
    }
    routes.join(", ")
}

/// The 404 fallback of a router serving `routes` (from [`route_list`]).
fn not_found(routes: String) -> impl Fn(Method, Uri) -> std::future::Ready<Response> + Clone {
    let routes: Arc<str> = routes.into();
    move |method: Method, uri: Uri| {
        std::future::ready(plain(
            StatusCode::NOT_FOUND,
            format!(
                "no route for {method} {}; this listener serves {routes}\n",
                uri.path()
            ),
        ))
    }
}
