//! `winadmit audit`'s Prometheus metrics (`audit_*`), registered with the
//! server's registry so the webhook and the audit export one set of names.
//!
//! Cardinality is bounded: findings are counted by (namespace, rule,
//! level), with at most [`MAX_NAMESPACES`] namespaces named (those with the
//! most findings); the others are summed under `namespace="(other)"`.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Namespaces named in `audit_findings`; the rest are `(other)`.
pub const MAX_NAMESPACES: usize = 100;
/// The `namespace` label of the namespaces past [`MAX_NAMESPACES`].
pub const OTHER: &str = "(other)";

/// The level of a finding a PolicyException covers (a `skip` result in
/// the reports): counted by `audit_findings_excepted`, not by
/// `audit_findings`.
pub const EXCEPTED: &str = "excepted";

type Owned3 = [(&'static str, String); 3];

/// The audit's metrics (shared handles).
#[derive(Debug, Clone, Default)]
pub struct AuditMetrics {
    findings: Family<Owned3, Gauge>,
    excepted: Family<[(&'static str, String); 2], Gauge>,
    workloads: Gauge,
    namespaces: Gauge,
    pending: Gauge,
    lag: prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    last_pass: Gauge,
    passes: Counter,
    writes: Family<[(&'static str, &'static str); 1], Counter>,
    reports: Gauge,
    leader: Gauge,
}

/// Findings of one (namespace, rule, level).
pub type FindingCounts = BTreeMap<(String, String, &'static str), u64>;

impl AuditMetrics {
    /// Registers the audit's metrics (no samples until an audit runs).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "audit_findings",
            "Current findings of the audited workloads, as in the reports, by namespace, rule and level (error, warning, info)",
            m.findings.clone(),
        );
        registry.register(
            "audit_findings_excepted",
            "Current findings a PolicyException covers (skip results in the reports), by namespace and rule",
            m.excepted.clone(),
        );
        registry.register(
            "audit_workloads",
            "Workloads the audit holds (folded objects included)",
            m.workloads.clone(),
        );
        registry.register(
            "audit_namespaces",
            "Namespaces with workloads the audit holds",
            m.namespaces.clone(),
        );
        registry.register(
            "audit_pending_namespaces",
            "Namespaces changed since they were last judged",
            m.pending.clone(),
        );
        registry.register(
            "audit_lag_seconds",
            "Age of the oldest change not yet judged (0 when none is pending)",
            m.lag.clone(),
        );
        registry.register(
            "audit_last_pass_timestamp_seconds",
            "Unix time of the last completed audit pass",
            m.last_pass.clone(),
        );
        registry.register("audit_passes", "Audit passes completed", m.passes.clone());
        registry.register(
            "audit_report_writes",
            "Report writes (server-side apply or delete), by result: applied, repaired (a report edited by someone else, written again), deleted, failed",
            m.writes.clone(),
        );
        registry.register(
            "audit_reports",
            "Report objects the audit keeps in the cluster",
            m.reports.clone(),
        );
        registry.register(
            "audit_leader",
            "1 while the audit Lease names this replica as its holder and has not expired: it writes the reports",
            m.leader.clone(),
        );
        m
    }

    /// Replaces the findings gauges with `counts`: those of level
    /// [`EXCEPTED`] in
    /// `audit_findings_excepted`, the others in `audit_findings`.
    pub fn set_findings(&self, counts: &FindingCounts) {
        self.findings.clear();
        self.excepted.clear();
        for ((ns, rule, level), n) in bounded(counts) {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            if level == EXCEPTED {
                self.excepted
                    .get_or_create(&[("namespace", ns), ("rule", rule)])
                    .set(n);
                continue;
            }
            self.findings
                .get_or_create(&[
                    ("namespace", ns),
                    ("rule", rule),
                    ("level", level.to_owned()),
                ])
                .set(n);
        }
    }

    /// After a pass: workloads and namespaces held, changes still pending
    /// and the age of the oldest.
    pub fn progress(&self, workloads: usize, namespaces: usize, pending: usize, lag: f64) {
        self.workloads.set(to_i64(workloads));
        self.namespaces.set(to_i64(namespaces));
        self.pending.set(to_i64(pending));
        self.lag.set(lag);
    }

    /// A pass completed.
    pub fn passed(&self) {
        self.passes.inc();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_pass.set(now);
    }

    /// One report write: `applied`, `deleted` or `failed`.
    pub fn write(&self, result: &'static str) {
        self.writes.get_or_create(&[("result", result)]).inc();
    }

    pub fn reports(&self, n: usize) {
        self.reports.set(to_i64(n));
    }

    pub fn leader(&self, on: bool) {
        self.leader.set(i64::from(on));
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `counts` with at most [`MAX_NAMESPACES`] namespaces named: those with
/// the most findings; the others summed under [`OTHER`].
#[must_use]
pub fn bounded(counts: &FindingCounts) -> FindingCounts {
    let mut per_ns: BTreeMap<&str, u64> = BTreeMap::new();
    for ((ns, _, _), n) in counts {
        *per_ns.entry(ns).or_default() += n;
    }
    if per_ns.len() <= MAX_NAMESPACES {
        return counts.clone();
    }
    let mut order: Vec<(&str, u64)> = per_ns.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let named: std::collections::BTreeSet<&str> = order
        .iter()
        .take(MAX_NAMESPACES)
        .map(|(ns, _)| *ns)
        .collect();
    let mut out = FindingCounts::new();
    for ((ns, rule, level), n) in counts {
        let ns = if named.contains(ns.as_str()) {
            ns.clone()
        } else {
            OTHER.to_owned()
        };
        *out.entry((ns, rule.clone(), level)).or_default() += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_past_the_bound_are_summed_as_other() {
        let mut counts = FindingCounts::new();
        for i in 0..(MAX_NAMESPACES + 5) {
            counts.insert((format!("ns{i:03}"), "WIN-X".into(), "error"), 1 + i as u64);
        }
        let b = bounded(&counts);
        let names: std::collections::BTreeSet<&str> =
            b.keys().map(|(ns, _, _)| ns.as_str()).collect();
        assert_eq!(names.len(), MAX_NAMESPACES + 1);
        assert!(names.contains(OTHER));
        // The five smallest are summed: 1+2+3+4+5.
        assert_eq!(b[&(OTHER.to_owned(), "WIN-X".to_owned(), "error")], 15);
        assert_eq!(b.values().sum::<u64>(), counts.values().sum::<u64>());
    }
}
