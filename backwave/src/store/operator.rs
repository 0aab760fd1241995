//! What the operator actions that change jobs answer, on both backends: the result of
//! requeueing, cancelling and purging one job, and a bulk run's progress. The actions are the
//! dialects' `operator.rs`; their policy, `ops/jobs.rs` and `ops/bulk.rs`.

use serde::Serialize;

use crate::model::{JobId, JobState};

/// The result of requeueing one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum RequeueResult {
    /// Back to Scheduled, due now, budget reset; `from` is the terminal state it left.
    Requeued {
        /// The terminal state it left.
        from: JobState,
    },
    /// Not Dead-Lettered or Quarantined: nothing changed.
    NotRequeueable {
        /// The state it is in.
        state: JobState,
    },
    /// Its unique key is held by the job `existing` (Scheduled or Running, or in another state
    /// its rule keeps the key in): requeued, it would be a second job with that key, so nothing
    /// changed.
    Conflict {
        /// The job holding the key.
        existing: JobId,
    },
    /// No job has this id (perhaps deleted by the retention sweep).
    NotFound,
}

/// The result of cancelling one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum CancelResult {
    /// A Scheduled job, Cancelled at once.
    Cancelled,
    /// A Running job, asked to stop: it ends Cancelled when its handler stops or its lease lapses.
    CancelRequested,
    /// Already terminal: nothing changed.
    NotCancellable {
        /// The terminal state it is in.
        state: JobState,
    },
    /// No job has this id.
    NotFound,
}

/// The result of purging one job by id ([`Store::purge_jobs`](crate::Store::purge_jobs)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum PurgeResult {
    /// Deleted with its log; `state` is the terminal state it was in.
    Deleted {
        /// The terminal state it was in.
        state: JobState,
    },
    /// Not terminal (Scheduled or Running): nothing changed. Cancel it first.
    NotTerminal {
        /// The state it is in.
        state: JobState,
    },
    /// No job has this id.
    NotFound,
}

/// Progress of a bulk action, reported after each committed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BulkProgress {
    /// Jobs changed so far.
    pub done: u64,
    /// Jobs that matched when the run started.
    pub total: u64,
}

/// Rows a bulk batch touches: about 10-20 ms of write lock on a small machine.
pub const BULK_BATCH: usize = 500;
