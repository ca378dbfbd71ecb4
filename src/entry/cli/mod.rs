//! Command-line interface: clap derive structs only, no logic.
//! Every flag can also be set through the environment variable named beside it.
//!
//! One submodule per subcommand with flags of its own (`lint`, `report`,
//! `serve`, `images`), the options several share in `policy` and
//! `images`; the small subcommands are here.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod audit;
mod exceptions;
mod images;
mod lint;
mod lint_render;
mod policy;
mod report;
mod serve;

pub use audit::{AuditArgs, ReportApiChoice};
pub use exceptions::{ExceptionArgs, ExceptionsArgs, ExceptionsCommand, FromAnnotationsArgs};
pub use images::{ImagesArgs, ImagesCommand, RegistryArgs, ResolveArgs};
pub use lint::{ColorChoice, FailOn, LintArgs, LintFormat};
pub use lint_render::{BaselineArgs, RenderArgs};
pub use policy::{ModeChoice, PolicyArgs, RuntimeChoice};
pub use report::{ApiDeadlines, ApiLimits, ReportArgs, ReportFormat};
pub use serve::{
    ClusterCacheMode, Exposure, GmsaMode, LogFormat, ReportExposure, ServeArgs, ServeRegistryArgs,
    WatchCacheArgs,
};

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
        after_help = "Findings are judged on the objects as written, before the mutating webhook's patch (`report --from-file` also shows the admission verdict after it; both exit by the same rule). Exit codes: 0 no error finding (no warning either with --fail-on warning); 1 error findings (or warnings with --fail-on warning); 2 a usage or input problem (a file that cannot be read or parsed: the other files are still linted; a bad policy or baseline, a directory with no manifest file, a chart or overlay whose tool (helm, kustomize or kubectl) is missing or fails: nothing is linted). With --baseline only findings the baseline does not record count; --write-baseline exits 0 unless an input cannot be read. --fail-on never exits 0 whatever the findings."
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
        after_help = "Each object's verdict (deny, warn, allow) is what admission does after the mutating webhook's patch; its findings, and the exit code, are those of the object as written, as `lint` gives them, so both commands fail a CI job on the same files. Exit codes, whatever the format (-o report.html too): 0 no error finding; 1 error findings (or warnings with --fail-on warning), so a CI job can fail on them; 2 a usage or input problem, a cluster that cannot be listed, custom resources that could not be discovered (unless --allow-partial), no workload matched (unless --allow-empty), or WINADMIT_NAMESPACE set (it names the install namespace of `certs` and `manifests`; `report` reads WINADMIT_REPORT_NAMESPACE). --fail-on never exits 0 whatever the findings (for `--format policyreport | kubectl apply -f -` under `set -o pipefail`)."
    )]
    Report(ReportArgs),
    /// Keep the cluster's workloads judged: watch them and the cluster facts
    /// the verdicts depend on, judge again what each change affects, and
    /// write openreports.io (or wgpolicyk8s.io) reports.
    Audit(Box<AuditArgs>),
    /// Print a ready example to try winadmit with.
    Example(ExampleArgs),
    /// Print the rules as ValidatingAdmissionPolicy and MutatingAdmissionPolicy
    /// objects: enforcement by the API server, no webhook.
    AdmissionPolicy(AdmissionPolicyArgs),
    /// Look images up in their registries.
    Images(ImagesArgs),
    /// PolicyExceptions: turn skip annotations into them.
    Exceptions(ExceptionsArgs),
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
    /// Write the API server's static admission configuration into DIR
    /// instead of printing: a directory per admission plugin, objects named
    /// `*.static.k8s.io` that no API call can change or delete, and
    /// DIR/admission-configuration.yaml for `--admission-control-config-file`
    /// (docs/install.md, "Static admission configuration").
    #[arg(long = "static", value_name = "DIR")]
    pub static_dir: Option<PathBuf>,
    /// With --static: DIR's path on the control-plane hosts, as the
    /// AdmissionConfiguration names it (default: DIR's absolute path).
    #[arg(long, value_name = "PATH", requires = "static_dir")]
    pub static_host_dir: Option<String>,
    /// With --static: leave this namespace out too (repeat for more), e.g.
    /// the network plugin's namespace when it is not kube-system.
    #[arg(long, value_name = "NS", requires = "static_dir")]
    pub exempt_namespace: Vec<String>,
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
    /// Write the API server's static admission configuration into DIR
    /// instead of printing: a directory per admission plugin, objects named
    /// `*.static.k8s.io` that no API call can change or delete, and
    /// DIR/admission-configuration.yaml for `--admission-control-config-file`
    /// (docs/install.md, "Static admission configuration").
    #[arg(long = "static", value_name = "DIR")]
    pub static_dir: Option<PathBuf>,
    /// With --static: DIR's path on the control-plane hosts, as the
    /// AdmissionConfiguration names it (default: DIR's absolute path).
    #[arg(long, value_name = "PATH", requires = "static_dir")]
    pub static_host_dir: Option<String>,
    /// With --static: leave this namespace out too (repeat for more), e.g.
    /// the network plugin's namespace when it is not kube-system.
    #[arg(long, value_name = "NS", requires = "static_dir")]
    pub exempt_namespace: Vec<String>,
    /// With --static: the URL kube-apiserver calls winadmit at,
    /// `https://HOST[:PORT]`, e.g. the Service's cluster IP or the address
    /// of winadmit on the control-plane host; /mutate and /validate are
    /// appended. Its host must be in the serving certificate.
    #[arg(
        long,
        value_name = "URL",
        requires = "static_dir",
        env = "WINADMIT_WEBHOOK_URL"
    )]
    pub webhook_url: Option<String>,
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
