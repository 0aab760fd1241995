//! `bw`, the operator command line: one file per subcommand (its documented clap `Args` and a
//! `run`), dispatched from [`Command`]. Exit codes are decided in one place, [`exit_code`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::{Clock, Error, Millis, Store};
use clap::{Parser, Subcommand, ValueEnum};

pub mod json;
pub mod output;

mod access;
mod backoff;
mod cancel;
mod check;
mod completions;
mod config;
mod demo;
mod enqueue;
mod generate;
mod init;
mod jobs;
mod log;
mod metrics;
mod purge;
mod requeue;
mod stats;
mod top;
mod workers;

/// Exit statuses, documented in the README.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// Some ids were refused or not found, or the actor lacks a permission.
    pub const REFUSED: u8 = 1;
    /// A usage error: bad flags, an unknown state, a malformed id, duration or payload.
    pub const USAGE: u8 = 2;
    /// The store is unavailable: missing, locked past the busy timeout, corrupt, read-only for a
    /// write, or of an unknown schema version.
    pub const STORE: u8 = 3;
}

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

/// Flags every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalOpts {
    /// The job store (an SQLite file).
    #[arg(long, global = true, env = "BW_DB", default_value = "./backwave.db", value_name = "PATH")]
    pub db: PathBuf,
    /// `table` for people, `json` for scripts (one JSON document on stdout).
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// No colours (also when NO_COLOR is set).
    #[arg(long, global = true)]
    pub no_color: bool,
    /// How long to wait for another process's write lock before giving up (exit 3).
    #[arg(long, global = true, value_parser = parse_duration, default_value = "5s", value_name = "DUR")]
    pub busy_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::Args),
    /// List jobs and show one: every field, its delay table and history
    #[command(subcommand)]
    Jobs(jobs::Command),
    Requeue(requeue::Args),
    Cancel(cancel::Args),
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

/// What every subcommand gets: the global flags and the operator's identity.
pub struct Ctx {
    pub global: GlobalOpts,
    /// The OS user running `bw` (from the uid).
    pub actor: String,
    pub color: bool,
}

impl Ctx {
    pub fn new(global: GlobalOpts) -> Self {
        let color = !global.no_color
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::io::IsTerminal::is_terminal(&std::io::stdout());
        Ctx { actor: crate::store::current_actor(), color, global }
    }

    /// Open the existing store (never creates one).
    pub fn open(&self) -> Result<Store, CliError> {
        let store = Store::open(&self.global.db)?.with_clock(self.clock()?);
        store.set_busy_timeout(self.global.busy_timeout)?;
        Ok(store)
    }

    /// The system clock, or the instant pinned by `BW_NOW` (RFC 3339 or epoch milliseconds) so
    /// that tests can snapshot relative times, as jj does with `JJ_TIMESTAMP`.
    pub fn clock(&self) -> Result<Clock, CliError> {
        match std::env::var("BW_NOW") {
            Ok(v) if !v.is_empty() => Ok(Clock::manual(parse_instant(&v).map_err(CliError::Usage)?)),
            _ => Ok(Clock::System),
        }
    }

    pub fn json(&self) -> bool {
        self.global.format == Format::Json
    }

    /// The printer for `--format`, chosen once per command.
    pub fn printer(&self) -> Result<output::Printer, CliError> {
        Ok(match self.global.format {
            Format::Json => output::Printer::Json,
            Format::Table => output::Printer::Table(output::Term {
                width: output::terminal_width(),
                color: self.color,
                now: self.clock()?.now(),
            }),
        })
    }

    /// Whether a question can be put to a person: stdin and stderr are both terminals.
    pub fn interactive(&self) -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stdin()) && std::io::IsTerminal::is_terminal(&std::io::stderr())
    }

    /// Ask `question` on stderr and read y/N from stdin.
    pub fn confirm(&self, question: &str) -> Result<bool, CliError> {
        eprint_quiet(format_args!("{question} [y/N] "));
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
    }

    /// Guard an action that changes many jobs: `--yes` goes ahead, a person at a terminal is
    /// asked, and a script without `--yes` is refused rather than left waiting on a prompt.
    pub fn confirm_or_refuse(&self, yes: bool, question: &str, flag_hint: &str) -> Result<bool, CliError> {
        if yes {
            return Ok(true);
        }
        if !self.interactive() {
            return Err(CliError::Usage(format!(
                "refusing to {flag_hint} without confirmation: stdin is not a terminal, so pass --yes"
            )));
        }
        self.confirm(question)
    }
}

/// Why a command did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Store(#[from] Error),
    /// Bad input that clap could not catch: quoted, with what is accepted.
    #[error("{0}")]
    Usage(String),
    /// The command ran but refused some of what it was asked (the message is already printed
    /// or is this text).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The one place that maps errors to exit statuses.
pub fn exit_code(e: &CliError) -> u8 {
    match e {
        CliError::Usage(_) => exit::USAGE,
        CliError::Refused(_) => exit::REFUSED,
        CliError::Io(_) => exit::STORE,
        CliError::Store(e) => match e {
            Error::StoreMissing { .. }
            | Error::NotAStore { .. }
            | Error::SchemaTooNew { .. }
            | Error::Corrupt { .. }
            | Error::Busy
            | Error::ReadOnly { .. }
            | Error::Pragma { .. }
            | Error::Sqlite(_) => exit::STORE,
            Error::InvalidPolicy(_) | Error::InvalidInput(_) | Error::AmbiguousId { .. } | Error::Encode(_) => {
                exit::USAGE
            }
            Error::JobNotFound(_)
            | Error::WrongState { .. }
            | Error::PermissionDenied { .. }
            | Error::FailureDetailOff => exit::REFUSED,
        },
    }
}

/// A closed pipe (`bw jobs list | head`) is a quiet success.
pub fn is_broken_pipe(e: &CliError) -> bool {
    matches!(e, CliError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Write to stderr, ignoring failure: a message or progress line must never panic the way
/// `eprintln!` does when stderr is a closed pipe (`bw ... 2>&1 | head`), which turned a refusal
/// into exit 101 and could stop a bulk requeue part-way.
pub(crate) fn eprint_quiet(args: std::fmt::Arguments) {
    let _ = std::io::stderr().write_fmt(args);
}

/// Parse and run; returns the process exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Ctx::new(cli.global);
    let result = match cli.command {
        Command::Init(a) => init::run(&a, &ctx),
        Command::Jobs(c) => jobs::run(&c, &ctx),
        Command::Requeue(a) => requeue::run(&a, &ctx),
        Command::Cancel(a) => cancel::run(&a, &ctx),
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
        Err(CliError::Refused(msg)) if msg.is_empty() => ExitCode::from(exit::REFUSED),
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprint_quiet(format_args!("bw: error: {}\n", output::sanitize(&e.to_string())));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// An instant: RFC 3339 (`2026-11-30T14:02:12Z`) or milliseconds since the Unix epoch.
pub fn parse_instant(s: &str) -> Result<Millis, String> {
    if let Ok(ms) = s.trim().parse::<Millis>() {
        return Ok(ms);
    }
    humantime::parse_rfc3339_weak(s.trim())
        .map(|t| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0))
        .map_err(|_| format!("'{s}' is not a time: use RFC 3339 (2026-11-30T14:02:12Z) or epoch milliseconds"))
}

/// `--state` values: the command-line spelling (`dead-lettered`), with the accepted list in the error.
pub fn parse_state(s: &str) -> Result<crate::JobState, String> {
    s.parse::<crate::JobState>().map_err(|e| e.to_string())
}

/// `--label K=V`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not a label: use KEY=VALUE, e.g. tenant=acme")),
    }
}

/// `--before`: a duration back from now (`2h`) or an instant (RFC 3339, epoch ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Ago(Duration),
    At(Millis),
}

impl When {
    pub fn resolve(self, now: Millis) -> Millis {
        match self {
            When::Ago(d) => now - d.as_millis() as Millis,
            When::At(t) => t,
        }
    }
}

pub fn parse_when(s: &str) -> Result<When, String> {
    if humantime::parse_duration(s.trim()).is_ok() {
        return parse_duration(s).map(When::Ago);
    }
    parse_instant(s)
        .map(When::At)
        .map_err(|_| format!("'{s}' is neither a duration (90s, 2h, 14d) nor a time (2026-11-30T14:02:12Z, epoch ms)"))
}

/// Longer than any store will live. Every duration is subtracted from or added to "now" in i64
/// milliseconds; past about 292 million years that wraps, and a wrapped `--older-than` made
/// `bw purge` delete every terminal job (tests/faults, `purge_older_than_an_enormous_duration…`).
const LONGEST_DURATION: Duration = Duration::from_secs(1_000 * 366 * 24 * 3_600);

/// humantime durations everywhere: `90s`, `2h`, `14d`; at most 1000 years.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("'{s}' is not a duration ({e}); use e.g. 500ms, 90s, 2h, 14d"))?;
    if d > LONGEST_DURATION {
        return Err(format!("'{s}' is too long a duration: at most 1000 years"));
    }
    Ok(d)
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
