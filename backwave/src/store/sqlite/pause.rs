//! Pausing and resuming a queue or a wire name. A pause is a row in `pauses` that the claim
//! reads in its own transaction (see `jobs.rs`), so every worker of every process honours it at
//! its next poll without being told; running jobs finish and enqueues still land. Pauses and
//! resumes need `operate` and are audited (the policy is `ops/names.rs`'s, written once for
//! both backends); this module never touches a job.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::error::Result;
use crate::model::{Millis, Permission};
use crate::store::ops::names::{decide_name_action, NameAction, PauseRead, PauseTx};
use crate::store::ops::AuditAction;
use crate::store::{Pause, PauseKind, PausePlan};

/// The pauses a claim honours at `now`, read once per claim transaction.
#[derive(Debug, Default)]
pub(crate) struct ActivePauses {
    pub queues: HashSet<String>,
    pub wire_names: Vec<String>,
}

/// Pauses in force at `now`. The table is a handful of rows, so this costs a claim next to
/// nothing; with none in force the claim runs exactly as before.
pub(crate) fn active(tx: &Connection, now: Millis) -> Result<ActivePauses> {
    let mut out = ActivePauses::default();
    let mut stmt = tx.prepare_cached("SELECT kind, name FROM pauses WHERE until IS NULL OR until > ?1")?;
    let mut rows = stmt.query([now])?;
    while let Some(r) = rows.next()? {
        let name: String = r.get(1)?;
        match PauseKind::parse(&r.get::<_, String>(0)?) {
            Some(PauseKind::Queue) => {
                out.queues.insert(name);
            }
            Some(PauseKind::WireName) => out.wire_names.push(name),
            None => {}
        }
    }
    Ok(out)
}

impl SqliteStore {
    /// One write transaction for the policies on names (`ops/names.rs`, `ops/limits.rs`): pause,
    /// resume, limits. The transaction is both a [`PauseTx`] and a `LimitTx`.
    pub(crate) fn names_write<T>(&self, mut f: impl FnMut(&mut SqlitePauses<'_>) -> Result<T>) -> Result<T> {
        let now = self.now();
        self.write(|c| f(&mut SqlitePauses { c, now }))
    }

    pub fn plan_pause(&self, actor: &str, kind: PauseKind, name: &str, force: bool) -> Result<PausePlan> {
        self.read(|c| {
            let mut read = c;
            decide_name_action(&mut read, NameAction::Pause, actor, kind, name, None, force)?;
            let (scheduled, running): (i64, i64) = match kind {
                PauseKind::Queue => c
                    .prepare_cached(
                        "SELECT coalesce(sum(n) FILTER (WHERE state = 'scheduled'), 0),
                            coalesce(sum(n) FILTER (WHERE state = 'running'), 0)
                     FROM job_counts WHERE queue = ?1",
                    )?
                    .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))?,
                PauseKind::WireName => c
                    .prepare_cached(
                        "SELECT (SELECT coalesce(sum((SELECT count(*) FROM jobs INDEXED BY jobs_claim_wire
                                                  WHERE state = 'scheduled' AND queue = q.queue AND wire_name = ?1)), 0)
                             FROM (SELECT DISTINCT queue FROM job_counts) q),
                            (SELECT count(*) FROM jobs WHERE state = 'running' AND wire_name = ?1)",
                    )?
                    .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))?,
            };
            Ok(PausePlan { scheduled: scheduled.max(0) as u64, running: running.max(0) as u64 })
        })
    }

    pub fn pauses(&self) -> Result<Vec<Pause>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT kind, name, paused_by, paused_at, until FROM pauses WHERE until IS NULL OR until > ?1
             ORDER BY kind, name",
        )?;
        let rows =
            stmt.query_map([self.now()], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (kind, name, paused_by, paused_at, until) = row?;
            let Some(kind) = PauseKind::parse(&kind) else { continue };
            out.push(Pause { kind, name, paused_by, paused_at, until });
        }
        Ok(out)
    }
}

impl PauseRead for &Connection {
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()> {
        super::admin::require(self, actor, permission)
    }

    /// Workers and the per-queue counts are small tables; a wire name with no worker falls back
    /// to the jobs table, which stops at the first match (a full scan only for a name that is
    /// nowhere, the typo case).
    fn is_known(&mut self, kind: PauseKind, name: &str) -> Result<bool> {
        let sql = match kind {
            PauseKind::Queue => {
                "SELECT EXISTS (SELECT 1 FROM job_counts WHERE queue = ?1)
                 OR EXISTS (SELECT 1 FROM workers, json_each(workers.queues) WHERE json_each.value = ?1)
                 OR EXISTS (SELECT 1 FROM pauses WHERE kind = ?2 AND name = ?1)
                 OR EXISTS (SELECT 1 FROM limits WHERE kind = ?2 AND name = ?1)"
            }
            PauseKind::WireName => {
                "SELECT EXISTS (SELECT 1 FROM workers, json_each(workers.wire_names) WHERE json_each.value = ?1)
                 OR EXISTS (SELECT 1 FROM pauses WHERE kind = ?2 AND name = ?1)
                 OR EXISTS (SELECT 1 FROM limits WHERE kind = ?2 AND name = ?1)
                 OR EXISTS (SELECT 1 FROM jobs WHERE wire_name = ?1)"
            }
        };
        Ok(self.prepare_cached(sql)?.query_row(params![name, kind.as_str()], |r| r.get(0))?)
    }
}

/// SQLite's statements for pause and resume, and for limits (`limit.rs`); `now` is the store's
/// clock (one writer, so [`PauseTx::lock_name`] has nothing to wait for).
pub(crate) struct SqlitePauses<'c> {
    pub(crate) c: &'c Connection,
    pub(crate) now: Millis,
}

impl PauseRead for SqlitePauses<'_> {
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()> {
        super::admin::require(self.c, actor, permission)
    }

    fn is_known(&mut self, kind: PauseKind, name: &str) -> Result<bool> {
        let mut c = self.c;
        c.is_known(kind, name)
    }
}

impl PauseTx for SqlitePauses<'_> {
    fn now(&mut self) -> Result<Millis> {
        Ok(self.now)
    }

    fn lock_name(&mut self, _: PauseKind, _: &str) -> Result<()> {
        Ok(())
    }

    fn pause_in_force(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<Option<Millis>>> {
        Ok(self
            .c
            .prepare_cached("SELECT until FROM pauses WHERE kind = ?1 AND name = ?2 AND (until IS NULL OR until > ?3)")?
            .query_row(params![kind.as_str(), name, now], |r| r.get(0))
            .optional()?)
    }

    fn set_pause(&mut self, kind: PauseKind, name: &str, by: &str, now: Millis, until: Option<Millis>) -> Result<()> {
        self.c
            .prepare_cached(
                "INSERT INTO pauses (kind, name, paused_by, paused_at, until) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (kind, name) DO UPDATE SET paused_by = ?3, paused_at = ?4, until = ?5",
            )?
            .execute(params![kind.as_str(), name, by, now, until])?;
        Ok(())
    }

    fn lift_pause(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>> {
        Ok(self
            .c
            .prepare_cached("DELETE FROM pauses WHERE kind = ?1 AND name = ?2 RETURNING until IS NULL OR until > ?3")?
            .query_row(params![kind.as_str(), name, now], |r| r.get(0))
            .optional()?)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()> {
        super::admin::audit(self.c, now, actor, action, None, detail)
    }
}
