//! bw pause | resume | pauses: stop workers claiming a queue or a wire name during an incident
//! (optionally for a while), lift it, and see what is paused, by whom, since and until when.
//! The store does the work (`Store::pause`, `resume`, `pauses`); this file parses and prints.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{relative, rfc3339, sanitize, thousands, Render, Table, Term};
use super::{exit, parse_duration, CliError, Ctx};
use backwave::store::{Pause, PauseKind, PausePlan, PauseResult, ResumeResult};
use backwave::Millis;

/// What to pause or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Every job of the queue.
    Queue,
    /// Every job with the wire name, in every queue.
    WireName,
}

impl From<Kind> for PauseKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Queue => PauseKind::Queue,
            Kind::WireName => PauseKind::WireName,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    #[arg(value_enum)]
    pub kind: Kind,
    /// The queue or wire name.
    pub name: String,
    /// Lift the pause by itself after this long (e.g. 30m); without it, until `bw resume`.
    #[arg(long = "for", value_name = "DUR", value_parser = parse_duration)]
    pub for_: Option<Duration>,
    /// Pause a name that no job or worker mentions yet (otherwise refused as a likely typo).
    #[arg(long)]
    pub force: bool,
    /// Check the name and say what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[arg(value_enum)]
    pub kind: Kind,
    /// The queue or wire name.
    pub name: String,
}

#[derive(Debug, clap::Args)]
pub struct PausesArgs {}

pub fn pause(a: &PauseArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if a.for_.is_some_and(|d| d.is_zero()) {
        return Err(CliError::Usage("--for '0s' would end the pause at once: give a longer duration, e.g. 30m".into()));
    }
    let store = ctx.open()?;
    let kind = PauseKind::from(a.kind);
    let now = store.now();
    let until = a.for_.map(|d| now.saturating_add(d.as_millis().min(i64::MAX as u128) as Millis));
    // The plan also checks the name: a typo is refused before anything is written.
    let plan = store.plan_pause(ctx.actor(), kind, &a.name, a.force)?;
    let result = if a.dry_run {
        "WouldPause"
    } else {
        match store.pause(ctx.actor(), kind, &a.name, until, a.force)? {
            PauseResult::Paused => "Paused",
            PauseResult::Extended { .. } => "Extended",
        }
    };
    let view = PauseView {
        kind,
        name: a.name.clone(),
        result,
        until: until.map(rfc3339),
        plan: Some(plan),
        by: ctx.actor().to_string(),
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

pub fn resume(a: &ResumeArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let kind = PauseKind::from(a.kind);
    let result = store.resume(ctx.actor(), kind, &a.name)?;
    let view = PauseView {
        kind,
        name: a.name.clone(),
        result: match result {
            ResumeResult::Resumed => "Resumed",
            ResumeResult::NotPaused => "NotPaused",
        },
        until: None,
        plan: None,
        by: ctx.actor().to_string(),
    };
    ctx.printer()?.print(&view)?;
    if result == ResumeResult::NotPaused {
        // A typo of a paused name: say which one is paused (`bw resume queue critcal`).
        let paused: Vec<String> = store.pauses()?.into_iter().filter(|p| p.kind == kind).map(|p| p.name).collect();
        let meant = crate::text::did_you_mean(&a.name, paused.iter().map(String::as_str))
            .map(|m| format!("; did you mean '{}'?", sanitize(m)))
            .unwrap_or_default();
        return Err(exit::not_all_done(format!(
            "{kind} '{}' was not paused: nothing resumed{meant}",
            sanitize(&a.name)
        )));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn list(_a: &PausesArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    ctx.printer()?.print(&PausesView(store.pauses()?))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct PauseView {
    kind: PauseKind,
    name: String,
    /// `Paused`, `Extended` (it was paused: new expiry), `WouldPause`, `Resumed`, `NotPaused`.
    result: &'static str,
    /// RFC 3339, `null` when until resumed (and for resumes).
    until: Option<String>,
    /// Pauses only: the Scheduled jobs it holds and the Running ones that finish normally.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    plan: Option<PausePlan>,
    #[serde(skip)]
    by: String,
}

impl Render for PauseView {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let what = format!("{} '{}'", self.kind, sanitize(&self.name));
        let until = match &self.until {
            Some(u) => format!("until {u}"),
            None => "until `bw resume`".to_string(),
        };
        match self.result {
            "Paused" => writeln!(out, "Paused {what} {until}: workers claim none of its jobs from their next poll.")?,
            "Extended" => writeln!(out, "{what} was paused already: now paused {until}, by {}.", sanitize(&self.by))?,
            "WouldPause" => writeln!(out, "Would pause {what} {until}.")?,
            "Resumed" => writeln!(out, "Resumed {what}: workers claim its jobs again from their next poll.")?,
            _ => writeln!(out, "{what} is not paused.")?,
        }
        if let Some(p) = &self.plan {
            let held = if self.result == "WouldPause" { "would wait" } else { "wait" };
            writeln!(
                out,
                "  {} scheduled {held} (enqueues still land); {} running finish normally",
                thousands(p.scheduled),
                thousands(p.running)
            )?;
        }
        if self.result == "WouldPause" {
            writeln!(out, "Run again without --dry-run to pause it.")?;
        }
        Ok(())
    }
}

/// `bw pauses`, and the section `bw stats` and `bw workers` show.
pub(super) struct PausesView(pub Vec<Pause>);

/// One pause as scripts see it.
#[derive(Serialize)]
pub(super) struct PauseJson<'a> {
    kind: PauseKind,
    name: &'a str,
    paused_by: &'a str,
    paused_at: String,
    until: Option<String>,
}

impl PausesView {
    pub fn json(&self) -> Vec<PauseJson<'_>> {
        self.0
            .iter()
            .map(|p| PauseJson {
                kind: p.kind,
                name: &p.name,
                paused_by: &p.paused_by,
                paused_at: rfc3339(p.paused_at),
                until: p.until.map(rfc3339),
            })
            .collect()
    }

    /// The table under a heading, or nothing when no pause is in force.
    pub fn section(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        writeln!(out)?;
        writeln!(out, "Paused (not claimed by any worker):")?;
        self.write_table(out, term)
    }

    fn write_table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let mut t = Table::new(&["WHAT", "NAME", "BY", "SINCE", "UNTIL"]).flex(1);
        for p in &self.0 {
            t.row(vec![
                p.kind.as_str().into(),
                sanitize(&p.name).into_owned().into(),
                sanitize(&p.paused_by).into_owned().into(),
                relative(term.now, p.paused_at).into(),
                p.until
                    .map_or_else(|| "until resumed".to_string(), |u| format!("in {}", relative_ahead(term.now, u)))
                    .into(),
            ]);
        }
        t.write(out, term)
    }
}

/// `12m` for a time ahead of now.
fn relative_ahead(now: Millis, at: Millis) -> String {
    let ms = at.saturating_sub(now).max(0) as u64;
    super::output::compact_duration(Duration::from_millis(ms))
}

impl Serialize for PausesView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            pauses: Vec<PauseJson<'a>>,
        }
        Doc { pauses: self.json() }.serialize(s)
    }
}

impl Render for PausesView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.0.is_empty() {
            return writeln!(out, "Nothing is paused.");
        }
        self.write_table(out, term)
    }
}
