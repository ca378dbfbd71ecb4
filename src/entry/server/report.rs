//! `POST /report`, the dry-run entry point on the webhook's server: decode the
//! request, call [`report_body`] over the same policy, target cluster and
//! cluster cache as `/validate`, encode the answer. No policy logic here.
//! Query parameter `mode=enforce|warn|audit` previews a mode.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use super::ServerState;
use crate::decision::engine::Context;
use crate::decision::policy::{Mode, Policy};
use crate::entry::report::body::{ReportError, body_images, report_body};
use crate::render::report::format::ReportSink as _;
use crate::render::report::format::json::JsonSink;
use crate::render::report::{NamespaceLookup, ReportOptions};

/// The route's state: the server's, with its policy shared rather than
/// cloned per request.
#[derive(Clone)]
struct ReportState {
    policy: Arc<Policy>,
    server: Arc<ServerState>,
}

/// The server's namespace labels (its cluster cache) and gMSA facts (as
/// `/validate` resolves them), for the report.
struct ServerNamespaces(Arc<ServerState>);

impl crate::decision::cluster::ClusterLookup for ServerNamespaces {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.0.admission.lookup.as_ref()?.label(namespace, key)
    }

    /// What `/validate` would know of the workload's credential specs,
    /// asked on the report's blocking thread.
    fn gmsa(
        &self,
        namespace: Option<&str>,
        account: &str,
        names: &[&str],
    ) -> Option<crate::decision::gmsa::Facts> {
        let resolver = self.0.gmsa.get()?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let namespace = namespace.unwrap_or_default();
        Some(runtime.block_on(resolver.resolve(namespace, account, &names, !namespace.is_empty())))
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
/// read, 415 for a Content-Type that is neither JSON nor YAML, 503 when
/// `--report-concurrency` reports are already running. Errors are
/// `{"error": "..."}`. Reports run on the blocking pool under their own
/// slots, never the review slots of `/validate` and `/mutate`. The answer
/// is streamed, at most `--report-max-bytes` (objects past it are left
/// out, and `truncated` says how many), and must be read within
/// `--report-write-timeout`: a client that reads slower is cut off and the
/// report freed.
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
    let Ok(permit) = Arc::clone(&state.server.report_slots).try_acquire_owned() else {
        return busy(state.server.limits.report_concurrency);
    };
    let images = image_facts(&state, &content_type, &body).await;
    let (tx, rx) = mpsc::channel::<Chunk>(4);
    let (computed_tx, computed_rx) = oneshot::channel::<Result<(), ReportError>>();
    let job = Job {
        state,
        mode,
        content_type,
        body,
        images,
        runtime: tokio::runtime::Handle::current(),
        started: std::time::Instant::now(),
    };
    let work = tokio::task::spawn_blocking(move || job.run(permit, computed_tx, tx));
    match computed_rx.await {
        Ok(Ok(())) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            Body::from_stream(chunks(rx)),
        )
            .into_response(),
        Ok(Err(e)) => {
            let status = match e {
                ReportError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                _ => StatusCode::BAD_REQUEST,
            };
            error(status, &e.to_string())
        }
        Err(_) => {
            let why = match work.await {
                Err(e) if e.is_panic() => "report failed: it panicked (logged)".to_owned(),
                Err(e) => format!("report failed: {e}"),
                Ok(()) => "report failed".to_owned(),
            };
            tracing::error!("{why}");
            error(StatusCode::INTERNAL_SERVER_ERROR, &why)
        }
    }
}

/// 503: `concurrency` reports are already running (`--report-concurrency`).
fn busy(concurrency: usize) -> Response {
    tracing::warn!(concurrency, "reports at --report-concurrency; answered 503");
    let mut resp = error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "{concurrency} report(s) are already being computed or sent (--report-concurrency); retry"
        ),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// `--registry`: the body's images are looked up as `/validate` looks up a
/// review's, through the same cache and within the same
/// `--registry-review-timeout`, before the report is computed.
async fn image_facts(
    state: &ReportState,
    content_type: &str,
    body: &[u8],
) -> Option<crate::decision::images::KnownImages> {
    let cache = state.server.images.get()?;
    let wanted = body_images(&state.policy, content_type, body);
    if wanted.is_empty() {
        None
    } else {
        Some(cache.facts_of(wanted).await)
    }
}

/// One report, computed and written on the blocking pool.
struct Job {
    state: ReportState,
    mode: Option<Mode>,
    content_type: String,
    body: Bytes,
    images: Option<crate::decision::images::KnownImages>,
    runtime: tokio::runtime::Handle,
    started: std::time::Instant,
}

impl Job {
    /// Computes the report, says on `computed` whether it could be, logs
    /// one line, then streams it into `tx` within `--report-max-bytes` and
    /// `--report-write-timeout`. The slot (`permit`) is given back when the
    /// work is done, before the client sees the end of the answer: a
    /// client that sends its next report once it has read the answer
    /// finds the slot free.
    fn run(
        self,
        permit: tokio::sync::OwnedSemaphorePermit,
        computed: oneshot::Sender<Result<(), ReportError>>,
        tx: mpsc::Sender<Chunk>,
    ) {
        let Self {
            state,
            mode,
            content_type,
            body,
            images,
            runtime,
            started,
        } = self;
        let limits = state.server.limits;
        let report = compute(&state, mode, &content_type, &body, images.as_ref());
        let body_bytes = body.len();
        drop(body);
        let latency_us = || u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let report = match report {
            Ok(report) => report,
            Err(e) => {
                tracing::info!(
                    endpoint = "report",
                    body_bytes,
                    error = %e,
                    latency_us = latency_us(),
                    "report request"
                );
                drop(permit);
                let _ = computed.send(Err(e));
                return;
            }
        };
        // One line per request, like the reviews': counts, never contents.
        let s = &report.summary;
        tracing::info!(
            endpoint = "report",
            body_bytes,
            objects = s.objects,
            windows_workloads = s.windows_workloads,
            deny = s.verdicts.deny,
            warn = s.verdicts.warn,
            allow = s.verdicts.allow,
            input_errors = report.input_errors.len(),
            latency_us = latency_us(),
            "report request"
        );
        if computed.send(Ok(())).is_err() {
            // The request timed out meanwhile: nobody to answer.
            return;
        }
        let deadline = tokio::time::Instant::now() + limits.report_write_timeout;
        let mut out = ChannelWriter {
            tx,
            runtime,
            deadline,
            buf: Vec::with_capacity(CHUNK),
        };
        let written = write_capped(&report, limits.report_max_bytes, &mut out);
        drop(report);
        drop(permit);
        if let Err(e) = written.and_then(|()| out.end()) {
            tracing::warn!(
                error = %e,
                timeout = ?limits.report_write_timeout,
                "/report answer not read in time (--report-write-timeout) or the client left; cut off"
            );
        }
    }
}

/// The report of `body`, over the server's policy, target cluster and
/// cluster cache, with the image facts looked up for it (`--registry`).
fn compute(
    state: &ReportState,
    mode: Option<Mode>,
    content_type: &str,
    body: &[u8],
    images: Option<&crate::decision::images::KnownImages>,
) -> Result<crate::render::report::Report, ReportError> {
    let ReportState { policy, server } = state;
    let cache = server.admission.lookup.as_ref();
    let runtime_classes = cache.and_then(|n| n.runtime_classes());
    // The exceptions the webhook honours, at this instant.
    let exceptions = cache.and_then(|n| n.exceptions(crate::entry::exceptions::clock()));
    let namespace_lookup = (cache.is_some() || server.gmsa.get().is_some()).then(|| {
        NamespaceLookup(Arc::new(ServerNamespaces(Arc::clone(server)))
            as Arc<dyn crate::decision::cluster::ClusterLookup>)
    });
    let cx = Context {
        cluster: server.admission.target.clone(),
        runtime_classes: runtime_classes.as_deref(),
        nodes: None,
        images,
        gmsa: None,
        exceptions: exceptions.as_deref(),
    };
    let options = ReportOptions {
        mode,
        patched_objects: true,
        fold: true,
        namespaces: Vec::new(),
        namespace_lookup,
    };
    report_body(policy, &cx, &options, content_type, body)
}

/// Writes `report` as JSON (the `--format json` shape) with its objects
/// up to `max_bytes` in all; the rest are left out and counted in
/// `truncated`.
fn write_capped(
    report: &crate::render::report::Report,
    max_bytes: usize,
    out: &mut ChannelWriter,
) -> std::io::Result<()> {
    let mut sink = JsonSink::new(out)?;
    let mut written = 0usize;
    let mut buf = Vec::new();
    let total = report.objects.len();
    let mut shown = 0;
    for object in &report.objects {
        buf.clear();
        let fits = serde_json::to_writer(
            Capped {
                buf: &mut buf,
                room: max_bytes.saturating_sub(written),
            },
            object,
        )
        .is_ok();
        if !fits {
            break;
        }
        written += buf.len();
        sink.object_json(&buf)?;
        shown += 1;
    }
    drop(buf);
    if shown < total {
        sink.truncated(serde_json::json!({
            "objectsShown": shown,
            "objectsLeftOut": total - shown,
            "maxBytes": max_bytes,
            "message": format!(
                "the answer is limited to {max_bytes} bytes of objects (--report-max-bytes): {} of \
                 {total} object(s) are left out (the summary counts them all); run `winadmit \
                 report --from-file` on the input for every object",
                total - shown
            ),
        }));
    }
    Box::new(sink).finish(&report.summary, &report.input_errors)
}

/// A `Vec` that refuses to grow past `room` bytes.
struct Capped<'a> {
    buf: &'a mut Vec<u8>,
    room: usize,
}

impl std::io::Write for Capped<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.room {
            return Err(std::io::Error::other("over --report-max-bytes"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes handed from the blocking thread to the response at a time.
const CHUNK: usize = 64 * 1024;

/// What the blocking thread sends to the response body.
enum Chunk {
    Data(Bytes),
    /// The answer is complete.
    End,
}

/// Writes to the response body through a small channel, from a blocking
/// thread; a send that cannot complete by `deadline` (the client does not
/// read) fails, which ends the report.
struct ChannelWriter {
    tx: mpsc::Sender<Chunk>,
    runtime: tokio::runtime::Handle,
    deadline: tokio::time::Instant,
    buf: Vec<u8>,
}

impl ChannelWriter {
    /// Ends the answer (what is buffered, then the end of the stream).
    fn end(mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut self)?;
        self.send(Chunk::End)
    }

    fn send(&mut self, chunk: Chunk) -> std::io::Result<()> {
        let sent = self
            .runtime
            .block_on(tokio::time::timeout_at(self.deadline, self.tx.send(chunk)));
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(std::io::Error::other("the client went away")),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not read the answer within --report-write-timeout",
            )),
        }
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
            self.send(Chunk::Data(chunk))?;
        }
        Ok(data.len())
    }

    /// Sends what is buffered and marks the answer complete (`JsonSink`
    /// flushes once, at its end).
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut self.buf));
            self.send(Chunk::Data(chunk))?;
        }
        Ok(())
    }
}

/// The response body: the chunks until `End`; an error (the stream is
/// reset, not ended as if complete) when the writer stopped before it.
fn chunks(
    rx: mpsc::Receiver<Chunk>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(rx), |rx| async move {
        let mut rx = rx?;
        match rx.recv().await {
            Some(Chunk::Data(b)) => Some((Ok(b), Some(rx))),
            Some(Chunk::End) => None,
            None => Some((
                Err(std::io::Error::other(
                    "the report was cut off (--report-write-timeout)",
                )),
                None,
            )),
        }
    })
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}
