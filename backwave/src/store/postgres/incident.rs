//! Incident actions beyond requeue and cancel on PostgreSQL: run now, bulk cancel of a filtered
//! set, and payload repair of a terminal job; planned first (exact counts, one snapshot), then
//! done in batches that lock the jobs they decide on (see `operator.rs`), with the same log
//! entries and audit rows as SQLite.

use std::collections::HashMap;

use uuid::Uuid;

use super::admin::{audit, require};
use super::filter::where_clause;
use super::operator::{
    ask_to_stop_locked, cancel_locked, decide_cancel, lock_ids, lock_matching, matching_ids, requeue_ids,
};
use super::{is_unique_violation, PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{JobId, JobState, Millis, Permission};
use crate::store::admin::check_payload_size;
use crate::store::incident::{
    cancel_scope, check_editable, check_new_payload, payload_edit_detail, run_now_detail, run_now_scope,
};
use crate::store::unique;
use crate::store::{
    BulkProgress, CancelDone, CancelPlan, CancelResult, JobFilter, PayloadEdit, RequeueResult, RunNowPlan, RunNowResult,
};

impl PgStore {
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            let now = tx.now()?;
            let mut jobs = lock_ids(tx, ids)?;
            let mut moved = Vec::new();
            let results = ids
                .iter()
                .map(|id| match jobs.get_mut(&id.0) {
                    None => RunNowResult::NotFound,
                    Some(job) if job.state != JobState::Scheduled => RunNowResult::NotScheduled { state: job.state },
                    Some(job) => {
                        let was_due_at = job.due_at;
                        if was_due_at > now {
                            job.due_at = now;
                            moved.push((id.0, was_due_at));
                        }
                        RunNowResult::Due { was_due_at }
                    }
                })
                .collect();
            run_now_locked(tx, now, actor, &moved)?;
            Ok(results)
        })
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let found = self.states_and_due(ids)?;
        Ok(ids
            .iter()
            .map(|id| match found.get(&id.0) {
                None => RunNowResult::NotFound,
                Some((JobState::Scheduled, due_at)) => RunNowResult::Due { was_due_at: *due_at },
                Some((state, _)) => RunNowResult::NotScheduled { state: *state },
            })
            .collect())
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let found = self.states_and_due(ids)?;
        Ok(ids
            .iter()
            .map(|id| match found.get(&id.0) {
                None => CancelResult::NotFound,
                Some((JobState::Scheduled, _)) => CancelResult::Cancelled,
                Some((JobState::Running, _)) => CancelResult::CancelRequested,
                Some((state, _)) => CancelResult::NotCancellable { state: *state },
            })
            .collect())
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
                let moved: Vec<(Uuid, Millis)> =
                    lock_matching(tx, &scope, &pending, chunk)?.iter().map(|(id, job)| (*id, job.due_at)).collect();
                Ok((run_now_locked(tx, started, actor, &moved)?, ()))
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
            Ok(CancelPlan {
                matching: matching as u64,
                would_cancel: would_cancel as u64,
                would_ask_to_stop: would_ask_to_stop as u64,
                already_asked: (matching - would_cancel - would_ask_to_stop) as u64,
                as_of: now,
                scope: JobFilter::default(),
            })
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
                let (mut cancel, mut ask) = (Vec::new(), Vec::new());
                for (id, mut job) in lock_matching(tx, &scope, &pending, chunk)? {
                    decide_cancel(id, &mut job, &mut cancel, &mut ask);
                }
                let cancelled = cancel_locked(tx, now, actor, &cancel)?;
                let asked_to_stop = ask_to_stop_locked(tx, now, actor, &ask)?;
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
        self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            check_payload_size(payload.len(), super::admin::payload_limit(tx)?, None)?;
            let now = tx.now()?;
            let found = tx.query_opt(
                "SELECT state, payload, wire_name, unique_key FROM jobs WHERE id = $1 FOR UPDATE",
                &[&id.0],
            )?;
            let Some(row) = found else { return Err(Error::JobNotFound(id.to_string())) };
            let (state, old): (JobState, Vec<u8>) = (super::row::state(&row, 0)?, row.try_get(1)?);
            let (wire_name, key): (String, Option<String>) = (row.try_get(2)?, row.try_get(3)?);
            check_editable(id, state)?;
            let new_key = key.and_then(|k| unique::edited_key(&k, &wire_name, &old, payload));
            tx.execute(
                "UPDATE jobs SET payload = $2, unique_key = coalesce($4, unique_key), updated_at = $3 WHERE id = $1",
                &[&id.0, &payload, &now, &new_key],
            )
            .map_err(|e| if is_unique_violation(&e) { unique::edit_collides(id) } else { e })?;
            audit(tx, now, actor, "edit-payload", Some(id), &payload_edit_detail(&old, payload))?;
            let (requeued, conflict) = match requeue.then(|| requeue_ids(tx, now, actor, &[id])).transpose()? {
                Some(r) => match r.first() {
                    Some(RequeueResult::Requeued { .. }) => (true, None),
                    Some(RequeueResult::Conflict { existing }) => (false, Some(*existing)),
                    _ => (false, None),
                },
                None => (false, None),
            };
            Ok(PayloadEdit { from: state, old_bytes: old.len(), new_bytes: payload.len(), requeued, conflict })
        })
    }

    /// The state and due time of each job `ids` names that exists, in one snapshot.
    fn states_and_due(&self, ids: &[JobId]) -> Result<HashMap<Uuid, (JobState, Millis)>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        self.read(|tx| {
            tx.query("SELECT id, state, due_at FROM jobs WHERE id = ANY($1)", &[&ids])?
                .iter()
                .map(|r| Ok((r.try_get(0)?, (super::row::state(r, 1)?, r.try_get(2)?))))
                .collect()
        })
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

/// Make the locked Scheduled jobs `jobs` (id, the due time it had, after `now`; each once) due
/// at `now`, each audited with when it would have run. Returns how many. (By id alone: see
/// `requeue_locked`.)
fn run_now_locked(tx: &mut Tx<'_>, now: Millis, actor: &str, jobs: &[(Uuid, Millis)]) -> Result<u64> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = jobs.iter().map(|(id, _)| *id).collect();
    let details: Vec<String> = jobs.iter().map(|(_, due_at)| run_now_detail(*due_at)).collect();
    tx.execute(
        "WITH moved AS (
             UPDATE jobs SET due_at = $2, updated_at = $2
             WHERE id = ANY($1)
             RETURNING id
         )
         INSERT INTO audit (at, actor, action, job_id, detail)
         SELECT $2, $3, 'run-now', m.id, o.detail
         FROM moved m JOIN unnest($1::uuid[], $4::text[]) WITH ORDINALITY AS o(id, detail, n) ON o.id = m.id
         ORDER BY o.n",
        &[&ids, &now, &actor, &details],
    )
}
