//! The operator actions on a queue or a wire name, written once: the one order a pause or a
//! limit is checked in, and pause and resume themselves, on [`Store`]. A backend supplies the
//! reads a decision needs ([`PauseRead`]) and the statements on `pauses` ([`PauseTx`]).

use super::AuditAction;
use crate::error::{Error, Result};
use crate::model::{Millis, Permission};
use crate::store::{Backend, PauseKind, PauseResult, ResumeResult, Store};

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

/// A pause must end after `now`, or it would end at once.
pub(crate) fn check_until(until: Option<Millis>, now: Millis) -> Result<()> {
    check_ends_later(NameAction::Pause, until, now)
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
        "unknown {kind} '{name}': no job or worker mentions it (check the spelling, or set `force` to {} it \
         ahead of its first job)",
        action.as_str()
    ))
}

/// What a pause or limit decision reads, per dialect: the actor's permission and whether a name
/// is known.
pub(crate) trait PauseRead {
    /// `PermissionDenied` unless the actor (on PostgreSQL, the one the server vouches for)
    /// holds `permission`.
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()>;
    /// Whether any job or any registered worker mentions the queue or wire name, or it has a
    /// pause or a limit (one set ahead of its first job with `--force` is changed without it).
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

/// The statements pause and resume need, per dialect, in one write transaction.
pub(crate) trait PauseTx: PauseRead {
    /// The time the transaction decides at.
    fn now(&mut self) -> Result<Millis>;
    /// Decide one name at a time: PostgreSQL's writers run side by side (SQLite has one writer).
    fn lock_name(&mut self, kind: PauseKind, name: &str) -> Result<()>;
    /// The pause in force on the name at `now`: `None` when there is none, `Some(until)` when
    /// there is (`until` `None`: until resumed).
    fn pause_in_force(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<Option<Millis>>>;
    /// Store the pause by `by` at `now` (replacing any row the name has).
    fn set_pause(&mut self, kind: PauseKind, name: &str, by: &str, now: Millis, until: Option<Millis>) -> Result<()>;
    /// Delete the name's pause row: whether it was in force at `now` (`None`: there was no row).
    fn lift_pause(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>>;
    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()>;
}

impl Store {
    /// Pause a queue or a wire name, until `until` (epoch ms) or until resumed. Needs
    /// `operate`; audited. A name no job and no worker ever mentioned is refused as a likely
    /// typo unless `force` (to pause one ahead of its first job). Pausing again replaces the
    /// expiry. Applies from every worker's next claim. The actor's permission is checked before
    /// the name, so a refusal never tells an actor without `operate` which names exist.
    pub fn pause(
        &self,
        actor: &str,
        kind: PauseKind,
        name: &str,
        until: Option<Millis>,
        force: bool,
    ) -> Result<PauseResult> {
        self.check_name_first(NameAction::Pause, actor, kind, name, until, force)?;
        self.pauses_write(|tx| {
            let now = tx.now()?;
            // `true`: the name was checked (or forced) above, outside the write lock.
            decide_name_action(&mut *tx, NameAction::Pause, actor, kind, name, Some((until, now)), true)?;
            tx.lock_name(kind, name)?;
            let previous = tx.pause_in_force(kind, name, now)?;
            tx.set_pause(kind, name, actor, now, until)?;
            tx.audit(now, actor, AuditAction::Pause, &pause_detail(kind, name, until))?;
            Ok(match previous {
                Some(previous_until) => PauseResult::Extended { previous_until },
                None => PauseResult::Paused,
            })
        })
    }

    /// Lift a pause. Needs `operate`; audited when something was resumed. A lapsed pause counts
    /// as not paused (its row is removed all the same).
    pub fn resume(&self, actor: &str, kind: PauseKind, name: &str) -> Result<ResumeResult> {
        self.pauses_write(|tx| {
            tx.require(actor, Permission::Operate)?;
            let now = tx.now()?;
            tx.lock_name(kind, name)?;
            if tx.lift_pause(kind, name, now)? != Some(true) {
                return Ok(ResumeResult::NotPaused);
            }
            tx.audit(now, actor, AuditAction::Resume, &format!("{kind} {name}"))?;
            Ok(ResumeResult::Resumed)
        })
    }

    /// [`decide_name_action`] in a read transaction, ahead of the write of a pause or a limit:
    /// whether a wire name is known is a scan of every job when it is not (the typo case), and
    /// on SQLite that scan inside the write transaction held every worker's claims and
    /// completions for its length (160-175 ms at 1,000,000 jobs). Once this passes (or with
    /// `force`, which skips it), the write skips the known-name check and decides everything
    /// else in its own transaction, in the same order.
    pub(crate) fn check_name_first(
        &self,
        action: NameAction,
        actor: &str,
        kind: PauseKind,
        name: &str,
        until: Option<Millis>,
        force: bool,
    ) -> Result<()> {
        // A store opened read-only refuses the write whatever the name (exit 3, as a requeue
        // there does); an old schema opened read-only may not have the tables the check reads.
        if force || self.is_read_only() {
            return Ok(());
        }
        let decide = |read: &mut dyn PauseRead, now: Millis| {
            decide_name_action(read, action, actor, kind, name, Some((until, now)), false)
        };
        match &self.backend {
            Backend::Sqlite(s) => s.read(|c| decide(&mut { c }, s.now())),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.read(|tx| {
                let now = tx.now()?;
                decide(tx, now)
            }),
        }
    }

    /// Run `f` in one write transaction of this store's backend, for a pause or a resume.
    fn pauses_write<T>(&self, mut f: impl FnMut(&mut dyn PauseTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.names_write(|tx| f(tx)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.write(|tx| f(tx)),
        }
    }
}
