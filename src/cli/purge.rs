//! bw purge: the retention sweep

use std::process::ExitCode;

use super::{CliError, Ctx};

/// The retention sweep.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw purge` is being built".into()))
}
