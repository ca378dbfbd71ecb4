//! What winadmit knows of RuntimeClasses: the OS each pins (a RuntimeClass
//! can make a pod a Windows pod), its handler (Hyper-V isolation) and the
//! Windows build its scheduling selects; read from RuntimeClass objects, the
//! policy or the cluster.

use std::collections::HashMap;

use super::{BETA_OS_LABEL, OS_LABEL, Os};

/// What winadmit knows about one RuntimeClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeClassInfo {
    /// The OS its `scheduling.nodeSelector` pins, if any.
    pub os: Option<Os>,
    /// Its `handler` (e.g. `runhcs-wcow-hypervisor` for Hyper-V isolation).
    pub handler: Option<String>,
    /// Its `scheduling.nodeSelector` value of `node.kubernetes.io/windows-build`.
    pub windows_build: Option<String>,
}

impl RuntimeClassInfo {
    /// The OS the class pins: its `scheduling.nodeSelector`, else Windows
    /// for a `runhcs-wcow-*` handler, which runs only there (docs/verdicts.md,
    /// "Which pods are Windows pods").
    #[must_use]
    pub fn os(&self) -> Option<Os> {
        self.os.or_else(|| {
            self.handler
                .as_deref()
                .is_some_and(|h| h.starts_with("runhcs-wcow"))
                .then_some(Os::Windows)
        })
    }

    /// What `first` says of a class, with `then` filling in what it does
    /// not say.
    #[must_use]
    pub fn merged(first: Option<&Self>, then: Option<&Self>) -> Option<Self> {
        match (first, then) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (Some(a), Some(b)) => Some(Self {
                os: a.os.or(b.os),
                handler: a.handler.clone().or_else(|| b.handler.clone()),
                windows_build: a.windows_build.clone().or_else(|| b.windows_build.clone()),
            }),
        }
    }
}

/// RuntimeClass names known to pin an OS (and their handlers): from the
/// policy's list of Windows RuntimeClasses, from RuntimeClass objects in the
/// linted input, or from the server's cache of the cluster's RuntimeClasses.
#[derive(Debug, Clone, Default)]
pub struct RuntimeClasses {
    by_name: HashMap<String, RuntimeClassInfo>,
}

impl RuntimeClasses {
    /// Records that a class pins `os`, keeping what else is known of it.
    pub fn insert(&mut self, name: impl Into<String>, os: Os) {
        self.by_name.entry(name.into()).or_default().os = Some(os);
    }

    /// Records everything known of a class (replacing what was known).
    pub fn insert_info(&mut self, name: impl Into<String>, info: RuntimeClassInfo) {
        self.by_name.insert(name.into(), info);
    }

    #[must_use]
    pub fn os_of(&self, name: &str) -> Option<Os> {
        self.get(name).and_then(RuntimeClassInfo::os)
    }

    /// Takes in every class of `other` (replacing what was known of it).
    pub fn extend(&mut self, other: Self) {
        self.by_name.extend(other.by_name);
    }

    /// Everything known of a class.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&RuntimeClassInfo> {
        self.by_name.get(name)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The names of the classes known to pin `os`, sorted.
    #[must_use]
    pub fn names_for(&self, os: Os) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .by_name
            .keys()
            .map(String::as_str)
            .filter(|n| self.os_of(n) == Some(os))
            .collect();
        names.sort_unstable();
        names
    }

    /// Reads a RuntimeClass object (`node.k8s.io`, any version): its name and
    /// the OS its `scheduling.nodeSelector` pins, if any.
    #[must_use]
    pub fn from_object(value: &serde_json::Value) -> Option<(String, Os)> {
        let (name, info) = Self::info_from_object(value)?;
        Some((name, info.os?))
    }

    /// Reads a RuntimeClass object (`node.k8s.io`, any version): its name,
    /// handler, and what its `scheduling.nodeSelector` pins.
    #[must_use]
    pub fn info_from_object(value: &serde_json::Value) -> Option<(String, RuntimeClassInfo)> {
        let api = value.get("apiVersion")?.as_str()?;
        if value.get("kind")?.as_str()? != "RuntimeClass" || !api.starts_with("node.k8s.io/") {
            return None;
        }
        let name = value.pointer("/metadata/name")?.as_str()?;
        // node.k8s.io/v1alpha1 nests the handler under `spec`.
        let handler = value
            .get("handler")
            .or_else(|| value.pointer("/spec/runtimeHandler"))
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let selector = value
            .pointer("/scheduling/nodeSelector")
            .or_else(|| value.pointer("/spec/scheduling/nodeSelector"));
        let label = |k: &str| selector.and_then(|s| s.get(k)).and_then(|v| v.as_str());
        let os = [OS_LABEL, BETA_OS_LABEL]
            .iter()
            .find_map(|k| label(k).and_then(Os::parse));
        let windows_build =
            label(crate::decision::windows_builds::WINDOWS_BUILD_LABEL).map(str::to_owned);
        Some((
            name.to_owned(),
            RuntimeClassInfo {
                os,
                handler,
                windows_build,
            },
        ))
    }
}
