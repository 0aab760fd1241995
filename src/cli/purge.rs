//! bw purge: the retention sweep on demand: delete terminal jobs (and their log) that finished
//! longer ago than `--older-than` (default: the store's retention setting). Batched and
//! audited by the store; confirmed first unless --yes.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{compact_duration, rfc3339, thousands, Render, Term};
use super::progress::Progress;
use super::{eprint_quiet, exit, parse_duration, CliError, Ctx};

/// Delete terminal jobs older than the retention (needs operate).
#[derive(Debug, clap::Args)]
pub struct Args {
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
}

impl Render for Purge {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let verb = if self.dry_run { "would be deleted" } else { "deleted" };
        writeln!(
            out,
            "{} terminal jobs that finished more than {} ago (before {}) {verb}, with their log.",
            thousands(self.jobs),
            self.older_than,
            self.cutoff
        )
    }
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let older = match a.older_than {
        Some(d) => d,
        None => store.retention()?,
    };
    // Never `now - older as i64`: a stored retention past i64 milliseconds must not wrap into
    // the future (the same cutoff as the engine's sweep).
    let cutoff = crate::model::millis_before(store.now(), older);
    let count = store.count_purgeable(cutoff)?;
    let mut view =
        Purge { dry_run: a.dry_run, older_than: compact_duration(older), cutoff: rfc3339(cutoff), jobs: count };
    if a.dry_run || count == 0 {
        ctx.printer()?.print(&view)?;
        return Ok(ExitCode::SUCCESS);
    }
    let q = format!("Delete {} terminal jobs that finished more than {} ago?", thousands(count), view.older_than);
    if !ctx.confirm_or_refuse(a.yes, &q, "purge")? {
        eprint_quiet(format_args!("bw: nothing deleted\n"));
        return Ok(ExitCode::from(exit::REFUSED));
    }
    let mut progress = Progress::new("deleted");
    view.jobs = store.purge(ctx.actor(), cutoff, |p| progress.update(p.done, p.total))?;
    drop(progress);
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}
