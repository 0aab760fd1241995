//! bw cancel: cancel jobs that have not reached a terminal state

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Cancel jobs that have not reached a terminal state.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw cancel` is being built".into()))
}
