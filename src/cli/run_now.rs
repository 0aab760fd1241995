//! bw run-now: make Scheduled jobs (waiting for their first run or a retry backoff) due now,
//! by id or in bulk by the `jobs list` filters, without touching their attempt or budget.
//! Requeue stays the verb for Dead-Lettered and Quarantined jobs. The store does the work
//! (`Store::run_now`, `plan_run_now`, `run_now_matching`); this file parses and prints.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::jobs::FilterArgs;
use super::json::IdResult;
use super::output::{rfc3339, thousands, Render, Term};
use super::progress::Progress;
use super::requeue::{finish, not_found, resolve_all, IdResults};
use super::{eprint_quiet, exit, CliError, Ctx};
use crate::store::{RunNowPlan, RunNowResult};
use crate::JobState;

/// Make Scheduled jobs due now, attempt and budget untouched: by id, or every match of the
/// filters (needs operate).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job ids or unique id prefixes. Leave out to select by filter.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Count what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if !a.ids.is_empty() && !a.filter.is_empty() {
        return Err(CliError::Usage("give job ids or filters (--queue …), not both".into()));
    }
    if let Some(bad) = a.filter.states.iter().find(|s| **s != JobState::Scheduled) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be run now: only scheduled jobs can (requeue dead-lettered and quarantined ones)",
            bad.as_str()
        )));
    }
    if a.ids.is_empty() {
        return bulk(a, ctx);
    }
    let store = ctx.open()?;
    let resolved = resolve_all(&store, &a.ids)?;
    let found: Vec<_> = resolved.iter().filter_map(|(_, id)| *id).collect();
    let outcomes = if a.dry_run { store.check_run_now(&found)? } else { store.run_now(&ctx.actor, &found)? };
    let mut outcome = outcomes.into_iter();
    let mut results = Vec::new();
    for (text, id) in &resolved {
        let Some(id) = id else {
            results.push(not_found(text));
            continue;
        };
        let id = id.to_string();
        results.push(match outcome.next().expect("one outcome per found id") {
            RunNowResult::Due { .. } => IdResult {
                id,
                result: if a.dry_run { "WouldRunNow" } else { "Due" },
                state: Some(JobState::Scheduled.as_str()),
                warning: None,
            },
            RunNowResult::NotScheduled { state } => {
                IdResult { id, result: "NotScheduled", state: Some(state.as_str()), warning: not_scheduled_hint(state) }
            }
            RunNowResult::NotFound => not_found(text),
        });
    }
    if a.dry_run {
        ctx.printer()?.print(&IdResults { results, verb: "made due" })?;
        return Ok(ExitCode::SUCCESS);
    }
    finish(ctx, IdResults { results, verb: "made due" })
}

fn not_scheduled_hint(state: JobState) -> Option<String> {
    match state {
        JobState::Running => Some("it is running now".into()),
        JobState::DeadLettered | JobState::Quarantined => Some("use `bw requeue` for a fresh budget".into()),
        _ => None,
    }
}

fn bulk(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.filter.is_empty() {
        return Err(CliError::Usage(
            "give job ids, or filters (--queue, --wire-name, --label …) to choose the scheduled jobs to run now".into(),
        ));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.filter.to_filter(store.now());
    let plan = store.plan_run_now(&filter)?;
    let what = FilterArgs { states: vec![JobState::Scheduled], ..a.filter.clone() }.describe("jobs");
    if a.dry_run || plan.would_run_now == 0 {
        printer.print(&PlanView { plan, what, dry_run: a.dry_run, now: rfc3339(store.now()) })?;
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!("Make {} {what} due now (attempt and budget unchanged)?", thousands(plan.would_run_now));
    if !ctx.confirm_or_refuse(a.yes, &question, "run jobs now in bulk")? {
        eprint_quiet(format_args!("bw: nothing changed\n"));
        return Ok(ExitCode::from(exit::REFUSED));
    }
    let mut progress = Progress::new("made due");
    let made_due = store.run_now_matching(&ctx.actor, &filter, |p| progress.update(p.done, p.total))?;
    drop(progress);
    printer.print(&Done { made_due, what })?;
    Ok(ExitCode::SUCCESS)
}

struct PlanView {
    plan: RunNowPlan,
    what: String,
    dry_run: bool,
    now: String,
}

impl Serialize for PlanView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            dry_run: bool,
            #[serde(flatten)]
            plan: &'a RunNowPlan,
        }
        Doc { dry_run: self.dry_run, plan: &self.plan }.serialize(s)
    }
}

impl Render for PlanView {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let p = &self.plan;
        if p.matching == 0 {
            return writeln!(out, "No {} to run now.", self.what);
        }
        writeln!(out, "{} {} match.", thousands(p.matching), self.what)?;
        let w = thousands(p.matching).len();
        writeln!(
            out,
            "  {:>w$} would be due now ({}), attempt and budget unchanged",
            thousands(p.would_run_now),
            self.now
        )?;
        writeln!(out, "  {:>w$} are due already: left as they are", thousands(p.already_due))?;
        if self.dry_run && p.would_run_now > 0 {
            writeln!(out, "Run again without --dry-run to do it (you will be asked to confirm, or pass --yes).")?;
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct Done {
    made_due: u64,
    #[serde(skip)]
    what: String,
}

impl Render for Done {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(out, "Made {} {} due now.", thousands(self.made_due), self.what)
    }
}
