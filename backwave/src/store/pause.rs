//! Pausing and resuming a queue or a wire name, as both backends report it. A pause is a row in
//! `pauses` that every claim reads in its own transaction, so every worker of every process
//! honours it at its next poll without being told; running jobs finish and enqueues still land.
//! The policy is `ops/names.rs`'s; the statements, the dialects' `pause.rs`.

use std::fmt;

use serde::Serialize;

use crate::model::Millis;

/// What a pause stops: every job of a queue, or every job with a wire name, in any queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseKind {
    /// A queue: none of its jobs is claimed.
    Queue,
    /// A wire name: none of its jobs is claimed, whatever queue it is in.
    WireName,
}

impl PauseKind {
    /// The spelling in the store's `pauses.kind` and in JSON: `queue`, `wire-name`.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseKind::Queue => "queue",
            PauseKind::WireName => "wire-name",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<PauseKind> {
        match s {
            "queue" => Some(PauseKind::Queue),
            "wire-name" => Some(PauseKind::WireName),
            _ => None,
        }
    }
}

impl fmt::Display for PauseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pause in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// A queue or a wire name.
    pub kind: PauseKind,
    /// The queue's or wire name's name.
    pub name: String,
    /// The operator who paused it.
    pub paused_by: String,
    /// When.
    pub paused_at: Millis,
    /// When it lapses by itself; `None` until resumed.
    pub until: Option<Millis>,
}

/// The result of a pause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum PauseResult {
    /// Now paused (it was not).
    Paused,
    /// It was paused already: its expiry is now the one given, and the new actor is recorded.
    Extended {
        /// The expiry it had (`None`: until resumed).
        previous_until: Option<Millis>,
    },
}

/// The result of a resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum ResumeResult {
    /// The pause was lifted: its jobs are claimable again.
    Resumed,
    /// No pause in force: nothing changed.
    NotPaused,
}

/// What a pause would hold, counted when planned ([`Store::plan_pause`]): to show, and have
/// confirmed, before calling [`Store::pause`].
///
/// [`Store::plan_pause`]: crate::Store::plan_pause
/// [`Store::pause`]: crate::Store::pause
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PausePlan {
    /// Scheduled jobs no worker would claim while the pause lasts (due now or later).
    pub scheduled: u64,
    /// Running jobs, which finish normally.
    pub running: u64,
}
