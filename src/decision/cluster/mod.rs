//! The cluster a verdict is about: its Kubernetes version, container
//! runtime and stance, each with where it came from.
//!
//! Verdicts depend on the target (`subPath` fails on Docker and works on
//! containerd; `sysctls` are refused by the kubelet from 1.27), so the
//! engine judges every object against one [`TargetCluster`]. The facts come, in
//! order of precedence, from a flag, the policy's `cluster` block, what was
//! learnt from the cluster's Windows nodes, and the defaults
//! (docs/verdicts.md, "The target cluster"). This module is pure data: the
//! entry points fill it.
//!
//! What the Windows nodes say, and a cluster narrowed to them, is in `nodes`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::decision::targeting::RuntimeClasses;
use crate::decision::version::KubeVersion;

mod nodes;
pub mod placement;

pub use nodes::{KnownNode, LinuxNode, OsConflict, WindowsNode, WindowsNodes};

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

/// How hard the defaults are (policy key `stance`). `strict` raises every
/// warning about an ignored security setting
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
    /// Observed from a Windows node (its name).
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
pub struct TargetCluster {
    pub kubernetes_version: KubeVersion,
    pub kubernetes_version_from: Source,
    pub container_runtime: Runtime,
    pub container_runtime_from: Source,
    /// `major.minor` of containerd, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containerd_version: Option<KubeVersion>,
    pub stance: Stance,
}

impl Default for TargetCluster {
    fn default() -> Self {
        Self::at(KubeVersion::LATEST)
    }
}

impl TargetCluster {
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
                ", --strict (ignored security settings are errors)"
            } else {
                ""
            }
        )
    }
}

/// Facts declared by a flag or the policy; `None` says nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    pub kubernetes_version: Option<KubeVersion>,
    pub container_runtime: Option<Runtime>,
    pub containerd_version: Option<KubeVersion>,
    pub stance: Option<Stance>,
}

/// Facts observed on the cluster's Windows nodes: the oldest kubelet and
/// runtime, each with the node that reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub kubernetes_version: Option<(KubeVersion, String)>,
    pub container_runtime: Option<(Runtime, String)>,
    pub containerd_version: Option<KubeVersion>,
}

impl TargetCluster {
    /// The target: each fact from the first of a flag, the policy, the
    /// cluster's nodes, and the default (the runtime's default follows the
    /// version).
    #[must_use]
    pub fn resolve(flags: &Declared, policy: &Declared, observed: &Observed) -> Self {
        let (kubernetes_version, kubernetes_version_from) =
            if let Some(v) = flags.kubernetes_version {
                (v, Source::Flag)
            } else if let Some(v) = policy.kubernetes_version {
                (v, Source::Policy)
            } else if let Some((v, node)) = &observed.kubernetes_version {
                (*v, Source::Node(node.clone()))
            } else {
                (KubeVersion::LATEST, Source::Default)
            };
        let (container_runtime, container_runtime_from) = if let Some(r) = flags.container_runtime {
            (r, Source::Flag)
        } else if let Some(r) = policy.container_runtime {
            (r, Source::Policy)
        } else if let Some((r, node)) = &observed.container_runtime {
            (*r, Source::Node(node.clone()))
        } else {
            (Runtime::default_for(kubernetes_version), Source::Version)
        };
        let containerd_version = (container_runtime == Runtime::Containerd).then(|| {
            flags
                .containerd_version
                .or(policy.containerd_version)
                .or(observed.containerd_version)
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

/// The cluster objects an entry point has seen in its input (lint's and report's
/// files, the live report's list calls): namespaces with their labels,
/// RuntimeClasses with handler and scheduling, nodes and gMSA
/// credential specs. One reader for all of them, so every entry point learns the same facts the same way.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    pub namespaces: std::collections::HashMap<String, BTreeMap<String, String>>,
    pub runtime_classes: RuntimeClasses,
    pub nodes: WindowsNodes,
    /// The GMSACredentialSpec objects seen, when there was one: the
    /// input is then the cluster's whole list of them.
    pub gmsa: Option<crate::decision::gmsa::Facts>,
    /// The `PolicyException` objects seen (`winadmit.io`), as written: the
    /// entry point reads them and says which count.
    pub exceptions: Vec<serde_json::Value>,
}

impl ClusterObjects {
    /// Learns from a Namespace (its labels), a RuntimeClass (the OS it
    /// pins, its handler, its build), a Node (Windows or not) or a
    /// GMSACredentialSpec. Returns whether the object was one of them.
    pub fn learn(&mut self, value: &serde_json::Value) -> bool {
        let (api_version, kind) = crate::decision::workload::type_of(value).unwrap_or_default();
        if kind == "Namespace" && api_version == "v1" {
            let Some(name) = value.pointer("/metadata/name").and_then(|n| n.as_str()) else {
                return false;
            };
            let labels = self.namespaces.entry(name.to_owned()).or_default();
            if let Some(map) = value
                .pointer("/metadata/labels")
                .and_then(|l| l.as_object())
            {
                for (k, v) in map {
                    if let Some(v) = v.as_str() {
                        labels.insert(k.clone(), v.to_owned());
                    }
                }
            }
            true
        } else if let Some((name, info)) = RuntimeClasses::info_from_object(value) {
            self.runtime_classes.insert_info(name, info);
            true
        } else if let Some(node) = KnownNode::from_object(value) {
            // The input's Node objects are the cluster's nodes.
            self.nodes.push(node);
            self.nodes.linux_known = true;
            true
        } else if let Some((name, spec)) = crate::decision::gmsa::CredSpec::from_object(value) {
            let facts = self
                .gmsa
                .get_or_insert_with(|| crate::decision::gmsa::Facts {
                    complete: true,
                    ..crate::decision::gmsa::Facts::default()
                });
            facts.specs.insert(name, spec);
            true
        } else if kind == "PolicyException" && api_version.starts_with("winadmit.io/") {
            self.exceptions.push(value.clone());
            true
        } else {
            false
        }
    }

    /// Takes in what another reader learnt (a later one wins for a class).
    pub fn absorb(&mut self, other: Self) {
        for (ns, labels) in other.namespaces {
            self.namespaces.entry(ns).or_default().extend(labels);
        }
        self.runtime_classes.extend(other.runtime_classes);
        self.nodes.nodes.extend(other.nodes.nodes);
        self.nodes.linux.extend(other.nodes.linux);
        self.nodes.linux_known |= other.nodes.linux_known;
        self.exceptions.extend(other.exceptions);
        if let Some(other) = other.gmsa {
            match &mut self.gmsa {
                Some(facts) => facts.specs.extend(other.specs),
                None => self.gmsa = Some(other),
            }
        }
    }

    /// The value of label `key` on namespace `namespace`, if seen.
    #[must_use]
    pub fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.namespaces.get(namespace)?.get(key).cloned()
    }
}

/// What an entry point knows of the cluster beyond the policy and the object:
/// namespace labels, RuntimeClasses and Windows nodes. Plain data behind a
/// trait, so the core stays free of clients: the server's watch cache
/// (`server::watch_cache::WatchCache`) implements it, the report's objects
/// from its input, tests a map.
pub trait ClusterLookup: Send + Sync {
    /// The value of label `key` on namespace `namespace`, if known.
    fn label(&self, namespace: &str, key: &str) -> Option<String>;

    /// The cluster's RuntimeClasses, a snapshot that stays valid for the
    /// whole review, if known (beyond the policy's `windowsRuntimeClasses`).
    fn runtime_classes(&self) -> Option<Arc<RuntimeClasses>> {
        None
    }
    /// The cluster's Windows nodes, if the server watches them.
    fn nodes(&self) -> Option<Arc<WindowsNodes>> {
        None
    }
    /// The PolicyExceptions in force at `now`, if the entry point watches
    /// them.
    fn exceptions(
        &self,
        _now: crate::decision::exceptions::Timestamp,
    ) -> Option<Arc<crate::decision::exceptions::ExceptionSet>> {
        None
    }
    /// The gMSA facts of one workload, from an entry point that asks the cluster
    /// as the report reaches the workload (the live `report`, the server's
    /// `/report`): the credential specs `names` and whether `account` in
    /// `namespace` (when the object has one) may `use` them. `None`: this
    /// view does not look them up.
    fn gmsa(
        &self,
        _namespace: Option<&str>,
        _account: &str,
        _names: &[&str],
    ) -> Option<crate::decision::gmsa::Facts> {
        None
    }
}

/// A shared view (the server's cache is also held by its watchers).
impl<T: ClusterLookup + ?Sized> ClusterLookup for Arc<T> {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        (**self).label(namespace, key)
    }

    fn runtime_classes(&self) -> Option<Arc<RuntimeClasses>> {
        (**self).runtime_classes()
    }

    fn nodes(&self) -> Option<Arc<WindowsNodes>> {
        (**self).nodes()
    }

    fn exceptions(
        &self,
        now: crate::decision::exceptions::Timestamp,
    ) -> Option<Arc<crate::decision::exceptions::ExceptionSet>> {
        (**self).exceptions(now)
    }

    fn gmsa(
        &self,
        namespace: Option<&str>,
        account: &str,
        names: &[&str],
    ) -> Option<crate::decision::gmsa::Facts> {
        (**self).gmsa(namespace, account, names)
    }
}

/// A fixed table of namespace labels (tests, and a future static config).
impl ClusterLookup for BTreeMap<String, BTreeMap<String, String>> {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.get(namespace).and_then(|l| l.get(key)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_defaults_by_version() {
        assert_eq!(
            TargetCluster::at(KubeVersion::new(1, 23)).container_runtime,
            Runtime::Docker
        );
        assert_eq!(
            TargetCluster::at(KubeVersion::new(1, 24)).container_runtime,
            Runtime::Containerd
        );
        assert_eq!(
            TargetCluster::default().container_runtime,
            Runtime::Containerd
        );
    }

    #[test]
    fn a_flag_wins_over_the_policy_which_wins_over_the_nodes() {
        let node = Observed {
            kubernetes_version: Some((KubeVersion::new(1, 29), "win-1".into())),
            container_runtime: Some((Runtime::Docker, "win-2".into())),
            containerd_version: None,
        };
        let c = TargetCluster::resolve(&Declared::default(), &Declared::default(), &node);
        assert_eq!(c.kubernetes_version, KubeVersion::new(1, 29));
        assert_eq!(c.container_runtime_from, Source::Node("win-2".into()));
        assert!(c.runtime_fact().contains("win-2"), "{}", c.runtime_fact());
        let policy = Declared {
            container_runtime: Some(Runtime::Containerd),
            ..Declared::default()
        };
        let c = TargetCluster::resolve(&Declared::default(), &policy, &node);
        assert_eq!(c.container_runtime, Runtime::Containerd);
        assert_eq!(c.container_runtime_from, Source::Policy);
        let flags = Declared {
            kubernetes_version: Some(KubeVersion::new(1, 19)),
            ..Declared::default()
        };
        let c = TargetCluster::resolve(&flags, &Declared::default(), &Observed::default());
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
