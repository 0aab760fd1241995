//! bw backoff: print a retry schedule

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Print a retry schedule.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw backoff` is being built".into()))
}
