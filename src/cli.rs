//! Command-line interface: clap derive structs only, no logic.
//! Every flag can also be set through the environment variable named beside it.

use std::path::PathBuf;

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
    Lint(LintArgs),
    /// List the rule catalogue.
    Rules(RulesArgs),
    /// Print one rule's documentation.
    Explain(ExplainArgs),
    /// Generate a CA and a serving certificate for the webhook Service.
    Certs(CertsArgs),
    /// Print the install manifests as YAML (no kustomize needed).
    Manifests(ManifestsArgs),
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
    /// Kubernetes version the rules apply to.
    #[arg(long, value_name = "MAJOR.MINOR", env = "WINADMIT_KUBERNETES_VERSION", default_value_t = KubeVersion::LATEST)]
    pub kubernetes_version: KubeVersion,
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
    /// Install into this namespace instead of `winadmit`.
    #[arg(long, value_name = "NS", env = "WINADMIT_NAMESPACE")]
    pub namespace: Option<String>,
    /// Server image, e.g. registry.example.com/winadmit:0.1.0.
    #[arg(long, value_name = "IMG", env = "WINADMIT_IMAGE")]
    pub image: Option<String>,
}
