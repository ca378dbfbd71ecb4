//! The cluster a verdict is about: its Kubernetes version, container
//! runtime and stance, each with where it came from.
//!
//! Verdicts depend on the target (`subPath` fails on Docker and works on
//! containerd; `sysctls` are refused by the kubelet from 1.27), so the
//! engine judges every object against one [`Cluster`]. The facts come, in
//! order of precedence, from a flag, the policy's `cluster` block, what was
//! learnt from the cluster's Windows nodes, and the defaults
//! (`../shared/windows-truth.md` section 2). This module is pure data: the
//! doors fill it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::version::KubeVersion;

/// The oldest Kubernetes minor winadmit judges (`--kubernetes-version`).
pub const OLDEST_VERSION: KubeVersion = KubeVersion::new(1, 14);

/// The container runtime of the Windows nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Containerd,
    /// Docker through dockershim (up to Kubernetes 1.23) or cri-dockerd.
    Docker,
}

impl Runtime {
    /// The runtime a cluster of this version uses unless told otherwise:
    /// dockershim was removed in 1.24.
    #[must_use]
    pub fn default_for(version: KubeVersion) -> Self {
        if version >= KubeVersion::new(1, 24) {
            Self::Containerd
        } else {
            Self::Docker
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Containerd => "containerd",
            Self::Docker => "docker",
        }
    }
}

impl FromStr for Runtime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "containerd" => Ok(Self::Containerd),
            "docker" => Ok(Self::Docker),
            other => Err(format!(
                "unknown container runtime {other:?}: expected containerd or docker"
            )),
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How hard the defaults are. `strict` raises every "intent lost" warning
/// (a security property or capability Windows silently does not give) to an
/// error, and the mutation then keeps those fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stance {
    #[default]
    Default,
    Strict,
}

/// Where a fact came from, so findings can say it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "from", content = "detail")]
pub enum Source {
    /// winadmit's default target.
    #[default]
    Default,
    /// Derived from the Kubernetes version (the runtime: docker before 1.24).
    Version,
    /// A command-line flag.
    Flag,
    /// The policy's `cluster` block.
    Policy,
    /// Learnt from a Windows node (its name).
    Node(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("winadmit's default target"),
            Self::Version => f.write_str("the default for that Kubernetes version"),
            Self::Flag => f.write_str("a command-line flag"),
            Self::Policy => f.write_str("the policy's cluster block"),
            Self::Node(n) => write!(f, "Windows node {n}"),
        }
    }
}

/// The target cluster: every fact a verdict may depend on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    pub kubernetes_version: KubeVersion,
    pub kubernetes_version_from: Source,
    pub container_runtime: Runtime,
    pub container_runtime_from: Source,
    /// `major.minor` of containerd, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containerd_version: Option<KubeVersion>,
    pub stance: Stance,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::at(KubeVersion::LATEST)
    }
}

impl Cluster {
    /// The default target at `version`: its default runtime, default stance.
    #[must_use]
    pub fn at(version: KubeVersion) -> Self {
        Self {
            kubernetes_version: version,
            kubernetes_version_from: Source::Default,
            container_runtime: Runtime::default_for(version),
            container_runtime_from: Source::Version,
            containerd_version: (Runtime::default_for(version) == Runtime::Containerd)
                .then_some(KubeVersion::new(1, 7)),
            stance: Stance::Default,
        }
    }

    /// The same cluster with another runtime.
    #[must_use]
    pub fn with_runtime(mut self, runtime: Runtime, from: Source) -> Self {
        self.container_runtime = runtime;
        self.container_runtime_from = from;
        if runtime == Runtime::Docker {
            self.containerd_version = None;
        }
        self
    }

    #[must_use]
    pub fn is_docker(&self) -> bool {
        self.container_runtime == Runtime::Docker
    }

    #[must_use]
    pub fn is_strict(&self) -> bool {
        self.stance == Stance::Strict
    }

    #[must_use]
    pub fn version_at_least(&self, major: u16, minor: u16) -> bool {
        self.kubernetes_version >= KubeVersion::new(major, minor)
    }

    /// "Kubernetes 1.19 (a command-line flag)", for findings that depend on it.
    #[must_use]
    pub fn version_fact(&self) -> String {
        format!(
            "Kubernetes {} ({})",
            self.kubernetes_version, self.kubernetes_version_from
        )
    }

    /// "runtime docker (Windows node win-1)".
    #[must_use]
    pub fn runtime_fact(&self) -> String {
        format!(
            "container runtime {} ({})",
            self.container_runtime, self.container_runtime_from
        )
    }

    /// One line for report headers and logs.
    #[must_use]
    pub fn summary(&self) -> String {
        format!(
            "{}, {}{}",
            self.version_fact(),
            self.runtime_fact(),
            if self.is_strict() {
                ", strict stance"
            } else {
                ""
            }
        )
    }
}

/// Facts someone stated (a flag or the policy); `None` says nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stated {
    pub kubernetes_version: Option<KubeVersion>,
    pub container_runtime: Option<Runtime>,
    pub containerd_version: Option<KubeVersion>,
    pub stance: Option<Stance>,
}

/// Facts learnt from the cluster's Windows nodes: the oldest kubelet and
/// runtime, each with the node that reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Learnt {
    pub kubernetes_version: Option<(KubeVersion, String)>,
    pub container_runtime: Option<(Runtime, String)>,
    pub containerd_version: Option<KubeVersion>,
}

impl Cluster {
    /// The target: each fact from the first of a flag, the policy, the
    /// cluster's nodes, and the default (the runtime's default follows the
    /// version).
    #[must_use]
    pub fn resolve(flags: &Stated, policy: &Stated, learnt: &Learnt) -> Self {
        let (kubernetes_version, kubernetes_version_from) =
            if let Some(v) = flags.kubernetes_version {
                (v, Source::Flag)
            } else if let Some(v) = policy.kubernetes_version {
                (v, Source::Policy)
            } else if let Some((v, node)) = &learnt.kubernetes_version {
                (*v, Source::Node(node.clone()))
            } else {
                (KubeVersion::LATEST, Source::Default)
            };
        let (container_runtime, container_runtime_from) = if let Some(r) = flags.container_runtime {
            (r, Source::Flag)
        } else if let Some(r) = policy.container_runtime {
            (r, Source::Policy)
        } else if let Some((r, node)) = &learnt.container_runtime {
            (*r, Source::Node(node.clone()))
        } else {
            (Runtime::default_for(kubernetes_version), Source::Version)
        };
        let containerd_version = (container_runtime == Runtime::Containerd).then(|| {
            flags
                .containerd_version
                .or(policy.containerd_version)
                .or(learnt.containerd_version)
                .unwrap_or(KubeVersion::new(1, 7))
        });
        Self {
            kubernetes_version,
            kubernetes_version_from,
            container_runtime,
            container_runtime_from,
            containerd_version,
            stance: flags.stance.or(policy.stance).unwrap_or_default(),
        }
    }
}

/// A Kubernetes version outside what winadmit judges.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "Kubernetes {0} is outside the versions winadmit knows ({OLDEST_VERSION} to {newest}): \
     pass --kubernetes-version between them",
    newest = KubeVersion::LATEST
)]
pub struct UnknownVersion(pub KubeVersion);

/// Checks that `v` is a version winadmit has rules for.
///
/// # Errors
/// `v` is older than 1.14 or newer than [`KubeVersion::LATEST`].
pub fn check_version(v: KubeVersion) -> Result<KubeVersion, UnknownVersion> {
    if v < OLDEST_VERSION || v > KubeVersion::LATEST {
        Err(UnknownVersion(v))
    } else {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_defaults_by_version() {
        assert_eq!(
            Cluster::at(KubeVersion::new(1, 23)).container_runtime,
            Runtime::Docker
        );
        assert_eq!(
            Cluster::at(KubeVersion::new(1, 24)).container_runtime,
            Runtime::Containerd
        );
        assert_eq!(Cluster::default().container_runtime, Runtime::Containerd);
    }

    #[test]
    fn a_flag_wins_over_the_policy_which_wins_over_the_nodes() {
        let node = Learnt {
            kubernetes_version: Some((KubeVersion::new(1, 29), "win-1".into())),
            container_runtime: Some((Runtime::Docker, "win-2".into())),
            containerd_version: None,
        };
        let c = Cluster::resolve(&Stated::default(), &Stated::default(), &node);
        assert_eq!(c.kubernetes_version, KubeVersion::new(1, 29));
        assert_eq!(c.container_runtime_from, Source::Node("win-2".into()));
        assert!(c.runtime_fact().contains("win-2"), "{}", c.runtime_fact());
        let policy = Stated {
            container_runtime: Some(Runtime::Containerd),
            ..Stated::default()
        };
        let c = Cluster::resolve(&Stated::default(), &policy, &node);
        assert_eq!(c.container_runtime, Runtime::Containerd);
        assert_eq!(c.container_runtime_from, Source::Policy);
        let flags = Stated {
            kubernetes_version: Some(KubeVersion::new(1, 19)),
            ..Stated::default()
        };
        let c = Cluster::resolve(&flags, &Stated::default(), &Learnt::default());
        assert_eq!(c.container_runtime, Runtime::Docker, "docker before 1.24");
        assert_eq!(c.kubernetes_version_from, Source::Flag);
    }

    #[test]
    fn versions_outside_the_known_range_are_refused() {
        assert!(check_version(KubeVersion::new(2, 0)).is_err());
        assert!(check_version(KubeVersion::new(1, 13)).is_err());
        assert!(check_version(KubeVersion::new(1, 14)).is_ok());
        assert!(check_version(KubeVersion::LATEST).is_ok());
        let msg = check_version(KubeVersion::new(2, 0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("1.14 to 1.37"), "{msg}");
    }
}
