//! Incident actions beyond requeue and cancel: run now (a Scheduled job due at once, attempt
//! and budget untouched), bulk cancel of a filtered set, and payload repair of a terminal job.
//! Each is one library call that the CLI and the dashboard share, planned first (exact counts),
//! then done in [`BULK_BATCH`](super::BULK_BATCH)-sized transactions that check `operate` and leave every job whole
//! and audited if the run is killed between two of them.

use serde::Serialize;

use super::query::JobFilter;
use crate::model::{JobId, JobState, Millis};

/// The result of making one job due now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum RunNowResult {
    /// Scheduled and due now; `was_due_at` is when it would have run (already past when it
    /// was due anyway, in which case nothing changed).
    Due {
        /// The due time it had.
        was_due_at: Millis,
    },
    /// Not Scheduled (Running, or terminal: requeue is the verb for those): nothing changed.
    NotScheduled {
        /// The state it is in.
        state: JobState,
    },
    /// No job has this id.
    NotFound,
}

/// What a bulk run-now would do, counted at the moment it was planned.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunNowPlan {
    /// The store's time when the plan counted.
    #[serde(skip)]
    pub as_of: Millis,
    /// Exactly the jobs counted: what [`crate::Store::run_now_planned`] acts on.
    #[serde(skip)]
    pub scope: JobFilter,
    /// Scheduled jobs that match.
    pub matching: u64,
    /// Of those, jobs due later that would be due now.
    pub would_run_now: u64,
    /// Of those, jobs already due: left as they are.
    pub already_due: u64,
}

/// What a bulk cancel would do, counted at the moment it was planned.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CancelPlan {
    /// The store's time when the plan counted.
    #[serde(skip)]
    pub as_of: Millis,
    /// Exactly the jobs counted: what [`crate::Store::cancel_planned`] acts on.
    #[serde(skip)]
    pub scope: JobFilter,
    /// Scheduled and Running jobs that match.
    pub matching: u64,
    /// Scheduled jobs that would end Cancelled at once.
    pub would_cancel: u64,
    /// Running jobs whose handler would be asked to stop (they end Cancelled when it does, or
    /// when their lease lapses).
    pub would_ask_to_stop: u64,
    /// Running jobs someone already asked to stop: left as they are.
    pub already_asked: u64,
}

impl CancelPlan {
    /// The plan from the three counts each backend's one statement takes at `as_of`: what is
    /// neither cancelled at once nor asked to stop was already asked. Its scope is set by the
    /// caller that keeps the filter.
    pub(crate) fn counted(matching: u64, would_cancel: u64, would_ask_to_stop: u64, as_of: Millis) -> CancelPlan {
        CancelPlan {
            matching,
            would_cancel,
            would_ask_to_stop,
            already_asked: matching - would_cancel - would_ask_to_stop,
            as_of,
            scope: JobFilter::default(),
        }
    }
}

/// What a bulk cancel did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CancelDone {
    /// Scheduled jobs Cancelled at once.
    pub cancelled: u64,
    /// Running jobs asked to stop (each ends Cancelled when its handler stops or its lease
    /// lapses).
    pub asked_to_stop: u64,
    /// Waiting jobs outside the set cancelled with it: dependents of a job it cancelled, in a
    /// workflow that cancels the dependents of a job that does not succeed
    /// ([`OnFailure::Cancel`](crate::workflow::OnFailure::Cancel)).
    pub dependents_cancelled: u64,
    /// Jobs that came to match after the plan counted (enqueued since): left alone, since the
    /// operator confirmed the plan's set.
    pub arrived_after_plan: u64,
}

/// What a payload repair did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PayloadEdit {
    /// The state the job was in (Dead-Lettered or Quarantined).
    pub from: JobState,
    /// The old payload's size (the old payload itself is in the audit entry).
    pub old_bytes: usize,
    /// The new payload's size.
    pub new_bytes: usize,
    /// Also requeued, in the same transaction.
    pub requeued: bool,
    /// Asked to requeue, but the job with this id holds the repaired job's unique key: the
    /// payload is repaired, the job stays where it was.
    pub conflict: Option<JobId>,
}

/// What a change of a job's priority did ([`Store::set_priority`](crate::Store::set_priority)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PriorityChange {
    /// The job's state (the change applies whatever it is: a terminal job keeps it for a
    /// requeue).
    pub state: JobState,
    /// The priority it had.
    pub from: u8,
    /// The priority it has now.
    pub to: u8,
}
