//! bw run-now: make Scheduled jobs (waiting for their first run or a retry backoff) due now,
//! by id or in bulk by the `jobs list` filters, without touching their attempt or budget.
//! Requeue stays the verb for Dead-Lettered and Quarantined jobs. The store does the work
//! (`Store::run_now`, `plan_run_now`, `run_now_matching`); this file parses and prints.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::bulk::{finish, ids_or_filters, not_found, per_id, resolve_all, IdResults, PlanView, Selection};
use super::jobs::FilterArgs;
use super::json::{IdResult, Outcome};
use super::output::{rfc3339, thousands, Render, Term};
use super::progress::Progress;
use super::{exit, CliError, Ctx};
use backwave::store::{RunNowPlan, RunNowResult};
use backwave::JobState;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub select: Selection,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    ids_or_filters(&a.select, "--queue …")?;
    if let Some(bad) = a.select.filter.states.iter().find(|s| **s != JobState::Scheduled) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be run now: only scheduled jobs can (requeue dead-lettered and quarantined ones)",
            bad.as_str()
        )));
    }
    if a.select.ids.is_empty() {
        return bulk(a, ctx);
    }
    let store = ctx.open()?;
    // The actor's permission before any id is looked at: one who may not act learns nothing of
    // the jobs (an ambiguous prefix would list them). A dry run reads, and needs none.
    super::bulk::check_id_texts(&a.select.ids)?;
    if !a.select.dry_run {
        super::bulk::require_operate(&store, ctx)?;
    }
    let resolved = resolve_all(&store, &a.select.ids)?;
    let found: Vec<_> = resolved.iter().filter_map(|(_, id)| *id).collect();
    let outcomes = if a.select.dry_run { store.check_run_now(&found)? } else { store.run_now(ctx.actor(), &found)? };
    let dry_run = a.select.dry_run;
    let results = per_id(&resolved, outcomes, |text, id, outcome| {
        let id = id.to_string();
        match outcome {
            RunNowResult::Due { .. } => IdResult {
                id,
                result: if dry_run { Outcome::WouldRunNow } else { Outcome::Due },
                state: Some(JobState::Scheduled.as_str()),
                warning: None,
            },
            RunNowResult::NotScheduled { state } => IdResult {
                id,
                result: Outcome::NotScheduled,
                state: Some(state.as_str()),
                warning: not_scheduled_hint(state),
            },
            RunNowResult::NotFound => not_found(text),
        }
    });
    if a.select.dry_run {
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
    if a.select.filter.is_empty() {
        return Err(CliError::Usage(
            "give job ids, or filters (--queue, --wire-name, --label …) to choose the scheduled jobs to run now".into(),
        ));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.select.filter.to_filter(store.now());
    // Refused here, before the count, when the actor may not act.
    let plan = store.plan_run_now(ctx.actor(), &filter)?;
    let what = FilterArgs { states: vec![JobState::Scheduled], ..a.select.filter.clone() }.described();
    if plan.matching == 0 {
        a.select.filter.refuse_unknown_names(&store)?;
    }
    if a.select.dry_run || plan.would_run_now == 0 {
        printer.print(&PlanView { plan, what, dry_run: a.select.dry_run, extra: rfc3339(store.now()) })?;
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!("Make {} due now (attempt and budget unchanged)?", what.count(plan.would_run_now));
    if !ctx.confirm_or_refuse(a.select.yes, &question, "run jobs now in bulk")? {
        return Err(exit::not_all_done("nothing changed"));
    }
    let mut progress = Progress::interruptible("made due", "make the rest due")?;
    let done = store.run_now_planned(ctx.actor(), &plan, |p| progress.update(p.done, p.total))?;
    drop(progress);
    printer.print(&Done {
        made_due: done.done,
        arrived_after_plan: done.arrived_after_plan,
        changed_meanwhile: plan.would_run_now.saturating_sub(done.done),
        what,
    })?;
    Ok(ExitCode::SUCCESS)
}

impl Render for PlanView<RunNowPlan, String> {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let p = &self.plan;
        let Some(w) = self.opening(out, p.matching, "run now")? else { return Ok(()) };
        writeln!(
            out,
            "  {:>w$} would be due now ({}), attempt and budget unchanged",
            thousands(p.would_run_now),
            self.extra
        )?;
        let are = if p.already_due == 1 { "is" } else { "are" };
        writeln!(out, "  {:>w$} {are} due already: left as they are", thousands(p.already_due))?;
        self.closing(out, p.would_run_now > 0, "do it")
    }
}

#[derive(Serialize)]
struct Done {
    made_due: u64,
    arrived_after_plan: u64,
    changed_meanwhile: u64,
    #[serde(skip)]
    what: super::jobs::Described,
}

impl Render for Done {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(out, "Made {} due now.", self.what.count(self.made_due))?;
        super::bulk::after_plan(out, self.changed_meanwhile, self.arrived_after_plan, "make them due now")
    }
}
