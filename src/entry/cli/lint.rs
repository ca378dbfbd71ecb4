//! `winadmit lint`: its arguments and output choices.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{BaselineArgs, PolicyArgs, RegistryArgs, RenderArgs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
    Sarif,
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 1 on error findings (the default).
    Error,
    /// Exit 1 on error or warning findings.
    Warning,
    /// Exit 0 whatever the findings (a report piped into `kubectl apply`
    /// under `set -o pipefail`); an input problem still exits 2.
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Files or directories (recursively: .yaml, .yml, .json); `-` reads
    /// stdin. A Helm chart (a directory with `Chart.yaml`, a `.tgz`) is
    /// rendered with helm, a directory with `kustomization.yaml` built with
    /// kustomize, and what they render is judged.
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
    #[command(flatten)]
    pub exceptions: super::ExceptionArgs,
    /// Colour in text output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, env = "WINADMIT_COLOR")]
    pub color: ColorChoice,
    #[command(flatten)]
    pub render: RenderArgs,
    #[command(flatten)]
    pub baseline: BaselineArgs,
}
