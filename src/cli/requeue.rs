//! bw requeue: requeue Dead-Lettered and Quarantined jobs with a fresh budget

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Requeue Dead-Lettered and Quarantined jobs with a fresh budget.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw requeue` is being built".into()))
}
