//! Recurring schedules, written once for both backends: declaring them (a changed definition is
//! updated and audited), firing their ticks, pausing, resuming and triggering them, on [`Store`]
//! (the order each operation checks and writes in, which ticks are due, what job a tick makes,
//! what counts as orphaned or overdue); each backend supplies only statements, as a
//! [`ScheduleTx`]. The one that matters, [`claim_ticks`](Store::claim_ticks), moves the
//! schedule's cursor by a compare-and-swap in the transaction that inserts the tick's jobs:
//! exactly one job per tick, whatever the number of processes, and a crash between the two
//! leaves neither.

use std::time::Duration;

use serde::Serialize;

use super::names::check_until;
use super::{AuditAction, StoreTx};
use crate::error::{Error, Result};
use crate::model::{Enqueued, JobId, JobState, Millis, NewJob, Permission};
use crate::schedule::{
    check_schedule_name, tick_label, unique_key, Schedule, Timetable, SCHEDULE_LABEL, SCHEDULE_ORPHANED_AFTER,
    TICK_GRACE, TICK_LABEL, TRIGGERED_BY_LABEL,
};
use crate::store::{Backend, Store};

/// A schedule as stored, with the state of the last job it made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScheduleRow {
    /// The definition as last declared.
    #[serde(flatten)]
    pub schedule: Schedule,
    /// The cursor: the latest tick fired or dropped, or when the schedule was first declared.
    pub last_tick: Millis,
    /// The job the latest fired tick made.
    pub last_job_id: Option<JobId>,
    /// `None` when there is no last job, or it has been swept by retention.
    pub last_job_state: Option<JobState>,
    /// When a tick last made a job.
    pub last_fired_at: Option<Millis>,
    /// When it was first declared.
    pub declared_at: Millis,
    /// When its definition last changed.
    pub updated_at: Millis,
    /// When a running engine last said it declares it.
    pub seen_at: Millis,
    /// The operator who paused it, while paused.
    pub paused_by: Option<String>,
    /// When it was paused.
    pub paused_at: Option<Millis>,
    /// When the pause lapses by itself (`None`: until resumed).
    pub paused_until: Option<Millis>,
    /// Ticks of a [`Schedule::unique`] schedule that made no job because the previous tick's
    /// job was still pending.
    pub skipped_ticks: i64,
}

impl ScheduleRow {
    /// Whether a pause is in force at `now` (one with an `until` lapses by itself).
    pub fn is_paused(&self, now: Millis) -> bool {
        self.paused_at.is_some() && self.paused_until.is_none_or(|u| u > now)
    }

    /// Whether no running application has declared it for [`SCHEDULE_ORPHANED_AFTER`].
    pub fn is_orphaned(&self, now: Millis) -> bool {
        now.saturating_sub(self.seen_at) > SCHEDULE_ORPHANED_AFTER.as_millis() as Millis
    }
}

/// A schedule as [`Store::schedules`] reports it: the stored row and what follows from it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The stored schedule.
    pub row: ScheduleRow,
    /// The next tick that would fire (after the cursor, or after now when that is later).
    pub next_fire: Option<Millis>,
    /// Whether a pause is in force now.
    pub paused: bool,
    /// Whether no running application has declared it for [`SCHEDULE_ORPHANED_AFTER`].
    pub orphaned: bool,
    /// How late the first unfired tick is, once past the grace: nobody is firing it.
    pub overdue: Option<Duration>,
}

/// What declaring one schedule did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum Declared {
    /// Not in the store before: stored, its first tick is the next one after now.
    New,
    /// Stored already with this very definition.
    Unchanged,
    /// The stored definition differed: replaced (audited with each change). The cursor stays.
    Updated {
        /// Each field that changed, in words (`cron "0 2 * * *" -> "0 3 * * *"`).
        changes: Vec<String>,
    },
}

/// What firing a schedule's due ticks did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickFire {
    /// The schedule's name.
    pub name: String,
    /// The ticks that got a job, with it.
    pub fired: Vec<(Millis, JobId)>,
    /// The ticks of a [`Schedule::unique`] schedule that got none: the job that still held
    /// the schedule's key, with each.
    pub skipped: Vec<(Millis, JobId)>,
    /// The cursor moved here (ticks up to it that got no job were dropped by the policy or a pause).
    pub through: Millis,
}

/// The result of pausing a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum SchedulePauseResult {
    /// Now paused (it was not).
    Paused,
    /// It was paused already: now until the new `until`.
    Extended {
        /// The expiry it had (`None`: until resumed).
        previous_until: Option<Millis>,
    },
}

/// The result of resuming a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum ScheduleResumeResult {
    /// The pause was lifted: its next tick fires.
    Resumed,
    /// It was not paused: nothing changed.
    NotPaused,
}

/// The job [`Store::trigger_schedule`] made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Trigger {
    /// The schedule's name.
    pub schedule: String,
    /// The job it enqueued.
    pub job: JobId,
}

/// The refusal of a name no schedule has.
pub(crate) fn unknown_schedule(name: &str) -> Error {
    Error::InvalidInput(format!("no schedule named '{name}' (`Store::schedules` lists them)"))
}

/// The refusal of a store whose schema predates schedules (a read-only open of an old store).
pub(crate) fn no_schedules_table(version: i64) -> Error {
    Error::InvalidInput(format!(
        "this store is at schema version {version}, which has no schedules: open it once with `Store::open` \
         where it may be written, which migrates it"
    ))
}

/// How a stored schedule differs from a declaration, one readable line per field.
pub(crate) fn differences(stored: &Schedule, declared: &Schedule) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |what: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{what} {a:?} -> {b:?}"));
        }
    };
    field("cron", stored.cron.clone(), declared.cron.clone());
    field("zone", stored.zone.clone(), declared.zone.clone());
    field("wire name", stored.wire_name.clone(), declared.wire_name.clone());
    field("queue", stored.queue.clone(), declared.queue.clone());
    field(
        "payload",
        String::from_utf8_lossy(&stored.payload).into_owned(),
        String::from_utf8_lossy(&declared.payload).into_owned(),
    );
    field("labels", format!("{:?}", stored.labels), format!("{:?}", declared.labels));
    field("missed", stored.missed.to_string(), declared.missed.to_string());
    field("unique", stored.unique.to_string(), declared.unique.to_string());
    field("priority", stored.priority.to_string(), declared.priority.to_string());
    out
}

/// Validate every declaration before anything is stored, and refuse two with one name.
pub(crate) fn validate_all(defs: &[Schedule]) -> Result<()> {
    for (i, d) in defs.iter().enumerate() {
        d.validate()?;
        if defs[..i].iter().any(|o| o.name == d.name) {
            return Err(Error::InvalidInput(format!("two schedules are named '{}'", d.name)));
        }
    }
    Ok(())
}

/// Refuse a schedule whose payload is over the store's `payload_limit`: every tick would fail to
/// enqueue its job, silently but for the ticker's error count (issue 20). Both backends, in the
/// declaring transaction, so nothing is stored.
pub(crate) fn check_payloads(defs: &[Schedule], limit: u64) -> Result<()> {
    match defs.iter().find(|d| d.payload.len() as u64 > limit) {
        Some(d) => Err(Error::InvalidInput(format!(
            "schedule '{}': its payload is {} bytes, over the store's payload_limit of {limit} bytes, so every tick \
             would fail to enqueue; make it smaller or raise the store's `payload_limit` setting (`Store::set_setting`)",
            d.name,
            d.payload.len()
        ))),
        None => Ok(()),
    }
}

/// The audit detail of a declaration.
pub(crate) fn declare_detail(d: &Schedule) -> String {
    format!("{} '{}' in {} -> {} on {} (missed: {})", d.name, d.cron, d.zone, d.wire_name, d.queue, d.missed)
}

/// The job a tick makes: the schedule's, labelled with the schedule and the tick.
pub(crate) fn tick_job(s: &Schedule, tick: Millis) -> NewJob {
    let mut job = NewJob::new(&s.wire_name, &s.queue, s.payload.clone()).priority(s.priority);
    job.labels = s.labels.clone();
    job.labels.insert(SCHEDULE_LABEL.into(), s.name.clone());
    job.labels.insert(TICK_LABEL.into(), tick_label(tick));
    if s.unique {
        job.unique = Some(crate::model::UniqueRule::key(unique_key(&s.name)));
    }
    job
}

/// The job `bw schedule trigger` makes: the schedule's, labelled with who triggered it.
pub(crate) fn trigger_job(s: &Schedule, actor: &str) -> NewJob {
    let mut job = NewJob::new(&s.wire_name, &s.queue, s.payload.clone()).priority(s.priority);
    job.labels = s.labels.clone();
    job.labels.insert(SCHEDULE_LABEL.into(), s.name.clone());
    job.labels.insert(TRIGGERED_BY_LABEL.into(), actor.to_string());
    job
}

pub(crate) fn pause_detail(name: &str, until: Option<Millis>) -> String {
    let until_text = until.map_or_else(|| "until resumed".to_string(), |u| format!("until {u}"));
    format!("schedule {name} {until_text}")
}

impl Store {
    /// Every schedule in the store, by name, with its next fire, whether it is paused,
    /// orphaned (no running application declares it) or overdue. Anyone may read them.
    pub fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let now = self.now();
        Ok(self.schedule_rows()?.into_iter().map(|row| schedule_info(row, now)).collect())
    }

    /// One schedule by name, as [`Store::schedules`] shows it; a name no schedule has is refused.
    pub fn schedule(&self, name: &str) -> Result<ScheduleInfo> {
        check_schedule_name(name)?;
        let now = self.now();
        let row = self.schedule_row(name)?.ok_or_else(|| unknown_schedule(name))?;
        Ok(schedule_info(row, now))
    }

    /// Fire the due ticks of the schedules `names` (those this process declares): for each
    /// schedule whose next tick is due, one job per tick the missed-tick policy fires (none
    /// while paused), with the cursor moved by compare-and-swap in the same transaction. A
    /// schedule another process fired first is skipped: its tick has its job. Returns what was
    /// fired, and the earliest tick still ahead (when to look again).
    pub fn fire_due_schedules(&self, names: &[String]) -> Result<(Vec<TickFire>, Option<Millis>)> {
        let mut fired = Vec::new();
        let mut next: Option<Millis> = None;
        for row in self.schedule_rows()?.into_iter().filter(|r| names.contains(&r.schedule.name)) {
            // A row whose definition no longer parses (written by another program) is left alone.
            let Ok(table) = Timetable::parse(&row.schedule.cron, &row.schedule.zone) else { continue };
            let now = self.now();
            let mut cursor = row.last_tick;
            if let Some(plan) = table.due(row.last_tick, now, row.schedule.missed, row.is_paused(now)) {
                let jobs: Vec<NewJob> = plan.fire.iter().map(|&t| tick_job(&row.schedule, t)).collect();
                // A tick's jobs are an enqueue like any other: a producer span (naming the
                // schedule) in the firing code's current span, whose trace the jobs carry, so
                // that their attempts continue the tick's trace.
                let span = crate::telemetry::enqueue_span(&jobs);
                span.record("backwave.schedule", row.schedule.name.as_str());
                let jobs = crate::otel::stamp(&jobs, &span);
                let claimed =
                    span.in_scope(|| self.claim_ticks(&row.schedule.name, row.last_tick, plan.through, &jobs));
                let answers = claimed.as_ref().map(|made| made.as_deref().unwrap_or_default());
                crate::telemetry::enqueued(&span, answers);
                if let Some(made) = claimed? {
                    let mut fire = TickFire {
                        name: row.schedule.name.clone(),
                        fired: Vec::new(),
                        skipped: Vec::new(),
                        through: plan.through,
                    };
                    for (&tick, made) in plan.fire.iter().zip(made) {
                        match made {
                            Enqueued::Created(id) => fire.fired.push((tick, id)),
                            Enqueued::Duplicate(id) => fire.skipped.push((tick, id)),
                        }
                    }
                    fired.push(fire);
                }
                cursor = plan.through;
            }
            if let Some(n) = table.next_after(cursor.max(now)) {
                next = Some(next.map_or(n, |m: Millis| m.min(n)));
            }
        }
        Ok((fired, next))
    }
}

pub(crate) fn schedule_info(row: ScheduleRow, now: Millis) -> ScheduleInfo {
    let table = Timetable::parse(&row.schedule.cron, &row.schedule.zone).ok();
    let paused = row.is_paused(now);
    let next_fire = table.as_ref().and_then(|t| match (paused, row.paused_until) {
        // Ticks that fall in a pause are dropped: the next fire is the first tick from its end.
        (true, None) => None,
        (true, Some(until)) => t.next_after(until.max(now) - 1),
        (false, _) => t.next_after(now.max(row.last_tick)),
    });
    let overdue = if paused { None } else { table.as_ref().and_then(|t| t.overdue(row.last_tick, now, TICK_GRACE)) };
    ScheduleInfo { orphaned: row.is_orphaned(now), next_fire, paused, overdue, row }
}

/// The columns a [`ScheduleRow`] is read from, in order (the last job's state joined), on a
/// store of schema `version`: 7 has no uniqueness columns, so `zero` (the dialect's literal of
/// their type) stands in for both and its schedules read as plain ones; before 16 the priority
/// is read as `zero`, the default.
pub(crate) fn row_columns(version: i64, zero: &str) -> String {
    let unique = if version >= 8 { "s.unique_pending, s.skipped_ticks".to_string() } else { format!("{zero}, {zero}") };
    let priority = if version >= 16 { "s.priority" } else { zero };
    format!(
        "s.name, s.cron, s.zone, s.wire_name, s.queue, s.payload, s.labels, s.missed, s.catch_up_max, s.last_tick,
         s.last_job_id, j.state, s.last_fired_at, s.declared_at, s.updated_at, s.seen_at, s.paused_by, s.paused_at,
         s.paused_until, {unique}, {priority}"
    )
}

/// How many of a claim's answers made no job: the ticks a unique schedule skipped.
pub(crate) fn skipped(made: &[Enqueued]) -> i64 {
    made.iter().filter(|e| matches!(e, Enqueued::Duplicate(_))).count() as i64
}

/// The last job a claim created, if any (a skipped tick's holder is no new fire).
pub(crate) fn last_created(made: &[Enqueued]) -> Option<JobId> {
    made.iter().rev().find_map(|e| match e {
        Enqueued::Created(id) => Some(*id),
        Enqueued::Duplicate(_) => None,
    })
}

/// What the schedule policy below asks of a backend in one transaction: statements, no
/// decisions (the model is `store/health`'s `HealthRead`). SQLite's is in `store/sqlite/schedules.rs`,
/// PostgreSQL's in `store/postgres/schedules.rs`.
pub(crate) trait ScheduleTx {
    /// The transaction as every operator action has it: time, permission, audit, payload limit.
    fn ops(&mut self) -> &mut dyn StoreTx;
    /// Decide one name at a time: PostgreSQL's writers run side by side (SQLite has one writer).
    fn lock_name(&mut self, name: &str) -> Result<()>;
    /// The stored schedules by name, or the one named.
    fn rows(&mut self, name: Option<&str>) -> Result<Vec<ScheduleRow>>;
    /// Running applications declare these still, at `now` (a later `seen_at` stays).
    fn touch(&mut self, names: &[String], now: Millis) -> Result<()>;
    /// Store a new declaration (`new`: its cursor at `now`) or replace a stored definition.
    fn write_definition(&mut self, d: &Schedule, now: Millis, new: bool) -> Result<()>;
    /// A running application declares it still, at `now`.
    fn see(&mut self, name: &str, now: Millis) -> Result<()>;
    /// Move the cursor from `expected` to `through`: false when it is no longer at `expected`.
    fn move_cursor(&mut self, name: &str, expected: Millis, through: Millis) -> Result<bool>;
    /// Insert jobs as `insert_many` does (a unique job's duplicate answers with the holder).
    fn insert_jobs(&mut self, jobs: &[NewJob], now: Millis) -> Result<Vec<Enqueued>>;
    fn set_last_job(&mut self, name: &str, job: JobId, now: Millis) -> Result<()>;
    fn add_skipped(&mut self, name: &str, n: i64) -> Result<()>;
    /// Pause (`Some((by, at, until))`) or lift the pause (`None`).
    fn set_pause(&mut self, name: &str, pause: Option<(&str, Millis, Option<Millis>)>) -> Result<()>;
}

fn declare(tx: &mut dyn ScheduleTx, actor: &str, defs: &[Schedule], now: Millis) -> Result<Vec<Declared>> {
    check_payloads(defs, tx.ops().payload_limit()?)?;
    let mut out = Vec::with_capacity(defs.len());
    for d in defs {
        tx.lock_name(&d.name)?;
        let result = match row(tx, &d.name)? {
            None => {
                tx.write_definition(d, now, true)?;
                tx.ops().audit(now, actor, AuditAction::ScheduleDeclare, None, &declare_detail(d))?;
                Declared::New
            }
            Some(row) => {
                let changes = differences(&row.schedule, d);
                if changes.is_empty() {
                    tx.see(&d.name, now)?;
                    Declared::Unchanged
                } else {
                    tx.write_definition(d, now, false)?;
                    let detail = format!("{}: {}", d.name, changes.join("; "));
                    tx.ops().audit(now, actor, AuditAction::ScheduleUpdate, None, &detail)?;
                    Declared::Updated { changes }
                }
            }
        };
        out.push(result);
    }
    Ok(out)
}

fn claim(
    tx: &mut dyn ScheduleTx,
    name: &str,
    expected_last: Millis,
    through: Millis,
    jobs: &[NewJob],
) -> Result<Option<Vec<Enqueued>>> {
    let now = tx.ops().now()?;
    if !tx.move_cursor(name, expected_last, through)? {
        return Ok(None);
    }
    // A tick's job that is the duplicate of a unique job answers with the holder's id.
    let made = tx.insert_jobs(jobs, now)?;
    if let Some(last) = last_created(&made) {
        tx.set_last_job(name, last, now)?;
    }
    let skipped = skipped(&made);
    if skipped > 0 {
        tx.add_skipped(name, skipped)?;
    }
    Ok(Some(made))
}

fn row(tx: &mut dyn ScheduleTx, name: &str) -> Result<Option<ScheduleRow>> {
    Ok(tx.rows(Some(name))?.pop())
}

/// The schedule an operator names (under the name's lock with `lock`); the caller has checked
/// that the actor may operate.
fn named(tx: &mut dyn ScheduleTx, name: &str, lock: bool) -> Result<ScheduleRow> {
    if lock {
        tx.lock_name(name)?;
    }
    row(tx, name)?.ok_or_else(|| unknown_schedule(name))
}

fn pause(tx: &mut dyn ScheduleTx, actor: &str, name: &str, until: Option<Millis>) -> Result<SchedulePauseResult> {
    let now = tx.ops().now()?;
    // The permission before the input checked against the store (an expiry already past), as
    // every refusal orders them (tests/cli/refusals.rs) and a queue's pause does.
    tx.ops().require(actor, Permission::Operate)?;
    check_until(until, now)?;
    let row = named(tx, name, true)?;
    tx.set_pause(name, Some((actor, now, until)))?;
    tx.ops().audit(now, actor, AuditAction::SchedulePause, None, &pause_detail(name, until))?;
    Ok(if row.is_paused(now) {
        SchedulePauseResult::Extended { previous_until: row.paused_until }
    } else {
        SchedulePauseResult::Paused
    })
}

fn resume(tx: &mut dyn ScheduleTx, actor: &str, name: &str) -> Result<ScheduleResumeResult> {
    let now = tx.ops().now()?;
    tx.ops().require(actor, Permission::Operate)?;
    let row = named(tx, name, true)?;
    tx.set_pause(name, None)?;
    if !row.is_paused(now) {
        return Ok(ScheduleResumeResult::NotPaused);
    }
    tx.ops().audit(now, actor, AuditAction::ScheduleResume, None, &format!("schedule {name}"))?;
    Ok(ScheduleResumeResult::Resumed)
}

fn trigger(tx: &mut dyn ScheduleTx, actor: &str, name: &str) -> Result<Trigger> {
    let now = tx.ops().now()?;
    tx.ops().require(actor, Permission::Operate)?;
    let row = named(tx, name, false)?;
    let id = tx.insert_jobs(&[trigger_job(&row.schedule, actor)], now)?[0].id();
    tx.set_last_job(name, id, now)?;
    tx.ops().audit(now, actor, AuditAction::ScheduleTrigger, Some(id), &format!("schedule {name}"))?;
    Ok(Trigger { schedule: name.to_string(), job: id })
}

impl Store {
    /// Store the schedules an application declares, in one transaction, after validating every
    /// one (an invalid cron expression, an unknown zone, a name with control characters: nothing
    /// is stored). A new one starts with its next tick; one whose stored definition differs is
    /// updated (its cursor kept) and the change audited as `actor`; each is marked as seen.
    pub fn declare_schedules(&self, actor: &str, defs: &[Schedule]) -> Result<Vec<Declared>> {
        validate_all(defs)?;
        let now = self.now();
        self.schedule_write(|tx| declare(tx, actor, defs, now))
    }

    /// Move schedule `name`'s cursor from `expected_last` to `through` and insert `jobs`, in one
    /// transaction; `None` (nothing written) when the cursor is no longer `expected_last`:
    /// another process fired those ticks. The jobs go in as [`Store::insert_many`]'s do (payload
    /// limit, uniqueness): each `Created`, or `Duplicate` naming the job that holds its key. The
    /// exactly-once primitive under [`Store::fire_due_schedules`].
    pub fn claim_ticks(
        &self,
        name: &str,
        expected_last: Millis,
        through: Millis,
        jobs: &[NewJob],
    ) -> Result<Option<Vec<Enqueued>>> {
        crate::store::ops::enqueue::validate_new_jobs(jobs)?;
        self.schedule_write(|tx| claim(tx, name, expected_last, through, jobs))
    }

    /// Pause a schedule until `until` (epoch ms) or until resumed: the ticks that fall in the
    /// pause are dropped, never fired later. Needs `operate`; audited.
    pub fn pause_schedule(&self, actor: &str, name: &str, until: Option<Millis>) -> Result<SchedulePauseResult> {
        check_schedule_name(name)?;
        self.schedule_write(|tx| pause(tx, actor, name, until))
    }

    /// Lift a schedule's pause. Needs `operate`; audited when something was resumed.
    pub fn resume_schedule(&self, actor: &str, name: &str) -> Result<ScheduleResumeResult> {
        check_schedule_name(name)?;
        self.schedule_write(|tx| resume(tx, actor, name))
    }

    /// Enqueue one job of the schedule now, outside its tick sequence (the cursor does not
    /// move). Needs `operate`; audited with the job's id.
    pub fn trigger_schedule(&self, actor: &str, name: &str) -> Result<Trigger> {
        check_schedule_name(name)?;
        self.schedule_write(|tx| trigger(tx, actor, name))
    }

    /// Every stored schedule by name, with the state of the last job it made. Anyone may read
    /// them; a store at a schema version before schedules has none.
    pub fn schedule_rows(&self) -> Result<Vec<ScheduleRow>> {
        self.schedule_read(|tx| tx.rows(None))
    }

    /// One stored schedule by name.
    pub fn schedule_row(&self, name: &str) -> Result<Option<ScheduleRow>> {
        self.schedule_read(|tx| row(tx, name))
    }

    /// Say a running application still declares these schedules (they are not orphaned).
    pub fn touch_schedules(&self, names: &[String]) -> Result<()> {
        let now = self.now();
        self.schedule_write(|tx| tx.touch(names, now))
    }

    /// Run `f` in one write transaction of this store's backend; a store whose schema predates
    /// schedules is refused first.
    fn schedule_write<T>(&self, f: impl FnMut(&mut dyn ScheduleTx) -> Result<T>) -> Result<T> {
        let version = self.schema_version();
        if version < 7 {
            return Err(no_schedules_table(version));
        }
        self.schedule_tx(true, version, f)
    }

    /// Run `f` in one read transaction; a store whose schema predates schedules has none.
    fn schedule_read<T: Default>(&self, f: impl FnMut(&mut dyn ScheduleTx) -> Result<T>) -> Result<T> {
        let version = self.schema_version();
        if version < 7 {
            return Ok(T::default());
        }
        self.schedule_tx(false, version, f)
    }

    fn schedule_tx<T>(&self, write: bool, version: i64, f: impl FnMut(&mut dyn ScheduleTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.schedule_tx(write, version, f),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.schedule_tx(write, version, f),
        }
    }
}
