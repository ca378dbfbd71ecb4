//! Request and response bodies on a connection: each request body charged
//! to `--max-body-bytes-in-flight` as it is read and counted as progress on
//! its connection; each response keeping its request in progress until it
//! is sent; the 503s for a full budget and for a body cut at the cap.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Bytes;
use axum::http::Request;
use axum::response::Response;

use super::connections::{Conn, InProgress, STALL};
use crate::entry::server::budget::{BodyBudget, Charge};

/// One request's body as it is read: charged to the body budget, counted
/// as progress on its connection, and known to be complete or not.
pub(super) struct Metered {
    conn: Arc<Conn>,
    budget: Arc<BodyBudget>,
    state: Mutex<MeterState>,
}

#[derive(Default)]
struct MeterState {
    charge: Charge,
    /// Bytes charged up front (the `Content-Length`).
    reserved: usize,
    read: usize,
    complete: bool,
    over_budget: bool,
}

impl Metered {
    fn new(conn: &Arc<Conn>, budget: &Arc<BodyBudget>, reserved: Charge, bytes: usize) -> Self {
        conn.receiving.fetch_add(1, Ordering::SeqCst);
        Self {
            conn: Arc::clone(conn),
            budget: Arc::clone(budget),
            state: Mutex::new(MeterState {
                charge: reserved,
                reserved: bytes,
                ..MeterState::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MeterState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `n` more bytes arrived; `false` when they do not fit the budget.
    fn read(&self, n: usize) -> bool {
        self.conn.body_progress();
        let mut s = self.state();
        s.read += n;
        if s.read > s.reserved {
            let extra = s.read - s.reserved.max(s.read - n);
            match self.budget.try_charge(extra) {
                Some(c) => s.charge.merge(c),
                None => {
                    s.over_budget = true;
                    return false;
                }
            }
        }
        true
    }

    fn complete(&self) {
        let mut s = self.state();
        if !s.complete {
            s.complete = true;
            self.conn.receiving.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn is_complete(&self) -> bool {
        self.state().complete
    }

    fn over_budget(&self) -> bool {
        self.state().over_budget
    }

    /// Completes when the connection is shed while this body is incomplete.
    async fn cut(&self) {
        loop {
            let notified = self.conn.cut.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Only a connection shed for its stalled bodies, and only a body
            // that is still stalled: a request that arrived as an idle
            // connection was shed finishes as usual.
            if self.conn.stalled.load(Ordering::SeqCst)
                && !self.is_complete()
                && self.conn.times().body_progress.elapsed() >= STALL
            {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // A request given up before its body ended no longer waits for it.
        self.complete();
    }
}

/// The request body the router sees.
struct MeteredBody<B> {
    inner: B,
    meter: Arc<Metered>,
}

/// A body frame did not fit `--max-body-bytes-in-flight`.
#[derive(Debug, thiserror::Error)]
#[error("request bodies in flight are over --max-body-bytes-in-flight")]
struct OverBudget;

impl<B> http_body::Body for MeteredBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && !this.meter.read(data.len())
                {
                    return Poll::Ready(Some(Err(OverBudget.into())));
                }
                if this.inner.is_end_stream() {
                    this.meter.complete();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                this.meter.complete();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The response body the client gets: the request stays in progress on
/// its connection until this is sent (or dropped).
struct Tracked {
    inner: axum::body::Body,
    _in_progress: InProgress,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The router, with each request's body metered and its time in progress
/// counted on its connection.
#[derive(Clone)]
pub(super) struct Counted {
    pub(super) app: Router,
    pub(super) conn: Arc<Conn>,
    pub(super) budget: Arc<BodyBudget>,
    pub(super) max_body_bytes: usize,
}

impl<B> tower::Service<Request<B>> for Counted
where
    B: http_body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request<axum::body::Body>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let in_progress = self.conn.enter();
        // A body within --max-body-bytes is charged for its whole length
        // up front: refused before any of it is read when it does not fit.
        // A longer one is refused by the handler (413) without reading.
        let declared = req
            .body()
            .size_hint()
            .exact()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n <= self.max_body_bytes)
            .unwrap_or(0);
        let Some(reserved) = self.budget.try_charge(declared) else {
            let resp = over_budget(&self.budget);
            return Box::pin(async move { Ok(resp.map(|b| track(b, in_progress))) });
        };
        let meter = Arc::new(Metered::new(&self.conn, &self.budget, reserved, declared));
        if req.body().is_end_stream() {
            meter.complete();
        }
        let req = req.map(|inner| {
            axum::body::Body::new(MeteredBody {
                inner,
                meter: Arc::clone(&meter),
            })
        });
        let fut = self.app.call(req);
        let budget = Arc::clone(&self.budget);
        Box::pin(async move {
            let resp = tokio::select! {
                r = fut => {
                    let resp = match r {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    };
                    if meter.over_budget() { over_budget(&budget) } else { resp }
                }
                () = meter.cut() => cut_at_the_cap(),
            };
            // The handler is done with the body: its charge goes back.
            drop(meter);
            Ok(resp.map(|b| track(b, in_progress)))
        })
    }
}

fn track(inner: axum::body::Body, in_progress: InProgress) -> axum::body::Body {
    axum::body::Body::new(Tracked {
        inner,
        _in_progress: in_progress,
    })
}

/// 503 with a Kubernetes `Status`: the body budget is full.
fn over_budget(budget: &BodyBudget) -> Response {
    tracing::warn!(
        limit = budget.limit(),
        "request bodies in flight are at --max-body-bytes-in-flight; answered 503"
    );
    crate::entry::server::status_response(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        &format!(
            "winadmit holds {} bytes of request bodies at most (--max-body-bytes-in-flight) and \
             this one does not fit now; retry",
            budget.limit()
        ),
    )
}

/// 503 with a Kubernetes `Status`: the connection was closed for a new
/// client while this request's body made no progress.
fn cut_at_the_cap() -> Response {
    crate::entry::server::status_response(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "winadmit closed this connection for a new client (--max-connections): this request's \
         body had stopped arriving; retry on a new connection",
    )
}
