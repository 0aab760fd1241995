//! Incident actions beyond requeue and cancel: run now (a Scheduled job due at once, attempt
//! and budget untouched), bulk cancel of a filtered set, and payload repair of a terminal job.
//! Each is one library call that the CLI and the dashboard share, planned first (exact counts),
//! then done in [`BULK_BATCH`]-sized transactions that check `operate` and leave every job whole
//! and audited if the run is killed between two of them.

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};
use serde::Serialize;

use super::operator::{BulkProgress, CancelResult, SqliteOps, BULK_BATCH};
use super::ops;
use super::ops::jobs::OperatorTx;
pub(crate) use super::ops::jobs::{cancel_scope, check_new_payload, run_now_scope};
use super::query::JobFilter;
use super::row::parse_id;
use super::SqliteStore;
use crate::error::Result;
use crate::model::{JobId, JobState, Millis, Permission};

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

impl SqliteStore {
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let now = self.now();
        self.write(|c| ops::jobs::run_now(&mut SqliteOps { c, now }, actor, ids))
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let now = self.now();
        self.read(|c| ops::jobs::check_run_now(&mut SqliteOps { c, now }, ids))
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let now = self.now();
        self.read(|c| ops::jobs::check_cancel(&mut SqliteOps { c, now }, ids))
    }

    pub fn plan_run_now(&self, filter: &JobFilter) -> Result<RunNowPlan> {
        let scope = run_now_scope(filter);
        let now = self.now();
        self.read(|c| {
            let matching = count_where(c, &scope, "created_at <= ?", &[now])?;
            let would_run_now = count_where(c, &scope, "created_at <= ? AND due_at > ?", &[now, now])?;
            Ok(RunNowPlan {
                matching,
                would_run_now,
                already_due: matching - would_run_now,
                as_of: now,
                scope: JobFilter::default(),
            })
        })
    }

    pub fn run_now_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let scope = run_now_scope(filter);
        let started = self.now();
        self.write(|tx| super::admin::require(tx, actor, Permission::Operate))?;
        let total = self.read(|c| count_where(c, &scope, "created_at <= ? AND due_at > ?", &[started, started]))?;
        self.in_batches(
            actor,
            total,
            |c, _| {
                // Every job of the run gets the run's start as its due time, so a batch never
                // finds the jobs of an earlier one again.
                let ids = ids_where(c, &scope, "created_at <= ? AND due_at > ?", &[started, started])?;
                let tx = &mut SqliteOps { c, now: started };
                let mut jobs = tx.jobs(&ids, true)?;
                Ok(ops::jobs::run_now_found(tx, started, actor, &ids, &mut jobs)?.1)
            },
            progress,
        )
    }

    pub fn plan_cancel(&self, filter: &JobFilter) -> Result<CancelPlan> {
        let scope = cancel_scope(filter);
        let now = self.now();
        self.read(|c| {
            let matching = count_where(c, &scope, "created_at <= ?", &[now])?;
            let would_cancel = count_where(c, &scope, "created_at <= ? AND state = 'scheduled'", &[now])?;
            let would_ask_to_stop = count_where(
                c,
                &scope,
                "created_at <= ? AND state = 'running' AND cancel_requested_by IS NULL",
                &[now],
            )?;
            Ok(CancelPlan::counted(matching, would_cancel, would_ask_to_stop, now))
        })
    }

    pub fn cancel_matching(
        &self,
        actor: &str,
        filter: &JobFilter,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        let scope = cancel_scope(filter);
        let started = self.now();
        self.write(|tx| super::admin::require(tx, actor, Permission::Operate))?;
        let pending = "created_at <= ? AND (state = 'scheduled' OR cancel_requested_by IS NULL)";
        let total = self.read(|c| count_where(c, &scope, pending, &[started]))?;
        let mut done = CancelDone::default();
        self.in_batches(
            actor,
            total,
            |c, now| {
                let ids = ids_where(c, &scope, pending, &[started])?;
                let tx = &mut SqliteOps { c, now };
                let mut jobs = tx.jobs(&ids, true)?;
                let batch = ops::jobs::cancel_found(tx, now, actor, &ids, &mut jobs)?.1;
                done.cancelled += batch.cancelled;
                done.asked_to_stop += batch.asked_to_stop;
                Ok(batch.cancelled + batch.asked_to_stop)
            },
            progress,
        )?;
        Ok(done)
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        check_new_payload(payload)?;
        let now = self.now();
        self.write(|c| ops::jobs::edit_payload(&mut SqliteOps { c, now }, actor, id, payload, requeue))
    }
}

/// `count(*)` of the filter's jobs that also meet `extra` (its `?`s bound to `extra_args`).
fn count_where(c: &Connection, filter: &JobFilter, extra: &str, extra_args: &[Millis]) -> Result<u64> {
    let (clause, mut args) = filter.where_clause();
    args.extend(extra_args.iter().map(|v| Value::Integer(*v)));
    Ok(c.prepare_cached(&format!("SELECT count(*) FROM jobs WHERE {clause} AND {extra}"))?
        .query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

/// Ids of up to [`BULK_BATCH`] of the filter's jobs that also meet `extra`.
fn ids_where(c: &Connection, filter: &JobFilter, extra: &str, extra_args: &[Millis]) -> Result<Vec<JobId>> {
    let (clause, mut args) = filter.where_clause();
    args.extend(extra_args.iter().map(|v| Value::Integer(*v)));
    Ok(c.prepare_cached(&format!("SELECT id FROM jobs WHERE {clause} AND {extra} LIMIT {BULK_BATCH}"))?
        .query_map(params_from_iter(args), |r| parse_id(r, 0))?
        .collect::<Result<_, _>>()?)
}
