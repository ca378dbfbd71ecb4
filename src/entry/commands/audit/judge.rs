//! Judging a pass's namespaces on blocking threads: each namespace's kept
//! objects parsed for the time it is judged, judged by the report's
//! builder with the cluster cache's facts, and kept as the reports to write
//! and the counts to sum ([`Outcome`]).

use std::sync::Arc;

use serde_json::Value;

use super::facts::Uses;
use super::store::Kept;
use super::writer::Wanted;
use crate::decision::cluster::{ClusterLookup, TargetCluster};
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::entry::audit::{self, Judged, Options, ReportApi, Tally};
use crate::entry::server::gmsa::Resolver;
use crate::entry::server::watch_cache::WatchCache;
use crate::render::report::NamespaceLookup;

/// Threads judging at most (namespaces are judged independently).
pub(super) const JUDGING_THREADS: usize = 4;

/// Threads judging a pass: one per core, at most [`JUDGING_THREADS`].
pub(super) fn judging_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(JUDGING_THREADS)
}

/// What the judging reads, shared with the blocking threads it runs on.
#[derive(Clone)]
pub(super) struct Judge {
    pub(super) policy: Arc<Policy>,
    pub(super) cluster: TargetCluster,
    pub(super) cache: Arc<WatchCache>,
    pub(super) gmsa: Option<Arc<Resolver>>,
    pub(super) options: Options,
}

/// The cluster cache's labels and RuntimeClasses, and the gMSA facts as
/// the webhook's resolver finds them (asked from the judging thread).
struct AuditView {
    cache: Arc<WatchCache>,
    gmsa: Option<Arc<Resolver>>,
    runtime: tokio::runtime::Handle,
}

impl ClusterLookup for AuditView {
    fn label(&self, namespace: &str, key: &str) -> Option<String> {
        self.cache.label(namespace, key)
    }

    fn gmsa(
        &self,
        namespace: Option<&str>,
        account: &str,
        names: &[&str],
    ) -> Option<crate::decision::gmsa::Facts> {
        let resolver = self.gmsa.as_ref()?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let namespace = namespace.unwrap_or_default();
        Some(self.runtime.block_on(resolver.resolve(
            namespace,
            account,
            &names,
            !namespace.is_empty(),
        )))
    }
}

impl Judge {
    /// Judges namespaces `todo` (on the calling, blocking thread).
    pub(super) fn namespaces(
        &self,
        todo: Vec<(String, Vec<Kept>)>,
        runtime: &tokio::runtime::Handle,
    ) -> Vec<(String, Option<Outcome>)> {
        let view = NamespaceLookup(Arc::new(AuditView {
            cache: Arc::clone(&self.cache),
            gmsa: self.gmsa.clone(),
            runtime: runtime.clone(),
        }));
        let runtime_classes = self.cache.runtime_class_snapshot();
        let nodes = self.cache.nodes();
        let exceptions = self.cache.exceptions(crate::entry::exceptions::clock());
        let cx = Context {
            cluster: self.cluster.clone(),
            runtime_classes: Some(&runtime_classes),
            nodes: nodes.as_deref().filter(|n| !n.nodes.is_empty()),
            images: None,
            gmsa: None,
            exceptions: exceptions.as_deref(),
        };
        todo.into_iter()
            .map(|(ns, kept)| {
                let objects = parse(&ns, &kept);
                if objects.is_empty() {
                    return (ns, None);
                }
                let reports = audit::judge(&self.policy, &cx, Some(view.clone()), &objects);
                let judged = audit::results(&reports, self.options);
                let uses = Uses::of(&objects, judged.windows);
                let outcome = Outcome::of(&ns, judged, uses, self.options.api);
                (ns, Some(outcome))
            })
            .collect()
    }
}

/// A judged namespace as the audit keeps it: its reports as text, its
/// finding counts and tally, what its verdicts depend on. Made on the
/// judging thread, so the results as trees live only while a namespace
/// is judged, not for every namespace of a pass.
pub(super) struct Outcome {
    /// Its results are in `reports`: emptied.
    pub(super) judged: Judged,
    pub(super) tally: Tally,
    pub(super) uses: Uses,
    /// (name, report).
    pub(super) reports: Vec<(String, Wanted)>,
}

impl Outcome {
    pub(super) fn of(ns: &str, mut judged: Judged, uses: Uses, api: ReportApi) -> Self {
        let reports = audit::namespace_reports(ns, &judged, api)
            .iter()
            .map(|r| {
                let name = r
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (name, Wanted::new(r))
            })
            .collect();
        let tally = Tally::of(&judged);
        judged.results = Vec::new();
        Self {
            judged,
            tally,
            uses,
            reports,
        }
    }
}

/// A namespace's kept objects as JSON trees, for the time it is judged.
pub(super) fn parse(ns: &str, kept: &[Kept]) -> Vec<Value> {
    let mut bases = std::collections::HashMap::new();
    kept.iter()
        .filter_map(|k| match k.value(&mut bases) {
            Ok(v) => Some(v),
            Err(e) => {
                // The store wrote this text from a parsed object, so it
                // parses; should it not, one object is left out, not the
                // namespace.
                tracing::error!(
                    namespace = ns,
                    "audit: a kept object does not parse ({e}); left out of this pass"
                );
                None
            }
        })
        .collect()
}
