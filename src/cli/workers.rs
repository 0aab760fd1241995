//! bw workers: the live worker registry: which groups run where, what they handle, and which
//! registrations belong to processes that stopped heartbeating.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::output::{relative, rfc3339, sanitize, Cell, Render, Style, Table, Term};
use super::{CliError, Ctx};
use crate::WorkerInfo;

/// Live and stale workers: group, host, pid, wire names, last heartbeat.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let now = store.now();
    printer.print(&Workers { workers: store.workers()?, now, pauses: super::pause::PausesView(store.pauses()?) })?;
    Ok(ExitCode::SUCCESS)
}

struct Workers {
    workers: Vec<WorkerInfo>,
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
                .map(|w| W {
                    id: &w.id,
                    group: &w.group,
                    host: &w.host,
                    pid: w.pid,
                    wire_names: &w.wire_names,
                    queues: &w.queues,
                    started_at: rfc3339(w.started_at),
                    last_heartbeat_at: rfc3339(w.last_heartbeat_at),
                    live: w.is_live(self.now),
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
        // The id is what log lines and lease owners show (`host/pid/group#tail`): print it whole.
        let mut t = Table::new(&["WORKER", "STATUS", "GROUP", "HOST", "PID", "HEARTBEAT", "QUEUES", "WIRE NAMES"])
            .flex(7)
            .max_width(0, 48)
            .max_width(3, 24);
        for w in &self.workers {
            let status = if w.is_live(term.now) {
                Cell::styled("live", Style::Green)
            } else {
                Cell::styled("stale", Style::Yellow)
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
