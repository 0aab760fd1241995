//! Whether the engine can reach its store, said once per change: one warning when the first of
//! its threads (a group's dispatcher, the listener, the schedule ticker) finds the store failing,
//! one event when the last of them finds it working again, never one per poll or per retry.
//! Each thread keeps its own [`Watch`] and reports to the shared [`StoreHealth`] only when its
//! own view changes, so a healthy engine pays one branch per turn.
//!
//! A thread counts the store as failing once every try for [`FAILING_AFTER`] has failed: a
//! connection the server cut fails the one call that finds it cut and works at the next (the
//! driver reconnects), and that is no outage to wake anyone for.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long a thread's tries must have failed, without one answer between, before the store
/// counts as failing.
pub(super) const FAILING_AFTER: Duration = Duration::from_secs(1);

use super::events::{Event, Hooks};
use crate::store::StoreTarget;

/// The engine's one view of its store.
pub(super) struct StoreHealth {
    /// Shown on both events (a URL's password redacted): which store, for an application with
    /// several.
    store: String,
    down: Mutex<Down>,
    hooks: Arc<Hooks>,
}

#[derive(Default)]
struct Down {
    /// The threads that find the store failing now.
    threads: usize,
    since: Option<Instant>,
}

impl StoreHealth {
    pub fn new(target: &StoreTarget, hooks: Arc<Hooks>) -> Arc<Self> {
        Arc::new(StoreHealth { store: target.to_string(), down: Mutex::default(), hooks })
    }

    /// The first failing thread tells (outside the lock: a slow hook holds up no other thread's
    /// report; the same thread's later `working` comes after it).
    fn failing(&self, thread: &str, error: &str, since: Instant) {
        let mut d = self.down.lock().unwrap_or_else(|p| p.into_inner());
        d.threads += 1;
        if d.threads != 1 {
            return;
        }
        d.since = Some(since);
        drop(d);
        tracing::warn!(
            backwave.store = %self.store,
            backwave.thread = thread,
            error,
            "store unavailable: the engine keeps its leases and retries"
        );
        let since = SystemTime::now().checked_sub(since.elapsed()).unwrap_or_else(SystemTime::now);
        self.hooks.tell(&Event::StoreUnavailable { store: self.store.clone(), since, error: error.to_string() });
    }

    /// The last thread to find the store working again tells.
    fn working(&self, thread: &str) {
        let mut d = self.down.lock().unwrap_or_else(|p| p.into_inner());
        d.threads = d.threads.saturating_sub(1);
        if d.threads != 0 {
            return;
        }
        let outage = d.since.take().map_or(Duration::ZERO, |s| s.elapsed());
        drop(d);
        let down_ms = outage.as_millis() as u64;
        tracing::info!(backwave.store = %self.store, backwave.thread = thread, down_ms, "store available again");
        self.hooks.tell(&Event::StoreAvailable { store: self.store.clone(), outage });
    }
}

/// One thread's view of the store: failing or working, as its last tries found it.
pub(super) struct Watch {
    health: Arc<StoreHealth>,
    thread: String,
    /// When the first of the tries that have failed since the last answer began.
    failing_since: Option<Instant>,
    /// Told to the engine's view: the tries have failed for [`FAILING_AFTER`].
    failing: bool,
}

impl Watch {
    pub fn new(health: &Arc<StoreHealth>, thread: impl Into<String>) -> Self {
        Watch { health: Arc::clone(health), thread: thread.into(), failing_since: None, failing: false }
    }

    /// The store failed this thread's tries that began at `began` (the last with `error`).
    pub fn failed(&mut self, error: &str, began: Instant) {
        let since = *self.failing_since.get_or_insert(began);
        if !self.failing && since.elapsed() >= FAILING_AFTER {
            self.failing = true;
            self.health.failing(&self.thread, error, since);
        }
    }

    /// The store answered this thread's last tries.
    pub fn worked(&mut self) {
        self.failing_since = None;
        if self.failing {
            self.failing = false;
            self.health.working(&self.thread);
        }
    }
}

impl Drop for Watch {
    /// A thread that ends while the store fails (a shutdown during an outage) no longer counts.
    fn drop(&mut self) {
        if self.failing {
            let mut d = self.health.down.lock().unwrap_or_else(|p| p.into_inner());
            d.threads = d.threads.saturating_sub(1);
        }
    }
}
