//! What every subcommand is handed: the global flags (one flattened struct), the operator's
//! identity, the clock (`BW_NOW` pins it), the printer for `--format`, and the confirmation
//! prompt. A subcommand never reads these from the environment itself.

use std::io::Write;
use std::time::Duration;

use super::exit::CliError;
use super::output;
use crate::text::shell_quote;
use crate::text::{parse_busy_timeout, parse_instant};
use backwave::{Clock, Store, StoreTarget};
use clap::ValueEnum;

/// Flags every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalOpts {
    /// The job store: an SQLite file, or a PostgreSQL URL (postgres://user@host/db; a password
    /// is never printed). Default ./backwave.db (`bw demo`: ./backwave-demo.db).
    #[arg(long, global = true, env = "BW_DB", default_value = "./backwave.db", hide_default_value = true, value_name = "PATH|URL", value_parser = parse_target, hide_env_values = true)]
    pub db: StoreTarget,
    /// `table` for people, `json` for scripts (one JSON document on stdout).
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// No colours (also when NO_COLOR is set).
    #[arg(long, global = true)]
    pub no_color: bool,
    /// How long to wait for another process's write lock before giving up (exit 3).
    #[arg(long, global = true, value_parser = parse_busy_timeout, default_value = "5s", value_name = "DUR")]
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
        self.actor.get_or_init(backwave::store::current_actor)
    }

    /// Open the existing store (never creates one). A missing file that is one typo away from
    /// a store beside it (`--db demo2` for `demo2.db`) names that store: `bw init` there would
    /// make a second, empty store and hide the one meant.
    pub fn open(&self) -> Result<Store, CliError> {
        let store = match Store::open(&self.global.db) {
            Err(backwave::Error::StoreMissing { path }) => match store_meant(&path) {
                Some(meant) => {
                    return Err(CliError::NoStore(format!(
                        "no BackWave store at '{}': did you mean --db {}? (`bw init --db {}` would create a new, \
                         empty store)",
                        path.display(),
                        shell_quote(&meant.display().to_string()),
                        shell_quote(&path.display().to_string())
                    )))
                }
                None => return Err(backwave::Error::StoreMissing { path }.into()),
            },
            other => other?,
        };
        let store = store.with_clock(self.clock()?);
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

    /// Whether a question can be put to a person: stdin is a terminal. Stderr need not be: with
    /// `bw … 2>&1 | tee log` the person is still at the keyboard, and the question goes to the
    /// terminal itself ([`Ctx::confirm`]).
    pub fn interactive(&self) -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stdin())
    }

    /// Ask `question` and read y/N from stdin. The question goes to stderr when that is a
    /// terminal, else to the controlling terminal (`/dev/tty`), so that it is seen when stderr
    /// is piped or logged; to stderr when there is no terminal at all.
    pub fn confirm(&self, question: &str) -> Result<bool, CliError> {
        let tty = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            None
        } else {
            std::fs::OpenOptions::new().write(true).open("/dev/tty").ok()
        };
        match tty {
            Some(mut t) => {
                write!(t, "{question} [y/N] ")?;
                t.flush()?;
            }
            None => {
                eprint_quiet(format_args!("{question} [y/N] "));
                std::io::stderr().flush()?;
            }
        }
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

/// The SQLite store beside the missing `path` that it most likely meant: the same name with a
/// store's extension, or a store file whose name is a typo away. Only files that begin with the
/// SQLite header count.
fn store_meant(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path.file_name()?.to_str()?;
    let is_store = |p: &std::path::Path| {
        let mut head = [0u8; 16];
        std::fs::File::open(p).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok()
            && &head == b"SQLite format 3\0"
    };
    for ext in ["db", "sqlite", "sqlite3"] {
        let p = path.with_file_name(format!("{name}.{ext}"));
        if is_store(&p) {
            return Some(p);
        }
    }
    let files: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| is_store(&dir.join(f)))
        .collect();
    let meant = crate::text::did_you_mean(name, files.iter().map(String::as_str))?;
    Some(path.with_file_name(meant))
}

/// `--db` / `BW_DB`: a path or a URL. Never an error here: clap's own message would quote the
/// value with its password, so a malformed URL is reported (redacted, exit 2) when the command
/// opens its store. `hide_env_values` keeps a `BW_DB` password out of `--help` too.
fn parse_target(s: &str) -> Result<StoreTarget, std::convert::Infallible> {
    Ok(StoreTarget::from(s))
}
