//! bw requeue: give Dead-Lettered and Quarantined jobs a fresh budget, by id or in bulk by
//! filter. Bulk runs are planned first (exact counts, including the jobs that would only
//! quarantine again because no live worker handles their wire name), confirmed, then done in
//! the store's short batches with progress on stderr.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::jobs::FilterArgs;
use super::json::IdResult;
use super::output::{sanitize, thousands, Cell, Render, Style, Table, Term};
use super::progress::Progress;
use super::{eprint_quiet, exit, CliError, Ctx};
use crate::store::{RequeueCheck, RequeuePlan, RequeueResult};
use crate::{Error, JobId, JobState, Store};

/// Requeue jobs with a fresh attempt budget: by id, or every match of `--state` and filters.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job ids or unique id prefixes. Leave out to requeue by filter.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Count what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Also requeue jobs that no live worker handles (they will quarantine again).
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if !a.ids.is_empty() && !a.filter.is_empty() {
        return Err(CliError::Usage(
            "give job ids or filters (--state …), not both: filters select the jobs themselves".into(),
        ));
    }
    if a.ids.is_empty() {
        return bulk(a, ctx);
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let resolved = resolve_all(&store, &a.ids)?;
    let found: Vec<JobId> = resolved.iter().filter_map(|(_, id)| *id).collect();
    let mut results: Vec<IdResult> = Vec::new();
    // The by-id plan, read before acting: its warnings name what the requeue will meet.
    let checks = store.check_requeue(&found)?;
    if a.dry_run {
        let mut check = checks.iter().zip(&found);
        for (text, id) in &resolved {
            if id.is_none() {
                results.push(not_found(text));
                continue;
            }
            let (c, id) = check.next().expect("one check per found id");
            results.push(match c {
                RequeueCheck::NotFound => not_found(text),
                RequeueCheck::WouldRequeue { state, .. } => IdResult {
                    id: id.to_string(),
                    result: "WouldRequeue",
                    state: Some(state.as_str()),
                    warning: requarantine_warning(c),
                },
                RequeueCheck::NotRequeueable { state } => IdResult {
                    id: id.to_string(),
                    result: "NotRequeueable",
                    state: Some(state.as_str()),
                    warning: None,
                },
            });
        }
        printer.print(&IdResults { results, verb: "requeued" })?;
        return Ok(ExitCode::SUCCESS);
    }
    let outcomes = store.requeue(&ctx.actor, &found)?;
    let mut outcome = outcomes.iter().zip(&checks);
    for (text, id) in &resolved {
        let Some(id) = id else {
            results.push(not_found(text));
            continue;
        };
        let (r, check) = outcome.next().expect("one outcome per found id");
        results.push(match r {
            RequeueResult::Requeued { .. } => IdResult {
                id: id.to_string(),
                result: "Requeued",
                state: Some(JobState::Scheduled.as_str()),
                warning: requarantine_warning(check),
            },
            RequeueResult::NotRequeueable { state } => {
                IdResult { id: id.to_string(), result: "NotRequeueable", state: Some(state.as_str()), warning: None }
            }
            RequeueResult::NotFound => not_found(text),
        });
    }
    finish(ctx, IdResults { results, verb: "requeued" })
}

fn requarantine_warning(check: &RequeueCheck) -> Option<String> {
    match check {
        RequeueCheck::WouldRequeue { wire_name, requarantine: true, .. } => {
            Some(format!("no live worker handles '{wire_name}'; it will quarantine again"))
        }
        _ => None,
    }
}

pub(super) fn not_found(text: &str) -> IdResult {
    IdResult { id: text.to_string(), result: "NotFound", state: None, warning: None }
}

/// Resolve every id before acting on any: a malformed or ambiguous one stops the whole
/// command (exit 2) so that nothing is half-done; an unknown one is reported `NotFound`.
/// A job named twice (a pasted list, a prefix and its full id) is acted on and reported once:
/// its second mention came back refused ("NotRequeueable (scheduled)") and made the command
/// exit 1 after it had done everything asked.
pub(super) fn resolve_all(store: &Store, texts: &[String]) -> Result<Vec<(String, Option<JobId>)>, CliError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(texts.len());
    for t in texts {
        match store.resolve_id(t) {
            Ok(id) if !seen.insert(id) => {}
            Ok(id) => out.push((t.clone(), Some(id))),
            Err(Error::JobNotFound(_)) => out.push((t.clone(), None)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// Print per-id results; exit 1, with a count on stderr, when any id was not acted on.
pub(super) fn finish(ctx: &Ctx, view: IdResults) -> Result<ExitCode, CliError> {
    ctx.printer()?.print(&view)?;
    let refused = view.results.iter().filter(|r| !r.ok()).count();
    if refused == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let n = view.results.len();
    let (one, verb) = if refused == 1 { ("id was", view.verb) } else { ("ids were", view.verb) };
    eprint_quiet(format_args!("bw: {refused} of {n} {one} not {verb}\n"));
    Ok(ExitCode::from(exit::REFUSED))
}

/// Per-id results of `requeue` or `cancel`.
pub(super) struct IdResults {
    pub results: Vec<IdResult>,
    pub verb: &'static str,
}

impl Serialize for IdResults {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            results: &'a [IdResult],
        }
        Doc { results: &self.results }.serialize(s)
    }
}

impl Render for IdResults {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let mut t = Table::new(&["ID", "RESULT", "NOTE"]).flex(2);
        for r in &self.results {
            let (text, style) = match (r.result, r.state) {
                ("NotRequeueable" | "NotCancellable" | "NotScheduled", Some(s)) => {
                    (format!("{} ({s})", r.result), Style::Yellow)
                }
                ("NotFound", _) => (r.result.to_string(), Style::Red),
                (res, _) => (res.to_string(), Style::Green),
            };
            let note =
                r.warning.as_deref().map(|w| format!("warning: {}", sanitize(w))).unwrap_or_else(|| match r.result {
                    "Requeued" => "budget reset, due now".into(),
                    "WouldRequeue" => "would get a fresh budget, due now".into(),
                    "Due" => "due now; attempt and budget unchanged".into(),
                    "WouldRunNow" => "would be due now; attempt and budget unchanged".into(),
                    "WouldCancel" => "scheduled: would end Cancelled at once".into(),
                    "WouldRequestCancel" => "running: its handler would be asked to stop".into(),
                    "CancelRequested" => {
                        "running: its handler is asked to stop; Cancelled when it does or its lease lapses".into()
                    }
                    _ => String::new(),
                });
            t.row(vec![sanitize(&r.id).into_owned().into(), Cell::styled(text, style), note.into()]);
        }
        // Header-less like the design: one line per id reads better for a handful of ids.
        let mut buf = Vec::new();
        t.write(&mut buf, term)?;
        let text = String::from_utf8_lossy(&buf);
        for line in text.lines().skip(1) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

// ---- bulk ----------------------------------------------------------------------------------

fn bulk(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.filter.states.is_empty() {
        return Err(CliError::Usage(
            "give job ids, or --state dead-lettered|quarantined (with any list filters) to requeue in bulk".into(),
        ));
    }
    if let Some(bad) = a.filter.states.iter().find(|s| !s.is_requeueable()) {
        return Err(CliError::Usage(format!(
            "--state '{}' cannot be requeued: only dead-lettered and quarantined jobs can",
            bad.as_str()
        )));
    }
    let store = ctx.open()?;
    let printer = ctx.printer()?;
    let filter = a.filter.to_filter(store.now());
    let plan = store.plan_requeue(&filter)?;
    let what = a.filter.describe("jobs");
    if a.dry_run {
        printer.print(&PlanView { plan, what, dry_run: true, force: a.force })?;
        return Ok(ExitCode::SUCCESS);
    }
    if plan.matching == 0 {
        printer.print(&BulkDone { requeued: 0, skipped_requarantine: 0, unhandled: String::new(), what })?;
        return Ok(ExitCode::SUCCESS);
    }
    let todo = if a.force { plan.matching } else { plan.would_requeue };
    if todo == 0 {
        return Err(CliError::Refused(format!(
            "all {} matching {what} would quarantine again: no live worker handles {}. Deploy a handler, or pass \
             --force to requeue them anyway",
            thousands(plan.matching),
            unhandled_names(&plan)
        )));
    }
    let mut question = format!("Requeue {} {what} with a fresh attempt budget?", thousands(todo));
    if !a.force && plan.would_requarantine > 0 {
        question.push_str(&format!(
            " ({} more would quarantine again and are skipped; --force includes them)",
            thousands(plan.would_requarantine)
        ));
    }
    if !ctx.confirm_or_refuse(a.yes, &question, "requeue in bulk")? {
        eprint_quiet(format_args!("bw: nothing requeued\n"));
        return Ok(ExitCode::from(exit::REFUSED));
    }
    let mut progress = Progress::new("requeued");
    let requeued = store.requeue_planned(&ctx.actor, &filter, a.force, |p| progress.update(p.done, p.total))?;
    drop(progress);
    let skipped = if a.force { 0 } else { plan.would_requarantine };
    let view = BulkDone { requeued, skipped_requarantine: skipped, unhandled: unhandled_names(&plan), what };
    printer.print(&view)?;
    Ok(if skipped > 0 { ExitCode::from(exit::REFUSED) } else { ExitCode::SUCCESS })
}

fn unhandled_names(plan: &RequeuePlan) -> String {
    let names: Vec<String> = plan.unhandled.iter().take(5).map(|w| format!("'{}'", sanitize(&w.wire_name))).collect();
    let more = plan.unhandled.len().saturating_sub(5);
    if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

struct PlanView {
    plan: RequeuePlan,
    what: String,
    dry_run: bool,
    force: bool,
}

impl Serialize for PlanView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            dry_run: bool,
            #[serde(flatten)]
            plan: &'a RequeuePlan,
        }
        Doc { dry_run: self.dry_run, plan: &self.plan }.serialize(s)
    }
}

impl Render for PlanView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let p = &self.plan;
        if p.matching == 0 {
            return writeln!(out, "No {} to requeue.", self.what);
        }
        writeln!(out, "{} {} match.", thousands(p.matching), self.what)?;
        let w = thousands(p.matching).len();
        writeln!(out, "  {:>w$} would be requeued with a fresh attempt budget, due now", thousands(p.would_requeue))?;
        writeln!(
            out,
            "  {:>w$} would quarantine again: no live worker handles their wire name{}",
            thousands(p.would_requarantine),
            if p.would_requarantine > 0 && !self.force { " (skipped unless --force)" } else { "" }
        )?;
        if p.undecodable > 0 {
            writeln!(
                out,
                "  {:>w$} were quarantined because their payload did not decode: requeued, they quarantine again \
                 unless the handler now accepts it",
                thousands(p.undecodable)
            )?;
        }
        if !p.unhandled.is_empty() {
            let mut t = Table::new(&["    WIRE NAME (no live worker)", "JOBS"]);
            for u in &p.unhandled {
                t.row(vec![format!("    {}", sanitize(&u.wire_name)).into(), thousands(u.count).into()]);
            }
            t.write(out, term)?;
        }
        if self.dry_run {
            writeln!(
                out,
                "Run again without --dry-run to requeue them (you will be asked to confirm, or pass --yes)."
            )?;
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct BulkDone {
    requeued: u64,
    skipped_requarantine: u64,
    #[serde(skip)]
    unhandled: String,
    #[serde(skip)]
    what: String,
}

impl Render for BulkDone {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        if self.requeued == 0 && self.skipped_requarantine == 0 {
            return writeln!(out, "No {} to requeue.", self.what);
        }
        writeln!(out, "Requeued {} {}.", thousands(self.requeued), self.what)?;
        if self.skipped_requarantine > 0 {
            writeln!(
                out,
                "Skipped {} that would quarantine again (no live worker handles {}): pass --force to requeue them.",
                thousands(self.skipped_requarantine),
                self.unhandled
            )?;
        }
        Ok(())
    }
}
