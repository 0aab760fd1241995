//! bw requeue: give Dead-Lettered and Quarantined jobs a fresh budget, by id or in bulk by
//! filter. Bulk runs are planned first (exact counts, including the jobs that would only
//! quarantine again because no live worker handles their wire name), confirmed, then done in
//! the store's short batches with progress on stderr.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::bulk::{self, finish, ids_or_filters, not_found, per_id, resolve_all, IdResults, PlanView, Selection};
use super::jobs::Described;
use super::json::{IdResult, Outcome};
use super::output::{sanitize, thousands, Render, Table, Term};
use super::progress::Progress;
use super::{exit, CliError, Ctx};
use backwave::store::{RequeueCheck, RequeuePlan, RequeueResult};
use backwave::{JobId, JobState};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub select: Selection,
    /// Also requeue jobs that no live worker handles (they will quarantine again).
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    ids_or_filters(&a.select, "--state …")?;
    if a.select.ids.is_empty() {
        return bulk(a, ctx);
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    // The actor's permission before any id is looked at: one who may not act learns nothing of
    // the jobs (an ambiguous prefix would list them). A dry run reads, and needs none.
    super::bulk::check_id_texts(&a.select.ids)?;
    if !a.select.dry_run {
        super::bulk::require_operate(&store, ctx)?;
    }
    let resolved = resolve_all(&store, &a.select.ids)?;
    let found: Vec<JobId> = resolved.iter().filter_map(|(_, id)| *id).collect();
    // The by-id plan, read before acting: its warnings name what the requeue will meet.
    let checks = store.check_requeue(&found)?;
    if a.select.dry_run {
        let results = per_id(&resolved, &checks, |text, id, c| match c {
            RequeueCheck::NotFound => not_found(text),
            RequeueCheck::WouldRequeue { state, .. } => IdResult {
                id: id.to_string(),
                result: Outcome::WouldRequeue,
                state: Some(state.as_str()),
                warning: requarantine_warning(c),
            },
            RequeueCheck::NotRequeueable { state } => IdResult {
                id: id.to_string(),
                result: Outcome::NotRequeueable,
                state: Some(state.as_str()),
                warning: None,
            },
            RequeueCheck::Conflict { state, existing } => IdResult {
                id: id.to_string(),
                result: Outcome::WouldConflict,
                state: Some(state.as_str()),
                warning: Some(conflict_warning(*existing)),
            },
        });
        printer.print(&IdResults { results, verb: "requeued" })?;
        return Ok(ExitCode::SUCCESS);
    }
    let outcomes = store.requeue(ctx.actor(), &found)?;
    let results = per_id(&resolved, outcomes.iter().zip(&checks), |text, id, (r, check)| match r {
        RequeueResult::Requeued { .. } => IdResult {
            id: id.to_string(),
            result: Outcome::Requeued,
            state: Some(JobState::Scheduled.as_str()),
            warning: requarantine_warning(check),
        },
        RequeueResult::NotRequeueable { state } => {
            IdResult { id: id.to_string(), result: Outcome::NotRequeueable, state: Some(state.as_str()), warning: None }
        }
        RequeueResult::Conflict { existing } => IdResult {
            id: id.to_string(),
            result: Outcome::Conflict,
            state: check_state(check),
            warning: Some(conflict_warning(*existing)),
        },
        RequeueResult::NotFound => not_found(text),
    });
    finish(ctx, IdResults { results, verb: "requeued" })
}

/// Why a requeue is refused for its unique key, naming the job that holds it in full (scripts
/// read it from the JSON `warning`).
fn conflict_warning(existing: JobId) -> String {
    format!("job {existing} holds its unique key; nothing changed")
}

/// The state a job was seen in before the requeue (it stays in it when refused).
fn check_state(check: &RequeueCheck) -> Option<&'static str> {
    match check {
        RequeueCheck::WouldRequeue { state, .. }
        | RequeueCheck::NotRequeueable { state }
        | RequeueCheck::Conflict { state, .. } => Some(state.as_str()),
        RequeueCheck::NotFound => None,
    }
}

fn requarantine_warning(check: &RequeueCheck) -> Option<String> {
    match check {
        RequeueCheck::WouldRequeue { wire_name, requarantine: true, .. } => {
            Some(format!("no live worker handles '{wire_name}'; it will quarantine again"))
        }
        RequeueCheck::WouldRequeue { no_live_worker: true, .. } => {
            Some("no live worker runs now: it waits until one starts".to_string())
        }
        _ => None,
    }
}

// ---- bulk ----------------------------------------------------------------------------------

fn bulk(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.select.filter.states.is_empty() {
        return Err(CliError::Usage(
            "give job ids, or --state dead-lettered|quarantined (with any list filters) to requeue in bulk".into(),
        ));
    }
    if let Some(bad) = a.select.filter.states.iter().find(|s| !s.is_requeueable()) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be requeued: only dead-lettered and quarantined jobs can",
            bad.as_str()
        )));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.select.filter.to_filter(store.now());
    // Refused here, before the count, when the actor may not requeue.
    let plan = store.plan_requeue(ctx.actor(), &filter)?;
    let what = a.select.filter.described();
    if plan.matching == 0 {
        a.select.filter.refuse_unknown_names(&store)?;
    }
    if a.select.dry_run {
        printer.print(&PlanView { plan, what, dry_run: true, extra: Force(a.force) })?;
        return Ok(ExitCode::SUCCESS);
    }
    if plan.matching == 0 {
        printer.print(&BulkDone::default().what(what))?;
        return Ok(ExitCode::SUCCESS);
    }
    let todo = if a.force { plan.matching } else { plan.would_requeue };
    if todo == 0 {
        return Err(CliError::Refused(format!(
            "all {} matching {what} would quarantine again: no live worker handles {}. Deploy a handler, or pass \
             --force to requeue them anyway",
            thousands(plan.matching),
            unhandled_names(&plan)
        )));
    }
    let mut question = format!("Requeue {} with a fresh attempt budget?", what.count(todo));
    if !a.force && plan.would_requarantine > 0 {
        question.push_str(&format!(
            " ({} more would quarantine again and are skipped; --force includes them)",
            thousands(plan.would_requarantine)
        ));
    }
    if !ctx.confirm_or_refuse(a.select.yes, &question, "requeue in bulk")? {
        return Err(exit::not_all_done("nothing requeued"));
    }
    let mut progress = Progress::interruptible("requeued", "requeue the rest")?;
    let done = store.requeue_planned(ctx.actor(), &plan, a.force, |p| progress.update(p.done, p.total))?;
    drop(progress);
    let skipped = if a.force { 0 } else { plan.would_requarantine };
    let view = BulkDone {
        requeued: done.done,
        skipped_requarantine: skipped,
        arrived_after_plan: done.arrived_after_plan,
        changed_meanwhile: todo.saturating_sub(done.done),
        unhandled: unhandled_names(&plan),
        what,
    };
    printer.print(&view)?;
    // Skipped jobs are named in the document: nothing more to say on stderr.
    if skipped > 0 {
        return Err(CliError::NotAllDone(None));
    }
    Ok(ExitCode::SUCCESS)
}

fn unhandled_names(plan: &RequeuePlan) -> String {
    let names: Vec<String> = plan.unhandled.iter().take(5).map(|w| format!("'{}'", sanitize(&w.wire_name))).collect();
    let more = plan.unhandled.len().saturating_sub(5);
    if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

/// Whether `--force` was given: the plan says the unhandled jobs are skipped unless it was.
struct Force(bool);

impl Render for PlanView<RequeuePlan, Force> {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let p = &self.plan;
        let Some(w) = self.opening(out, p.matching, "requeue")? else { return Ok(()) };
        // With --force the jobs no live worker handles are requeued too: the plan counts them
        // among the requeued, as the run will (a dry run said "0 would be requeued" where the
        // same command with --yes then requeued 206).
        let forced = self.extra.0;
        let requeued = if forced { p.would_requeue + p.would_requarantine } else { p.would_requeue };
        writeln!(out, "  {:>w$} would be requeued with a fresh attempt budget, due now", thousands(requeued))?;
        if p.no_live_worker && requeued > 0 {
            writeln!(out, "  No live worker is running now: they wait, scheduled, until one starts.")?;
        }
        if forced && p.would_requarantine > 0 {
            writeln!(
                out,
                "  {:>w$} of them would quarantine again: no live worker handles their wire name (--force)",
                thousands(p.would_requarantine),
            )?;
        } else {
            writeln!(
                out,
                "  {:>w$} would quarantine again: no live worker handles their wire name{}",
                thousands(p.would_requarantine),
                if p.would_requarantine > 0 { " (skipped unless --force)" } else { "" }
            )?;
        }
        if p.would_conflict > 0 {
            writeln!(
                out,
                "  {:>w$} would be left as they are: another job holds their unique key",
                thousands(p.would_conflict)
            )?;
        }
        if p.undecodable > 0 {
            writeln!(
                out,
                "  {:>w$} {} quarantined because {} payload did not decode: requeued, {} quarantine again \
                 unless the handler now accepts it",
                thousands(p.undecodable),
                if p.undecodable == 1 { "was" } else { "were" },
                if p.undecodable == 1 { "its" } else { "their" },
                if p.undecodable == 1 { "it would" } else { "they" }
            )?;
        }
        if !p.unhandled.is_empty() {
            let mut t = Table::new(&["    WIRE NAME (no live worker)", "JOBS"]);
            for u in &p.unhandled {
                t.row(vec![format!("    {}", sanitize(&u.wire_name)).into(), thousands(u.count).into()]);
            }
            t.write(out, term)?;
        }
        // Nothing a run would requeue but jobs --force would: say that, not "run again" (found at
        // 3 a.m.: the run then refused with "pass --force").
        if self.dry_run && requeued == 0 && p.would_requarantine > 0 {
            writeln!(
                out,
                "Nothing would be requeued without --force; run again with --force (no --dry-run) to requeue the {} \
                 that would quarantine again.",
                thousands(p.would_requarantine)
            )?;
            return Ok(());
        }
        self.closing(out, requeued > 0, "requeue them")
    }
}

#[derive(Default, Serialize)]
struct BulkDone {
    requeued: u64,
    skipped_requarantine: u64,
    /// Jobs that came to match after the plan: left, since the plan's set was confirmed.
    arrived_after_plan: u64,
    /// Planned jobs that changed meanwhile (another operator, a retention sweep): left.
    changed_meanwhile: u64,
    #[serde(skip)]
    unhandled: String,
    #[serde(skip)]
    what: Described,
}

impl BulkDone {
    fn what(self, what: Described) -> Self {
        BulkDone { what, ..self }
    }
}

impl Render for BulkDone {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        if self.requeued == 0 && self.skipped_requarantine == 0 && self.arrived_after_plan == 0 {
            return writeln!(out, "No {} to requeue.", self.what);
        }
        writeln!(out, "Requeued {}.", self.what.count(self.requeued))?;
        bulk::after_plan(out, self.changed_meanwhile, self.arrived_after_plan, "requeue them")?;
        if self.skipped_requarantine > 0 {
            writeln!(
                out,
                "Skipped {} that would quarantine again (no live worker handles {}): pass --force to requeue them.",
                thousands(self.skipped_requarantine),
                self.unhandled
            )?;
        }
        Ok(())
    }
}
