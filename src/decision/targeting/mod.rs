//! Does a workload target Windows nodes, and why?
//!
//! A pod spec pins itself to an OS through any of: `nodeSelector`
//! `kubernetes.io/os` (or the legacy `beta.kubernetes.io/os`), `spec.os.name`,
//! required node affinity whose every term demands `kubernetes.io/os In [os]`,
//! or a RuntimeClass whose scheduling selects that OS. The reasons are kept,
//! because users ask "why did you treat this as Windows?".

use std::fmt;

use serde::Serialize;

use crate::decision::view::{NodeSelectorTermView, SpecView};

mod runtime_class;

pub use runtime_class::{RuntimeClassInfo, RuntimeClasses};

pub const OS_LABEL: &str = "kubernetes.io/os";
pub const BETA_OS_LABEL: &str = "beta.kubernetes.io/os";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Windows,
    Linux,
}

impl Os {
    /// Reads an OS label or `spec.os.name` value. The API server only
    /// accepts lowercase; selectors are case-sensitive label matches, so a
    /// `Windows` value matches no node and is treated as no signal.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "windows" => Some(Self::Windows),
            "linux" => Some(Self::Linux),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Windows => "windows",
            Self::Linux => "linux",
        }
    }
}

/// Where an OS signal came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "camelCase")]
pub enum Signal {
    /// `nodeSelector` with this key (`kubernetes.io/os` or the beta label).
    NodeSelector { key: &'static str },
    /// `spec.os.name`.
    OsName,
    /// Required node affinity, every term.
    NodeAffinity,
    /// A RuntimeClass whose scheduling pins the OS (or whose handler is a
    /// Windows one, `runhcs-wcow-*`).
    RuntimeClass { name: String },
    /// `node.kubernetes.io/windows-build` in the nodeSelector or in every
    /// required node-affinity term: only Windows nodes carry it.
    WindowsBuild,
    /// AKS `kubernetes.azure.com/os-sku` with a Windows value, in the
    /// nodeSelector or in every required node-affinity term.
    OsSku { value: String },
    /// GKE `cloud.google.com/gke-os-distribution` with a Windows value
    /// (`windows_ltsc`, `windows_sac`), in the nodeSelector or in every
    /// required node-affinity term.
    GkeOsDistribution { value: String },
    /// The pod's node name, node selector or required node affinity admit
    /// only Windows nodes, of the nodes winadmit knows (the cluster's, or
    /// the Node objects of the input): these, by name.
    Placement { nodes: Vec<String> },
    /// `windowsOptions.hostProcess: true` on the pod or a container:
    /// HostProcess exists only on Windows.
    HostProcess,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeSelector { key } => write!(f, "nodeSelector {key}"),
            Self::OsName => f.write_str("spec.os.name"),
            Self::NodeAffinity => f.write_str("required node affinity on kubernetes.io/os"),
            Self::RuntimeClass { name } => write!(f, "runtimeClassName {name}"),
            Self::WindowsBuild => f.write_str("node selection on node.kubernetes.io/windows-build"),
            Self::OsSku { value } => write!(f, "nodeSelector kubernetes.azure.com/os-sku {value}"),
            Self::GkeOsDistribution { value } => {
                write!(f, "node selection on {GKE_OS_LABEL} {value}")
            }
            Self::Placement { nodes } => {
                let shown: Vec<&str> = nodes.iter().take(3).map(String::as_str).collect();
                let more = if nodes.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                };
                write!(
                    f,
                    "node name, selector or affinity that only Windows nodes match ({}{more})",
                    shown.join(", ")
                )
            }
            Self::HostProcess => f.write_str("windowsOptions.hostProcess"),
        }
    }
}

/// The OS a pod spec pins itself to, with every signal found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Target {
    pub windows: Vec<Signal>,
    pub linux: Vec<Signal>,
}

impl Target {
    /// Windows-targeted: some signal says Windows. (A contradiction is
    /// reported by its own rule; the Windows checks still run, because the
    /// pod may well land on Windows.)
    #[must_use]
    pub fn is_windows(&self) -> bool {
        !self.windows.is_empty()
    }

    #[must_use]
    pub fn is_linux(&self) -> bool {
        !self.linux.is_empty() && self.windows.is_empty()
    }

    #[must_use]
    pub fn is_conflicting(&self) -> bool {
        !self.windows.is_empty() && !self.linux.is_empty()
    }

    /// A human-readable reason, e.g. `nodeSelector kubernetes.io/os=windows`.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        let signals = if self.windows.is_empty() {
            &self.linux
        } else {
            &self.windows
        };
        let os = if self.windows.is_empty() {
            Os::Linux
        } else {
            Os::Windows
        };
        if signals.is_empty() {
            return None;
        }
        let list: Vec<String> = signals
            .iter()
            .map(|s| match s {
                // These name their value already, or only exist on Windows.
                Signal::WindowsBuild
                | Signal::OsSku { .. }
                | Signal::GkeOsDistribution { .. }
                | Signal::Placement { .. }
                | Signal::HostProcess => s.to_string(),
                _ => format!("{s}={}", os.as_str()),
            })
            .collect();
        Some(list.join(", "))
    }
}

/// Classifies a pod spec. `runtime_class_os` resolves a RuntimeClass name.
#[must_use]
pub fn classify(spec: &SpecView<'_>, runtime_class_os: impl Fn(&str) -> Option<Os>) -> Target {
    let mut t = Target::default();
    let mut add = |os: Os, s: Signal| match os {
        Os::Windows => t.windows.push(s),
        Os::Linux => t.linux.push(s),
    };
    if let Some(sel) = &spec.node_selector {
        for key in [OS_LABEL, BETA_OS_LABEL] {
            if let Some(os) = sel.get(key).and_then(Os::parse) {
                add(os, Signal::NodeSelector { key });
            }
        }
    }
    if let Some(os) = spec
        .os
        .as_ref()
        .and_then(|o| o.name.as_deref())
        .and_then(Os::parse)
    {
        add(os, Signal::OsName);
    }
    if let Some(os) = affinity_os(spec) {
        add(os, Signal::NodeAffinity);
    }
    let selects = |key: &str| {
        spec.node_selector
            .as_ref()
            .and_then(|s| s.get(key))
            .map(ToOwned::to_owned)
    };
    if selects(crate::decision::windows_builds::WINDOWS_BUILD_LABEL).is_some()
        || affinity_requires(spec, crate::decision::windows_builds::WINDOWS_BUILD_LABEL)
    {
        add(Os::Windows, Signal::WindowsBuild);
    }
    let windows_sku = |v: &str| WINDOWS_OS_SKUS.contains(&v);
    if let Some(value) = selects(OS_SKU_LABEL)
        .filter(|v| windows_sku(v))
        .or_else(|| affinity_value(spec, OS_SKU_LABEL, windows_sku))
    {
        add(Os::Windows, Signal::OsSku { value });
    }
    let windows_gke = |v: &str| v.starts_with("windows");
    if let Some(value) = selects(GKE_OS_LABEL)
        .filter(|v| windows_gke(v))
        .or_else(|| affinity_value(spec, GKE_OS_LABEL, windows_gke))
    {
        add(Os::Windows, Signal::GkeOsDistribution { value });
    }
    let hp = host_process(spec);
    if hp.pod == Some(true) || hp.any {
        add(Os::Windows, Signal::HostProcess);
    }
    if let Some(name) = spec.runtime_class_name.as_deref()
        && let Some(os) = runtime_class_os(name)
    {
        add(
            os,
            Signal::RuntimeClass {
                name: name.to_owned(),
            },
        );
    }
    t
}

/// The experimental Hyper-V isolation annotation (Kubernetes 1.10-1.20,
/// dockershim).
pub const ISOLATION_ANNOTATION: &str = "experimental.windows.kubernetes.io/isolation-type";

/// The operation that adds `kubernetes.io/os: windows` to a pod spec's
/// node selector, whether or not the selector exists.
#[must_use]
pub fn add_node_selector(
    spec_path: &crate::decision::path::FieldPath,
    spec: &SpecView<'_>,
) -> crate::decision::finding::PatchOperation {
    add_os_node_selector(spec_path, spec, Os::Windows)
}

/// The operation that adds `kubernetes.io/os: <os>` to a pod spec's node
/// selector, whether or not the selector exists.
#[must_use]
pub fn add_os_node_selector(
    spec_path: &crate::decision::path::FieldPath,
    spec: &SpecView<'_>,
    os: Os,
) -> crate::decision::finding::PatchOperation {
    if spec.node_selector.is_some() {
        crate::decision::finding::add_op(
            spec_path.key("nodeSelector").map_key(OS_LABEL),
            serde_json::json!(os.as_str()),
        )
    } else {
        crate::decision::finding::add_op(
            spec_path.key("nodeSelector"),
            serde_json::json!({ OS_LABEL: os.as_str() }),
        )
    }
}

/// The AKS node label naming the node image's OS SKU.
pub const OS_SKU_LABEL: &str = "kubernetes.azure.com/os-sku";

/// The `kubernetes.azure.com/os-sku` values of Windows node pools.
pub const WINDOWS_OS_SKUS: &[&str] =
    &["Windows2019", "Windows2022", "Windows2025", "WindowsAnnual"];

/// The GKE node label naming the node image's OS (`cos`, `ubuntu`,
/// `windows_ltsc`, `windows_sac`).
pub const GKE_OS_LABEL: &str = "cloud.google.com/gke-os-distribution";

/// Is this a HostProcess pod? Computed once per evaluation.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostProcess {
    /// `spec.securityContext.windowsOptions.hostProcess`.
    pub pod: Option<bool>,
    /// Some container sets `hostProcess: true` (or inherits it).
    pub any: bool,
    /// Every container is HostProcess (explicitly or through the pod).
    pub all: bool,
}

/// Is this container HostProcess: its own `windowsOptions.hostProcess`, else
/// the pod's (`pod`)?
#[must_use]
pub fn is_host_process_container(
    c: &crate::decision::view::ContainerView<'_>,
    pod: Option<bool>,
) -> bool {
    c.security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        .or(pod)
        .unwrap_or(false)
}

/// HostProcess settings: containers inherit the pod's value unless they set their own.
#[must_use]
pub fn host_process(spec: &SpecView<'_>) -> HostProcess {
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process);
    let mut any = false;
    let mut all = true;
    let mut count = 0;
    let lists = [
        &spec.init_containers,
        &spec.containers,
        &spec.ephemeral_containers,
    ];
    for c in lists.into_iter().flatten().flatten() {
        count += 1;
        let effective = is_host_process_container(c, pod);
        any |= effective;
        all &= effective;
    }
    HostProcess {
        pod,
        any,
        all: all && count > 0,
    }
}

/// Does every required node-affinity term ask for `key` (`In` or `Exists`)?
fn affinity_requires(spec: &SpecView<'_>, key: &str) -> bool {
    spec.required_node_terms().is_some_and(|terms| {
        terms.iter().all(|term| {
            term.match_expressions.iter().flatten().any(|req| {
                req.key.as_deref() == Some(key)
                    && matches!(req.operator.as_deref(), Some("In" | "Exists"))
            })
        })
    })
}

/// The value every required node-affinity term demands of label `key`
/// (an `In` requirement whose values all pass `wanted`): the first one.
fn affinity_value(spec: &SpecView<'_>, key: &str, wanted: impl Fn(&str) -> bool) -> Option<String> {
    let terms = spec.required_node_terms()?;
    let mut first = None;
    for term in terms {
        let req = term.match_expressions.iter().flatten().find(|r| {
            r.key.as_deref() == Some(key)
                && r.operator.as_deref() == Some("In")
                && r.values
                    .as_ref()
                    .is_some_and(|v| !v.is_empty() && v.iter().all(|x| wanted(x)))
        })?;
        first.get_or_insert_with(|| req.values.iter().flatten().next().map(ToString::to_string));
    }
    first.flatten()
}

/// The OS that every required node-affinity term demands, if they agree.
fn affinity_os(spec: &SpecView<'_>) -> Option<Os> {
    let terms = spec.required_node_terms()?;
    let mut found = None;
    for term in terms {
        let os = term_os(term)?;
        if found.is_some_and(|f| f != os) {
            return None;
        }
        found = Some(os);
    }
    found
}

/// The OS one node-selector term demands: an `In` requirement on the OS
/// label whose values all name one OS, or a `NotIn` whose values all name
/// the other (every node has the label: the kubelet sets it).
fn term_os(term: &NodeSelectorTermView<'_>) -> Option<Os> {
    term.match_expressions.as_ref()?.iter().find_map(|req| {
        let key = req.key.as_deref()?;
        if key != OS_LABEL && key != BETA_OS_LABEL {
            return None;
        }
        let mut values = req.values.as_ref()?.iter().map(|v| Os::parse(v));
        let first = values.next()??;
        let one = values.all(|v| v == Some(first));
        match req.operator.as_deref()? {
            "In" if one => Some(first),
            "NotIn" if one => Some(match first {
                Os::Windows => Os::Linux,
                Os::Linux => Os::Windows,
            }),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<Os> {
        None
    }

    fn spec(json: &str) -> SpecView<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn node_selector_and_os_name() {
        let s = spec(r#"{"nodeSelector":{"kubernetes.io/os":"windows"},"os":{"name":"windows"}}"#);
        let t = classify(&s, none);
        assert!(t.is_windows() && !t.is_conflicting());
        assert_eq!(t.windows.len(), 2);
        assert_eq!(
            t.reason().unwrap(),
            "nodeSelector kubernetes.io/os=windows, spec.os.name=windows"
        );
    }

    #[test]
    fn affinity_needs_every_term() {
        let one = r#"{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["windows"]}]}]}}}}"#;
        assert!(classify(&spec(one), none).is_windows());
        let partial = r#"{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["windows"]}]},
            {"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}}}"#;
        assert!(!classify(&spec(partial), none).is_windows());
        let both = r#"{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["windows","linux"]}]}]}}}}"#;
        assert_eq!(classify(&spec(both), none), Target::default());
    }

    #[test]
    fn runtime_class_and_conflicts() {
        let mut rc = RuntimeClasses::default();
        rc.insert("win-2022", Os::Windows);
        let s =
            spec(r#"{"runtimeClassName":"win-2022","nodeSelector":{"kubernetes.io/os":"linux"}}"#);
        let t = classify(&s, |n| rc.os_of(n));
        assert!(t.is_windows() && t.is_conflicting() && !t.is_linux());
        let unknown = spec(r#"{"runtimeClassName":"other"}"#);
        assert_eq!(classify(&unknown, |n| rc.os_of(n)), Target::default());
    }

    #[test]
    fn reads_runtime_class_objects() {
        let v = serde_json::json!({"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass",
            "metadata":{"name":"windows-2019"},"handler":"runhcs-wcow-process",
            "scheduling":{"nodeSelector":{"kubernetes.io/os":"windows"}}});
        assert_eq!(
            RuntimeClasses::from_object(&v),
            Some(("windows-2019".into(), Os::Windows))
        );
        let hyperv = serde_json::json!({"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass",
            "metadata":{"name":"hyperv"},"handler":"runhcs-wcow-hypervisor",
            "scheduling":{"nodeSelector":{"kubernetes.io/os":"windows","node.kubernetes.io/windows-build":"10.0.20348"}}});
        let (name, info) = RuntimeClasses::info_from_object(&hyperv).unwrap();
        assert_eq!(name, "hyperv");
        assert_eq!(info.handler.as_deref(), Some("runhcs-wcow-hypervisor"));
        assert_eq!(info.windows_build.as_deref(), Some("10.0.20348"));
        // A class with a handler but no OS selector is remembered too.
        let bare = serde_json::json!({"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass",
            "metadata":{"name":"hv"},"handler":"runhcs-wcow-hypervisor"});
        assert_eq!(RuntimeClasses::from_object(&bare), None);
        let mut rc = RuntimeClasses::default();
        let (name, info) = RuntimeClasses::info_from_object(&bare).unwrap();
        rc.insert_info(name, info);
        assert_eq!(
            rc.get("hv").and_then(|i| i.handler.as_deref()),
            Some("runhcs-wcow-hypervisor")
        );
        // A runhcs-wcow handler runs only on Windows (docs/verdicts.md, "Which pods are Windows pods").
        assert_eq!(rc.os_of("hv"), Some(Os::Windows));
    }
}
