//! The CEL vocabulary the rules write their exports in: where a rule
//! looks ([`ProbeScope`], [`Probe`], [`Field`]), what it exports
//! ([`Export`]) at a target ([`ExportContext`]), CEL literals, and the
//! conditions several rules share. Each rule's export is in its own file
//! (the `export` field of [`super::Rule`]);
//! [`crate::decision::admission_policy`] turns the exports into policies.

use super::params::RuleParams;
use crate::decision::cluster::TargetCluster;
use crate::decision::targeting::RuntimeClasses;
use crate::decision::version::KubeVersion;

/// The container lists of a pod spec, in the engine's order.
pub const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Where a probe looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeScope {
    /// The pod spec (`variables.spec`).
    Pod,
    /// Every container of the three lists (`c`).
    Container,
    /// Every volume (`v`).
    Volume,
    /// Every volume mount (`m`) of every container (`c`).
    Mount,
}

/// The field a probe reports, below its scope's element.
#[derive(Debug, Clone)]
pub enum Field {
    /// Fixed keys, e.g. `["securityContext", "privileged"]`.
    Keys(&'static [&'static str]),
    /// A CEL list of strings, each a path suffix (starting with `.` or `[`)
    /// below the element; used where the key varies (map keys).
    Suffixes(String),
    /// A CEL list of complete field paths (the expression builds them).
    Absolute(String),
}

/// One place a rule looks at.
#[derive(Debug, Clone)]
pub struct Probe {
    pub scope: ProbeScope,
    /// For [`ProbeScope::Mount`]: a condition on the container `c` first.
    pub container_hit: Option<String>,
    /// CEL bool: this element is a finding.
    pub hit: String,
    pub field: Field,
    /// The mutation removes the field (what `/mutate` removes by default).
    pub removable: bool,
}

impl Probe {
    /// A probe of `scope` that reports the fixed `keys` where `hit` holds.
    #[must_use]
    pub fn new(scope: ProbeScope, hit: impl Into<String>, keys: &'static [&'static str]) -> Self {
        Self {
            scope,
            container_hit: None,
            hit: hit.into(),
            field: Field::Keys(keys),
            removable: false,
        }
    }

    /// The same probe, removable by the mutation when `yes`.
    #[must_use]
    pub fn removable(mut self, yes: bool) -> Self {
        self.removable = yes;
        self
    }
}

/// How a rule fares in the export.
#[derive(Debug, Clone)]
pub enum Export {
    /// Exported: the probes, a message and the fix.
    Cel {
        probes: Vec<Probe>,
        message: &'static str,
        /// What the export leaves out of an otherwise exported rule.
        partial: Option<&'static str>,
        /// Checked only on pods with a Windows signal (`variables.windows`),
        /// whatever the rule's scope: the policies match every pod that may
        /// run on Windows.
        windows_signal: bool,
        /// When the mutating policy removes the removable fields.
        removal: Removal,
        /// The API server's own validation refuses every object the rule
        /// finds something in, before any validating admission policy sees
        /// it: the validating policies leave the rule out (it would cost
        /// every request and never fire), the mutating policy keeps its
        /// removals.
        refused_by_api_server: bool,
    },
    /// Not exported, and why.
    Gap(&'static str),
}

impl Export {
    /// Exported completely: `probes` find what the rule reports, with `message`.
    #[must_use]
    pub fn cel(probes: Vec<Probe>, message: &'static str) -> Self {
        Self::Cel {
            probes,
            message,
            partial: None,
            windows_signal: false,
            removal: Removal::NoOpFields,
            refused_by_api_server: false,
        }
    }

    /// The same export, leaving out what `reason` says.
    #[must_use]
    pub fn partly(mut self, reason: &'static str) -> Self {
        if let Self::Cel { partial, .. } = &mut self {
            *partial = Some(reason);
        }
        self
    }

    /// The same export, its removals made as `when` says.
    #[must_use]
    pub fn removed(mut self, when: Removal) -> Self {
        if let Self::Cel { removal, .. } = &mut self {
            *removal = when;
        }
        self
    }

    /// The same export for the mutating policy only: the API server
    /// refuses what the rule finds itself, before the validating policies
    /// run.
    #[must_use]
    pub fn refused_by_api_server(mut self) -> Self {
        if let Self::Cel {
            refused_by_api_server,
            ..
        } = &mut self
        {
            *refused_by_api_server = true;
        }
        self
    }

    /// The same export, checked only on pods with a Windows signal.
    #[must_use]
    pub fn with_windows_signal(mut self) -> Self {
        if let Self::Cel { windows_signal, .. } = &mut self {
            *windows_signal = true;
        }
        self
    }
}

/// When the mutating policy makes a rule's removals (its probes that are
/// [`Probe::removable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// With `mutation.removeNoOpFields`, in the first mutation.
    NoOpFields,
    /// Whenever a probe is removable, in the first mutation: the rule's
    /// own policy switch decides that (`mutation.emptyDirOffMemory`).
    OwnSwitch,
    /// With `mutation.removeNoOpFields`, in a second mutation computed on
    /// the object the first one leaves: the fields other rules remove too.
    AfterOthers,
}

/// What a rule's export depends on: the target cluster and what the
/// policy sets for the rules.
#[derive(Clone, Copy)]
pub struct ExportContext<'a> {
    pub cluster: &'a TargetCluster,
    /// The policy's parameters for the rules (`params`).
    pub params: &'a RuleParams,
    /// The RuntimeClasses the policy knows (`runtimeClasses`).
    pub runtime_classes: &'a RuntimeClasses,
    /// The policy's `mutation.emptyDirOffMemory`.
    pub empty_dir_off_memory: bool,
}

impl ExportContext<'_> {
    /// The target's Kubernetes version.
    #[must_use]
    pub fn version(&self) -> KubeVersion {
        self.cluster.kubernetes_version
    }
}

/// A CEL string literal: single-quoted, with `\\`, `'` and every control
/// character escaped.
#[must_use]
pub fn cel_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Every other control character as a \u escape (CEL's grammar
            // refuses a raw carriage return or newline in a quoted string).
            c if c.is_control() => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A CEL list of string literals.
#[must_use]
pub fn cel_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| cel_str(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

/// `x` present on the pod's security context.
#[must_use]
pub fn pod_sc(key: &str) -> String {
    format!("has(variables.spec.securityContext) && has(variables.spec.securityContext.{key})")
}

/// `x` present on the container's security context.
#[must_use]
pub fn c_sc(key: &str) -> String {
    format!("has(c.securityContext) && has(c.securityContext.{key})")
}

/// A pod-level security-context field Windows ignores.
#[must_use]
pub fn pod_field(key: &'static str, keys: &'static [&'static str]) -> Probe {
    Probe::new(ProbeScope::Pod, pod_sc(key), keys)
}

/// A container security-context field Windows ignores.
#[must_use]
pub fn container_field(key: &'static str, keys: &'static [&'static str]) -> Probe {
    Probe::new(ProbeScope::Container, c_sc(key), keys)
}

/// A container whose image is in the list variable `list`.
#[must_use]
pub fn image_in(list: &str) -> String {
    format!("has(c.image) && c.image in variables.{list}")
}

/// The container is HostProcess (its own value, else the pod's).
pub const C_HOST_PROCESS: &str = "(has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess) ? c.securityContext.windowsOptions.hostProcess : variables.podHostProcess)";

/// `rules::host_path_os::is_windows_path` as a regular expression: a drive
/// (`C:`, `C:\\...`, `c:/...`), a UNC path or a device path.
pub const WINDOWS_PATH: &str = r"(?s)^([A-Za-z]:([\\/].*)?|\\\\.*|//\./.*|//\?/.*)$";

/// Escapes the RE2 metacharacters of `s`.
#[must_use]
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if "\\.+*?()|[]{}^$".contains(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// `crate::decision::glob::glob_match` patterns (`*`: any run of characters) as one
/// anchored regular expression; `None` for no pattern.
#[must_use]
pub fn globs_regex(patterns: &[String]) -> Option<String> {
    if patterns.is_empty() {
        return None;
    }
    let alternatives: Vec<String> = patterns
        .iter()
        .map(|p| {
            p.split('*')
                .map(regex_escape)
                .collect::<Vec<_>>()
                .join(".*")
        })
        .collect();
    Some(format!("(?s)^(?:{})$", alternatives.join("|")))
}

/// Why the rules that judge images by their registries' platforms are not
/// exported.
pub const NEEDS_IMAGE_PLATFORMS: &str = "needs the images' platforms from their registries, which CEL cannot read: the webhook, `lint --image-facts` and `lint --registry` judge them";

/// Why the rules that read the cluster's GMSACredentialSpecs are not
/// exported.
pub const NEEDS_GMSA_OBJECTS: &str = "needs the cluster's GMSACredentialSpec objects, which CEL in an admission policy cannot read: live facts";
