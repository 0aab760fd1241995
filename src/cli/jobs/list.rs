//! `bw jobs list`: terminal jobs newest first, scheduled ones next-due first, with columns that
//! follow the states listed and causes cut to the terminal's width, paged with a cursor.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use crate::cli::json::JobJson;
use crate::cli::output::{relative, sanitize, shell_quote, state_style, thousands, Cell, Render, Style, Table, Term};
use crate::cli::{CliError, Ctx};
use crate::text::attempts;
use backwave::store::{Cursor, JobPage, StoreTarget};
use backwave::{Job, JobState};

use super::{due_text, lease_left, worker_label, FilterArgs, ListArgs};

pub(super) fn list(a: &ListArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
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
        // A page past u64's range is past every job: the page is empty, as any page past the last.
        None => store.list_jobs(&filter, limit, (a.page.unwrap_or(1) - 1).saturating_mul(a.limit))?,
    };
    let empty = page.total == 0;
    let view = JobList { page, filter: a.filter.clone(), limit: a.limit, page_no: a.page, after: a.after.is_some() };
    printer.print(&view)?;
    if empty {
        a.filter.warn_unknown_names(&store)?;
    }
    Ok(ExitCode::SUCCESS)
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
        // A PRI column only when a job on the page has a priority other than the default, which
        // most stores never set: the column would be all zeros.
        let show_priority = jobs.iter().any(|j| j.priority != backwave::PRIORITY_FIRST);
        let flex = if show_priority {
            headers.insert(4, "PRI");
            flex.map(|f| f + 1)
        } else {
            flex
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
            let mut row: Vec<Cell> =
                vec![j.id.short().into(), state_cell(j), sanitize(&j.wire_name).into(), sanitize(&j.queue).into()];
            if show_priority {
                row.push(j.priority.to_string().into());
            }
            row.push(attempts(j).into());
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
                this_command_with(&format!("--after {next}"))
            } else {
                this_command_with(&format!("--page {}", self.page_no.unwrap_or(1) + 1))
            };
            footer.push_str(&format!(" Next page: {cmd}"));
        }
        writeln!(out, "{}", Style::Dim.paint(&footer, term.color))
    }
}

/// This very command line (its `--db` and every other word, a password as `***`), without its
/// paging flags, and `extra` at its end: a hint a person can paste as it is.
pub(crate) fn this_command_with(extra: &str) -> String {
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
        words.push(sanitize(&shell_quote(&redacted(&a))).into_owned());
    }
    words.push(extra.to_string());
    words.join(" ")
}

/// A word of the command line as the hint may show it: a PostgreSQL URL (`--db URL` or
/// `--db=URL`) with its password as `***`, like every message that names a store.
fn redacted(arg: &str) -> String {
    if let Some((flag, value)) = arg.split_once('=').filter(|(flag, _)| flag.starts_with("--")) {
        return format!("{flag}={}", redacted(value));
    }
    match StoreTarget::from(arg) {
        StoreTarget::Postgres(url) => url.to_string(),
        StoreTarget::File(_) => arg.to_string(),
    }
}
