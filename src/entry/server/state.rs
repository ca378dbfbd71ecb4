//! What the handlers share: the limits, the readiness flags, the review
//! and report slots, and the optional gMSA and image-facts resolvers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{Metrics, budget, gmsa, images};
use crate::entry::admission::Admission;

/// Limits that keep one client from hurting the others.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body accepted (the API server's own limit is 3 MiB).
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once, all connections and streams
    /// together; a request that does not fit is answered 503 at once.
    pub max_body_bytes_in_flight: usize,
    /// Time to read a whole request body and answer it.
    pub request_timeout: Duration,
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for a client to send a request's headers (HTTP/1.1), including
    /// idle keep-alive time between requests.
    pub header_timeout: Duration,
    /// Connections served at once. At the cap, one is closed gracefully
    /// for the new one (idle, else with stalled request bodies, else one
    /// that never sent a request); clients wait in the backlog only while
    /// every connection has a request making progress.
    pub max_connections: usize,
    /// Time a connection may go without a request in progress (after the
    /// handshake, between requests, an HTTP/2 connection with no stream:
    /// PINGs do not count) before it is closed.
    pub idle_timeout: Duration,
    /// Largest `/report` answer (objects past it are left out, and the
    /// answer says so).
    pub report_max_bytes: usize,
    /// Time a `/report` client has to read the answer.
    pub report_write_timeout: Duration,
    /// Reports computed or sent at once.
    pub report_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 3 * 1024 * 1024,
            max_body_bytes_in_flight: 64 * 1024 * 1024,
            request_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(60),
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            report_max_bytes: 8 * 1024 * 1024,
            report_write_timeout: Duration::from_secs(10),
            report_concurrency: 1,
        }
    }
}

/// Everything the handlers share.
#[derive(Debug)]
pub struct ServerState {
    pub admission: Admission,
    pub metrics: Metrics,
    pub limits: Limits,
    /// Request bodies held at once (`--max-body-bytes-in-flight`).
    pub body_budget: Arc<budget::BodyBudget>,
    pub(super) ready: AtomicBool,
    /// Large reviews (over [`INLINE_REVIEW_MAX_BYTES`]) evaluated at once,
    /// off the I/O threads (on tokio's blocking pool): one per CPU. Further
    /// ones wait for a slot, within their `--request-timeout`, while health
    /// checks and metrics keep answering. Small reviews run inline.
    pub(super) review_slots: Arc<Semaphore>,
    /// Reports computed or sent at once (`--report-concurrency`), apart
    /// from the review slots.
    pub(super) report_slots: Arc<Semaphore>,
    /// Readiness also waits for the cluster cache's first list (bounded by
    /// `--cluster-cache-sync-timeout`).
    pub(super) cluster_pending: AtomicBool,
    /// The gMSA facts resolver, when `--gmsa` is on.
    pub(super) gmsa: std::sync::OnceLock<gmsa::Resolver>,
    /// Readiness also waits for `--gmsa`: `auto`'s decision, and the first
    /// list of the GMSACredentialSpecs when the cluster cache watches them
    /// (bounded by `--cluster-cache-sync-timeout`).
    pub(super) gmsa_pending: AtomicBool,
    /// The image facts cache, when `--registry` is on.
    pub(super) images: std::sync::OnceLock<images::ImageFactsCache>,
    /// Why `--manage-pin-linux` cannot keep its webhook as it must be
    /// (`/readyz/pin-linux`); `None` while it can, or is not asked to.
    pub(super) pin_linux_problem: std::sync::Mutex<Option<String>>,
}

impl ServerState {
    /// A state that is not ready until [`ServerState::set_ready`] (the
    /// listener sets it once bound, and clears it when draining).
    #[must_use]
    pub fn new(admission: Admission, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            admission,
            metrics: Metrics::new(),
            limits,
            body_budget: Arc::new(budget::BodyBudget::new(limits.max_body_bytes_in_flight)),
            ready: AtomicBool::new(false),
            review_slots: Arc::new(Semaphore::new(review_slots())),
            report_slots: Arc::new(Semaphore::new(limits.report_concurrency.max(1))),
            cluster_pending: AtomicBool::new(false),
            gmsa: std::sync::OnceLock::new(),
            gmsa_pending: AtomicBool::new(false),
            images: std::sync::OnceLock::new(),
            pin_linux_problem: std::sync::Mutex::new(None),
        })
    }

    /// Sets (or clears) why `--manage-pin-linux` cannot keep its webhook,
    /// for `/readyz/pin-linux` and the gauge `winadmit_pin_linux_in_sync`.
    pub fn set_pin_linux_problem(&self, problem: Option<String>) {
        self.metrics.pin_linux_in_sync(problem.is_none());
        *self
            .pin_linux_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = problem;
    }

    /// Why `--manage-pin-linux` cannot keep its webhook, if it cannot.
    #[must_use]
    pub fn pin_linux_problem(&self) -> Option<String> {
        self.pin_linux_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Turns the gMSA checks on with `resolver` (once).
    pub fn set_gmsa(&self, resolver: gmsa::Resolver) {
        let _ = self.gmsa.set(resolver);
    }

    /// Whether the gMSA checks are on.
    #[must_use]
    pub fn gmsa_on(&self) -> bool {
        self.gmsa.get().is_some()
    }

    /// While true, `/readyz` answers 503 even once bound: `--gmsa` is not
    /// settled yet.
    pub fn set_gmsa_pending(&self, pending: bool) {
        self.gmsa_pending.store(pending, Ordering::SeqCst);
    }

    /// Turns registry lookups on with `cache` (once).
    pub fn set_images(&self, cache: images::ImageFactsCache) {
        let _ = self.images.set(cache);
    }

    /// The image facts cache, when `--registry` is on.
    #[must_use]
    pub fn image_cache(&self) -> Option<&images::ImageFactsCache> {
        self.images.get()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// While true, `/readyz` answers 503 even once bound: the cluster
    /// cache has not completed its first list yet.
    pub fn set_cluster_pending(&self, pending: bool) {
        self.cluster_pending.store(pending, Ordering::SeqCst);
    }

    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
            && !self.cluster_pending.load(Ordering::SeqCst)
            && !self.gmsa_pending.load(Ordering::SeqCst)
    }

    /// Runs a small review `f` right here, on the I/O thread that read its
    /// body: a few to a few tens of microseconds, less than the hand-off to
    /// the blocking pool costs (two thread wake-ups and context switches
    /// per request: docs/BENCHMARKS.md, "What was tried and not kept").
    /// A panic is caught and reported as by
    /// [`ServerState::run_bounded`].
    pub fn run_inline<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(out) => Some(out),
            Err(p) => {
                let detail = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "unknown panic".to_owned());
                tracing::error!(panic = %detail, "review panicked; answered 500");
                None
            }
        }
    }

    /// Runs CPU-bound work `f` on the blocking pool once a review slot is
    /// free. The slot stays taken until `f` returns, even when the caller
    /// has given up (timed out): so abandoned work still counts, and the
    /// pool stays bounded. `None` when `f` panicked (logged).
    pub async fn run_bounded<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let permit = Arc::clone(&self.review_slots).acquire_owned().await.ok()?;
        let task = tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
            out
        });
        match task.await {
            Ok(out) => Some(out),
            Err(e) => {
                let detail = e.try_into_panic().ok().map_or_else(
                    || "cancelled".to_owned(),
                    |p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "unknown panic".to_owned())
                    },
                );
                tracing::error!(panic = %detail, "review panicked; answered 500");
                None
            }
        }
    }
}

/// Bodies up to this size are reviewed inline on the I/O thread (a short
/// piece of work: docs/BENCHMARKS.md, "Server time per review,
/// in-process"); larger ones on
/// the blocking pool, bounded by the review slots, so a burst of big
/// reviews cannot hold up the I/O threads, health checks and metrics.
pub const INLINE_REVIEW_MAX_BYTES: usize = 64 * 1024;

/// One review slot per CPU (at least one).
fn review_slots() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}
