//! `winadmit lint`'s arguments for charts and overlays (rendered with helm
//! or kustomize before they are judged) and for the baseline.

use std::path::PathBuf;

use clap::Args;

/// How charts are rendered: passed through to `helm template`.
#[derive(Debug, Args, Default)]
pub struct RenderArgs {
    /// A Helm chart to render and judge (a directory with `Chart.yaml`, or
    /// a packaged `.tgz`); a directory with `Chart.yaml` or a `.tgz` given
    /// as PATH is one too, and so is a file under a chart's directory.
    #[arg(long, value_name = "CHART")]
    pub helm_chart: Vec<PathBuf>,
    /// The release name charts are rendered with (`helm template NAME`).
    #[arg(long, value_name = "NAME", default_value = "release-name")]
    pub release_name: String,
    /// The namespace charts are rendered into (`helm template --namespace`).
    #[arg(
        long = "helm-namespace",
        value_name = "NAMESPACE",
        default_value = "default"
    )]
    pub namespace: String,
    /// A values file for every render of the charts (`helm template -f`;
    /// repeatable, in order).
    #[arg(short = 'f', long = "values", value_name = "FILE")]
    pub values: Vec<PathBuf>,
    /// A value for every render of the charts (`helm template --set`;
    /// repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A values set: the charts are rendered once per values set (a file,
    /// or a directory: each of its `.yaml` files), each finding naming the
    /// values set it was rendered with. Without one, once with the chart's
    /// defaults.
    #[arg(long, value_name = "FILE|DIR")]
    pub values_set: Vec<PathBuf>,
    /// An API version the target serves, passed to helm
    /// (`helm template --api-versions`, for charts that check
    /// `.Capabilities.APIVersions`; repeatable).
    #[arg(long, value_name = "GROUP/VERSION")]
    pub api_versions: Vec<String>,
}

/// Adopting lint where findings exist already.
#[derive(Debug, Args, Default)]
pub struct BaselineArgs {
    /// Record today's findings in FILE (by object, container, rule and
    /// field path, not by line) and exit 0 unless an input cannot be read.
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    pub write_baseline: Option<PathBuf>,
    /// Fail only on findings FILE does not record, and list its entries
    /// that are gone.
    #[arg(long, value_name = "FILE", env = "WINADMIT_BASELINE")]
    pub baseline: Option<PathBuf>,
}
