//! bw jobs list | show: find what failed and read everything about one job. The filter flags
//! are shared with the bulk `bw requeue` ([`FilterArgs`]), so "what I listed" and "what I
//! requeue" are the same set.
//!
//! The list is [`list`], one job is [`show`]; the filter flags and the dispatch are here.

mod edit;
mod list;
mod priority;
mod show;

use std::process::ExitCode;
use std::time::Duration;

use super::output::{compact_duration, relative, rfc3339, sanitize};
use super::{parse_cause, parse_duration, parse_label, parse_state, parse_when, CliError, Ctx, When};
use backwave::store::JobFilter;
use backwave::{Job, JobState, Millis};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List jobs: terminal ones newest first, scheduled ones next due first.
    List(ListArgs),
    /// Every field of one job, its delay table and its whole history.
    Show(ShowArgs),
    /// Replace the payload of a dead-lettered or quarantined job (needs operate).
    Edit(edit::Args),
    /// Give one job another priority within its queue, 0 (claimed first) to 9 (needs operate).
    SetPriority(priority::Args),
}

// Which jobs: shared by `jobs list` and the bulk `requeue`. (A plain comment: clap would take
// a doc comment here for the description of each command that flattens these flags.)
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only jobs in this state (repeat or comma-separate for several): scheduled, running,
    /// succeeded, dead-lettered, quarantined, cancelled, waiting.
    #[arg(long = "state", value_name = "STATE", value_parser = parse_state, value_delimiter = ',')]
    pub states: Vec<JobState>,
    /// Only jobs in this queue.
    #[arg(long, value_name = "QUEUE")]
    pub queue: Option<String>,
    /// Only jobs with this wire name.
    #[arg(long, value_name = "NAME")]
    pub wire_name: Option<String>,
    /// Only jobs of this workflow (its full id: `bw workflows` lists them).
    #[arg(long, value_name = "ID", value_parser = parse_workflow_id)]
    pub workflow: Option<backwave::WorkflowId>,
    /// Only jobs with this label (repeat: all must match).
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Only jobs whose terminal cause contains this text (case-insensitive).
    #[arg(long, value_name = "TEXT", value_parser = parse_cause)]
    pub cause: Option<String>,
    /// Only jobs that finished (terminal) or were created (others) within this long.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub since: Option<Duration>,
    /// Only jobs that finished/were created before this long ago (`2h`) or this time (RFC 3339).
    #[arg(long, value_name = "DUR|TIME", value_parser = parse_when)]
    pub before: Option<When>,
}

impl FilterArgs {
    pub fn to_filter(&self, now: Millis) -> JobFilter {
        JobFilter {
            states: self.states.clone(),
            queue: self.queue.clone(),
            wire_name: self.wire_name.clone(),
            labels: self.labels.clone(),
            cause: self.cause.clone(),
            workflow: self.workflow,
            since: self.since.map(|d| now - d.as_millis() as Millis),
            before: self.before.map(|w| w.resolve(now)),
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
            && self.queue.is_none()
            && self.wire_name.is_none()
            && self.workflow.is_none()
            && self.labels.is_empty()
            && self.cause.is_none()
            && self.since.is_none()
            && self.before.is_none()
    }

    /// After a filter matched nothing: say on stderr when its queue or wire name is one no job
    /// has and no worker serves (a typo, most likely), with the nearest known name. Silence
    /// read as "nothing to do" while the operator had asked for a queue that does not exist.
    /// The wire-name check scans the jobs once, so it runs only on an empty result.
    pub fn warn_unknown_names(&self, store: &backwave::Store) -> Result<(), CliError> {
        let filter = backwave::store::JobFilter {
            queue: self.queue.clone(),
            wire_name: self.wire_name.clone(),
            workflow: self.workflow,
            ..Default::default()
        };
        for line in crate::text::unknown_filter_names(store, &filter)? {
            super::eprint_quiet(format_args!("bw: {line}\n"));
        }
        Ok(())
    }

    /// For a bulk action whose filter matched nothing: refuse it (exit 2, as `bw pause` and
    /// `bw limit` refuse a name nothing has) when its queue or wire name is one no job has and
    /// no worker serves, with the nearest known name. A typo answered "no jobs to requeue" and
    /// exit 0, which a script and a tired operator read as done.
    pub fn refuse_unknown_names(&self, store: &backwave::Store) -> Result<(), CliError> {
        let filter = backwave::store::JobFilter {
            queue: self.queue.clone(),
            wire_name: self.wire_name.clone(),
            workflow: self.workflow,
            ..Default::default()
        };
        let unknown = crate::text::unknown_filter_names(store, &filter)?;
        if unknown.is_empty() {
            return Ok(());
        }
        Err(CliError::Usage(format!("{} (nothing done)", unknown.join("; "))))
    }

    /// The filter in words, in both numbers: see [`Described`].
    pub fn described(&self) -> Described {
        Described { one: self.describe("job"), many: self.describe("jobs") }
    }

    /// `dead-lettered jobs in queue "low"`: the filter in words, for empty results and prompts.
    pub fn describe(&self, noun: &str) -> String {
        let mut s = String::new();
        if !self.states.is_empty() {
            let names: Vec<&str> = self.states.iter().map(|s| s.as_str()).collect();
            s.push_str(&names.join(" or "));
            s.push(' ');
        }
        s.push_str(noun);
        if let Some(q) = &self.queue {
            s.push_str(&format!(" in queue \"{}\"", sanitize(q)));
        }
        if let Some(w) = &self.wire_name {
            s.push_str(&format!(" with wire name \"{}\"", sanitize(w)));
        }
        for (k, v) in &self.labels {
            s.push_str(&format!(" labelled {}={}", sanitize(k), sanitize(v)));
        }
        if let Some(c) = &self.cause {
            s.push_str(&format!(" whose cause contains \"{}\"", sanitize(c)));
        }
        if let Some(d) = self.since {
            s.push_str(&format!(" from the last {}", compact_duration(d)));
        }
        if let Some(b) = self.before {
            match b {
                When::Ago(d) => s.push_str(&format!(" before {} ago", compact_duration(d))),
                When::At(t) => s.push_str(&format!(" before {}", rfc3339(t))),
            }
        }
        s
    }
}

/// A filter in words in both numbers (`dead-lettered job` / `dead-lettered jobs in queue
/// "low"`), so that a count of one reads "1 dead-lettered job", never "1 … jobs".
#[derive(Clone, Debug, Default)]
pub struct Described {
    pub one: String,
    pub many: String,
}

impl Described {
    /// `1 dead-lettered job`, `281 dead-lettered jobs`.
    pub fn count(&self, n: u64) -> String {
        format!("{} {}", super::output::thousands(n), if n == 1 { &self.one } else { &self.many })
    }
}

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.many)
    }
}

/// List jobs.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Rows per page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub limit: u64,
    /// Page number, from 1.
    #[arg(long, conflicts_with = "after", value_parser = clap::value_parser!(u64).range(1..))]
    pub page: Option<u64>,
    /// Continue after this cursor (printed as the next page's command; steady while jobs arrive).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

/// Show one job.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A job id or a unique prefix of one (`0192f3a1`).
    pub id: String,
    /// Reveal the failure detail of each failed attempt (needs view-failure-detail; audited).
    #[arg(long)]
    pub detail: bool,
}

pub fn run(cmd: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    match cmd {
        Command::List(a) => list::list(a, ctx),
        Command::Show(a) => show::show(a, ctx),
        Command::Edit(a) => edit::run(a, ctx),
        Command::SetPriority(a) => priority::run(a, ctx),
    }
}

pub(crate) use show::capture_off_refusal;
pub use show::{detail_marker, transition_text, write_detail};

/// Worker id -> `host/pid`, so a lease owner reads as a place an operator can go to.
/// A worker id names its host, pid and group (`web-1/4411/weighted-fair#3f9c`), so history
/// stays readable after the worker is gone from the registry.
pub(super) fn worker_label(id: &str) -> String {
    sanitize(id).into_owned()
}

pub(super) fn due_text(now: Millis, due: Millis) -> String {
    if due <= now {
        "due now".into()
    } else {
        relative(now, due)
    }
}

pub(super) fn lease_left(now: Millis, j: &Job) -> String {
    match j.lease_expires_at {
        Some(t) if t > now => format!("{} left", compact_duration(Duration::from_millis((t - now) as u64))),
        Some(t) => format!("lapsed {}", relative(now, t)),
        None => "–".into(),
    }
}

/// `--workflow ID`: a workflow's full id.
fn parse_workflow_id(s: &str) -> Result<backwave::WorkflowId, String> {
    s.parse().map_err(|_| format!("'{s}' is not a workflow id: give the whole UUID (`bw workflows` lists them)"))
}
