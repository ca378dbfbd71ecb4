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
