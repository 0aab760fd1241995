//! What the engine's threads share: the dispatcher's inbox ([`Done`], what handler threads,
//! the recorder, the doorbell and the engine's handle tell a group's dispatcher), a group's
//! counters and stop flag, and the process's own quiet. Plain state and messages, no engine logic:
//! every part of the engine may use it, and it uses none of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::Span;

use crate::error::{Error, Result};
use crate::store::{Completion, Fenced, Outcome};

/// What the dispatcher hears: from a handler thread, the engine's handle, or its recorder.
pub(super) enum Done {
    Finished {
        run: u64,
        outcome: Outcome,
        /// The attempt's span, for the store's word on the outcome (disabled without a
        /// subscriber).
        span: Span,
        /// How long the handler ran.
        took: Duration,
    },
    /// Nothing to record; the dispatcher should look at its stop flag.
    Wake,
    /// Jobs of the group's queues may be due now (`wake.rs`): claim now rather than at the
    /// next poll.
    Work,
    /// The recorder thread's answer on a batch of outcomes (`recorder.rs`).
    Recorded(Recorded),
}

/// A batch written (or refused) and the store's word on each outcome, in the batch's order.
pub(super) type Recorded = (Vec<Completion>, Result<Vec<Fenced>>);

/// What a group's dispatcher counts and its handle reads.
#[derive(Default)]
pub(super) struct Counters {
    pub claimed: AtomicU64,
    pub succeeded: AtomicU64,
    pub retried: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub quarantined: AtomicU64,
    pub cancelled: AtomicU64,
    pub fenced_out: AtomicU64,
    pub reaped: AtomicU64,
    pub handed_back: AtomicU64,
    pub stopped: AtomicU64,
    pub abandoned: AtomicU64,
    pub errors: AtomicU64,
    /// Of `errors`, those of the group's own thread (its dispatcher and chores), which its view
    /// of the store goes by (`outage.rs`); the rest are the engine's listener thread's, counted
    /// in the first group's stats. Counted apart rather than subtracted: a difference of the two
    /// read while the listener counted one error once showed a turn an error it never had.
    own: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn error(&self, e: &Error) {
        self.failed(&e.to_string());
    }

    pub fn failed(&self, why: &str) {
        Self::add(&self.own, 1);
        self.counted(why);
    }

    fn counted(&self, why: &str) {
        Self::add(&self.errors, 1);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
    }

    /// A store error of the listener thread.
    pub fn listener_error(&self, e: &Error) {
        self.counted(&e.to_string());
    }

    /// The errors of the group's own thread (its dispatcher and chores) so far.
    pub fn own_errors(&self) -> u64 {
        self.own.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> String {
        self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default()
    }
}

/// This process's own quiet: asked by [`EngineHandle::quiet`](super::EngineHandle::quiet) or
/// SIGTSTP, lifted by [`EngineHandle::resume`](super::EngineHandle::resume). Each ask is
/// counted, so one that comes after an operator lifted the quiet from the store (`bw workers
/// resume`) quiets the process again: a flag alone would still be set and the second SIGTSTP
/// would change nothing.
#[derive(Default)]
pub(super) struct ProcessQuiet {
    on: AtomicBool,
    asks: AtomicU64,
}

impl ProcessQuiet {
    /// Quiet the process (from any thread: the SIGTSTP waiter calls it).
    pub fn ask(&self) {
        self.on.store(true, Ordering::SeqCst);
        self.asks.fetch_add(1, Ordering::SeqCst);
    }

    pub fn lift(&self) {
        self.on.store(false, Ordering::SeqCst);
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// How many times the process was asked to be quiet.
    pub fn asks(&self) -> u64 {
        self.asks.load(Ordering::SeqCst)
    }
}

/// A group's shutdown request and the end of its grace period.
#[derive(Default)]
pub(super) struct StopFlag {
    pub requested: AtomicBool,
    pub grace: Mutex<Option<Instant>>,
    /// A shutdown, not a drop: at the deadline, running handlers are asked to stop and get half
    /// a second to do so (their leases then end at once). A dropped handle waits for none of
    /// them, as a crash would.
    pub wait_for_stopped: AtomicBool,
}
