//! The cache's Prometheus metrics (`cluster_cache_*`): objects, first
//! list, last (re)list and failed calls, by resource.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::watchers::Watched;

/// The cache's metrics, registered with the server's registry.
#[derive(Debug, Clone, Default)]
pub struct ClusterMetrics {
    objects: Family<[(&'static str, &'static str); 1], Gauge>,
    synced: Family<[(&'static str, &'static str); 1], Gauge>,
    last_sync: Family<[(&'static str, &'static str); 1], Gauge>,
    errors: Family<[(&'static str, &'static str); 2], Counter>,
    os_conflicts: Gauge,
    exceptions_in_force: Gauge,
    exceptions_ending_soon: Gauge,
    exceptions_ignored: Gauge,
}

impl ClusterMetrics {
    /// Registers the cache's metrics (no samples until the cache runs).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "cluster_cache_objects",
            "Objects in the cluster cache, by resource",
            m.objects.clone(),
        );
        registry.register(
            "cluster_cache_synced",
            "1 once the cluster cache has completed a first list of the resource",
            m.synced.clone(),
        );
        registry.register(
            "cluster_cache_last_sync_timestamp_seconds",
            "Unix time of the last completed (re)list of the resource",
            m.last_sync.clone(),
        );
        registry.register(
            "cluster_cache_errors",
            "Failed list and watch calls of the cluster cache, by resource and verb",
            m.errors.clone(),
        );
        registry.register(
            "cluster_cache_node_os_conflicts",
            "Nodes whose OS labels and reported operating system disagree (taken for no Windows node)",
            m.os_conflicts.clone(),
        );
        registry.register(
            "exceptions_in_force",
            "PolicyExceptions in force (in a namespace the policy lists, not ended, within the longest lifetime)",
            m.exceptions_in_force.clone(),
        );
        registry.register(
            "exceptions_ending_soon",
            "PolicyExceptions in force that end within 7 days",
            m.exceptions_ending_soon.clone(),
        );
        registry.register(
            "exceptions_ignored",
            "PolicyExceptions that do not count (namespace not listed, ended, too long, unreadable)",
            m.exceptions_ignored.clone(),
        );
        m
    }

    /// The exception gauges, for the set in force at `now` and `ignored`
    /// more that do not count.
    pub(super) fn exceptions(
        &self,
        set: &crate::decision::exceptions::ExceptionSet,
        now: crate::decision::exceptions::Timestamp,
        unreadable: usize,
    ) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let soon = now.plus_days(7);
        self.exceptions_in_force.set(n(set.in_force().len()));
        self.exceptions_ending_soon.set(n(set
            .in_force()
            .iter()
            .filter(|e| e.expires_at <= soon)
            .count()));
        self.exceptions_ignored
            .set(n(set.ignored.len() + unreadable));
    }

    pub(super) fn os_conflicts(&self, n: usize) {
        self.os_conflicts.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(super) fn objects(&self, w: Watched, n: usize) {
        self.objects
            .get_or_create(&[("resource", w.label())])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(super) fn synced(&self, w: Watched) {
        self.synced.get_or_create(&[("resource", w.label())]).set(1);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_sync
            .get_or_create(&[("resource", w.label())])
            .set(now);
    }

    pub(super) fn error(&self, w: Watched, verb: &'static str) {
        self.errors
            .get_or_create(&[("resource", w.label()), ("verb", verb)])
            .inc();
    }
}
