//! bw jobs list | show

use std::process::ExitCode;

use super::{CliError, Ctx};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List jobs, newest first.
    List,
    /// Every field of one job and its whole history.
    Show,
}

pub fn run(_cmd: &Command, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw jobs` is being built".into()))
}
