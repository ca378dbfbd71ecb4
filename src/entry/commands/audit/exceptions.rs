//! The audit and PolicyExceptions: the set in force is compared at each
//! pass with the last one, and every namespace is judged again when it
//! changed (an exception created, changed, deleted, or ended at its end
//! date: no event, no restart needed).

use super::State;
use crate::decision::cluster::ClusterLookup as _;

impl State {
    /// Every namespace is judged again when the exceptions in force
    /// change: one created, changed, deleted, or ended at its end date.
    pub(super) fn check_exceptions(&mut self) {
        let now = crate::entry::exceptions::clock();
        let seen = self
            .judge
            .cache
            .exceptions(now)
            .map(|s| s.fingerprint())
            .unwrap_or_default();
        if seen != self.exceptions_seen {
            tracing::info!(
                in_force = seen.len(),
                "audit: the PolicyExceptions in force changed; judging every namespace again"
            );
            self.exceptions_seen = seen;
            self.store.mark_all();
        }
    }
}
