//! The accept loop: TLS handshakes off the accept path, HTTP/1.1 and HTTP/2
//! on one port, bounded connections and timeouts, graceful draining.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::Request;
use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::budget::{BodyBudget, Charge};
use super::{Limits, ServerState};

/// How the server stops.
#[derive(Debug, Clone, Copy)]
pub struct Drain {
    /// After the signal, keep accepting (with `/readyz` false) this long, so
    /// load balancers and endpoint slices stop sending traffic first.
    pub delay: Duration,
    /// Then wait at most this long for in-flight requests.
    pub timeout: Duration,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            timeout: Duration::from_secs(25),
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then
/// drains: readiness turns false, new connections stop, in-flight requests
/// finish (HTTP/1.1 closes after the current response, HTTP/2 sends GOAWAY).
///
/// # Errors
/// Never for a single connection's problems (those are logged); only if the
/// listener itself fails.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()> + Send,
    drain: Drain,
) -> std::io::Result<()> {
    serve(
        listener,
        Some(TlsAcceptor::from(tls)),
        app,
        state,
        shutdown,
        drain,
    )
    .await
}

/// Serves a plain-HTTP router (the metrics listener) like [`serve_tls`],
/// without TLS: the same connection cap, timeouts, body budget and drain.
///
/// # Errors
/// The listener fails.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()> + Send,
    drain: Drain,
) -> std::io::Result<()> {
    serve(listener, None, app, state, shutdown, drain).await
}

async fn serve(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    app: Router,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()> + Send,
    drain: Drain,
) -> std::io::Result<()> {
    let limits = state.limits;
    let builder = Arc::new(http_builder(&limits));
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let open = Arc::new(Connections::default());
    let (stop_tx, stop_rx) = watch::channel(());
    state.set_ready(true);

    tokio::pin!(shutdown);
    // Set once the shutdown signal arrives: the end of the drain delay.
    let mut delay: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        enum Event {
            Signal,
            DelayOver,
            Accepted(
                Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError>,
                std::io::Result<(TcpStream, SocketAddr)>,
            ),
        }
        let draining = delay.is_some();
        let delay_over = async {
            match delay.as_mut() {
                Some(s) => s.await,
                None => std::future::pending().await,
            }
        };
        let next = async {
            let accepted = listener.accept().await;
            (slot(&permits, &open).await, accepted)
        };
        let event = tokio::select! {
            () = &mut shutdown, if !draining => Event::Signal,
            () = delay_over => Event::DelayOver,
            (p, r) = next => Event::Accepted(p, r),
        };
        let (permit, accepted) = match event {
            Event::Signal => {
                state.set_ready(false);
                tracing::info!(delay = ?drain.delay, "shutting down: readiness is false, draining");
                delay = Some(Box::pin(tokio::time::sleep(drain.delay)));
                continue;
            }
            Event::DelayOver => break,
            Event::Accepted(Err(_), _) => break,
            Event::Accepted(Ok(p), r) => (p, r),
        };
        match accepted {
            Ok((stream, peer)) => {
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let app = app.clone();
                let stop = stop_rx.clone();
                let open = Arc::clone(&open);
                let budget = Arc::clone(&state.body_budget);
                let conn = open.add();
                tokio::spawn(async move {
                    let io = Io {
                        acceptor,
                        builder: &builder,
                        app,
                        limits,
                        budget,
                    };
                    connection(stream, peer, io, &conn, stop).await;
                    open.remove(conn.id);
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    drop(listener);
    drop(stop_rx);
    // Tell every connection to finish its current request and close.
    let _ = stop_tx.send(());
    if tokio::time::timeout(drain.timeout, stop_tx.closed())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?drain.timeout, "drain timeout: closing remaining connections");
    } else {
        tracing::info!("drained: every in-flight request finished");
    }
    Ok(())
}

/// HTTP/2 streams a client may have open on one connection. The API server
/// sends one review per stream and opens another connection when a
/// connection's streams are all in use; Go's own HTTP/2 server allows 250.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Bytes a client may send on one HTTP/2 stream before the server has read
/// them: a 3 MiB review arrives in three windows. The server reads bodies
/// as they come, into the `--max-body-bytes-in-flight` budget.
pub const H2_STREAM_WINDOW: u32 = 1024 * 1024;
/// Bytes a client may send on one HTTP/2 connection, all streams together,
/// before the server has read them.
pub const H2_CONNECTION_WINDOW: u32 = 2 * 1024 * 1024;
/// Largest HTTP/2 header list (HPACK-decoded) the server accepts.
pub const H2_MAX_HEADER_LIST: u32 = 16 * 1024;

fn http_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .adaptive_window(false)
        .max_header_list_size(H2_MAX_HEADER_LIST)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    b
}

/// A connection that has not sent its first request (or not finished its
/// TLS handshake) is left alone this long before it may be closed for a
/// new client, and only when no established connection is idle.
const NEW_CONNECTION_GRACE: Duration = Duration::from_secs(1);
/// A connection whose requests are all waiting for body bytes, none of
/// which arrived for this long, counts as idle for the connection cap.
const STALL: Duration = Duration::from_secs(1);
/// How often a new client at the cap looks again for a connection to close.
const SLOT_RECHECK: Duration = Duration::from_millis(100);
/// A connection asked to close gets this long before another is asked.
const SHED_PENDING: Duration = Duration::from_secs(2);

/// A free connection slot. At the cap, one connection is asked to close
/// (gracefully: GOAWAY on HTTP/2, `Connection: close` after the current
/// response on HTTP/1.1) for the new client, and the search repeats while
/// the new client waits: the connection idle the longest, else the one
/// whose request bodies have stalled the longest (those requests are
/// answered 503 at once), else one that never sent a request. A new client
/// waits only while every connection has a request making progress.
async fn slot(
    permits: &Arc<Semaphore>,
    open: &Connections,
) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
    loop {
        if let Ok(p) = Arc::clone(permits).try_acquire_owned() {
            return Ok(p);
        }
        if !open.shed_pending()
            && let Some((victim, why)) = open.victim()
        {
            tracing::debug!(
                connection = victim.id,
                reason = why.as_str(),
                "connection limit (--max-connections) reached: closing a connection for a new client"
            );
            victim.shed(why);
        }
        tokio::select! {
            p = Arc::clone(permits).acquire_owned() => return p,
            () = tokio::time::sleep(SLOT_RECHECK) => {}
        }
    }
}

/// Why a connection may be closed for a new client, best choice first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sheddable {
    /// Served a request, has none in progress.
    Idle,
    /// Every request in progress waits for body bytes that stopped coming.
    Stalled,
    /// TLS done, no request yet.
    Silent,
    /// Still in the TLS handshake.
    Handshaking,
}

impl Sheddable {
    fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle the longest",
            Self::Stalled => "request bodies stalled the longest",
            Self::Silent => "no request since the handshake",
            Self::Handshaking => "TLS handshake not finished",
        }
    }
}

/// The open connections, for shedding at the cap.
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Connections {
    fn add(&self) -> Arc<Conn> {
        let now = Instant::now();
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            active: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            times: Mutex::new(Times {
                opened: now,
                handshaken: None,
                first_request: None,
                idle_since: now,
                body_progress: now,
                shed_at: None,
            }),
            shed: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            close: Notify::new(),
            cut: Notify::new(),
        });
        self.lock().insert(conn.id, Arc::clone(&conn));
        conn
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// A connection was asked to close recently and is still open.
    fn shed_pending(&self) -> bool {
        self.lock().values().any(|c| {
            c.times()
                .shed_at
                .is_some_and(|at| at.elapsed() < SHED_PENDING)
        })
    }

    /// The connection to close for a new client, and why.
    fn victim(&self) -> Option<(Arc<Conn>, Sheddable)> {
        let now = Instant::now();
        self.lock()
            .values()
            .filter_map(|c| c.sheddable(now).map(|(why, since)| (why, since, c)))
            .min_by_key(|(why, since, c)| (*why, *since, c.id))
            .map(|(why, _, c)| (Arc::clone(c), why))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        // A poisoned map is still a valid map.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// When things happened on a connection.
#[derive(Debug, Clone, Copy)]
struct Times {
    opened: Instant,
    handshaken: Option<Instant>,
    first_request: Option<Instant>,
    /// When the last request ended (or the handshake, before any).
    idle_since: Instant,
    /// When a request body last received bytes (or a request started).
    body_progress: Instant,
    shed_at: Option<Instant>,
}

/// One connection: its requests in progress (and how many of them still
/// wait for body bytes), when things happened, and ways to ask it to close.
struct Conn {
    id: u64,
    /// Requests in progress: from the headers until the response is sent.
    active: AtomicUsize,
    /// Requests in progress whose body has not been read to its end.
    receiving: AtomicUsize,
    times: Mutex<Times>,
    shed: AtomicBool,
    /// Shed because its request bodies stalled: those requests are answered.
    stalled: AtomicBool,
    /// Wakes the connection task to close.
    close: Notify,
    /// Wakes requests whose body is incomplete, to answer 503 on shedding.
    cut: Notify,
}

impl Conn {
    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Since when no request has been in progress; `None` while one is.
    fn idle_since(&self) -> Option<Instant> {
        let since = self.times().idle_since;
        (self.active.load(Ordering::SeqCst) == 0).then_some(since)
    }

    /// Whether (and since when) this connection may be closed for a new
    /// client.
    fn sheddable(&self, now: Instant) -> Option<(Sheddable, Instant)> {
        if self.shed.load(Ordering::SeqCst) {
            return None;
        }
        let t = *self.times();
        let old_enough =
            |since: Instant| now.saturating_duration_since(since) >= NEW_CONNECTION_GRACE;
        let Some(handshaken) = t.handshaken else {
            return old_enough(t.opened).then_some((Sheddable::Handshaking, t.opened));
        };
        if t.first_request.is_none() {
            return old_enough(handshaken).then_some((Sheddable::Silent, handshaken));
        }
        let active = self.active.load(Ordering::SeqCst);
        let receiving = self.receiving.load(Ordering::SeqCst);
        if active == 0 {
            Some((Sheddable::Idle, t.idle_since))
        } else if receiving >= active && now.saturating_duration_since(t.body_progress) >= STALL {
            Some((Sheddable::Stalled, t.body_progress))
        } else {
            None
        }
    }

    fn shed(&self, why: Sheddable) {
        self.times().shed_at = Some(Instant::now());
        self.stalled
            .store(why == Sheddable::Stalled, Ordering::SeqCst);
        self.shed.store(true, Ordering::SeqCst);
        self.close.notify_one();
        self.cut.notify_waiters();
    }

    fn handshaken(&self) {
        let now = Instant::now();
        let mut t = self.times();
        t.handshaken = Some(now);
        t.idle_since = now;
    }

    fn enter(self: &Arc<Self>) -> InProgress {
        let now = Instant::now();
        {
            let mut t = self.times();
            t.first_request.get_or_insert(now);
            t.body_progress = now;
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        InProgress(Arc::clone(self))
    }

    fn body_progress(&self) {
        self.times().body_progress = Instant::now();
    }

    /// Completes once the connection has had no request in progress for
    /// `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            match self.idle_since() {
                Some(since) if since.elapsed() >= timeout => return,
                Some(since) => tokio::time::sleep_until((since + timeout).into()).await,
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

/// A request in progress on a connection; its end (the response sent, or
/// given up) makes the connection idle.
struct InProgress(Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.times().idle_since = Instant::now();
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request's body as it is read: charged to the body budget, counted
/// as progress on its connection, and known to be complete or not.
struct Metered {
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
struct Counted {
    app: Router,
    conn: Arc<Conn>,
    budget: Arc<BodyBudget>,
    max_body_bytes: usize,
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
    super::status_response(
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
    super::status_response(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "winadmit closed this connection for a new client (--max-connections): this request's \
         body had stopped arriving; retry on a new connection",
    )
}

/// What every connection is served with.
struct Io<'b> {
    acceptor: Option<TlsAcceptor>,
    builder: &'b auto::Builder<TokioExecutor>,
    app: Router,
    limits: Limits,
    budget: Arc<BodyBudget>,
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    io: Io<'_>,
    conn: &Arc<Conn>,
    mut stop: watch::Receiver<()>,
) {
    let Io {
        acceptor,
        builder,
        app,
        limits,
        budget,
    } = io;
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = acceptor else {
        conn.handshaken();
        let service = Counted {
            app,
            conn: Arc::clone(conn),
            budget,
            max_body_bytes: limits.max_body_bytes,
        };
        return serve_http(stream, builder, service, peer, &limits, conn, stop).await;
    };
    let tls = tokio::select! {
        r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream)) => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        _ = stop.changed() => return,
        () = conn.close.notified() => return,
    };
    // The idle clock starts after the handshake.
    conn.handshaken();
    let service = Counted {
        app,
        conn: Arc::clone(conn),
        budget,
        max_body_bytes: limits.max_body_bytes,
    };
    serve_http(tls, builder, service, peer, &limits, conn, stop).await;
}

/// Serves HTTP on one connection until it ends, the server drains, or it
/// is closed (idle, or shed at the cap).
async fn serve_http<I>(
    io: I,
    builder: &auto::Builder<TokioExecutor>,
    service: Counted,
    peer: SocketAddr,
    limits: &Limits,
    conn: &Arc<Conn>,
    mut stop: watch::Receiver<()>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let serving = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(serving);
    let why = tokio::select! {
        r = serving.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            return;
        }
        _ = stop.changed() => {
            serving.as_mut().graceful_shutdown();
            if let Err(e) = serving.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error while draining");
            }
            return;
        }
        () = conn.close.notified() => "at the connection limit (--max-connections), for a new client",
        () = conn.idle_for(limits.idle_timeout) => "idle (--idle-timeout)",
    };
    tracing::debug!(%peer, reason = why, "closing the connection");
    // HTTP/2 gets a GOAWAY, HTTP/1.1 closes after the current response.
    // Requests in progress finish (a shed connection's requests whose
    // bodies stalled were answered 503); an idle connection gets a second,
    // then is dropped.
    serving.as_mut().graceful_shutdown();
    let grace = if conn.active.load(Ordering::SeqCst) == 0 {
        Duration::from_secs(1)
    } else {
        limits.request_timeout
    };
    let _ = tokio::time::timeout(grace, serving).await;
}
