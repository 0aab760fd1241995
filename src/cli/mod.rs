//! `bw`, the operator command line: one file per subcommand (its documented clap `Args` and a
//! `run`), dispatched from [`Command`]. This file only parses and dispatches: what a command is
//! handed is [`ctx`], how it ends (errors, exit statuses: [`exit_code`]) is [`exit`].

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod ctx;
pub mod exit;
pub mod json;
pub mod output;
pub mod progress;

mod access;
mod backoff;
mod bulk;
mod cancel;
mod check;
mod completions;
mod config;
mod demo;
mod enqueue;
mod generate;
mod init;
mod jobs;
mod limit;
mod log;
mod metrics;
mod pause;
mod purge;
mod requeue;
mod run_now;
mod schedules;
mod stats;
mod top;
mod workers;

// The paths subcommands import from (`super::{Ctx, CliError, parse_duration}`).
pub use crate::text::{parse_duration, parse_instant, parse_label, parse_state, parse_when, When};
pub(crate) use ctx::eprint_quiet;
pub use ctx::{Ctx, Format, GlobalOpts};
pub use exit::{exit_code, is_broken_pipe, CliError};

#[derive(Debug, Parser)]
#[command(
    name = "bw",
    version,
    about = "Operate a BackWave job store: see what failed and why, requeue, cancel, watch"
)]
#[command(propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::Args),
    /// List jobs and show one: every field, its delay table and history
    #[command(subcommand)]
    Jobs(jobs::Command),
    Requeue(requeue::Args),
    Cancel(cancel::Args),
    RunNow(run_now::Args),
    Pause(pause::PauseArgs),
    Resume(pause::ResumeArgs),
    Pauses(pause::PausesArgs),
    Limit(limit::LimitArgs),
    Limits(limit::LimitsArgs),
    Schedules(schedules::ListArgs),
    #[command(subcommand)]
    Schedule(schedules::Command),
    /// The transition log: `bw log tail` (`--follow` keeps printing)
    #[command(subcommand)]
    Log(log::Command),
    Stats(stats::Args),
    Workers(workers::Args),
    Check(check::Args),
    Metrics(metrics::Args),
    Enqueue(enqueue::Args),
    Purge(purge::Args),
    Backoff(backoff::Args),
    Grant(access::GrantArgs),
    Revoke(access::RevokeArgs),
    Audit(access::AuditArgs),
    /// Store settings: failure_detail (on|off) and retention
    #[command(subcommand)]
    Config(config::Command),
    Completions(completions::Args),
    Top(top::Args),
    Demo(demo::Args),
    #[command(hide = true)]
    Generate(generate::Args),
}

/// Parse and run; returns the process exit status.
pub fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    let ctx = Ctx::new(cli.global);
    let result = match cli.command {
        Command::Init(a) => init::run(&a, &ctx),
        Command::Jobs(c) => jobs::run(&c, &ctx),
        Command::Requeue(a) => requeue::run(&a, &ctx),
        Command::Cancel(a) => cancel::run(&a, &ctx),
        Command::RunNow(a) => run_now::run(&a, &ctx),
        Command::Pause(a) => pause::pause(&a, &ctx),
        Command::Resume(a) => pause::resume(&a, &ctx),
        Command::Pauses(a) => pause::list(&a, &ctx),
        Command::Limit(a) => limit::limit(&a, &ctx),
        Command::Limits(a) => limit::list(&a, &ctx),
        Command::Schedules(a) => schedules::list(&a, &ctx),
        Command::Schedule(c) => schedules::run(&c, &ctx),
        Command::Log(c) => log::run(&c, &ctx),
        Command::Stats(a) => stats::run(&a, &ctx),
        Command::Workers(a) => workers::run(&a, &ctx),
        Command::Check(a) => check::run(&a, &ctx),
        Command::Metrics(a) => metrics::run(&a, &ctx),
        Command::Enqueue(a) => enqueue::run(&a, &ctx),
        Command::Purge(a) => purge::run(&a, &ctx),
        Command::Backoff(a) => backoff::run(&a, &ctx),
        Command::Grant(a) => access::grant(&a, &ctx),
        Command::Revoke(a) => access::revoke(&a, &ctx),
        Command::Audit(a) => access::audit(&a, &ctx),
        Command::Config(c) => config::run(&c, &ctx),
        Command::Completions(a) => completions::run(&a),
        Command::Top(a) => top::run(&a, &ctx),
        Command::Demo(a) => demo::run(&a, &ctx),
        Command::Generate(a) => generate::run(&a, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e @ CliError::NotAllDone(_)) => {
            if let CliError::NotAllDone(Some(note)) = &e {
                let _ = std::io::stdout().flush();
                eprint_quiet(format_args!("bw: {note}\n"));
            }
            ExitCode::from(exit_code(&e))
        }
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprint_quiet(format_args!("bw: error: {}\n", output::sanitize(&e.to_string())));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// `Cli::try_parse`, without freeing clap's tree of every command and argument afterwards: that
/// free is 4 % of the instructions of a `bw jobs show` (callgrind; issue 23 holds `bw` to 1.3x the
/// `sqlite3` shell), and the process is done with the tree for good. Errors are formatted
/// against the tree as `try_parse` formats them.
fn parse_args() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = Cli::command();
    let parsed = cmd
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd)));
    std::mem::forget(cmd);
    parsed
}

/// Clap's own refusals (an unknown flag, a bad value) said as every other error is: `bw:
/// error: …` on stderr, exit 2. Help and version print as clap prints them.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    // Rendered without colour (StyledStr's Display drops the styles): one plain line to start.
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint_quiet(format_args!("bw: error: {text}"));
    ExitCode::from(exit::USAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
