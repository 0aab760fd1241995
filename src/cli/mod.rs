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
mod workflow;

// The paths subcommands import from (`super::{Ctx, CliError, parse_duration}`).
pub use crate::text::{
    parse_cause, parse_duration, parse_instant, parse_label, parse_priority, parse_state, parse_when, When,
};
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

/// Every command, described here rather than on its arguments: with `defer`, clap builds only the
/// command a run names (a command's arguments are built when it is parsed, or its help
/// printed), so `bw jobs show` no longer builds the 300-odd arguments of every other command
/// (-7 % of its instructions; the parent's help reads each description from here).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Create or migrate a store; its creator becomes admin.
    Init(init::Args),
    /// List jobs and show one: every field, its delay table and history
    #[command(subcommand)]
    Jobs(jobs::Command),
    /// Requeue jobs with a fresh attempt budget: by id, or every match of `--state` and filters.
    Requeue(requeue::Args),
    /// Cancel jobs by id, or every Scheduled/Running/Waiting match of `--state` and filters (needs operate).
    Cancel(cancel::Args),
    /// Make Scheduled jobs due now, attempt and budget untouched: by id, or every match of the
    /// filters (needs operate).
    RunNow(run_now::Args),
    /// Stop every worker claiming a queue's or a wire name's jobs (needs operate). Running jobs
    /// finish; enqueues still land; workers see it at their next poll.
    Pause(pause::PauseArgs),
    /// Lift a pause (needs operate).
    Resume(pause::ResumeArgs),
    /// What is paused now, by whom, since and until when.
    Pauses(pause::PausesArgs),
    /// Limit a queue or a wire name across every host (needs operate): jobs over the limit stay
    /// Scheduled, spending no worker slot and no attempt. Flags not given keep the limit's other
    /// part; workers honour it from their next claim.
    Limit(limit::LimitArgs),
    /// Every limit in force: the operator's and the application's default, what runs under it, its
    /// current window, and the due jobs it holds back.
    Limits(limit::LimitsArgs),
    /// Every recurring schedule: cron, zone, next fire, last fire and its job, paused, orphaned.
    Schedules(schedules::ListArgs),
    #[command(subcommand)]
    Schedule(schedules::Command),
    /// The transition log: `bw log tail` (`--follow` keeps printing)
    #[command(subcommand)]
    Log(log::Command),
    /// Counts by state and queue, queue latency, top dead-letter causes, quarantines, pauses, limits.
    Stats(stats::Args),
    /// Live and stale workers: group, host, pid, state (running, quiet, stopping) and what each
    /// still runs, wire names, last heartbeat.
    Workers(workers::Args),
    /// Workflows, newest first: each with its jobs' counts by state, its oldest waiting job, and
    /// whether jobs wait behind a parent that ended without succeeding.
    Workflows(workflow::ListArgs),
    /// One workflow: `bw workflow show ID` prints its graph (each job, its state, its parents).
    #[command(subcommand)]
    Workflow(workflow::Command),
    /// Check the store's health: exit 0 OK, 1 warning, 2 critical, 3 store unavailable
    Check(check::Args),
    /// Export the store's health as Prometheus metrics (printed, or served with --listen)
    Metrics(metrics::Args),
    /// Enqueue a job (needs operate); prints its id.
    Enqueue(enqueue::Args),
    /// Delete terminal jobs older than the retention, or by id (needs operate).
    Purge(purge::Args),
    /// Print the schedule of a backoff policy.
    Backoff(backoff::Args),
    /// Give an actor (an OS user name) a permission: view-failure-detail, operate or admin.
    Grant(access::GrantArgs),
    /// Take a permission away.
    Revoke(access::RevokeArgs),
    /// The audit trail: grants, revokes, settings, failure-detail reveals, purges.
    Audit(access::AuditArgs),
    /// Store settings: failure_detail (on|off) and retention
    #[command(subcommand)]
    Config(config::Command),
    /// Print a completion script: `bw completions bash > /etc/bash_completion.d/bw`.
    Completions(completions::Args),
    /// The live dashboard: what is failing now, Dead-Lettered apart from Quarantined, and requeue,
    /// cancel and reveal without retyping ids. Press ? inside for every key.
    Top(top::Args),
    /// Run two example worker groups for real on a demo store (default ./backwave-demo.db, or the
    /// database of a PostgreSQL URL) and watch them in `bw top`: jobs succeed, retry, dead-letter
    /// (by error, panic and lapsed lease) and are quarantined (no handler, undecodable payload).
    /// Without a terminal it runs for --duration and prints a summary.
    Demo(demo::Args),
    /// Build a large store (for benchmarks): N jobs with a realistic mix of states, causes and
    /// about five log entries each. Same --seed and same BW_NOW: the same store, row for row.
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
        Command::Workflows(a) => workflow::list(&a, &ctx),
        Command::Workflow(c) => workflow::run(&c, &ctx),
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
            let mut text = e.to_string();
            match &e {
                CliError::Store(backwave::Error::PermissionDenied { .. }) => text.push_str(&no_admin_hint(&ctx)),
                // Which store, and how long bw waited (found at 3 a.m.: the message named neither).
                CliError::Store(backwave::Error::Busy) => text.push_str(&format!(
                    " ('{}', waited --busy-timeout {})",
                    ctx.global.db,
                    output::compact_duration(ctx.global.busy_timeout)
                )),
                _ => {}
            }
            eprint_quiet(format_args!("bw: error: {}\n", output::sanitize(&text)));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// After a missing permission, on a store nobody administers (one `bw generate` built, or whose
/// admins were all revoked by raw SQL): the refusal's "an admin can run `bw grant …`" names
/// someone who does not exist, so say how to become the admin. Empty otherwise (and when the
/// store cannot be asked).
fn no_admin_hint(ctx: &Ctx) -> String {
    match ctx.open().and_then(|s| Ok(s.has_admin()?)) {
        Ok(false) => "; this store has no admin yet: `bw init` on it makes you its admin".to_string(),
        _ => String::new(),
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

    /// `Command`'s arguments are deferred: a doc comment on a command's arguments, or on flags
    /// it flattens, would replace the description `bw --help` lists once the command is built,
    /// so `bw requeue --help` would open with another sentence. Each command describes itself
    /// as the list does.
    #[test]
    fn every_command_describes_itself_as_bw_help_lists_it() {
        let listed = Cli::command();
        let mut built = Cli::command();
        built.build();
        let text = |s: Option<&clap::builder::StyledStr>| s.map(|s| s.to_string());
        for sub in listed.get_subcommands().filter(|s| s.get_name() != "help") {
            let own = built.find_subcommand(sub.get_name()).unwrap();
            assert!(own.get_arguments().count() > 0, "{} was not built", sub.get_name());
            assert_eq!(text(own.get_about()), text(sub.get_about()), "{}", sub.get_name());
            assert_eq!(text(own.get_long_about()), text(sub.get_long_about()), "{}", sub.get_name());
        }
    }
}
