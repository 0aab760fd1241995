//! bw init: create or migrate a store

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Create or migrate a store.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw init` is being built".into()))
}
