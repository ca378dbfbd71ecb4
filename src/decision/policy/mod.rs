//! Policies are data: which rules run, how severely, in which mode, with
//! which exemptions and parameters.
//!
//! The default policy (`policies/default.yaml`) is embedded in the binary.
//! `--policy FILE|DIR` layers more files over it (a directory's `.yaml`/`.yml`
//! files in name order): maps merge key by key, lists and scalars replace.
//! Parsing is strict: an unknown key or rule id is an error naming the file
//! and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde::Deserialize;

use crate::decision::cluster::{Runtime, Stance, TargetCluster};
use crate::decision::finding::Severity;
use crate::decision::rules;
pub use crate::decision::rules::params::RuleParams;
use crate::decision::targeting::RuntimeClasses;
pub use crate::decision::tolerations::{TAINT_EFFECTS, TOLERATION_OPERATORS, Taint};
use crate::decision::version::KubeVersion;

mod check;
mod file;
mod layer;
mod load;

/// The embedded default policy.
pub const DEFAULT_POLICY: &str = include_str!("../../../policies/default.yaml");
/// The name errors and notices give the embedded default policy.
pub const DEFAULT_POLICY_NAME: &str = "<built-in policies/default.yaml>";

/// Annotation prefix by which a workload opts out of one rule, with the
/// reason as its value: `winadmit.io/skip.WIN-SUBPATH: "containerd 1.7 mounts subPath fine"`.
pub const SKIP_ANNOTATION_PREFIX: &str = "winadmit.io/skip.";

/// The policy's `cluster` block: facts about the target cluster. A flag
/// wins over it; it wins over what is learnt from the cluster's nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterBlock {
    pub kubernetes_version: Option<KubeVersion>,
    pub container_runtime: Option<Runtime>,
    pub containerd_version: Option<KubeVersion>,
}

/// What admission does with error findings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Deny.
    #[default]
    Enforce,
    /// Allow, with the errors returned as warnings.
    Warn,
    /// Allow silently; count in metrics and logs.
    Audit,
}

/// A rule's setting in a policy file: `error`, `warning`, `off`, or
/// `{severity: ..., mode: ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSetting {
    pub level: Option<Level>,
    pub mode: Option<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
    Info,
    Off,
}

impl Level {
    fn severity(self) -> Option<Severity> {
        match self {
            Self::Error => Some(Severity::Error),
            Self::Warning => Some(Severity::Warning),
            Self::Info => Some(Severity::Info),
            Self::Off => None,
        }
    }
}

/// Who and what is exempt from every rule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exemptions {
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Objects whose labels match any of these selectors are exempt.
    #[serde(default)]
    pub label_selectors: Vec<LabelSelector>,
}

/// Where the webhook is called at all: the manifests' namespaceSelector
/// excludes these namespaces and namespaces with these labels. Objects
/// there are still checked by `lint` (a broken manifest is broken wherever
/// it goes), but `/validate`, `/mutate` and `report` treat them as exempt:
/// the API server never asks the webhook about them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reach {
    /// Namespaces the webhook is never called for.
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    /// Namespace labels (key: value) that opt a namespace out.
    #[serde(default)]
    pub opt_out_namespace_labels: BTreeMap<String, String>,
}

/// Which `winadmit.io/skip.<RULE>` annotations count: the operator's
/// decision, never the object's. An annotation drops a rule's findings only
/// when skips are allowed, the rule is skippable (listed in `rules`, or
/// `rules` is empty) and the object's namespace is listed in `namespaces`
/// (or `namespaces` is empty). The rules that guard a security boundary
/// ([`rules::BOUNDARY`]) and the rules in `unskippable` never are.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Skips {
    /// `false`: no annotation skips anything.
    #[serde(default = "yes")]
    pub allowed: bool,
    /// The rules an annotation may skip; empty: every rule but the
    /// unskippable ones.
    #[serde(default)]
    pub rules: Vec<String>,
    /// The namespaces in which an annotation counts; empty: every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Rules no annotation may skip, beyond the security boundary's.
    #[serde(default)]
    pub unskippable: Vec<String>,
}

impl Default for Skips {
    fn default() -> Self {
        Self {
            allowed: true,
            rules: Vec::new(),
            namespaces: Vec::new(),
            unskippable: Vec::new(),
        }
    }
}

/// What the mutating webhook (and `lint --fix`) may change.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutationSettings {
    /// Add `nodeSelector: {kubernetes.io/os: windows}` to Windows-targeted
    /// pods that lack it.
    pub inject_node_selector: bool,
    /// Set `spec.os.name: windows` on CREATE.
    pub set_os_name: bool,
    /// Remove Linux-only settings that have no effect on Windows
    /// (`privileged: false`, `capabilities.drop`, `seccompProfile: RuntimeDefault`, ...).
    pub remove_no_op_fields: bool,
    /// Move `emptyDir.medium: Memory` to node disk.
    pub empty_dir_off_memory: bool,
    /// Pin to Windows every image that looks Windows (`params.windowsImages`).
    pub infer_from_images: bool,
    /// Pin to Windows a pod that selects no OS whose images can only be
    /// Windows (registry facts, `params.certainWindowsImages`, the tag).
    #[serde(default = "yes")]
    pub pin_windows_images: bool,
    /// With Windows nodes known, pin to Linux a pod that selects no OS whose
    /// images have no Windows variant (WIN-LINUX-UNPINNED).
    #[serde(default = "yes")]
    pub pin_linux_images: bool,
    /// `experimental.windows.kubernetes.io/isolation-type` to add: `process`
    /// or `hyperv`; unset adds nothing.
    pub isolation: Option<String>,
    /// Namespace label that overrides `isolation` per namespace.
    pub isolation_namespace_label: Option<String>,
    /// Tolerations to add to Windows pods (e.g. for an `os=windows:NoSchedule` taint).
    pub tolerations: Vec<serde_json::Value>,
    /// Add `node.kubernetes.io/windows-build` to the node selector of
    /// process-isolated Windows pods whose images leave one build they all
    /// run on (by the registry's facts where known, else by their tags).
    #[serde(default)]
    pub inject_windows_build: bool,
    /// Add the toleration for `params.windowsTaint` (when set) to Windows pods.
    #[serde(default = "yes")]
    pub tolerate_windows_taint: bool,
}

fn yes() -> bool {
    true
}

impl Default for MutationSettings {
    fn default() -> Self {
        Self {
            inject_node_selector: true,
            set_os_name: false,
            remove_no_op_fields: true,
            empty_dir_off_memory: false,
            infer_from_images: false,
            pin_windows_images: true,
            pin_linux_images: true,
            isolation: None,
            isolation_namespace_label: None,
            tolerations: Vec::new(),
            inject_windows_build: false,
            tolerate_windows_taint: true,
        }
    }
}

pub const POLICY_API_VERSION: &str = "winadmit.io/v1alpha1";

/// A policy failed to load. Each variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid policy {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error(
        "invalid policy {path}: unknown rule id `{id}` under `rules` (run `winadmit rules` for the list)"
    )]
    UnknownRule { path: PathBuf, id: String },
    #[error("invalid policy {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A problem at a known place in the file.
    #[error("invalid policy {path}:{line}:{column}: {message}")]
    At {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
    /// A problem at a key, named by its JSON Pointer, before the reader of
    /// the file found its line and column.
    #[error("invalid policy {path}: {message} (at {pointer})")]
    AtKey {
        path: PathBuf,
        pointer: String,
        message: String,
    },
    #[error("policy directory {path} holds no .yaml or .yml files")]
    EmptyDir { path: PathBuf },
}

/// A resolved policy, ready for the engine.
#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    /// `stance: strict` raises "intent lost" warnings to errors.
    pub stance: Option<Stance>,
    /// Facts about the target cluster the policy states.
    pub cluster: ClusterBlock,
    /// Things the loader wants the user to know (a retired key, ...); the
    /// commands print them on stderr.
    pub notices: Vec<String>,
    /// Namespace label whose value (`enforce`, `warn`, `audit`) overrides the mode.
    pub namespace_mode_label: String,
    /// Severity a policy file set per rule, indexed like [`rules::ALL`];
    /// `None` follows the rule's level on the target cluster.
    levels: Vec<Option<Level>>,
    /// Mode per rule, indexed like [`rules::ALL`]; `None` follows the policy.
    rule_modes: Vec<Option<Mode>>,
    pub runtime_classes: RuntimeClasses,
    pub exemptions: Exemptions,
    /// Where the webhook is called at all (the manifests render it).
    pub reach: Reach,
    selectors: Vec<Selector>,
    pub params: RuleParams,
    pub mutation: MutationSettings,
    /// Custom resources the policy names with their pod template path
    /// (`podTemplates`); the built-in ones are in [`crate::decision::workload::CUSTOM_RESOURCES`].
    pub pod_templates: crate::decision::workload::PodTemplates,
    /// Which `winadmit.io/skip.<RULE>` annotations count.
    pub skips: Skips,
    /// Which `PolicyException` objects count (`exceptions`).
    pub exceptions: crate::decision::exceptions::ExceptionSettings,
    /// winadmit's own namespace, when the server is told
    /// ([`Policy::add_own_namespace`]).
    pub own_namespace: Option<String>,
    /// Whether `winadmit.io/skip.<RULE>` annotations drop a rule's findings
    /// at all: as `skips` says, except in [`Policy::api_server_mirror`].
    honours_skips: bool,
    /// [`Policy::api_server_mirror`] and [`Policy::without_os_name`],
    /// made on first use.
    derived: Derived,
}

/// Policies derived from a policy, made once: every `/mutate` that sets
/// `spec.os` asks for them. A clone starts empty, so a policy changed
/// after cloning never sees another's.
#[derive(Default)]
struct Derived {
    mirror: std::sync::OnceLock<Box<Policy>>,
    without_os_name: std::sync::OnceLock<Box<Policy>>,
}

impl Clone for Derived {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived")
    }
}

impl Policy {
    /// The embedded default policy.
    ///
    /// # Panics
    /// Never in a released binary: a test loads the embedded file.
    #[must_use]
    pub fn default_policy() -> Self {
        let mut policy = Self::empty();
        policy
            .layer(Path::new(DEFAULT_POLICY_NAME), DEFAULT_POLICY)
            .expect("the embedded default policy is valid");
        policy
    }

    /// Parses a policy from text layered over the default. An error at a
    /// key names its JSON Pointer; `crate::input::policy::load` gives
    /// its line and column instead.
    ///
    /// # Errors
    /// The text is not a valid policy.
    pub fn from_yaml(name: &str, text: &str) -> Result<Self, PolicyError> {
        let mut policy = Self::default_policy();
        policy.layer(Path::new(name), text)?;
        Ok(policy)
    }

    /// This policy with every rule but `id` turned off (e.g. to ask only
    /// what the API server itself would reject).
    #[must_use]
    pub fn with_only_rule(&self, id: &str) -> Self {
        let mut p = self.clone();
        for (i, r) in rules::ALL.iter().enumerate() {
            if r.info.id != id {
                p.levels[i] = Some(Level::Off);
            } else if p.levels[i] == Some(Level::Off) {
                p.levels[i] = None;
            }
        }
        p.exemptions = Exemptions::default();
        p.selectors.clear();
        p
    }

    /// This policy with only WIN-OS-FIELDS on, no exemptions and no skip
    /// annotations (the API server reads none): what the API server itself
    /// would reject on a `spec.os.name: windows` pod.
    /// Made on first use; the policy must not change after that (policies
    /// are read-only once loaded).
    #[must_use]
    pub fn api_server_mirror(&self) -> &Policy {
        self.derived.mirror.get_or_init(|| {
            let mut p = self.with_only_rule(crate::decision::rules::apiserver_os_fields::ID);
            p.honours_skips = false;
            Box::new(p)
        })
    }

    /// Do `winadmit.io/skip.<RULE>` annotations drop any rule's findings?
    #[must_use]
    pub fn honours_skips(&self) -> bool {
        self.honours_skips && self.skips.allowed
    }

    /// May an annotation skip rule `id` in `namespace` (`None`: unknown, as
    /// for a manifest without one)? Never for a boundary rule
    /// ([`rules::BOUNDARY`]) or one in `skips.unskippable`.
    #[must_use]
    pub fn skippable(&self, id: &str, namespace: Option<&str>) -> bool {
        self.skippable_rule(id)
            && (self.skips.namespaces.is_empty()
                || namespace.is_some_and(|ns| self.skips.namespaces.iter().any(|n| n == ns)))
    }

    /// May an annotation skip rule `id` in some namespace?
    #[must_use]
    pub fn skippable_rule(&self, id: &str) -> bool {
        self.honours_skips()
            && !rules::is_boundary(id)
            && !self.skips.unskippable.iter().any(|r| r == id)
            && (self.skips.rules.is_empty() || self.skips.rules.iter().any(|r| r == id))
    }

    /// This policy with `mutation.setOsName` off: the mutation made again
    /// when setting `spec.os` would get the object refused. Made on first
    /// use, like [`Policy::api_server_mirror`].
    #[must_use]
    pub fn without_os_name(&self) -> &Policy {
        self.derived.without_os_name.get_or_init(|| {
            let mut p = self.clone();
            p.mutation.set_os_name = false;
            Box::new(p)
        })
    }

    /// The severity of rule number `index` in [`rules::ALL`] on `cluster`,
    /// or `None` when off: the policy's setting if it has one, else the
    /// rule's level on that cluster (raised under the strict stance).
    #[must_use]
    pub fn level(&self, index: usize, cluster: &TargetCluster) -> Option<Severity> {
        match self.levels[index] {
            Some(level) => level.severity(),
            None => rules::ALL[index].info.default_level(cluster),
        }
    }

    /// The severity of a rule by id on `cluster`.
    #[must_use]
    pub fn level_of(&self, id: &str, cluster: &TargetCluster) -> Option<Severity> {
        rules::ALL
            .iter()
            .position(|r| r.info.id == id)
            .and_then(|i| self.level(i, cluster))
    }

    /// The facts the policy states about the target cluster.
    #[must_use]
    pub fn declared(&self) -> crate::decision::cluster::Declared {
        crate::decision::cluster::Declared {
            kubernetes_version: self.cluster.kubernetes_version,
            container_runtime: self.cluster.container_runtime,
            containerd_version: self.cluster.containerd_version,
            stance: self.stance,
        }
    }

    /// Did a policy file set this rule's severity?
    #[must_use]
    pub fn sets_level(&self, index: usize) -> bool {
        self.levels[index].is_some()
    }

    /// The admission mode for one rule in a namespace whose mode label (if
    /// any) says `namespace_mode`.
    #[must_use]
    pub fn mode_for(&self, rule: &str, namespace_mode: Option<Mode>) -> Mode {
        // A security boundary holds in every mode, like the API server's
        // own refusals (the policy may only turn such a rule off).
        if rules::is_boundary(rule) {
            return Mode::Enforce;
        }
        // Most policies set no rule's mode: skip the search by id.
        let rule_mode = if self.rule_modes.iter().all(Option::is_none) {
            None
        } else {
            rules::ALL
                .iter()
                .position(|r| r.info.id == rule)
                .and_then(|i| self.rule_modes[i])
        };
        rule_mode.or(namespace_mode).unwrap_or(self.mode)
    }

    /// Is an object with this namespace and these labels exempt? Returns the reason.
    #[must_use]
    pub fn exempt_object<'l>(
        &self,
        namespace: Option<&str>,
        labels: impl FnOnce() -> BTreeMap<String, String> + 'l,
    ) -> Option<String> {
        if let Some(ns) = namespace
            && self.exemptions.namespaces.iter().any(|n| n == ns)
        {
            return Some(format!("namespace {ns} is exempt by policy"));
        }
        if self.selectors.is_empty() {
            return None;
        }
        let labels = labels();
        self.selectors
            .iter()
            .position(|s| s.matches(&labels))
            .map(|i| format!("labels match exemptions.labelSelectors[{i}]"))
    }

    /// Is this namespace outside the webhook's reach (excluded by name, or
    /// labelled with an opt-out label)? `label` looks a label of the
    /// namespace up. Returns the reason.
    #[must_use]
    pub fn outside_reach(
        &self,
        namespace: &str,
        label: impl Fn(&str) -> Option<String>,
    ) -> Option<String> {
        if self
            .reach
            .excluded_namespaces
            .iter()
            .any(|n| n == namespace)
        {
            return Some(format!(
                "the webhook is not called for namespace {namespace} (reach.excludedNamespaces)"
            ));
        }
        self.reach
            .opt_out_namespace_labels
            .iter()
            .find(|(k, v)| label(k).as_deref() == Some(v.as_str()))
            .map(|(k, v)| {
                format!(
                    "namespace {namespace} is labelled {k}={v}, which opts it out of the webhook"
                )
            })
    }

    /// Puts winadmit's own namespace (`serve --own-namespace`) outside the
    /// webhook's reach, as the manifests' namespaceSelector does: the one
    /// it was installed in, never a name fixed in advance.
    ///
    /// # Errors
    /// `ns` is not a valid namespace name.
    pub fn add_own_namespace(&mut self, ns: &str) -> Result<(), PolicyError> {
        if let Some(why) = check::namespace_problem(ns) {
            return Err(PolicyError::Invalid {
                path: PathBuf::from("--own-namespace"),
                message: why,
            });
        }
        if !self.reach.excluded_namespaces.iter().any(|n| n == ns) {
            self.reach.excluded_namespaces.push(ns.to_owned());
        }
        self.own_namespace = Some(ns.to_owned());
        Ok(())
    }

    /// Is this requesting user exempt? Returns the reason.
    #[must_use]
    pub fn exempt_user(&self, user: &str, groups: &[String]) -> Option<String> {
        if self.exemptions.users.iter().any(|u| u == user) {
            return Some(format!("user {user} is exempt by policy"));
        }
        groups
            .iter()
            .find(|g| self.exemptions.groups.contains(g))
            .map(|g| format!("group {g} is exempt by policy"))
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enforce" => Ok(Self::Enforce),
            "warn" => Ok(Self::Warn),
            "audit" => Ok(Self::Audit),
            other => Err(format!(
                "unknown mode {other:?}: expected enforce, warn or audit"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_loads_and_enables_every_rule() {
        let p = Policy::default_policy();
        for (i, r) in rules::ALL.iter().enumerate() {
            let advice = rules::OFF_BY_DEFAULT.contains(&r.info.id);
            assert_eq!(
                p.level(i, &TargetCluster::default()).is_none()
                    && r.info.default_level(&TargetCluster::default()).is_some(),
                advice,
                "{} is {} in the default policy",
                r.info.id,
                if advice { "on" } else { "off" }
            );
        }
    }

    #[test]
    fn params_layer_key_by_key() {
        let p = Policy::from_yaml(
            "p",
            "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\n",
        )
        .unwrap();
        let taint = p.params.windows_taint.clone().unwrap();
        assert_eq!(
            taint.toleration(),
            serde_json::json!({"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"})
        );
        // Keys left out keep the default's values.
        assert!(
            p.params
                .is_windows_image("mcr.microsoft.com/windows/servercore:ltsc2022")
        );
        assert!(p.params.is_linux_image("nginx:1.27"));
        let cleared = Policy::default_policy();
        assert!(cleared.params.windows_taint.is_none());
        let e = Policy::from_yaml("p", "params:\n  windowsTaint: {key: os}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("effect"), "{e}");
        let e = Policy::from_yaml("p", "params:\n  linuxImagez: []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("linuxImagez"), "{e}");
    }

    #[test]
    fn linux_images_are_recognised_conservatively() {
        let p = Policy::default_policy().params;
        for image in [
            "nginx",
            "nginx:1.27",
            "docker.io/library/nginx:1.27@sha256:ab",
            "busybox:1.36",
            "envoyproxy/envoy:v1.30.1",
            "istio/proxyv2:1.22.0",
            "fluent/fluent-bit:3.0",
            "redis:7",
            "python:3.12-alpine",
            "mcr.microsoft.com/powershell:lts-debian-12",
            "mcr.microsoft.com/mssql/server:2017-latest-ubuntu",
        ] {
            assert!(p.is_linux_image(image), "{image}");
        }
        for image in [
            "registry.k8s.io/pause:3.9",
            "registry.k8s.io/e2e-test-images/agnhost:2.45",
            "registry.k8s.io/e2e-test-images/busybox:1.29-2",
            "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.10.0",
            "redis:3.0-nanoserver",
            "fluent/fluent-bit:3.0-windows-2022",
            "python:3.12",
            "mcr.microsoft.com/windows/servercore:ltsc2022",
            "example.com/nginx:1.27",
        ] {
            assert!(!p.is_linux_image(image), "{image}");
        }
    }

    #[test]
    fn unknown_keys_and_rules_are_errors_naming_them() {
        let e = Policy::from_yaml("p.yaml", "rulez: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml") && e.contains("rulez"), "{e}");
        let e = Policy::from_yaml("p.yaml", "rules:\n  WIN-NOPE: off\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml") && e.contains("WIN-NOPE"), "{e}");
        let e = Policy::from_yaml("p.yaml", "rules:\n  WIN-SUBPATH: loud\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("loud") && e.contains("expected error, warning, info, off"),
            "{e}"
        );
    }

    #[test]
    fn mutation_settings_layer_key_by_key_and_stay_strict() {
        let p = Policy::from_yaml("p.yaml", "mutation:\n  setOsName: true\n").unwrap();
        assert!(p.mutation.set_os_name);
        assert!(
            p.mutation.inject_node_selector,
            "keys not in the file keep their values"
        );
        let e = Policy::from_yaml("p.yaml", "mutation:\n  setOSName: true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.yaml") && e.contains("setOSName"), "{e}");
    }

    #[test]
    fn layers_rule_settings_over_the_target_levels() {
        let latest = TargetCluster::default();
        let p = Policy::from_yaml(
            "p",
            "rules:\n  WIN-SUBPATH: off\n  WIN-HOSTNETWORK: {severity: warning, mode: audit}\n",
        )
        .unwrap();
        assert_eq!(p.level_of("WIN-SUBPATH", &latest), None);
        assert_eq!(
            p.level_of("WIN-HOSTNETWORK", &latest),
            Some(Severity::Warning)
        );
        assert_eq!(
            p.mode_for("WIN-HOSTNETWORK", Some(Mode::Enforce)),
            Mode::Audit
        );
        assert_eq!(p.mode_for("WIN-SUBPATH", Some(Mode::Warn)), Mode::Warn);
        let d = Policy::default_policy();
        let docker = TargetCluster::at(KubeVersion::new(1, 19));
        assert_eq!(d.level_of("WIN-SUBPATH", &docker), Some(Severity::Error));
        assert_eq!(d.level_of("WIN-SUBPATH", &latest), Some(Severity::Warning));
        assert_eq!(d.level_of("WIN-SECRET-VOLUME", &latest), None);
    }

    #[test]
    fn the_retired_profile_key_is_accepted_with_a_notice() {
        let c = Policy::from_yaml("p.yaml", "profile: containerd\n").unwrap();
        assert_eq!(c.notices.len(), 1);
        assert!(
            c.notices[0].contains("p.yaml")
                && c.notices[0].contains("containerRuntime: containerd"),
            "{:?}",
            c.notices
        );
        // It no longer overwrites earlier rule settings.
        assert_eq!(
            c.level_of("WIN-SECRET-VOLUME", &TargetCluster::default()),
            None
        );
    }

    #[test]
    fn cluster_block_and_stance_are_read_strictly() {
        let p = Policy::from_yaml(
            "p",
            "stance: strict\ncluster: {kubernetesVersion: '1.19', containerRuntime: docker}\n",
        )
        .unwrap();
        assert_eq!(p.stance, Some(Stance::Strict));
        assert_eq!(p.cluster.kubernetes_version, Some(KubeVersion::new(1, 19)));
        assert_eq!(p.cluster.container_runtime, Some(Runtime::Docker));
        for bad in [
            "cluster: {containerRuntime: cri-o}\n",
            "cluster: {kubernetesVersion: '2.0'}\n",
            "cluster: {kubeVersion: '1.30'}\n",
            "stance: lenient\n",
        ] {
            assert!(Policy::from_yaml("p.yaml", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exemptions_by_namespace_label_and_user() {
        let p = Policy::from_yaml(
            "p",
            "exemptions:\n  namespaces: [legacy]\n  users: [ci-bot]\n  groups: [system:masters]\n  labelSelectors:\n  - matchLabels: {team: infra}\n",
        )
        .unwrap();
        assert!(p.exempt_object(Some("legacy"), BTreeMap::new).is_some());
        let infra = || BTreeMap::from([("team".to_owned(), "infra".to_owned())]);
        assert!(p.exempt_object(Some("prod"), infra).is_some());
        assert!(p.exempt_object(Some("prod"), BTreeMap::new).is_none());
        assert!(p.exempt_user("ci-bot", &[]).is_some());
        assert!(p.exempt_user("alice", &["system:masters".into()]).is_some());
        assert!(p.exempt_user("alice", &[]).is_none());
    }

    #[test]
    fn windows_image_globs() {
        let p = RuleParams {
            windows_images: vec!["mcr.microsoft.com/windows/*".into(), "*nanoserver*".into()],
            ..RuleParams::default()
        };
        assert!(p.is_windows_image("mcr.microsoft.com/windows/servercore:ltsc2022"));
        assert!(p.is_windows_image("example.com/base/NanoServer:1809"));
        assert!(!p.is_windows_image("nginx:1.25"));
        assert!(crate::decision::glob::glob_match("a*b*c", "axxbyyc"));
    }

    /// Certain by the repository (the default policy's list) or by a tag
    /// naming a Windows base or release; a name that only looks Windows
    /// is not.
    #[test]
    fn certain_windows_images() {
        let p = Policy::default_policy().params;
        for certain in [
            "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
            "mcr.microsoft.com/windows/nanoserver:ltsc2022",
            "mcr.microsoft.com/windows/servercore",
            "mcr.microsoft.com/dotnet/framework/aspnet:4.8",
            "python:3.12-windowsservercore-ltsc2022",
            "mcr.microsoft.com/powershell:lts-nanoserver-ltsc2022",
            "contoso/app:1.0-ltsc2022",
            "microsoft/iis",
        ] {
            assert!(p.is_certain_windows_image(certain), "{certain}");
        }
        for looks in [
            "contoso/servercore-tools:1.0",
            "example.com/nanoserver-like/app",
            "nginx:1.27",
            "mcr.microsoft.com/oss/kubernetes/windows-gmsa-webhook:v0.12.1",
            "contoso/app:2004",
        ] {
            assert!(!p.is_certain_windows_image(looks), "{looks}");
        }
        assert!(p.is_windows_image("contoso/servercore-tools:1.0"));
    }
}
