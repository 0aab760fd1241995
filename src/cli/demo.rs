//! bw demo: the seed's worker groups running for real on a demo store

use std::process::ExitCode;

use super::{CliError, Ctx};

/// The seed's worker groups running for real on a demo store.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw demo` is being built".into()))
}
