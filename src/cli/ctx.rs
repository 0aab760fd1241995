//! What every subcommand is handed: the global flags (one flattened struct), the operator's
//! identity, the clock (`BW_NOW` pins it), the printer for `--format`, and the confirmation
//! prompt. A subcommand never reads these from the environment itself.

use std::io::Write;
use std::time::Duration;

use super::exit::CliError;
use super::output;
use crate::text::{parse_duration, parse_instant};
use crate::{Clock, Store, StoreTarget};
use clap::ValueEnum;

/// Flags every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalOpts {
    /// The job store: an SQLite file, or a PostgreSQL URL (postgres://user@host/db; a password
    /// is never printed).
    #[arg(long, global = true, env = "BW_DB", default_value = "./backwave.db", value_name = "PATH|URL", value_parser = parse_target, hide_env_values = true)]
    pub db: StoreTarget,
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

/// What every subcommand gets: the global flags and the operator's identity.
pub struct Ctx {
    pub global: GlobalOpts,
    /// The OS user running `bw` (from the uid), looked up when a command first needs it: a
    /// name lookup reads the system's user database, which a read-only command can skip.
    actor: std::cell::OnceCell<String>,
    pub color: bool,
}

impl Ctx {
    pub fn new(global: GlobalOpts) -> Self {
        let color = !global.no_color
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::io::IsTerminal::is_terminal(&std::io::stdout());
        Ctx { actor: std::cell::OnceCell::new(), color, global }
    }

    /// The operator: the OS user running `bw`.
    pub fn actor(&self) -> &str {
        self.actor.get_or_init(crate::store::current_actor)
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

/// Write to stderr, ignoring failure: a message or progress line must never panic the way
/// `eprintln!` does when stderr is a closed pipe (`bw ... 2>&1 | head`), which turned a refusal
/// into exit 101 and could stop a bulk requeue part-way.
pub(crate) fn eprint_quiet(args: std::fmt::Arguments) {
    let _ = std::io::stderr().write_fmt(args);
}

/// `--db` / `BW_DB`: a path or a URL. Never an error here: clap's own message would quote the
/// value with its password, so a malformed URL is reported (redacted, exit 2) when the command
/// opens its store. `hide_env_values` keeps a `BW_DB` password out of `--help` too.
fn parse_target(s: &str) -> Result<StoreTarget, std::convert::Infallible> {
    Ok(StoreTarget::from(s))
}
