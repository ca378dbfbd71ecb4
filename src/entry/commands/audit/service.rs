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

/// This replica's name: in the Lease, and on every report it writes.
pub(super) fn identity(args: &AuditArgs) -> String {
    args.lease_identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        })
}

/// Who leads: the lease manager's flag, and the Lease itself.
pub(super) struct Leadership {
    /// The lease manager's view (`true` without `--leader-election`).
    pub flag: watch::Receiver<bool>,
    /// The Lease, read before each round of writes.
    pub lease: Option<LeaseCheck>,
    pub task: Option<LeaseTask>,
}

impl Leadership {
    /// Whether this replica leads now: the lease manager says so and the
    /// Lease names it as its holder and has not expired. The flag alone is
    /// what this process last heard; a process paused past the Lease's
    /// duration still holds `true` when it resumes.
    pub async fn leads(&self) -> bool {
        if !*self.flag.borrow() {
            return false;
        }
        match &self.lease {
            Some(lease) => lease.held().await,
            None => true,
        }
    }
}

/// Reads the audit's Lease: is it held by this replica, and not expired?
pub(super) struct LeaseCheck {
    api: kube::Api<k8s_openapi::api::coordination::v1::Lease>,
    name: String,
    identity: String,
    /// The last failure to read it, to log each once.
    failing: std::sync::Mutex<Option<String>>,
}

impl LeaseCheck {
    pub async fn held(&self) -> bool {
        let lease = match self.api.get(&self.name).await {
            Ok(lease) => {
                *self
                    .failing
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                lease
            }
            Err(e) => {
                let message = crate::entry::errors::error_chain(&e);
                let mut failing = self
                    .failing
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if failing.as_deref() != Some(message.as_str()) {
                    tracing::warn!(
                        "audit: cannot read the Lease {}: {message}; not writing until it can be read",
                        self.name
                    );
                    *failing = Some(message);
                }
                return false;
            }
        };
        let Some(spec) = lease.spec else {
            return false;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expires = spec.renew_time.as_ref().map(|t| {
            t.0.as_millisecond() + i64::from(spec.lease_duration_seconds.unwrap_or(0)) * 1000
        });
        held_by(
            spec.holder_identity.as_deref(),
            expires,
            &self.identity,
            now,
        )
    }
}

/// A Lease whose holder is `me` and whose expiry (unix milliseconds) is
/// after `now`.
fn held_by(holder: Option<&str>, expires: Option<i64>, me: &str, now: i64) -> bool {
    holder == Some(me) && expires.is_some_and(|e| e > now)
}

/// `--leader-election`: the Lease's holder writes; without it this
/// replica always writes.
pub(super) async fn leadership(
    args: &AuditArgs,
    client: &Client,
    identity: &str,
) -> anyhow::Result<Leadership> {
    if !args.leader_election {
        let (tx, rx) = watch::channel(true);
        // Kept alive for the process: the receiver stays `true`.
        std::mem::forget(tx);
        return Ok(Leadership {
            flag: rx,
            lease: None,
            task: None,
        });
    }
    let namespace = args
        .lease_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".to_owned());
    let duration = args.lease_duration.as_secs().max(2);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &args.lease_name)
        .with_namespace(&namespace)
        .with_identity(identity)
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
    Ok(Leadership {
        flag: rx,
        lease: Some(LeaseCheck {
            api: kube::Api::namespaced(client.clone(), &namespace),
            name: args.lease_name.clone(),
            identity: identity.to_owned(),
            failing: std::sync::Mutex::new(None),
        }),
        task: Some(handle),
    })
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

#[cfg(test)]
mod tests {
    use super::held_by;

    #[test]
    fn a_lease_leads_only_while_it_names_this_replica_and_has_not_expired() {
        assert!(held_by(Some("a"), Some(2000), "a", 1000));
        assert!(!held_by(Some("a"), Some(2000), "a", 2000), "expired");
        assert!(!held_by(Some("b"), Some(2000), "a", 1000), "another holder");
        assert!(!held_by(None, Some(2000), "a", 1000), "released");
        assert!(!held_by(Some("a"), None, "a", 1000), "never renewed");
    }
}
