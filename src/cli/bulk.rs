//! What every operator verb over jobs shares (`requeue`, `cancel`, `run-now`): the selection
//! flags ([`Selection`]), resolving ids before acting on any, one result per id with the exit
//! status decided once ([`finish`]), and the plan a bulk run prints before it acts (`--dry-run`, or before the confirmation): one
//! JSON shape, `{"dry_run": …, <the store's plan>}`, and one opening and closing line for every
//! verb, so `requeue`, `cancel` and `run-now` read alike. What each plan says in between is the
//! verb's own (`impl Render for PlanView<ItsPlan, _>` in its file).

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::jobs::{Described, FilterArgs};
use super::json::{IdResult, Outcome};
use super::output::{sanitize, thousands, Cell, Render, Style, Table, Term};
use super::{exit, CliError, Ctx};
use backwave::{Error, JobId, Store};

// Which jobs a bulk verb acts on, and how: the flags `requeue`, `cancel` and `run-now` share.
// (A plain comment: clap would take a doc comment here for the description of each command
// that flattens these flags.)
#[derive(Debug, clap::Args)]
pub struct Selection {
    /// Job ids or unique id prefixes. Leave out to select the jobs by filter.
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
}

/// A store plan (`RequeuePlan`, `CancelPlan`, `RunNowPlan`) with what the verb needs to print it.
pub struct PlanView<P, X = ()> {
    pub plan: P,
    /// The filter in words: `dead-lettered jobs in queue "low"`.
    pub what: Described,
    pub dry_run: bool,
    /// Whatever else the verb prints (requeue: `--force`; run-now: the time "now" means).
    pub extra: X,
}

impl<P: Serialize, X> Serialize for PlanView<P, X> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a, P> {
            dry_run: bool,
            #[serde(flatten)]
            plan: &'a P,
        }
        Doc { dry_run: self.dry_run, plan: &self.plan }.serialize(s)
    }
}

impl<P, X> PlanView<P, X> {
    /// `281 dead-lettered jobs match.`, or `No … to VERB.` when nothing does. Returns the width
    /// to right-align the plan's counts to, or None when nothing matched (nothing more to say).
    pub fn opening(&self, out: &mut dyn Write, matching: u64, verb: &str) -> io::Result<Option<usize>> {
        if matching == 0 {
            writeln!(out, "No {} to {verb}.", self.what)?;
            return Ok(None);
        }
        writeln!(out, "{} {}.", self.what.count(matching), if matching == 1 { "matches" } else { "match" })?;
        Ok(Some(thousands(matching).len()))
    }

    /// On a dry run with something to do: how to do it for real.
    pub fn closing(&self, out: &mut dyn Write, something_to_do: bool, to_do_it: &str) -> io::Result<()> {
        if self.dry_run && something_to_do {
            writeln!(out, "Run again without --dry-run to {to_do_it} (you will be asked to confirm, or pass --yes).")?;
        }
        Ok(())
    }
}

/// After a bulk action's result line: the planned jobs it left because they changed meanwhile,
/// and the jobs it left because they arrived after the plan (the operator confirmed the plan's
/// set, not whatever matches later), with how to act on those.
pub fn after_plan(out: &mut dyn Write, changed_meanwhile: u64, arrived: u64, to_do: &str) -> io::Result<()> {
    let jobs = |n: u64| format!("{} job{}", thousands(n), if n == 1 { "" } else { "s" });
    if changed_meanwhile > 0 {
        writeln!(
            out,
            "{} of the plan had changed meanwhile (a worker or another operator got there first): left as they are.",
            jobs(changed_meanwhile)
        )?;
    }
    if arrived > 0 {
        writeln!(out, "{} arrived after the plan: left alone. Run the command again to {to_do}.", jobs(arrived))?;
    }
    Ok(())
}

/// Ids or filters, never both: filters select the jobs themselves. `example` names a filter
/// flag that fits the verb (`--state …`).
pub fn ids_or_filters(select: &Selection, example: &str) -> Result<(), CliError> {
    if !select.ids.is_empty() && !select.filter.is_empty() {
        return Err(CliError::Usage(format!(
            "give job ids or filters ({example}), not both: filters select the jobs themselves"
        )));
    }
    Ok(())
}

/// One result per id in the order the operator gave them: an id that resolved takes the
/// store's next outcome (the store answers for the resolved ids, in order); one that did not
/// is `NotFound`.
pub fn per_id<O>(
    resolved: &[(String, Option<JobId>)],
    outcomes: impl IntoIterator<Item = O>,
    mut result: impl FnMut(&str, JobId, O) -> IdResult,
) -> Vec<IdResult> {
    let mut outcomes = outcomes.into_iter();
    resolved
        .iter()
        .map(|(text, id)| match id {
            Some(id) => result(text, *id, outcomes.next().expect("one outcome per resolved id")),
            None => not_found(text),
        })
        .collect()
}

pub fn not_found(text: &str) -> IdResult {
    IdResult { id: text.to_string(), result: Outcome::NotFound, state: None, warning: None }
}

/// Refuse a malformed id (exit 2) before the store is asked anything: what the command line
/// alone shows to be wrong comes before the actor's permission, which comes before any job is
/// looked at.
pub fn check_id_texts(texts: &[String]) -> Result<(), CliError> {
    for t in texts {
        backwave::store::check_id_text(t)?;
    }
    Ok(())
}

/// Resolve every id before acting on any: a malformed or ambiguous one stops the whole
/// command (exit 2) so that nothing is half-done; an unknown one is reported `NotFound`.
/// A job named twice (a pasted list, a prefix and its full id) is acted on and reported once:
/// its second mention came back refused ("NotRequeueable (scheduled)") and made the command
/// exit 1 after it had done everything asked.
pub fn resolve_all(store: &Store, texts: &[String]) -> Result<Vec<(String, Option<JobId>)>, CliError> {
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
pub fn finish(ctx: &Ctx, view: IdResults) -> Result<ExitCode, CliError> {
    ctx.printer()?.print(&view)?;
    let refused = view.results.iter().filter(|r| !r.ok()).count();
    if refused == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let n = view.results.len();
    let (one, verb) = if refused == 1 { ("id was", view.verb) } else { ("ids were", view.verb) };
    Err(exit::not_all_done(format!("{refused} of {n} {one} not {verb}")))
}

/// Per-id results of `requeue` or `cancel`.
pub struct IdResults {
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
                (res, Some(s)) if res.refused_for_state() => (format!("{res} ({s})"), Style::Yellow),
                (Outcome::NotFound, _) => (r.result.to_string(), Style::Red),
                (res, _) => (res.to_string(), Style::Green),
            };
            let note = r
                .warning
                .as_deref()
                .map_or_else(|| r.result.note().to_string(), |w| format!("warning: {}", sanitize(w)));
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

/// The permission first, for an action by id as for a bulk one: a role that may neither write
/// the jobs nor holds `operate` is told it lacks `operate` (exit 1), not that the store is
/// read-only (exit 3, "unavailable"), as `bw pause` already told it (found at 3 a.m. on a
/// PostgreSQL viewer role).
pub fn require_operate(store: &backwave::Store, ctx: &Ctx) -> Result<(), CliError> {
    Ok(store.require(ctx.actor(), backwave::Permission::Operate)?)
}
