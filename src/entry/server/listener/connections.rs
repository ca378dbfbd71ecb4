//! The open connections and which one to close at `--max-connections`:
//! each connection's requests in progress, when things happened on it, and
//! the ways to ask it to close.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A connection that has not sent its first request (or not finished its
/// TLS handshake) is left alone this long before it may be closed for a
/// new client, and only when no established connection is idle.
pub(super) const NEW_CONNECTION_GRACE: Duration = Duration::from_secs(1);
/// A connection whose requests are all waiting for body bytes, none of
/// which arrived for this long, counts as idle for the connection cap.
pub(super) const STALL: Duration = Duration::from_secs(1);
/// A connection asked to close gets this long before another is asked.
pub(super) const SHED_PENDING: Duration = Duration::from_secs(2);

/// Why a connection may be closed for a new client, best choice first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Sheddable {
    /// Served a request, has none in progress.
    Idle,
    /// Every request in progress waits for body bytes that stopped coming.
    Stalled,
    /// TLS done, no request yet.
    Silent,
    /// Still in the TLS handshake.
    Handshaking,
}

impl Sheddable {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle the longest",
            Self::Stalled => "request bodies stalled the longest",
            Self::Silent => "no request since the handshake",
            Self::Handshaking => "TLS handshake not finished",
        }
    }
}

/// The open connections, for shedding at the cap.
#[derive(Default)]
pub(super) struct Connections {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Connections {
    pub(super) fn add(&self) -> Arc<Conn> {
        let now = Instant::now();
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            active: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            times: Mutex::new(Times {
                opened: now,
                handshaken: None,
                first_request: None,
                idle_since: now,
                body_progress: now,
                shed_at: None,
            }),
            shed: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            close: Notify::new(),
            cut: Notify::new(),
        });
        self.lock().insert(conn.id, Arc::clone(&conn));
        conn
    }

    pub(super) fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// A connection was asked to close recently and is still open.
    pub(super) fn shed_pending(&self) -> bool {
        self.lock().values().any(|c| {
            c.times()
                .shed_at
                .is_some_and(|at| at.elapsed() < SHED_PENDING)
        })
    }

    /// The connection to close for a new client, and why.
    pub(super) fn victim(&self) -> Option<(Arc<Conn>, Sheddable)> {
        let now = Instant::now();
        self.lock()
            .values()
            .filter_map(|c| c.sheddable(now).map(|(why, since)| (why, since, c)))
            .min_by_key(|(why, since, c)| (*why, *since, c.id))
            .map(|(why, _, c)| (Arc::clone(c), why))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        // A poisoned map is still a valid map.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// When things happened on a connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct Times {
    opened: Instant,
    handshaken: Option<Instant>,
    first_request: Option<Instant>,
    /// When the last request ended (or the handshake, before any).
    idle_since: Instant,
    /// When a request body last received bytes (or a request started).
    pub(super) body_progress: Instant,
    shed_at: Option<Instant>,
}

/// One connection: its requests in progress (and how many of them still
/// wait for body bytes), when things happened, and ways to ask it to close.
pub(super) struct Conn {
    pub(super) id: u64,
    /// Requests in progress: from the headers until the response is sent.
    pub(super) active: AtomicUsize,
    /// Requests in progress whose body has not been read to its end.
    pub(super) receiving: AtomicUsize,
    pub(super) times: Mutex<Times>,
    pub(super) shed: AtomicBool,
    /// Shed because its request bodies stalled: those requests are answered.
    pub(super) stalled: AtomicBool,
    /// Wakes the connection task to close.
    pub(super) close: Notify,
    /// Wakes requests whose body is incomplete, to answer 503 on shedding.
    pub(super) cut: Notify,
}

impl Conn {
    pub(super) fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Since when no request has been in progress; `None` while one is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let since = self.times().idle_since;
        (self.active.load(Ordering::SeqCst) == 0).then_some(since)
    }

    /// Whether (and since when) this connection may be closed for a new
    /// client.
    pub(super) fn sheddable(&self, now: Instant) -> Option<(Sheddable, Instant)> {
        if self.shed.load(Ordering::SeqCst) {
            return None;
        }
        let t = *self.times();
        let old_enough =
            |since: Instant| now.saturating_duration_since(since) >= NEW_CONNECTION_GRACE;
        let Some(handshaken) = t.handshaken else {
            return old_enough(t.opened).then_some((Sheddable::Handshaking, t.opened));
        };
        if t.first_request.is_none() {
            return old_enough(handshaken).then_some((Sheddable::Silent, handshaken));
        }
        let active = self.active.load(Ordering::SeqCst);
        let receiving = self.receiving.load(Ordering::SeqCst);
        if active == 0 {
            Some((Sheddable::Idle, t.idle_since))
        } else if receiving >= active && now.saturating_duration_since(t.body_progress) >= STALL {
            Some((Sheddable::Stalled, t.body_progress))
        } else {
            None
        }
    }

    pub(super) fn shed(&self, why: Sheddable) {
        self.times().shed_at = Some(Instant::now());
        self.stalled
            .store(why == Sheddable::Stalled, Ordering::SeqCst);
        self.shed.store(true, Ordering::SeqCst);
        self.close.notify_one();
        self.cut.notify_waiters();
    }

    pub(super) fn handshaken(&self) {
        let now = Instant::now();
        let mut t = self.times();
        t.handshaken = Some(now);
        t.idle_since = now;
    }

    pub(super) fn enter(self: &Arc<Self>) -> InProgress {
        let now = Instant::now();
        {
            let mut t = self.times();
            t.first_request.get_or_insert(now);
            t.body_progress = now;
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        InProgress(Arc::clone(self))
    }

    pub(super) fn body_progress(&self) {
        self.times().body_progress = Instant::now();
    }

    /// Completes once the connection has had no request in progress for
    /// `timeout`.
    pub(super) async fn idle_for(&self, timeout: Duration) {
        loop {
            match self.idle_since() {
                Some(since) if since.elapsed() >= timeout => return,
                Some(since) => tokio::time::sleep_until((since + timeout).into()).await,
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

/// A request in progress on a connection; its end (the response sent, or
/// given up) makes the connection idle.
pub(super) struct InProgress(Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.times().idle_since = Instant::now();
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}
