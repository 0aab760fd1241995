//! bw config get | set

use std::process::ExitCode;

use super::{CliError, Ctx};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Show a setting.
    Get,
    /// Change a setting (admin).
    Set,
}

pub fn run(_cmd: &Command, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw config` is being built".into()))
}
