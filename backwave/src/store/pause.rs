//! Pausing and resuming a queue or a wire name. A pause is a row in `pauses` that the claim
//! reads in its own transaction (see `jobs.rs`), so every worker of every process honours it at
//! its next poll without being told; running jobs finish and enqueues still land. Pauses and
//! resumes need `operate` and are audited; this module never touches a job.

use std::collections::HashSet;
use std::fmt;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{Millis, Permission};

/// What a pause stops: every job of a queue, or every job with a wire name, in any queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseKind {
    Queue,
    WireName,
}

impl PauseKind {
    /// The spelling in `pauses.kind` and on the command line.
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
    pub kind: PauseKind,
    pub name: String,
    pub paused_by: String,
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
    Extended { previous_until: Option<Millis> },
}

/// The result of a resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum ResumeResult {
    Resumed,
    /// No pause in force: nothing changed.
    NotPaused,
}

/// What a pause would hold, counted when planned: for `bw pause --dry-run` and the dashboard's
/// confirmation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PausePlan {
    /// Scheduled jobs no worker would claim while the pause lasts (due now or later).
    pub scheduled: u64,
    /// Running jobs, which finish normally.
    pub running: u64,
}

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
    pub fn pause(
        &self,
        actor: &str,
        kind: PauseKind,
        name: &str,
        until: Option<Millis>,
        force: bool,
    ) -> Result<PauseResult> {
        let now = self.now();
        self.write(|tx| {
            let mut read = tx;
            decide_name_action(&mut read, NameAction::Pause, actor, kind, name, Some((until, now)), force)?;
            let previous: Option<Option<Millis>> = tx
                .prepare_cached(
                    "SELECT until FROM pauses WHERE kind = ?1 AND name = ?2 AND (until IS NULL OR until > ?3)",
                )?
                .query_row(params![kind.as_str(), name, now], |r| r.get(0))
                .optional()?;
            tx.prepare_cached(
                "INSERT INTO pauses (kind, name, paused_by, paused_at, until) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (kind, name) DO UPDATE SET paused_by = ?3, paused_at = ?4, until = ?5",
            )?
            .execute(params![kind.as_str(), name, actor, now, until])?;
            super::admin::audit(tx, now, actor, "pause", None, &pause_detail(kind, name, until))?;
            Ok(match previous {
                Some(previous_until) => PauseResult::Extended { previous_until },
                None => PauseResult::Paused,
            })
        })
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

    pub fn resume(&self, actor: &str, kind: PauseKind, name: &str) -> Result<ResumeResult> {
        let now = self.now();
        self.write(|tx| {
            super::admin::require(tx, actor, Permission::Operate)?;
            let was_active: Option<bool> = tx
                .prepare_cached(
                    "DELETE FROM pauses WHERE kind = ?1 AND name = ?2 RETURNING until IS NULL OR until > ?3",
                )?
                .query_row(params![kind.as_str(), name, now], |r| r.get(0))
                .optional()?;
            if was_active != Some(true) {
                return Ok(ResumeResult::NotPaused);
            }
            super::admin::audit(tx, now, actor, "resume", None, &format!("{kind} {name}"))?;
            Ok(ResumeResult::Resumed)
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

/// A pause must end after `now`, or it would end at once.
pub(crate) fn check_until(until: Option<Millis>, now: Millis) -> Result<()> {
    check_ends_later(NameAction::Pause, until, now)
}

/// What an operator does to a queue or a wire name, as its refusals word it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameAction {
    Pause,
    Limit,
}

impl NameAction {
    fn as_str(self) -> &'static str {
        match self {
            NameAction::Pause => "pause",
            NameAction::Limit => "limit",
        }
    }
}

/// A pause or a limit must end after `now`, or it would end at once.
pub(crate) fn check_ends_later(action: NameAction, until: Option<Millis>, now: Millis) -> Result<()> {
    match until {
        Some(u) if u <= now => Err(Error::InvalidInput(format!(
            "a {} until {u} would end at once: it is not after now ({now}, epoch ms)",
            action.as_str()
        ))),
        _ => Ok(()),
    }
}

/// The audit detail of a pause.
pub(crate) fn pause_detail(kind: PauseKind, name: &str, until: Option<Millis>) -> String {
    let until_text = until.map_or_else(|| "until resumed".to_string(), |u| format!("until {u}"));
    format!("{kind} {name} {until_text}")
}

pub(crate) fn check_name(kind: PauseKind, name: &str) -> Result<()> {
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!("{name:?} is not a {kind} name")));
    }
    Ok(())
}

/// The refusal of a name nothing mentions.
pub(crate) fn unknown_name(action: NameAction, kind: PauseKind, name: &str) -> Error {
    Error::InvalidInput(format!(
        "unknown {kind} '{name}': no job or worker mentions it (check the spelling, or pass --force to {} it \
         ahead of its first job)",
        action.as_str()
    ))
}

/// What a pause decision reads, per dialect: the actor's permission and whether a name is known.
pub(crate) trait PauseRead {
    /// `PermissionDenied` unless the actor (on PostgreSQL, the one the server vouches for)
    /// holds `permission`.
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()>;
    /// Whether any job or any registered worker mentions the queue or wire name.
    fn is_known(&mut self, kind: PauseKind, name: &str) -> Result<bool>;
}

/// The one order a pause or a limit (and a pause's plan, `expiry` `None`) is checked in, on both
/// backends: the actor's permission first, so that someone who may not act learns nothing else;
/// then the name's spelling, the expiry against now, and a name nothing mentions (unless `force`).
pub(crate) fn decide_name_action(
    read: &mut (impl PauseRead + ?Sized),
    action: NameAction,
    actor: &str,
    kind: PauseKind,
    name: &str,
    expiry: Option<(Option<Millis>, Millis)>,
    force: bool,
) -> Result<()> {
    read.require(actor, Permission::Operate)?;
    check_name(kind, name)?;
    if let Some((until, now)) = expiry {
        check_ends_later(action, until, now)?;
    }
    if force || read.is_known(kind, name)? {
        return Ok(());
    }
    Err(unknown_name(action, kind, name))
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
                 OR EXISTS (SELECT 1 FROM workers, json_each(workers.queues) WHERE json_each.value = ?1)"
            }
            PauseKind::WireName => {
                "SELECT EXISTS (SELECT 1 FROM workers, json_each(workers.wire_names) WHERE json_each.value = ?1)
                 OR EXISTS (SELECT 1 FROM jobs WHERE wire_name = ?1)"
            }
        };
        Ok(self.prepare_cached(sql)?.query_row([name], |r| r.get(0))?)
    }
}
