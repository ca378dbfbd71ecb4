//! How a watcher loop waits after a failure: shared by the cluster cache's
//! watchers and `winadmit audit`'s.

use std::time::Duration;

use kube::runtime::watcher;

/// The backoff of a watcher loop: kube's default (0.8 s doubling to 30 s,
/// with jitter), reset only once a list completes or a watch delivers.
/// kube's own stream resets on every event, and a watcher that restarts
/// emits one (`Init`) before it lists again, so a list whose first page
/// succeeds and whose second fails (an endless continue token), or a
/// refused connection, would be retried every 0.8 s. Shared by the cluster
/// cache and `winadmit audit`.
pub struct RelistBackoff {
    backoff: watcher::DefaultBackoff,
    listing: bool,
}

impl Default for RelistBackoff {
    fn default() -> Self {
        Self {
            backoff: watcher::DefaultBackoff::default(),
            listing: true,
        }
    }
}

impl RelistBackoff {
    /// Notes an event; whether it completed a list or delivered a watch
    /// (the backoff is reset then).
    pub fn saw<K>(&mut self, event: &watcher::Event<K>) -> bool {
        if matches!(event, watcher::Event::Init) {
            self.listing = true;
        }
        let done = matches!(event, watcher::Event::InitDone);
        let progress = done || !self.listing;
        if progress {
            kube::runtime::utils::Backoff::reset(&mut self.backoff);
        }
        if done {
            self.listing = false;
        }
        progress
    }

    /// A list is in progress (its pages have a deadline of their own).
    #[must_use]
    pub fn listing(&self) -> bool {
        self.listing
    }

    /// How long to wait before the next try.
    pub fn delay(&mut self) -> Duration {
        self.backoff.next().unwrap_or(Duration::from_secs(30))
    }
}

/// `410 Gone` on a watch: routine, the watcher relists.
pub fn is_expected(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}
