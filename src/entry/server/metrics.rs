//! Prometheus metrics, in a registry owned by the server state (no globals).

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::entry::admission::{Endpoint, ReviewSummary};

type Labels2 = [(&'static str, &'static str); 2];
type Labels3 = [(&'static str, &'static str); 3];
type Latency = Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>;

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels2, Counter>,
    findings: Family<Labels3, Counter>,
    latency: Latency,
    in_flight: Gauge,
    rejected: Family<Labels2, Counter>,
    cluster: super::watch_cache::ClusterMetrics,
    gmsa: super::gmsa::GmsaMetrics,
    image_lookups: super::images::RegistryMetrics,
    audit: super::audit_metrics::AuditMetrics,
    pin_linux_in_sync: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("winadmit");
        let requests = Family::<Labels2, Counter>::default();
        registry.register(
            "admission_requests",
            "AdmissionReview requests answered, by endpoint and verdict",
            requests.clone(),
        );
        let findings = Family::<Labels3, Counter>::default();
        registry.register(
            "admission_findings",
            "Findings in admitted or denied objects, by rule, severity and mode",
            findings.clone(),
        );
        // 5 us .. ~82 ms, doubling: microsecond resolution where reviews land.
        let latency: Latency =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(5e-6, 2.0, 15)));
        registry.register(
            "admission_duration_seconds",
            "Server time per review, body in to response out (excludes network and TLS)",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "admission_in_flight_requests",
            "Admission requests being processed",
            in_flight.clone(),
        );
        let rejected = Family::<Labels2, Counter>::default();
        registry.register(
            "http_rejected_requests",
            "HTTP requests rejected before review (bad body, content type, size), by endpoint and status",
            rejected.clone(),
        );
        let cluster = super::watch_cache::ClusterMetrics::register(&mut registry);
        let gmsa = super::gmsa::GmsaMetrics::register(&mut registry);
        let registry_metrics = super::images::RegistryMetrics::register(&mut registry);
        let audit = super::audit_metrics::AuditMetrics::register(&mut registry);
        let pin_linux_in_sync = Gauge::default();
        registry.register(
            "pin_linux_in_sync",
            "With --manage-pin-linux: 1 while pin-linux.winadmit.io is as winadmit renders it, 0 while winadmit cannot make it so (/readyz/pin-linux says why)",
            pin_linux_in_sync.clone(),
        );
        Self {
            registry,
            requests,
            findings,
            latency,
            in_flight,
            rejected,
            cluster,
            gmsa,
            image_lookups: registry_metrics,
            audit,
            pin_linux_in_sync,
        }
    }

    /// The registry lookups' metrics (shared handles).
    #[must_use]
    pub fn registry(&self) -> super::images::RegistryMetrics {
        self.image_lookups.clone()
    }

    /// The cluster cache's metrics (shared handles).
    #[must_use]
    pub fn cluster(&self) -> super::watch_cache::ClusterMetrics {
        self.cluster.clone()
    }

    /// `winadmit audit`'s metrics (shared handles).
    #[must_use]
    pub fn audit(&self) -> super::audit_metrics::AuditMetrics {
        self.audit.clone()
    }

    /// The gMSA lookups' metrics (shared handles).
    #[must_use]
    pub fn gmsa(&self) -> super::gmsa::GmsaMetrics {
        self.gmsa.clone()
    }

    /// Sets `pin_linux_in_sync`.
    pub fn pin_linux_in_sync(&self, in_sync: bool) {
        self.pin_linux_in_sync.set(i64::from(in_sync));
    }

    /// Records one answered review.
    pub fn observe(&self, endpoint: Endpoint, summary: &ReviewSummary, elapsed: Duration) {
        let ep = endpoint.as_str();
        self.requests
            .get_or_create(&[("endpoint", ep), ("verdict", summary.verdict.as_str())])
            .inc();
        for f in &summary.findings {
            self.findings
                .get_or_create(&[
                    ("rule", f.rule),
                    ("severity", f.severity.as_str()),
                    ("mode", mode_str(f.mode)),
                ])
                .inc();
        }
        self.latency
            .get_or_create(&[("endpoint", ep)])
            .observe(elapsed.as_secs_f64());
    }

    /// Records a request refused before review.
    pub fn reject(&self, endpoint: Endpoint, status: &'static str) {
        self.rejected
            .get_or_create(&[("endpoint", endpoint.as_str()), ("status", status)])
            .inc();
    }

    /// Counts a request as in flight until the guard drops.
    #[must_use]
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

fn mode_str(m: crate::decision::policy::Mode) -> &'static str {
    match m {
        crate::decision::policy::Mode::Enforce => "enforce",
        crate::decision::policy::Mode::Warn => "warn",
        crate::decision::policy::Mode::Audit => "audit",
    }
}

/// Decrements the in-flight gauge on drop (also when a handler panics).
#[derive(Debug)]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}
