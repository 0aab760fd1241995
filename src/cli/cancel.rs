//! bw cancel: end jobs that have not reached a terminal state, by id or in bulk by the `jobs
//! list` filters. A Scheduled job is Cancelled at once; a Running one is asked to stop and ends
//! Cancelled when its handler stops or its lease lapses. Bulk runs are planned first (exactly
//! how many end at once and how many are asked to stop), confirmed, then done in the store's
//! short batches (`Store::cancel_matching`) with progress on stderr.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::bulk::{finish, ids_or_filters, not_found, per_id, resolve_all, IdResults, PlanView, Selection};
use super::json::{IdResult, Outcome};
use super::output::{thousands, Render, Term};
use super::progress::Progress;
use super::{exit, CliError, Ctx};
use backwave::store::{CancelDone, CancelPlan, CancelResult};
use backwave::JobState;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub select: Selection,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    ids_or_filters(&a.select, "--state …")?;
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
    let outcomes = if a.select.dry_run { store.check_cancel(&found)? } else { store.cancel(ctx.actor(), &found)? };
    let dry_run = a.select.dry_run;
    let results = per_id(&resolved, outcomes, |text, id, outcome| {
        let id = id.to_string();
        match (outcome, dry_run) {
            (CancelResult::Cancelled, false) => {
                IdResult { id, result: Outcome::Cancelled, state: Some(JobState::Cancelled.as_str()), warning: None }
            }
            (CancelResult::Cancelled, true) => {
                IdResult { id, result: Outcome::WouldCancel, state: Some(JobState::Scheduled.as_str()), warning: None }
            }
            (CancelResult::CancelRequested, dry_run) => IdResult {
                id,
                result: if dry_run { Outcome::WouldRequestCancel } else { Outcome::CancelRequested },
                state: Some(JobState::Running.as_str()),
                warning: None,
            },
            (CancelResult::NotCancellable { state }, _) => {
                IdResult { id, result: Outcome::NotCancellable, state: Some(state.as_str()), warning: None }
            }
            (CancelResult::NotFound, _) => not_found(text),
        }
    });
    if a.select.dry_run {
        ctx.printer()?.print(&IdResults { results, verb: "cancelled" })?;
        return Ok(ExitCode::SUCCESS);
    }
    finish(ctx, IdResults { results, verb: "cancelled" })
}

fn bulk(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    // A workflow names its own set: everything of it that has not finished.
    if a.select.filter.states.is_empty() && a.select.filter.workflow.is_none() {
        return Err(CliError::Usage(
            "give job ids, --state scheduled|running|waiting (with any list filters) or --workflow ID to cancel in bulk"
                .into(),
        ));
    }
    if let Some(bad) = a.select.filter.states.iter().find(|s| s.is_terminal()) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be cancelled: only scheduled, running and waiting jobs can",
            bad.as_str()
        )));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.select.filter.to_filter(store.now());
    // Refused here, before the count, when the actor may not cancel.
    let plan = store.plan_cancel(ctx.actor(), &filter)?;
    let what = a.select.filter.described();
    let todo = plan.would_cancel + plan.would_ask_to_stop;
    if plan.matching == 0 {
        a.select.filter.refuse_unknown_names(&store)?;
    }
    if a.select.dry_run || todo == 0 {
        printer.print(&PlanView { plan, what, dry_run: a.select.dry_run, extra: () })?;
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!(
        "Cancel {} ({} at once, {} running asked to stop)?",
        what.count(todo),
        thousands(plan.would_cancel),
        thousands(plan.would_ask_to_stop)
    );
    if !ctx.confirm_or_refuse(a.select.yes, &question, "cancel in bulk")? {
        return Err(exit::not_all_done("nothing cancelled"));
    }
    let mut progress = Progress::interruptible("cancelled", "cancel the rest")?;
    let done = store.cancel_planned(ctx.actor(), &plan, |p| progress.update(p.done, p.total))?;
    drop(progress);
    let changed_meanwhile = todo.saturating_sub(done.cancelled + done.asked_to_stop);
    printer.print(&Done { done, changed_meanwhile, what })?;
    Ok(ExitCode::SUCCESS)
}

impl Render for PlanView<CancelPlan> {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let p = &self.plan;
        let Some(w) = self.opening(out, p.matching, "cancel")? else { return Ok(()) };
        writeln!(out, "  {:>w$} scheduled would end Cancelled at once", thousands(p.would_cancel))?;
        writeln!(
            out,
            "  {:>w$} running would be asked to stop (Cancelled when the handler stops or its lease lapses)",
            thousands(p.would_ask_to_stop)
        )?;
        if p.already_asked > 0 {
            let were = if p.already_asked == 1 { "was" } else { "were" };
            writeln!(
                out,
                "  {:>w$} running {were} asked to stop already: left as they are",
                thousands(p.already_asked)
            )?;
        }
        self.closing(out, p.would_cancel + p.would_ask_to_stop > 0, "cancel them")
    }
}

#[derive(Serialize)]
struct Done {
    #[serde(flatten)]
    done: CancelDone,
    /// Planned jobs that changed meanwhile (finished, or asked to stop by someone else): left.
    changed_meanwhile: u64,
    #[serde(skip)]
    what: super::jobs::Described,
}

impl Render for Done {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(
            out,
            "Cancelled {}; asked {} running to stop.",
            self.what.count(self.done.cancelled),
            thousands(self.done.asked_to_stop)
        )?;
        if self.done.dependents_cancelled > 0 {
            writeln!(
                out,
                "Cancelled with them: {} waiting {} (their workflows cancel what needs a job that did not succeed).",
                thousands(self.done.dependents_cancelled),
                if self.done.dependents_cancelled == 1 { "dependent" } else { "dependents" }
            )?;
        }
        super::bulk::after_plan(out, self.changed_meanwhile, self.done.arrived_after_plan, "cancel them")
    }
}
