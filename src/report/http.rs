//! The `POST /report` door for the webhook server: decode the request, call
//! [`report_body`], encode the answer. No policy logic here.
//!
//! The server wires it in with either
//! `router.route("/report", axum::routing::post(winadmit::report::http::report_handler)).with_state(..)`
//! over its own state (implement [`ReportState`] for it), or by merging
//! [`router`]. Query parameter `mode=enforce|warn|audit` previews a mode.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ReportOptions;
use super::body::{ReportError, report_body};
use crate::cluster::Cluster;
use crate::engine::Context;
use crate::policy::{Mode, Policy};
use crate::targeting::RuntimeClasses;

/// What the handler needs from the server's state.
pub trait ReportState: Clone + Send + Sync + 'static {
    /// The policy in force (the same one `/validate` uses).
    fn policy(&self) -> Arc<Policy>;
    /// The target cluster the verdicts are about.
    fn cluster(&self) -> Cluster {
        Cluster::default()
    }
    /// RuntimeClasses known from the cluster, if the server watches them.
    fn runtime_classes(&self) -> Option<Arc<RuntimeClasses>> {
        None
    }
    /// The cluster's namespace labels, if the server watches them.
    fn namespace_labels(&self) -> Option<Arc<dyn crate::admission::NamespaceLabels>> {
        None
    }
    /// Slots that bound how many reports (and reviews) are computed at
    /// once; `None`: unbounded.
    fn slots(&self) -> Option<Arc<tokio::sync::Semaphore>> {
        None
    }
}

/// A ready-made state: a fixed policy.
#[derive(Clone)]
pub struct StaticReportState {
    pub policy: Arc<Policy>,
    pub cluster: Cluster,
}

impl ReportState for StaticReportState {
    fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy)
    }
    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }
}

/// `?mode=` on `/report`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    pub mode: Option<String>,
}

/// A router with only `POST /report`, for merging into the server's router.
pub fn router<S: ReportState>(state: S) -> axum::Router {
    axum::Router::new()
        .route("/report", axum::routing::post(report_handler::<S>))
        .with_state(state)
}

/// `POST /report`: 200 with the report, 400 for a body that cannot be
/// read, 415 for a Content-Type that is neither JSON nor YAML. Errors are
/// `{"error": "..."}`.
pub async fn report_handler<S: ReportState>(
    State(state): State<S>,
    Query(query): Query<ReportQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mode = match query.mode {
        None => None,
        Some(m) => match m.parse::<Mode>() {
            Ok(m) => Some(m),
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("query parameter mode: {e}"),
                );
            }
        },
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let permit = match state.slots() {
        Some(slots) => slots.acquire_owned().await.ok(),
        None => None,
    };
    let work = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let policy = state.policy();
        let rc = state.runtime_classes();
        let cx = Context {
            cluster: state.cluster(),
            runtime_classes: rc.as_deref(),
            nodes: None,
        };
        let options = ReportOptions {
            mode,
            patched_objects: true,
            fold: true,
            namespaces: Vec::new(),
            namespace_lookup: state.namespace_labels().map(crate::report::NamespaceLookup),
        };
        report_body(&policy, &cx, &options, &content_type, &body)
    });
    match work.await {
        Ok(Ok(report)) => Json(report).into_response(),
        Ok(Err(e)) => {
            let status = match e {
                ReportError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                _ => StatusCode::BAD_REQUEST,
            };
            error(status, &e.to_string())
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("report failed: {e}"),
        ),
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}
