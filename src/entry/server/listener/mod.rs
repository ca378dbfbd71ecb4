//! The accept loop: TLS handshakes off the accept path, HTTP/1.1 and HTTP/2
//! on one port, bounded connections and timeouts, graceful draining.

mod connections;
mod metered;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::budget::BodyBudget;
use super::{Limits, ServerState};
use connections::{Conn, Connections};
use metered::Counted;

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
                let io = Io {
                    acceptor: acceptor.clone(),
                    builder: Arc::clone(&builder),
                    app: app.clone(),
                    limits,
                    budget: Arc::clone(&state.body_budget),
                };
                spawn_connection(stream, peer, io, &open, permit, stop_rx.clone());
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
    drained(&stop_tx, drain.timeout).await;
    Ok(())
}

/// Serves one accepted connection on a task of its own, holding its slot
/// (`permit`) until it closes.
fn spawn_connection(
    stream: TcpStream,
    peer: SocketAddr,
    io: Io,
    open: &Arc<Connections>,
    permit: OwnedSemaphorePermit,
    stop: watch::Receiver<()>,
) {
    let open = Arc::clone(open);
    let conn = open.add();
    tokio::spawn(async move {
        connection(stream, peer, io, &conn, stop).await;
        open.remove(conn.id);
        drop(permit);
    });
}

/// Tells every connection to finish its current request and close, and
/// waits for them at most `timeout`.
async fn drained(stop_tx: &watch::Sender<()>, timeout: Duration) {
    let _ = stop_tx.send(());
    if tokio::time::timeout(timeout, stop_tx.closed())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?timeout, "drain timeout: closing remaining connections");
    } else {
        tracing::info!("drained: every in-flight request finished");
    }
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

/// How often a new client at the cap looks again for a connection to close.
const SLOT_RECHECK: Duration = Duration::from_millis(100);

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

/// What every connection is served with.
struct Io {
    acceptor: Option<TlsAcceptor>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    app: Router,
    limits: Limits,
    budget: Arc<BodyBudget>,
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    io: Io,
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
        return serve_http(stream, &builder, service, peer, &limits, conn, stop).await;
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
    serve_http(tls, &builder, service, peer, &limits, conn, stop).await;
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
