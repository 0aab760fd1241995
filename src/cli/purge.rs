//! bw purge: the retention sweep on demand: delete terminal jobs (and their log) that finished
//! longer ago than `--older-than` (default: the store's retention setting), or the terminal
//! jobs named by id. Batched and audited by the store; confirmed first unless --yes, after the
//! permission check.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::bulk::{finish, not_found, per_id, resolve_all, IdResults};
use super::json::{IdResult, Outcome};
use super::output::{compact_duration, rfc3339, thousands, Render, Term};
use super::progress::Progress;
use super::{exit, parse_duration, CliError, Ctx};
use backwave::store::PurgeResult;
use backwave::{JobState, Permission};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Terminal jobs to delete by id or unique prefix (audited one by one). Leave out to delete
    /// by age.
    #[arg(value_name = "ID", conflicts_with = "older_than")]
    pub ids: Vec<String>,
    /// Delete terminal jobs that finished longer ago than this (default: the store's retention).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Count what would be deleted, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Serialize)]
struct Purge {
    dry_run: bool,
    older_than: String,
    cutoff: String,
    /// Jobs that would be / were deleted.
    jobs: u64,
    /// The same jobs by state, as counted before the run (`{"dead-lettered": 75, …}`).
    by_state: BTreeMap<JobState, u64>,
}

impl Render for Purge {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let verb = if self.dry_run { "would be deleted" } else { "deleted" };
        writeln!(
            out,
            "{} terminal jobs that finished more than {} ago (before {}) {verb}, with their log{}.",
            thousands(self.jobs),
            self.older_than,
            self.cutoff,
            by_state_text(&self.by_state).map(|t| format!(": {t}")).unwrap_or_default()
        )
    }
}

/// `310 Succeeded, 50 Dead-Lettered, 25 Quarantined`, Dead-Lettered and Quarantined (failures
/// nobody may have looked at yet) first; `None` for no jobs.
pub(crate) fn by_state_text(counts: &BTreeMap<JobState, u64>) -> Option<String> {
    let order = [JobState::DeadLettered, JobState::Quarantined, JobState::Cancelled, JobState::Succeeded];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|s| counts.get(s).filter(|n| **n > 0).map(|n| format!("{} {s}", thousands(*n))))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if !a.ids.is_empty() {
        return by_id(a, ctx);
    }
    let store = ctx.open()?;
    // Before the count and the question: nobody should confirm a purge they may not run.
    store.require(ctx.actor(), Permission::Operate)?;
    let older = match a.older_than {
        Some(d) => d,
        None => store.retention()?,
    };
    // Never `now - older as i64`: a stored retention past i64 milliseconds must not wrap into
    // the future (the same cutoff as the engine's sweep).
    let cutoff = backwave::model::millis_before(store.now(), older);
    let by_state: BTreeMap<JobState, u64> = store.purgeable_by_state(cutoff)?.into_iter().collect();
    let count = by_state.values().sum();
    let mut view = Purge {
        dry_run: a.dry_run,
        older_than: compact_duration(older),
        cutoff: rfc3339(cutoff),
        jobs: count,
        by_state,
    };
    if a.dry_run || count == 0 {
        ctx.printer()?.print(&view)?;
        return Ok(ExitCode::SUCCESS);
    }
    let q = format!(
        "Delete {} terminal jobs that finished more than {} ago ({}), with their log?",
        thousands(count),
        view.older_than,
        by_state_text(&view.by_state).unwrap_or_default()
    );
    if !ctx.confirm_or_refuse(a.yes, &q, "purge")? {
        return Err(exit::not_all_done("nothing deleted"));
    }
    let mut progress = Progress::interruptible("deleted", "delete the rest")?;
    view.jobs = store.purge(ctx.actor(), cutoff, |p| progress.update(p.done, p.total))?;
    drop(progress);
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

/// `bw purge ID…`: every id resolved before any is deleted; a job that is not terminal is
/// refused (exit 1) and kept.
fn by_id(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    store.require(ctx.actor(), Permission::Operate)?;
    let resolved = resolve_all(&store, &a.ids)?;
    let found: Vec<_> = resolved.iter().filter_map(|(_, id)| *id).collect();
    if a.dry_run {
        let jobs = found.iter().map(|id| store.job(*id)).collect::<Result<Vec<_>, _>>()?;
        let results = per_id(&resolved, jobs, |text, id, job| match job {
            None => not_found(text),
            Some(j) if j.state.is_terminal() => IdResult {
                id: id.to_string(),
                result: Outcome::WouldDelete,
                state: Some(j.state.as_str()),
                warning: None,
            },
            Some(j) => IdResult {
                id: id.to_string(),
                result: Outcome::NotTerminal,
                state: Some(j.state.as_str()),
                warning: None,
            },
        });
        ctx.printer()?.print(&IdResults { results, verb: "deleted" })?;
        return Ok(ExitCode::SUCCESS);
    }
    if !found.is_empty() {
        let (n, s) = (found.len(), if found.len() == 1 { "" } else { "s" });
        let q = format!(
            "Delete {n} job{s} and {} log for good (terminal ones only)?",
            if n == 1 { "its" } else { "their" }
        );
        if !ctx.confirm_or_refuse(a.yes, &q, "purge")? {
            return Err(exit::not_all_done("nothing deleted"));
        }
    }
    let outcomes = store.purge_jobs(ctx.actor(), &found)?;
    let results = per_id(&resolved, outcomes, |text, id, r| match r {
        PurgeResult::Deleted { state } => {
            let _ = state;
            IdResult { id: id.to_string(), result: Outcome::Deleted, state: None, warning: None }
        }
        PurgeResult::NotTerminal { state } => {
            IdResult { id: id.to_string(), result: Outcome::NotTerminal, state: Some(state.as_str()), warning: None }
        }
        PurgeResult::NotFound => not_found(text),
    });
    finish(ctx, IdResults { results, verb: "deleted" })
}
