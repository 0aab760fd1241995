//! bw completions: shell completion scripts, generated from the clap definition.

use std::io::Write;
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
    // Written whole by bw, not by the generator, which panics when stdout fails (a closed pipe:
    // `bw completions bash | head -1`): a closed pipe is then a quiet success, any other failure
    // exit 4, as for every other command.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "bw", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
