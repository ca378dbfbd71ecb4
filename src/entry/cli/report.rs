//! `winadmit report`: its arguments, formats, and the deadlines and limits
//! of its calls to the Kubernetes API server.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{ColorChoice, FailOn, ModeChoice, PolicyArgs, RegistryArgs, parse_duration};

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
    #[command(flatten)]
    pub exceptions: super::ExceptionArgs,
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
    /// What if the Windows nodes ran this build (e.g. `10.0.26100`, Windows
    /// Server 2025): a live report with every Windows node's
    /// `node.kubernetes.io/windows-build` replaced (one Windows node of the
    /// build assumed when the cluster has none). With --kubernetes-version
    /// and --container-runtime, which already win over what the nodes
    /// report: what breaks when a node pool is upgraded, before it is.
    #[arg(long, value_name = "BUILD", env = "WINADMIT_WINDOWS_BUILD", value_parser = parse_build)]
    pub windows_build: Option<String>,
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

/// `10.0.26100` (or with a revision, `10.0.26100.2894`).
fn parse_build(s: &str) -> Result<String, String> {
    let parts: Vec<&str> = s.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if numeric && (3..=4).contains(&parts.len()) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "invalid Windows build {s:?}: expected MAJOR.MINOR.BUILD as in the node label node.kubernetes.io/windows-build, e.g. 10.0.26100"
        ))
    }
}
