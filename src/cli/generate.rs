//! `bw generate` (hidden): build a large store for benchmarks and for trying `bw top` at scale.
//! The work is `demo::generate`; this file parses, refuses to overwrite, and reports. It writes
//! SQLite files only: its loader fills a new file in one transaction, and has no PostgreSQL
//! counterpart yet, so a URL is refused before anything connects.

use std::io::Write;
use std::process::ExitCode;

use super::output::thousands;
use super::progress::Progress;
use super::{CliError, Ctx};
use crate::demo::generate::{generate, GenerateOptions};
use crate::{JobState, StoreTarget};

/// Build a large store (for benchmarks): N jobs with a realistic mix of states, causes and
/// about five log entries each. Same --seed and same BW_NOW: the same store, row for row.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many jobs.
    #[arg(long, value_name = "N")]
    pub jobs: u64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// Replace the file at --db if there is one (an SQLite file: a URL is refused).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let path = match &ctx.global.db {
        StoreTarget::File(path) => path,
        url @ StoreTarget::Postgres(_) => {
            return Err(CliError::Usage(format!(
                "bw generate writes SQLite files only (its bulk loader has no PostgreSQL side yet), not '{url}': \
                 give --db a file path"
            )))
        }
    };
    if path.exists() {
        if !args.force {
            return Err(CliError::Usage(format!(
                "'{}' already exists: pass --force to replace it, or choose another --db",
                path.display()
            )));
        }
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = path.to_path_buf().into_os_string();
            p.push(suffix);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let opts = GenerateOptions { jobs: args.jobs, seed: args.seed, now: ctx.clock()?.now() };
    let mut err = std::io::stderr().lock();
    writeln!(err, "generating {} jobs into {} (seed {})", thousands(args.jobs), path.display(), args.seed)?;
    let mut progress = Progress::new("generated");
    let report = generate(path, &opts, |done| progress.update(done, args.jobs))?;
    drop(progress);
    let secs = report.elapsed.as_secs_f64();
    let rate = if secs > 0.0 { (report.jobs as f64 / secs) as u64 } else { 0 };
    let states: Vec<String> =
        JobState::ALL.iter().zip(report.by_state).map(|(s, n)| format!("{} {}", s.as_str(), thousands(n))).collect();
    writeln!(
        err,
        "done: {} jobs, {} log entries in {:.1} s ({} jobs/s)\n  {}",
        thousands(report.jobs),
        thousands(report.transitions),
        secs,
        thousands(rate),
        states.join(", ")
    )?;
    Ok(ExitCode::SUCCESS)
}
