//! bw config get | set | list: store-wide settings (failure detail on/off, retention).
//! Reading is open to anyone who can read the file; changing needs admin and is audited.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use std::collections::BTreeMap;

use super::output::{rfc3339, sanitize, thousands, Render, Table, Term};
use super::purge::by_state_text;
use super::{exit, CliError, Ctx};
use backwave::store::SettingKey;
use backwave::{JobState, Permission, Store};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print one setting's value: failure_detail (on|off) or retention (e.g. 14d).
    Get { key: String },
    /// Change a setting (needs admin; audited). A shorter retention that would delete jobs at
    /// the next sweep asks first, with the count by state.
    Set {
        key: String,
        value: String,
        /// Do not ask for confirmation (needed when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Every setting and its value.
    List,
}

#[derive(Serialize)]
struct Settings {
    settings: Vec<Setting>,
    #[serde(skip)]
    bare: bool,
}

#[derive(Serialize)]
struct Setting {
    key: &'static str,
    value: String,
}

impl Render for Settings {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.bare {
            for s in &self.settings {
                writeln!(out, "{}", sanitize(&s.value))?;
            }
            return Ok(());
        }
        let mut t = Table::new(&["KEY", "VALUE"]);
        for s in &self.settings {
            t.row(vec![s.key.into(), sanitize(&s.value).into_owned().into()]);
        }
        t.write(out, term)
    }
}

/// A retention shorter than the one in force deletes, at the next sweep of any worker, every
/// terminal job that finished longer ago: say how many and of which states (Dead-Lettered and
/// Quarantined ones may be failures nobody has looked at), and ask, as `bw purge` does. Found
/// at 3 a.m.: `config set retention 0s` (or `1m` for `1M`) emptied the failure lists unasked.
fn confirm_retention(store: &Store, ctx: &Ctx, value: &str, yes: bool) -> Result<(), CliError> {
    // An unreadable value is the store's to refuse, with its message.
    let Ok(new) = backwave::model::parse_duration(value) else { return Ok(()) };
    // Before the count and the question: nobody should confirm what they may not do.
    store.require(ctx.actor(), Permission::Admin)?;
    if new >= store.retention()? {
        return Ok(());
    }
    let cutoff = backwave::model::millis_before(store.now(), new);
    let by_state: BTreeMap<JobState, u64> = store.purgeable_by_state(cutoff)?.into_iter().collect();
    let Some(states) = by_state_text(&by_state) else { return Ok(()) };
    let q = format!(
        "With retention {value} the next sweep deletes {} terminal jobs that finished before {} ({states}), \
         with their log. Set it?",
        thousands(by_state.values().sum()),
        rfc3339(cutoff),
    );
    if !ctx.confirm_or_refuse(yes, &q, "shorten the retention")? {
        return Err(exit::not_all_done("the retention is unchanged"));
    }
    Ok(())
}

pub fn run(cmd: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let view = match cmd {
        Command::Get { key } => {
            let k = SettingKey::parse(key)?;
            Settings { settings: vec![Setting { key: k.as_str(), value: store.setting(k)? }], bare: true }
        }
        Command::Set { key, value, yes } => {
            let k = SettingKey::parse(key)?;
            if k == SettingKey::Retention {
                confirm_retention(&store, ctx, value, *yes)?;
            }
            store.set_setting(ctx.actor(), k, value)?;
            Settings { settings: vec![Setting { key: k.as_str(), value: store.setting(k)? }], bare: false }
        }
        Command::List => Settings {
            settings: SettingKey::ALL
                .iter()
                .map(|k| Ok(Setting { key: k.as_str(), value: store.setting(*k)? }))
                .collect::<Result<_, backwave::Error>>()?,
            bare: false,
        },
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}
