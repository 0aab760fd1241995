//! bw limit | limits: cap how many jobs of a queue or wire name run at once across every host,
//! or how many start per window, optionally for a while; lift it; see every limit in force, the
//! operator's beside the application's default. The store does the work (`Store::set_limit`,
//! `clear_limit`, `limits`); this file parses and prints.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{relative, rfc3339, sanitize, thousands, Render, Table, Term};
use super::pause::Kind;
use super::{exit, parse_duration, CliError, Ctx};
use backwave::store::{Limit, LimitResult, LimitSpec, LimitStatus, PauseKind, Rate};
use backwave::Millis;

#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    #[arg(value_enum)]
    pub kind: Kind,
    /// The queue or wire name.
    pub name: String,
    /// At most N running at once across every host.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// At most N started per window, e.g. 50/s or 600/1m.
    #[arg(long, value_name = "N/DUR", value_parser = parse_rate)]
    pub rate: Option<Rate>,
    /// Lift the limit by itself after this long (e.g. 30m); without it, until --clear.
    #[arg(long = "for", value_name = "DUR", value_parser = parse_duration)]
    pub for_: Option<Duration>,
    /// Remove the operator's limit (the application's default, if any, applies again).
    #[arg(long, conflicts_with_all = ["concurrency", "rate", "for_", "force"])]
    pub clear: bool,
    /// Limit a name that no job or worker mentions yet (otherwise refused as a likely typo).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct LimitsArgs {}

fn parse_rate(s: &str) -> Result<Rate, String> {
    Rate::parse(s).map_err(|e| e.to_string())
}

pub fn limit(a: &LimitArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let kind = PauseKind::from(a.kind);
    if !a.clear && a.concurrency.is_none() && a.rate.is_none() {
        return Err(CliError::Usage(format!(
            "limit {kind} '{}' how? give --concurrency N, --rate N/DUR, or --clear",
            sanitize(&a.name)
        )));
    }
    if a.concurrency == Some(0) {
        return Err(CliError::Usage(
            "--concurrency '0' would stop every claim: pause it instead (bw pause), or give at least 1".into(),
        ));
    }
    if a.for_.is_some_and(|d| d.is_zero()) {
        return Err(CliError::Usage("--for '0s' would end the limit at once: give a longer duration, e.g. 30m".into()));
    }
    let store = ctx.open()?;
    if a.clear {
        let cleared = store.clear_limit(ctx.actor(), kind, &a.name)?;
        let view = LimitView {
            kind,
            name: a.name.clone(),
            result: if cleared { "Cleared" } else { "NotLimited" },
            limit: None,
            previous: None,
            until: None,
            lifted_until: None,
            running: None,
        };
        ctx.printer()?.print(&view)?;
        if !cleared {
            return Err(exit::not_all_done(format!(
                "{kind} '{}' had no operator limit: nothing cleared",
                sanitize(&a.name)
            )));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let now = store.now();
    let until = a.for_.map(|d| now.saturating_add(d.as_millis().min(i64::MAX as u128) as Millis));
    let change = LimitSpec { concurrency: a.concurrency, rate: a.rate };
    // The expiry the limit had, to say so when this change lifts it (a change without --for
    // lasts until --clear, as a pause given again replaces its expiry).
    let had_until = store
        .limits()?
        .into_iter()
        .find(|l| l.kind == kind && l.name == a.name)
        .and_then(|l| l.operator)
        .and_then(|o| o.until)
        .filter(|u| *u > now);
    let result = store.set_limit(ctx.actor(), kind, &a.name, &change, until, a.force)?;
    let limit = store.limits()?.into_iter().find(|l| l.kind == kind && l.name == a.name);
    let view = LimitView {
        kind,
        name: a.name.clone(),
        result: match result {
            LimitResult::Limited => "Limited",
            LimitResult::Changed { .. } => "Changed",
        },
        limit: limit.as_ref().map(|l| l.effective),
        previous: match result {
            LimitResult::Changed { previous } => Some(previous),
            LimitResult::Limited => None,
        },
        until: until.map(rfc3339),
        lifted_until: had_until
            .filter(|_| until.is_none() && matches!(result, LimitResult::Changed { .. }))
            .map(rfc3339),
        // Counted only under a concurrency limit.
        running: limit.as_ref().filter(|l| l.effective.concurrency.is_some()).map(|l| l.running),
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

pub fn list(_a: &LimitsArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    ctx.printer()?.print(&LimitsView(store.limits()?))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct LimitView {
    kind: PauseKind,
    name: String,
    /// `Limited`, `Changed` (a limit was in force: `previous`), `Cleared`, `NotLimited`.
    result: &'static str,
    /// The limit in force now (the operator's).
    limit: Option<LimitSpec>,
    previous: Option<LimitSpec>,
    /// RFC 3339, `null` when until cleared.
    until: Option<String>,
    /// The expiry this change lifted (it had one; given again without `--for`, it lasts until
    /// cleared), RFC 3339; omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    lifted_until: Option<String>,
    /// Running under it now (`null` without a concurrency limit).
    running: Option<u64>,
}

impl Render for LimitView {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let what = format!("{} '{}'", self.kind, sanitize(&self.name));
        let until = match &self.until {
            Some(u) => format!("until {u}"),
            None => "until `bw limit --clear`".to_string(),
        };
        let spec = self.limit.map(|l| l.to_string()).unwrap_or_default();
        match self.result {
            "Limited" => {
                writeln!(out, "Limited {what} to {spec} {until}: every worker honours it from its next claim.")?
            }
            "Changed" => {
                writeln!(
                    out,
                    "{what} was limited to {}: now {spec} {until}.",
                    self.previous.map(|p| p.to_string()).unwrap_or_default()
                )?;
                if let Some(lifted) = &self.lifted_until {
                    writeln!(out, "  It was to lapse at {lifted}; given without --for, it now lasts until cleared.")?;
                }
            }
            "Cleared" => writeln!(out, "Cleared the operator's limit on {what}.")?,
            _ => writeln!(out, "{what} has no operator limit.")?,
        }
        if let Some(r) = self.running {
            writeln!(out, "  {} running now", thousands(r))?;
        }
        Ok(())
    }
}

/// `bw limits`, and the section `bw stats` shows.
pub(super) struct LimitsView(pub Vec<LimitStatus>);

/// One limit as scripts see it.
#[derive(Serialize)]
pub(super) struct LimitJson<'a> {
    kind: PauseKind,
    name: &'a str,
    /// What claims honour now: `operator` when one is set, else `application`.
    source: &'static str,
    concurrency: Option<u32>,
    rate: Option<Rate>,
    operator: Option<SourceJson<'a>>,
    application: Option<SourceJson<'a>>,
    running: u64,
    window_claimed: u64,
    /// How many more a claim may take now; 0: its due jobs wait on this limit.
    budget: u64,
    /// Due jobs it holds back now (counted when the budget is 0).
    held_back: u64,
}

#[derive(Serialize)]
pub(super) struct SourceJson<'a> {
    concurrency: Option<u32>,
    rate: Option<Rate>,
    set_by: &'a str,
    set_at: String,
    until: Option<String>,
}

fn source_json(l: &Limit) -> SourceJson<'_> {
    SourceJson {
        concurrency: l.spec.concurrency,
        rate: l.spec.rate,
        set_by: &l.set_by,
        set_at: rfc3339(l.set_at),
        until: l.until.map(rfc3339),
    }
}

impl LimitsView {
    pub fn json(&self) -> Vec<LimitJson<'_>> {
        self.0
            .iter()
            .map(|l| LimitJson {
                kind: l.kind,
                name: &l.name,
                source: if l.operator.is_some() { "operator" } else { "application" },
                concurrency: l.effective.concurrency,
                rate: l.effective.rate,
                operator: l.operator.as_ref().map(source_json),
                application: l.application.as_ref().map(source_json),
                running: l.running,
                window_claimed: l.window_claimed,
                budget: l.budget,
                held_back: l.held_back,
            })
            .collect()
    }

    /// The table under a heading, or nothing when no limit is in force.
    pub fn section(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        writeln!(out)?;
        writeln!(out, "Limited (claimed at most this fast across every host):")?;
        self.write_table(out, term)
    }

    fn write_table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let mut t = Table::new(&["WHAT", "NAME", "LIMIT", "SET BY", "NOW", "HELD", "APP DEFAULT"]).flex(1);
        for l in &self.0 {
            let set_by = match (&l.operator, &l.application) {
                (Some(o), _) => {
                    let until = o.until.map(|u| format!(", {} left", ahead(term.now, u))).unwrap_or_default();
                    format!("{} {}{until}", sanitize(&o.set_by), relative(term.now, o.set_at))
                }
                (None, Some(_)) => "application".to_string(),
                (None, None) => "-".to_string(),
            };
            let mut now = Vec::new();
            if let Some(c) = l.effective.concurrency {
                now.push(format!("{}/{c} running", l.running));
            }
            if let Some(r) = l.effective.rate {
                now.push(format!("{}/{} this window", l.window_claimed, r.n));
            }
            t.row(vec![
                l.kind.as_str().into(),
                sanitize(&l.name).into_owned().into(),
                l.effective.to_string().into(),
                set_by.into(),
                now.join(", ").into(),
                if l.budget == 0 { thousands(l.held_back) } else { "-".to_string() }.into(),
                l.application.as_ref().map_or_else(|| "-".to_string(), |a| a.spec.to_string()).into(),
            ]);
        }
        t.write(out, term)
    }
}

fn ahead(now: Millis, at: Millis) -> String {
    let ms = at.saturating_sub(now).max(0) as u64;
    super::output::compact_duration(Duration::from_millis(ms))
}

impl Serialize for LimitsView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            limits: Vec<LimitJson<'a>>,
        }
        Doc { limits: self.json() }.serialize(s)
    }
}

impl Render for LimitsView {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.0.is_empty() {
            return writeln!(out, "Nothing is limited.");
        }
        self.write_table(out, term)
    }
}
