//! bw completions SHELL

use std::process::ExitCode;

use super::CliError;

/// Print shell completions.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw completions` is being built".into()))
}
