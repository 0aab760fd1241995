//! `bw jobs show`: every field of one job, its delay table with the next attempt, the live
//! handlers of its wire name and its history, failure detail only when revealed (audited).

use std::collections::HashMap;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::cli::json::{JobJson, LogEntryJson};
use crate::cli::output::{
    self, bytes, clock_time, compact_duration, relative, rfc3339, sanitize, sanitize_bytes, sanitize_multiline,
    state_style, write_fields, Cell, Render, Style, Table, Term,
};
use crate::cli::{CliError, Ctx};
use backwave::store::{JobView, LimitStatus, PauseKind};
use backwave::{DetailStatus, Error, FailureDetail, Job, JobState, Millis, Permission, Store, Transition};

use super::{due_text, lease_left, worker_label, ShowArgs};

pub(super) fn show(a: &ShowArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    // One read for everything shown beside the job (issue 23: one snapshot, fewer statements).
    let JobView { job, history, live_handlers: live, failure_detail: detail_on } = store.job_view(&a.id)?;
    let id = job.id;
    // Reveal first, show the job whatever the answer: a refused reveal still prints everything
    // else, and the refusal becomes the exit status.
    let (revealed, refusal) = if a.detail && history.iter().any(|t| matches!(t.detail, DetailStatus::Hidden { .. })) {
        match store.reveal_failure_detail(ctx.actor(), id) {
            Ok(d) => (d.into_iter().collect::<HashMap<_, _>>(), None),
            Err(e @ (Error::PermissionDenied { .. } | Error::FailureDetailOff)) => (HashMap::new(), Some(e)),
            // A reveal writes its audit row: say so, or "read-only" reads as a refusal to read.
            Err(Error::ReadOnly { why }) => {
                let why = format!("{why}; a reveal is recorded in the audit log, which is a write");
                return Err(Error::ReadOnly { why }.into());
            }
            Err(e) => return Err(e.into()),
        }
    } else if a.detail && !detail_on {
        (HashMap::new(), Some(capture_off_refusal(&store, ctx.actor())))
    } else {
        (HashMap::new(), None)
    };
    // A due Scheduled job that a limit holds back says so: the same store function `bw limits`
    // reads, so the two cannot disagree.
    let waits_on = if job.state == JobState::Scheduled && job.due_at <= store.now() {
        store.limits()?.into_iter().find(|l| {
            l.budget == 0
                && match l.kind {
                    PauseKind::Queue => l.name == job.queue,
                    PauseKind::WireName => l.name == job.wire_name,
                }
        })
    } else {
        None
    };
    let workflow = WorkflowPlace::read(&store, id)?;
    let view = JobShow { job, history, live, detail_on, revealed, asked_detail: a.detail, waits_on, workflow };
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
    /// The limit holding this due job back now, if any.
    waits_on: Option<LimitStatus>,
    /// Its workflow, parents and children, if it belongs to a workflow.
    workflow: Option<WorkflowPlace>,
}

/// A job's place in its workflow: `bw jobs show` names its parents and children.
#[derive(Serialize)]
struct WorkflowPlace {
    id: backwave::WorkflowId,
    parents: Vec<backwave::workflow::Edge>,
    children: Vec<backwave::workflow::Edge>,
}

impl WorkflowPlace {
    fn read(store: &backwave::Store, id: backwave::JobId) -> Result<Option<Self>, CliError> {
        let Some(wf) = store.workflow_of(id)? else { return Ok(None) };
        let parents = store
            .parents(id)?
            .into_iter()
            .map(|p| backwave::workflow::Edge {
                job: p.id,
                wire_name: p.wire_name,
                state: p.state,
                needs: p.needs,
                met: p.met,
            })
            .collect();
        Ok(Some(WorkflowPlace { id: wf, parents, children: store.children(id)? }))
    }

    /// `0192f3a1 resize succeeded, 0192f3a2 resize running`.
    fn edges_text(edges: &[backwave::workflow::Edge]) -> String {
        if edges.is_empty() {
            return "none".into();
        }
        edges
            .iter()
            .map(|e| {
                let state = e.state.map_or("deleted", |s| s.as_str());
                format!("{} {} {state}", e.job.short(), sanitize(&e.wire_name))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
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
            /// The trace the job was enqueued in (32 hex digits), or null.
            trace_id: Option<&'a str>,
            /// The succeeded attempt's output: the JSON value itself, (lossy) text when it is
            /// not JSON, null when there is none.
            output: Option<serde_json::Value>,
            /// The latest attempt's last reported progress, or null.
            progress: Option<&'a backwave::Progress>,
        }
        #[derive(Serialize)]
        struct Doc<'a> {
            job: Full<'a>,
            live_handlers: u64,
            failure_detail: &'static str,
            /// The limit this due job waits on now (`bw limits`), or null.
            waits_on_limit: Option<WaitsOn<'a>>,
            /// Its workflow (id, parents, children), or null.
            workflow: Option<&'a WorkflowPlace>,
            history: Vec<LogEntryJson>,
        }
        #[derive(Serialize)]
        struct WaitsOn<'a> {
            kind: PauseKind,
            name: &'a str,
            limit: String,
            running: u64,
        }
        let j = &self.job;
        let payload = json_or_text(&j.payload);
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
                trace_id: j.trace_id(),
                output: j.output.as_deref().map(json_or_text),
                progress: j.progress.as_ref(),
            },
            live_handlers: self.live,
            failure_detail: if self.detail_on { "on" } else { "off" },
            waits_on_limit: self.waits_on.as_ref().map(|l| WaitsOn {
                kind: l.kind,
                name: &l.name,
                limit: l.effective.to_string(),
                running: l.running,
            }),
            workflow: self.workflow.as_ref(),
            history: self.history.iter().map(|t| LogEntryJson::new(t, self.revealed.get(&t.seq))).collect(),
        }
        .serialize(s)
    }
}

/// Stored bytes as JSON when they are JSON, else as (lossy) text.
fn json_or_text(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(b).into_owned()))
}

/// The most lines of an output the text format prints; `--format json` has it whole.
const OUTPUT_LINES: usize = 20;

/// The output as the text format shows it: pretty JSON (or the text as stored), each line
/// escaped and cut to the terminal, at most [`OUTPUT_LINES`] lines, with a note when cut.
fn write_output(out: &mut dyn Write, term: &Term, output: &[u8]) -> io::Result<()> {
    let text = match serde_json::from_slice::<serde::de::IgnoredAny>(output) {
        Ok(_) => pretty_json(&String::from_utf8_lossy(output)),
        Err(_) => String::from_utf8_lossy(output).into_owned(),
    };
    writeln!(out, "Output ({}):", bytes(output.len()))?;
    let lines: Vec<&str> = text.lines().collect();
    let max = term.width.map_or(usize::MAX, |w| w.saturating_sub(2).max(20));
    let mut cut = false;
    for line in lines.iter().take(OUTPUT_LINES) {
        let line = sanitize(line);
        let shown = output::truncate(&line, max);
        cut |= shown.len() != line.len();
        writeln!(out, "  {shown}")?;
    }
    if lines.len() > OUTPUT_LINES || cut {
        let more = lines.len().saturating_sub(OUTPUT_LINES);
        let what =
            if more > 0 { format!("{more} more line{}", if more == 1 { "" } else { "s" }) } else { "cut".into() };
        writeln!(
            out,
            "{}",
            Style::Dim.paint(&format!("  ({what}: --format json shows the whole output)"), term.color)
        )?;
    }
    Ok(())
}

/// Valid JSON text indented two spaces a level, its keys in the order the handler wrote them
/// (a `serde_json::Value` would sort them).
fn pretty_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() * 2);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                // An empty object or array stays on its line.
                while chars.peek().is_some_and(|n| n.is_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.push(chars.next().unwrap_or(' '));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// Why `--detail` is refused on a store that captures no failure detail: the missing permission
/// first, as every refusal orders them (tests/cli/refusals.rs), so that only someone who may
/// reveal learns the setting; `jobs show` and `log tail` both ask this.
pub(crate) fn capture_off_refusal(store: &Store, actor: &str) -> Error {
    store.require(actor, Permission::ViewFailureDetail).err().unwrap_or(Error::FailureDetailOff)
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
        f.push(("Priority", crate::text::priority_text(j.priority)));
        if !j.labels.is_empty() {
            let l: Vec<String> = j.labels.iter().map(|(k, v)| format!("{}={}", sanitize(k), sanitize(v))).collect();
            f.push(("Labels", l.join(" ")));
        }
        let payload = sanitize_bytes(&j.payload);
        f.push(("Payload", format!("{}  ({})", output::truncate(&payload, 200), bytes(j.payload.len()))));
        f.push(("Created", format!("{} ({})", rfc3339(j.created_at), relative(now, j.created_at))));
        if let Some(trace) = j.trace_id() {
            f.push(("Trace", trace.to_string()));
        }
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
        if let Some(l) = &self.waits_on {
            f.push((
                "Waits on",
                format!(
                    "the limit on {} '{}' ({}, {} running): it stays Scheduled and spends no attempt",
                    l.kind,
                    sanitize(&l.name),
                    l.effective,
                    l.running
                ),
            ));
        }
        if let Some(w) = &self.workflow {
            f.push(("Workflow", format!("{} (bw workflow show {})", w.id, w.id)));
            f.push(("Parents", WorkflowPlace::edges_text(&w.parents)));
            f.push(("Children", WorkflowPlace::edges_text(&w.children)));
        }
        if let Some(p) = &j.progress {
            let shown = sanitize(&p.to_string()).into_owned();
            f.push(match j.state {
                JobState::Running => ("Progress", shown),
                _ => ("Progress", format!("{shown} (as attempt {} last reported it)", j.attempt)),
            });
        }
        if let Some(by) = &j.cancel_requested_by {
            f.push(("Cancel", format!("requested by {}", sanitize(by))));
        }
        if let Some(cause) = &j.terminal_cause {
            f.push(("Cause", sanitize(cause).into_owned()));
        }
        if let Some(q) = j.quarantine_reason {
            let why = match q {
                backwave::QuarantineReason::NoHandler => {
                    "no-handler: the claiming worker had no handler for this wire name"
                }
                backwave::QuarantineReason::UndecodablePayload => {
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

        if let Some(o) = &j.output {
            writeln!(out)?;
            write_output(out, term, o)?;
        }

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
                // The command as typed, `--db` included (found at 3 a.m.: the hint dropped it, and
                // pasted it opened ./backwave.db and suggested `bw init`).
                Style::Dim.paint(&format!("Reveal failure detail: {}", super::list::this_command_with("--detail")), c)
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

#[cfg(test)]
mod tests {
    use super::pretty_json;

    #[test]
    fn pretty_json_keeps_the_key_order_and_the_strings_as_written() {
        let json = r#"{"z":1,"a":[true,null,{}],"s":"a,b:{\"c\"}","e":[ ]}"#;
        assert_eq!(
            pretty_json(json),
            "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    {}\n  ],\n  \"s\": \"a,b:{\\\"c\\\"}\",\n  \"e\": []\n}"
        );
        assert_eq!(pretty_json("42"), "42");
    }
}
