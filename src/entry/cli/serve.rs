//! `winadmit serve`: the webhook's arguments, its watch cache of the
//! cluster and its registry cache. Every flag also reads the environment
//! variable beside it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{PolicyArgs, RegistryArgs, parse_duration};

/// Where an optional endpoint (`/metrics`, `/report`) is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Exposure {
    /// On the webhook's HTTPS port.
    On,
    /// Only on its own listener.
    Separate,
    /// Not served.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where `POST /report` is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportExposure {
    /// On the webhook's HTTPS port.
    On,
    /// Only on its own HTTPS listener (--report-listen).
    Separate,
    /// Only on the plain-HTTP metrics listener (--metrics-listen).
    Metrics,
    /// Not served.
    Off,
}

/// `winadmit serve`: every flag also reads the environment variable beside it.
/// A certificate is required: `--tls-cert` and `--tls-key`, or
/// `--self-signed` (the usage error names both).
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("tls")
        .required(true)
        .args(["tls_cert", "self_signed"])
))]
pub struct ServeArgs {
    /// Address to serve HTTPS on [default: 0.0.0.0:8443; 127.0.0.1:8443
    /// with --self-signed, whose certificate names only localhost].
    #[arg(long, value_name = "ADDR", env = "WINADMIT_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// PEM certificate chain (reloaded when the file changes).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_TLS_CERT",
        requires = "tls_key",
        conflicts_with = "self_signed"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_TLS_KEY",
        requires = "tls_cert",
        conflicts_with = "self_signed"
    )]
    pub tls_key: Option<PathBuf>,
    /// Generate an in-memory ECDSA P-256 certificate for localhost and write
    /// its CA to --self-signed-dir (for trying the server out).
    #[arg(long, env = "WINADMIT_SELF_SIGNED")]
    pub self_signed: bool,
    /// Where --self-signed writes ca.pem [default: a new directory only
    /// this user can read, <temp dir>/winadmit-XXXXXX, named on start].
    #[arg(long, value_name = "DIR", env = "WINADMIT_SELF_SIGNED_DIR")]
    pub self_signed_dir: Option<PathBuf>,
    /// Require client certificates signed by this PEM CA (the API server's
    /// client certificate).
    #[arg(long, value_name = "FILE", env = "WINADMIT_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// How often to check --tls-cert and --tls-key for changes.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_TLS_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,
    /// Also serve /metrics (and /healthz, /readyz) over plain HTTP here.
    #[arg(long, value_name = "ADDR", env = "WINADMIT_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Where GET /metrics is served: `on` the HTTPS port (and on
    /// --metrics-listen if set), only on a `separate` listener
    /// (--metrics-listen), or `off`.
    #[arg(long, value_enum, value_name = "WHERE", env = "WINADMIT_METRICS", default_value_t = Exposure::On)]
    pub metrics: Exposure,
    /// Where POST /report (the dry-run report) is served: `on` the HTTPS
    /// port, only on a `separate` HTTPS listener (--report-listen, same
    /// certificate and client CA), only on the plain-HTTP `metrics`
    /// listener (--metrics-listen), or `off`.
    #[arg(long, value_enum, value_name = "WHERE", env = "WINADMIT_REPORT", default_value_t = ReportExposure::On)]
    pub report: ReportExposure,
    /// Address of the HTTPS listener for --report=separate.
    #[arg(long, value_name = "ADDR", env = "WINADMIT_REPORT_LISTEN")]
    pub report_listen: Option<SocketAddr>,
    /// Largest /report answer; the objects past it are left out and the
    /// answer says how many (`truncated`).
    #[arg(long, value_name = "BYTES", env = "WINADMIT_REPORT_MAX_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub report_max_bytes: usize,
    /// Time a /report client has to read the whole answer; a client that
    /// reads slower is cut off and the report's memory freed.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REPORT_WRITE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub report_write_timeout: Duration,
    /// Reports computed or sent at once; more are answered 503 at once.
    /// Reports never take the review slots of /validate and /mutate.
    #[arg(
        long,
        value_name = "N",
        env = "WINADMIT_REPORT_CONCURRENCY",
        default_value_t = 1
    )]
    pub report_concurrency: usize,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The namespace winadmit runs in (the chart and the manifests set it
    /// from the pod's own namespace): the webhooks are not called there,
    /// so its objects are outside the webhook's reach. No namespace is
    /// outside it by name alone: a tenant may create one called `winadmit`.
    #[arg(long, value_name = "NAMESPACE", env = "WINADMIT_NAMESPACE")]
    pub own_namespace: Option<String>,
    #[command(flatten)]
    pub cluster: WatchCacheArgs,
    #[command(flatten)]
    pub images: ServeRegistryArgs,
    /// Largest AdmissionReview body accepted (413 above it).
    #[arg(long, value_name = "BYTES", env = "WINADMIT_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes of request bodies held in memory at once, all connections and
    /// HTTP/2 streams together; a request that does not fit gets 503 at
    /// once (before its body is read when it has a Content-Length).
    #[arg(long, value_name = "BYTES", env = "WINADMIT_MAX_BODY_BYTES_IN_FLIGHT", default_value_t = 64 * 1024 * 1024)]
    pub max_body_bytes_in_flight: usize,
    /// Time to receive a request body and answer it (408 after).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Time for a client to send request headers, including keep-alive idle time (HTTP/1.1).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_HEADER_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Time for a client to complete the TLS handshake.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Connections served at once; at the cap one is closed gracefully for a new client: the one idle the longest, else the one whose request bodies stalled the longest, else one that never sent a request (new clients wait only while every connection makes progress).
    #[arg(
        long,
        value_name = "N",
        env = "WINADMIT_MAX_CONNECTIONS",
        default_value_t = 1024
    )]
    pub max_connections: usize,
    /// Close a connection with no request in progress for this long: silent after the TLS handshake, idle HTTP/1.1 keep-alive, HTTP/2 with no open stream (PINGs do not count).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// On SIGTERM, keep serving with /readyz false this long before closing the listener.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_DRAIN_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub drain_delay: Duration,
    /// Then wait at most this long for in-flight requests.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Worker threads [default: one per CPU].
    #[arg(long, value_name = "N", env = "WINADMIT_WORKER_THREADS")]
    pub worker_threads: Option<usize>,
    /// Log format: one line per request either way.
    #[arg(long, value_enum, env = "WINADMIT_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing env-filter syntax), e.g. `info` or `winadmit=debug`.
    #[arg(
        long,
        value_name = "FILTER",
        env = "WINADMIT_LOG",
        default_value = "info"
    )]
    pub log_level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClusterCacheMode {
    /// Use the in-cluster config or a kubeconfig when one is found; else run without.
    Auto,
    /// Require a cluster configuration (start-up fails without one).
    On,
    /// Never contact the API server.
    Off,
}

/// `winadmit serve`: the watch cache of Namespaces and RuntimeClasses.
#[derive(Debug, Clone, Args)]
pub struct WatchCacheArgs {
    /// Watch the cluster's Namespaces (labels) and RuntimeClasses, so
    /// namespace mode/isolation labels and Windows RuntimeClasses apply.
    #[arg(long = "cluster-cache", value_enum, value_name = "MODE", env = "WINADMIT_CLUSTER_CACHE", default_value_t = ClusterCacheMode::Auto)]
    pub mode: ClusterCacheMode,
    /// Kubeconfig file for the cache (default: in-cluster config, then $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE", env = "WINADMIT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME", env = "WINADMIT_CONTEXT")]
    pub context: Option<String>,
    /// /readyz waits at most this long for the cache's first list of both resources.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_CLUSTER_CACHE_SYNC_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub cluster_cache_sync_timeout: Duration,
    /// Largest answer the cache accepts from the API server for one call
    /// (a list page, or all that one watch call streams), in bytes; a
    /// larger one fails the call, which is logged and retried with backoff.
    #[arg(long, value_name = "BYTES", env = "WINADMIT_CLUSTER_CACHE_MAX_RESPONSE_BYTES", default_value_t = crate::entry::server::api_limits::MAX_RESPONSE_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..))]
    pub cluster_cache_max_response_bytes: u64,
    /// Most pages of one list the cache follows; a list that goes on (or
    /// repeats its continue token) fails, logged and retried with backoff.
    #[arg(long, value_name = "N", env = "WINADMIT_CLUSTER_CACHE_MAX_PAGES", default_value_t = crate::entry::server::api_limits::MAX_PAGES, value_parser = clap::value_parser!(u32).range(1..))]
    pub cluster_cache_max_pages: u32,
    /// Check gMSA as the upstream Windows gMSA webhook does (credential
    /// specs exist, the pod's service account may `use` them, contents
    /// match, /mutate fills them in): `auto` turns it on when the API
    /// server serves gmsacredentialspecs.windows.k8s.io. Needs a cluster
    /// configuration (see --cluster-cache).
    #[arg(long, value_enum, value_name = "MODE", env = "WINADMIT_GMSA", default_value_t = GmsaMode::Off)]
    pub gmsa: GmsaMode,
    /// The MutatingWebhookConfiguration whose pin-linux.winadmit.io
    /// webhook winadmit turns off while the cluster has no Windows nodes
    /// (so that no pod is sent to it) and on when one joins. Needs the
    /// cluster cache, and get and update on that configuration.
    #[arg(long, value_name = "NAME", env = "WINADMIT_MANAGE_PIN_LINUX")]
    pub manage_pin_linux: Option<String>,
}

/// `winadmit serve --registry`: image facts from the registries, cached.
#[derive(Debug, Clone, Args)]
pub struct ServeRegistryArgs {
    /// Look the images of reviewed pods up in their registries (off by
    /// default): what each image runs on decides the image rules, instead
    /// of its name. A lookup that fails or is late never denies.
    #[arg(long, env = "WINADMIT_REGISTRY")]
    pub registry: bool,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
    /// A review waits at most this long for its images' facts (keep it
    /// well under the webhook's timeoutSeconds); an image not known by
    /// then is judged by its name, and its lookup goes on for later reviews.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REGISTRY_REVIEW_TIMEOUT", default_value = "2s", value_parser = parse_duration)]
    pub registry_review_timeout: Duration,
    /// How long facts looked up by tag are cached (an image pinned by
    /// digest is cached until evicted for room).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REGISTRY_TAG_TTL", default_value = "5m", value_parser = parse_duration)]
    pub registry_tag_ttl: Duration,
    /// How long a failed lookup is cached before the registry is asked again.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REGISTRY_NEGATIVE_TTL", default_value = "10s", value_parser = parse_duration)]
    pub registry_negative_ttl: Duration,
    /// Images cached at most.
    #[arg(long, value_name = "N", env = "WINADMIT_REGISTRY_CACHE_ENTRIES", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub registry_cache_entries: u64,
    /// Bytes of image facts cached at most (each image counted at least
    /// this over --registry-cache-entries, so both limits hold).
    #[arg(long, value_name = "BYTES", env = "WINADMIT_REGISTRY_CACHE_BYTES", default_value_t = 32 << 20, value_parser = clap::value_parser!(u64).range(1024..=(1 << 32) - 1))]
    pub registry_cache_bytes: u64,
    /// Images one review (or one `POST /report`) looks up at most, of
    /// those not cached: the others are judged by their names, with
    /// WIN-IMAGE-FACTS-UNKNOWN saying so.
    #[arg(long, value_name = "N", env = "WINADMIT_REGISTRY_REVIEW_LOOKUPS", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub registry_review_lookups: u32,
    /// Lookups sent to one registry at once; more wait in line.
    #[arg(long, value_name = "N", env = "WINADMIT_REGISTRY_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub registry_concurrency: u32,
    /// Also look a pod's images up with the credentials of the Secrets
    /// its `imagePullSecrets` names (read with `get secrets` in the pod's
    /// namespace; off by default). Facts learnt with a namespace's
    /// credentials are cached for those credentials only.
    #[arg(long, env = "WINADMIT_REGISTRY_PULL_SECRETS", requires = "registry")]
    pub registry_pull_secrets: bool,
}

/// `serve --gmsa`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GmsaMode {
    /// On when the API server serves the GMSACredentialSpec resource.
    Auto,
    /// On; start-up fails without a cluster configuration.
    On,
    /// Off: the gMSA rules are silent.
    Off,
}
