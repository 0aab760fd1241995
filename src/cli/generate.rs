//! `bw generate` (hidden): build a large store for benchmarks and for trying `bw top` at scale.
//! The work is `demo::generate`; this file parses, refuses to overwrite, and reports. On an
//! SQLite file `--force` replaces what is there; a PostgreSQL database (schema) must hold no
//! BackWave store (the library refuses one, under the schema lock), and `--force` never empties
//! one.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::ctx::eprint_quiet;
use super::output::thousands;
use super::progress::Progress;
use super::{CliError, Ctx};
use crate::demo::generate::{generate, GenerateOptions};
use backwave::{JobState, StoreTarget};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many jobs.
    #[arg(long, value_name = "N")]
    pub jobs: u64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// Replace the SQLite file at --db if there is one (a PostgreSQL store is never replaced).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let target = &ctx.global.db;
    match target {
        StoreTarget::File(path) => {
            if path.exists() {
                if !args.force {
                    return Err(CliError::Usage(format!(
                        "'{}' already exists: pass --force to replace it, or choose another --db",
                        path.display()
                    )));
                }
                remove_store_files(path)?;
            }
        }
        StoreTarget::Postgres(url) if args.force => {
            return Err(CliError::Usage(format!(
                "--force replaces an SQLite file, never a PostgreSQL store: generate into a schema without one \
                 (e.g. DROP SCHEMA … CASCADE; CREATE SCHEMA …), not '{url}' with --force"
            )))
        }
        StoreTarget::Postgres(_) => {}
    }
    let opts = GenerateOptions { jobs: args.jobs, seed: args.seed, now: ctx.clock()?.now() };
    let mut progress = Progress::new("generated");
    // Said once the store exists: a target that cannot be used is one line, the error.
    let report = generate(target.clone(), &opts, |done| match done {
        0 => {
            eprint_quiet(format_args!("generating {} jobs into {target} (seed {})\n", thousands(args.jobs), args.seed))
        }
        done => progress.update(done, args.jobs),
    })?;
    drop(progress);
    let mut err = std::io::stderr().lock();
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

/// The SQLite file at `path` and its journal, WAL and shared-memory files.
fn remove_store_files(path: &Path) -> std::io::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.to_path_buf().into_os_string();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
