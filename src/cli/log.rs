//! bw log tail: the last N transition log entries, oldest first, then with `--follow` each new
//! one as it commits. Following polls by log cursor (`log_after`), the pair (xid, seq), not by
//! seq alone: PostgreSQL hands out seq before commit, so a later seq can commit first, and a
//! seq cursor would skip the earlier one; (xid, seq) delivered below the oldest running
//! transaction cannot (on SQLite xid is 0). No entry is missed or printed twice; Ctrl-C ends it
//! with status 0, and so does a reader that went away (`| head -2`), noticed even while the
//! store is quiet. A store that stops answering (a server restart, a lock held past the busy
//! timeout) is tried again with backoff, said on stderr, and followed on from the cursor. The
//! table has a header, each job's wire name, and dates once the entries shown span more than
//! today.

use std::collections::HashMap;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::jobs::{capture_off_refusal, detail_marker, transition_text, write_detail};
use super::json::LogEntryJson;
use super::output::{sanitize, Printer, Render, Style, Term};
use super::{parse_state, CliError, Ctx};
use backwave::store::LogFilter;
use backwave::{DetailStatus, Error, FailureDetail, JobId, JobState, Store, Transition};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The last entries of the transition log, oldest first; `--follow` keeps printing.
    Tail(TailArgs),
}

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// How many entries to show first.
    #[arg(short = 'n', long = "lines", default_value_t = 20, value_name = "N")]
    pub n: usize,
    /// Keep printing new entries as they commit, until Ctrl-C.
    #[arg(short, long)]
    pub follow: bool,
    /// Only this job's entries (id or unique prefix).
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// Only entries that moved a job into this state (repeat or comma-separate).
    #[arg(long = "state", value_name = "STATE", value_parser = parse_state, value_delimiter = ',')]
    pub states: Vec<JobState>,
    /// Reveal failure detail (needs view-failure-detail; each reveal is audited).
    #[arg(long)]
    pub detail: bool,
}

/// How often `--follow` asks for new entries: well inside the 250 ms promise.
const POLL: Duration = Duration::from_millis(100);
/// Entries read per poll; a burst larger than this is drained over consecutive polls.
const BATCH: usize = 1_000;

pub fn run(cmd: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let Command::Tail(a) = cmd;
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let job = a.job.as_deref().map(|t| store.resolve_id(t)).transpose()?;
    let filter = LogFilter { job, to_states: a.states.clone() };
    let mut reveal = Revealer::new(&store, ctx.actor(), a.detail)?;
    // Read the high-water mark before the tail: whatever commits in between is either in the
    // tail or after the mark, never lost.
    let mark = store.log_end()?;
    let entries = store.log_tail(&filter, a.n)?;
    let mut last = entries.last().map_or(mark, |e| e.cursor().max(mark));
    let mut layout = Layout::new(&store, &entries)?;
    let view = LogView { entries: reveal.fill(entries)?, layout: std::cell::RefCell::new(layout.clone()) };
    if !a.follow {
        printer.print(&view)?;
        return reveal.finish();
    }

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let stdout = io::stdout();
    let mut out = io::LineWriter::new(stdout.lock());
    let mut emit = |out: &mut dyn Write, entries: &[(Transition, Option<FailureDetail>)], header: bool| {
        match &printer {
            // One JSON object per line: a stream cannot be one document.
            Printer::Json => {
                for (t, d) in entries {
                    Printer::print_json_line(out, &LogEntryJson::new(t, d.as_ref()))?;
                }
                Ok(())
            }
            Printer::Table(term) => {
                if header {
                    layout.header(out, term)?;
                }
                write_entries(out, entries, term, &mut layout)
            }
        }
    };
    emit(&mut out, &view.entries, true)?;
    let mut lost: Option<Lost> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(lost.as_ref().map_or(POLL, |l| l.wait));
        // A reader that went away (`| head -2`) ends the follow even when nothing new comes to
        // be written, which is when a write would have told us.
        if reader_gone() {
            return reveal.finish();
        }
        // Each batch is printed before the cursor moves past it, so a batch the store failed to
        // read (or to reveal) is read again, whole, once it answers: nothing lost or repeated.
        let polled = (|| -> Result<(), CliError> {
            loop {
                let batch = store.log_after(&filter, last, BATCH)?;
                let Some(cursor) = batch.last().map(Transition::cursor) else { return Ok(()) };
                let full = batch.len() == BATCH;
                emit(&mut out, &reveal.fill(batch)?, false)?;
                last = cursor;
                if !full || stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
        })();
        match polled {
            Ok(()) => {
                if let Some(l) = lost.take() {
                    eprintln!(
                        "bw log tail: the store answers again after {:.1}s; following on from the last entry shown",
                        l.since.elapsed().as_secs_f64()
                    );
                }
            }
            Err(CliError::Store(e)) if e.is_transient() => match &mut lost {
                None => {
                    eprintln!(
                        "bw log tail: lost the store: {}; reconnecting (waiting up to {}s between tries)",
                        sanitize(&e.to_string()),
                        RECONNECT_MAX.as_secs()
                    );
                    lost = Some(Lost { since: Instant::now(), wait: RECONNECT_FIRST });
                }
                Some(l) => l.wait = (l.wait * 2).min(RECONNECT_MAX),
            },
            Err(e) => return Err(e),
        }
    }
    out.flush()?;
    reveal.finish()
}

/// The first wait after the store stops answering, doubled on each failed try up to the last.
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// `--follow` while the store does not answer: since when, and the wait before the next try.
struct Lost {
    since: Instant,
    wait: Duration,
}

/// Reveals failure detail once per job when `--detail` was given, remembering a refusal so the
/// entries still print (marked hidden) and the refusal becomes the exit status.
struct Revealer<'a> {
    store: &'a Store,
    actor: &'a str,
    on: bool,
    cache: HashMap<JobId, HashMap<i64, FailureDetail>>,
    refusal: Option<Error>,
}

impl<'a> Revealer<'a> {
    fn new(store: &'a Store, actor: &'a str, on: bool) -> Result<Self, CliError> {
        let refusal = match on && !store.failure_detail_enabled()? {
            true => Some(capture_off_refusal(store, actor)),
            false => None,
        };
        Ok(Revealer { store, actor, on, cache: HashMap::new(), refusal })
    }

    fn fill(&mut self, entries: Vec<Transition>) -> Result<Vec<(Transition, Option<FailureDetail>)>, CliError> {
        let mut out = Vec::with_capacity(entries.len());
        for t in entries {
            let mut detail = None;
            if self.on && self.refusal.is_none() && matches!(t.detail, DetailStatus::Hidden { .. }) {
                if !self.cache.get(&t.job_id).is_some_and(|m| m.contains_key(&t.seq)) {
                    match self.store.reveal_failure_detail(self.actor, t.job_id) {
                        Ok(d) => {
                            self.cache.insert(t.job_id, d.into_iter().collect());
                        }
                        Err(e @ (Error::PermissionDenied { .. } | Error::FailureDetailOff)) => self.refusal = Some(e),
                        Err(e) => return Err(e.into()),
                    }
                }
                detail = self.cache.get(&t.job_id).and_then(|m| m.get(&t.seq)).cloned();
            }
            out.push((t, detail));
        }
        Ok(out)
    }

    fn finish(self) -> Result<ExitCode, CliError> {
        match self.refusal {
            Some(e) => Err(e.into()),
            None => Ok(ExitCode::SUCCESS),
        }
    }
}

/// Whether stdout is a pipe whose reader has closed it: `poll` reports an error condition on
/// the write end of such a pipe (a terminal or a file never does).
fn reader_gone() -> bool {
    use nix::poll::{poll, PollFd, PollFlags};
    use std::os::fd::AsFd;
    let stdout = io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, 0u16), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// How log lines are laid out: dated or not, the wire-name column's width, and the wire name
/// of each job seen (the log holds job ids only; each job is read once).
#[derive(Clone)]
struct Layout<'a> {
    store: &'a Store,
    /// Dates in the TIME column: the entries span more than one day, or are not of today.
    dated: bool,
    /// The day (UTC) of the last entry printed.
    last_day: Option<i64>,
    wire_width: usize,
    wire_names: HashMap<JobId, String>,
}

const DAY_MS: i64 = 86_400_000;

impl<'a> Layout<'a> {
    fn new(store: &'a Store, first: &[Transition]) -> Result<Self, CliError> {
        let today = store.now().div_euclid(DAY_MS);
        let dated = first.iter().any(|t| t.at.div_euclid(DAY_MS) != today);
        let mut l = Layout { store, dated, last_day: None, wire_width: "WIRE NAME".len(), wire_names: HashMap::new() };
        l.learn(first.iter().map(|t| t.job_id))?;
        for t in first {
            let w = crate::text::width(&sanitize(l.wire_name(t.job_id)));
            l.wire_width = l.wire_width.max(w.min(24));
        }
        Ok(l)
    }

    /// Read the wire names of the `jobs` not known yet, in one statement (a job no longer in the
    /// store shows an empty name).
    fn learn(&mut self, jobs: impl IntoIterator<Item = JobId>) -> Result<(), CliError> {
        let mut unknown: Vec<JobId> = jobs.into_iter().filter(|id| !self.wire_names.contains_key(id)).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort_unstable();
        unknown.dedup();
        if self.wire_names.len() + unknown.len() > 50_000 {
            // A long follow meets many jobs: forget them rather than grow without end.
            self.wire_names.clear();
        }
        let mut found = self.store.wire_names_of(&unknown)?;
        for id in unknown {
            self.wire_names.insert(id, found.remove(&id).unwrap_or_default());
        }
        Ok(())
    }

    /// The wire name of `job`, as [`Layout::learn`] read it.
    fn wire_name(&self, job: JobId) -> &str {
        self.wire_names.get(&job).map_or("", String::as_str)
    }

    /// Append the TIME column of an entry at `at` to `line`: the clock time (UTC), dated once
    /// the entries span days.
    fn push_time(&mut self, line: &mut String, at: backwave::Millis) {
        let day = at.div_euclid(DAY_MS);
        // A follow that crosses midnight dates every line from then on.
        if self.last_day.is_some_and(|d| d != day) {
            self.dated = true;
        }
        self.last_day = Some(day);
        // `2026-11-30T14:02:12.301Z`: the date is its first 10 characters, the clock 11..23.
        let full = crate::text::rfc3339(at);
        if self.dated {
            line.push_str(full.get(..10).unwrap_or(&full));
            line.push(' ');
        }
        line.push_str(full.get(11..23).unwrap_or(&full));
    }

    fn time_width(&self) -> usize {
        if self.dated {
            23
        } else {
            12
        }
    }

    fn header(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let line = format!(
            "{:<tw$}  {:<8}  {:<ww$}  {:<27}  {:<7}  BY / WHY",
            "TIME",
            "JOB",
            "WIRE NAME",
            "TRANSITION",
            "ATTEMPT",
            tw = self.time_width(),
            ww = self.wire_width
        );
        let line = match term.width {
            Some(w) => super::output::truncate(&line, w).into_owned(),
            None => line,
        };
        writeln!(out, "{}", Style::Bold.paint(&line, term.color))
    }
}

struct LogView<'a> {
    entries: Vec<(Transition, Option<FailureDetail>)>,
    /// Drawing only reads the entries; the layout's cache of wire names fills as it goes.
    layout: std::cell::RefCell<Layout<'a>>,
}

impl Serialize for LogView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc {
            entries: Vec<LogEntryJson>,
        }
        Doc { entries: self.entries.iter().map(|(t, d)| LogEntryJson::new(t, d.as_ref())).collect() }.serialize(s)
    }
}

impl Render for LogView<'_> {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.entries.is_empty() {
            return writeln!(out, "No log entries.");
        }
        let mut layout = self.layout.borrow_mut();
        layout.header(out, term)?;
        write_entries(out, &self.entries, term, &mut layout)
    }
}

/// One line per entry under the header:
/// `14:02:12.512  9c2e01f4a7b3  send-email  Running → Scheduled  2  worker w-1  gateway timeout`
fn write_entries(
    out: &mut dyn Write,
    entries: &[(Transition, Option<FailureDetail>)],
    term: &Term,
    layout: &mut Layout<'_>,
) -> io::Result<()> {
    use std::fmt::Write as _;
    layout.learn(entries.iter().map(|(t, _)| t.job_id)).map_err(io::Error::other)?;
    // One buffer for every line (`bw log tail` prints hundreds, `--follow` without end).
    let mut line = String::with_capacity(160);
    for (t, detail) in entries {
        line.clear();
        layout.push_time(&mut line, t.at);
        let wire = sanitize(layout.wire_name(t.job_id));
        // Writing to a String cannot fail.
        let _ = write!(
            line,
            "  {:<8}  {:<ww$}  {:<27}  {:<7}",
            t.job_id.short(),
            super::output::truncate(&wire, layout.wire_width),
            transition_text(t.from, t.to),
            t.attempt,
            ww = layout.wire_width
        );
        if let Some(a) = &t.actor {
            line.push_str("  by ");
            line.push_str(&sanitize(a));
        } else if let Some(w) = &t.worker_id {
            line.push_str("  worker ");
            line.push_str(&sanitize(w));
        }
        if let Some(r) = &t.reason {
            line.push_str("  ");
            line.push_str(&sanitize(r));
        }
        if detail.is_none() {
            let marker = detail_marker(&t.detail);
            if !marker.is_empty() {
                line.push_str("  ");
                line.push_str(&marker);
            }
        }
        let trimmed = line.trim_end();
        let shown = match term.width {
            Some(w) => super::output::truncate(trimmed, w),
            None => std::borrow::Cow::Borrowed(trimmed),
        };
        let style = match t.to {
            JobState::DeadLettered => Style::Red,
            JobState::Quarantined => Style::Yellow,
            _ => Style::Plain,
        };
        writeln!(out, "{}", style.painted(&shown, term.color))?;
        if let Some(d) = detail {
            write_detail(out, "  failure detail:", d)?;
        }
    }
    Ok(())
}
