//! bw generate (hidden): build large stores for benchmarks

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Build large stores for benchmarks.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw generate` is being built".into()))
}
