//! bw cancel: end jobs that have not reached a terminal state, by id or in bulk by the `jobs
//! list` filters. A Scheduled job is Cancelled at once; a Running one is asked to stop and ends
//! Cancelled when its handler stops or its lease lapses. Bulk runs are planned first (exactly
//! how many end at once and how many are asked to stop), confirmed, then done in the store's
//! short batches (`Store::cancel_matching`) with progress on stderr.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::jobs::FilterArgs;
use super::json::IdResult;
use super::output::{thousands, Render, Term};
use super::progress::Progress;
use super::requeue::{finish, not_found, resolve_all, IdResults};
use super::{eprint_quiet, exit, CliError, Ctx};
use crate::store::{CancelDone, CancelPlan, CancelResult};
use crate::JobState;

/// Cancel jobs by id, or every Scheduled/Running match of `--state` and filters (needs operate).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job ids or unique id prefixes. Leave out to cancel by filter.
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
        return Err(CliError::Usage(
            "give job ids or filters (--state …), not both: filters select the jobs themselves".into(),
        ));
    }
    if a.ids.is_empty() {
        return bulk(a, ctx);
    }
    let store = ctx.open()?;
    let resolved = resolve_all(&store, &a.ids)?;
    let found: Vec<_> = resolved.iter().filter_map(|(_, id)| *id).collect();
    let outcomes = if a.dry_run { store.check_cancel(&found)? } else { store.cancel(&ctx.actor, &found)? };
    let mut outcome = outcomes.into_iter();
    let mut results = Vec::new();
    for (text, id) in &resolved {
        let Some(id) = id else {
            results.push(not_found(text));
            continue;
        };
        let id = id.to_string();
        results.push(match (outcome.next().expect("one outcome per found id"), a.dry_run) {
            (CancelResult::Cancelled, false) => {
                IdResult { id, result: "Cancelled", state: Some(JobState::Cancelled.as_str()), warning: None }
            }
            (CancelResult::Cancelled, true) => {
                IdResult { id, result: "WouldCancel", state: Some(JobState::Scheduled.as_str()), warning: None }
            }
            (CancelResult::CancelRequested, dry_run) => IdResult {
                id,
                result: if dry_run { "WouldRequestCancel" } else { "CancelRequested" },
                state: Some(JobState::Running.as_str()),
                warning: None,
            },
            (CancelResult::NotCancellable { state }, _) => {
                IdResult { id, result: "NotCancellable", state: Some(state.as_str()), warning: None }
            }
            (CancelResult::NotFound, _) => not_found(text),
        });
    }
    if a.dry_run {
        ctx.printer()?.print(&IdResults { results, verb: "cancelled" })?;
        return Ok(ExitCode::SUCCESS);
    }
    finish(ctx, IdResults { results, verb: "cancelled" })
}

fn bulk(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.filter.states.is_empty() {
        return Err(CliError::Usage(
            "give job ids, or --state scheduled|running (with any list filters) to cancel in bulk".into(),
        ));
    }
    if let Some(bad) = a.filter.states.iter().find(|s| s.is_terminal()) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be cancelled: only scheduled and running jobs can",
            bad.as_str()
        )));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.filter.to_filter(store.now());
    let plan = store.plan_cancel(&filter)?;
    let what = a.filter.describe("jobs");
    let todo = plan.would_cancel + plan.would_ask_to_stop;
    if a.dry_run || todo == 0 {
        printer.print(&PlanView { plan, what, dry_run: a.dry_run })?;
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!(
        "Cancel {} {what} ({} at once, {} running asked to stop)?",
        thousands(todo),
        thousands(plan.would_cancel),
        thousands(plan.would_ask_to_stop)
    );
    if !ctx.confirm_or_refuse(a.yes, &question, "cancel in bulk")? {
        eprint_quiet(format_args!("bw: nothing cancelled\n"));
        return Ok(ExitCode::from(exit::REFUSED));
    }
    let mut progress = Progress::new("cancelled");
    let done = store.cancel_matching(&ctx.actor, &filter, |p| progress.update(p.done, p.total))?;
    drop(progress);
    printer.print(&Done { done, what })?;
    Ok(ExitCode::SUCCESS)
}

struct PlanView {
    plan: CancelPlan,
    what: String,
    dry_run: bool,
}

impl Serialize for PlanView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            dry_run: bool,
            #[serde(flatten)]
            plan: &'a CancelPlan,
        }
        Doc { dry_run: self.dry_run, plan: &self.plan }.serialize(s)
    }
}

impl Render for PlanView {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let p = &self.plan;
        if p.matching == 0 {
            return writeln!(out, "No {} to cancel.", self.what);
        }
        writeln!(out, "{} {} match.", thousands(p.matching), self.what)?;
        let w = thousands(p.matching).len();
        writeln!(out, "  {:>w$} scheduled would end Cancelled at once", thousands(p.would_cancel))?;
        writeln!(
            out,
            "  {:>w$} running would be asked to stop (Cancelled when the handler stops or its lease lapses)",
            thousands(p.would_ask_to_stop)
        )?;
        if p.already_asked > 0 {
            writeln!(out, "  {:>w$} running were asked to stop already: left as they are", thousands(p.already_asked))?;
        }
        if self.dry_run && p.would_cancel + p.would_ask_to_stop > 0 {
            writeln!(out, "Run again without --dry-run to cancel them (you will be asked to confirm, or pass --yes).")?;
        }
        Ok(())
    }
}

struct Done {
    done: CancelDone,
    what: String,
}

impl Serialize for Done {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.done.serialize(s)
    }
}

impl Render for Done {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(
            out,
            "Cancelled {} {}; asked {} running to stop.",
            thousands(self.done.cancelled),
            self.what,
            thousands(self.done.asked_to_stop)
        )
    }
}
