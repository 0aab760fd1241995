//! bw workflows | workflow show ID: the workflows applications enqueue (`Store::enqueue_workflow`),
//! each with its jobs' counts by state, its oldest waiting job and how many wait behind a parent
//! that ended without succeeding; and one workflow's graph as text. The store does the reading
//! (`Store::workflows`, `Store::workflow`); this file prints. Cancelling or requeueing a
//! workflow's jobs is `bw cancel --workflow ID` / `bw requeue --workflow ID --state …`: the same
//! plan, permission and audit as every bulk action.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::output::{relative, sanitize, state_style, thousands, Cell, Render, Style, Table, Term};
use super::{CliError, Ctx};
use backwave::workflow::Needs;
use backwave::{JobState, Millis, WorkflowGraph, WorkflowSummary};

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Show at most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// One workflow: `bw workflow show ID` prints its graph (each job, its state, its parents).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Its graph: each job, its state and its parents (parents first).
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The workflow's id, or a unique prefix of it (`bw workflows` lists them).
    pub id: String,
}

pub fn list(a: &ListArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    ctx.printer()?.print(&WorkflowsView { now: store.now(), workflows: store.workflows(a.limit)? })?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(c: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    match c {
        Command::Show(a) => {
            let store = ctx.open()?;
            match store.workflow(&a.id)? {
                Some(graph) => {
                    ctx.printer()?.print(&GraphView { now: store.now(), graph })?;
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(CliError::Store(backwave::Error::InvalidInput(format!(
                    "no workflow has the id '{}' (`bw workflows` lists them)",
                    a.id
                )))),
            }
        }
    }
}

#[derive(Serialize)]
struct WorkflowsView {
    #[serde(skip)]
    now: Millis,
    workflows: Vec<WorkflowSummary>,
}

/// `2 OK, 1 SCHED, 1 WAIT, 1 DEAD`: the list's compact form of [`counts_text`].
fn counts_short(s: &WorkflowSummary) -> String {
    let parts: Vec<String> = STATE_ORDER
        .iter()
        .filter_map(|st| {
            s.counts.get(st).filter(|n| **n > 0).map(|n| format!("{} {}", thousands(*n), crate::text::state_short(*st)))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The states of a workflow's jobs, most advanced first.
const STATE_ORDER: [JobState; 7] = [
    JobState::Succeeded,
    JobState::Running,
    JobState::Scheduled,
    JobState::Waiting,
    JobState::DeadLettered,
    JobState::Quarantined,
    JobState::Cancelled,
];

/// `3 succeeded, 1 running, 5 waiting`: the states a workflow's jobs are in, most advanced first.
fn counts_text(s: &WorkflowSummary) -> String {
    let parts: Vec<String> = STATE_ORDER
        .iter()
        .filter_map(|st| s.counts.get(st).filter(|n| **n > 0).map(|n| format!("{} {}", thousands(*n), st.as_str())))
        .collect();
    if parts.is_empty() {
        "no jobs left (retention)".into()
    } else {
        parts.join(", ")
    }
}

/// `done`, `stuck: 2 wait behind a failed parent` (`stuck: 2` in the list), or `in progress`.
fn status(s: &WorkflowSummary, long: bool) -> Cell {
    if s.stuck > 0 {
        let why = if long { " wait behind a failed parent" } else { "" };
        return Cell::styled(format!("stuck: {}{why}", thousands(s.stuck)), Style::Red);
    }
    if s.is_done() {
        let failed: u64 = [JobState::DeadLettered, JobState::Quarantined, JobState::Cancelled]
            .iter()
            .filter_map(|st| s.counts.get(st))
            .sum();
        return match failed {
            0 => Cell::styled("done", Style::Green),
            n => Cell::styled(format!("done, {} not succeeded", thousands(n)), Style::Yellow),
        };
    }
    "in progress".into()
}

impl Render for WorkflowsView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.workflows.is_empty() {
            return writeln!(out, "No workflows: an application enqueues them in code (Store::enqueue_workflow).");
        }
        let mut t = Table::new(&["ID", "NAME", "JOBS", "STATES", "WAITING SINCE", "STATUS"]).flex(3);
        for w in &self.workflows {
            t.row(vec![
                w.id.to_string().into(),
                sanitize(&w.name).into_owned().into(),
                thousands(w.jobs).into(),
                counts_short(w).into(),
                w.oldest_waiting_since.map_or_else(|| "-".to_string(), |at| relative(self.now, at)).into(),
                status(w, false),
            ]);
        }
        t.write(out, term)
    }
}

#[derive(Serialize)]
struct GraphView {
    #[serde(skip)]
    now: Millis,
    #[serde(flatten)]
    graph: WorkflowGraph,
}

impl Render for GraphView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let s = &self.graph.summary;
        writeln!(out, "Workflow {} ({})", s.id, sanitize(&s.name))?;
        writeln!(out, "Created  {}", relative(self.now, s.created_at))?;
        writeln!(out, "Jobs     {}: {}", thousands(s.jobs), counts_text(s))?;
        if let Some(at) = s.oldest_waiting_since {
            writeln!(out, "Waiting  since {}", relative(self.now, at))?;
        }
        let st = status(s, true);
        writeln!(out, "Status   {}", st.text)?;
        writeln!(out)?;
        let mut t = Table::new(&["JOB", "WIRE NAME", "QUEUE", "STATE", "ATTEMPT", "AFTER"]).flex(5);
        for j in &self.graph.graph {
            let after: Vec<String> = j
                .parents
                .iter()
                .map(|p| {
                    let how = match (p.needs, p.met) {
                        (_, true) => "",
                        (Needs::Succeeded, false) => " (waiting for success)",
                        (Needs::Finished, false) => " (waiting for it to finish)",
                    };
                    format!("{} {}{how}", p.job.short(), sanitize(&p.wire_name))
                })
                .collect();
            t.row(vec![
                j.id.short().into(),
                sanitize(&j.wire_name).into_owned().into(),
                sanitize(&j.queue).into_owned().into(),
                Cell::styled(j.state.as_str(), state_style(j.state)),
                j.attempt.to_string().into(),
                if after.is_empty() { "-".to_string() } else { after.join(", ") }.into(),
            ]);
        }
        t.write(out, term)
    }
}
