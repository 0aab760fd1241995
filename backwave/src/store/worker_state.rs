//! Quiet and stopping worker processes. Quiet is two columns of the worker's registry row that
//! every claim of that worker reads in its own transaction: a quiet worker claims nothing from
//! its next poll and finishes what it runs. Quiet and resume need `operate` and are audited;
//! `stopping_at` is written by the engine itself when it begins to shut down.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::operator::SqliteOps;
use super::ops::workers::{self, QuietTx};
use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::Millis;

/// Who a worker's quiet is by when its own process set it (SIGTSTP, `EngineHandle::quiet`):
/// what `bw workers` shows as `quiet <since> by its own process`.
pub const QUIET_BY_PROCESS: &str = "its own process";

/// Which worker processes an operator means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerSelector {
    /// One worker (one group of one process), by its registry id.
    Id(String),
    /// Every worker registered from this host.
    Host(String),
    /// Every worker of this worker group, on every host.
    Group(String),
}

impl WorkerSelector {
    /// The column and value of the registry the selector matches.
    pub(crate) fn column(&self) -> (&'static str, &str) {
        match self {
            WorkerSelector::Id(v) => ("id", v),
            WorkerSelector::Host(v) => ("host", v),
            WorkerSelector::Group(v) => ("worker_group", v),
        }
    }

    /// The refusal of a selector that matches no registered worker: quieting nothing must not
    /// look done.
    pub(crate) fn unmatched(&self) -> Error {
        let (what, v) = match self {
            WorkerSelector::Id(v) => ("id", v),
            WorkerSelector::Host(v) => ("host", v),
            WorkerSelector::Group(v) => ("worker group", v),
        };
        Error::InvalidInput(format!("no registered worker has {what} '{v}' (see `bw workers`)"))
    }
}

/// What a registered worker is doing beyond its heartbeat: quiet, stopping, how much it runs
/// ([`Store::worker_states`](crate::Store::worker_states)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerState {
    /// The worker's id.
    pub id: String,
    /// Set while quiet: when, and by whom.
    pub quiet_at: Option<Millis>,
    /// Who quieted it: an operator, or [`QUIET_BY_PROCESS`] for the process itself.
    pub quiet_by: Option<String>,
    /// Set once its engine began to shut down.
    pub stopping_at: Option<Millis>,
    /// Jobs Running under its lease now.
    pub running: u64,
}

/// Whether `worker_id` is quiet: one primary-key read per claim.
pub(crate) fn is_quiet(c: &Connection, worker_id: &str) -> Result<bool> {
    Ok(c.prepare_cached("SELECT quiet_at IS NOT NULL FROM workers WHERE id = ?1")?
        .query_row([worker_id], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false))
}

/// The audit detail of a quiet or resume.
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
