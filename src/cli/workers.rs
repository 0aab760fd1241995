//! bw workers: the live worker registry: which groups run where, what they handle, which are
//! quiet or stopping and what each still runs, and which registrations belong to processes that
//! stopped heartbeating. `bw workers quiet|resume` quiet a process, a host or a group.

use std::io::{self, Write};
use std::process::ExitCode;

use std::collections::HashMap;

use serde::Serialize;

use super::output::{relative, rfc3339, sanitize, Cell, Render, Style, Table, Term};
use super::{CliError, Ctx};
use backwave::store::{WorkerSelector, WorkerState};
use backwave::WorkerInfo;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Stop the matching worker processes claiming, from their next poll (needs operate); they
    /// finish what they run. Other hosts go on: a fleet-wide stop is `bw pause`.
    Quiet(Select),
    /// Let quieted workers claim again (needs operate).
    Resume(Select),
}

/// Which workers: one by id, every one on a host, or every one of a worker group.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Select {
    /// A worker id as `bw workers` shows it, or its unique start or end (4 characters or more:
    /// `web-1/7`, `#0001`).
    pub id: Option<String>,
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
}

impl Select {
    fn selector(&self, store: &backwave::Store) -> Result<WorkerSelector, CliError> {
        Ok(match (&self.id, &self.host, &self.group) {
            (Some(id), _, _) => WorkerSelector::Id(resolve_id(store, id)?),
            (_, Some(h), _) => WorkerSelector::Host(h.clone()),
            (_, _, Some(g)) => WorkerSelector::Group(g.clone()),
            // clap's group makes one of the three required.
            _ => WorkerSelector::Id(String::new()),
        })
    }
}

/// The end of a worker id a cut table cell keeps: `#` and the four hex digits that tell two
/// workers of one group and process apart.
const ID_TAIL: usize = 5;

/// The registered worker `typed` names: itself, or the one id that starts or ends with it (at
/// least 4 characters: the `#tail` a narrow table shows, or `host/pid`). Several such ids are
/// refused, naming them. Anything else is passed on as typed, for the store to refuse in its
/// order (the permission first, then "no registered worker has id …"): an id the table cut was
/// a dead end at 3 a.m.
fn resolve_id(store: &backwave::Store, typed: &str) -> Result<String, CliError> {
    const SHORTEST: usize = 4;
    let ids: Vec<String> = store.workers()?.into_iter().map(|w| w.id).collect();
    if typed.chars().count() < SHORTEST || ids.iter().any(|id| id == typed) {
        return Ok(typed.to_string());
    }
    let matching: Vec<String> = ids.into_iter().filter(|id| id.starts_with(typed) || id.ends_with(typed)).collect();
    match matching.as_slice() {
        [one] => Ok(one.clone()),
        [] => Ok(typed.to_string()),
        // The registry is anyone's to read (`bw workers`): naming the candidates tells nothing new.
        many => Err(CliError::Usage(format!(
            "'{}' is the start or end of {} registered workers' ids: {}; give more of it",
            crate::text::sanitize(typed),
            many.len(),
            many.iter().map(|id| format!("'{}'", crate::text::sanitize(id))).collect::<Vec<_>>().join(", ")
        ))),
    }
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    if let Some(action) = &a.action {
        let (quiet, sel) = match action {
            Action::Quiet(s) => (true, s.selector(&store)?),
            Action::Resume(s) => (false, s.selector(&store)?),
        };
        let ids =
            if quiet { store.quiet_workers(ctx.actor(), &sel)? } else { store.resume_workers(ctx.actor(), &sel)? };
        let nothing_resumed = !quiet && ids.is_empty();
        ctx.printer()?.print(&QuietView { quiet, ids })?;
        // Nothing to undo is not done, as a resume of a queue that is not paused (docs/reference.md, exit
        // codes); quieting what is quiet already is done.
        if nothing_resumed {
            return Err(super::exit::not_all_done("no matching worker was quiet: nothing resumed"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let printer = ctx.printer()?;
    let now = store.now();
    let states = store.worker_states()?.into_iter().map(|s| (s.id.clone(), s)).collect();
    printer.print(&Workers {
        workers: store.workers()?,
        states,
        now,
        pauses: super::pause::PausesView(store.pauses()?),
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct QuietView {
    #[serde(skip)]
    quiet: bool,
    /// The workers that changed (already quiet, or not quiet, ones are left as they were).
    ids: Vec<String>,
}

impl Render for QuietView {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        match (self.quiet, self.ids.is_empty()) {
            (true, true) => writeln!(out, "Every matching worker was quiet already."),
            (false, true) => writeln!(out, "No matching worker was quiet."),
            (true, false) => {
                writeln!(out, "Quiet: these workers claim nothing from their next poll and finish what they run:")?;
                self.ids.iter().try_for_each(|id| writeln!(out, "  {}", sanitize(id)))
            }
            (false, false) => {
                writeln!(out, "Resumed: these workers claim again from their next poll:")?;
                self.ids.iter().try_for_each(|id| writeln!(out, "  {}", sanitize(id)))
            }
        }
    }
}

/// A worker's state word: what the dashboard and `bw workers` show.
pub(crate) fn state_word(live: bool, s: Option<&WorkerState>) -> &'static str {
    match s {
        _ if !live => "stale",
        Some(s) if s.stopping_at.is_some() => "stopping",
        Some(s) if s.quiet_at.is_some() => "quiet",
        _ => "live",
    }
}

struct Workers {
    workers: Vec<WorkerInfo>,
    states: HashMap<String, WorkerState>,
    now: i64,
    pauses: super::pause::PausesView,
}

impl Serialize for Workers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct W<'a> {
            id: &'a str,
            group: &'a str,
            host: &'a str,
            pid: u32,
            wire_names: &'a [String],
            queues: &'a [String],
            started_at: String,
            last_heartbeat_at: String,
            live: bool,
            /// `live`, `quiet`, `stopping` or `stale`.
            state: &'static str,
            quiet_since: Option<String>,
            quiet_by: Option<&'a str>,
            /// Jobs Running under its lease now.
            running: u64,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            workers: Vec<W<'a>>,
            /// Queues and wire names no worker claims now (`bw pauses`).
            pauses: Vec<super::pause::PauseJson<'a>>,
        }
        Doc {
            workers: self
                .workers
                .iter()
                .map(|w| {
                    let st = self.states.get(&w.id);
                    W {
                        id: &w.id,
                        group: &w.group,
                        host: &w.host,
                        pid: w.pid,
                        wire_names: &w.wire_names,
                        queues: &w.queues,
                        started_at: rfc3339(w.started_at),
                        last_heartbeat_at: rfc3339(w.last_heartbeat_at),
                        live: w.is_live(self.now),
                        state: state_word(w.is_live(self.now), st),
                        quiet_since: st.and_then(|s| s.quiet_at).map(rfc3339),
                        quiet_by: st.and_then(|s| s.quiet_by.as_deref()),
                        running: st.map_or(0, |s| s.running),
                    }
                })
                .collect(),
            pauses: self.pauses.json(),
        }
        .serialize(s)
    }
}

impl Render for Workers {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.workers.is_empty() {
            writeln!(out, "No workers registered: no process is running a worker group on this store.")?;
            return self.pauses.section(out, term);
        }
        let list = |v: &[String]| v.iter().map(|s| sanitize(s).into_owned()).collect::<Vec<_>>().join(", ");
        // The id is what log lines and lease owners show (`host/pid/group#tail`), and what `bw
        // workers quiet` takes, whole or by its unique end: cut to fit, it keeps its `#tail` (a
        // quiet worker's long status cut every id to `vm/1331…` at 120 columns, which named
        // none of them).
        let mut t = Table::new(&["WORKER", "STATUS", "GROUP", "HOST", "PID", "HEARTBEAT", "QUEUES", "WIRE NAMES"])
            .flex(7)
            .max_width(0, 48)
            .keep_tail(0, ID_TAIL)
            .max_width(3, 24);
        for w in &self.workers {
            let st = self.states.get(&w.id);
            let status = match state_word(w.is_live(term.now), st) {
                "live" => Cell::styled("live", Style::Green),
                "stale" => Cell::styled("stale", Style::Yellow),
                word => {
                    // Quiet or stopping: since when, by whom, and what it still runs.
                    let s = st.expect("a quiet or stopping worker has a state");
                    let since = s.quiet_at.or(s.stopping_at).map(|t| relative(term.now, t)).unwrap_or_default();
                    let by = s.quiet_by.as_deref().filter(|_| word == "quiet").map(|b| format!(" by {}", sanitize(b)));
                    let text = format!("{word} {since}{}, {} running", by.unwrap_or_default(), s.running);
                    Cell::styled(&text, Style::Yellow)
                }
            };
            t.row(vec![
                sanitize(&w.id).into_owned().into(),
                status,
                sanitize(&w.group).into_owned().into(),
                sanitize(&w.host).into_owned().into(),
                w.pid.to_string().into(),
                relative(term.now, w.last_heartbeat_at).into(),
                list(&w.queues).into(),
                list(&w.wire_names).into(),
            ]);
        }
        t.write(out, term)?;
        let stale = self.workers.iter().filter(|w| !w.is_live(term.now)).count();
        if stale > 0 {
            let note = format!(
                "{stale} stale: no heartbeat within its stale limit, so its process is presumed gone (its jobs' leases lapse and are retried)."
            );
            writeln!(out, "{}", Style::Dim.paint(&note, term.color))?;
        }
        self.pauses.section(out, term)
    }
}
