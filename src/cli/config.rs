//! bw config get | set | list: store-wide settings (failure detail on/off, retention).
//! Reading is open to anyone who can read the file; changing needs admin and is audited.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use super::output::{sanitize, Render, Table, Term};
use super::{CliError, Ctx};
use backwave::store::SettingKey;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print one setting's value: failure_detail (on|off) or retention (e.g. 14d).
    Get { key: String },
    /// Change a setting (needs admin; audited).
    Set { key: String, value: String },
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

pub fn run(cmd: &Command, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let view = match cmd {
        Command::Get { key } => {
            let k = SettingKey::parse(key)?;
            Settings { settings: vec![Setting { key: k.as_str(), value: store.setting(k)? }], bare: true }
        }
        Command::Set { key, value } => {
            let k = SettingKey::parse(key)?;
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
