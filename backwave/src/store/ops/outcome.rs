//! How an attempt ends, written once for both backends: what a reported outcome (or a lapsed
//! lease) does to the Running job behind the fence, its new state, and the log entry that
//! records it. A backend supplies the fenced read, the row's update and the log insert
//! ([`AttemptTx`]).

use std::collections::HashSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::{FailureDetail, JobId, JobState, Millis, QuarantineReason};
use crate::retry::{duration_ms, RetryPolicy};
use crate::store::{Completion, Fenced, Outcome};

/// The cause of a job whose lease lapsed on its last attempt.
pub const LEASE_EXPIRED: &str = "lease expired";

/// The reason logged when a worker hands back a job it claimed but never started.
pub const HANDED_BACK: &str = "handed back unstarted: the claim is undone and costs no attempt";

/// A look for lapsed leases that the store kept waiting this long for a lock (SQLite's write
/// lock held by another process, or by one frozen holding it; a PostgreSQL lock on `jobs`)
/// reaps nothing and confirms nothing: every worker's heartbeat may have waited behind the same
/// lock as long, so a lease that lapsed meanwhile says nothing about its worker. Measured as
/// the wait itself, with no network round trip in it.
pub const HELD_UP: Duration = Duration::from_millis(200);

/// A lapsed lease as a look found it: the attempt, and the expiry it had then. A heartbeat in
/// between moves the expiry, so one lapse is never confirmed across a renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lapse {
    /// The job whose lease lapsed.
    pub job_id: JobId,
    /// The attempt that held it.
    pub attempt: u32,
    /// The expiry the lease had when the look found it.
    pub expired_at: Millis,
}

/// Which of the lapsed leases a look reaps.
#[derive(Clone, Copy, Debug)]
pub enum Confirmed<'a> {
    /// Every one it finds (a tool, a test, a demo).
    All,
    /// Only those an earlier look, not held up either, found with the same expiry (the
    /// engine's reaper; see `engine/maintenance.rs`). The others are returned as seen.
    Seen(&'a HashSet<Lapse>),
}

/// What a look for lapsed leases did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reap {
    /// How many it turned into failed attempts.
    pub reaped: usize,
    /// The lapsed leases it found but did not reap, not yet confirmed.
    pub seen: Vec<Lapse>,
    /// The attempts it ended, in the order it ended them.
    pub ended: Vec<Reaped>,
}

/// One lapsed attempt a reap ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// The job whose attempt lapsed.
    pub job_id: JobId,
    /// The attempt that lapsed.
    pub attempt: u32,
    /// The worker whose lease lapsed.
    pub worker_id: String,
    /// Where the job went: Scheduled (a retry), Dead-Lettered, or Cancelled (an operator had
    /// asked it to stop).
    pub state: JobState,
}

/// Reap, among the lapsed leases a look `found` (oldest expiry first, with the expiry each had),
/// those `confirmed`; report the others as seen.
pub(crate) fn reap_found(
    tx: &mut impl AttemptTx,
    now: Millis,
    found: Vec<(RunningAttempt, Millis)>,
    confirmed: Confirmed<'_>,
) -> Result<Reap> {
    let mut reap = Reap::default();
    for (run, expired_at) in found {
        let lapse = Lapse { job_id: run.id, attempt: run.attempt, expired_at };
        match confirmed {
            Confirmed::Seen(seen) if !seen.contains(&lapse) => reap.seen.push(lapse),
            _ => {
                let state = lapse_attempt(tx, now, &run)?;
                reap.reaped += 1;
                reap.ended.push(Reaped {
                    job_id: run.id,
                    attempt: run.attempt,
                    worker_id: run.lease_owner.clone(),
                    state,
                });
            }
        }
    }
    Ok(reap)
}

/// The reason logged when a handler reports its own, unrequested cancellation.
pub const UNREQUESTED_CANCEL: &str = "cancelled without an operator request";

/// The narrow view of one Running attempt.
pub(crate) struct RunningAttempt {
    pub(crate) id: JobId,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: Option<u32>,
    /// The job's delay table as JSON text.
    pub(crate) delay_table: Option<String>,
    pub(crate) cancel_requested_by: Option<String>,
    pub(crate) lease_owner: String,
}

impl RunningAttempt {
    /// The attempt budget. A job claimed by another program that wrote no budget gets the
    /// default policy's, rather than dying on its first failure.
    pub(crate) fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or_else(|| RetryPolicy::default().max_attempts())
    }

    /// The wait after this attempt fails, from the job's own delay table. A missing or short
    /// table (written by another program) falls back to the default policy, never to zero: a
    /// zero wait would turn a failing job into a hot loop.
    pub(crate) fn next_delay_ms(&self) -> u64 {
        let n = self.attempt.max(1);
        self.delay_table
            .as_deref()
            .and_then(|t| serde_json::from_str::<Vec<u64>>(t).ok())
            .and_then(|t| t.get(n as usize - 1).copied())
            .unwrap_or_else(|| duration_ms(RetryPolicy::default().delay(n, 0)))
    }
}

/// One transition entry to append.
pub(crate) struct Entry<'a> {
    pub job_id: JobId,
    pub at: Millis,
    pub from: Option<JobState>,
    pub to: JobState,
    pub attempt: u32,
    pub worker_id: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub failure_detail: Option<&'a str>,
    pub detail_status: Option<&'static str>,
}

impl<'a> Entry<'a> {
    pub fn new(job_id: JobId, at: Millis, from: Option<JobState>, to: JobState, attempt: u32) -> Self {
        Entry {
            job_id,
            at,
            from,
            to,
            attempt,
            worker_id: None,
            actor: None,
            reason: None,
            failure_detail: None,
            detail_status: None,
        }
    }
}

/// What a reported outcome does to the attempt it ends: decided here once for both backends,
/// which then write it each in their own SQL.
pub(crate) enum Decision<'a> {
    /// Succeeded, with the output the handler recorded (already checked against the limit).
    Succeed {
        output: Option<&'a [u8]>,
    },
    /// A failed attempt: retried at the job's delay table (or after `retry_in`, the handler's
    /// own wait), or dead-lettered on the last one. `detail` is `None` for no failure detail
    /// status at all, `Some(None)` for a failure whose detail was not captured.
    Fail {
        message: &'a str,
        detail: Option<Option<&'a FailureDetail>>,
        retry_in: Option<Duration>,
    },
    /// Ended by an operator's cancel; `failure` is the handler's error when it stopped by
    /// failing, kept on the log entry since the job will not run again to show it.
    Cancel {
        actor: &'a str,
        failure: Option<(&'a str, Option<&'a FailureDetail>)>,
    },
    Quarantine {
        reason: QuarantineReason,
        cause: &'a str,
    },
}

pub(crate) fn decide<'a>(outcome: &'a Outcome, cancel_requested_by: Option<&'a str>, capture: bool) -> Decision<'a> {
    match outcome {
        Outcome::Succeeded => Decision::Succeed { output: None },
        Outcome::SucceededWith { output } => Decision::Succeed { output: Some(output) },
        Outcome::Cancelled => match cancel_requested_by {
            Some(actor) => Decision::Cancel { actor, failure: None },
            // Only an operator cancel produces Cancelled: the handler's own cancellation (a
            // timeout inside it) is a plain failed attempt.
            None => Decision::Fail { message: UNREQUESTED_CANCEL, detail: Some(None), retry_in: None },
        },
        Outcome::Failed { message, detail, retry_in } => {
            let detail = if capture { detail.as_ref() } else { None };
            match cancel_requested_by {
                // An operator asked it to stop: retrying would defy them. The failure is kept
                // in the log entry that ends the job.
                Some(actor) => Decision::Cancel { actor, failure: Some((message, detail)) },
                None => Decision::Fail { message, detail: Some(detail), retry_in: *retry_in },
            }
        }
        Outcome::Quarantined { reason, cause } => Decision::Quarantine { reason: *reason, cause },
    }
}

/// The terminal cause of a job an operator cancelled, and its log entry's reason.
pub(crate) fn cancel_texts(actor: &str, failure: Option<&str>) -> (String, String) {
    let cause = format!("cancelled by {actor}");
    let reason = match failure {
        Some(message) => format!("{cause}; the handler stopped with: {message}"),
        None => cause.clone(),
    };
    (cause, reason)
}

/// A log entry's `detail_status` for a failure whose detail was or was not captured.
pub(crate) fn detail_status(detail: Option<Option<&FailureDetail>>) -> Option<&'static str> {
    detail.map(|d| if d.is_some() { "captured" } else { "not-captured" })
}

pub(crate) fn detail_json(detail: Option<&FailureDetail>) -> Result<Option<String>> {
    detail.map(|d| serde_json::to_string(d).map_err(Error::Encode)).transpose()
}

/// The job row an attempt's end writes; every variant also clears the lease. The terminal ones
/// set `finished_at`, and carry the cause whose fingerprint the row keeps.
pub(crate) enum AttemptEnd<'a> {
    /// Succeeded, keeping the handler's output when it recorded one.
    Succeeded {
        output: Option<&'a [u8]>,
    },
    /// Back to Scheduled, due at `due`.
    Retry {
        due: Millis,
    },
    DeadLettered {
        cause: &'a str,
    },
    Cancelled {
        cause: &'a str,
    },
    Quarantined {
        reason: QuarantineReason,
        cause: &'a str,
    },
}

/// What ending an attempt asks of a backend: statements on a job the caller holds (SQLite's one
/// writer; on PostgreSQL, a row locked by the fenced read).
pub(crate) trait AttemptTx {
    /// The Running attempt `c` reports on, when it is still the one under `c`'s lease.
    fn fenced_attempt(&mut self, c: &Completion) -> Result<Option<RunningAttempt>>;
    /// Write the attempt's end on the job's row, at `now`.
    fn end_attempt(&mut self, id: JobId, now: Millis, end: AttemptEnd<'_>) -> Result<()>;
    /// Append one transition entry.
    fn log(&mut self, e: &Entry<'_>) -> Result<()>;
    /// Record `successes` (no job named twice) behind the fence as a set, each with its output
    /// when it is an [`Outcome::SucceededWith`] (within the limit: checked before), and log each
    /// accepted one (SQLite in the batch's order, PostgreSQL in id order, the order it locks rows
    /// in): the jobs accepted.
    fn succeed_all(&mut self, now: Millis, successes: &[&Completion]) -> Result<HashSet<JobId>>;
    /// Cancel what depends on the jobs `parents`, which just ended Dead-Lettered, Quarantined or
    /// Cancelled, where their workflow cancels dependents ([`OnFailure::Cancel`](crate::workflow::OnFailure));
    /// each logged. Returns how many.
    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64>;
}

/// A batch of outcomes in one transaction, the one rule both backends follow: the successes of
/// jobs the batch names once go through [`AttemptTx::succeed_all`] (one statement for the set:
/// the common case, and most of a drain's writes), every other outcome behind the same fence
/// one at a time, in the batch's order. A job named twice is taken in order: the second report
/// meets the first's result.
pub(crate) fn complete_many<T>(tx: &mut T, now: Millis, completions: &[Completion]) -> Result<Vec<Fenced>>
where
    T: AttemptTx + super::settings::SettingRead,
{
    let mut seen = HashSet::new();
    let repeated: HashSet<JobId> = completions.iter().filter(|c| !seen.insert(c.job_id)).map(|c| c.job_id).collect();
    // Only a batch carrying an output reads the output limit, in the transaction that writes.
    let output_limit = match completions.iter().any(|c| output_of(c).is_some()) {
        true => Some(super::settings::output_limit(tx)?),
        false => None,
    };
    let over = |c: &Completion| over_limit(c, output_limit).is_some();
    let batched = |c: &Completion| {
        matches!(c.outcome, Outcome::Succeeded | Outcome::SucceededWith { .. })
            && !repeated.contains(&c.job_id)
            && !over(c)
    };
    let successes: Vec<&Completion> = completions.iter().filter(|c| batched(c)).collect();
    let accepted = if successes.is_empty() { HashSet::new() } else { tx.succeed_all(now, &successes)? };
    // Only a failure reads whether its detail is captured.
    let capture = completions.iter().all(batched) || super::settings::detail_enabled(tx)?;
    completions
        .iter()
        .map(|c| match batched(c) {
            true if accepted.contains(&c.job_id) => Ok(Fenced::Accepted(JobState::Succeeded)),
            true => Ok(Fenced::Rejected),
            false => complete_within(tx, now, capture, c, output_limit),
        })
        .collect()
}

/// Whether `completions` are plain successes, each of another job: [`complete_many`] then reads
/// nothing (no output limit, no detail setting) and writes with its one statement
/// ([`AttemptTx::succeed_all`]), which a backend may run without a transaction of its own,
/// answering with [`fenced_successes`].
// Only PostgreSQL, whose round trips are its latency, runs these apart.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn successes_alone(completions: &[Completion]) -> bool {
    let mut seen = HashSet::new();
    completions.iter().all(|c| matches!(c.outcome, Outcome::Succeeded) && seen.insert(c.job_id))
}

/// [`complete_many`]'s answer for a batch of [`successes_alone`], from the jobs its statement
/// moved (`accepted`): each moved one Succeeded, the others rejected by the fence.
// Only PostgreSQL, whose round trips are its latency, runs these apart.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn fenced_successes(completions: &[Completion], accepted: &HashSet<JobId>) -> Vec<Fenced> {
    completions
        .iter()
        .map(|c| match accepted.contains(&c.job_id) {
            true => Fenced::Accepted(JobState::Succeeded),
            false => Fenced::Rejected,
        })
        .collect()
}

/// The output a completion carries, if any.
pub(crate) fn output_of(c: &Completion) -> Option<&[u8]> {
    match &c.outcome {
        Outcome::SucceededWith { output } => Some(output),
        _ => None,
    }
}

/// The failure an output over `limit` turns its success into: the message names the limit and
/// the size. Never cut to fit: a part of a result would pass for the whole of it.
pub(crate) fn over_limit(c: &Completion, limit: Option<u64>) -> Option<String> {
    let (output, limit) = (output_of(c)?, limit?);
    (output.len() as u64 > limit).then(|| {
        format!(
            "the handler's output is {} bytes, over the store's output_limit of {limit} bytes: it was not \
             recorded; record a smaller output (a reference to data kept elsewhere), or raise the limit",
            output.len()
        )
    })
}

/// The kind of the failure detail of an attempt whose output was over the limit.
pub const OUTPUT_TOO_LARGE: &str = "output over output_limit";

/// [`complete`] knowing the output limit (`None`: no output in the batch).
fn complete_within(
    tx: &mut impl AttemptTx,
    now: Millis,
    capture: bool,
    c: &Completion,
    output_limit: Option<u64>,
) -> Result<Fenced> {
    let Some(message) = over_limit(c, output_limit) else { return complete(tx, now, capture, c) };
    let failed = Completion {
        job_id: c.job_id,
        worker_id: c.worker_id.clone(),
        attempt: c.attempt,
        outcome: Outcome::Failed {
            detail: Some(FailureDetail {
                kind: OUTPUT_TOO_LARGE.into(),
                message: message.clone(),
                chain: Vec::new(),
                backtrace: None,
            }),
            message,
            retry_in: None,
        },
    };
    complete(tx, now, capture, &failed)
}

/// One reported outcome behind the fence: a report for an attempt no longer under its lease is
/// Rejected; otherwise the outcome is decided and written.
pub(crate) fn complete(tx: &mut impl AttemptTx, now: Millis, capture: bool, c: &Completion) -> Result<Fenced> {
    let Some(run) = tx.fenced_attempt(c)? else { return Ok(Fenced::Rejected) };
    let decision = decide(&c.outcome, run.cancel_requested_by.as_deref(), capture);
    Ok(Fenced::Accepted(end(tx, now, &run, Some(&c.worker_id), decision)?))
}

/// An attempt whose lease lapsed: cancelled when an operator asked it to stop, otherwise a
/// failed attempt (no failure detail exists) with [`LEASE_EXPIRED`] as its message.
fn lapse_attempt(tx: &mut impl AttemptTx, now: Millis, run: &RunningAttempt) -> Result<JobState> {
    let decision = match run.cancel_requested_by.as_deref() {
        Some(actor) => Decision::Cancel { actor, failure: None },
        None => Decision::Fail { message: LEASE_EXPIRED, detail: None, retry_in: None },
    };
    end(tx, now, run, Some(&run.lease_owner), decision)
}

/// Write `decision` for the Running attempt `run`, with its log entry; returns the job's state.
pub(crate) fn end(
    tx: &mut impl AttemptTx,
    now: Millis,
    run: &RunningAttempt,
    worker: Option<&str>,
    decision: Decision<'_>,
) -> Result<JobState> {
    // Declared before the entry, which borrows them.
    let json: Option<String>;
    let texts: (String, String);
    let mut e = Entry::new(run.id, now, Some(JobState::Running), JobState::Succeeded, run.attempt);
    e.worker_id = worker;
    match decision {
        Decision::Succeed { output } => {
            tx.end_attempt(run.id, now, AttemptEnd::Succeeded { output })?;
            tx.log(&e)?;
        }
        Decision::Fail { message, detail, retry_in } => {
            // `detail` is `None` for a lapsed lease (no detail exists), and `Some(None)` for a
            // failure whose detail was not captured.
            json = detail_json(detail.flatten())?;
            e.reason = Some(message);
            e.failure_detail = json.as_deref();
            e.detail_status = detail_status(detail);
            if run.attempt >= run.max_attempts() {
                e.to = JobState::DeadLettered;
                tx.end_attempt(run.id, now, AttemptEnd::DeadLettered { cause: message })?;
            } else {
                e.to = JobState::Scheduled;
                let wait = retry_in.map_or_else(|| run.next_delay_ms(), crate::retry::duration_ms);
                let due = now.saturating_add(wait.min(i64::MAX as u64) as Millis);
                tx.end_attempt(run.id, now, AttemptEnd::Retry { due })?;
            }
            tx.log(&e)?;
            if e.to == JobState::DeadLettered {
                tx.cancel_dependents(now, &[run.id])?;
            }
        }
        Decision::Cancel { actor, failure } => {
            // The handler's error, when it stopped by failing, is kept on the entry: the job
            // will not run again to show it.
            texts = cancel_texts(actor, failure.map(|(message, _)| message));
            json = detail_json(failure.and_then(|(_, d)| d))?;
            tx.end_attempt(run.id, now, AttemptEnd::Cancelled { cause: &texts.0 })?;
            e.to = JobState::Cancelled;
            e.actor = Some(actor);
            e.reason = Some(&texts.1);
            e.failure_detail = json.as_deref();
            e.detail_status = detail_status(failure.map(|(_, d)| d));
            tx.log(&e)?;
            tx.cancel_dependents(now, &[run.id])?;
        }
        Decision::Quarantine { reason, cause } => {
            tx.end_attempt(run.id, now, AttemptEnd::Quarantined { reason, cause })?;
            e.to = JobState::Quarantined;
            e.reason = Some(cause);
            tx.log(&e)?;
            tx.cancel_dependents(now, &[run.id])?;
        }
    }
    Ok(e.to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(id: JobId, outcome: Outcome) -> Completion {
        Completion { job_id: id, worker_id: "w".into(), attempt: 1, outcome }
    }

    #[test]
    fn only_plain_successes_of_distinct_jobs_are_successes_alone() {
        let (a, b) = (JobId::new(), JobId::new());
        assert!(successes_alone(&[done(a, Outcome::Succeeded), done(b, Outcome::Succeeded)]));
        assert!(!successes_alone(&[done(a, Outcome::Succeeded), done(a, Outcome::Succeeded)]), "a job twice");
        let output = Outcome::SucceededWith { output: b"{}".to_vec() };
        assert!(!successes_alone(&[done(a, Outcome::Succeeded), done(b, output)]), "an output: its limit is read");
        assert!(!successes_alone(&[done(a, Outcome::Cancelled)]), "not a success");
        let accepted: HashSet<JobId> = [a].into();
        assert_eq!(
            fenced_successes(&[done(a, Outcome::Succeeded), done(b, Outcome::Succeeded)], &accepted),
            [Fenced::Accepted(JobState::Succeeded), Fenced::Rejected]
        );
    }
}
