//! Pausing and resuming a queue or a wire name on PostgreSQL: a row in `pauses` that every
//! claim reads in its own transaction. Pauses and resumes of one name are decided one at a time
//! (an advisory lock on the name), so that of two operators pausing it at once one pauses and
//! the other extends, as with SQLite's one writer. The policy is `ops/names.rs`'s; this module
//! holds its statements, and never touches a job.

use super::admin::require;
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{Millis, Permission};
use crate::store::ops::names::{decide_name_action, NameAction, PauseRead, PauseTx};
use crate::store::ops::{AuditAction, StoreTx};
use crate::store::{Pause, PauseKind, PausePlan};

impl PgStore {
    pub fn plan_pause(&self, actor: &str, kind: PauseKind, name: &str, force: bool) -> Result<PausePlan> {
        self.read(|tx| {
            decide_name_action(tx, NameAction::Pause, actor, kind, name, None, force)?;
            let r = match kind {
                // The kept counts plus the deltas not yet folded in: exact in this snapshot.
                PauseKind::Queue => tx.query_one(
                    "SELECT coalesce(sum(n) FILTER (WHERE state = 'scheduled'), 0)::bigint,
                            coalesce(sum(n) FILTER (WHERE state = 'running'), 0)::bigint
                     FROM (SELECT state, n FROM job_counts WHERE queue = $1
                           UNION ALL SELECT state, d FROM job_count_deltas WHERE queue = $1) c",
                    &[&name],
                )?,
                // One range of `jobs_claim_wire` per queue, rather than a walk of every
                // Scheduled job.
                PauseKind::WireName => tx.query_one(
                    "SELECT (SELECT coalesce(sum((SELECT count(*) FROM jobs WHERE state = 'scheduled'
                                                  AND queue = q.queue AND wire_name = $1)), 0)::bigint
                             FROM (SELECT queue FROM job_counts UNION SELECT queue FROM job_count_deltas) q),
                            (SELECT count(*) FROM jobs WHERE state = 'running' AND wire_name = $1)",
                    &[&name],
                )?,
            };
            let (scheduled, running): (i64, i64) = (r.try_get(0)?, r.try_get(1)?);
            Ok(PausePlan { scheduled: scheduled.max(0) as u64, running: running.max(0) as u64 })
        })
    }

    pub fn pauses(&self) -> Result<Vec<Pause>> {
        self.read(|tx| {
            let now = tx.now()?;
            super::health::pauses(tx, now)
        })
    }
}

impl PauseRead for Tx<'_> {
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()> {
        require(self, actor, permission)
    }

    /// The same sources as SQLite's; `?` asks whether a jsonb array holds the string.
    fn is_known(&mut self, kind: PauseKind, name: &str) -> Result<bool> {
        let sql = match kind {
            PauseKind::Queue => {
                "SELECT EXISTS (SELECT 1 FROM job_counts WHERE queue = $1)
                 OR EXISTS (SELECT 1 FROM job_count_deltas WHERE queue = $1)
                 OR EXISTS (SELECT 1 FROM workers WHERE queues ? $1)
                 OR EXISTS (SELECT 1 FROM pauses WHERE kind = $2 AND name = $1)
                 OR EXISTS (SELECT 1 FROM limits WHERE kind = $2 AND name = $1)"
            }
            PauseKind::WireName => {
                "SELECT EXISTS (SELECT 1 FROM workers WHERE wire_names ? $1)
                 OR EXISTS (SELECT 1 FROM pauses WHERE kind = $2 AND name = $1)
                 OR EXISTS (SELECT 1 FROM limits WHERE kind = $2 AND name = $1)
                 OR EXISTS (SELECT 1 FROM jobs WHERE wire_name = $1)"
            }
        };
        Ok(self.query_one(sql, &[&name, &kind.as_str()])?.try_get(0)?)
    }
}

impl PauseTx for Tx<'_> {
    fn now(&mut self) -> Result<Millis> {
        Tx::now(self)
    }

    /// Wait for any other transaction pausing or resuming the same name, until this one ends.
    fn lock_name(&mut self, kind: PauseKind, name: &str) -> Result<()> {
        self.query_one(
            "SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':pause:' || $1 || ':' || $2))",
            &[&kind.as_str(), &name],
        )?;
        Ok(())
    }

    fn pause_in_force(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<Option<Millis>>> {
        Ok(self
            .query_opt(
                "SELECT until FROM pauses WHERE kind = $1 AND name = $2 AND (until IS NULL OR until > $3)",
                &[&kind.as_str(), &name, &now],
            )?
            .map(|r| r.try_get(0))
            .transpose()?)
    }

    fn set_pause(&mut self, kind: PauseKind, name: &str, by: &str, now: Millis, until: Option<Millis>) -> Result<()> {
        self.execute(
            "INSERT INTO pauses (kind, name, paused_by, paused_at, until) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (kind, name) DO UPDATE
             SET paused_by = excluded.paused_by, paused_at = excluded.paused_at, until = excluded.until",
            &[&kind.as_str(), &name, &by, &now, &until],
        )?;
        Ok(())
    }

    fn lift_pause(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>> {
        Ok(self
            .query_opt(
                "DELETE FROM pauses WHERE kind = $1 AND name = $2 RETURNING until IS NULL OR until > $3",
                &[&kind.as_str(), &name, &now],
            )?
            .map(|r| r.try_get(0))
            .transpose()?)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()> {
        StoreTx::audit(self, now, actor, action, None, detail)
    }
}
