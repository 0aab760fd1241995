//! bw enqueue: enqueue a job from the command line

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Enqueue a job from the command line.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw enqueue` is being built".into()))
}
