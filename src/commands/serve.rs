//! `winadmit serve`: load and check everything, then bind and serve until
//! SIGTERM/SIGINT. Glue only: the decision is `admission::review`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::crypto::CryptoProvider;

use crate::admission::Admission;
use crate::cli::{Exposure, LogFormat, ReportExposure, ServeArgs};
use crate::server::listener::{self, Drain};
use crate::server::tls::{self, CertFiles, CertResolver};
use crate::server::{self, Limits, ServerState};

mod cluster_cache;

/// # Errors
/// A start-up problem, naming the flag or file: policy, certificate, key,
/// client CA, or an address that cannot be bound.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ServeArgs {
        listen,
        tls_cert,
        tls_key,
        self_signed,
        self_signed_dir,
        client_ca,
        tls_reload_interval,
        metrics_listen,
        metrics,
        report,
        report_listen,
        report_max_bytes,
        report_write_timeout,
        report_concurrency,
        policy,
        cluster,
        images,
        max_body_bytes,
        max_body_bytes_in_flight,
        request_timeout,
        header_timeout,
        handshake_timeout,
        max_connections,
        idle_timeout,
        drain_delay,
        shutdown_timeout,
        worker_threads,
        log_format,
        log_level,
    } = args;
    let _log_guard = init_logging(log_format, &log_level)?;
    let exposure = endpoints(metrics, metrics_listen, report, report_listen)?;
    // kube's client (the cluster cache) uses the process default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    // Fail fast: policy and TLS material are checked before binding.
    let (pol, target) =
        super::load_policy(&policy).context("cannot start: fix the policy (--policy)")?;
    let certs = if self_signed {
        Certificates::self_signed(self_signed_dir, &provider)?
    } else {
        Certificates::from_files(tls_cert, tls_key, &provider)?
    };
    let cluster = cluster_cache::prepare(cluster, &pol, images.registry_pull_secrets)?;
    let image_cache = registry(images, request_timeout)?;
    let tls_config = tls::server_config(certs.resolver.clone(), client_ca.as_deref(), &provider)
        .context("cannot start: fix the TLS configuration")?;
    let state = ServerState::new(
        admission(pol, target.clone(), cluster.as_ref()),
        Limits {
            max_body_bytes,
            max_body_bytes_in_flight,
            request_timeout,
            handshake_timeout,
            header_timeout,
            max_connections,
            idle_timeout,
            report_max_bytes,
            report_write_timeout,
            report_concurrency,
        },
    );
    if let Some(make) = image_cache {
        state.set_images(make(state.metrics.registry()));
    }
    let serving = Serving {
        listen,
        report_listen: report_listen.filter(|_| report == ReportExposure::Separate),
        metrics_listen: metrics_listen
            .filter(|_| metrics != Exposure::Off || report == ReportExposure::Metrics),
        endpoints: exposure.https,
        metrics_endpoints: exposure.metrics_listener,
        state,
        tls_config: Arc::new(tls_config),
        certs,
        tls_reload_interval,
        provider,
        cluster,
        target_summary: target.summary(),
        drain: Drain {
            delay: drain_delay,
            timeout: shutdown_timeout,
        },
        json_logs: log_format == LogFormat::Json,
    };

    let rt = runtime(worker_threads)?;
    let served = rt.block_on(serving.serve());
    // The drain already waited up to --shutdown-timeout: do not wait again
    // for reviews still computing on the blocking pool.
    rt.shutdown_background();
    served?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// `--registry`: the resolver, checked now (credentials, CA files); the
/// cache is made once the metrics exist.
type MakeImageCache =
    Box<dyn FnOnce(server::images::RegistryMetrics) -> server::images::ImageFactsCache>;

fn registry(
    args: crate::cli::ServeRegistryArgs,
    request_timeout: Duration,
) -> anyhow::Result<Option<MakeImageCache>> {
    let crate::cli::ServeRegistryArgs {
        registry,
        registry_args,
        registry_review_timeout,
        registry_tag_ttl,
        registry_negative_ttl,
        registry_cache_entries,
        registry_concurrency,
        registry_pull_secrets,
    } = args;
    if !registry {
        return Ok(None);
    }
    if registry_review_timeout.is_zero() || registry_review_timeout >= request_timeout {
        anyhow::bail!(
            "--registry-review-timeout {registry_review_timeout:?}: give a duration above 0 and under --request-timeout ({request_timeout:?}), well under the webhook's timeoutSeconds"
        );
    }
    let options = registry_args.options()?;
    let lookup_deadline = options
        .deadline
        .unwrap_or(crate::registry::DEFAULT_DEADLINE);
    let resolver = crate::registry::Resolver::new(&options)
        .context("cannot start: fix the registry options (--registry-config, --registry-ca)")?;
    let cache = server::images::CacheOptions {
        review_deadline: registry_review_timeout,
        tag_ttl: registry_tag_ttl,
        negative_ttl: registry_negative_ttl,
        max_entries: registry_cache_entries,
        per_registry: registry_concurrency as usize,
        lookup_deadline,
    };
    tracing::info!(
        review_timeout = ?registry_review_timeout,
        lookup_timeout = ?lookup_deadline,
        pull_secrets = registry_pull_secrets,
        "registry: on (--registry): image facts from the registries decide the image rules"
    );
    Ok(Some(Box::new(move |metrics| {
        server::images::ImageFactsCache::new(resolver, cache, metrics)
    })))
}

/// The serving certificate, and what to do with it once serving.
struct Certificates {
    resolver: Arc<CertResolver>,
    /// Files to reload on change (`--tls-cert`/`--tls-key`).
    watched: Option<CertFiles>,
    /// Where `--self-signed` wrote the CA to trust.
    ca_hint: Option<PathBuf>,
}

impl Certificates {
    /// `--self-signed`: a CA and serving certificate made now, the CA
    /// written to `dir` (default: the temp dir).
    fn self_signed(dir: Option<PathBuf>, provider: &CryptoProvider) -> anyhow::Result<Self> {
        let dir = dir.unwrap_or_else(|| std::env::temp_dir().join("winadmit"));
        let generated = tls::self_signed(&dir, provider)?;
        Ok(Self {
            resolver: Arc::new(CertResolver::new(generated.key)),
            watched: None,
            ca_hint: Some(generated.ca_path),
        })
    }

    /// `--tls-cert` and `--tls-key`, loaded and checked now, reloaded later.
    fn from_files(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        provider: &CryptoProvider,
    ) -> anyhow::Result<Self> {
        let files = CertFiles {
            cert: cert.context("--tls-cert is required (or use --self-signed)")?,
            key: key.context("--tls-key is required (or use --self-signed)")?,
        };
        let key = tls::load_pair(&files, provider).context("cannot start: fix the TLS files")?;
        Ok(Self {
            resolver: Arc::new(CertResolver::new(key)),
            watched: Some(files),
            ca_hint: None,
        })
    }
}

/// The decision the webhook serves: the policy, the target cluster and,
/// with the cluster cache, its namespace labels.
fn admission(
    policy: crate::policy::Policy,
    target: crate::cluster::Cluster,
    cluster: Option<&cluster_cache::Prepared>,
) -> Admission {
    Admission {
        policy,
        cluster: target,
        namespaces: cluster
            .map(|c| Box::new(Arc::clone(&c.cache)) as Box<dyn crate::cluster::ClusterView>),
    }
}

/// The multi-threaded runtime the server runs on.
fn runtime(worker_threads: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    // Idle blocking-pool threads (where reviews run) exit soon: a thread's
    // exit hands its allocator caches back, so the memory of a large review
    // is returned to the OS within seconds.
    rt.thread_keep_alive(std::time::Duration::from_secs(2));
    if let Some(n) = worker_threads {
        rt.worker_threads(n.max(1));
    }
    rt.build().context("cannot start the async runtime")
}

/// Everything checked and loaded, ready to bind and serve.
struct Serving {
    listen: SocketAddr,
    /// `--report-listen`, when `--report=separate`.
    report_listen: Option<SocketAddr>,
    /// `--metrics-listen`, unless `--metrics=off`.
    metrics_listen: Option<SocketAddr>,
    endpoints: server::Endpoints,
    /// What the metrics listener serves besides health.
    metrics_endpoints: server::Endpoints,
    state: Arc<ServerState>,
    tls_config: Arc<rustls::ServerConfig>,
    certs: Certificates,
    tls_reload_interval: Duration,
    provider: Arc<CryptoProvider>,
    cluster: Option<cluster_cache::Prepared>,
    target_summary: String,
    drain: Drain,
    /// `--log-format json`: the self-signed banner is a log line too.
    json_logs: bool,
}

impl Serving {
    /// Starts the cluster cache, binds every listener, and serves until
    /// SIGTERM/SIGINT and the drain that follows.
    async fn serve(self) -> anyhow::Result<()> {
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

/// What the HTTPS port and the metrics listener serve.
struct Exposed {
    https: server::Endpoints,
    metrics_listener: server::Endpoints,
}

/// Which optional endpoints the HTTPS port and the metrics listener serve;
/// `--metrics` and `--report` checked against their listener flags.
fn endpoints(
    metrics: Exposure,
    metrics_listen: Option<std::net::SocketAddr>,
    report: ReportExposure,
    report_listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<Exposed> {
    match (metrics, metrics_listen) {
        (Exposure::Separate, None) => {
            anyhow::bail!(
                "--metrics=separate needs --metrics-listen ADDR (or use --metrics=on|off)"
            )
        }
        (Exposure::Off, Some(_)) => {
            anyhow::bail!("--metrics=off conflicts with --metrics-listen: drop one of them")
        }
        _ => {}
    }
    match (report, report_listen) {
        (ReportExposure::Separate, None) => {
            anyhow::bail!(
                "--report=separate needs --report-listen ADDR (or use --report=on|metrics|off)"
            )
        }
        (ReportExposure::On | ReportExposure::Metrics | ReportExposure::Off, Some(_)) => {
            anyhow::bail!("--report-listen is only used with --report=separate")
        }
        _ => {}
    }
    if report == ReportExposure::Metrics && metrics_listen.is_none() {
        anyhow::bail!(
            "--report=metrics needs --metrics-listen ADDR (or use --report=on|separate|off)"
        );
    }
    Ok(Exposed {
        https: server::Endpoints {
            metrics: metrics == Exposure::On,
            report: report == ReportExposure::On,
        },
        metrics_listener: server::Endpoints {
            metrics: metrics != Exposure::Off,
            report: report == ReportExposure::Metrics,
        },
    })
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

/// Starts logging to stdout through a batching writer
/// (`server::logwriter`): request threads format a line and append it to a
/// buffer, a background thread writes the buffer a few milliseconds later
/// in one call. Lines are never dropped (back-pressure when the buffer is
/// full). Keep the returned guard alive: dropping it writes the last lines.
fn init_logging(
    format: LogFormat,
    filter: &str,
) -> anyhow::Result<crate::server::logwriter::BatchGuard> {
    let mut filter = tracing_subscriber::EnvFilter::try_new(filter)
        .with_context(|| format!("invalid --log-level {filter:?}"))?;
    // kube's watcher and client log every failed retry; the cluster cache
    // logs each distinct failure once, with what to do. Unless the filter
    // asks for kube's logs explicitly.
    for (krate, quiet) in [
        ("kube_runtime", "kube_runtime::watcher=error"),
        ("kube_client", "kube_client::client::builder=off"),
    ] {
        if !filter.to_string().contains(krate)
            && let Ok(directive) = quiet.parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    let (writer, guard) = crate::server::logwriter::batch_writer(std::io::stdout())
        .context("cannot start the log writer thread")?;
    let builder = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_target(false);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            // The same lines, written without tracing-subscriber's
            // per-field allocations (server::jsonlog).
            .event_format(crate::server::jsonlog::JsonLines::default())
            .try_init(),
    };
    // Already initialized (e.g. in tests): keep the existing subscriber.
    let _ = result;
    Ok(guard)
}
