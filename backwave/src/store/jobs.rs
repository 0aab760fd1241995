//! The engine's path through the store, as both backends take and answer it: what a worker
//! asks for when it claims, how an attempt ended, and what the fence and a heartbeat answered.
//! The statements are each dialect's `jobs.rs` (`sqlite/`, `postgres/`); the policy above them,
//! `ops/claim.rs` and `ops/outcome.rs`.

use std::time::Duration;

use crate::model::{FailureDetail, JobId, JobState, Millis, QuarantineReason};
use crate::retry::RetryPolicy;

/// What a worker asks for when it claims.
#[derive(Clone, Debug)]
pub struct ClaimRequest<'a> {
    /// The claiming worker: each claimed job's lease owner.
    pub worker_id: &'a str,
    /// The claiming worker group, written on each job.
    pub group: &'a str,
    /// Queues in the order to try them: the first with a due job is served first.
    pub queues: &'a [String],
    /// At most this many jobs.
    pub limit: usize,
    /// How long each lease lasts without a heartbeat.
    pub lease: Duration,
    /// The group's retry policy: the budget and delay table written into each job it claims.
    pub policy: &'a RetryPolicy,
    /// Wire names whose handlers have a retry policy of their own (`Registration::retry`): a
    /// claimed job of one gets that policy's attempts and delay table instead of `policy`'s.
    /// Usually empty.
    pub handler_policies: &'a [(String, RetryPolicy)],
}

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The handler returned `Ok(())`.
    Succeeded,
    /// The handler returned `Ok(())` having recorded `output`
    /// ([`JobContext::set_output`](crate::JobContext::set_output)): JSON bytes, kept with the job
    /// in the same statement as its success. An output over the store's
    /// [`output_limit`](crate::Store::output_limit) is not written: the store records the attempt as
    /// failed instead (retried, or dead-lettered on the last attempt), with a cause naming the
    /// limit and the size.
    SucceededWith {
        /// The recorded output.
        output: Vec<u8>,
    },
    /// The handler returned an error, panicked, or timed out on its own. `detail` is `None`
    /// when this host does not capture failure detail; the message is kept either way.
    /// `retry_in`, when the handler chose it ([`HandlerError::retry_in`](crate::engine::HandlerError::retry_in),
    /// e.g. an upstream's Retry-After), is this retry's wait in place of the delay table's.
    Failed {
        /// The error's message: the job's terminal cause if this was its last attempt.
        message: String,
        /// The failure detail captured, if any.
        detail: Option<FailureDetail>,
        /// The handler's own wait before the retry, if it chose one.
        retry_in: Option<Duration>,
    },
    /// The handler stopped because an operator asked. Without a request on the row this is a
    /// plain failure: only an operator cancel produces Cancelled.
    Cancelled,
    /// The job could not be routed: it never ran.
    Quarantined {
        /// Why it could not run.
        reason: QuarantineReason,
        /// The cause in words, kept as the job's terminal cause.
        cause: String,
    },
}

/// One outcome for one attempt of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// The job.
    pub job_id: JobId,
    /// The worker that ran it: the fence compares it with the lease owner.
    pub worker_id: String,
    /// The attempt that ran: the fence compares it with the job's.
    pub attempt: u32,
    /// How it ended.
    pub outcome: Outcome,
}

impl Completion {
    /// The outcome recorded for a claim a hand-back did not undo: either the lease is gone (the
    /// fence rejects this too) or an operator asked to cancel the job, which a Cancelled outcome
    /// honours. The one rule both backends' `hand_back` apply.
    pub(crate) fn not_handed_back(job_id: JobId, worker_id: &str, attempt: u32) -> Completion {
        Completion { job_id, worker_id: worker_id.to_string(), attempt, outcome: Outcome::Cancelled }
    }
}

/// Whether the fence let an outcome through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fenced {
    /// Recorded; the job is now in this state.
    Accepted(JobState),
    /// The job is no longer Running under this `(worker, attempt)`: nothing changed.
    Rejected,
}

/// What a heartbeat learned about one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Still ours, renewed if it was due ([`renewal_threshold`]). `cancel_requested` tells
    /// the handler an operator wants it to stop.
    Held {
        /// Whether an operator asked the job to stop.
        cancel_requested: bool,
    },
    /// The job is no longer ours: the lease lapsed and was reaped, or it was cancelled.
    Lost,
}

/// The longest gap between an engine's heartbeats, whatever the lease: the heartbeat is also
/// how an operator's cancel reaches a running or buffered job, so it should arrive within seconds.
const MAX_HEARTBEAT_GAP: Duration = Duration::from_secs(2);

/// How often an engine's heartbeat goes out for the leases it holds under `lease`: every third
/// of the lease, at most every 2 s.
pub(crate) fn heartbeat_every(lease: Duration) -> Duration {
    (lease / 3).min(MAX_HEARTBEAT_GAP)
}

/// The time left on a lease (in milliseconds) under which a heartbeat for `lease` renews it:
/// two thirds of the lease plus one gap between an engine's heartbeats (a third of the lease, at
/// most 2 s). A heartbeat still reads every lease it names (whether it is held, whether an
/// operator asked its job to stop), but rewrites a job's row only when the lease would
/// otherwise be under two thirds of its length by the next heartbeat: so no lease of an engine
/// heartbeating on time falls under two thirds, as when every heartbeat renewed, while a long
/// job's row, and its index entries, are written about every third of its lease (every 18-20 s
/// with the default minute) rather than at every heartbeat (every 2 s). A lease already lapsed
/// is always renewed, and one that would end later than the heartbeat's lease is cut to it (a
/// lease of 0 ends it now).
pub fn renewal_threshold(lease: Duration) -> Millis {
    let lease_ms = lease.as_millis().min(i64::MAX as u128 / 2) as Millis;
    let gap_ms = heartbeat_every(lease).as_millis() as Millis;
    lease_ms - lease_ms / 3 + gap_ms
}
