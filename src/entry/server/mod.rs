//! The HTTPS webhook's routers: `router(state)` with the admission
//! handlers (`admit`), health, readiness and metrics, the middleware
//! every router gets, and the 404 that lists the routes. Beside them: what
//! the handlers share ([`ServerState`]), TLS with certificate reload
//! ([`tls`]), the accept loop with graceful draining ([`listener`]), the
//! watch cache of cluster objects ([`watch_cache`]), and the resolvers of
//! gMSA and image facts ([`gmsa`], [`images`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;

mod admit;
pub mod api_limits;
pub mod audit_metrics;
pub mod budget;
pub mod gmsa;
pub mod images;
pub mod jsonlog;
pub mod listener;
pub mod logwriter;
pub mod metrics;
mod report;
mod state;
pub mod textlog;
pub mod tls;
pub mod watch_cache;

pub use metrics::Metrics;
pub use state::{INLINE_REVIEW_MAX_BYTES, Limits, ServerState};

use admit::{admit, mutate, validate};

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
    routes(state, endpoints, true)
}

/// The router for a separate report listener (`--report=separate`):
/// `POST /report` with `/healthz` and `/readyz`.
pub fn report_router(state: Arc<ServerState>) -> Router {
    let endpoints = Endpoints {
        metrics: false,
        report: true,
    };
    routes(state, endpoints, false)
}

/// The router for a plain-HTTP metrics listener (`--metrics-listen`):
/// `/healthz` and `/readyz`, with `GET /metrics` and `POST /report` as
/// chosen.
pub fn metrics_router(state: Arc<ServerState>, endpoints: Endpoints) -> Router {
    routes(state, endpoints, false)
}

/// `/healthz` and `/readyz`, the admission endpoints when `admission`,
/// `GET /metrics` and `POST /report` as `endpoints` choose, a 404 that
/// lists them, the body limit and [`layers`].
fn routes(state: Arc<ServerState>, endpoints: Endpoints, admission: bool) -> Router {
    let limits = state.limits;
    let mut routes = Router::new();
    if admission {
        routes = routes
            .route("/validate", post(validate))
            .route("/mutate", post(mutate))
            .route("/admit", post(admit));
    }
    routes = routes
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/readyz/pin-linux", get(readyz_pin_linux));
    if endpoints.metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    let report = endpoints.report.then(|| report::routes(&state));
    let mut routes = routes
        .fallback(not_found(route_list(admission, endpoints)))
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

/// The check of `--manage-pin-linux` alone (as the API server's
/// `/readyz/<check>`): 503 with the reason while winadmit cannot keep
/// `pin-linux.winadmit.io` as it must be. Not part of `/readyz`: failing
/// that would take the validating webhook out of service for it.
async fn readyz_pin_linux(State(state): State<Arc<ServerState>>) -> Response {
    match state.pin_linux_problem() {
        None => plain(StatusCode::OK, "ok\n"),
        Some(why) => plain(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
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
    routes.extend(["GET /healthz", "GET /readyz", "GET /readyz/pin-linux"]);
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
