//! `serve --registry`: the image facts of one review, from a bounded cache
//! in front of the registry resolver ([`crate::input::registry`]), resolved before
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
//! - **Per-review cap** (`--registry-review-lookups`): the images of one
//!   review not in the cache are looked up up to this many; the others are
//!   unknown for this review, and a log line says how many were left.
//! - **Process-wide caps**: [`MAX_LOOKUPS_IN_FLIGHT`] lookups at once over
//!   every registry, and the resolver's cap on requests in flight
//!   ([`crate::input::registry::CONCURRENT_REQUESTS`]).
//! - **Cache bytes** (`--registry-cache-bytes`): entries are weighed by the
//!   bytes they hold, and each counts at least `bytes / entries`, so
//!   neither limit is passed.
//! - A failure says its class and the registry, never what the registry
//!   wrote; every way a registry cannot be reached in time reads the same.
//! - Health checks, metrics and reviews that name no uncached image never
//!   wait on a registry: only a review waits, and only for its own images.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::decision::images::{KnownImages, Lookup};
use crate::entry::admission::ImagesWanted;
use crate::input::registry::{Resolver, registry_of};

mod metrics;
mod pull_secrets;

pub use metrics::RegistryMetrics;
use pull_secrets::{MAX_PULL_SECRETS, PullSecrets};

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
    /// Bytes of facts kept at most (each entry weighed at least
    /// `max_bytes / max_entries`).
    pub max_bytes: u64,
    /// Images not in the cache one review looks up at most.
    pub review_lookups: usize,
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
            max_bytes: 32 << 20,
            review_lookups: 32,
            per_registry: 4,
            lookup_deadline: crate::input::registry::DEFAULT_DEADLINE,
        }
    }
}

/// Per-registry lanes kept at most; idle ones are forgotten past it.
const MAX_LANES: usize = 1024;
/// Lookups in flight at once over every registry; more wait in line,
/// within their own deadline.
pub const MAX_LOOKUPS_IN_FLIGHT: usize = 64;

/// The bytes an entry holds (its key and its facts or reason), as the
/// cache weighs it: at least `floor`.
fn weight(key: &str, lookup: &Lookup, floor: u32) -> u32 {
    const STRING: usize = std::mem::size_of::<String>();
    let bytes = key.len()
        + STRING
        + std::mem::size_of::<Lookup>()
        + match lookup {
            Lookup::Unknown(why) => why.len(),
            Lookup::Known(facts) => {
                facts.digest.as_ref().map_or(0, String::len)
                    + facts
                        .platforms
                        .iter()
                        .map(|p| {
                            std::mem::size_of_val(p)
                                + p.os.len()
                                + p.architecture.len()
                                + p.variant.as_ref().map_or(0, String::len)
                                + p.os_version.as_ref().map_or(0, String::len)
                                + p.os_features
                                    .iter()
                                    .map(|f| STRING + f.len())
                                    .sum::<usize>()
                        })
                        .sum::<usize>()
            }
        };
    u32::try_from(bytes).unwrap_or(u32::MAX).max(floor)
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

/// The facts cache: at most `max_bytes` by [`weight`], entries weighed at
/// least `max_bytes / max_entries`.
fn cache_of(options: &CacheOptions) -> moka::future::Cache<String, Lookup> {
    let floor = u32::try_from(options.max_bytes / options.max_entries.max(1)).unwrap_or(u32::MAX);
    moka::future::Cache::builder()
        .max_capacity(options.max_bytes.max(1))
        .weigher(move |key: &String, lookup: &Lookup| weight(key, lookup, floor))
        .expire_after(Expire {
            tag_ttl: options.tag_ttl,
            negative_ttl: options.negative_ttl,
        })
        .build()
}

/// The image facts of reviews, cached.
pub struct ImageFactsCache {
    inner: Arc<Inner>,
    review_deadline: Duration,
    review_lookups: usize,
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
    /// Keyed by the image, or for a lookup made with a pod's own
    /// `imagePullSecrets` by the image and those credentials' identity
    /// ([`cache_key`]).
    cache: moka::future::Cache<String, Lookup>,
    lanes: Mutex<HashMap<String, Arc<Semaphore>>>,
    per_registry: usize,
    /// [`MAX_LOOKUPS_IN_FLIGHT`].
    in_flight: Semaphore,
    lookup_deadline: Duration,
    metrics: RegistryMetrics,
    /// `--registry-pull-secrets`: set once the Kubernetes client exists.
    pull_secrets: std::sync::OnceLock<PullSecrets>,
}

/// The cache key of `image` looked up with credentials of `identity`
/// (none: the server's own credentials, shared by every review). Facts a
/// namespace's Secret gave are only found by a review holding the same
/// credentials, never by one without them.
fn cache_key(image: &str, identity: Option<u64>) -> String {
    match identity {
        Some(id) => format!("{image}\n{id:016x}"),
        None => image.to_owned(),
    }
}

impl ImageFactsCache {
    #[must_use]
    pub fn new(resolver: Resolver, options: CacheOptions, metrics: RegistryMetrics) -> Self {
        let cache = cache_of(&options);
        Self {
            inner: Arc::new(Inner {
                resolver,
                cache,
                lanes: Mutex::new(HashMap::new()),
                per_registry: options.per_registry.max(1),
                in_flight: Semaphore::new(MAX_LOOKUPS_IN_FLIGHT),
                lookup_deadline: options.lookup_deadline,
                metrics,
                pull_secrets: std::sync::OnceLock::new(),
            }),
            review_deadline: options.review_deadline,
            review_lookups: options.review_lookups.max(1),
        }
    }

    /// `--registry-pull-secrets`: from now on, a pod's images are looked
    /// up with the credentials of the Secrets its `imagePullSecrets`
    /// names, read with `client` in the pod's namespace.
    pub fn use_pull_secrets(&self, client: kube::Client) {
        let _ = self.inner.pull_secrets.set(PullSecrets::new(client));
    }

    /// The facts of the images of one review, within the review deadline,
    /// with the credentials of its pull secrets when
    /// `--registry-pull-secrets` is on.
    pub async fn facts(&self, wanted: ImagesWanted) -> KnownImages {
        let deadline = tokio::time::Instant::now() + self.review_deadline;
        let secrets = &wanted.pull_secrets[..wanted.pull_secrets.len().min(MAX_PULL_SECRETS)];
        let credentials = match (&wanted.namespace, self.inner.pull_secrets.get()) {
            (Some(ns), Some(pull)) if !secrets.is_empty() => {
                Some(pull.credentials(ns, secrets, deadline).await)
            }
            _ => None,
        };
        self.lookup_all(wanted.images, credentials.as_ref(), deadline)
            .await
    }

    /// The facts of `images`, within the review deadline (`POST /report`
    /// asks for all the images of its body at once, with the server's own
    /// credentials).
    pub async fn facts_of(&self, images: BTreeSet<String>) -> KnownImages {
        let deadline = tokio::time::Instant::now() + self.review_deadline;
        self.lookup_all(images, None, deadline).await
    }

    /// The facts of `images` by `deadline`; with `credentials` (a pod's
    /// pull secrets) for the registries they name.
    async fn lookup_all(
        &self,
        images: BTreeSet<String>,
        credentials: Option<&crate::input::registry::Credentials>,
        deadline: tokio::time::Instant,
    ) -> KnownImages {
        let mut known = KnownImages::default();
        let mut pending = Vec::new();
        let mut left_out = 0_usize;
        for image in images {
            let registry = registry_of(&image);
            // The pod's own credentials for this image's registry, if any:
            // their own cache entry and resolver.
            let own = match (credentials, &registry, self.inner.pull_secrets.get()) {
                (Some(c), Some(r), Some(pull)) => {
                    c.only(r).map(|c| pull.resolver(&self.inner.resolver, c))
                }
                _ => None,
            };
            let key = cache_key(&image, own.as_ref().map(|(id, _)| *id));
            if let Some(hit) = self.inner.cache.get(&key).await {
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
            if pending.len() >= self.review_lookups {
                left_out += 1;
                known.insert(
                    image,
                    Lookup::Unknown(format!(
                        "not looked up: the review names more than {} images not in the cache (--registry-review-lookups)",
                        self.review_lookups
                    )),
                );
                continue;
            }
            // The lookup runs on its own task: past this review's deadline
            // it goes on, and fills the cache for the next review.
            let inner = Arc::clone(&self.inner);
            let task = {
                let image = image.clone();
                let registry = registry.clone();
                let resolver = own.map(|(_, r)| r);
                tokio::spawn(async move { inner.lookup(key, image, &registry, resolver).await })
            };
            pending.push((image, registry, task));
        }
        if left_out > 0 {
            tracing::warn!(
                looked_up = pending.len(),
                left_out,
                "registry: a review names more images not in the cache than --registry-review-lookups; the others are judged by their names"
            );
        }
        for (image, lookup) in self.wait_all(pending, deadline).await {
            known.insert(image, lookup);
        }
        known
    }

    /// The outcome of each lookup in flight by `deadline`; past it, the
    /// image is unknown for this review and its lookup goes on.
    async fn wait_all(
        &self,
        pending: Vec<(String, String, tokio::task::JoinHandle<Lookup>)>,
        deadline: tokio::time::Instant,
    ) -> Vec<(String, Lookup)> {
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
                    tracing::warn!(
                        image,
                        registry,
                        "registry: facts unknown: registry {registry}: no answer within {}s (--registry-review-timeout); the lookup goes on for later reviews",
                        self.review_deadline.as_secs_f64()
                    );
                    // The words of every unreachable registry: a caller
                    // cannot tell a silent registry from a closed port.
                    let why = format!(
                        "registry {registry}: {}",
                        crate::input::registry::UNREACHABLE
                    );
                    (image, Lookup::Unknown(why))
                }
            }
        });
        futures::future::join_all(waits).await
    }
}

impl Inner {
    /// The facts of `image` from the cache, from a lookup in flight for
    /// another review, or from a lookup of its own.
    async fn lookup(
        &self,
        key: String,
        image: String,
        registry: &str,
        resolver: Option<Arc<Resolver>>,
    ) -> Lookup {
        let resolver = resolver.as_deref().unwrap_or(&self.resolver);
        let entry = self
            .cache
            .entry(key)
            .or_try_insert_with(self.ask(resolver, &image, registry))
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
    async fn ask(
        &self,
        resolver: &Resolver,
        image: &str,
        registry: &str,
    ) -> Result<Lookup, String> {
        let lane = self.lane(registry);
        let turn = async {
            let lane = lane.acquire().await;
            let all = self.in_flight.acquire().await;
            lane.and_then(|l| all.map(|a| (l, a)))
        };
        let Ok(Ok(_permits)) = tokio::time::timeout(self.lookup_deadline, turn).await else {
            return Err(format!(
                "registry {registry}: no turn to ask within {}s ({} lookups to it in flight, --registry-concurrency; or {MAX_LOOKUPS_IN_FLIGHT} in all)",
                self.lookup_deadline.as_secs_f64(),
                self.per_registry
            ));
        };
        let label = self.metrics.label(registry);
        self.metrics.lookups.get_or_create(&label).inc();
        let start = Instant::now();
        let (lookup, cause) = resolver.lookup_explained(image).await;
        self.metrics
            .latency
            .get_or_create(&label)
            .observe(start.elapsed().as_secs_f64());
        if let Lookup::Unknown(_) = &lookup {
            self.metrics.failures.get_or_create(&label).inc();
            tracing::warn!(image, registry, "registry: facts unknown: {cause}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::images::{ImageFacts, Platform};

    /// 200 tags of an index with 64 platforms of long names (what a
    /// hostile registry serves under the read cap): the cache keeps at
    /// most its bytes, by its own accounting; tiny entries at most its
    /// entry count.
    #[tokio::test]
    async fn the_cache_is_bounded_in_bytes() {
        let options = CacheOptions {
            max_bytes: 4 << 20,
            ..CacheOptions::default()
        };
        let cache = cache_of(&options);
        let platforms: Vec<Platform> = (0..64)
            .map(|i| Platform {
                os: "windows".to_owned(),
                architecture: "amd64".to_owned(),
                variant: None,
                os_version: Some(format!("10.0.17763.{i}")),
                os_features: vec!["x".repeat(8_000)],
            })
            .collect();
        let facts = Lookup::Known(ImageFacts {
            digest: None,
            platforms,
        });
        let one = u64::from(weight("r/wide:t0", &facts, 0));
        assert!(one > 500_000, "{one}: an entry is not weighed by its bytes");
        for i in 0..200 {
            cache.insert(format!("r/wide:t{i}"), facts.clone()).await;
        }
        cache.run_pending_tasks().await;
        eprintln!(
            "200 entries of {one} bytes: {} kept, {} bytes",
            cache.entry_count(),
            cache.weighted_size()
        );
        assert!(cache.weighted_size() <= options.max_bytes);
        assert!(cache.entry_count() <= options.max_bytes / one);

        let few = CacheOptions {
            max_bytes: 1 << 20,
            max_entries: 10,
            ..CacheOptions::default()
        };
        let cache = cache_of(&few);
        for i in 0..100 {
            cache
                .insert(format!("r/a:{i}"), Lookup::Unknown("404".to_owned()))
                .await;
        }
        cache.run_pending_tasks().await;
        assert!(cache.entry_count() <= 10, "{}", cache.entry_count());
    }
}
