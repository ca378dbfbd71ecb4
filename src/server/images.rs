//! `serve --registry`: the image facts of one review, from a bounded cache
//! in front of the registry resolver ([`crate::registry`]), resolved before
//! the decision, which stays pure.
//!
//! - **Per-review deadline** (`--registry-review-timeout`, default 2 s,
//!   well under the webhook's `timeoutSeconds: 5`): a review waits at most
//!   this long for all its images together. An image not known by then is
//!   unknown for this review (WIN-IMAGE-FACTS-UNKNOWN says so, and the
//!   image is judged by its name); its lookup goes on in the background,
//!   within `--registry-timeout`, and fills the cache for the next review.
//! - **Bounded cache** (at most `--registry-cache-entries`): an image
//!   pinned by digest is kept until evicted for room (what a digest names
//!   never changes); an image by tag for `--registry-tag-ttl`; a failed
//!   lookup for `--registry-negative-ttl`.
//! - **Single flight**: reviews that need the same uncached image share one
//!   lookup.
//! - **Per-registry cap** (`--registry-concurrency`): lookups to one
//!   registry at once; more wait in line, within their own deadline.
//! - Health checks, metrics and reviews that name no uncached image never
//!   wait on a registry: only a review waits, and only for its own images.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::images::{KnownImages, Lookup};
use crate::policy::Policy;
use crate::registry::Resolver;
use crate::workload::Workload;

/// How the webhook uses registries (`serve --registry`).
#[derive(Debug, Clone, Copy)]
pub struct CacheOptions {
    /// A review waits at most this long for its images' facts.
    pub review_deadline: Duration,
    /// How long facts looked up by tag are kept.
    pub tag_ttl: Duration,
    /// How long a failed lookup is kept (not asked again).
    pub negative_ttl: Duration,
    /// Images kept at most.
    pub max_entries: u64,
    /// Lookups to one registry at once.
    pub per_registry: usize,
    /// The deadline of one lookup (`--registry-timeout`): also how long a
    /// lookup may wait for its registry's turn.
    pub lookup_deadline: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            review_deadline: Duration::from_secs(2),
            tag_ttl: Duration::from_secs(300),
            negative_ttl: Duration::from_secs(10),
            max_entries: 10_000,
            per_registry: 4,
            lookup_deadline: crate::registry::DEFAULT_DEADLINE,
        }
    }
}

/// Registries named in metric labels at most; the rest are `other`, so a
/// pod cannot grow the metrics without bound.
const MAX_REGISTRY_LABELS: usize = 32;
/// Per-registry lanes kept at most; idle ones are forgotten past it.
const MAX_LANES: usize = 1024;

type ByRegistry = Family<[(&'static str, String); 1], Counter>;
type LatencyByRegistry = Family<[(&'static str, String); 1], Histogram, fn() -> Histogram>;

/// The registry lookups' metrics, by registry.
#[derive(Clone)]
pub struct RegistryMetrics {
    lookups: ByRegistry,
    hits: ByRegistry,
    shared: ByRegistry,
    failures: ByRegistry,
    review_deadlines: ByRegistry,
    latency: LatencyByRegistry,
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
    fn label(&self, registry: &str) -> [(&'static str, String); 1] {
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

/// Keeps pinned facts until evicted, tags for the TTL, failures briefly.
struct Expire {
    tag_ttl: Duration,
    negative_ttl: Duration,
}

impl moka::Expiry<String, Lookup> for Expire {
    fn expire_after_create(
        &self,
        image: &String,
        value: &Lookup,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        match value {
            Lookup::Unknown(_) => Some(self.negative_ttl),
            Lookup::Known(_) if image.contains('@') => None,
            Lookup::Known(_) => Some(self.tag_ttl),
        }
    }
}

/// The image facts of reviews, cached.
pub struct ImageFactsCache {
    inner: Arc<Inner>,
    review_deadline: Duration,
}

impl std::fmt::Debug for ImageFactsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageFactsCache")
            .field("review_deadline", &self.review_deadline)
            .finish_non_exhaustive()
    }
}

struct Inner {
    resolver: Resolver,
    cache: moka::future::Cache<String, Lookup>,
    lanes: Mutex<HashMap<String, Arc<Semaphore>>>,
    per_registry: usize,
    lookup_deadline: Duration,
    metrics: RegistryMetrics,
}

/// What is read of a review: the object, to find its images.
#[derive(Deserialize)]
struct ReviewHead {
    request: Option<RequestHead>,
}

#[derive(Deserialize)]
struct RequestHead {
    object: Option<serde_json::Value>,
}

/// The registry host `image` is pulled from (`index.docker.io` for Docker
/// Hub), or `None` for a reference that does not parse.
fn registry_of(image: &str) -> Option<String> {
    oci_client::Reference::try_from(image.trim())
        .ok()
        .map(|r| r.resolve_registry().to_owned())
}

impl ImageFactsCache {
    #[must_use]
    pub fn new(resolver: Resolver, options: CacheOptions, metrics: RegistryMetrics) -> Self {
        let cache = moka::future::Cache::builder()
            .max_capacity(options.max_entries.max(1))
            .expire_after(Expire {
                tag_ttl: options.tag_ttl,
                negative_ttl: options.negative_ttl,
            })
            .build();
        Self {
            inner: Arc::new(Inner {
                resolver,
                cache,
                lanes: Mutex::new(HashMap::new()),
                per_registry: options.per_registry.max(1),
                lookup_deadline: options.lookup_deadline,
                metrics,
            }),
            review_deadline: options.review_deadline,
        }
    }

    /// The facts of the images of one review body, within the review
    /// deadline; `None` when the body names no workload with images.
    pub async fn facts(&self, policy: &Policy, body: &[u8]) -> Option<KnownImages> {
        let images = images_of(policy, body)?;
        let deadline = tokio::time::Instant::now() + self.review_deadline;
        let mut known = KnownImages::default();
        let mut pending = Vec::new();
        for image in images {
            let registry = registry_of(&image);
            if let Some(hit) = self.inner.cache.get(&image).await {
                if let Some(r) = &registry {
                    self.inner
                        .metrics
                        .hits
                        .get_or_create(&self.inner.metrics.label(r))
                        .inc();
                }
                known.insert(image, hit);
                continue;
            }
            let Some(registry) = registry else {
                // Not a reference: nothing to ask (the resolver says why).
                let lookup = self.inner.resolver.lookup(&image).await;
                known.insert(image, lookup);
                continue;
            };
            // The lookup runs on its own task: past this review's deadline
            // it goes on, and fills the cache for the next review.
            let inner = Arc::clone(&self.inner);
            let task = {
                let image = image.clone();
                let registry = registry.clone();
                tokio::spawn(async move { inner.lookup(image, &registry).await })
            };
            pending.push((image, registry, task));
        }
        let waits = pending.into_iter().map(|(image, registry, task)| async move {
            match tokio::time::timeout_at(deadline, task).await {
                Ok(Ok(lookup)) => (image, lookup),
                Ok(Err(e)) => (image, Lookup::Unknown(format!("registry {registry}: lookup failed: {e}"))),
                Err(_) => {
                    self.inner
                        .metrics
                        .review_deadlines
                        .get_or_create(&self.inner.metrics.label(&registry))
                        .inc();
                    let why = format!(
                        "registry {registry}: no answer within {}s (--registry-review-timeout); the lookup goes on for later reviews",
                        self.review_deadline.as_secs_f64()
                    );
                    tracing::warn!(image, registry, "registry: facts unknown: {why}");
                    (image, Lookup::Unknown(why))
                }
            }
        });
        for (image, lookup) in futures::future::join_all(waits).await {
            known.insert(image, lookup);
        }
        Some(known)
    }
}

impl Inner {
    /// The facts of `image` from the cache, from a lookup in flight for
    /// another review, or from a lookup of its own.
    async fn lookup(&self, image: String, registry: &str) -> Lookup {
        let entry = self
            .cache
            .entry(image.clone())
            .or_try_insert_with(self.ask(&image, registry))
            .await;
        match entry {
            Ok(entry) => {
                if !entry.is_fresh() {
                    self.metrics
                        .shared
                        .get_or_create(&self.metrics.label(registry))
                        .inc();
                }
                entry.into_value()
            }
            // Not kept: the next review asks again.
            Err(why) => Lookup::Unknown((*why).clone()),
        }
    }

    /// Asks the registry, once a lane to it is free. `Err` for an answer
    /// not to keep (no lane free within the lookup deadline).
    async fn ask(&self, image: &str, registry: &str) -> Result<Lookup, String> {
        let lane = self.lane(registry);
        let Ok(Ok(_permit)) = tokio::time::timeout(self.lookup_deadline, lane.acquire()).await
        else {
            return Err(format!(
                "registry {registry}: {} lookups already in flight for {}s (--registry-concurrency)",
                self.per_registry,
                self.lookup_deadline.as_secs_f64()
            ));
        };
        let label = self.metrics.label(registry);
        self.metrics.lookups.get_or_create(&label).inc();
        let start = Instant::now();
        let lookup = self.resolver.lookup(image).await;
        self.metrics
            .latency
            .get_or_create(&label)
            .observe(start.elapsed().as_secs_f64());
        if let Lookup::Unknown(why) = &lookup {
            self.metrics.failures.get_or_create(&label).inc();
            tracing::warn!(image, registry, "registry: facts unknown: {why}");
        }
        Ok(lookup)
    }

    /// The lane (lookups at once) of `registry`.
    fn lane(&self, registry: &str) -> Arc<Semaphore> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        if !lanes.contains_key(registry) && lanes.len() >= MAX_LANES {
            let per = self.per_registry;
            lanes.retain(|_, s| s.available_permits() < per);
        }
        Arc::clone(
            lanes
                .entry(registry.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_registry))),
        )
    }
}

/// The images of the workload in a review body (every container list),
/// or `None` when it names none.
fn images_of(policy: &Policy, body: &[u8]) -> Option<BTreeSet<String>> {
    if !body.windows(b"\"image\"".len()).any(|w| w == b"\"image\"") {
        return None;
    }
    let head: ReviewHead = serde_json::from_slice(body).ok()?;
    let object = head.request?.object?;
    let view = policy.pod_templates.read(&object).ok()?;
    let spec = Workload::from_view(&view)?.spec?;
    let images: BTreeSet<String> = crate::rules::containers_of(spec)
        .iter()
        .filter_map(|c| c.container.image.as_deref())
        .filter(|i| !i.trim().is_empty())
        .map(str::to_owned)
        .collect();
    (!images.is_empty()).then_some(images)
}
