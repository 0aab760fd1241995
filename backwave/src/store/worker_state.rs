//! Quiet and stopping worker processes. Quiet is two columns of the worker's registry row that
//! every claim of that worker reads in its own transaction: a quiet worker claims nothing from
//! its next poll and finishes what it runs. Quiet and resume need `operate` and are audited;
//! `stopping_at` is written by the engine itself when it begins to shut down. The policy is
//! `ops/workers.rs`; the statements, the dialects' `limit.rs`.

use serde::Serialize;

use crate::error::Error;
use crate::model::Millis;

/// Who a worker's quiet is by when its own process set it (SIGTSTP, `EngineHandle::quiet`): the
/// `quiet_by` of its [`WorkerState`] as [`Store::worker_states`] reads it.
///
/// [`Store::worker_states`]: crate::Store::worker_states
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
        Error::InvalidInput(format!("no registered worker has {what} '{v}' (see `Store::workers`)"))
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
