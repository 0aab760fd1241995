//! The engine's path through the store: enqueue, claim under a lease, heartbeat, record an
//! outcome behind the fence, and reap lapsed leases. Outcomes count only if the job is still
//! Running under the same `(worker_id, attempt)`: a stale worker's word changes nothing.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::row::{job_from_row, JOB_COLUMNS};
use super::Store;
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, FailureDetail, Job, JobId, JobState, Millis, NewJob, QuarantineReason};
use crate::retry::{BackoffFn, RetryPolicy};

/// The cause of a job whose lease lapsed on its last attempt.
pub const LEASE_EXPIRED: &str = "lease expired";

/// What a worker asks for when it claims.
#[derive(Clone, Debug)]
pub struct ClaimRequest<'a> {
    pub worker_id: &'a str,
    pub group: &'a str,
    /// Queues in the order to try them: the first with a due job is served first.
    pub queues: &'a [String],
    /// At most this many jobs.
    pub limit: usize,
    pub lease: Duration,
    pub policy: &'a RetryPolicy,
}

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Succeeded,
    /// The handler returned an error, panicked, or timed out on its own. `detail` is `None`
    /// when this host does not capture failure detail; the message is kept either way.
    Failed {
        message: String,
        detail: Option<FailureDetail>,
    },
    /// The handler stopped because an operator asked. Without a request on the row this is a
    /// plain failure: only an operator cancel produces Cancelled.
    Cancelled,
    /// The job could not be routed: it never ran.
    Quarantined {
        reason: QuarantineReason,
        cause: String,
    },
}

/// One outcome for one attempt of one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub job_id: JobId,
    pub worker_id: String,
    pub attempt: u32,
    pub outcome: Outcome,
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
    /// Renewed. `cancel_requested` tells the handler an operator wants it to stop.
    Held { cancel_requested: bool },
    /// The job is no longer ours: the lease lapsed and was reaped, or it was cancelled.
    Lost,
}

impl Store {
    /// Enqueue one job; returns its id.
    pub fn enqueue(&self, job: &NewJob) -> Result<JobId> {
        Ok(self.enqueue_many(std::slice::from_ref(job))?[0])
    }

    /// Enqueue several jobs in one transaction.
    pub fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        for job in jobs {
            validate_name("wire name", &job.wire_name)?;
            validate_name("queue", &job.queue)?;
        }
        let now = self.now();
        self.write(|tx| {
            let mut insert = tx.prepare_cached(
                "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled', ?6, ?7, ?8, ?8)",
            )?;
            let mut ids = Vec::with_capacity(jobs.len());
            for job in jobs {
                let id = JobId::new();
                let labels = serde_json::to_string(&job.labels).map_err(Error::Encode)?;
                let seed = jitter_seed(&id);
                insert.execute(params![
                    id.to_string(),
                    job.wire_name,
                    job.queue,
                    labels,
                    job.payload,
                    job.due_at.unwrap_or(now),
                    seed,
                    now
                ])?;
                log(tx, &Entry::new(id, now, None, JobState::Scheduled, 0))?;
                ids.push(id);
            }
            Ok(ids)
        })
    }

    /// Claim up to `limit` due jobs from the request's queues, in order, under a lease. Each
    /// claim raises the attempt and writes the group's retry budget and delay table into the job.
    pub fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<Job>> {
        let now = self.now();
        let lease_until = now + req.lease.as_millis() as Millis;
        let max = req.policy.max_attempts();
        // Without jitter every job gets the same table: compute it once.
        let shared_table = seed_independent(req.policy).then(|| table_json(req.policy, 0));
        self.write(|tx| {
            let mut pick = tx.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS}, jitter_seed FROM jobs
                 WHERE state = 'scheduled' AND queue = ?1 AND due_at <= ?2 ORDER BY due_at LIMIT ?3"
            ))?;
            let mut update = tx.prepare_cached(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, max_attempts = ?2, delay_table = ?3,
                        lease_owner = ?4, lease_expires_at = ?5, worker_group = ?6, updated_at = ?7
                 WHERE id = ?1 AND state = 'scheduled'",
            )?;
            let mut claimed = Vec::new();
            for queue in req.queues {
                let want = req.limit - claimed.len();
                if want == 0 {
                    break;
                }
                let rows = pick
                    .query_map(params![queue, now, want as i64], |r| Ok((job_from_row(r)?, r.get::<_, i64>(20)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                for (mut job, seed) in rows {
                    let table = match &shared_table {
                        Some(t) => t.clone(),
                        None => table_json(req.policy, seed as u64),
                    };
                    update.execute(params![
                        job.id.to_string(),
                        max,
                        table,
                        req.worker_id,
                        lease_until,
                        req.group,
                        now
                    ])?;
                    job.state = JobState::Running;
                    job.attempt += 1;
                    job.max_attempts = Some(max);
                    job.delay_table = serde_json::from_str(&table).ok();
                    job.lease_owner = Some(req.worker_id.to_string());
                    job.lease_expires_at = Some(lease_until);
                    job.worker_group = Some(req.group.to_string());
                    job.updated_at = now;
                    let mut e = Entry::new(job.id, now, Some(JobState::Scheduled), JobState::Running, job.attempt);
                    e.worker_id = Some(req.worker_id);
                    log(tx, &e)?;
                    claimed.push(job);
                }
            }
            Ok(claimed)
        })
    }

    /// Renew the leases a worker holds, in one transaction. A lease that is no longer ours is
    /// reported `Lost`; a held one tells whether an operator asked the job to stop.
    pub fn heartbeat(&self, worker_id: &str, jobs: &[(JobId, u32)], lease: Duration) -> Result<Vec<LeaseStatus>> {
        let until = self.now() + lease.as_millis() as Millis;
        self.write(|tx| {
            let mut renew = tx.prepare_cached(
                "UPDATE jobs SET lease_expires_at = ?4
                 WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 AND attempt = ?3
                 RETURNING cancel_requested_by IS NOT NULL",
            )?;
            jobs.iter()
                .map(|(id, attempt)| {
                    let held: Option<bool> =
                        renew.query_row(params![id.to_string(), worker_id, attempt, until], |r| r.get(0)).optional()?;
                    Ok(match held {
                        Some(cancel_requested) => LeaseStatus::Held { cancel_requested },
                        None => LeaseStatus::Lost,
                    })
                })
                .collect()
        })
    }

    /// Record one outcome behind the fence.
    pub fn complete(&self, completion: &Completion) -> Result<Fenced> {
        Ok(self.complete_many(std::slice::from_ref(completion))?[0])
    }

    /// Record several outcomes in one transaction, each behind the fence.
    pub fn complete_many(&self, completions: &[Completion]) -> Result<Vec<Fenced>> {
        let now = self.now();
        self.write(|tx| {
            let capture = detail_enabled(tx)?;
            completions.iter().map(|c| complete_one(tx, now, capture, c)).collect()
        })
    }

    /// Turn up to `limit` lapsed leases into failed attempts: retried at the job's own delay
    /// table, Dead-Lettered with cause `lease expired` when the budget is spent, or Cancelled
    /// when an operator had asked. Returns how many were reaped.
    pub fn reap_expired(&self, limit: usize) -> Result<usize> {
        let now = self.now();
        self.write(|tx| {
            let mut pick = tx.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE state = 'running' AND lease_expires_at < ?1
                 ORDER BY lease_expires_at LIMIT ?2"
            ))?;
            let expired = pick.query_map(params![now, limit as i64], job_from_row)?.collect::<Result<Vec<_>, _>>()?;
            for job in &expired {
                let owner = job.lease_owner.as_deref();
                if let Some(actor) = job.cancel_requested_by.as_deref() {
                    finish_cancelled(tx, now, job, owner, actor)?;
                } else {
                    fail_attempt(tx, now, job, owner, LEASE_EXPIRED, None)?;
                }
            }
            Ok(expired.len())
        })
    }
}

fn complete_one(tx: &Connection, now: Millis, capture: bool, c: &Completion) -> Result<Fenced> {
    let job = tx
        .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row([c.job_id.to_string()], job_from_row)
        .optional()?;
    let Some(job) = job else { return Ok(Fenced::Rejected) };
    if job.state != JobState::Running || job.lease_owner.as_deref() != Some(&c.worker_id) || job.attempt != c.attempt {
        return Ok(Fenced::Rejected);
    }
    let worker = Some(c.worker_id.as_str());
    let state = match &c.outcome {
        Outcome::Succeeded => {
            tx.prepare_cached(
                "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
                        finished_at = ?2, updated_at = ?2 WHERE id = ?1",
            )?
            .execute(params![job.id.to_string(), now])?;
            let mut e = Entry::new(job.id, now, Some(JobState::Running), JobState::Succeeded, job.attempt);
            e.worker_id = worker;
            log(tx, &e)?;
            JobState::Succeeded
        }
        Outcome::Cancelled if job.cancel_requested_by.is_some() => {
            finish_cancelled(tx, now, &job, worker, job.cancel_requested_by.as_deref().unwrap_or_default())?
        }
        Outcome::Failed { .. } if job.cancel_requested_by.is_some() => {
            // The handler stopped because it was asked to: that is the cancel, not a failure.
            finish_cancelled(tx, now, &job, worker, job.cancel_requested_by.as_deref().unwrap_or_default())?
        }
        Outcome::Cancelled => fail_attempt(tx, now, &job, worker, "cancelled without an operator request", None)?,
        Outcome::Failed { message, detail } => {
            let detail = if capture { detail.as_ref() } else { None };
            fail_attempt(tx, now, &job, worker, message, Some(detail))?
        }
        Outcome::Quarantined { reason, cause } => {
            tx.prepare_cached(
                "UPDATE jobs SET state = 'quarantined', lease_owner = NULL, lease_expires_at = NULL,
                        quarantine_reason = ?2, terminal_cause = ?3, cause_fingerprint = ?4,
                        finished_at = ?5, updated_at = ?5 WHERE id = ?1",
            )?
            .execute(params![
                job.id.to_string(),
                reason.as_str(),
                cause,
                cause_fingerprint(cause),
                now
            ])?;
            let mut e = Entry::new(job.id, now, Some(JobState::Running), JobState::Quarantined, job.attempt);
            e.worker_id = worker;
            e.reason = Some(cause);
            log(tx, &e)?;
            JobState::Quarantined
        }
    };
    Ok(Fenced::Accepted(state))
}

/// A failed attempt of a Running job: retry at its delay table, or dead-letter when this was
/// attempt `max_attempts`. `detail` is `None` for a lapsed lease (no detail exists), and
/// `Some(None)` for a failure whose detail was not captured.
fn fail_attempt(
    tx: &Connection,
    now: Millis,
    job: &Job,
    worker: Option<&str>,
    message: &str,
    detail: Option<Option<&FailureDetail>>,
) -> Result<JobState> {
    let max = job.max_attempts.unwrap_or(1);
    let mut e = Entry::new(job.id, now, Some(JobState::Running), JobState::Scheduled, job.attempt);
    e.worker_id = worker;
    e.reason = Some(message);
    let detail_json = match detail {
        Some(Some(d)) => Some(serde_json::to_string(d).map_err(Error::Encode)?),
        _ => None,
    };
    e.failure_detail = detail_json.as_deref();
    e.detail_status = match detail {
        None => None,
        Some(Some(_)) => Some("captured"),
        Some(None) => Some("not-captured"),
    };
    if job.attempt >= max {
        tx.prepare_cached(
            "UPDATE jobs SET state = 'dead-lettered', lease_owner = NULL, lease_expires_at = NULL,
                    terminal_cause = ?2, cause_fingerprint = ?3, finished_at = ?4, updated_at = ?4 WHERE id = ?1",
        )?
        .execute(params![job.id.to_string(), message, cause_fingerprint(message), now])?;
        e.to = JobState::DeadLettered;
        log(tx, &e)?;
        Ok(JobState::DeadLettered)
    } else {
        let wait = job.next_delay_ms().unwrap_or(0);
        tx.prepare_cached(
            "UPDATE jobs SET state = 'scheduled', lease_owner = NULL, lease_expires_at = NULL,
                    due_at = ?2, updated_at = ?3 WHERE id = ?1",
        )?
        .execute(params![job.id.to_string(), now.saturating_add(wait as Millis), now])?;
        log(tx, &e)?;
        Ok(JobState::Scheduled)
    }
}

fn finish_cancelled(tx: &Connection, now: Millis, job: &Job, worker: Option<&str>, actor: &str) -> Result<JobState> {
    let cause = format!("cancelled by {actor}");
    tx.prepare_cached(
        "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
                terminal_cause = ?2, cause_fingerprint = ?3, finished_at = ?4, updated_at = ?4 WHERE id = ?1",
    )?
    .execute(params![job.id.to_string(), cause, cause_fingerprint(&cause), now])?;
    let mut e = Entry::new(job.id, now, Some(job.state), JobState::Cancelled, job.attempt);
    e.worker_id = worker;
    e.actor = Some(actor);
    e.reason = Some(&cause);
    log(tx, &e)?;
    Ok(JobState::Cancelled)
}

pub(crate) fn detail_enabled(tx: &Connection) -> Result<bool> {
    let v: Option<String> = tx
        .prepare_cached("SELECT value FROM settings WHERE key = 'failure_detail'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    Ok(v.as_deref() != Some("off"))
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

pub(crate) fn log(tx: &Connection, e: &Entry<'_>) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, actor, reason,
                                  failure_detail, detail_status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        e.job_id.to_string(),
        e.at,
        e.from.map(JobState::as_str),
        e.to.as_str(),
        e.attempt,
        e.worker_id,
        e.actor,
        e.reason,
        e.failure_detail,
        e.detail_status
    ])?;
    Ok(())
}

fn validate_name(what: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::InvalidInput(format!("the {what} must not be empty")));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!("the {what} {value:?} contains control characters")));
    }
    Ok(())
}

/// A per-job jitter seed, taken from the random bits of its id.
fn jitter_seed(id: &JobId) -> i64 {
    let b = id.0.as_bytes();
    i64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

fn seed_independent(policy: &RetryPolicy) -> bool {
    match policy.backoff() {
        BackoffFn::Curve(b) => b.jitter_value() == 0.0,
        BackoffFn::Func(_) => true,
    }
}

fn table_json(policy: &RetryPolicy, seed: u64) -> String {
    let ms: Vec<u64> = policy.delay_table(seed).iter().map(|d| d.as_millis() as u64).collect();
    serde_json::to_string(&ms).unwrap_or_else(|_| "[]".into())
}
