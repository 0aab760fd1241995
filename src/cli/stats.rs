//! bw stats: counts, top dead-letter causes, quarantines

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Counts, top dead-letter causes, quarantines.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw stats` is being built".into()))
}
