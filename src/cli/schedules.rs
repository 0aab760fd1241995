//! bw schedules | schedule pause|resume|trigger: see the recurring schedules applications
//! declare (next fire, last fire and its job, paused, orphaned, overdue) and act on one. The
//! store does the work (`Store::schedules`, `pause_schedule`, `resume_schedule`,
//! `trigger_schedule`, the calls `bw top` makes too); this file parses and prints.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{compact_duration, relative, rfc3339, sanitize, Cell, Render, Style, Table, Term};
use super::{exit, parse_duration, CliError, Ctx};
use crate::text::error_text;
use backwave::store::{ScheduleInfo, SchedulePauseResult, ScheduleResumeResult};
use backwave::{JobState, Millis};

#[derive(Debug, clap::Args)]
pub struct ListArgs {}

/// Act on one schedule: pause, resume, or fire one job now
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Pause(PauseArgs),
    Resume(NameArgs),
    Trigger(NameArgs),
}

/// Pause a schedule (needs operate): the ticks that fall in the pause are dropped, never fired
/// later.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The schedule's name.
    pub name: String,
    /// Lift the pause by itself after this long (e.g. 2h); without it, until `bw schedule resume`.
    #[arg(long = "for", value_name = "DUR", value_parser = parse_duration)]
    pub for_: Option<Duration>,
    /// Say what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Resume a paused schedule (needs operate), or enqueue one of its jobs now, outside its tick
/// sequence (`trigger`; needs operate; audited).
#[derive(Debug, clap::Args)]
pub struct NameArgs {
    /// The schedule's name.
    pub name: String,
    /// Say what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn list(_a: &ListArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    ctx.printer()?.print(&SchedulesView { now: store.now(), schedules: store.schedules()? })?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(c: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    match c {
        Command::Pause(a) => pause(a, ctx),
        Command::Resume(a) => resume(a, ctx),
        Command::Trigger(a) => trigger(a, ctx),
    }
}

/// The store, once the actor is known to hold `operate`: refused before the schedule's name is
/// looked up, the order every action decides in (one who may not act learns nothing else).
fn open_to_operate(ctx: &Ctx) -> Result<backwave::Store, CliError> {
    let store = ctx.open()?;
    store.require(ctx.actor(), backwave::Permission::Operate)?;
    Ok(store)
}

/// The schedule `name`, or the store's refusal of a name no schedule has with the one probably
/// meant (`bw schedule pause inventory-sinc`): asked only once the permission held, so someone
/// who may not act learns no names.
fn named(store: &backwave::Store, name: &str) -> Result<ScheduleInfo, CliError> {
    match store.schedule(name) {
        Err(e @ backwave::Error::InvalidInput(_)) => {
            let names: Vec<String> = store.schedules()?.into_iter().map(|s| s.row.schedule.name).collect();
            match crate::text::did_you_mean(name, names.iter().map(String::as_str)) {
                Some(m) => Err(CliError::Usage(format!("{}; did you mean '{}'?", error_text(&e), sanitize(m)))),
                None => Err(e.into()),
            }
        }
        other => Ok(other?),
    }
}

fn pause(a: &PauseArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.for_.is_some_and(|d| d.is_zero()) {
        return Err(CliError::Usage("--for '0s' would end the pause at once: give a longer duration, e.g. 2h".into()));
    }
    let store = open_to_operate(ctx)?;
    // Refuses a name no schedule has before anything is written.
    let info = named(&store, &a.name)?;
    let now = store.now();
    let until = a.for_.map(|d| now.saturating_add(d.as_millis().min(i64::MAX as u128) as Millis));
    let result = if a.dry_run {
        "WouldPause"
    } else {
        match store.pause_schedule(ctx.actor(), &a.name, until)? {
            SchedulePauseResult::Paused => "Paused",
            SchedulePauseResult::Extended { .. } => "Extended",
        }
    };
    let view = ActionView { schedule: a.name.clone(), result, until: until.map(rfc3339), job: None, info: Some(&info) };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

fn resume(a: &NameArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = open_to_operate(ctx)?;
    let info = named(&store, &a.name)?;
    let resumed = if a.dry_run {
        if info.paused {
            "WouldResume"
        } else {
            "NotPaused"
        }
    } else {
        match store.resume_schedule(ctx.actor(), &a.name)? {
            ScheduleResumeResult::Resumed => "Resumed",
            ScheduleResumeResult::NotPaused => "NotPaused",
        }
    };
    let view = ActionView { schedule: a.name.clone(), result: resumed, until: None, job: None, info: None };
    ctx.printer()?.print(&view)?;
    if resumed == "NotPaused" {
        return Err(exit::not_all_done(format!("schedule '{}' was not paused: nothing resumed", sanitize(&a.name))));
    }
    Ok(ExitCode::SUCCESS)
}

fn trigger(a: &NameArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = open_to_operate(ctx)?;
    let info = named(&store, &a.name)?;
    let (result, job) = if a.dry_run {
        ("WouldTrigger", None)
    } else {
        ("Triggered", Some(store.trigger_schedule(ctx.actor(), &a.name)?.job.to_string()))
    };
    let view = ActionView { schedule: a.name.clone(), result, until: None, job, info: Some(&info) };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct ActionView<'a> {
    schedule: String,
    /// `Paused`, `Extended`, `WouldPause`, `Resumed`, `WouldResume`, `NotPaused`, `Triggered`,
    /// `WouldTrigger`.
    result: &'static str,
    /// Pauses: RFC 3339, `null` until resumed.
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    /// Triggers: the job made.
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<String>,
    #[serde(skip)]
    info: Option<&'a ScheduleInfo>,
}

impl Render for ActionView<'_> {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let what = format!("schedule '{}'", sanitize(&self.schedule));
        let until = self.until.as_ref().map_or_else(|| "until `bw schedule resume`".into(), |u| format!("until {u}"));
        let next = self.info.and_then(|i| i.next_fire).map(|n| relative(term.now, n));
        match self.result {
            "Paused" => writeln!(out, "Paused {what} {until}: its ticks in the pause are dropped.")?,
            "Extended" => writeln!(out, "{what} was paused already: now paused {until}.")?,
            "WouldPause" => {
                writeln!(
                    out,
                    "Would pause {what} {until}; its next tick ({}) would be dropped.",
                    next.unwrap_or("-".into())
                )?;
                writeln!(out, "Run again without --dry-run to pause it.")?;
            }
            "Resumed" => writeln!(out, "Resumed {what}: its next tick fires.")?,
            "WouldResume" => writeln!(out, "Would resume {what}. Run again without --dry-run to resume it.")?,
            "NotPaused" => writeln!(out, "{what} is not paused.")?,
            "Triggered" => {
                let job = self.job.as_deref().unwrap_or("-");
                writeln!(out, "Triggered {what}: enqueued job {job}, outside its tick sequence.")?;
            }
            _ => {
                if let Some(i) = self.info {
                    let s = &i.row.schedule;
                    writeln!(
                        out,
                        "Would enqueue one '{}' job on queue '{}' now, outside the tick sequence.",
                        sanitize(&s.wire_name),
                        sanitize(&s.queue)
                    )?;
                }
                writeln!(out, "Run again without --dry-run to trigger it.")?;
            }
        }
        Ok(())
    }
}

/// `bw schedules`.
pub(crate) struct SchedulesView {
    pub now: Millis,
    pub schedules: Vec<ScheduleInfo>,
}

/// One schedule as scripts see it.
#[derive(Serialize)]
struct ScheduleJson<'a> {
    name: &'a str,
    cron: &'a str,
    zone: &'a str,
    wire_name: &'a str,
    queue: &'a str,
    labels: &'a std::collections::BTreeMap<String, String>,
    /// `latest`, `catch-up` (with `catch_up_max`) or `skip`.
    missed: &'static str,
    catch_up_max: Option<i64>,
    /// One tick's job at a time (`Schedule::unique`): a tick while the last is pending is skipped.
    unique: bool,
    /// Ticks skipped so, since the schedule was first declared.
    skipped_ticks: i64,
    /// The priority of the jobs it enqueues: 0 (claimed first within the queue) to 9.
    priority: u8,
    next_fire: Option<String>,
    last_tick: String,
    last_fire: Option<String>,
    last_job: Option<String>,
    /// The last job's state, `null` when there is none or it was swept.
    last_job_state: Option<JobState>,
    paused: bool,
    paused_by: Option<&'a str>,
    paused_until: Option<String>,
    orphaned: bool,
    /// How late the first unfired tick is, in seconds, once past the grace (30 s).
    overdue_seconds: Option<u64>,
    last_declared: String,
}

impl Serialize for SchedulesView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            schedules: Vec<ScheduleJson<'a>>,
        }
        let schedules = self
            .schedules
            .iter()
            .map(|i| {
                let r = &i.row;
                ScheduleJson {
                    name: &r.schedule.name,
                    cron: &r.schedule.cron,
                    zone: &r.schedule.zone,
                    wire_name: &r.schedule.wire_name,
                    queue: &r.schedule.queue,
                    labels: &r.schedule.labels,
                    missed: r.schedule.missed.as_str(),
                    catch_up_max: r.schedule.missed.catch_up_max(),
                    unique: r.schedule.unique,
                    skipped_ticks: r.skipped_ticks,
                    priority: r.schedule.priority,
                    next_fire: i.next_fire.map(rfc3339),
                    last_tick: rfc3339(r.last_tick),
                    last_fire: r.last_fired_at.map(rfc3339),
                    last_job: r.last_job_id.map(|j| j.to_string()),
                    last_job_state: r.last_job_state,
                    paused: i.paused,
                    paused_by: if i.paused { r.paused_by.as_deref() } else { None },
                    paused_until: if i.paused { r.paused_until.map(rfc3339) } else { None },
                    orphaned: i.orphaned,
                    overdue_seconds: i.overdue.map(|d| d.as_secs()),
                    last_declared: rfc3339(r.seen_at),
                }
            })
            .collect();
        Doc { schedules }.serialize(s)
    }
}

impl Render for SchedulesView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.schedules.is_empty() {
            return writeln!(out, "No schedules: an application declares them in code (Engine::add_schedule).");
        }
        // The priority of the jobs each enqueues, when one of them sets another than the default.
        let show_priority = self.schedules.iter().any(|i| i.row.schedule.priority != backwave::PRIORITY_FIRST);
        let mut headers = vec!["NAME", "CRON", "ZONE", "NEXT", "LAST FIRE", "LAST JOB", "STATUS"];
        if show_priority {
            headers.insert(3, "PRI");
        }
        let mut t = Table::new(&headers).flex(0);
        for i in &self.schedules {
            let r = &i.row;
            // A unique schedule's skipped ticks are told beside the job that held them back.
            let skipped =
                if r.skipped_ticks > 0 { format!(", {} ticks skipped", r.skipped_ticks) } else { String::new() };
            let last_job = match (r.last_job_id, r.last_job_state) {
                (Some(id), Some(state)) => {
                    Cell::styled(format!("{} {state}{skipped}", id.short()), super::output::state_style(state))
                }
                (Some(id), None) => format!("{} (swept){skipped}", id.short()).into(),
                _ => "-".into(),
            };
            let mut row: Vec<Cell> = vec![
                sanitize(&r.schedule.name).into_owned().into(),
                sanitize(&r.schedule.cron).into_owned().into(),
                sanitize(&r.schedule.zone).into_owned().into(),
            ];
            if show_priority {
                row.push(r.schedule.priority.to_string().into());
            }
            row.extend([
                i.next_fire.map_or_else(|| "-".to_string(), |n| relative(self.now, n)).into(),
                r.last_fired_at.map_or_else(|| "never".to_string(), |at| relative(self.now, at)).into(),
                last_job,
                status(i, self.now),
            ]);
            t.row(row);
        }
        t.write(out, term)
    }
}

/// `paused until …`, `orphaned`, `overdue 5m`, or `ok`: the one cell an operator scans.
pub(crate) fn status(i: &ScheduleInfo, now: Millis) -> Cell {
    let mut parts = Vec::new();
    if i.paused {
        parts.push(match i.row.paused_until {
            Some(u) => format!("paused, ends {}", relative(now, u)),
            None => "paused".to_string(),
        });
    }
    if i.orphaned {
        parts.push("orphaned".to_string());
    }
    if let Some(d) = i.overdue {
        parts.push(format!("overdue {}", compact_duration(d)));
    }
    if parts.is_empty() {
        return Cell::styled("ok", Style::Green);
    }
    let style = if i.overdue.is_some() { Style::Red } else { Style::Yellow };
    Cell::styled(parts.join(", "), style)
}
