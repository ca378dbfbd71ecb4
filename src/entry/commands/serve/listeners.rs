//! `serve` once everything is loaded: start the cluster cache, bind the
//! HTTPS listener and the optional report and metrics listeners, reload
//! the certificate, and serve until SIGTERM/SIGINT and the drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::crypto::CryptoProvider;

use super::Certificates;
use super::cluster_cache;
use crate::entry::server::listener::{self, Drain};
use crate::entry::server::{self, ServerState, tls};

/// Everything checked and loaded, ready to bind and serve.
pub(super) struct Serving {
    pub(super) listen: SocketAddr,
    /// `--report-listen`, when `--report=separate`.
    pub(super) report_listen: Option<SocketAddr>,
    /// `--metrics-listen`, unless `--metrics=off`.
    pub(super) metrics_listen: Option<SocketAddr>,
    pub(super) endpoints: server::Endpoints,
    /// What the metrics listener serves besides health.
    pub(super) metrics_endpoints: server::Endpoints,
    pub(super) state: Arc<ServerState>,
    pub(super) tls_config: Arc<rustls::ServerConfig>,
    pub(super) certs: Certificates,
    pub(super) tls_reload_interval: Duration,
    pub(super) provider: Arc<CryptoProvider>,
    pub(super) cluster: Option<cluster_cache::Prepared>,
    pub(super) target_summary: String,
    pub(super) drain: Drain,
    /// `--log-format json`: the self-signed banner is a log line too.
    pub(super) json_logs: bool,
}

impl Serving {
    /// Starts the cluster cache, binds every listener, and serves until
    /// SIGTERM/SIGINT and the drain that follows.
    pub(super) async fn serve(self) -> anyhow::Result<()> {
        let Self {
            listen,
            report_listen,
            metrics_listen,
            endpoints,
            metrics_endpoints,
            state,
            tls_config,
            certs,
            tls_reload_interval,
            provider,
            cluster,
            target_summary,
            drain,
            json_logs,
        } = self;
        if let Some(cluster) = cluster {
            cluster.start(&state)?;
        }
        let tcp = bind(listen, "--listen").await?;
        let addr = tcp.local_addr().context("reading the bound address")?;
        if let Some(ca) = &certs.ca_hint {
            announce_self_signed(ca, addr.port(), json_logs);
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let report_task = match report_listen {
            None => None,
            Some(report_addr) => Some(
                spawn_report_listener(report_addr, &state, &tls_config, stop_rx.clone(), drain)
                    .await?,
            ),
        };
        let metrics_task = match metrics_listen {
            None => None,
            Some(metrics_addr) => Some(
                spawn_metrics_listener(
                    metrics_addr,
                    &state,
                    metrics_endpoints,
                    stop_rx.clone(),
                    drain,
                )
                .await?,
            ),
        };
        if let Some(files) = certs.watched {
            tokio::spawn(tls::watch(
                certs.resolver,
                files,
                provider,
                tls_reload_interval,
            ));
        }
        tracing::info!(
            addr = %addr,
            target = %target_summary,
            "winadmit is serving {} over HTTPS (HTTP/1.1 and HTTP/2)",
            server::route_list(true, endpoints)
        );
        let app = server::router_with(state.clone(), endpoints);
        let shutdown = async move {
            signal().await;
            let _ = stop_tx.send(true);
        };
        listener::serve_tls(tcp, tls_config, app, state, shutdown, drain)
            .await
            .context("serving")?;
        for task in [report_task, metrics_task].into_iter().flatten() {
            let _ = task.await;
        }
        drop(stop_rx);
        Ok(())
    }
}

async fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({flag})"))
}

/// Resolves when the stop signal is sent.
async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// How to reach and trust the `--self-signed` server.
fn announce_self_signed(ca: &std::path::Path, port: u16, json_logs: bool) {
    let ca = ca.display();
    if json_logs {
        tracing::info!(
            ca = %ca,
            try_it = %format!("curl --cacert {ca} https://localhost:{port}/healthz"),
            "self-signed certificate for localhost, 127.0.0.1 and ::1 (ECDSA P-256, in memory); its CA is written to the file in `ca`"
        );
        return;
    }
    eprintln!(
        "winadmit: self-signed certificate for localhost, 127.0.0.1 and ::1 (ECDSA P-256, in memory)\n\
         winadmit: its CA is written to {ca}\n\
         winadmit: try: curl --cacert {ca} https://localhost:{port}/healthz"
    );
}

/// `--report=separate`: POST /report over HTTPS on its own address, stopped
/// and drained with the main listener.
async fn spawn_report_listener(
    addr: SocketAddr,
    state: &Arc<ServerState>,
    tls_config: &Arc<rustls::ServerConfig>,
    stop: tokio::sync::watch::Receiver<bool>,
    drain: Drain,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let r = bind(addr, "--report-listen").await?;
    let raddr = r.local_addr().context("reading the bound address")?;
    tracing::info!(addr = %raddr, "serving POST /report over HTTPS");
    let app = server::report_router(state.clone());
    let serving = listener::serve_tls(
        r,
        tls_config.clone(),
        app,
        state.clone(),
        stopped(stop),
        drain,
    );
    Ok(tokio::spawn(async move {
        if let Err(e) = serving.await {
            tracing::error!(error = %e, "report listener failed");
        }
    }))
}

/// `--metrics-listen`: plain-HTTP /metrics (and /report with
/// `--report=metrics`) on its own address, stopped and drained with the
/// main listener.
async fn spawn_metrics_listener(
    addr: SocketAddr,
    state: &Arc<ServerState>,
    endpoints: server::Endpoints,
    stop: tokio::sync::watch::Receiver<bool>,
    drain: Drain,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let m = bind(addr, "--metrics-listen").await?;
    let maddr = m.local_addr().context("reading the bound address")?;
    tracing::info!(
        addr = %maddr,
        metrics = endpoints.metrics,
        report = endpoints.report,
        "serving plain-HTTP /metrics"
    );
    let app = server::metrics_router(state.clone(), endpoints);
    let serving = listener::serve_plain(m, app, state.clone(), stopped(stop), drain);
    Ok(tokio::spawn(async move {
        if let Err(e) = serving.await {
            tracing::error!(error = %e, "metrics listener failed");
        }
    }))
}

/// SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c => tracing::info!("SIGINT received"),
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the server");
                ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
