//! `winadmit serve`: load and check everything, then bind and serve until
//! SIGTERM/SIGINT. Glue only: the decision is `admission::review`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::crypto::CryptoProvider;

use crate::entry::admission::Admission;
use crate::entry::cli::{Exposure, LogFormat, ReportExposure, ServeArgs};
use crate::entry::server::listener::Drain;
use crate::entry::server::tls::{self, CertFiles, CertResolver};
use crate::entry::server::{self, Limits, ServerState};

mod cluster_cache;
mod listeners;
mod pin_linux;

use listeners::Serving;

/// # Errors
/// A start-up problem, naming the flag or file: policy, certificate, key,
/// client CA, or an address that cannot be bound.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let _log_guard = init_logging(args.log_format, &args.log_level)?;
    let worker_threads = args.worker_threads;
    let serving = load(args)?;
    let rt = runtime(worker_threads)?;
    let served = rt.block_on(serving.serve());
    // The drain already waited up to --shutdown-timeout: do not wait again
    // for reviews still computing on the blocking pool.
    rt.shutdown_background();
    served?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Loads and checks everything before binding (fail fast): the policy,
/// the TLS material, the cluster configuration, the registry options and
/// which listener serves which endpoint.
fn load(args: ServeArgs) -> anyhow::Result<Serving> {
    let limits = limits(&args);
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
        policy,
        own_namespace,
        cluster,
        images,
        drain_delay,
        shutdown_timeout,
        log_format,
        // Read by `limits`, `run` and `init_logging`.
        report_max_bytes: _,
        report_write_timeout: _,
        report_concurrency: _,
        max_body_bytes: _,
        max_body_bytes_in_flight: _,
        request_timeout: _,
        header_timeout: _,
        handshake_timeout: _,
        max_connections: _,
        idle_timeout: _,
        worker_threads: _,
        log_level: _,
    } = args;
    let exposure = endpoints(metrics, metrics_listen, report, report_listen)?;
    // kube's client (the cluster cache) uses the process default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    // Fail fast: policy and TLS material are checked before binding.
    let (mut pol, target) =
        super::load_policy(&policy).context("cannot start: fix the policy (--policy)")?;
    if let Some(ns) = own_namespace.as_deref().filter(|n| !n.is_empty()) {
        pol.add_own_namespace(ns)
            .context("cannot start: fix --own-namespace (WINADMIT_NAMESPACE)")?;
    }
    // A self-signed certificate names only localhost: serve it there
    // unless asked otherwise.
    let listen = listen.unwrap_or(if self_signed {
        SocketAddr::from(([127, 0, 0, 1], 8443))
    } else {
        SocketAddr::from(([0, 0, 0, 0], 8443))
    });
    let certs = if self_signed {
        Certificates::self_signed(self_signed_dir, &provider)?
    } else {
        Certificates::from_files(tls_cert, tls_key, &provider)?
    };
    let cluster = cluster_cache::prepare(cluster, &pol, images.registry_pull_secrets)?;
    let image_cache = registry(images, limits.request_timeout)?;
    let tls_config = tls::server_config(certs.resolver.clone(), client_ca.as_deref(), &provider)
        .context("cannot start: fix the TLS configuration")?;
    let state = ServerState::new(admission(pol, target.clone(), cluster.as_ref()), limits);
    if let Some(make) = image_cache {
        state.set_images(make(state.metrics.registry()));
    }
    Ok(Serving {
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
    })
}

/// The limits of `serve`'s flags.
fn limits(args: &ServeArgs) -> Limits {
    Limits {
        max_body_bytes: args.max_body_bytes,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
        request_timeout: args.request_timeout,
        handshake_timeout: args.handshake_timeout,
        header_timeout: args.header_timeout,
        max_connections: args.max_connections,
        idle_timeout: args.idle_timeout,
        report_max_bytes: args.report_max_bytes,
        report_write_timeout: args.report_write_timeout,
        report_concurrency: args.report_concurrency,
    }
}

/// `--registry`: the resolver, checked now (credentials, CA files); the
/// cache is made once the metrics exist.
type MakeImageCache =
    Box<dyn FnOnce(server::images::RegistryMetrics) -> server::images::ImageFactsCache>;

fn registry(
    args: crate::entry::cli::ServeRegistryArgs,
    request_timeout: Duration,
) -> anyhow::Result<Option<MakeImageCache>> {
    let crate::entry::cli::ServeRegistryArgs {
        registry,
        registry_args,
        registry_review_timeout,
        registry_tag_ttl,
        registry_negative_ttl,
        registry_cache_entries,
        registry_cache_bytes,
        registry_review_lookups,
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
        .unwrap_or(crate::input::registry::DEFAULT_DEADLINE);
    let resolver = crate::input::registry::Resolver::new(&options)
        .context("cannot start: fix the registry options (--registry-config, --registry-ca)")?;
    let cache = server::images::CacheOptions {
        review_deadline: registry_review_timeout,
        tag_ttl: registry_tag_ttl,
        negative_ttl: registry_negative_ttl,
        max_entries: registry_cache_entries,
        max_bytes: registry_cache_bytes,
        review_lookups: registry_review_lookups as usize,
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

/// Read, write and search for the owner only.
#[cfg(unix)]
fn private_dir() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::Permissions::from_mode(0o700)
}

impl Certificates {
    /// `--self-signed`: a CA and serving certificate made now, the CA
    /// written to `dir`, by default a new directory under the temp dir that
    /// only this user can read or write (no other user's process can
    /// replace the CA a client is told to trust).
    fn self_signed(dir: Option<PathBuf>, provider: &CryptoProvider) -> anyhow::Result<Self> {
        let dir = match dir {
            Some(d) => d,
            None => {
                let mut new = tempfile::Builder::new();
                new.prefix("winadmit-");
                #[cfg(unix)]
                new.permissions(private_dir());
                new.tempdir()
                    .context("cannot create a directory for the self-signed CA under the temp dir; pass --self-signed-dir")?
                    .keep()
            }
        };
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
    policy: crate::decision::policy::Policy,
    target: crate::decision::cluster::TargetCluster,
    cluster: Option<&cluster_cache::Prepared>,
) -> Admission {
    if let Some(c) = cluster {
        c.cache
            .track_exceptions(crate::entry::server::watch_cache::ExceptionCache::new(
                policy.exceptions.clone(),
                // Unknown: no namespace is winadmit's, and only the
                // namespaces the policy lists count.
                policy.own_namespace.clone().unwrap_or_default(),
            ));
    }
    Admission {
        policy,
        target,
        lookup: cluster.map(|c| {
            Box::new(Arc::clone(&c.cache)) as Box<dyn crate::decision::cluster::ClusterLookup>
        }),
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

/// Starts logging to stdout through a batching writer
/// (`server::logwriter`): request threads format a line and append it to a
/// buffer, a background thread writes the buffer a few milliseconds later
/// in one call. Lines are never dropped (back-pressure when the buffer is
/// full). Keep the returned guard alive: dropping it writes the last lines.
pub(super) fn init_logging(
    format: LogFormat,
    filter: &str,
) -> anyhow::Result<crate::entry::server::logwriter::BatchGuard> {
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
    let (writer, guard) = crate::entry::server::logwriter::batch_writer(std::io::stdout())
        .context("cannot start the log writer thread")?;
    let builder = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_target(false);
    let result = match format {
        // Every field escaped: a value from outside never starts a line.
        LogFormat::Text => builder
            .fmt_fields(crate::entry::server::textlog::TextFields)
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            // The same lines, written without tracing-subscriber's
            // per-field allocations (server::jsonlog).
            .event_format(crate::entry::server::jsonlog::JsonLines::default())
            .try_init(),
    };
    // Already initialized (e.g. in tests): keep the existing subscriber.
    let _ = result;
    Ok(guard)
}
