//! What a change of the cluster facts can affect: the audit remembers what
//! it judged with (the Windows nodes, the RuntimeClasses, the
//! GMSACredentialSpecs, each namespace's labels the policy reads, the
//! policy files) and, for each namespace, which of them its workloads
//! depend on; a change marks only the namespaces that depend on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use crate::decision::cluster::{ClusterLookup as _, LinuxNode, WindowsNode};
use crate::entry::server::watch_cache::WatchCache;

use super::store::Store;

/// What a namespace's verdicts depend on, beyond its own objects.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uses {
    /// A workload targets Windows: the Windows nodes (builds, runtime,
    /// versions) decide some of its rules.
    pub windows: bool,
    /// A workload chooses its nodes by name, selector or affinity: the
    /// nodes decide whether it is a Windows pod.
    pub placement: bool,
    /// A workload names a `runtimeClassName`.
    pub runtime_class: bool,
    /// A workload names a `gmsaCredentialSpecName`.
    pub gmsa: bool,
}

impl Uses {
    /// What `objects`, judged with the verdict `windows`, depend on.
    #[must_use]
    pub fn of(objects: &[Value], windows: bool) -> Self {
        Self {
            windows,
            placement: objects.iter().any(|o| {
                ["nodeName", "nodeSelector", "nodeSelectorTerms"]
                    .iter()
                    .any(|k| has_key(o, k))
            }),
            runtime_class: objects.iter().any(|o| has_key(o, "runtimeClassName")),
            gmsa: objects.iter().any(|o| has_key(o, "gmsaCredentialSpecName")),
        }
    }
}

fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, v)| k == key || has_key(v, key)),
        Value::Array(a) => a.iter().any(|v| has_key(v, key)),
        _ => false,
    }
}

/// The facts the last pass judged with.
#[derive(Default)]
pub struct Seen {
    nodes: Option<(Vec<WindowsNode>, Vec<LinuxNode>)>,
    runtime_classes: Option<Arc<crate::decision::targeting::RuntimeClasses>>,
    gmsa: Option<Arc<Option<BTreeMap<String, crate::decision::gmsa::CredSpec>>>>,
    labels: BTreeMap<String, Vec<Option<String>>>,
}

impl Seen {
    /// Compares the cache with what was judged and marks in `store` the
    /// namespaces a change affects (per `uses`). Returns what changed, for
    /// the log.
    pub fn check(
        &mut self,
        cache: &WatchCache,
        label_keys: &[String],
        uses: &BTreeMap<String, Uses>,
        store: &Store,
    ) -> Vec<&'static str> {
        let mut changed = Vec::new();
        let mark = |pick: fn(&Uses) -> bool| {
            store.mark(
                uses.iter()
                    .filter(|(_, u)| pick(u))
                    .map(|(ns, _)| ns.as_str()),
            );
        };
        let snapshot = cache.nodes().unwrap_or_default();
        let mut windows = snapshot.nodes.clone();
        windows.sort_by(|a, b| a.name.cmp(&b.name));
        let mut linux = snapshot.linux.clone();
        linux.sort_by(|a, b| a.name.cmp(&b.name));
        match &self.nodes {
            Some((w, _)) if *w != windows => {
                mark(|u| u.windows || u.placement);
                changed.push("Windows nodes");
            }
            Some((_, l)) if *l != linux => {
                mark(|u| u.placement);
                changed.push("nodes");
            }
            _ => {}
        }
        self.nodes = Some((windows, linux));
        let rc = cache.runtime_class_snapshot();
        if !self
            .runtime_classes
            .as_ref()
            .is_some_and(|old| Arc::ptr_eq(old, &rc))
        {
            if self.runtime_classes.is_some() {
                mark(|u| u.runtime_class);
                changed.push("RuntimeClasses");
            }
            self.runtime_classes = Some(rc);
        }
        let gmsa = cache.gmsa_snapshot();
        if !self
            .gmsa
            .as_ref()
            .is_some_and(|old| Arc::ptr_eq(old, &gmsa))
        {
            if self.gmsa.is_some() {
                mark(|u| u.gmsa);
                changed.push("GMSACredentialSpecs");
            }
            self.gmsa = Some(gmsa);
        }
        let mut relabelled = Vec::new();
        for ns in uses.keys() {
            let now: Vec<Option<String>> = label_keys.iter().map(|k| cache.label(ns, k)).collect();
            match self.labels.get(ns) {
                Some(old) if *old == now => {}
                Some(_) => {
                    relabelled.push(ns.as_str());
                    self.labels.insert(ns.clone(), now);
                }
                None => {
                    self.labels.insert(ns.clone(), now);
                }
            }
        }
        self.labels.retain(|ns, _| uses.contains_key(ns));
        if !relabelled.is_empty() {
            store.mark(relabelled);
            changed.push("namespace labels");
        }
        changed
    }
}

/// The policy files as last read: their paths, sizes and modification
/// times, to tell when to load them again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyFiles(Vec<(PathBuf, u64, Option<SystemTime>)>);

impl PolicyFiles {
    /// The files of `--policy` (directories walked) as they are now.
    #[must_use]
    pub fn stat(paths: &[PathBuf]) -> Self {
        let mut out = Vec::new();
        for p in paths {
            for entry in walkdir::WalkDir::new(p)
                .sort_by_file_name()
                .into_iter()
                .flatten()
            {
                if let Ok(meta) = entry.metadata()
                    && meta.is_file()
                {
                    out.push((entry.path().to_owned(), meta.len(), meta.modified().ok()));
                }
            }
        }
        Self(out)
    }
}
