//! `winadmit audit`: its arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{GmsaMode, LogFormat, PolicyArgs, parse_duration};

/// Which report API `audit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportApiChoice {
    /// openreports.io/v1alpha1 Reports and a ClusterReport.
    Openreports,
    /// wgpolicyk8s.io/v1alpha2 PolicyReports and a ClusterPolicyReport.
    Policyreport,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kubeconfig file (default: in-cluster config, $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE", env = "WINADMIT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME", env = "WINADMIT_CONTEXT")]
    pub context: Option<String>,
    /// The reports written: openreports.io/v1alpha1 (Report, ClusterReport)
    /// or wgpolicyk8s.io/v1alpha2 (PolicyReport, ClusterPolicyReport).
    #[arg(long, value_enum, default_value_t = ReportApiChoice::Openreports, env = "WINADMIT_AUDIT_REPORT_API")]
    pub report_api: ReportApiChoice,
    /// Also list info findings (advice) in the reports; by default they
    /// hold errors and warnings only.
    #[arg(long, env = "WINADMIT_AUDIT_INFO")]
    pub audit_info: bool,
    /// Least time between two audit passes: changes within it are judged
    /// together.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_AUDIT_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub audit_interval: Duration,
    /// Most report writes (applies and deletes) per second.
    #[arg(long, value_name = "N", env = "WINADMIT_REPORT_WRITES_PER_SECOND", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub report_writes_per_second: u32,
    /// How often the leader lists the reports in the cluster and compares
    /// what each says with what it should say, rewriting any that differ
    /// (edited by someone else); also on taking the lead.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_REPORT_VERIFY_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub report_verify_interval: Duration,
    /// How often to check the --policy files for changes (a change is
    /// loaded and every workload judged again; a broken file is logged and
    /// the last good policy kept).
    #[arg(long, value_name = "DURATION", env = "WINADMIT_POLICY_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub policy_reload_interval: Duration,
    /// Serve /metrics, /healthz and /readyz over plain HTTP here.
    #[arg(long, value_name = "ADDR", env = "WINADMIT_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Check gMSA (credential specs exist, contents): `auto` when the API
    /// server serves gmsacredentialspecs.windows.k8s.io.
    #[arg(long, value_enum, value_name = "MODE", env = "WINADMIT_GMSA", default_value_t = GmsaMode::Auto)]
    pub gmsa: GmsaMode,
    /// winadmit's own namespace: where PolicyExceptions count when the
    /// policy's `exceptions.namespaces` lists none (unset: none count
    /// there). The chart sets it to the namespace the audit runs in.
    #[arg(long, value_name = "NAMESPACE", env = "WINADMIT_NAMESPACE")]
    pub own_namespace: Option<String>,
    /// Run with other replicas: only the holder of the coordination.k8s.io
    /// Lease --lease-name writes reports; the others judge and stand by.
    #[arg(long, env = "WINADMIT_LEADER_ELECTION")]
    pub leader_election: bool,
    /// The Lease's name.
    #[arg(
        long,
        value_name = "NAME",
        env = "WINADMIT_LEASE_NAME",
        default_value = "winadmit-audit"
    )]
    pub lease_name: String,
    /// The Lease's namespace (default: $POD_NAMESPACE, then `default`).
    #[arg(long, value_name = "NS", env = "WINADMIT_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// This replica's name in the Lease (default: $POD_NAME, then the host
    /// name and process id).
    #[arg(long, value_name = "NAME", env = "WINADMIT_LEASE_IDENTITY")]
    pub lease_identity: Option<String>,
    /// How long a Lease holds without renewal: a killed leader is replaced
    /// after at most this.
    #[arg(long, value_name = "DURATION", env = "WINADMIT_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// Log format.
    #[arg(long, value_enum, env = "WINADMIT_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing-subscriber EnvFilter syntax).
    #[arg(
        long,
        value_name = "FILTER",
        env = "WINADMIT_LOG",
        default_value = "info"
    )]
    pub log_level: String,
}
