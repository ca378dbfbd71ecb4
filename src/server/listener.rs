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
use axum::http::Request;
use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

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
    let limits = state.limits;
    let acceptor = TlsAcceptor::from(tls);
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
                let conn = open.add();
                tokio::spawn(async move {
                    let io = Io {
                        acceptor,
                        builder: &builder,
                        app,
                        limits,
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

fn http_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    b
}

/// A free connection slot. At the cap, the connection idle the longest is
/// asked to close first, so a crowd of idle (or never-speaking) clients
/// cannot lock new ones out; a new client waits only while every
/// connection has a request in progress.
async fn slot(
    permits: &Arc<Semaphore>,
    open: &Connections,
) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
    if let Ok(p) = Arc::clone(permits).try_acquire_owned() {
        return Ok(p);
    }
    if let Some(victim) = open.oldest_idle() {
        tracing::debug!(
            connection = victim.id,
            "connection limit (--max-connections) reached: closing the connection idle the longest"
        );
        victim.shed();
    }
    Arc::clone(permits).acquire_owned().await
}

/// The open connections, for shedding at the cap.
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Connections {
    fn add(&self) -> Arc<Conn> {
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            active: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            shed: AtomicBool::new(false),
            close: Notify::new(),
        });
        self.lock().insert(conn.id, Arc::clone(&conn));
        conn
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// The connection without a request in progress that has been idle the
    /// longest (not already asked to close).
    fn oldest_idle(&self) -> Option<Arc<Conn>> {
        self.lock()
            .values()
            .filter(|c| !c.shed.load(Ordering::SeqCst))
            .filter_map(|c| c.idle_since().map(|since| (since, c)))
            .min_by_key(|(since, c)| (*since, c.id))
            .map(|(_, c)| Arc::clone(c))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        // A poisoned map is still a valid map.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One connection: how many requests it has in progress, since when it is
/// idle, and a way to ask it to close.
struct Conn {
    id: u64,
    active: AtomicUsize,
    idle_since: Mutex<Instant>,
    shed: AtomicBool,
    close: Notify,
}

impl Conn {
    /// Since when no request has been in progress; `None` while one is.
    fn idle_since(&self) -> Option<Instant> {
        let since = *self
            .idle_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (self.active.load(Ordering::SeqCst) == 0).then_some(since)
    }

    fn shed(&self) {
        self.shed.store(true, Ordering::SeqCst);
        self.close.notify_one();
    }

    fn enter(self: &Arc<Self>) -> InProgress {
        self.active.fetch_add(1, Ordering::SeqCst);
        InProgress(Arc::clone(self))
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

/// A request in progress on a connection; its end makes the connection idle.
struct InProgress(Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut since = self
            .0
            .idle_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *since = Instant::now();
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The router, counting the requests in progress on one connection.
#[derive(Clone)]
struct Counted {
    app: Router,
    conn: Arc<Conn>,
}

impl<B> tower::Service<Request<B>> for Counted
where
    Router: tower::Service<Request<B>, Response = Response, Error = Infallible>,
    <Router as tower::Service<Request<B>>>::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request<B>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let guard = self.conn.enter();
        let fut = self.app.call(req);
        Box::pin(async move {
            let resp = fut.await;
            drop(guard);
            resp
        })
    }
}

/// What every connection is served with.
struct Io<'b> {
    acceptor: TlsAcceptor,
    builder: &'b auto::Builder<TokioExecutor>,
    app: Router,
    limits: Limits,
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
    } = io;
    let _ = stream.set_nodelay(true);
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
    *conn
        .idle_since
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    let service = TowerToHyperService::new(Counted {
        app,
        conn: Arc::clone(conn),
    });
    let serving = builder.serve_connection(TokioIo::new(tls), service);
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
        () = conn.close.notified() => "at the connection limit, idle the longest",
        () = conn.idle_for(limits.idle_timeout) => "idle (--idle-timeout)",
    };
    tracing::debug!(%peer, reason = why, "closing the connection");
    // HTTP/2 gets a GOAWAY, HTTP/1.1 closes. A request that started just
    // now may finish; an idle connection gets a second, then is dropped.
    serving.as_mut().graceful_shutdown();
    let grace = if conn.active.load(Ordering::SeqCst) == 0 {
        Duration::from_secs(1)
    } else {
        limits.request_timeout
    };
    let _ = tokio::time::timeout(grace, serving).await;
}

/// Serves a plain-HTTP router (metrics) until `shutdown`.
///
/// # Errors
/// The listener fails.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
