//! Operator actions that change jobs on PostgreSQL: requeue, cancel, the retention sweep and
//! purge, and the statements under the bulk runs of `ops/bulk.rs`. Where SQLite's one
//! writer decided alone, each action here first locks the rows it decides on (`FOR UPDATE`, in
//! id order so that two operators lock in the same order) and re-reads them, so that two
//! operators, or an operator and a worker finishing the job, never both act on one job. Each
//! checks `operate` in the transaction that acts, and writes the same log entries and audit rows
//! as SQLite.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::filter::where_clause;
use super::{is_unique_violation, PgStore, Tx};
use crate::error::Result;
use crate::model::{cause_fingerprint, JobId, JobState, Millis};
use crate::store::ops::bulk::{Batch, BulkRun, BulkSet, BulkStore, BulkTx};
use crate::store::ops::jobs::{Editable, Found, OperatorTx, PurgeTx, Purgeable, RepairTx, REQUEUE_REASON};
use crate::store::ops::{self, AuditAction};
use crate::store::unique;
use crate::store::{BulkProgress, CancelResult, JobFilter, PurgeResult, RequeueResult, BULK_BATCH};

const FOUND_COLUMNS: &str = "id, state, attempt, cancel_requested_by IS NOT NULL, due_at";

fn found(r: &postgres::Row) -> Result<(JobId, Found)> {
    Ok((
        JobId(r.try_get(0)?),
        Found {
            state: super::row::state(r, 1)?,
            attempt: super::row::count(r.try_get(2)?),
            cancel_requested: r.try_get(3)?,
            due_at: r.try_get(4)?,
        },
    ))
}

impl PgStore {
    pub fn requeue(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
        self.write(|tx| ops::jobs::requeue(tx, actor, ids))
    }

    pub fn cancel(&self, actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        self.write(|tx| ops::jobs::cancel(tx, actor, ids))
    }

    /// One batch of the retention sweep, by whichever host holds the sweep's advisory lock; a
    /// host that does not get it sweeps nothing this time (another is sweeping).
    pub fn sweep(&self, cutoff: Millis, limit: usize) -> Result<u64> {
        self.write(|tx| {
            if !tx.try_lock("sweep")? {
                return Ok(0);
            }
            sweep_batch(tx, cutoff, limit)
        })
    }

    pub fn sweep_expired(&self, limit: usize) -> Result<u64> {
        let keep = self.retention()?.as_millis().min(i64::MAX as u128) as Millis;
        self.write(|tx| {
            if !tx.try_lock("sweep")? {
                return Ok(0);
            }
            let cutoff = tx.now()?.saturating_sub(keep);
            sweep_batch(tx, cutoff, limit)
        })
    }

    /// A purge batch waits for rows another transaction holds (an operator's purge must not
    /// leave some out); the sweeper skips what it finds locked, so the two never deadlock.
    pub fn purge(&self, actor: &str, cutoff: Millis, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let mut write = |f: &mut dyn FnMut(&mut dyn PurgeTx) -> Result<u64>| self.write(|tx| f(tx));
        ops::jobs::purge(&mut write, || self.count_purgeable(cutoff), actor, cutoff, progress)
    }

    pub fn purge_jobs(&self, actor: &str, ids: &[JobId]) -> Result<Vec<PurgeResult>> {
        self.write(|tx| ops::jobs::purge_jobs(tx, actor, ids))
    }

    pub fn count_purgeable(&self, cutoff: Millis) -> Result<u64> {
        Ok(self.purgeable_by_state(cutoff)?.iter().map(|(_, n)| n).sum())
    }

    pub fn purgeable_by_state(&self, cutoff: Millis) -> Result<Vec<(JobState, u64)>> {
        self.read(|tx| {
            let rows = tx.query(
                "SELECT state::text, count(*) FROM jobs
                 WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled') AND finished_at < $1
                 GROUP BY state",
                &[&cutoff],
            )?;
            let mut counts = rows
                .iter()
                .map(|r| Ok((super::row::state(r, 0)?, r.try_get::<_, i64>(1)? as u64)))
                .collect::<Result<Vec<_>>>()?;
            counts.sort_by_key(|(s, _)| *s);
            Ok(counts)
        })
    }
}

/// Which of the jobs `ids` carry a unique key.
fn keyed(tx: &mut Tx<'_>, ids: &[Uuid]) -> Result<HashSet<Uuid>> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    tx.query("SELECT id FROM jobs WHERE id = ANY($1) AND unique_key IS NOT NULL", &[&ids])?
        .iter()
        .map(|r| Ok(r.try_get(0)?))
        .collect()
}

/// Requeue the locked requeueable jobs `ids` (each once), as [`requeue_locked`] does; those
/// with a unique key one by one, so that one whose key another job holds is left alone.
/// Returns how many were requeued.
pub(super) fn requeue_some(tx: &mut Tx<'_>, now: Millis, actor: &str, ids: &[Uuid]) -> Result<u64> {
    let keyed = keyed(tx, ids)?;
    let plain: Vec<Uuid> = ids.iter().filter(|id| !keyed.contains(id)).copied().collect();
    let mut n = requeue_locked(tx, now, actor, &plain)?;
    for id in ids.iter().filter(|id| keyed.contains(id)) {
        if requeue_keyed(tx, now, actor, *id)?.is_none() {
            n += 1;
        }
    }
    Ok(n)
}

/// Requeue one locked job that has a unique key, behind a savepoint: when the `jobs_unique`
/// index refuses the move (another job holds the key; a racing insert of it is waited for
/// first), only the savepoint is undone and the answer is the holder's id. `None`: requeued.
fn requeue_keyed(tx: &mut Tx<'_>, now: Millis, actor: &str, id: Uuid) -> Result<Option<JobId>> {
    let holder_sql = unique::holder_of_sql("$1");
    // A round ends without an answer only when the holder left its states between the refused
    // update and the read of it: the key is free, so the next round's update goes through.
    for _ in 0..100 {
        tx.batch("SAVEPOINT bw_requeue_unique")?;
        match requeue_locked(tx, now, actor, &[id]) {
            Ok(_) => {
                tx.batch("RELEASE SAVEPOINT bw_requeue_unique")?;
                return Ok(None);
            }
            Err(e) if is_unique_violation(&e) => {
                tx.batch("ROLLBACK TO SAVEPOINT bw_requeue_unique; RELEASE SAVEPOINT bw_requeue_unique")?;
                if let Some(r) = tx.query_opt(&holder_sql, &[&id])? {
                    return Ok(Some(JobId(r.try_get(0)?)));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(unique::holder_missing(&format!("of job {id}")))
}

/// Lock the jobs `ids` names that exist, in id order, and read them.
pub(super) fn lock_ids(tx: &mut Tx<'_>, ids: &[JobId]) -> Result<HashMap<JobId, Found>> {
    let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
    tx.query(&format!("SELECT {FOUND_COLUMNS} FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE"), &[&ids])?
        .iter()
        .map(found)
        .collect()
}

/// The ids of the jobs `scope` matches that also meet `extra`, in id order: the set a bulk
/// action works through. `extra` is SQL over our own values only (the filter's values are
/// parameters).
pub(super) fn matching_ids(tx: &mut Tx<'_>, scope: &JobFilter, extra: &str) -> Result<Vec<Uuid>> {
    let w = where_clause(scope, 1);
    tx.query(&format!("SELECT id FROM jobs WHERE {} AND {extra} ORDER BY id", w.sql), &w.params(&[]))?
        .iter()
        .map(|r| Ok(r.try_get(0)?))
        .collect()
}

/// The jobs of `ids` that `scope` matches and meet `extra`: every one of `ids` is locked, in
/// id order, and read again after any wait, so that only those that still match come back.
/// The jobs are found by id alone and matched afterwards (a materialized CTE): on statistics
/// from before a bulk run, the planner would otherwise walk a partial index of every job in
/// the state the run is emptying, in each batch.
pub(super) fn lock_matching(
    tx: &mut Tx<'_>,
    scope: &JobFilter,
    extra: &str,
    ids: &[Uuid],
) -> Result<Vec<(JobId, Found)>> {
    let w = where_clause(scope, 2);
    let sql = format!(
        "WITH jobs AS MATERIALIZED (SELECT * FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE)
         SELECT {FOUND_COLUMNS} FROM jobs WHERE {} AND {extra} ORDER BY id",
        w.sql
    );
    tx.query(&sql, &w.params(&[&ids]))?.iter().map(found).collect()
}

// The statements below act on jobs this transaction has locked and found in the state they
// need: nobody else can change them before it ends, so they find the jobs by id alone (which
// also keeps the planner on the primary key whatever its statistics say).

/// Requeue the locked Dead-Lettered or Quarantined jobs `ids` (each once): back to Scheduled,
/// due now, budget reset, each logged in the order given. Returns how many.
pub(super) fn requeue_locked(tx: &mut Tx<'_>, now: Millis, actor: &str, ids: &[Uuid]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    tx.execute(
        "WITH old AS (
             SELECT id, state FROM jobs WHERE id = ANY($1)
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

/// One batch of the retention sweep: up to `limit` terminal jobs that finished before
/// `cutoff`, deleted with their log entries (the `jobs_delete_log` trigger). Rows another transaction
/// holds are passed by: an operator is acting on them, and the next sweep comes back.
fn sweep_batch(tx: &mut Tx<'_>, cutoff: Millis, limit: usize) -> Result<u64> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let deleted = tx.execute(
        "DELETE FROM jobs WHERE id IN (
             SELECT id FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
             AND finished_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
        &[&cutoff, &limit],
    )?;
    // A workflow goes once the last of its jobs did (as on SQLite).
    tx.execute(
        "DELETE FROM workflows WHERE id IN (
             SELECT w.id FROM workflows w WHERE w.created_at < $1
               AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.workflow_id = w.id) LIMIT $2)",
        &[&cutoff, &limit],
    )?;
    Ok(deleted)
}

/// One batch of a purge: up to [`BULK_BATCH`] terminal jobs that finished before `cutoff`,
/// deleted with their log entries. It waits for rows another transaction holds, and passes over
/// those gone or changed meanwhile.
fn purge_batch(tx: &mut Tx<'_>, cutoff: Millis) -> Result<u64> {
    tx.execute(
        "DELETE FROM jobs WHERE id IN (
             SELECT id FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
             AND finished_at < $1 LIMIT $2 FOR UPDATE)",
        &[&cutoff, &(BULK_BATCH as i64)],
    )
}

/// PostgreSQL's statements for the operator actions of `ops/jobs.rs`: each write takes a set
/// in one statement, finding the jobs by id alone (they are locked and decided on), and writes
/// the log entries or audit rows in the order given.
impl OperatorTx for Tx<'_> {
    fn jobs(&mut self, ids: &[JobId], lock: bool) -> Result<HashMap<JobId, Found>> {
        if lock {
            return lock_ids(self, ids);
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        self.query(&format!("SELECT {FOUND_COLUMNS} FROM jobs WHERE id = ANY($1)"), &[&ids])?
            .iter()
            .map(found)
            .collect()
    }

    fn cancel_scheduled(
        &mut self,
        now: Millis,
        actor: &str,
        cause: &str,
        jobs: &[(JobId, u32, JobState)],
    ) -> Result<u64> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let ids: Vec<Uuid> = jobs.iter().map(|(id, _, _)| id.0).collect();
        let from: Vec<&str> = jobs.iter().map(|(_, _, s)| s.as_str()).collect();
        self.execute(
            "WITH cancelled AS (
                 UPDATE jobs SET state = 'cancelled', terminal_cause = $3, cause_fingerprint = $4,
                        cancel_requested_by = $5, finished_at = $2, updated_at = $2
                 WHERE id = ANY($1)
                 RETURNING id, attempt
             )
             INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor, reason)
             SELECT c.id, $2, o.st, 'cancelled', c.attempt, $5, $3
             FROM cancelled c JOIN unnest($1::uuid[], $6::text[]) WITH ORDINALITY AS o(id, st, n) ON o.id = c.id
             ORDER BY o.n",
            &[&ids, &now, &cause, &cause_fingerprint(cause), &actor, &from],
        )
    }

    fn ask_to_stop(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64> {
        update_audited(self, "cancel_requested_by = $3", now, actor, action, jobs)
    }

    fn make_due(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64> {
        update_audited(self, "due_at = $2", now, actor, action, jobs)
    }

    fn keyed(&mut self, ids: &[JobId]) -> Result<HashSet<JobId>> {
        Ok(keyed(self, &ids.iter().map(|id| id.0).collect::<Vec<_>>())?.into_iter().map(JobId).collect())
    }

    /// One statement; each job's entry takes the state the row held (the job is locked, so it
    /// is the state the decision found).
    fn requeue_jobs(&mut self, now: Millis, actor: &str, jobs: &[(JobId, JobState)]) -> Result<u64> {
        requeue_locked(self, now, actor, &jobs.iter().map(|(id, _)| id.0).collect::<Vec<_>>())
    }

    fn requeue_keyed(&mut self, now: Millis, actor: &str, id: JobId, _from: JobState) -> Result<Option<JobId>> {
        requeue_keyed(self, now, actor, id.0)
    }

    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64> {
        super::jobs::cancel_dependents(self, now, parents)
    }
}

/// PostgreSQL's transactions for a bulk run (`ops/bulk.rs`).
impl BulkStore for PgStore {
    fn bulk_write<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        self.write(|tx| f(tx))
    }

    fn bulk_read<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        self.read(|tx| f(tx))
    }
}

/// PostgreSQL's statements for a bulk run: the set is listed once ([`BulkSet::Listed`]), and
/// each batch locks its chunk, in id order, and keeps the jobs that still match.
impl BulkTx for Tx<'_> {
    /// One statement: a `count(*) FILTER` per condition.
    fn count_each(&mut self, scope: &JobFilter, base: &str, each: &[String]) -> Result<Vec<u64>> {
        let w = where_clause(scope, 1);
        let filtered: String = each.iter().map(|extra| format!(", count(*) FILTER (WHERE {extra})")).collect();
        let r =
            self.query_one(&format!("SELECT count(*){filtered} FROM jobs WHERE {base} AND {}", w.sql), &w.params(&[]))?;
        (0..=each.len()).map(|i| Ok(r.try_get::<_, i64>(i)?.max(0) as u64)).collect()
    }

    fn bulk_set(&mut self, run: &BulkRun) -> Result<BulkSet> {
        Ok(BulkSet::Listed(matching_ids(self, &run.scope, &run.pending())?.into_iter().map(JobId).collect()))
    }

    fn take_batch(&mut self, run: &BulkRun, listed: Option<&[JobId]>) -> Result<Batch> {
        let ids: Vec<Uuid> = listed.unwrap_or_default().iter().map(|id| id.0).collect();
        let locked = lock_matching(self, &run.scope, &run.pending(), &ids)?;
        Ok(Batch { ids: locked.iter().map(|(id, _)| *id).collect(), found: locked.into_iter().collect() })
    }

    fn requeue_batch(&mut self, now: Millis, actor: &str, batch: Batch) -> Result<u64> {
        requeue_some(self, now, actor, &batch.ids.iter().map(|id| id.0).collect::<Vec<_>>())
    }
}

/// Update the jobs `jobs` names (`set`: our own SQL over `$2` now and `$3` the actor) and audit
/// each as `action` with its detail, in the order given, in one statement. Returns how many.
fn update_audited(
    tx: &mut Tx<'_>,
    set: &str,
    now: Millis,
    actor: &str,
    action: AuditAction,
    jobs: &[(JobId, String)],
) -> Result<u64> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let (ids, details): (Vec<Uuid>, Vec<&str>) = jobs.iter().map(|(id, detail)| (id.0, detail.as_str())).unzip();
    tx.execute(
        &format!(
            "WITH changed AS (
                 UPDATE jobs SET {set}, updated_at = $2
                 WHERE id = ANY($1)
                 RETURNING id
             )
             INSERT INTO audit (at, actor, action, job_id, detail)
             SELECT $2, $3, $5, c.id, o.detail
             FROM changed c JOIN unnest($1::uuid[], $4::text[]) WITH ORDINALITY AS o(id, detail, n) ON o.id = c.id
             ORDER BY o.n"
        ),
        &[&ids, &now, &actor, &details, &action.as_str()],
    )
}

impl PurgeTx for Tx<'_> {
    fn purge_batch(&mut self, cutoff: Millis) -> Result<u64> {
        purge_batch(self, cutoff)
    }
}

impl RepairTx for Tx<'_> {
    fn editable(&mut self, id: JobId) -> Result<Option<Editable>> {
        let sql = "SELECT state, payload, wire_name, unique_key FROM jobs WHERE id = $1 FOR UPDATE";
        let Some(r) = self.query_opt(sql, &[&id.0])? else { return Ok(None) };
        let state = super::row::state(&r, 0)?;
        Ok(Some(Editable { state, payload: r.try_get(1)?, wire_name: r.try_get(2)?, unique_key: r.try_get(3)? }))
    }

    fn set_payload(&mut self, id: JobId, payload: &[u8], key: Option<&str>, now: Millis) -> Result<()> {
        self.execute(
            "UPDATE jobs SET payload = $2, unique_key = coalesce($4, unique_key), updated_at = $3 WHERE id = $1",
            &[&id.0, &payload, &now, &key],
        )
        .map_err(|e| if is_unique_violation(&e) { unique::edit_collides(id) } else { e })?;
        Ok(())
    }

    fn priority_of(&mut self, id: JobId) -> Result<Option<(JobState, u8)>> {
        let sql = "SELECT state, priority FROM jobs WHERE id = $1 FOR UPDATE";
        let Some(r) = self.query_opt(sql, &[&id.0])? else { return Ok(None) };
        Ok(Some((super::row::state(&r, 0)?, crate::store::ops::columns::priority(r.try_get(1)?))))
    }

    fn set_priority(&mut self, id: JobId, priority: u8, now: Millis) -> Result<()> {
        self.execute(
            "UPDATE jobs SET priority = $2, updated_at = $3 WHERE id = $1",
            &[&id.0, &i64::from(priority), &now],
        )?;
        Ok(())
    }

    fn purgeable(&mut self, id: JobId) -> Result<Option<Purgeable>> {
        let sql = "SELECT state, wire_name, queue FROM jobs WHERE id = $1 FOR UPDATE";
        let Some(r) = self.query_opt(sql, &[&id.0])? else { return Ok(None) };
        Ok(Some(Purgeable { state: super::row::state(&r, 0)?, wire_name: r.try_get(1)?, queue: r.try_get(2)? }))
    }

    fn delete_job(&mut self, id: JobId) -> Result<()> {
        self.execute("DELETE FROM jobs WHERE id = $1", &[&id.0])?;
        Ok(())
    }
}
