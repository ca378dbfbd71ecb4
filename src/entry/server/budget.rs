//! The memory budget for request bodies: bytes of request bodies held at
//! once across every connection and stream (`--max-body-bytes-in-flight`).
//! A request whose `Content-Length` does not fit is refused before its body
//! is read; one without a length is charged frame by frame and refused at
//! the frame that does not fit. The charge is returned when the handler
//! has answered (the body is freed by then).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of request bodies the server holds at once.
#[derive(Debug)]
pub struct BodyBudget {
    limit: usize,
    bytes: Arc<Semaphore>,
    /// The most bytes charged at once since [`BodyBudget::take_peak`]
    /// (for tests and logs).
    peak: AtomicUsize,
}

impl BodyBudget {
    #[must_use]
    pub fn new(limit: usize) -> Self {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            limit,
            bytes: Arc::new(Semaphore::new(limit)),
            peak: AtomicUsize::new(0),
        }
    }

    /// The budget in bytes.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes charged now.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.limit - self.bytes.available_permits()
    }

    /// Charges `n` bytes if they fit now; `None` when they do not.
    pub fn try_charge(&self, n: usize) -> Option<Charge> {
        let permit = if n == 0 {
            None
        } else {
            let n = u32::try_from(n).ok()?;
            Some(Arc::clone(&self.bytes).try_acquire_many_owned(n).ok()?)
        };
        self.peak.fetch_max(self.in_flight(), Ordering::Relaxed);
        Some(Charge(permit))
    }

    /// The most bytes held at once since the last call, and resets it.
    pub fn take_peak(&self) -> usize {
        self.peak.swap(self.in_flight(), Ordering::Relaxed)
    }
}

/// Bytes charged to the budget, returned on drop.
#[derive(Debug, Default)]
pub struct Charge(Option<OwnedSemaphorePermit>);

impl Charge {
    /// Adds `other` to this charge.
    pub fn merge(&mut self, other: Self) {
        match (&mut self.0, other.0) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_up_to_the_limit_and_returns_on_drop() {
        let b = BodyBudget::new(100);
        let mut a = b.try_charge(60).unwrap();
        assert!(b.try_charge(41).is_none());
        a.merge(b.try_charge(40).unwrap());
        assert_eq!(b.in_flight(), 100);
        assert!(b.try_charge(1).is_none());
        assert!(b.try_charge(0).is_some());
        drop(a);
        assert_eq!(b.in_flight(), 0);
        assert_eq!(b.take_peak(), 100);
        assert_eq!(b.take_peak(), 0);
    }
}
