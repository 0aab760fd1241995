//! bw log tail

use std::process::ExitCode;

use super::{CliError, Ctx};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The last transition entries, oldest first; --follow for new ones as they commit.
    Tail,
}

pub fn run(_cmd: &Command, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw log` is being built".into()))
}
