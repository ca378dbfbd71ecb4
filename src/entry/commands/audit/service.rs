//! The audit process's plumbing: leader election through a Lease, the
//! metrics listener, and the signals that stop it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use kube::Client;
use tokio::sync::watch;

use crate::entry::cli::AuditArgs;
use crate::entry::server::Metrics;

pub(super) type LeaseTask = tokio::task::JoinHandle<
    Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>,
>;

/// `--leader-election`: the Lease's holder writes; without it this
/// replica always writes.
pub(super) async fn leadership(
    args: &AuditArgs,
    client: &Client,
) -> anyhow::Result<(watch::Receiver<bool>, Option<LeaseTask>)> {
    if !args.leader_election {
        let (tx, rx) = watch::channel(true);
        // Kept alive for the process: the receiver stays `true`.
        std::mem::forget(tx);
        return Ok((rx, None));
    }
    let namespace = args
        .lease_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".to_owned());
    let identity = args
        .lease_identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        });
    let duration = args.lease_duration.as_secs().max(2);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &args.lease_name)
        .with_namespace(&namespace)
        .with_identity(&identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .with_field_manager(super::writer::FIELD_MANAGER)
        .build()
        .await
        .with_context(|| {
            format!(
                "cannot use the Lease {namespace}/{} (--lease-name, --lease-namespace): grant get, create and patch on leases.coordination.k8s.io",
                args.lease_name
            )
        })?;
    tracing::info!(lease = %format!("{namespace}/{}", args.lease_name), identity = %identity, "audit: leader election on; the Lease's holder writes the reports");
    let (rx, handle) = manager.watch().await;
    Ok((rx, Some(handle)))
}

/// `/metrics`, `/healthz`, `/readyz` (ready once a first pass is done).
pub(super) async fn serve_metrics(
    addr: std::net::SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
    let router = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = Arc::clone(&metrics);
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::Relaxed);
                async move {
                    if ready {
                        (axum::http::StatusCode::OK, "ok")
                    } else {
                        (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "not judged yet",
                        )
                    }
                }
            }),
        );
    tracing::info!(%addr, "audit: serving /metrics, /healthz and /readyz");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!("audit: the metrics listener stopped: {e}");
        }
    });
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
pub(super) async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
