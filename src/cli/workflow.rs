//! bw workflows | workflow show ID: the workflows applications enqueue (`Store::enqueue_workflow`),
//! each with its jobs' counts by state, its oldest waiting job and how many wait behind a parent
//! that ended without succeeding; and one workflow's graph as text. The store does the reading
//! (`Store::workflows`, `Store::workflow`); this file prints. Cancelling or requeueing a
//! workflow's jobs is `bw cancel --workflow ID` / `bw requeue --workflow ID --state …`: the same
//! plan, permission and audit as every bulk action.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::output::{relative, sanitize, state_style, thousands, Cell, Render, Table, Term};
use super::{parse_state, CliError, Ctx};
use crate::text::{workflow_counts, workflow_counts_short, workflow_status};
use backwave::workflow::{Needs, OnFailure};
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
    /// Only its jobs in this state (repeat or comma-separate for several): scheduled, running,
    /// succeeded, dead-lettered, quarantined, cancelled, waiting. The counts stay the whole
    /// workflow's.
    #[arg(long = "state", value_name = "STATE", value_parser = parse_state, value_delimiter = ',')]
    pub states: Vec<JobState>,
    /// Show at most this many of its jobs (parents first); the rest are counted.
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
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
                Some(mut graph) => {
                    if !a.states.is_empty() {
                        graph.graph.retain(|j| a.states.contains(&j.state));
                    }
                    let more = graph.graph.len().saturating_sub(a.limit) as u64;
                    graph.graph.truncate(a.limit);
                    let states = a.states.clone();
                    ctx.printer()?.print(&GraphView { now: store.now(), graph, more, states })?;
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

/// A workflow's status as a table cell.
fn status(s: &WorkflowSummary, long: bool) -> Cell {
    let (text, tone) = workflow_status(s, long);
    Cell::styled(text, tone)
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
                workflow_counts_short(w).into(),
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
    /// Jobs of the graph (of the states asked for) past `--limit`: not shown.
    more: u64,
    /// The states asked for (none: every state).
    #[serde(skip)]
    states: Vec<JobState>,
}

impl Render for GraphView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let s = &self.graph.summary;
        writeln!(out, "Workflow {} ({})", s.id, sanitize(&s.name))?;
        writeln!(out, "Created  {}", relative(self.now, s.created_at))?;
        writeln!(out, "Jobs     {}: {}", thousands(s.jobs), workflow_counts(s))?;
        if let Some(at) = s.oldest_waiting_since {
            writeln!(out, "Waiting  since {}", relative(self.now, at))?;
        }
        if s.on_failure == OnFailure::Cancel {
            writeln!(out, "Failure  a job that fails for good cancels what depends on it")?;
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
        if self.graph.graph.is_empty() && self.more == 0 {
            match self.states.is_empty() {
                true => writeln!(out, "None of its jobs is left in the store (retention deleted them).")?,
                false => {
                    let states: Vec<&str> = self.states.iter().map(|s| s.as_str()).collect();
                    writeln!(out, "None of its jobs is {}.", states.join(" or "))?
                }
            }
        } else if !self.graph.graph.is_empty() {
            t.write(out, term)?;
        }
        if self.more > 0 {
            writeln!(out, "… and {} more not shown: --limit to see more, --state to narrow.", thousands(self.more))?;
        }
        Ok(())
    }
}
