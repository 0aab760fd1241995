//! Limits on SQLite: the counts and statements under the limit policy of `ops/limits.rs`. A
//! claim holds the one write lock, so what it counts cannot move under it.

use rusqlite::{params, Connection, OptionalExtension};

use super::ops::limits::{claim_limits, limit_from_parts, statuses, ClaimLimits, Limit, LimitCounts, LimitTx};
use super::ops::limits::{CHARGE_WINDOW_SQL, LIMITS_IN_FORCE_SQL};
use super::ops::AuditAction;
use super::pause::SqlitePauses;
use super::{LimitStatus, PauseKind, SqliteStore};
use crate::error::Result;
use crate::model::Millis;

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
                "SELECT count(*) FROM jobs INDEXED BY jobs_claim WHERE state = 'scheduled' AND queue = ?1 AND due_at <= ?2",
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
