//! bw jobs set-priority: give one job another priority within its queue, 0 (claimed first) to 9
//! (claimed last). Needs operate; audited with the old and new values. `Store::set_priority`
//! does the work, as it does for the dashboard.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

use crate::cli::output::{Render, Term};
use crate::cli::{parse_priority, CliError, Ctx};

/// Give one job another priority within its queue (needs operate; audited).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job id or unique id prefix.
    pub id: String,
    /// The new priority: 0 (claimed first, the default) to 9 (claimed last).
    #[arg(value_parser = parse_priority, allow_negative_numbers = true)]
    pub priority: u8,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    // The actor's permission before the id is looked at (an ambiguous prefix would list jobs).
    backwave::store::check_id_text(&a.id)?;
    store.require(ctx.actor(), backwave::Permission::Operate)?;
    let id = store.resolve_id(&a.id)?;
    let change = store.set_priority(ctx.actor(), id, a.priority)?;
    ctx.printer()?.print(&View {
        id: id.to_string(),
        result: if change.from == change.to { "Unchanged" } else { "Changed" },
        state: change.state.as_str(),
        from: change.from,
        to: change.to,
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct View {
    id: String,
    /// `Changed`, or `Unchanged` when the job had this priority already.
    result: &'static str,
    /// The job's state.
    state: &'static str,
    from: u8,
    to: u8,
}

impl Render for View {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        if self.from == self.to {
            writeln!(out, "{}  priority {} already: nothing changed", self.id, self.to)
        } else {
            writeln!(out, "{}  priority {} -> {} ({})", self.id, self.from, self.to, self.state)
        }
    }
}
