//! bw workers: live and stale workers

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Live and stale workers.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw workers` is being built".into()))
}
