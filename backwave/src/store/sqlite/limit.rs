//! Limits and quiet workers on SQLite: the counts and statements under the policy of
//! `ops/limits.rs` and `ops/workers.rs`. A claim holds the one write lock, so what it counts
//! cannot move under it. Quiet is two columns of the worker's registry row that every claim of
//! that worker reads in its own transaction (see `store/worker_state.rs`).

use rusqlite::{params, Connection, OptionalExtension};

use super::pause::SqlitePauses;
use super::{SqliteOps, SqliteStore};
use crate::error::Result;
use crate::model::Millis;
use crate::store::ops::limits::{claim_limits, limit_from_parts, statuses, ClaimLimits, Limit, LimitCounts, LimitTx};
use crate::store::ops::limits::{CHARGE_WINDOW_SQL, LIMITS_IN_FORCE_SQL};
use crate::store::ops::workers::{self, QuietTx};
use crate::store::ops::AuditAction;
use crate::store::{LimitStatus, PauseKind, WorkerSelector, WorkerState, QUIET_BY_PROCESS};

struct SqliteCounts<'a> {
    c: &'a Connection,
    now: Millis,
}

impl LimitCounts for SqliteCounts<'_> {
    fn running(&mut self, kind: PauseKind, name: &str) -> Result<u64> {
        running(self.c, self.now, kind, name)
    }
    fn window(&mut self, kind: PauseKind, name: &str) -> Result<Option<(Millis, u64)>> {
        window(self.c, kind, name)
    }
    fn due(&mut self, kind: PauseKind, name: &str) -> Result<u64> {
        due(self.c, self.now, kind, name)
    }
}

fn rows(c: &Connection, now: Millis) -> Result<Vec<Limit>> {
    let mut stmt = c.prepare_cached(LIMITS_IN_FORCE_SQL)?;
    let rows = stmt.query_map([now], |r| {
        Ok(limit_from_parts(
            &r.get::<_, String>(0)?,
            r.get(1)?,
            &r.get::<_, String>(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ))
    })?;
    let mut out = Vec::new();
    for r in rows {
        out.extend(r?);
    }
    Ok(out)
}

/// Running jobs under a live lease of a queue or wire name: the slots a concurrency limit
/// counts. The running set is small (every worker slot at most), and `jobs_lease` holds it.
const RUNNING_SQL_QUEUE: &str =
    "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= ?1 AND queue = ?2";
const RUNNING_SQL_WIRE: &str =
    "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= ?1 AND wire_name = ?2";

fn running(c: &Connection, now: Millis, kind: PauseKind, name: &str) -> Result<u64> {
    let sql = match kind {
        PauseKind::Queue => RUNNING_SQL_QUEUE,
        PauseKind::WireName => RUNNING_SQL_WIRE,
    };
    let n: i64 = c.prepare_cached(sql)?.query_row(params![now, name], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

fn window(c: &Connection, kind: PauseKind, name: &str) -> Result<Option<(Millis, u64)>> {
    Ok(c.prepare_cached("SELECT window_start, claimed FROM limit_windows WHERE kind = ?1 AND name = ?2")?
        .query_row(params![kind.as_str(), name], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
        .optional()?)
}

fn due(c: &Connection, now: Millis, kind: PauseKind, name: &str) -> Result<u64> {
    let n: i64 = match kind {
        PauseKind::Queue => c
            .prepare_cached(
                "SELECT count(*) FROM jobs INDEXED BY jobs_claim_priority WHERE state = 'scheduled' AND queue = ?1
                 AND priority IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9) AND due_at <= ?2",
            )?
            .query_row(params![name, now], |r| r.get(0))?,
        PauseKind::WireName => c
            .prepare_cached(
                "SELECT coalesce(sum((SELECT count(*) FROM jobs INDEXED BY jobs_claim_wire
                                      WHERE state = 'scheduled' AND queue = q.queue AND wire_name = ?1 AND due_at <= ?2)), 0)
                 FROM (SELECT DISTINCT queue FROM job_counts) q",
            )?
            .query_row(params![name, now], |r| r.get(0))?,
    };
    Ok(n.max(0) as u64)
}

/// Every limit in force at `now` with its counts, in the caller's snapshot (a health read's too).
pub(crate) fn read_statuses(c: &Connection, now: Millis) -> Result<Vec<LimitStatus>> {
    statuses(rows(c, now)?, now, &mut SqliteCounts { c, now })
}

/// The limits a SQLite claim from `queues` honours at `now` (the claim holds the write lock, so
/// the counts cannot move under it). With no limit in force this is one read of an empty table.
pub(crate) fn for_claim(c: &Connection, now: Millis, queues: &[String]) -> Result<ClaimLimits> {
    claim_limits(rows(c, now)?, now, Some(queues), &mut SqliteCounts { c, now })
}

/// Write a claim's rate charges.
pub(crate) fn charge_windows(c: &Connection, limits: &ClaimLimits, now: Millis) -> Result<()> {
    let sql = CHARGE_WINDOW_SQL.replace('$', "?");
    for (kind, name, start, n) in limits.window_charges(now) {
        c.prepare_cached(&sql)?.execute(params![kind.as_str(), name, start, n])?;
    }
    Ok(())
}

/// SQLite's statements for the limit policy, on the pause policy's transaction (the same
/// permission and name reads); `now` is the store's clock (one writer).
impl LimitTx for SqlitePauses<'_> {
    fn now(&mut self) -> Result<Millis> {
        Ok(self.now)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()> {
        super::admin::audit(self.c, now, actor, action, None, detail)
    }

    fn lock_name(&mut self, _: PauseKind, _: &str) -> Result<()> {
        Ok(())
    }

    fn rows(&mut self, now: Millis) -> Result<Vec<Limit>> {
        rows(self.c, now)
    }

    fn write_row(&mut self, l: &Limit) -> Result<()> {
        self.c
            .prepare_cached(
                "INSERT INTO limits (kind, name, source, concurrency, rate, rate_window_ms, set_by, set_at, until)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (kind, name, source) DO UPDATE SET concurrency = ?4, rate = ?5, rate_window_ms = ?6,
                        set_by = ?7, set_at = ?8, until = ?9",
            )?
            .execute(params![
                l.kind.as_str(),
                l.name,
                l.source.as_str(),
                l.spec.concurrency,
                l.spec.rate.map(|r| r.n),
                l.spec.rate.map(|r| r.window_ms()),
                l.set_by,
                l.set_at,
                l.until
            ])?;
        Ok(())
    }

    fn delete_operator(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>> {
        Ok(self
            .c
            .prepare_cached(
                "DELETE FROM limits WHERE kind = ?1 AND name = ?2 AND source = 'operator'
                 RETURNING until IS NULL OR until > ?3",
            )?
            .query_row(params![kind.as_str(), name, now], |r| r.get(0))
            .optional()?)
    }
}

impl SqliteStore {
    pub fn limits(&self) -> Result<Vec<LimitStatus>> {
        if self.version < 5 {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.read(|c| read_statuses(c, now))
    }
}

/// Whether `worker_id` is quiet: one primary-key read per claim.
pub(crate) fn is_quiet(c: &Connection, worker_id: &str) -> Result<bool> {
    Ok(c.prepare_cached("SELECT quiet_at IS NOT NULL FROM workers WHERE id = ?1")?
        .query_row([worker_id], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false))
}

/// Quiet and stopping workers (`store/worker_state.rs`).
impl SqliteStore {
    pub fn quiet_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>> {
        self.set_quiet(actor, selector, true)
    }

    pub fn resume_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>> {
        self.set_quiet(actor, selector, false)
    }

    fn set_quiet(&self, actor: &str, selector: &WorkerSelector, quiet: bool) -> Result<Vec<String>> {
        let now = self.now();
        self.write(|c| workers::set_quiet(&mut SqliteOps { c, now }, actor, selector, quiet))
    }

    pub fn mark_quiet_self(&self, worker_id: &str, quiet: bool) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            if quiet {
                tx.execute(
                    "UPDATE workers SET quiet_at = ?2, quiet_by = ?3 WHERE id = ?1 AND quiet_at IS NULL",
                    params![worker_id, now, QUIET_BY_PROCESS],
                )?;
            } else {
                tx.execute(
                    "UPDATE workers SET quiet_at = NULL, quiet_by = NULL WHERE id = ?1 AND quiet_by = ?2",
                    params![worker_id, QUIET_BY_PROCESS],
                )?;
            }
            Ok(())
        })
    }

    pub fn mark_stopping(&self, worker_id: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute("UPDATE workers SET stopping_at = ?2 WHERE id = ?1", params![worker_id, now])?;
            Ok(())
        })
    }

    pub fn worker_states(&self) -> Result<Vec<WorkerState>> {
        if self.version < 5 {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.read(|c| read_states(c, now))
    }
}

/// Every registered worker's state at `now`, in the caller's snapshot (a health read's too).
pub(crate) fn read_states(c: &Connection, now: Millis) -> Result<Vec<WorkerState>> {
    c.prepare_cached(
        "SELECT w.id, w.quiet_at, w.quiet_by, w.stopping_at,
                (SELECT count(*) FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.id
                                               AND j.lease_expires_at >= ?1)
         FROM workers w ORDER BY w.id",
    )?
    .query_map([now], |r| {
        Ok(WorkerState {
            id: r.get(0)?,
            quiet_at: r.get(1)?,
            quiet_by: r.get(2)?,
            stopping_at: r.get(3)?,
            running: r.get::<_, i64>(4)?.max(0) as u64,
        })
    })?
    .collect::<Result<_, _>>()
    .map_err(Into::into)
}

/// SQLite's statements for quiet and resume.
impl QuietTx for SqliteOps<'_> {
    fn count_workers(&mut self, selector: &WorkerSelector) -> Result<u64> {
        let (col, value) = selector.column();
        let sql = format!("SELECT count(*) FROM workers WHERE {col} = ?1");
        Ok(self.c.query_row(&sql, [value], |r| r.get::<_, i64>(0))? as u64)
    }

    fn change_quiet(&mut self, sel: &WorkerSelector, quiet: bool, by: &str, now: Millis) -> Result<Vec<String>> {
        let (col, value) = sel.column();
        Ok(if quiet {
            let sql = format!(
                "UPDATE workers SET quiet_at = ?2, quiet_by = ?3 WHERE {col} = ?1 AND quiet_at IS NULL RETURNING id"
            );
            self.c.prepare(&sql)?.query_map(params![value, now, by], |r| r.get(0))?.collect::<Result<_, _>>()?
        } else {
            let sql = format!(
                "UPDATE workers SET quiet_at = NULL, quiet_by = NULL WHERE {col} = ?1 AND quiet_at IS NOT NULL
                 RETURNING id"
            );
            self.c.prepare(&sql)?.query_map(params![value], |r| r.get(0))?.collect::<Result<_, _>>()?
        })
    }
}
