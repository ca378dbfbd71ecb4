//! `POST /report`, the dry-run door on the webhook's server: decode the
//! request, call [`report_body`] over the same policy, target cluster and
//! cluster cache as `/validate`, encode the answer. No policy logic here.
//! Query parameter `mode=enforce|warn|audit` previews a mode.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ServerState;
use crate::engine::Context;
use crate::policy::{Mode, Policy};
use crate::report::body::{ReportError, report_body};
use crate::report::{NamespaceLookup, ReportOptions};

/// The route's state: the server's, with its policy shared rather than
/// cloned per request.
#[derive(Clone)]
struct ReportState {
    policy: Arc<Policy>,
    server: Arc<ServerState>,
}

/// The server's namespace labels (its cluster cache), for the report.
struct ServerNamespaces(Arc<ServerState>);

impl crate::cluster::ClusterView for ServerNamespaces {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.0.admission.namespaces.as_ref()?.label(namespace, key)
    }
}

/// A router with only `POST /report`, for merging into the server's routers.
pub(super) fn routes(state: &Arc<ServerState>) -> Router {
    Router::new()
        .route("/report", axum::routing::post(report))
        .with_state(ReportState {
            policy: Arc::new(state.admission.policy.clone()),
            server: Arc::clone(state),
        })
}

/// `?mode=` on `/report`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    mode: Option<String>,
}

/// `POST /report`: 200 with the report, 400 for a body that cannot be
/// read, 415 for a Content-Type that is neither JSON nor YAML. Errors are
/// `{"error": "..."}`. Reports take the same slots as reviews.
async fn report(
    State(state): State<ReportState>,
    Query(query): Query<ReportQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mode = match query.mode.as_deref().map(str::parse::<Mode>).transpose() {
        Ok(mode) => mode,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("query parameter mode: {e}"),
            );
        }
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let permit = Arc::clone(&state.server.review_slots)
        .acquire_owned()
        .await
        .ok();
    let work = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let ReportState { policy, server } = state;
        let cache = server.admission.namespaces.as_ref();
        let runtime_classes = cache.and_then(|n| n.runtime_classes());
        let namespace_lookup = cache.is_some().then(|| {
            NamespaceLookup(Arc::new(ServerNamespaces(Arc::clone(&server)))
                as Arc<dyn crate::cluster::ClusterView>)
        });
        let cx = Context {
            cluster: server.admission.cluster.clone(),
            runtime_classes: runtime_classes.as_deref(),
            nodes: None,
        };
        let options = ReportOptions {
            mode,
            patched_objects: true,
            fold: true,
            namespaces: Vec::new(),
            namespace_lookup,
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
