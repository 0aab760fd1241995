//! Limits and quiet workers on PostgreSQL: the statements under the policy of `ops/limits.rs`
//! and `ops/workers.rs`. What differs from SQLite is that claims run side by side: a claim that
//! would take jobs under a limit first takes the limit's advisory lock (`pg_try_advisory_xact_lock`,
//! never waiting), counts under it and charges before it commits; a claim that cannot get the
//! lock leaves that name to the claim that holds it.

use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::Millis;
use crate::store::ops::limits::{
    claim_limits, limit_from_parts, statuses, ClaimLimits, Limit, LimitCounts, LimitTx, CHARGE_WINDOW_SQL,
    LIMITS_IN_FORCE_SQL,
};
use crate::store::ops::workers::{self, QuietTx};
use crate::store::ops::{AuditAction, StoreTx};
use crate::store::{LimitStatus, PauseKind, WorkerSelector, WorkerState};

fn rows(tx: &mut Tx<'_>, now: Millis) -> Result<Vec<Limit>> {
    let mut out = Vec::new();
    for r in tx.query(LIMITS_IN_FORCE_SQL, &[&now])? {
        out.extend(limit_from_parts(
            r.try_get::<_, &str>(0)?,
            r.try_get(1)?,
            r.try_get::<_, &str>(2)?,
            r.try_get(3)?,
            r.try_get(4)?,
            r.try_get(5)?,
            r.try_get(6)?,
            r.try_get(7)?,
            r.try_get(8)?,
        ));
    }
    Ok(out)
}

struct PgCounts<'t, 'a> {
    tx: &'t mut Tx<'a>,
    now: Millis,
}

impl LimitCounts for PgCounts<'_, '_> {
    fn running(&mut self, kind: PauseKind, name: &str) -> Result<u64> {
        let sql = match kind {
            PauseKind::Queue => {
                "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= $1 AND queue = $2"
            }
            PauseKind::WireName => {
                "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at >= $1 AND wire_name = $2"
            }
        };
        let n: i64 = self.tx.query_one(sql, &[&self.now, &name])?.try_get(0)?;
        Ok(n.max(0) as u64)
    }

    fn window(&mut self, kind: PauseKind, name: &str) -> Result<Option<(Millis, u64)>> {
        self.tx
            .query_opt(
                "SELECT window_start, claimed FROM limit_windows WHERE kind = $1 AND name = $2",
                &[&kind.as_str(), &name],
            )?
            .map(|r| Ok((r.try_get(0)?, r.try_get::<_, i64>(1)?.max(0) as u64)))
            .transpose()
    }

    fn due(&mut self, kind: PauseKind, name: &str) -> Result<u64> {
        let sql = match kind {
            PauseKind::Queue => {
                "SELECT count(*) FROM jobs WHERE state = 'scheduled' AND queue = $2
                                  AND priority = ANY ('{0,1,2,3,4,5,6,7,8,9}'::bigint[]) AND due_at <= $1"
            }
            PauseKind::WireName => {
                "SELECT count(*) FROM jobs WHERE state = 'scheduled' AND wire_name = $2 AND due_at <= $1"
            }
        };
        let n: i64 = self.tx.query_one(sql, &[&self.now, &name])?.try_get(0)?;
        Ok(n.max(0) as u64)
    }

    /// The limit's advisory lock, never waited for: one another claim holds gets no budget in
    /// this claim, so two claims never both count the same free slot.
    fn take(&mut self, kind: PauseKind, name: &str) -> Result<bool> {
        self.tx.try_lock(&format!(":limit:{kind}:{name}"))
    }
}

/// Every limit in force at `now` with its counts, in the caller's snapshot (a health read's too).
pub(in crate::store::postgres) fn read_statuses(tx: &mut Tx<'_>, now: Millis) -> Result<Vec<LimitStatus>> {
    let rows = rows(tx, now)?;
    statuses(rows, now, &mut PgCounts { tx, now })
}

/// The limits one claim honours: a queue limit of a queue asked for, any wire-name limit, each
/// taken under its advisory lock in name order ([`LimitCounts::take`]).
pub(super) fn for_claim(tx: &mut Tx<'_>, now: Millis, queues: &[String]) -> Result<ClaimLimits> {
    let rows = rows(tx, now)?;
    claim_limits(rows, now, Some(queues), &mut PgCounts { tx, now })
}

pub(super) fn charge_windows(tx: &mut Tx<'_>, limits: &ClaimLimits, now: Millis) -> Result<()> {
    for (kind, name, start, n) in limits.window_charges(now) {
        tx.execute(CHARGE_WINDOW_SQL, &[&kind.as_str(), &name, &start, &n])?;
    }
    Ok(())
}

impl LimitTx for Tx<'_> {
    fn now(&mut self) -> Result<Millis> {
        Tx::now(self)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()> {
        StoreTx::audit(self, now, actor, action, None, detail)
    }

    fn lock_name(&mut self, kind: PauseKind, name: &str) -> Result<()> {
        let key = format!(":limit-set:{kind}:{name}");
        self.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || $1))", &[&key])?;
        Ok(())
    }

    fn rows(&mut self, now: Millis) -> Result<Vec<Limit>> {
        rows(self, now)
    }

    fn write_row(&mut self, l: &Limit) -> Result<()> {
        let concurrency = l.spec.concurrency.map(i64::from);
        let rate = l.spec.rate.map(|r| i64::from(r.n));
        let window = l.spec.rate.map(|r| r.window_ms());
        self.execute(
            "INSERT INTO limits (kind, name, source, concurrency, rate, rate_window_ms, set_by, set_at, until)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (kind, name, source) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
                    rate_window_ms = excluded.rate_window_ms, set_by = excluded.set_by, set_at = excluded.set_at,
                    until = excluded.until",
            &[
                &l.kind.as_str(),
                &l.name,
                &l.source.as_str(),
                &concurrency,
                &rate,
                &window,
                &l.set_by,
                &l.set_at,
                &l.until,
            ],
        )?;
        Ok(())
    }

    fn delete_operator(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>> {
        self.query_opt(
            "DELETE FROM limits WHERE kind = $1 AND name = $2 AND source = 'operator'
             RETURNING until IS NULL OR until > $3",
            &[&kind.as_str(), &name, &now],
        )?
        .map(|r| Ok(r.try_get(0)?))
        .transpose()
    }
}

impl PgStore {
    pub fn limits(&self) -> Result<Vec<LimitStatus>> {
        self.read(|tx| {
            let now = tx.now()?;
            read_statuses(tx, now)
        })
    }

    pub fn quiet_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>> {
        self.set_quiet(actor, selector, true)
    }

    pub fn resume_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>> {
        self.set_quiet(actor, selector, false)
    }

    fn set_quiet(&self, actor: &str, selector: &WorkerSelector, quiet: bool) -> Result<Vec<String>> {
        self.write(|tx| workers::set_quiet(tx, actor, selector, quiet))
    }

    pub fn mark_quiet_self(&self, worker_id: &str, quiet: bool) -> Result<()> {
        use crate::store::QUIET_BY_PROCESS;
        self.write(|tx| {
            if quiet {
                let now = tx.now()?;
                tx.execute(
                    "UPDATE workers SET quiet_at = $2, quiet_by = $3 WHERE id = $1 AND quiet_at IS NULL",
                    &[&worker_id, &now, &QUIET_BY_PROCESS],
                )?;
            } else {
                tx.execute(
                    "UPDATE workers SET quiet_at = NULL, quiet_by = NULL WHERE id = $1 AND quiet_by = $2",
                    &[&worker_id, &QUIET_BY_PROCESS],
                )?;
            }
            Ok(())
        })
    }

    pub fn mark_stopping(&self, worker_id: &str) -> Result<()> {
        self.write(|tx| {
            let now = tx.now()?;
            tx.execute("UPDATE workers SET stopping_at = $2 WHERE id = $1", &[&worker_id, &now])?;
            Ok(())
        })
    }

    pub fn worker_states(&self) -> Result<Vec<WorkerState>> {
        self.read(|tx| {
            let now = tx.now()?;
            read_states(tx, now)
        })
    }
}

/// Every registered worker's state at `now`, in the caller's snapshot (a health read's too).
pub(in crate::store::postgres) fn read_states(tx: &mut Tx<'_>, now: Millis) -> Result<Vec<WorkerState>> {
    tx.query(
        "SELECT w.id, w.quiet_at, w.quiet_by, w.stopping_at,
                (SELECT count(*) FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.id
                                               AND j.lease_expires_at >= $1)
         FROM workers w ORDER BY w.id",
        &[&now],
    )?
    .iter()
    .map(|r| {
        Ok(WorkerState {
            id: r.try_get(0)?,
            quiet_at: r.try_get(1)?,
            quiet_by: r.try_get(2)?,
            stopping_at: r.try_get(3)?,
            running: r.try_get::<_, i64>(4)?.max(0) as u64,
        })
    })
    .collect()
}

/// PostgreSQL's statements for quiet and resume.
impl QuietTx for Tx<'_> {
    fn count_workers(&mut self, selector: &WorkerSelector) -> Result<u64> {
        let (col, value) = selector.column();
        let n: i64 =
            self.query_one(&format!("SELECT count(*) FROM workers WHERE {col} = $1"), &[&value])?.try_get(0)?;
        Ok(n as u64)
    }

    fn change_quiet(&mut self, sel: &WorkerSelector, quiet: bool, by: &str, now: Millis) -> Result<Vec<String>> {
        let (col, value) = sel.column();
        let rows = if quiet {
            let sql = format!(
                "UPDATE workers SET quiet_at = $2, quiet_by = $3 WHERE {col} = $1 AND quiet_at IS NULL RETURNING id"
            );
            self.query(&sql, &[&value, &now, &by])?
        } else {
            let sql = format!(
                "UPDATE workers SET quiet_at = NULL, quiet_by = NULL WHERE {col} = $1 AND quiet_at IS NOT NULL
                 RETURNING id"
            );
            self.query(&sql, &[&value])?
        };
        Ok(rows.iter().map(|r| r.try_get(0)).collect::<std::result::Result<Vec<String>, _>>()?)
    }
}
