//! Operator actions that change jobs: requeue, cancel, and the retention sweep. Each checks the
//! actor's permission inside the same transaction that acts, logs the actor, and works in
//! batches small enough never to stall workers; an interrupted bulk run leaves every job either
//! changed with its log entry or untouched.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::jobs::{log, Entry};
use super::row::{parse_id, parse_state};
use super::{SqliteOps, SqliteStore};
use crate::error::Result;
use crate::model::{cause_fingerprint, JobId, JobState, Millis};
use crate::store::ops::bulk::{Batch, BulkAction, BulkRun, BulkSet, BulkStore, BulkTx};
pub(crate) use crate::store::ops::jobs::REQUEUE_REASON;
use crate::store::ops::jobs::{Editable, Found, OperatorTx, PurgeTx, Purgeable, RepairTx};
use crate::store::ops::{self, AuditAction};
use crate::store::unique;
use crate::store::{BulkProgress, CancelResult, JobFilter, PurgeResult, RequeueResult, BULK_BATCH};
impl SqliteStore {
    pub fn requeue(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
        let now = self.now();
        self.write(|c| ops::jobs::requeue(&mut SqliteOps { c, now }, actor, ids))
    }

    pub fn cancel(&self, actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let now = self.now();
        self.write(|c| ops::jobs::cancel(&mut SqliteOps { c, now }, actor, ids))
    }

    pub fn sweep(&self, cutoff: Millis, limit: usize) -> Result<u64> {
        self.write(|tx| sweep_batch(tx, cutoff, limit))
    }

    pub fn sweep_expired(&self, limit: usize) -> Result<u64> {
        let keep = self.retention()?.as_millis().min(i64::MAX as u128) as Millis;
        self.sweep(self.now().saturating_sub(keep), limit)
    }

    pub fn purge(&self, actor: &str, cutoff: Millis, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let mut write = |f: &mut dyn FnMut(&mut dyn PurgeTx) -> Result<u64>| {
            let now = self.now();
            self.write(|c| f(&mut SqliteOps { c, now }))
        };
        ops::jobs::purge(&mut write, || self.count_purgeable(cutoff), actor, cutoff, progress)
    }

    pub fn purge_jobs(&self, actor: &str, ids: &[JobId]) -> Result<Vec<PurgeResult>> {
        let now = self.now();
        self.write(|c| ops::jobs::purge_jobs(&mut SqliteOps { c, now }, actor, ids))
    }

    pub fn count_purgeable(&self, cutoff: Millis) -> Result<u64> {
        Ok(self.purgeable_by_state(cutoff)?.iter().map(|(_, n)| n).sum())
    }

    pub fn purgeable_by_state(&self, cutoff: Millis) -> Result<Vec<(JobState, u64)>> {
        let mut st = self.conn.prepare_cached(
            "SELECT state, count(*) FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
             AND finished_at < ?1 GROUP BY state",
        )?;
        let rows = st.query_map([cutoff], |r| Ok((parse_state(r, 0)?, r.get::<_, i64>(1)? as u64)))?;
        let mut counts = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        counts.sort_by_key(|(s, _)| *s);
        Ok(counts)
    }
}

/// Up to [`BULK_BATCH`] jobs of a bulk requeue's scope that its next batch takes: those whose
/// unique key no other job holds (a job refused for its key stays as it is, and must not come
/// back in every batch after). Under the write lock, so exact.
///
/// `INDEXED BY jobs_failed_list`: left to itself SQLite walked `jobs_finished` and read each
/// failed job's row to test the rest of the filter, for every batch (`--wire-name` of a
/// quarantined name behind 80,000 dead-lettered jobs: 1.3 s of picking for 3,000 jobs); the
/// covering index tests the filter's columns in place. A requeue's scope (`requeue_scope`) is
/// Dead-Lettered and Quarantined jobs only, which always renders that index's condition.
/// A filter of one failed state and one wire name (`bw requeue --state quarantined --wire-name
/// W` once W has a handler again, or `bw top`'s requeue of a cause group) reads the name's own
/// range of `jobs_dead_causes` / `jobs_quarantine` instead: through `jobs_failed_list` each
/// batch walked the failed jobs ahead of the name's (a name or cause of 3,000 jobs among
/// 1,000,000: 6-46 ms a batch against 2-3 ms, inside the write transaction). A batch takes any
/// of the matching jobs: there is no order to keep. A wire name over both failed states is
/// picked one state at a time, so that each reads its own index.
fn requeueable_ids(tx: &Connection, filter: &JobFilter) -> Result<Vec<JobId>> {
    let pick = |filter: &JobFilter, limit: usize| -> Result<Vec<JobId>> {
        let (sql, args) = requeue_picker(filter, limit);
        Ok(tx
            .prepare_cached(&sql)?
            .query_map(rusqlite::params_from_iter(args), |r| parse_id(r, 0))?
            .collect::<Result<_, _>>()?)
    };
    if filter.wire_name.is_none() || filter.states.len() < 2 {
        return pick(filter, BULK_BATCH);
    }
    let mut ids = Vec::new();
    // Each state once, whatever the filter repeats (`--state dead-lettered,dead-lettered`).
    let states = [JobState::DeadLettered, JobState::Quarantined].into_iter().filter(|s| filter.states.contains(s));
    for state in states {
        let one = JobFilter { states: vec![state], ..filter.clone() };
        ids.extend(pick(&one, BULK_BATCH - ids.len())?);
        if ids.len() == BULK_BATCH {
            break;
        }
    }
    Ok(ids)
}

/// The statement and values of [`requeueable_ids`]: at most `limit` ids.
fn requeue_picker(filter: &JobFilter, limit: usize) -> (String, Vec<rusqlite::types::Value>) {
    let (clause, mut args) = filter.where_clause();
    args.push(rusqlite::types::Value::Integer(limit as i64));
    let index = filter.failed_name_index().unwrap_or("jobs_failed_list");
    let sql = format!(
        "SELECT id FROM jobs INDEXED BY {index} WHERE {clause} AND (unique_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM jobs h WHERE h.unique_key = jobs.unique_key AND h.unique_window = jobs.unique_window
             AND h.id <> jobs.id AND {})) LIMIT ?",
        unique::holds("h")
    );
    (sql, args)
}

/// The log entries of a bulk requeue's batch: `?1` the batch's ids as a JSON array, `?2` now,
/// `?3` the actor, `?4` the reason. `+state`, not `state`: with a plain `state IN (…)` SQLite
/// answered the batch from the `jobs_failed_list` index over every Dead-Lettered and Quarantined
/// job, testing each against the batch's ids, so a bulk requeue read every failed job once per
/// batch of 500 (100,000 jobs: 6 s instead of under 1). The unary `+` leaves the primary key,
/// one probe per id, as the only way in. Public so that tests and tools can EXPLAIN it.
pub const REQUEUE_LOG_SQL: &str = "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, actor, reason)
     SELECT id, ?2, state, 'scheduled', 0, ?3, ?4
     FROM jobs WHERE id IN (SELECT value FROM json_each(?1)) AND +state IN ('dead-lettered', 'quarantined')
           AND unique_key IS NULL
     ORDER BY id";

/// The move of a bulk requeue's batch (`?1` the ids, `?2` now), by the primary key as
/// [`REQUEUE_LOG_SQL`]. Public so that tests and tools can EXPLAIN it.
pub const REQUEUE_MOVE_SQL: &str =
    "UPDATE jobs SET state = 'scheduled', attempt = 0, due_at = ?2, finished_at = NULL, terminal_cause = NULL,
            cause_fingerprint = NULL, quarantine_reason = NULL, cancel_requested_by = NULL, updated_at = ?2
     WHERE id IN (SELECT value FROM json_each(?1)) AND +state IN ('dead-lettered', 'quarantined')
           AND unique_key IS NULL";

/// [`requeue_row`] for a whole batch in two set-based statements (log first, while the rows
/// still hold their terminal state): the same rows and entries, at about half the CPU of a
/// statement per job (100,000 jobs: 2.1 s of CPU one by one). Jobs with a unique key go one by
/// one as a requeue by id takes them, so that one whose key is taken is refused alone.
fn requeue_batch(tx: &Connection, now: Millis, actor: &str, ids: &[JobId]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let list = serde_json::to_string(&ids.iter().map(|id| id.to_string()).collect::<Vec<_>>())
        .map_err(crate::error::Error::Encode)?;
    tx.prepare_cached(REQUEUE_LOG_SQL)?.execute(params![list, now, actor, REQUEUE_REASON])?;
    let mut n = tx.prepare_cached(REQUEUE_MOVE_SQL)?.execute(params![list, now])? as u64;
    let keyed: Vec<JobId> = tx
        .prepare_cached(
            "SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?1)) AND unique_key IS NOT NULL ORDER BY id",
        )?
        .query_map([&list], |r| parse_id(r, 0))?
        .collect::<Result<_, _>>()?;
    let mut ops = SqliteOps { c: tx, now };
    let mut jobs = ops.jobs(&keyed, true)?;
    let results = ops::jobs::requeue_found(&mut ops, now, actor, &keyed, &mut jobs)?;
    n += results.iter().filter(|r| matches!(r, RequeueResult::Requeued { .. })).count() as u64;
    Ok(n)
}

/// Requeue one Dead-Lettered or Quarantined job found in `from`: back to Scheduled, due now,
/// budget reset, logged. `Some(holder)`: the unique index refused the move because another job
/// holds the job's key; the statement is undone alone (the transaction goes on).
fn requeue_row(tx: &Connection, now: Millis, actor: &str, id: JobId, from: JobState) -> Result<Option<JobId>> {
    let moved = tx
        .prepare_cached(
            "UPDATE jobs SET state = 'scheduled', attempt = 0, due_at = ?2, finished_at = NULL, terminal_cause = NULL,
                    cause_fingerprint = NULL, quarantine_reason = NULL, cancel_requested_by = NULL, updated_at = ?2
             WHERE id = ?1",
        )?
        .execute(params![id.to_string(), now]);
    if let Err(rusqlite::Error::SqliteFailure(e, _)) = &moved {
        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE {
            let holder = tx
                .prepare_cached(&unique::holder_of_sql("?1"))?
                .query_row([id.to_string()], |r| parse_id(r, 0))
                .optional()?;
            return Ok(Some(holder.ok_or_else(|| unique::holder_missing(&format!("of job {id}")))?));
        }
    }
    moved?;
    let mut e = Entry::new(id, now, Some(from), JobState::Scheduled, 0);
    e.actor = Some(actor);
    e.reason = Some(REQUEUE_REASON);
    log(tx, &e)?;
    Ok(None)
}

fn sweep_batch(tx: &Connection, cutoff: Millis, limit: usize) -> Result<u64> {
    // Transitions go with their job (ON DELETE CASCADE, indexed by job), and edges with their child.
    let deleted = tx
        .prepare_cached(
            "DELETE FROM jobs WHERE id IN (
                 SELECT id FROM jobs WHERE state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')
                 AND finished_at < ?1 LIMIT ?2)",
        )?
        .execute(params![cutoff, limit as i64])? as u64;
    // A workflow goes once the last of its jobs did.
    tx.prepare_cached(SWEEP_WORKFLOWS_SQL)?.execute(params![cutoff, limit as i64])?;
    Ok(deleted)
}

/// Workflows created before `?1` none of whose jobs is left, at most `?2` of them.
const SWEEP_WORKFLOWS_SQL: &str = "DELETE FROM workflows WHERE id IN (
     SELECT w.id FROM workflows w WHERE w.created_at < ?1
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.workflow_id = w.id) LIMIT ?2)";

impl OperatorTx for SqliteOps<'_> {
    fn jobs(&mut self, ids: &[JobId], _lock: bool) -> Result<HashMap<JobId, Found>> {
        let mut stmt = self
            .c
            .prepare_cached("SELECT state, attempt, cancel_requested_by IS NOT NULL, due_at FROM jobs WHERE id = ?1")?;
        let mut out = HashMap::with_capacity(ids.len());
        for id in ids {
            let found = stmt
                .query_row([id.to_string()], |r| {
                    Ok(Found {
                        state: parse_state(r, 0)?,
                        attempt: r.get(1)?,
                        cancel_requested: r.get(2)?,
                        due_at: r.get(3)?,
                    })
                })
                .optional()?;
            if let Some(found) = found {
                out.insert(*id, found);
            }
        }
        Ok(out)
    }

    fn cancel_scheduled(
        &mut self,
        now: Millis,
        actor: &str,
        cause: &str,
        jobs: &[(JobId, u32, JobState)],
    ) -> Result<u64> {
        let fingerprint = cause_fingerprint(cause);
        for (id, attempt, from) in jobs {
            self.c
                .prepare_cached(
                    "UPDATE jobs SET state = 'cancelled', terminal_cause = ?2, cause_fingerprint = ?3,
                            cancel_requested_by = ?4, finished_at = ?5, updated_at = ?5 WHERE id = ?1",
                )?
                .execute(params![id.to_string(), cause, fingerprint, actor, now])?;
            let mut e = Entry::new(*id, now, Some(*from), JobState::Cancelled, *attempt);
            e.actor = Some(actor);
            e.reason = Some(cause);
            log(self.c, &e)?;
        }
        Ok(jobs.len() as u64)
    }

    fn ask_to_stop(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64> {
        for (id, detail) in jobs {
            self.c
                .prepare_cached("UPDATE jobs SET cancel_requested_by = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(params![id.to_string(), actor, now])?;
            super::admin::audit(self.c, now, actor, action, Some(*id), detail)?;
        }
        Ok(jobs.len() as u64)
    }

    fn make_due(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64> {
        for (id, detail) in jobs {
            self.c
                .prepare_cached("UPDATE jobs SET due_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'scheduled'")?
                .execute(params![id.to_string(), now])?;
            super::admin::audit(self.c, now, actor, action, Some(*id), detail)?;
        }
        Ok(jobs.len() as u64)
    }

    fn keyed(&mut self, ids: &[JobId]) -> Result<HashSet<JobId>> {
        let mut stmt = self.c.prepare_cached("SELECT unique_key IS NOT NULL FROM jobs WHERE id = ?1")?;
        let mut out = HashSet::new();
        for id in ids {
            if stmt.query_row([id.to_string()], |r| r.get::<_, bool>(0)).optional()? == Some(true) {
                out.insert(*id);
            }
        }
        Ok(out)
    }

    fn requeue_jobs(&mut self, now: Millis, actor: &str, jobs: &[(JobId, JobState)]) -> Result<u64> {
        for (id, from) in jobs {
            requeue_row(self.c, now, actor, *id, *from)?;
        }
        Ok(jobs.len() as u64)
    }

    fn requeue_keyed(&mut self, now: Millis, actor: &str, id: JobId, from: JobState) -> Result<Option<JobId>> {
        requeue_row(self.c, now, actor, id, from)
    }

    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64> {
        super::jobs::cancel_dependents(self.c, now, parents)
    }
}

/// SQLite's transactions for a bulk run (`ops/bulk.rs`), each on the store's clock.
impl BulkStore for SqliteStore {
    fn bulk_write<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        let now = self.now();
        self.write(|c| f(&mut SqliteOps { c, now }))
    }

    fn bulk_read<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        let now = self.now();
        self.read(|c| f(&mut SqliteOps { c, now }))
    }
}

/// SQLite's statements for a bulk run: each batch picks the jobs still to do afresh, exact
/// under the one writer ([`BulkSet::Picked`]).
impl BulkTx for SqliteOps<'_> {
    /// One `count(*)` per condition.
    fn count_each(&mut self, scope: &JobFilter, base: &str, each: &[String]) -> Result<Vec<u64>> {
        let mut counts = vec![count_where(self.c, scope, base)?];
        for extra in each {
            counts.push(count_where(self.c, scope, &format!("{base} AND ({extra})"))?);
        }
        Ok(counts)
    }

    fn bulk_set(&mut self, run: &BulkRun) -> Result<BulkSet> {
        Ok(BulkSet::Picked { total: count_where(self.c, &run.scope, &run.pending())? })
    }

    /// Never given a list (this backend's sets are picked). A requeue's batch is picked by its
    /// own indexes, and its statements decide on the rows ([`requeue_batch`]), so it reads no
    /// job first.
    fn take_batch(&mut self, run: &BulkRun, _listed: Option<&[JobId]>) -> Result<Batch> {
        if run.action == BulkAction::Requeue {
            return Ok(Batch { ids: requeueable_ids(self.c, &run.scope)?, found: HashMap::new() });
        }
        let ids = ids_where(self.c, &run.scope, &run.pending())?;
        let found = self.jobs(&ids, true)?;
        Ok(Batch { ids, found })
    }

    fn requeue_batch(&mut self, now: Millis, actor: &str, batch: Batch) -> Result<u64> {
        requeue_batch(self.c, now, actor, &batch.ids)
    }
}

/// `count(*)` of the filter's jobs that also meet `extra` (our own SQL, no input).
fn count_where(c: &Connection, filter: &JobFilter, extra: &str) -> Result<u64> {
    let (clause, args) = filter.where_clause();
    Ok(c.prepare_cached(&format!("SELECT count(*) FROM jobs WHERE {clause} AND {extra}"))?
        .query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

/// Ids of up to [`BULK_BATCH`] of the filter's jobs that also meet `extra`.
fn ids_where(c: &Connection, filter: &JobFilter, extra: &str) -> Result<Vec<JobId>> {
    let (clause, args) = filter.where_clause();
    Ok(c.prepare_cached(&format!("SELECT id FROM jobs WHERE {clause} AND {extra} LIMIT {BULK_BATCH}"))?
        .query_map(params_from_iter(args), |r| parse_id(r, 0))?
        .collect::<Result<_, _>>()?)
}

impl PurgeTx for SqliteOps<'_> {
    fn purge_batch(&mut self, cutoff: Millis) -> Result<u64> {
        sweep_batch(self.c, cutoff, BULK_BATCH)
    }
}

impl RepairTx for SqliteOps<'_> {
    fn editable(&mut self, id: JobId) -> Result<Option<Editable>> {
        Ok(self
            .c
            .prepare_cached("SELECT state, payload, wire_name, unique_key FROM jobs WHERE id = ?1")?
            .query_row([id.to_string()], |r| {
                Ok(Editable {
                    state: parse_state(r, 0)?,
                    payload: r.get(1)?,
                    wire_name: r.get(2)?,
                    unique_key: r.get(3)?,
                })
            })
            .optional()?)
    }

    fn set_payload(&mut self, id: JobId, payload: &[u8], key: Option<&str>, now: Millis) -> Result<()> {
        let edited = self
            .c
            .prepare_cached(
                "UPDATE jobs SET payload = ?2, unique_key = coalesce(?4, unique_key), updated_at = ?3 WHERE id = ?1",
            )?
            .execute(params![id.to_string(), payload, now, key]);
        if let Err(rusqlite::Error::SqliteFailure(e, _)) = &edited {
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE {
                return Err(unique::edit_collides(id));
            }
        }
        edited?;
        Ok(())
    }

    fn priority_of(&mut self, id: JobId) -> Result<Option<(JobState, u8)>> {
        Ok(self
            .c
            .prepare_cached("SELECT state, priority FROM jobs WHERE id = ?1")?
            .query_row([id.to_string()], |r| Ok((parse_state(r, 0)?, crate::store::ops::columns::priority(r.get(1)?))))
            .optional()?)
    }

    fn set_priority(&mut self, id: JobId, priority: u8, now: Millis) -> Result<()> {
        self.c.prepare_cached("UPDATE jobs SET priority = ?2, updated_at = ?3 WHERE id = ?1")?.execute(params![
            id.to_string(),
            priority,
            now
        ])?;
        Ok(())
    }

    fn purgeable(&mut self, id: JobId) -> Result<Option<Purgeable>> {
        Ok(self
            .c
            .prepare_cached("SELECT state, wire_name, queue FROM jobs WHERE id = ?1")?
            .query_row([id.to_string()], |r| {
                Ok(Purgeable { state: parse_state(r, 0)?, wire_name: r.get(1)?, queue: r.get(2)? })
            })
            .optional()?)
    }

    fn delete_job(&mut self, id: JobId) -> Result<()> {
        self.c.prepare_cached("DELETE FROM jobs WHERE id = ?1")?.execute([id.to_string()])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobState, QuarantineReason};

    fn plan(filter: &JobFilter) -> Vec<String> {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(crate::store::SCHEMA_SQL).unwrap();
        let (sql, args) = requeue_picker(&crate::store::ops::preview::requeue_scope(filter, 1_000), BULK_BATCH);
        let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn a_requeue_of_one_failed_state_and_wire_name_picks_its_batches_from_the_names_own_index() {
        let dead = JobFilter { wire_name: Some("w".into()), ..JobFilter::state(JobState::DeadLettered) };
        let p = plan(&dead);
        assert!(p.iter().any(|l| l.contains("jobs_dead_causes (wire_name=?")), "{p:?}");
        let cause = JobFilter { fingerprint: Some("boom".into()), ..dead.clone() };
        let p = plan(&cause);
        assert!(p.iter().any(|l| l.contains("jobs_dead_causes (wire_name=? AND cause_fingerprint=?")), "{p:?}");
        let quarantined = JobFilter { wire_name: Some("w".into()), ..JobFilter::state(JobState::Quarantined) };
        let p = plan(&quarantined);
        assert!(p.iter().any(|l| l.contains("jobs_quarantine (wire_name=?")), "{p:?}");
        let reason = JobFilter { quarantine_reason: Some(QuarantineReason::NoHandler), ..quarantined };
        let p = plan(&reason);
        assert!(p.iter().any(|l| l.contains("jobs_quarantine (wire_name=? AND quarantine_reason=?")), "{p:?}");
        // Both failed states, or no wire name: the covering list of every failed job, as before.
        let both = JobFilter { wire_name: Some("w".into()), ..JobFilter::default() };
        for other in [both, JobFilter::state(JobState::DeadLettered), JobFilter::default()] {
            let p = plan(&other);
            assert!(p.iter().any(|l| l.contains("jobs_failed_list")), "{p:?}");
        }
    }
}
