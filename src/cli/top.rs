//! bw top: the live dashboard

use std::process::ExitCode;

use super::{CliError, Ctx};

/// The live dashboard.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw top` is being built".into()))
}
