//! The registry lookups' Prometheus metrics (`registry_*`), labelled by
//! registry with a bounded set of names.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Registries named in metric labels at most; the rest are `other`, so a
/// pod cannot grow the metrics without bound.
const MAX_REGISTRY_LABELS: usize = 32;
type ByRegistry = Family<[(&'static str, String); 1], Counter>;
type LatencyByRegistry = Family<[(&'static str, String); 1], Histogram, fn() -> Histogram>;

/// The registry lookups' metrics, by registry.
#[derive(Clone)]
pub struct RegistryMetrics {
    pub(super) lookups: ByRegistry,
    pub(super) hits: ByRegistry,
    pub(super) shared: ByRegistry,
    pub(super) failures: ByRegistry,
    pub(super) review_deadlines: ByRegistry,
    pub(super) latency: LatencyByRegistry,
    named: Arc<Mutex<HashSet<String>>>,
}

impl RegistryMetrics {
    /// Registers the metrics (no samples until `serve --registry` looks
    /// an image up).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            lookups: ByRegistry::default(),
            hits: ByRegistry::default(),
            shared: ByRegistry::default(),
            failures: ByRegistry::default(),
            review_deadlines: ByRegistry::default(),
            // 1 ms .. ~16 s, doubling.
            latency: LatencyByRegistry::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 15))
            }),
            named: Arc::default(),
        };
        registry.register(
            "registry_lookups",
            "Image lookups sent to a registry (serve --registry), by registry",
            m.lookups.clone(),
        );
        registry.register(
            "registry_cache_hits",
            "Image facts answered from the cache, by registry",
            m.hits.clone(),
        );
        registry.register(
            "registry_shared_lookups",
            "Image facts answered by another review's lookup in flight (single flight), by registry",
            m.shared.clone(),
        );
        registry.register(
            "registry_failures",
            "Image lookups that failed (the facts are unknown; never a denial), by registry",
            m.failures.clone(),
        );
        registry.register(
            "registry_review_deadlines",
            "Images a review stopped waiting for at --registry-review-timeout, by registry",
            m.review_deadlines.clone(),
        );
        registry.register(
            "registry_lookup_duration_seconds",
            "Time of one image lookup at its registry, by registry",
            m.latency.clone(),
        );
        m
    }

    /// The label for `registry`: itself, or `other` past
    /// [`MAX_REGISTRY_LABELS`].
    pub(super) fn label(&self, registry: &str) -> [(&'static str, String); 1] {
        let mut named = self.named.lock().unwrap_or_else(PoisonError::into_inner);
        let name = if named.contains(registry) {
            registry.to_owned()
        } else if named.len() < MAX_REGISTRY_LABELS {
            named.insert(registry.to_owned());
            registry.to_owned()
        } else {
            "other".to_owned()
        };
        [("registry", name)]
    }
}
