//! bw top: the live dashboard. Parses its flags and hands over to `crate::tui`; everything it
//! shows and does goes through the same library calls as the other subcommands.

use std::process::ExitCode;
use std::time::Duration;

use super::{parse_duration, CliError, Ctx};
use crate::tui::{App, Config};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How often to refresh.
    #[arg(long, value_parser = parse_duration, default_value = "1s", value_name = "DUR")]
    pub interval: Duration,
    /// Look only: requeue, cancel and reveal are disabled.
    #[arg(long)]
    pub read_only: bool,
    /// `q` asks before quitting (set by `bw demo`, whose workers stop with the dashboard).
    #[arg(long, hide = true)]
    pub ask_before_quit: bool,
}

pub fn run(args: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if args.interval < Duration::from_millis(100) {
        return Err(CliError::Usage(format!(
            "--interval {} is too short: use 100ms or more",
            super::output::compact_duration(args.interval)
        )));
    }
    // Open once here so that a missing or foreign store is a plain error before the screen
    // changes; the background thread opens its own.
    let clock = ctx.clock()?;
    ctx.open()?;
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(CliError::Usage("bw top needs a terminal; for scripts use `bw stats` or `bw jobs list`".into()));
    }
    let cfg = Config {
        store: ctx.global.db.to_string(),
        actor: ctx.actor().to_string(),
        interval: args.interval,
        read_only: args.read_only,
        color: ctx.color,
        ask_before_quit: args.ask_before_quit,
    };
    let app = App::new(cfg, clock.now());
    let path = ctx.global.db.clone();
    let busy = ctx.global.busy_timeout;
    let store_clock = clock.clone();
    crate::tui::terminal::run(app, clock, move || {
        let store = backwave::Store::open(&path)?.with_clock(store_clock.clone());
        store.set_busy_timeout(busy)?;
        Ok(store)
    })?;
    Ok(ExitCode::SUCCESS)
}
