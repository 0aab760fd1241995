//! bw check: the store's health as an exit status, for cron, a systemd timer, a Kubernetes probe
//! or a Nagios-style monitor. Reads only ([`Store::health`](backwave::Store::health)); owns the
//! threshold flags that `bw metrics` shares, and the mapping of the worst check to 0 / 1 / 2.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{compact_duration, rfc3339, sanitize, Cell, Render, Style, Table, Term};
use super::{parse_duration, CliError, Ctx};
use backwave::store::{Check, Health, Pause, Status, Thresholds};

/// Exit statuses of `bw check`, the Nagios plugin convention (`3`, UNKNOWN, is also bw's "store
/// unavailable", so a monitor reads a missing or locked store as unknown, not as healthy).
pub mod exit {
    /// Every check passed.
    pub const OK: u8 = 0;
    /// At least one warning check crossed its threshold, and no critical one.
    pub const WARNING: u8 = 1;
    /// At least one critical check crossed its threshold. A usage error (a bad flag) exits 2 as
    /// well, so a misconfigured probe fails loudly instead of passing.
    pub const CRITICAL: u8 = 2;
}

/// The exit status for a store's status.
pub fn exit_status(status: Status) -> u8 {
    match status {
        Status::Ok => exit::OK,
        Status::Warning => exit::WARNING,
        Status::Critical => exit::CRITICAL,
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Checks (severity when over the threshold):
  latency               critical  a queue's oldest due job waited longer than --max-latency
  unworked-queue        critical  no live worker for a queue with jobs due > --unworked-after
  dead-lettered         critical  more than --max-dead jobs Dead-Lettered in the last --window
  new-cause             warning   a dead-letter cause first seen in the last --window (named)
  unhandled-quarantine  warning   a wire name Quarantined in --window, no live worker handles it
  stale-workers         warning   workers that stopped heartbeating in the last --window
  forgotten-pause       warning   a queue or wire name paused for longer than --max-pause
  quiet-worker          warning   a worker process quiet (bw workers quiet) longer than --max-quiet
  overdue-schedule      warning   a schedule's tick unfired for longer than --schedule-grace

A paused queue is reported, not judged by latency or unworked-queue; the due jobs of a paused
wire name are counted as held, apart from its queue's latency. A limit holding due jobs back
is named after the latency verdict.

Exit: 0 OK, 1 warning, 2 critical (or a usage error), 3 store unavailable (Nagios UNKNOWN).")]
pub struct Args {
    #[command(flatten, next_help_heading = "Thresholds")]
    pub thresholds: ThresholdArgs,
}

// The thresholds `bw check` judges by and `bw metrics` reports check statuses with.
// (A plain comment: clap would take a doc comment here for the description of each command
// that flattens these flags.)
#[derive(Debug, Clone, clap::Args)]
pub struct ThresholdArgs {
    /// Critical when a queue's oldest due job has waited longer than this.
    #[arg(long, value_parser = parse_duration, default_value = "5m", value_name = "DUR")]
    pub max_latency: Duration,
    /// How far back "recent" reaches for dead letters, new causes, quarantines, stale workers.
    #[arg(long, value_parser = parse_duration, default_value = "1h", value_name = "DUR")]
    pub window: Duration,
    /// Critical when more jobs than this were Dead-Lettered in the window.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub max_dead: u64,
    /// Warning when more dead-letter causes than this were first seen in the window.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_new_causes: u64,
    /// Warning when more wire names than this were Quarantined in the window with no live handler.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_unhandled: u64,
    /// Critical when a queue no live worker serves has had a job due longer than this.
    #[arg(long, value_parser = parse_duration, default_value = "1m", value_name = "DUR")]
    pub unworked_after: Duration,
    /// Warning when more workers than this stopped heartbeating in the window.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_stale: u64,
    /// Warning when a queue or wire name has been paused for longer than this.
    #[arg(long, value_parser = parse_duration, default_value = "1h", value_name = "DUR")]
    pub max_pause: Duration,
    /// Warning when a worker process has been quiet for longer than this.
    #[arg(long, value_parser = parse_duration, default_value = "1h", value_name = "DUR")]
    pub max_quiet: Duration,
    /// Warning when a schedule's tick has gone unfired for longer than this (nobody runs it).
    #[arg(long, value_parser = parse_duration, default_value = "30s", value_name = "DUR")]
    pub schedule_grace: Duration,
    /// Leave a queue out of the latency checks (repeatable): one unserved on purpose.
    #[arg(long = "exclude-queue", value_name = "QUEUE")]
    pub exclude_queues: Vec<String>,
}

impl ThresholdArgs {
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            max_latency: self.max_latency,
            window: self.window,
            max_dead: self.max_dead,
            max_new_causes: self.max_new_causes,
            max_unhandled: self.max_unhandled,
            unworked_after: self.unworked_after,
            max_stale: self.max_stale,
            max_pause: self.max_pause,
            max_quiet: self.max_quiet,
            schedule_grace: self.schedule_grace,
            exclude_queues: self.exclude_queues.iter().cloned().collect::<BTreeSet<_>>(),
        }
    }
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let health = ctx.open().and_then(|store| Ok(store.health(&a.thresholds.thresholds())?));
    let printer = ctx.printer()?;
    match health {
        Ok(health) => {
            printer.print(&Report(&health))?;
            Ok(ExitCode::from(exit_status(health.status)))
        }
        // A monitor reads stdout: say UNKNOWN there too (found at 3 a.m.: with the store
        // missing or unreachable stdout was empty, and the cron recipe of docs/alerting.md mailed a blank
        // subject exactly when it mattered). The error itself goes to stderr as for any command.
        Err(e) => {
            printer.print(&Unknown {
                status: "unknown",
                exit_code: super::exit::exit_code(&e),
                error: e.to_string(),
            })?;
            Err(e)
        }
    }
}

/// `bw check`'s document when there is no health to judge: the store could not be read.
#[derive(Serialize)]
struct Unknown {
    status: &'static str,
    exit_code: u8,
    error: String,
}

impl Render for Unknown {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(out, "BACKWAVE UNKNOWN: {}", sanitize(&self.error))
    }
}

struct Report<'a>(&'a Health);

impl<'r> Serialize for Report<'r> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Queue<'a> {
            queue: &'a str,
            due_now: u64,
            oldest_due_at: Option<String>,
            oldest_due_age_seconds: f64,
            held_by_pause: u64,
            paused: Option<PauseJson<'a>>,
            live_workers: u64,
            excluded: bool,
        }
        #[derive(Serialize)]
        struct PauseJson<'a> {
            kind: &'static str,
            name: &'a str,
            paused_by: &'a str,
            paused_at: String,
            until: Option<String>,
            /// Due jobs it holds back now.
            held: u64,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            status: Status,
            exit_code: u8,
            at: String,
            window_start: String,
            checks: &'a [Check],
            queues: Vec<Queue<'a>>,
            pauses: Vec<PauseJson<'a>>,
        }
        let h: &'r Health = self.0;
        let pause = |p: &'r Pause| PauseJson {
            kind: p.kind.as_str(),
            name: &p.name,
            paused_by: &p.paused_by,
            paused_at: rfc3339(p.paused_at),
            until: p.until.map(rfc3339),
            held: h.held_by(p),
        };
        Doc {
            status: h.status,
            exit_code: exit_status(h.status),
            at: rfc3339(h.at),
            window_start: rfc3339(h.window_start),
            checks: &h.checks,
            queues: h
                .queues
                .iter()
                .map(|q| Queue {
                    queue: &q.queue,
                    due_now: q.due_now,
                    oldest_due_at: q.oldest_due_at.map(rfc3339),
                    oldest_due_age_seconds: q.oldest_due_age_ms as f64 / 1000.0,
                    held_by_pause: q.held_by_pause,
                    paused: q.paused.as_ref().map(pause),
                    live_workers: q.live_workers,
                    excluded: q.excluded,
                })
                .collect(),
            pauses: h.pauses.iter().map(pause).collect(),
        }
        .serialize(s)
    }
}

/// The due jobs a pause in force holds back now.
/// A check's value or threshold as a person reads it: `4m12s`, `45 jobs`.
fn amount(check: &Check, v: f64) -> String {
    match check.unit {
        "seconds" if v == 0.0 => "0s".into(),
        "seconds" => compact_duration(Duration::from_millis((v * 1000.0) as u64)),
        unit if v == 1.0 => format!("1 {}", unit.strip_suffix('s').unwrap_or(unit)),
        unit => format!("{} {unit}", v as u64),
    }
}

fn status_cell(status: Status) -> Cell {
    match status {
        Status::Ok => Cell::styled("ok", Style::Green),
        Status::Warning => Cell::styled("WARNING", Style::Yellow),
        Status::Critical => Cell::styled("CRITICAL", Style::Red),
    }
}

impl Render for Report<'_> {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let h = self.0;
        // The first line is the verdict: a Nagios-style monitor shows exactly this line.
        let failing: Vec<&str> = h.checks.iter().filter(|c| c.status != Status::Ok).map(|c| c.name.as_str()).collect();
        let headline = match h.status {
            Status::Ok => format!("BACKWAVE OK: all {} checks pass", h.checks.len()),
            s => format!("BACKWAVE {}: {}", s.as_str().to_uppercase(), failing.join(", ")),
        };
        writeln!(out, "{headline}")?;
        let mut t = Table::new(&["STATUS", "CHECK", "VALUE", "THRESHOLD", "MESSAGE"]).flex(4);
        for c in &h.checks {
            t.row(vec![
                status_cell(c.status),
                c.name.as_str().into(),
                amount(c, c.value).into(),
                amount(c, c.threshold).into(),
                sanitize(&c.message).into_owned().into(),
            ]);
        }
        t.write(out, term)?;
        if !h.pauses.is_empty() {
            // Paused on purpose, so not judged; said here so that a quiet queue is never a mystery.
            writeln!(out)?;
            writeln!(out, "Paused (not claimed by any worker; not judged by latency or unworked-queue):")?;
            for p in &h.pauses {
                let until = p.until.map_or_else(|| "until resumed".to_string(), |u| format!("until {}", rfc3339(u)));
                let age = Duration::from_millis(h.at.saturating_sub(p.paused_at).max(0) as u64);
                let age = if age < Duration::from_secs(1) { "under 1s".to_string() } else { compact_duration(age) };
                writeln!(
                    out,
                    "  {} {}: paused by {} {until} (for {age}), {} due held",
                    p.kind,
                    sanitize(&p.name),
                    sanitize(&p.paused_by),
                    h.held_by(p),
                )?;
            }
        }
        Ok(())
    }
}
