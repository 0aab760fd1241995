//! bw completions: shell completion scripts, generated from the clap definition.

use std::process::ExitCode;

use clap::CommandFactory;

use super::{Cli, CliError};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

pub fn run(a: &Args) -> Result<ExitCode, CliError> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "bw", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
