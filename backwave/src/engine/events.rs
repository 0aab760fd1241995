//! What the engine tells the application as it happens: one [`Event`] per change the engine
//! decides on (an attempt's verdict, a result discarded, a lapse reaped, the store lost and found
//! again, a schedule's tick), handed to the hooks of [`Engine::on_event`](super::Engine::on_event)
//! in order. Each is made where the engine emits its `tracing` event for the same change, from
//! the same decision: this file decides nothing, it only carries the news. A hook never reaches
//! the store, and its panic is caught here.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, SystemTime};

use crate::error::panic_message;
use crate::model::{JobId, JobState, Millis, QuarantineReason};
use crate::store::{Fenced, Outcome};

/// Something the engine did or found, as the hooks of [`Engine::on_event`](super::Engine::on_event)
/// hear it: each is told once, after the store recorded it (for an attempt's verdict) or when
/// the engine's view changed (for the store's health), never once per poll. Times in
/// [`Millis`] are the store's clock (milliseconds since the Unix epoch).
///
/// The same changes are `tracing` events too (see [`crate::telemetry`]); an event here carries
/// the data an application acts on, where `tracing` carries what a log or a trace shows. New
/// kinds of event may come in later versions: match with a `_` arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The handler succeeded and the store recorded it: the job is Succeeded.
    #[non_exhaustive]
    Succeeded {
        /// The job.
        job: JobId,
        /// Its wire name.
        wire_name: String,
        /// Its queue.
        queue: String,
        /// The attempt that succeeded (1 for the first).
        attempt: u32,
        /// How long the handler ran.
        took: Duration,
    },
    /// The attempt failed and the job is Scheduled again, for another attempt at `retry_at`.
    #[non_exhaustive]
    Failed {
        /// The job.
        job: JobId,
        /// Its wire name.
        wire_name: String,
        /// Its queue.
        queue: String,
        /// The attempt that failed.
        attempt: u32,
        /// The job's attempt budget.
        max_attempts: u32,
        /// When the next attempt is due (store clock), when the engine knows the wait.
        retry_at: Option<Millis>,
        /// The failure's message (the handler's error, or what the store made of its result).
        cause: String,
    },
    /// The attempt failed on the job's last attempt: the job is Dead-Lettered, waiting for an
    /// operator to requeue it ([`Store::requeue`]).
    ///
    /// [`Store::requeue`]: crate::Store::requeue
    #[non_exhaustive]
    DeadLettered {
        /// The job.
        job: JobId,
        /// Its wire name.
        wire_name: String,
        /// Its queue.
        queue: String,
        /// The last attempt.
        attempt: u32,
        /// The job's attempt budget.
        max_attempts: u32,
        /// The failure's message: the job's terminal cause.
        cause: String,
    },
    /// The job could not run here (no handler for its wire name, or a payload that does not
    /// decode): it is Quarantined, and no handler ran it.
    #[non_exhaustive]
    Quarantined {
        /// The job.
        job: JobId,
        /// Its wire name.
        wire_name: String,
        /// Its queue.
        queue: String,
        /// Why it could not run.
        why: QuarantineReason,
        /// The cause in words, as the job's terminal cause keeps it.
        cause: String,
    },
    /// An operator's cancel ended the job (its handler stopped when asked, or never started).
    #[non_exhaustive]
    Cancelled {
        /// The job.
        job: JobId,
        /// Its wire name.
        wire_name: String,
        /// Its queue.
        queue: String,
        /// The attempt that was cancelled.
        attempt: u32,
    },
    /// This worker lost the lease of an attempt whose handler still runs (it lapsed and was
    /// reaped, or the job was claimed again): the handler is told to stop
    /// ([`JobContext::cancelled`](super::JobContext::cancelled) fires), and its result will be
    /// discarded ([`Event::Discarded`]).
    #[non_exhaustive]
    LeaseLost {
        /// The job.
        job: JobId,
        /// The attempt whose lease was lost.
        attempt: u32,
    },
    /// An attempt's result was thrown away: its lease had been lost before the store took the
    /// outcome, so the fence refused it (another attempt owns the job now).
    #[non_exhaustive]
    Discarded {
        /// The job.
        job: JobId,
        /// The attempt whose result was discarded.
        attempt: u32,
        /// Why, in words.
        why: String,
    },
    /// This engine's reaper ended an attempt whose lease had lapsed (its worker died or stalled):
    /// a failed attempt, retried or dead-lettered as its budget says.
    #[non_exhaustive]
    LapseReaped {
        /// The job.
        job: JobId,
        /// The attempt that lapsed.
        attempt: u32,
        /// The worker that held the lease.
        owner: String,
        /// Where the job went: Scheduled (a retry), Dead-Lettered, or Cancelled.
        state: JobState,
    },
    /// The engine cannot reach its store: every try of one of its threads has failed for a
    /// second. Told once per outage; the engine keeps its leases and retries.
    #[non_exhaustive]
    StoreUnavailable {
        /// The store (a URL's password redacted).
        store: String,
        /// When the failing tries began.
        since: SystemTime,
        /// The latest error.
        error: String,
    },
    /// The store answers again after a [`Event::StoreUnavailable`]: told once, when the last
    /// of the engine's threads that found it failing finds it working.
    #[non_exhaustive]
    StoreAvailable {
        /// The store (a URL's password redacted).
        store: String,
        /// How long the outage lasted.
        outage: Duration,
    },
    /// This engine fired a schedule's tick: `job` was enqueued for it.
    #[non_exhaustive]
    ScheduleFired {
        /// The schedule's name.
        schedule: String,
        /// The tick (store clock).
        tick: Millis,
        /// The job made for it.
        job: JobId,
    },
    /// This engine consumed a unique schedule's tick without a job: the previous tick's job
    /// still holds the schedule's key.
    #[non_exhaustive]
    ScheduleSkipped {
        /// The schedule's name.
        schedule: String,
        /// The tick (store clock).
        tick: Millis,
        /// The job still pending.
        held_by: JobId,
    },
    /// Due jobs of a worker group's queues wait although it has room: a pause or a limit holds
    /// them back. Told once when that starts; [`Event::HeldBackEnded`] when it ends.
    #[non_exhaustive]
    HeldBack {
        /// The worker group.
        group: String,
        /// Its queues.
        queues: Vec<String>,
    },
    /// The due work a [`Event::HeldBack`] told of is no longer held back.
    #[non_exhaustive]
    HeldBackEnded {
        /// The worker group.
        group: String,
    },
}

impl Event {
    /// The event's kind in a word (`"dead-lettered"`, `"store-unavailable"`, …): a metric's
    /// label, a log line's key.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Succeeded { .. } => "succeeded",
            Event::Failed { .. } => "failed",
            Event::DeadLettered { .. } => "dead-lettered",
            Event::Quarantined { .. } => "quarantined",
            Event::Cancelled { .. } => "cancelled",
            Event::LeaseLost { .. } => "lease-lost",
            Event::Discarded { .. } => "discarded",
            Event::LapseReaped { .. } => "lapse-reaped",
            Event::StoreUnavailable { .. } => "store-unavailable",
            Event::StoreAvailable { .. } => "store-available",
            Event::ScheduleFired { .. } => "schedule-fired",
            Event::ScheduleSkipped { .. } => "schedule-skipped",
            Event::HeldBack { .. } => "held-back",
            Event::HeldBackEnded { .. } => "held-back-ended",
        }
    }

    /// The job it is about, if it is about one.
    pub fn job(&self) -> Option<JobId> {
        match self {
            Event::Succeeded { job, .. }
            | Event::Failed { job, .. }
            | Event::DeadLettered { job, .. }
            | Event::Quarantined { job, .. }
            | Event::Cancelled { job, .. }
            | Event::LeaseLost { job, .. }
            | Event::Discarded { job, .. }
            | Event::LapseReaped { job, .. }
            | Event::ScheduleFired { job, .. } => Some(*job),
            _ => None,
        }
    }
}

/// What an attempt's events say of its job beside its lease `(job, attempt)`: kept with the
/// claim from the claim to the store's word on it.
#[derive(Clone, Debug, Default)]
pub(super) struct About {
    /// Shared with the attempt's [`JobContext`](crate::JobContext): a claim copies each name once.
    pub wire_name: std::sync::Arc<str>,
    pub queue: std::sync::Arc<str>,
    pub max_attempts: u32,
    /// The wait a failure of this attempt retries after, from the job's delay table.
    pub retry_ms: Option<u64>,
}

/// The store's word (`fenced`) on the `outcome` of attempt `lease`, as an event: the one place
/// that reads a verdict. `now` is the store's clock at the answer; `took`, the handler's run.
pub(super) fn verdict(
    (job, attempt): (JobId, u32),
    about: &About,
    fenced: Fenced,
    outcome: &Outcome,
    now: Millis,
    took: Duration,
) -> Event {
    let (wire_name, queue, max_attempts) = (about.wire_name.to_string(), about.queue.to_string(), about.max_attempts);
    let cause = match outcome {
        Outcome::Failed { message, .. } => message.clone(),
        Outcome::Quarantined { cause, .. } => cause.clone(),
        // A success the store turned into a failure: only the output limit does that.
        Outcome::SucceededWith { .. } => "the handler's output is over the store's output_limit".into(),
        Outcome::Succeeded | Outcome::Cancelled => "failed".into(),
    };
    match fenced {
        Fenced::Accepted(JobState::Succeeded) => Event::Succeeded { job, wire_name, queue, attempt, took },
        Fenced::Accepted(JobState::Scheduled) => {
            let wait = match outcome {
                Outcome::Failed { retry_in: Some(d), .. } => Some(crate::retry::duration_ms(*d)),
                _ => about.retry_ms,
            };
            let retry_at = wait.map(|ms| now.saturating_add(ms.min(i64::MAX as u64) as Millis));
            Event::Failed { job, wire_name, queue, attempt, max_attempts, retry_at, cause }
        }
        Fenced::Accepted(JobState::DeadLettered) => {
            Event::DeadLettered { job, wire_name, queue, attempt, max_attempts, cause }
        }
        Fenced::Accepted(JobState::Quarantined) => {
            let why = match outcome {
                Outcome::Quarantined { reason, .. } => *reason,
                _ => QuarantineReason::NoHandler,
            };
            Event::Quarantined { job, wire_name, queue, why, cause }
        }
        Fenced::Accepted(JobState::Cancelled) => Event::Cancelled { job, wire_name, queue, attempt },
        // An attempt never ends Running or Waiting: the fence refused it.
        Fenced::Accepted(JobState::Running | JobState::Waiting) | Fenced::Rejected => {
            discarded((job, attempt), LEASE_LOST)
        }
    }
}

/// The result of attempt `lease` was thrown away, `why`.
pub(super) fn discarded((job, attempt): (JobId, u32), why: &str) -> Event {
    Event::Discarded { job, attempt, why: why.to_string() }
}

/// Why the fence refused a result.
pub(super) const LEASE_LOST: &str = "the lease was lost before the outcome was recorded";
/// Why a result of a run that this worker claimed again was dropped before it reached the store.
pub(super) const CLAIMED_AGAIN: &str = "the lease was lost and the job claimed again before the outcome was recorded";

/// An application's hook ([`Engine::on_event`](super::Engine::on_event)).
pub(super) type Hook = Box<dyn Fn(&Event) + Send + Sync>;

/// The engine's hooks, shared by its threads.
#[derive(Default)]
pub(super) struct Hooks(Vec<Hook>);

impl Hooks {
    pub fn new(hooks: Vec<Hook>) -> Self {
        Hooks(hooks)
    }

    /// Whether nobody listens: an event need not be made.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An attempt's verdict (or its discarding), told on its `span` and to the hooks; made only
    /// when either listens (this is every job's path). `now` is the store's clock.
    pub fn verdict(&self, span: &tracing::Span, now: Millis, event: impl FnOnce() -> Event) {
        if span.is_disabled() && self.is_empty() {
            return;
        }
        let event = event();
        crate::telemetry::verdict(span, &event, now);
        self.tell(&event);
    }

    /// Hand `event` to every hook, in the order they were added. A hook that panics is logged
    /// and the next still hears the event: a hook can neither stall the engine's decisions (the
    /// store has recorded them already) nor end its thread.
    pub fn tell(&self, event: &Event) {
        for (i, hook) in self.0.iter().enumerate() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(event))) {
                tracing::error!(
                    backwave.hook = i,
                    backwave.event = event.kind(),
                    messaging.message.id = event.job().map(tracing::field::display),
                    panic = %panic_message(&*panic),
                    "an event hook panicked: the engine goes on"
                );
            }
        }
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} hooks", self.0.len())
    }
}
