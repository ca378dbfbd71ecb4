//! The accept loop: TLS handshakes off the accept path, HTTP/1.1 and HTTP/2
//! on one port, bounded connections and timeouts, graceful draining.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
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
            let permit = permits.clone().acquire_owned().await;
            (permit, listener.accept().await)
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
                tokio::spawn(async move {
                    connection(stream, peer, acceptor, &builder, app, limits, stop).await;
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

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    builder: &auto::Builder<TokioExecutor>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<()>,
) {
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
    };
    let service = TowerToHyperService::new(app);
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error while draining");
            }
        }
    }
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
