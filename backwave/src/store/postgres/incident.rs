//! Incident actions beyond requeue and cancel on PostgreSQL: run now, bulk cancel of a filtered
//! set, and payload repair of a terminal job; planned first (exact counts, one snapshot), then
//! done in batches that lock the jobs they decide on (see `operator.rs`), with the same log
//! entries and audit rows as SQLite.

use std::collections::HashMap;

use super::admin::require;
use super::filter::where_clause;
use super::operator::{lock_matching, matching_ids};
use super::PgStore;
use crate::error::Result;
use crate::model::{JobId, Millis, Permission};
use crate::store::ops;
use crate::store::ops::jobs::{cancel_scope, check_new_payload, run_now_scope};
use crate::store::ops::jobs::{Cancelled, Found};
use crate::store::{
    BulkProgress, CancelDone, CancelPlan, CancelResult, JobFilter, PayloadEdit, RunNowPlan, RunNowResult,
};

impl PgStore {
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.write(|tx| ops::jobs::run_now(tx, actor, ids))
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.read(|tx| ops::jobs::check_run_now(tx, ids))
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        self.read(|tx| ops::jobs::check_cancel(tx, ids))
    }

    pub fn plan_run_now(&self, filter: &JobFilter) -> Result<RunNowPlan> {
        let scope = run_now_scope(filter);
        let w = where_clause(&scope, 2);
        self.read(|tx| {
            let now = tx.now()?;
            let r = tx.query_one(
                &format!(
                    "SELECT count(*), count(*) FILTER (WHERE due_at > $1) FROM jobs WHERE created_at <= $1 AND {}",
                    w.sql
                ),
                &w.params(&[&now]),
            )?;
            let (matching, would_run_now): (i64, i64) = (r.try_get(0)?, r.try_get(1)?);
            Ok(RunNowPlan {
                matching: matching as u64,
                would_run_now: would_run_now as u64,
                already_due: (matching - would_run_now) as u64,
                as_of: now,
                scope: JobFilter::default(),
            })
        })
    }

    pub fn run_now_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let scope = run_now_scope(filter);
        let (started, ids) = self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            let started = tx.now()?;
            Ok((started, matching_ids(tx, &scope, &run_now_pending(started))?))
        })?;
        // Every job of the run gets the run's start as its due time, as on SQLite.
        let pending = run_now_pending(started);
        self.in_batches(
            actor,
            &ids,
            |tx, _, chunk| {
                let (ids, mut jobs) = locked_set(lock_matching(tx, &scope, &pending, chunk)?);
                Ok((ops::jobs::run_now_found(tx, started, actor, &ids, &mut jobs)?.1, ()))
            },
            |()| {},
            progress,
        )
    }

    pub fn plan_cancel(&self, filter: &JobFilter) -> Result<CancelPlan> {
        let scope = cancel_scope(filter);
        let w = where_clause(&scope, 2);
        self.read(|tx| {
            let now = tx.now()?;
            let r = tx.query_one(
                &format!(
                    "SELECT count(*), count(*) FILTER (WHERE state = 'scheduled'),
                            count(*) FILTER (WHERE state = 'running' AND cancel_requested_by IS NULL)
                     FROM jobs WHERE created_at <= $1 AND {}",
                    w.sql
                ),
                &w.params(&[&now]),
            )?;
            let (matching, would_cancel, would_ask_to_stop): (i64, i64, i64) =
                (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            Ok(CancelPlan::counted(matching as u64, would_cancel as u64, would_ask_to_stop as u64, now))
        })
    }

    pub fn cancel_matching(
        &self,
        actor: &str,
        filter: &JobFilter,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        let scope = cancel_scope(filter);
        let (started, ids) = self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            let started = tx.now()?;
            Ok((started, matching_ids(tx, &scope, &cancel_pending(started))?))
        })?;
        let pending = cancel_pending(started);
        let mut done = CancelDone::default();
        self.in_batches(
            actor,
            &ids,
            |tx, now, chunk| {
                let (ids, mut jobs) = locked_set(lock_matching(tx, &scope, &pending, chunk)?);
                let Cancelled { cancelled, asked_to_stop } =
                    ops::jobs::cancel_found(tx, now, actor, &ids, &mut jobs)?.1;
                Ok((cancelled + asked_to_stop, CancelDone { cancelled, asked_to_stop, arrived_after_plan: 0 }))
            },
            |batch| {
                done.cancelled += batch.cancelled;
                done.asked_to_stop += batch.asked_to_stop;
            },
            progress,
        )?;
        Ok(done)
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        check_new_payload(payload)?;
        self.write(|tx| ops::jobs::edit_payload(tx, actor, id, payload, requeue))
    }
}

/// The Scheduled jobs a run-now started at `started` acts on: made before it and due after it.
/// (`started` is our own integer, not input.)
fn run_now_pending(started: Millis) -> String {
    format!("created_at <= {started} AND due_at > {started}")
}

/// The jobs a bulk cancel started at `started` acts on: made before it, and Scheduled or not
/// yet asked to stop. (`started` is our own integer, not input.)
fn cancel_pending(started: Millis) -> String {
    format!("created_at <= {started} AND (state = 'scheduled' OR cancel_requested_by IS NULL)")
}

/// A locked batch as the shared policy takes it: the ids in order, and what each was found as.
fn locked_set(locked: Vec<(JobId, Found)>) -> (Vec<JobId>, HashMap<JobId, Found>) {
    (locked.iter().map(|(id, _)| *id).collect(), locked.into_iter().collect())
}
