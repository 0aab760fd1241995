//! Operator actions that change jobs on PostgreSQL: requeue, cancel, the retention sweep and
//! purge, and the batch machinery the bulk actions of `incident.rs` share. Where SQLite's one
//! writer decided alone, each action here first locks the rows it decides on (`FOR UPDATE`, in
//! id order so that two operators lock in the same order) and re-reads them, so that two
//! operators, or an operator and a worker finishing the job, never both act on one job. Each
//! checks `operate` in the transaction that acts, and writes the same log entries and audit rows
//! as SQLite.

use std::collections::HashMap;

use postgres::types::ToSql;
use uuid::Uuid;

use super::filter::where_clause;
use super::{PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, JobId, JobState, Millis, Permission};
use crate::store::operator::{cancel_cause, purge_detail, REQUEUE_REASON};
use crate::store::preview::requeue_scope;
use crate::store::{BulkProgress, CancelResult, JobFilter, RequeueResult, BULK_BATCH};

/// A job as the transaction that locked it sees it: what the operator actions decide on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Locked {
    pub state: JobState,
    pub attempt: i64,
    pub cancel_requested: bool,
    pub due_at: Millis,
}

const LOCKED_COLUMNS: &str = "id, state, attempt, cancel_requested_by IS NOT NULL, due_at";

fn locked(r: &postgres::Row) -> Result<(Uuid, Locked)> {
    Ok((
        r.try_get(0)?,
        Locked {
            state: super::row::state(r, 1)?,
            attempt: r.try_get(2)?,
            cancel_requested: r.try_get(3)?,
            due_at: r.try_get(4)?,
        },
    ))
}

impl PgStore {
    pub fn requeue(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
        self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            let now = tx.now()?;
            requeue_ids(tx, now, actor, ids)
        })
    }

    pub fn requeue_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let scope = requeue_scope(filter, self.db_now()?);
        let total = self.count_where(&scope, "true")?;
        self.in_batches(
            actor,
            total,
            |tx, now| {
                let Some(locked) = lock_batch(tx, &scope, "true")? else { return Ok(None) };
                let ids: Vec<Uuid> = locked.iter().map(|(id, _)| *id).collect();
                Ok(Some((requeue_locked(tx, now, actor, &ids)?, ())))
            },
            |()| {},
            progress,
        )
    }

    pub fn cancel(&self, actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        self.write(|tx| {
            require(tx, actor, Permission::Operate)?;
            let now = tx.now()?;
            let mut jobs = lock_ids(tx, ids)?;
            let mut cancel = Vec::new();
            let mut ask = Vec::new();
            let results = ids
                .iter()
                .map(|id| match jobs.get_mut(&id.0) {
                    None => CancelResult::NotFound,
                    Some(job) => decide_cancel(id.0, job, &mut cancel, &mut ask),
                })
                .collect();
            cancel_locked(tx, now, actor, &cancel)?;
            ask_to_stop_locked(tx, now, actor, &ask)?;
            Ok(results)
        })
    }

    /// One batch of the retention sweep, by whichever host holds the sweep's advisory lock; a
    /// host that does not get it sweeps nothing this time (another is sweeping).
    pub fn sweep(&self, cutoff: Millis, limit: usize) -> Result<u64> {
        self.write(|tx| {
            if !tx.try_lock("sweep")? {
                return Ok(0);
            }
            delete_finished(tx, cutoff, limit, Wait::Skip)
        })
    }

    pub fn sweep_expired(&self, limit: usize) -> Result<u64> {
        let keep = self.retention()?.as_millis().min(i64::MAX as u128) as Millis;
        self.write(|tx| {
            if !tx.try_lock("sweep")? {
                return Ok(0);
            }
            let cutoff = tx.now()?.saturating_sub(keep);
            delete_finished(tx, cutoff, limit, Wait::Skip)
        })
    }

    pub fn purge(&self, actor: &str, cutoff: Millis, mut progress: impl FnMut(BulkProgress)) -> Result<u64> {
        self.write(|tx| require(tx, actor, Permission::Operate))?;
        let total = self.count_purgeable(cutoff)?;
        let mut done = 0;
        loop {
            // Each batch is audited in the transaction that deletes it: a run that dies between
            // batches has left a record of every job it removed. It waits for rows another
            // transaction holds (an operator's purge must not leave some out); the sweeper
            // skips what it finds locked, so the two never deadlock.
            let n = self.write(|tx| {
                require(tx, actor, Permission::Operate)?;
                let now = tx.now()?;
                let n = delete_finished(tx, cutoff, BULK_BATCH, Wait::Wait)?;
                if n > 0 {
                    audit(tx, now, actor, "purge", None, &purge_detail(n, cutoff))?;
                }
                Ok(n)
            })?;
            if n == 0 {
                break;
            }
            done += n;
            progress(BulkProgress { done, total });
        }
        if done == 0 {
            self.write(|tx| {
                let now = tx.now()?;
                audit(tx, now, actor, "purge", None, &purge_detail(0, cutoff))
            })?;
        }
        Ok(done)
    }

    pub fn count_purgeable(&self, cutoff: Millis) -> Result<u64> {
        self.read(|tx| {
            let n: i64 = tx
                .query_one(
                    "SELECT count(*) FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
                     AND finished_at < $1",
                    &[&cutoff],
                )?
                .get(0);
            Ok(n as u64)
        })
    }

    /// The database's clock now, for fixing the set a bulk action works on (its jobs' times
    /// were written by the database clock too).
    pub(super) fn db_now(&self) -> Result<Millis> {
        self.read(|tx| tx.now())
    }

    /// How many jobs `scope` matches that also meet `extra` (SQL over our own values only).
    pub(super) fn count_where(&self, scope: &JobFilter, extra: &str) -> Result<u64> {
        let w = where_clause(scope, 1);
        self.read(|tx| {
            let n: i64 =
                tx.query_one(&format!("SELECT count(*) FROM jobs WHERE {} AND {extra}", w.sql), &w.params(&[]))?.get(0);
            Ok(n as u64)
        })
    }

    /// Run a bulk operator action as short transactions until a batch finds nothing left to
    /// look at. Each batch checks `operate` again, locks the jobs it decides on and commits
    /// whole, so a run killed part-way leaves every job either changed with its log entry or
    /// untouched, and running it again finishes the rest. `batch` gets the transaction and its
    /// time and returns `None` when no job is left, else how many jobs it changed and what it
    /// did to them, handed to `committed` once the batch has committed (a batch that lost a
    /// race runs again from the start, so it must not count anything itself). A batch may
    /// change fewer jobs than it found, when another operator or a worker changed some first:
    /// the run carries on with the next.
    pub(super) fn in_batches<T>(
        &self,
        actor: &str,
        total: u64,
        mut batch: impl FnMut(&mut Tx<'_>, Millis) -> Result<Option<(u64, T)>>,
        mut committed: impl FnMut(T),
        mut progress: impl FnMut(BulkProgress),
    ) -> Result<u64> {
        let mut done = 0u64;
        loop {
            let step = self.write(|tx| {
                require(tx, actor, Permission::Operate)?;
                let now = tx.now()?;
                batch(tx, now)
            })?;
            let Some((n, what)) = step else { return Ok(done) };
            committed(what);
            if n > 0 {
                done += n;
                progress(BulkProgress { done, total });
            }
        }
    }
}

/// Requeue the jobs `ids` names, in that order, after locking them: the per-id results SQLite
/// gives (an id named twice is requeued once, then found Scheduled).
pub(super) fn requeue_ids(tx: &mut Tx<'_>, now: Millis, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
    let mut jobs = lock_ids(tx, ids)?;
    let mut chosen = Vec::new();
    let results = ids
        .iter()
        .map(|id| match jobs.get_mut(&id.0) {
            None => RequeueResult::NotFound,
            Some(job) if !job.state.is_requeueable() => RequeueResult::NotRequeueable { state: job.state },
            Some(job) => {
                let from = job.state;
                job.state = JobState::Scheduled;
                chosen.push(id.0);
                RequeueResult::Requeued { from }
            }
        })
        .collect();
    requeue_locked(tx, now, actor, &chosen)?;
    Ok(results)
}

/// What cancelling one locked job does, recorded in `cancel` (Scheduled: cancelled now) or
/// `ask` (Running, not yet asked: its handler is asked to stop); `job` is updated so that an id
/// named twice is decided on what the first did.
pub(super) fn decide_cancel(
    id: Uuid,
    job: &mut Locked,
    cancel: &mut Vec<(Uuid, i64)>,
    ask: &mut Vec<(Uuid, i64)>,
) -> CancelResult {
    match job.state {
        JobState::Scheduled => {
            job.state = JobState::Cancelled;
            cancel.push((id, job.attempt));
            CancelResult::Cancelled
        }
        JobState::Running => {
            // Asking twice changes nothing: the first operator to ask is the one logged.
            if !job.cancel_requested {
                job.cancel_requested = true;
                ask.push((id, job.attempt));
            }
            CancelResult::CancelRequested
        }
        state => CancelResult::NotCancellable { state },
    }
}

/// Lock the jobs `ids` names that exist, in id order, and read them.
pub(super) fn lock_ids(tx: &mut Tx<'_>, ids: &[JobId]) -> Result<HashMap<Uuid, Locked>> {
    let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
    tx.query(&format!("SELECT {LOCKED_COLUMNS} FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE"), &[&ids])?
        .iter()
        .map(locked)
        .collect()
}

/// One batch of the jobs `scope` matches that also meet `extra`, locked in id order and read
/// again after any wait, so that only jobs that still match come back; `None` when none matched
/// to begin with. `extra` is SQL over our own values only (the filter's values are parameters).
pub(super) fn lock_batch(tx: &mut Tx<'_>, scope: &JobFilter, extra: &str) -> Result<Option<Vec<(Uuid, Locked)>>> {
    let w = where_clause(scope, 1);
    let found: Vec<Uuid> = tx
        .query(&format!("SELECT id FROM jobs WHERE {} AND {extra} LIMIT {BULK_BATCH}", w.sql), &w.params(&[]))?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    if found.is_empty() {
        return Ok(None);
    }
    let mut params: Vec<&(dyn ToSql + Sync)> = w.params(&[]);
    params.push(&found);
    let sql = format!(
        "SELECT {LOCKED_COLUMNS} FROM jobs WHERE {} AND {extra} AND id = ANY(${}) ORDER BY id FOR UPDATE",
        w.sql,
        params.len()
    );
    Ok(Some(tx.query(&sql, &params)?.iter().map(locked).collect::<Result<_>>()?))
}

/// Requeue the locked jobs `ids` (each once) that are still Dead-Lettered or Quarantined: back
/// to Scheduled, due now, budget reset, each logged in the order given. Returns how many.
pub(super) fn requeue_locked(tx: &mut Tx<'_>, now: Millis, actor: &str, ids: &[Uuid]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    tx.execute(
        "WITH old AS (
             SELECT id, state FROM jobs WHERE id = ANY($1) AND state IN ('dead-lettered', 'quarantined')
         ), moved AS (
             UPDATE jobs j SET state = 'scheduled', attempt = 0, due_at = $2, finished_at = NULL, terminal_cause = NULL,
                    cause_fingerprint = NULL, quarantine_reason = NULL, cancel_requested_by = NULL, updated_at = $2
             FROM old WHERE j.id = old.id
             RETURNING j.id, old.state
         )
         INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor, reason)
         SELECT m.id, $2, m.state, 'scheduled', 0, $3, $4
         FROM moved m JOIN unnest($1::uuid[]) WITH ORDINALITY AS o(id, n) ON o.id = m.id
         ORDER BY o.n",
        &[&ids, &now, &actor, &REQUEUE_REASON],
    )
}

/// Cancel the locked jobs `jobs` (id, attempt; each once) that are still Scheduled, each
/// logged `Scheduled -> Cancelled` with the operator as actor and cause. Returns how many.
pub(super) fn cancel_locked(tx: &mut Tx<'_>, now: Millis, actor: &str, jobs: &[(Uuid, i64)]) -> Result<u64> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = jobs.iter().map(|(id, _)| *id).collect();
    let cause = cancel_cause(actor);
    tx.execute(
        "WITH cancelled AS (
             UPDATE jobs SET state = 'cancelled', terminal_cause = $3, cause_fingerprint = $4,
                    cancel_requested_by = $5, finished_at = $2, updated_at = $2
             WHERE id = ANY($1) AND state = 'scheduled'
             RETURNING id, attempt
         )
         INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor, reason)
         SELECT c.id, $2, 'scheduled', 'cancelled', c.attempt, $5, $3
         FROM cancelled c JOIN unnest($1::uuid[]) WITH ORDINALITY AS o(id, n) ON o.id = c.id
         ORDER BY o.n",
        &[&ids, &now, &cause, &cause_fingerprint(&cause), &actor],
    )
}

/// Ask the handlers of the locked jobs `jobs` (id, attempt; each once) that are still Running
/// and not yet asked to stop; each request audited. Returns how many.
pub(super) fn ask_to_stop_locked(tx: &mut Tx<'_>, now: Millis, actor: &str, jobs: &[(Uuid, i64)]) -> Result<u64> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = jobs.iter().map(|(id, _)| *id).collect();
    let details: Vec<String> = jobs.iter().map(|(_, attempt)| format!("attempt {attempt}")).collect();
    tx.execute(
        "WITH asked AS (
             UPDATE jobs SET cancel_requested_by = $3, updated_at = $2
             WHERE id = ANY($1) AND state = 'running' AND cancel_requested_by IS NULL
             RETURNING id
         )
         INSERT INTO audit (at, actor, action, job_id, detail)
         SELECT $2, $3, 'cancel-requested', a.id, o.detail
         FROM asked a JOIN unnest($1::uuid[], $4::text[]) WITH ORDINALITY AS o(id, detail, n) ON o.id = a.id
         ORDER BY o.n",
        &[&ids, &now, &actor, &details],
    )
}

/// Whether a delete waits for rows another transaction holds, or passes them by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Wait,
    Skip,
}

/// Delete up to `limit` terminal jobs that finished before `cutoff`, with their log entries
/// (`ON DELETE CASCADE`).
fn delete_finished(tx: &mut Tx<'_>, cutoff: Millis, limit: usize, wait: Wait) -> Result<u64> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = match wait {
        Wait::Wait => {
            "DELETE FROM jobs WHERE id IN (
                 SELECT id FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
                 AND finished_at < $1 LIMIT $2 FOR UPDATE)"
        }
        Wait::Skip => {
            "DELETE FROM jobs WHERE id IN (
                 SELECT id FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
                 AND finished_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)"
        }
    };
    tx.execute(sql, &[&cutoff, &limit])
}

/// Fail with `PermissionDenied` unless `actor` holds `permission` (admin implies all). The
/// grant is read `FOR SHARE`: a revoke waits until the action it allowed has committed, as
/// SQLite's one writer orders them.
pub(super) fn require(tx: &mut Tx<'_>, actor: &str, permission: Permission) -> Result<()> {
    let held = tx.query("SELECT permission FROM grants WHERE actor = $1 FOR SHARE", &[&actor])?;
    for r in &held {
        let p: String = r.try_get(0)?;
        if matches!(p.parse::<Permission>(), Ok(p) if p == permission || p == Permission::Admin) {
            return Ok(());
        }
    }
    Err(Error::PermissionDenied { actor: actor.to_string(), permission })
}

/// One row of the audit trail, as SQLite writes it.
pub(super) fn audit(
    tx: &mut Tx<'_>,
    at: Millis,
    actor: &str,
    action: &str,
    job: Option<JobId>,
    detail: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO audit (at, actor, action, job_id, detail) VALUES ($1, $2, $3, $4, $5)",
        &[&at, &actor, &action, &job.map(|j| j.0), &detail],
    )?;
    Ok(())
}
