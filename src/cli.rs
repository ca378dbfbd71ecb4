//! Command-line interface: clap derive structs only, no logic.
//! Every flag can also be set through the environment variable named beside it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::version::KubeVersion;

#[derive(Debug, Parser)]
#[command(
    name = "winadmit",
    version,
    about = "Admission webhook and policy validator for Windows nodes in Kubernetes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check manifest files for Windows problems (for CI).
    #[command(
        after_help = "Exit codes: 0 no error finding (no warning either with --fail-on warning); 1 error findings (or warnings with --fail-on warning); 2 a usage or input problem (a file that cannot be read or parsed, a bad policy): the other files are still linted."
    )]
    Lint(LintArgs),
    /// List the rule catalogue.
    Rules(RulesArgs),
    /// Print one rule's documentation.
    Explain(ExplainArgs),
    /// Run the HTTPS validating and mutating admission webhook.
    Serve(Box<ServeArgs>),
    /// Generate a CA and a serving certificate for the webhook Service.
    Certs(CertsArgs),
    /// Print the install manifests as YAML (no kustomize needed).
    Manifests(ManifestsArgs),
    /// Dry run: what admission would deny, warn about or change, for a live
    /// cluster or for files (`kubectl get -o json|yaml` output).
    #[command(
        after_help = "Exit codes, whatever the format (-o report.html too): 0 no error finding; 1 error findings (or warnings with --fail-on warning), so a CI job can fail on them; 2 a usage or input problem, a cluster that cannot be listed, custom resources that could not be discovered (unless --allow-partial), no workload matched (unless --allow-empty), or WINADMIT_NAMESPACE set (it names the install namespace of `certs` and `manifests`; `report` reads WINADMIT_REPORT_NAMESPACE)."
    )]
    Report(ReportArgs),
    /// Print a ready example to try winadmit with.
    Example(ExampleArgs),
    /// Print the rules as ValidatingAdmissionPolicy and MutatingAdmissionPolicy
    /// objects: enforcement by the API server, no webhook.
    AdmissionPolicy(AdmissionPolicyArgs),
    /// Look images up in their registries.
    Images(ImagesArgs),
}

#[derive(Debug, Args)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub what: ImagesCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Write an image facts file (each image's digest and platforms, for
    /// `--image-facts`) from the images' registries.
    #[command(
        after_help = "Exit codes: 0 every image resolved; 1 some lookups failed (the file still names them, with `unknown` and the reason); 2 a usage problem (a credentials file that cannot be read)."
    )]
    Resolve(ResolveArgs),
}

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// Image references, as pods write them (`nginx:1.27`,
    /// `registry.example/app@sha256:...`).
    #[arg(value_name = "IMAGE", required = true)]
    pub images: Vec<String>,
    /// Write the file here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// How registries are reached (`images resolve`, `lint --registry`,
/// `report --registry`, `serve --registry`).
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// A Docker config.json (`{"auths": {...}}`, the format of a
    /// `kubernetes.io/dockerconfigjson` Secret) with credentials per
    /// registry; other registries are accessed anonymously.
    #[arg(long, value_name = "FILE", env = "WINADMIT_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// A registry (`host[:port]`, as images name it) reached over plain
    /// HTTP instead of HTTPS (repeatable).
    #[arg(
        long,
        value_name = "HOST",
        env = "WINADMIT_INSECURE_REGISTRY",
        value_delimiter = ','
    )]
    pub insecure_registry: Vec<String>,
    /// A PEM file of CA certificates to trust for registries, besides the
    /// system's (repeatable).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_REGISTRY_CA",
        value_delimiter = ','
    )]
    pub registry_ca: Vec<PathBuf>,
    /// The deadline of one lookup, in seconds: past it the image's facts
    /// are unknown and it is judged by its name.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 5.0,
        env = "WINADMIT_REGISTRY_TIMEOUT"
    )]
    pub registry_timeout: f64,
    /// Look the images of registry HOST up at MIRROR first, and at HOST
    /// when the mirror fails, as containerd's hosts.toml mirrors do:
    /// `docker.io=mirror.example:5000`, `registry.example=harbor.example/proxy`
    /// (repositories under a path), `http://` for a plain-HTTP mirror
    /// (repeatable; several mirrors of one registry are asked in order).
    #[arg(
        long,
        value_name = "HOST=MIRROR",
        env = "WINADMIT_REGISTRY_MIRROR",
        value_delimiter = ','
    )]
    pub registry_mirror: Vec<String>,
}

impl RegistryArgs {
    /// # Errors
    /// The timeout is not a positive number of seconds, or a mirror is
    /// not `HOST=MIRROR`.
    pub fn options(&self) -> anyhow::Result<crate::registry::RegistryOptions> {
        if !(self.registry_timeout.is_finite()
            && self.registry_timeout > 0.0
            && self.registry_timeout <= 600.0)
        {
            anyhow::bail!(
                "--registry-timeout {}: give a number of seconds above 0, at most 600",
                self.registry_timeout
            );
        }
        let mirrors = self
            .registry_mirror
            .iter()
            .map(|m| {
                m.parse::<crate::registry::Mirror>()
                    .map_err(|e| anyhow::anyhow!("--registry-mirror {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(crate::registry::RegistryOptions {
            insecure: self.insecure_registry.clone(),
            config: self.registry_config.clone(),
            ca_files: self.registry_ca.clone(),
            deadline: Some(std::time::Duration::from_secs_f64(self.registry_timeout)),
            mirrors,
        })
    }
}

#[derive(Debug, Args)]
pub struct ExampleArgs {
    #[command(subcommand)]
    pub what: ExampleKind,
}

#[derive(Debug, Clone, Copy, Subcommand)]
pub enum ExampleKind {
    /// An AdmissionReview (JSON) of a Windows pod with problems, to send to
    /// a running webhook: `winadmit example review > review.json`, then
    /// `curl ... --data-binary @review.json https://localhost:8443/validate`.
    Review,
}

#[derive(Debug, Args)]
pub struct AdmissionPolicyArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// What the policies do with error findings (default: the policy's mode).
    #[arg(long, value_enum, env = "WINADMIT_MODE")]
    pub mode: Option<ModeChoice>,
    /// Leave out the MutatingAdmissionPolicy (e.g. where its API is not enabled).
    #[arg(long)]
    pub no_mutating: bool,
}

/// Options shared by every command that evaluates workloads.
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// Policy file or directory, layered over the built-in default (repeatable).
    #[arg(
        long = "policy",
        value_name = "FILE|DIR",
        env = "WINADMIT_POLICY",
        value_delimiter = ','
    )]
    pub policy: Vec<PathBuf>,
    /// Kubernetes version of the target cluster (1.14 to the newest known;
    /// default: the policy's `cluster.kubernetesVersion`, then what the
    /// cluster's Windows nodes report, then the newest known).
    #[arg(long, value_name = "MAJOR.MINOR", env = "WINADMIT_KUBERNETES_VERSION", value_parser = parse_version,
        help = format!(
            "Kubernetes version of the target cluster (1.14 to {latest}; default: the policy's `cluster.kubernetesVersion`, then what the cluster's Windows nodes report, then {latest}, the newest winadmit knows)",
            latest = KubeVersion::LATEST
        ))]
    pub kubernetes_version: Option<KubeVersion>,
    /// Container runtime of the target cluster's Windows nodes (default:
    /// the policy, then the nodes, then containerd from 1.24, docker before).
    #[arg(
        long,
        value_name = "RUNTIME",
        env = "WINADMIT_CONTAINER_RUNTIME",
        value_enum
    )]
    pub container_runtime: Option<RuntimeChoice>,
    /// Raise the warnings about security settings Windows ignores
    /// (privileged, capabilities.add, readOnlyRootFilesystem, hostPID,
    /// hostIPC, ...) to errors; policy key `stance: strict`.
    #[arg(long, env = "WINADMIT_STRICT")]
    pub strict: bool,
}

impl PolicyArgs {
    /// The facts these flags state about the target cluster.
    #[must_use]
    pub fn declared(&self) -> crate::cluster::Declared {
        crate::cluster::Declared {
            kubernetes_version: self.kubernetes_version,
            container_runtime: self.container_runtime.map(|r| match r {
                RuntimeChoice::Containerd => crate::cluster::Runtime::Containerd,
                RuntimeChoice::Docker => crate::cluster::Runtime::Docker,
            }),
            containerd_version: None,
            stance: self.strict.then_some(crate::cluster::Stance::Strict),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeChoice {
    Containerd,
    Docker,
}

fn parse_version(s: &str) -> Result<KubeVersion, String> {
    let v: KubeVersion = s
        .parse()
        .map_err(|e: crate::version::ParseVersionError| e.to_string())?;
    crate::cluster::check_version(v).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
    Sarif,
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Files or directories (recursively: .yaml, .yml, .json); `-` reads stdin.
    #[arg(value_name = "PATH", default_value = "-")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Text, env = "WINADMIT_FORMAT")]
    pub format: LintFormat,
    /// Exit 1 on findings of this severity or worse.
    #[arg(long, value_enum, default_value_t = FailOn::Error, env = "WINADMIT_FAIL_ON")]
    pub fail_on: FailOn,
    /// Write the safe fixes back into the files.
    #[arg(long)]
    pub fix: bool,
    /// Image facts (digest and platforms per image, as `winadmit images
    /// resolve` writes them): they decide what each image runs on, instead
    /// of its name. For CI without registry access.
    #[arg(long, value_name = "FILE", env = "WINADMIT_IMAGE_FACTS")]
    pub image_facts: Option<PathBuf>,
    /// Look the workloads' images up in their registries (off by default,
    /// so CI stays offline unless asked); an image the `--image-facts` file
    /// names is not looked up.
    #[arg(long, env = "WINADMIT_REGISTRY")]
    pub registry: bool,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
    /// Colour in text output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, env = "WINADMIT_COLOR")]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RulesFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[arg(long, value_enum, default_value_t = RulesFormat::Text)]
    pub format: RulesFormat,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Rule id, e.g. WIN-SUBPATH.
    pub rule: String,
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Name of the webhook's Service.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "winadmit",
        env = "WINADMIT_SERVICE"
    )]
    pub service: String,
    /// Namespace of the webhook's Service.
    #[arg(
        long,
        value_name = "NS",
        default_value = "winadmit",
        env = "WINADMIT_NAMESPACE"
    )]
    pub namespace: String,
    /// Directory for ca.crt, tls.crt and tls.key (created if missing).
    #[arg(long, value_name = "DIR", env = "WINADMIT_CERTS_OUT")]
    pub out: PathBuf,
    /// Validity of the certificates, in days.
    #[arg(
        long,
        value_name = "DAYS",
        default_value_t = 365,
        env = "WINADMIT_CERTS_DAYS"
    )]
    pub days: u32,
    /// Replace existing files in DIR.
    #[arg(long)]
    pub force: bool,
}

/// Which install `winadmit manifests` renders: the directory of the same
/// name under `manifests/overlays/` (or `manifests/` for `base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Overlay {
    /// Everything but the TLS Secret and the caBundle (`manifests/`).
    Base,
    /// TLS from cert-manager.
    CertManager,
    /// TLS from `winadmit certs` (needs --certs).
    SelfSigned,
    /// cert-manager TLS, policy mode audit, failurePolicy Ignore.
    Audit,
    /// cert-manager TLS without matchConditions (Kubernetes < 1.28).
    NoMatchConditions,
    /// cert-manager TLS, the webhooks also covering Argo Rollouts, OpenKruise and KEDA ScaledJobs.
    CustomResources,
    /// No webhook: the rules as ValidatingAdmissionPolicy objects (1.30+).
    AdmissionPolicy,
    /// cert-manager TLS, with the gMSA checks of the upstream Windows gMSA webhook (`serve --gmsa=auto`).
    Gmsa,
    /// cert-manager TLS, one webhook call per object (`/admit`, registered as the mutating webhook) instead of two.
    OneCall,
}

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// The install to render.
    #[arg(long, value_enum, default_value_t = Overlay::Base, env = "WINADMIT_OVERLAY")]
    pub overlay: Overlay,
    /// PEM CA certificate(s) for the webhooks' caBundle (e.g. ca.crt from `winadmit certs`).
    #[arg(long, value_name = "FILE", env = "WINADMIT_CA_BUNDLE")]
    pub ca_bundle: Option<PathBuf>,
    /// Output directory of `winadmit certs`, for the self-signed overlay's Secret.
    #[arg(long, value_name = "DIR", env = "WINADMIT_CERTS_DIR")]
    pub certs: Option<PathBuf>,
    /// Install into this namespace instead of `winadmit` (with --certs:
    /// the namespace given to `winadmit certs`, whose certificate must name
    /// the Service `winadmit.NS.svc`).
    #[arg(long, value_name = "NS", env = "WINADMIT_NAMESPACE")]
    pub namespace: Option<String>,
    /// Server image, e.g. registry.example.com/winadmit:0.1.0.
    #[arg(long, value_name = "IMG", env = "WINADMIT_IMAGE")]
    pub image: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Per-namespace summary, top rules, then each object.
    Text,
    /// The `POST /report` shape.
    Json,
    /// wgpolicyk8s.io/v1alpha2 PolicyReports (multi-document YAML for kubectl apply).
    Policyreport,
    /// One self-contained HTML page with charts and a findings table.
    Html,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeChoice {
    Enforce,
    Warn,
    Audit,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Read objects from files or directories instead of a cluster (`-`
    /// reads stdin): manifests, or `kubectl get pods,deploy,... -A -o
    /// json|yaml` output. Directories are read recursively (.yaml, .yml,
    /// .json), as `lint` reads them; give several paths after one flag or
    /// repeat it.
    #[arg(
        long = "from-file",
        value_name = "PATH|-",
        env = "WINADMIT_FROM_FILE",
        value_delimiter = ',',
        num_args = 1..
    )]
    pub from_file: Vec<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster config).
    #[arg(long, value_name = "FILE", env = "WINADMIT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME", env = "WINADMIT_CONTEXT")]
    pub context: Option<String>,
    /// Only this namespace (repeatable; default: all namespaces). Its
    /// variable is WINADMIT_REPORT_NAMESPACE: WINADMIT_NAMESPACE is the
    /// install namespace of `certs` and `manifests`, and `report` refuses
    /// to run with it set unless --namespace or WINADMIT_REPORT_NAMESPACE
    /// says which namespaces to report.
    #[arg(
        long = "namespace",
        short = 'n',
        value_name = "NS",
        env = "WINADMIT_REPORT_NAMESPACE",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,
    /// Exit 0 when no workload matches (no workload in the input, or none
    /// in the namespaces asked for); without it such a report exits 2.
    #[arg(long, env = "WINADMIT_ALLOW_EMPTY")]
    pub allow_empty: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Image facts (digest and platforms per image, as `winadmit images
    /// resolve` writes them): they decide what each image runs on, instead
    /// of its name. For CI without registry access.
    #[arg(long, value_name = "FILE", env = "WINADMIT_IMAGE_FACTS")]
    pub image_facts: Option<PathBuf>,
    /// Look the workloads' images up in their registries before judging
    /// them (off by default); an image the `--image-facts` file names is
    /// not looked up. A lookup that fails leaves the image judged by its
    /// name, with a finding that says why.
    #[arg(long, env = "WINADMIT_REGISTRY")]
    pub registry: bool,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
    /// Also look a workload's images up with the credentials of the
    /// Secrets its `imagePullSecrets` names (read with `get secrets` in its
    /// namespace; a live report only).
    #[arg(long, env = "WINADMIT_REGISTRY_PULL_SECRETS", requires = "registry")]
    pub registry_pull_secrets: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, env = "WINADMIT_REPORT_FORMAT")]
    pub format: ReportFormat,
    /// Write the report to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE", env = "WINADMIT_REPORT_OUTPUT")]
    pub output: Option<PathBuf>,
    /// Exit 1 on findings of this severity or worse.
    #[arg(long, value_enum, default_value_t = FailOn::Error, env = "WINADMIT_FAIL_ON")]
    pub fail_on: FailOn,
    /// Preview this admission mode for every object (default: the policy's
    /// mode, or each namespace's mode label).
    #[arg(long, value_enum, env = "WINADMIT_MODE")]
    pub mode: Option<ModeChoice>,
    /// Objects per list call against the cluster.
    #[arg(long, value_name = "N", default_value_t = 500, env = "WINADMIT_PAGE_SIZE", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub page_size: u32,
    #[command(flatten)]
    pub deadlines: ApiDeadlines,
    #[command(flatten)]
    pub limits: ApiLimits,
    /// Report every owned Pod, ReplicaSet and Job on its own instead of
    /// folding it into its controller.
    #[arg(long, env = "WINADMIT_NO_FOLD")]
    pub no_fold: bool,
    /// No progress messages on stderr.
    #[arg(long, short = 'q', env = "WINADMIT_QUIET")]
    pub quiet: bool,
    /// Colour in text output (auto: on a terminal, unless NO_COLOR is set).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, env = "WINADMIT_COLOR")]
    pub color: ColorChoice,
}

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
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to serve HTTPS on.
    #[arg(
        long,
        value_name = "ADDR",
        env = "WINADMIT_LISTEN",
        default_value = "0.0.0.0:8443"
    )]
    pub listen: SocketAddr,
    /// PEM certificate chain (reloaded when the file changes).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_TLS_CERT",
        required_unless_present = "self_signed",
        conflicts_with = "self_signed"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_TLS_KEY",
        required_unless_present = "self_signed",
        conflicts_with = "self_signed"
    )]
    pub tls_key: Option<PathBuf>,
    /// Generate an in-memory ECDSA P-256 certificate for localhost and write
    /// its CA to --self-signed-dir (for trying the server out).
    #[arg(long, env = "WINADMIT_SELF_SIGNED")]
    pub self_signed: bool,
    /// Where --self-signed writes ca.pem [default: <temp dir>/winadmit].
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
    #[command(flatten)]
    pub cluster: ClusterCacheArgs,
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
pub struct ClusterCacheArgs {
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
    #[arg(long, value_name = "BYTES", env = "WINADMIT_CLUSTER_CACHE_MAX_RESPONSE_BYTES", default_value_t = crate::server::api_limits::MAX_RESPONSE_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..))]
    pub cluster_cache_max_response_bytes: u64,
    /// Most pages of one list the cache follows; a list that goes on (or
    /// repeats its continue token) fails, logged and retried with backoff.
    #[arg(long, value_name = "N", env = "WINADMIT_CLUSTER_CACHE_MAX_PAGES", default_value_t = crate::server::api_limits::MAX_PAGES, value_parser = clap::value_parser!(u32).range(1..))]
    pub cluster_cache_max_pages: u32,
    /// Check gMSA as the upstream Windows gMSA webhook does (credential
    /// specs exist, the pod's service account may `use` them, contents
    /// match, /mutate fills them in): `auto` turns it on when the API
    /// server serves gmsacredentialspecs.windows.k8s.io. Needs a cluster
    /// configuration (see --cluster-cache).
    #[arg(long, value_enum, value_name = "MODE", env = "WINADMIT_GMSA", default_value_t = GmsaMode::Off)]
    pub gmsa: GmsaMode,
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

/// Deadlines for every call to the Kubernetes API server (`report`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ApiDeadlines {
    /// Time to connect to the API server (TCP and TLS).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_CONNECT_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Time the API server may stay silent while answering a call.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_READ_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub read_timeout: Duration,
    /// Time for one whole API call (one page of a list), however the server trickles it.
    #[arg(long = "api-timeout", value_name = "DURATION", env = "WINADMIT_API_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub call_timeout: Duration,
}

/// What `report` accepts from an API server, so a broken or hostile one
/// cannot make it run forever or exhaust memory.
#[derive(Debug, Clone, Copy, Args)]
pub struct ApiLimits {
    /// Largest answer to one API call (one page of a list, one discovery
    /// document), in bytes; a larger one stops the report (exit 2).
    #[arg(long, value_name = "BYTES", env = "WINADMIT_MAX_RESPONSE_BYTES", default_value_t = 256 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_response_bytes: u64,
    /// Most pages of one list (with --page-size 500, 5 million objects of
    /// one kind in one namespace); more stops the report (exit 2).
    #[arg(long, value_name = "N", env = "WINADMIT_MAX_PAGES", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pages: u32,
    /// Report the kinds that could be listed, exit 0 or 1 as usual, when a
    /// custom resource group cannot be discovered (without it: exit 2).
    #[arg(long, env = "WINADMIT_ALLOW_PARTIAL")]
    pub allow_partial: bool,
}

/// Parses `500ms`, `10s`, `2m` or a bare number of seconds.
///
/// # Errors
/// Anything else, with the accepted forms.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let bad = || format!("invalid duration {s:?}: expected e.g. 500ms, 10s or 2m");
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}
