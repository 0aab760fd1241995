//! bw stats: the shape of the store at a glance: counts by state and queue (from the
//! trigger-kept counts table, never a scan), the top dead-letter causes grouped by fingerprint,
//! and quarantines grouped by wire name and reason with whether a live worker handles them now;
//! and queue latency: how many Scheduled jobs are due now and how long the oldest has waited
//! (from the claim index, [`Store::queue_latency`](backwave::Store::queue_latency)).

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::output::{
    compact_duration, relative, rfc3339, sanitize, thousands, width, Cell, Render, Style, Table, Term,
};
use super::{CliError, Ctx};
use backwave::store::{CauseGroup, QuarantineGroup, QueueLatency, StateCounts};
use backwave::JobState;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many dead-letter cause groups to show.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let view = Stats {
        counts: store.counts()?,
        latency: store.queue_latency()?,
        causes: store.cause_groups(a.top)?,
        quarantines: store.quarantine_groups()?,
        pauses: super::pause::PausesView(store.pauses()?),
        limits: super::limit::LimitsView(store.limits()?),
    };
    printer.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

struct Stats {
    counts: StateCounts,
    latency: Vec<QueueLatency>,
    causes: Vec<CauseGroup>,
    quarantines: Vec<QuarantineGroup>,
    pauses: super::pause::PausesView,
    limits: super::limit::LimitsView,
}

impl Serialize for Stats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Cause<'a> {
            wire_name: &'a str,
            fingerprint: &'a str,
            example: &'a str,
            count: u64,
            first_seen: String,
            last_seen: String,
        }
        #[derive(Serialize)]
        struct Quarantine<'a> {
            wire_name: &'a str,
            reason: &'static str,
            example: &'a str,
            count: u64,
            first_seen: String,
            last_seen: String,
            live_handlers: u64,
        }
        #[derive(Serialize)]
        struct Latency {
            due_now: u64,
            oldest_due_at: Option<String>,
            oldest_due_age_seconds: f64,
            /// Due jobs a pause holds back (not in due_now).
            held_by_pause: u64,
            /// The queue itself is paused.
            paused: bool,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            /// state -> count over all queues, every state present.
            totals: std::collections::BTreeMap<&'static str, u64>,
            /// queue -> state -> count, every state present (0 included), as in `totals`.
            by_queue: std::collections::BTreeMap<&'a str, std::collections::BTreeMap<&'static str, u64>>,
            /// queue -> Scheduled jobs due now and the oldest one's wait (queues with Scheduled jobs).
            latency: std::collections::BTreeMap<&'a str, Latency>,
            dead_letter_causes: Vec<Cause<'a>>,
            quarantines: Vec<Quarantine<'a>>,
            /// Queues and wire names no worker claims now (`bw pauses`).
            pauses: Vec<super::pause::PauseJson<'a>>,
            /// Limits in force (`bw limits`).
            limits: Vec<super::limit::LimitJson<'a>>,
        }
        Doc {
            totals: JobState::ALL.iter().map(|s| (s.as_str(), self.counts.total(*s))).collect(),
            by_queue: self
                .counts
                .by_queue
                .iter()
                .map(|(q, m)| {
                    (q.as_str(), JobState::ALL.iter().map(|s| (s.as_str(), m.get(s).copied().unwrap_or(0))).collect())
                })
                .collect(),
            latency: self
                .latency
                .iter()
                .map(|l| {
                    let latency = Latency {
                        due_now: l.due_now,
                        oldest_due_at: l.oldest_due_at.map(rfc3339),
                        oldest_due_age_seconds: l.oldest_due_age_ms as f64 / 1000.0,
                        held_by_pause: l.held_by_pause,
                        paused: l.paused.is_some(),
                    };
                    (l.queue.as_str(), latency)
                })
                .collect(),
            dead_letter_causes: self
                .causes
                .iter()
                .map(|c| Cause {
                    wire_name: &c.wire_name,
                    fingerprint: &c.fingerprint,
                    example: &c.example,
                    count: c.count,
                    first_seen: rfc3339(c.first_seen),
                    last_seen: rfc3339(c.last_seen),
                })
                .collect(),
            quarantines: self
                .quarantines
                .iter()
                .map(|q| Quarantine {
                    wire_name: &q.wire_name,
                    reason: q.reason.as_str(),
                    example: &q.example,
                    count: q.count,
                    first_seen: rfc3339(q.first_seen),
                    last_seen: rfc3339(q.last_seen),
                    live_handlers: q.live_handlers,
                })
                .collect(),
            pauses: self.pauses.json(),
            limits: self.limits.json(),
        }
        .serialize(s)
    }
}

/// How much of a cause or example a table shows when nothing else bounds it (stdout is a pipe
/// or a file, so no terminal width): a multi-KB cause (a stack, a response body) printed whole
/// buried the table. `bw jobs show ID` prints it in full.
const PIPED_TEXT: usize = 160;

/// `text` sanitized, shortened to [`PIPED_TEXT`] when the table has no width to fit.
fn example(text: &str, term: &Term) -> String {
    let clean = sanitize(text);
    match term.width {
        Some(_) => clean.into_owned(),
        None => super::output::truncate(&clean, PIPED_TEXT).into_owned(),
    }
}

impl Render for Stats {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let now = term.now;
        let c = term.color;
        if self.counts.by_queue.is_empty() {
            writeln!(out, "No jobs in this store.")?;
        } else {
            let states = crate::text::states_shown(self.counts.total(JobState::Waiting) > 0);
            let counts = |titles: &[String], term: &Term| {
                let mut headers = vec!["QUEUE"];
                headers.extend(titles.iter().map(String::as_str));
                headers.push("TOTAL");
                let mut t = Table::new(&headers).max_width(0, 24);
                let num = |n: u64, s: JobState| {
                    let style = if n == 0 { Style::Dim } else { super::output::state_style(s) };
                    Cell::styled(thousands(n), style)
                };
                for (q, m) in &self.counts.by_queue {
                    let mut row: Vec<Cell> = vec![sanitize(q).into_owned().into()];
                    row.extend(states.iter().map(|s| num(m.get(s).copied().unwrap_or(0), *s)));
                    row.push(thousands(self.counts.queue_total(q)).into());
                    t.row(row);
                }
                if self.counts.by_queue.len() > 1 {
                    let mut row: Vec<Cell> = vec![Cell::styled("all queues", Style::Bold)];
                    row.extend(states.iter().map(|s| num(self.counts.total(*s), *s)));
                    row.push(thousands(JobState::ALL.iter().map(|s| self.counts.total(*s)).sum()).into());
                    t.row(row);
                }
                let mut buf = Vec::new();
                t.write(&mut buf, term).map(|()| buf)
            };
            let long: Vec<String> = states.iter().map(|s| s.title().to_string()).collect();
            // At 80 columns the full state names made the TOTAL column wrap onto a line of its
            // own; the dashboard's short names fit. Measured without colour codes.
            let plain = Term { color: false, ..term.clone() };
            let fits = |b: &[u8]| term.width.is_none_or(|w| String::from_utf8_lossy(b).lines().all(|l| width(l) <= w));
            // The dashboard's short names, capitalised as the full ones are: `Sched`, `Dead`.
            let short: Vec<String> = states
                .iter()
                .map(|s| match crate::text::state_short(*s) {
                    "OK" => "OK".to_string(),
                    n => n[..1].to_string() + &n[1..].to_ascii_lowercase(),
                })
                .collect();
            let titles: &[String] = if fits(&counts(&long, &plain)?) { &long } else { &short };
            out.write_all(&counts(titles, term)?)?;
        }

        if !self.latency.is_empty() {
            writeln!(out)?;
            let due: Vec<&QueueLatency> =
                self.latency.iter().filter(|l| l.due_now > 0 || l.held_by_pause > 0 || l.paused.is_some()).collect();
            // The pause columns only while something is paused: the table is as before otherwise.
            let paused = !self.pauses.0.is_empty();
            if due.is_empty() {
                writeln!(out, "No job is due now: every Scheduled job waits for a later time.")?;
            } else {
                writeln!(out, "Due now, waiting for a worker (queue latency):")?;
                let headers: &[&str] = if paused {
                    &["QUEUE", "DUE NOW", "OLDEST WAITED", "HELD BY PAUSE", ""]
                } else {
                    &["QUEUE", "DUE NOW", "OLDEST WAITED"]
                };
                let mut t = Table::new(headers).max_width(0, 24);
                for l in due {
                    let mut row: Vec<Cell> = vec![
                        sanitize(&l.queue).into_owned().into(),
                        thousands(l.due_now).into(),
                        // A paused queue's row has nothing claimable to have waited.
                        if l.due_now == 0 {
                            Cell::styled("-", Style::Dim)
                        } else {
                            compact_duration(std::time::Duration::from_millis(l.oldest_due_age_ms)).into()
                        },
                    ];
                    if paused {
                        row.push(thousands(l.held_by_pause).into());
                        row.push(if l.paused.is_some() { Cell::styled("PAUSED", Style::Yellow) } else { "".into() });
                    }
                    t.row(row);
                }
                t.write(out, term)?;
            }
        }

        writeln!(out)?;
        if self.causes.is_empty() {
            writeln!(out, "No dead-lettered jobs.")?;
        } else {
            writeln!(out, "Top dead-letter causes (digits, ids, hex and quoted values grouped):")?;
            let mut t =
                Table::new(&["JOBS", "WIRE NAME", "FIRST", "LAST", "CAUSE (latest example)"]).flex(4).max_width(1, 28);
            for g in &self.causes {
                t.row(vec![
                    thousands(g.count).into(),
                    sanitize(&g.wire_name).into_owned().into(),
                    relative(now, g.first_seen).into(),
                    relative(now, g.last_seen).into(),
                    example(&g.example, term).into(),
                ]);
            }
            t.write(out, term)?;
        }

        writeln!(out)?;
        if self.quarantines.is_empty() {
            writeln!(out, "No quarantined jobs.")?;
        } else {
            writeln!(out, "Quarantined (never ran), by wire name and reason:")?;
            let mut t = Table::new(&["JOBS", "WIRE NAME", "REASON", "LIVE HANDLER", "LAST", "EXAMPLE"])
                .flex(5)
                .max_width(1, 28);
            for g in &self.quarantines {
                let live = if g.live_handlers == 0 {
                    Cell::styled("none", Style::Yellow)
                } else {
                    Cell::styled(format!("yes ({})", g.live_handlers), Style::Green)
                };
                t.row(vec![
                    thousands(g.count).into(),
                    sanitize(&g.wire_name).into_owned().into(),
                    g.reason.as_str().into(),
                    live,
                    relative(now, g.last_seen).into(),
                    example(&g.example, term).into(),
                ]);
            }
            t.write(out, term)?;
            if self.quarantines.iter().any(|g| g.live_handlers > 0 && g.reason == backwave::QuarantineReason::NoHandler)
            {
                let hint =
                    "A live worker now handles some of these: `bw requeue --state quarantined --wire-name NAME` \
                            gives them a fresh start.";
                writeln!(out, "{}", Style::Dim.paint(hint, c))?;
            }
        }
        self.pauses.section(out, term)?;
        self.limits.section(out, term)
    }
}
