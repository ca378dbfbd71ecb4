//! The policy options every command that evaluates workloads shares, and
//! the admission mode they may override.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::decision::version::KubeVersion;

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
    pub fn declared(&self) -> crate::decision::cluster::Declared {
        crate::decision::cluster::Declared {
            kubernetes_version: self.kubernetes_version,
            container_runtime: self.container_runtime.map(|r| match r {
                RuntimeChoice::Containerd => crate::decision::cluster::Runtime::Containerd,
                RuntimeChoice::Docker => crate::decision::cluster::Runtime::Docker,
            }),
            containerd_version: None,
            stance: self
                .strict
                .then_some(crate::decision::cluster::Stance::Strict),
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
        .map_err(|e: crate::decision::version::ParseVersionError| e.to_string())?;
    crate::decision::cluster::check_version(v).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeChoice {
    Enforce,
    Warn,
    Audit,
}
