//! bw jobs list | show: find what failed and read everything about one job. The filter flags
//! are shared with the bulk `bw requeue` ([`FilterArgs`]), so "what I listed" and "what I
//! requeue" are the same set.

use std::collections::HashMap;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::json::{JobJson, LogEntryJson};
use super::output::{
    self, bytes, clock_time, compact_duration, relative, rfc3339, sanitize, sanitize_bytes, sanitize_multiline,
    shell_quote, state_style, thousands, write_fields, Cell, Render, Style, Table, Term,
};
use super::{parse_duration, parse_label, parse_state, parse_when, CliError, Ctx, When};
use crate::store::{Cursor, JobFilter, JobPage};
use crate::{DetailStatus, Error, FailureDetail, Job, JobState, Millis, Transition};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List jobs: terminal ones newest first, scheduled ones next due first.
    List(ListArgs),
    /// Every field of one job, its delay table and its whole history.
    Show(ShowArgs),
    /// Replace the payload of a dead-lettered or quarantined job (needs operate).
    Edit(super::jobs_edit::Args),
}

/// Which jobs: shared by `jobs list` and the bulk `requeue`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only jobs in this state (repeat or comma-separate for several): scheduled, running,
    /// succeeded, dead-lettered, quarantined, cancelled.
    #[arg(long = "state", value_name = "STATE", value_parser = parse_state, value_delimiter = ',')]
    pub states: Vec<JobState>,
    /// Only jobs in this queue.
    #[arg(long, value_name = "QUEUE")]
    pub queue: Option<String>,
    /// Only jobs with this wire name.
    #[arg(long, value_name = "NAME")]
    pub wire_name: Option<String>,
    /// Only jobs with this label (repeat: all must match).
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Only jobs whose terminal cause contains this text (case-insensitive).
    #[arg(long, value_name = "TEXT")]
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
            since: self.since.map(|d| now - d.as_millis() as Millis),
            before: self.before.map(|w| w.resolve(now)),
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
            && self.queue.is_none()
            && self.wire_name.is_none()
            && self.labels.is_empty()
            && self.cause.is_none()
            && self.since.is_none()
            && self.before.is_none()
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
        Command::List(a) => list(a, ctx),
        Command::Show(a) => show(a, ctx),
        Command::Edit(a) => super::jobs_edit::run(a, ctx),
    }
}

// ---- list ----------------------------------------------------------------------------------

fn list(a: &ListArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let now = store.now();
    let filter = a.filter.to_filter(now);
    let limit = a.limit as usize;
    let page = match &a.after {
        Some(c) => {
            let cursor: Cursor = c.parse()?;
            store.list_jobs_after(&filter, limit, &cursor)?
        }
        None => store.list_jobs(&filter, limit, (a.page.unwrap_or(1) - 1) * a.limit)?,
    };
    let view = JobList { page, filter: a.filter.clone(), limit: a.limit, page_no: a.page, after: a.after.is_some() };
    printer.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

/// Worker id -> `host/pid`, so a lease owner reads as a place an operator can go to.
/// A worker id names its host, pid and group (`web-1/4411/weighted-fair#3f9c`), so history
/// stays readable after the worker is gone from the registry.
fn worker_label(id: &str) -> String {
    sanitize(id).into_owned()
}

struct JobList {
    page: JobPage,
    filter: FilterArgs,
    limit: u64,
    page_no: Option<u64>,
    after: bool,
}

impl Serialize for JobList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            jobs: Vec<JobJson>,
            total: u64,
            offset: Option<u64>,
            limit: u64,
            next_cursor: Option<&'a str>,
        }
        let next = self.page.next.as_ref().map(|c| c.to_string());
        Doc {
            jobs: self.page.jobs.iter().map(JobJson::from).collect(),
            total: self.page.total,
            offset: self.page.offset,
            limit: self.limit,
            next_cursor: next.as_deref(),
        }
        .serialize(s)
    }
}

/// Which columns a listing shows, decided by the states it can contain.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Terminal,
    Scheduled,
    Running,
    Mixed,
}

fn layout(states: &[JobState]) -> Layout {
    if states.is_empty() {
        Layout::Mixed
    } else if states.iter().all(|s| s.is_terminal()) {
        Layout::Terminal
    } else if states.iter().all(|s| *s == JobState::Scheduled) {
        Layout::Scheduled
    } else if states.iter().all(|s| *s == JobState::Running) {
        Layout::Running
    } else {
        Layout::Mixed
    }
}

fn attempts(j: &Job) -> String {
    match j.max_attempts {
        Some(m) => format!("{}/{}", j.attempt, m),
        None => j.attempt.to_string(),
    }
}

fn due_text(now: Millis, due: Millis) -> String {
    if due <= now {
        "due now".into()
    } else {
        relative(now, due)
    }
}

fn lease_left(now: Millis, j: &Job) -> String {
    match j.lease_expires_at {
        Some(t) if t > now => format!("{} left", compact_duration(Duration::from_millis((t - now) as u64))),
        Some(t) => format!("lapsed {}", relative(now, t)),
        None => "–".into(),
    }
}

/// Below this many columns a one-state list leaves out its STATE column.
const NARROW: usize = 100;

impl Render for JobList {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let jobs = &self.page.jobs;
        if jobs.is_empty() {
            let what = self.filter.describe("jobs");
            if self.page.total > 0 {
                writeln!(out, "No {what} on this page: {} match in all (try --page 1).", thousands(self.page.total))?;
            } else {
                writeln!(out, "No {what}.")?;
            }
            return Ok(());
        }
        let now = term.now;
        let lay = layout(&self.filter.states);
        let state_cell = |j: &Job| Cell::styled(j.state.title(), state_style(j.state));
        let (mut headers, flex) = match lay {
            Layout::Terminal => (vec!["ID", "STATE", "WIRE NAME", "QUEUE", "ATTEMPTS", "FINISHED", "CAUSE"], Some(6)),
            Layout::Scheduled => {
                (vec!["ID", "STATE", "WIRE NAME", "QUEUE", "ATTEMPTS", "NEXT ATTEMPT", "CREATED"], None)
            }
            // The worker id is the long one: it gives way (cut with …) so that the lease stays on
            // screen instead of the row wrapping at 80 columns.
            Layout::Running => (vec!["ID", "STATE", "WIRE NAME", "QUEUE", "ATTEMPT", "WORKER", "LEASE"], Some(5)),
            Layout::Mixed => (vec!["ID", "STATE", "WIRE NAME", "QUEUE", "ATTEMPTS", "WHEN", "CAUSE / WORKER"], Some(6)),
        };
        // Listing one state on a narrow terminal, the STATE column repeats the command line and
        // its 15 cells were taken from the wire names ("resize-…" at 80 columns).
        let drop_state = self.filter.states.len() == 1 && term.width.is_some_and(|w| w < NARROW);
        let shift = usize::from(drop_state);
        if drop_state {
            headers.remove(1);
        }
        let mut table = Table::new(&headers).max_width(2 - shift, 28).max_width(3 - shift, 16);
        if let Some(f) = flex {
            table = table.flex(f - shift);
        }
        for j in jobs {
            let mut row: Vec<Cell> = vec![
                j.id.short().into(),
                state_cell(j),
                sanitize(&j.wire_name).into(),
                sanitize(&j.queue).into(),
                attempts(j).into(),
            ];
            let cause = || sanitize(j.terminal_cause.as_deref().unwrap_or("")).into_owned();
            match lay {
                Layout::Terminal => {
                    row.push(j.finished_at.map(|f| relative(now, f)).unwrap_or_default().into());
                    row.push(cause().into());
                }
                Layout::Scheduled => {
                    row.push(due_text(now, j.due_at).into());
                    row.push(relative(now, j.created_at).into());
                }
                Layout::Running => {
                    row.push(worker_label(j.lease_owner.as_deref().unwrap_or("")).into());
                    row.push(lease_left(now, j).into());
                }
                Layout::Mixed => match j.state {
                    JobState::Scheduled => {
                        row.push(due_text(now, j.due_at).into());
                        row.push(Cell::default());
                    }
                    JobState::Running => {
                        row.push(format!("lease {}", lease_left(now, j)).into());
                        row.push(worker_label(j.lease_owner.as_deref().unwrap_or("")).into());
                    }
                    _ => {
                        row.push(j.finished_at.map(|f| relative(now, f)).unwrap_or_default().into());
                        row.push(cause().into());
                    }
                },
            }
            if drop_state {
                row.remove(1);
            }
            table.row(row);
        }
        table.write(out, term)?;
        let shown = jobs.len() as u64;
        let mut footer = match self.page.offset {
            Some(off) => {
                format!("Showing {}-{} of {}.", thousands(off + 1), thousands(off + shown), thousands(self.page.total))
            }
            None => format!("Showing {} of {} (after a cursor).", thousands(shown), thousands(self.page.total)),
        };
        if let Some(next) = &self.page.next {
            let cmd = if self.after {
                next_page_command(&format!("--after {next}"))
            } else {
                next_page_command(&format!("--page {}", self.page_no.unwrap_or(1) + 1))
            };
            footer.push_str(&format!(" Next page: {cmd}"));
        }
        writeln!(out, "{}", Style::Dim.paint(&footer, term.color))
    }
}

/// This very command line, with its paging flags replaced by `paging`.
fn next_page_command(paging: &str) -> String {
    let mut words = vec!["bw".to_string()];
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        if a == "--page" || a == "--after" {
            args.next();
            continue;
        }
        if a.starts_with("--page=") || a.starts_with("--after=") {
            continue;
        }
        words.push(sanitize(&shell_quote(&a)).into_owned());
    }
    words.push(paging.to_string());
    words.join(" ")
}

// ---- show ----------------------------------------------------------------------------------

fn show(a: &ShowArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let id = store.resolve_id(&a.id)?;
    let job = store.job(id)?.ok_or_else(|| Error::JobNotFound(a.id.clone()))?;
    let history = store.history(id)?;
    let live = store.live_handlers()?.get(&job.wire_name).copied().unwrap_or(0);
    let detail_on = store.failure_detail_enabled()?;
    // Reveal first, show the job whatever the answer: a refused reveal still prints everything
    // else, and the refusal becomes the exit status.
    let (revealed, refusal) = if a.detail && history.iter().any(|t| matches!(t.detail, DetailStatus::Hidden { .. })) {
        match store.reveal_failure_detail(&ctx.actor, id) {
            Ok(d) => (d.into_iter().collect::<HashMap<_, _>>(), None),
            Err(e @ (Error::PermissionDenied { .. } | Error::FailureDetailOff)) => (HashMap::new(), Some(e)),
            Err(e) => return Err(e.into()),
        }
    } else if a.detail && !detail_on {
        (HashMap::new(), Some(Error::FailureDetailOff))
    } else {
        (HashMap::new(), None)
    };
    let view = JobShow { job, history, live, detail_on, revealed, asked_detail: a.detail };
    printer.print(&view)?;
    match refusal {
        Some(e) => Err(e.into()),
        None => Ok(ExitCode::SUCCESS),
    }
}

struct JobShow {
    job: Job,
    history: Vec<Transition>,
    live: u64,
    detail_on: bool,
    revealed: HashMap<i64, FailureDetail>,
    asked_detail: bool,
}

impl JobShow {
    /// When the next attempt may run: a Scheduled job's due time.
    fn next_attempt_at(&self) -> Option<Millis> {
        (self.job.state == JobState::Scheduled).then_some(self.job.due_at)
    }
}

impl Serialize for JobShow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Full<'a> {
            #[serde(flatten)]
            job: JobJson,
            /// The payload as JSON when it is JSON, else as (lossy) text.
            payload: serde_json::Value,
            worker_group: Option<&'a str>,
            lease_owner: Option<&'a str>,
            lease_expires_at: Option<String>,
            cancel_requested_by: Option<&'a str>,
            delay_table_ms: Option<&'a [u64]>,
            budget_left: Option<u32>,
            next_attempt_at: Option<String>,
            updated_at: String,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            job: Full<'a>,
            live_handlers: u64,
            failure_detail: &'static str,
            history: Vec<LogEntryJson>,
        }
        let j = &self.job;
        let payload = serde_json::from_slice(&j.payload)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&j.payload).into_owned()));
        Doc {
            job: Full {
                job: JobJson::from(j),
                payload,
                worker_group: j.worker_group.as_deref(),
                lease_owner: j.lease_owner.as_deref(),
                lease_expires_at: j.lease_expires_at.map(rfc3339),
                cancel_requested_by: j.cancel_requested_by.as_deref(),
                delay_table_ms: j.delay_table.as_deref(),
                budget_left: j.budget_left(),
                next_attempt_at: self.next_attempt_at().map(rfc3339),
                updated_at: rfc3339(j.updated_at),
            },
            live_handlers: self.live,
            failure_detail: if self.detail_on { "on" } else { "off" },
            history: self.history.iter().map(|t| LogEntryJson::new(t, self.revealed.get(&t.seq))).collect(),
        }
        .serialize(s)
    }
}

/// What the log shows of an entry's failure detail when it is not revealed.
pub fn detail_marker(d: &DetailStatus) -> String {
    match d {
        DetailStatus::None => String::new(),
        DetailStatus::NotCaptured => "[detail not captured]".into(),
        DetailStatus::Hidden { kind, bytes: n } => format!("[detail hidden: {}, {}]", sanitize(kind), bytes(*n)),
        DetailStatus::Revealed(_) => "[detail below]".into(),
    }
}

/// A revealed failure detail as an indented block; multi-line text keeps its lines, escaped.
pub fn write_detail(out: &mut dyn Write, header: &str, d: &FailureDetail) -> io::Result<()> {
    writeln!(out, "{header}")?;
    writeln!(out, "    type     {}", sanitize(&d.kind))?;
    let indent = |s: &str| sanitize_multiline(s).replace('\n', "\n             ");
    writeln!(out, "    message  {}", indent(&d.message))?;
    for (i, c) in d.chain.iter().enumerate() {
        writeln!(out, "    {}  {}", if i == 0 { "caused by" } else { "         " }, indent(c))?;
    }
    if let Some(bt) = &d.backtrace {
        writeln!(out, "    backtrace")?;
        for line in sanitize_multiline(bt).lines() {
            writeln!(out, "      {line}")?;
        }
    }
    Ok(())
}

impl Render for JobShow {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let j = &self.job;
        let now = term.now;
        let c = term.color;
        writeln!(
            out,
            "Job {}  {}",
            Style::Bold.paint(&j.id.to_string(), c),
            state_style(j.state).paint(j.state.title(), c)
        )?;
        let mut f: Vec<(&str, String)> = Vec::new();
        f.push(("Wire name", sanitize(&j.wire_name).into_owned()));
        f.push(("Queue", sanitize(&j.queue).into_owned()));
        if !j.labels.is_empty() {
            let l: Vec<String> = j.labels.iter().map(|(k, v)| format!("{}={}", sanitize(k), sanitize(v))).collect();
            f.push(("Labels", l.join(" ")));
        }
        let payload = sanitize_bytes(&j.payload);
        f.push(("Payload", format!("{}  ({})", output::truncate(&payload, 200), bytes(j.payload.len()))));
        f.push(("Created", format!("{} ({})", rfc3339(j.created_at), relative(now, j.created_at))));
        match j.max_attempts {
            Some(m) => {
                f.push(("Attempts", format!("{} of {} used, {} left", j.attempt, m, j.budget_left().unwrap_or(0))))
            }
            None => f.push(("Attempts", format!("{} (no budget yet: set by the first claim)", j.attempt))),
        }
        if let Some(g) = &j.worker_group {
            f.push(("Worker group", sanitize(g).into_owned()));
        }
        match j.state {
            JobState::Scheduled => f.push((
                "Next attempt",
                format!("attempt {}, {} ({})", j.attempt + 1, due_text(now, j.due_at), rfc3339(j.due_at)),
            )),
            JobState::Running => {
                let owner = worker_label(j.lease_owner.as_deref().unwrap_or(""));
                let until = j.lease_expires_at.map(rfc3339).unwrap_or_default();
                f.push(("Lease", format!("held by {owner}, {} (until {until})", lease_left(now, j))));
                if let Some(d) = j.next_delay_ms() {
                    f.push(("If it fails", format!("retry after {}", compact_duration(Duration::from_millis(d)))));
                } else if j.max_attempts.is_some() {
                    f.push(("If it fails", "dead-lettered: this is the last attempt".into()));
                }
            }
            _ => {
                if let Some(fin) = j.finished_at {
                    f.push(("Finished", format!("{} ({})", rfc3339(fin), relative(now, fin))));
                }
            }
        }
        if let Some(by) = &j.cancel_requested_by {
            f.push(("Cancel", format!("requested by {}", sanitize(by))));
        }
        if let Some(cause) = &j.terminal_cause {
            f.push(("Cause", sanitize(cause).into_owned()));
        }
        if let Some(q) = j.quarantine_reason {
            let why = match q {
                crate::QuarantineReason::NoHandler => {
                    "no-handler: the claiming worker had no handler for this wire name"
                }
                crate::QuarantineReason::UndecodablePayload => {
                    "undecodable-payload: the payload did not decode into the handler's type"
                }
            };
            f.push(("Quarantine", why.into()));
        }
        let handled = if self.live == 0 {
            Style::Yellow.paint(&format!("no live worker handles '{}' now", sanitize(&j.wire_name)), c)
                + if j.state.is_requeueable() { ": a requeue would quarantine it again" } else { "" }
        } else {
            format!(
                "{} live worker{} '{}' now",
                self.live,
                if self.live == 1 { " handles" } else { "s handle" },
                sanitize(&j.wire_name)
            )
        };
        f.push(("Handlers", handled));
        if !self.detail_on {
            f.push(("Failure detail", "switched off for this store: new failures are not captured".into()));
        }
        write_fields(out, &f)?;

        writeln!(out)?;
        match &j.delay_table {
            None => writeln!(
                out,
                "Delay table: none yet (written from the worker group's retry policy at the first claim)."
            )?,
            Some(table) => {
                let max = j.max_attempts.unwrap_or(table.len() as u32 + 1);
                writeln!(out, "Delay table (waits after each failed attempt):")?;
                let mut t = Table::new(&["ATTEMPT", "THEN WAITS", "RETRY AT (since first try)", ""]);
                let mut since = 0u64;
                for n in 1..=max {
                    let wait = table.get(n as usize - 1).copied();
                    let (w, at) = match wait {
                        Some(ms) => {
                            since += ms;
                            (
                                output::precise_duration(Duration::from_millis(ms)),
                                output::precise_duration(Duration::from_millis(since)),
                            )
                        }
                        None => ("—".into(), "dead-lettered on failure".into()),
                    };
                    let mark = match j.state {
                        JobState::Running if n == j.attempt => "← running now",
                        JobState::Scheduled if n == j.attempt + 1 => "← next",
                        _ if n <= j.attempt => "failed",
                        _ => "",
                    };
                    let mark = if j.state == JobState::Succeeded && n == j.attempt { "succeeded" } else { mark };
                    t.row(vec![format!("  {n}").into(), w.into(), at.into(), Cell::styled(mark, Style::Dim)]);
                }
                t.write(out, term)?;
            }
        }

        writeln!(out)?;
        // Times of day in UTC; the date is said once, and again on a row where the day changes.
        let day = |at: Millis| rfc3339(at)[..10].to_string();
        let first_day = self.history.first().map(|e| day(e.at)).unwrap_or_default();
        writeln!(out, "History ({} entries; times UTC, {first_day}):", self.history.len())?;
        let mut t =
            Table::new(&["SEQ", "AT", "TRANSITION", "ATTEMPT", "BY", "DETAIL", "REASON"]).flex(6).max_width(4, 40);
        for e in &self.history {
            let by = match (&e.actor, &e.worker_id) {
                (Some(a), _) => format!("operator {}", sanitize(a)),
                (None, Some(w)) => worker_label(w),
                _ => String::new(),
            };
            let detail = match &e.detail {
                _ if self.revealed.contains_key(&e.seq) => Cell::styled("revealed below", Style::Cyan),
                DetailStatus::None => Cell::default(),
                DetailStatus::NotCaptured => Cell::styled("not captured", Style::Dim),
                DetailStatus::Hidden { kind, bytes: n } => {
                    Cell::styled(format!("hidden: {}, {}", sanitize(kind), bytes(*n)), Style::Dim)
                }
                DetailStatus::Revealed(_) => Cell::styled("revealed below", Style::Cyan),
            };
            t.row(vec![
                e.seq.to_string().into(),
                if day(e.at) == first_day { clock_time(e.at) } else { format!("{} {}", day(e.at), clock_time(e.at)) }
                    .into(),
                transition_text(e.from, e.to).into(),
                e.attempt.to_string().into(),
                by.into(),
                detail,
                sanitize(e.reason.as_deref().unwrap_or("")).into_owned().into(),
            ]);
        }
        t.write(out, term)?;
        if !self.revealed.is_empty() {
            writeln!(out)?;
            writeln!(out, "Failure detail (revealed to you; this reveal is recorded in the audit log):")?;
            for e in &self.history {
                if let Some(d) = self.revealed.get(&e.seq) {
                    write_detail(out, &format!("  seq {}, attempt {}:", e.seq, e.attempt), d)?;
                }
            }
        } else if !self.asked_detail && self.history.iter().any(|e| matches!(e.detail, DetailStatus::Hidden { .. })) {
            writeln!(
                out,
                "{}",
                Style::Dim.paint(&format!("Reveal failure detail: bw jobs show {} --detail", j.id), c)
            )?;
        }
        Ok(())
    }
}

/// `Scheduled → Running`, or `→ Scheduled` for the entry that created the job.
pub fn transition_text(from: Option<JobState>, to: JobState) -> String {
    match from {
        Some(f) => format!("{} → {}", f.title(), to.title()),
        None => format!("→ {} (enqueued)", to.title()),
    }
}
