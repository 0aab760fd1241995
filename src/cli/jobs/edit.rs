//! bw jobs edit: repair the payload of a Dead-Lettered or Quarantined job (an
//! `undecodable-payload` quarantine, a bad field), optionally requeueing it in the same
//! transaction. The old payload is kept in the audit entry. `Store::edit_payload` does the work.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use serde::Serialize;

use crate::cli::output::{bytes, sanitize, Render, Term};
use crate::cli::{CliError, Ctx};
use backwave::JobState;

/// Replace the payload of a dead-lettered or quarantined job (needs operate; the old payload
/// is kept in `bw audit`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job id or unique id prefix.
    pub id: String,
    /// The new payload: JSON text, `@FILE` to read it from a file, or `@-` from stdin.
    #[arg(long, value_name = "JSON|@FILE")]
    pub payload: String,
    /// Also requeue the job with a fresh budget, in the same transaction.
    #[arg(long)]
    pub requeue: bool,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let payload = read_payload(&a.payload)?;
    let store = ctx.open()?;
    // The actor's permission before the id is looked at (an ambiguous prefix would list jobs).
    backwave::store::check_id_text(&a.id)?;
    store.require(ctx.actor(), backwave::Permission::Operate)?;
    let id = store.resolve_id(&a.id)?;
    let edit = store.edit_payload(ctx.actor(), id, &payload, a.requeue)?;
    let state = if edit.requeued { JobState::Scheduled } else { edit.from };
    let warning = match edit.conflict {
        Some(existing) => Some(format!("not requeued: job {existing} holds its unique key")),
        None => (edit.requeued
            && store.live_handler_count(&store.job(id)?.map(|j| j.wire_name).unwrap_or_default())? == 0)
            .then(|| "no live worker handles its wire name: it will quarantine again".to_string()),
    };
    ctx.printer()?.print(&View {
        id: id.to_string(),
        result: if edit.requeued { "EditedAndRequeued" } else { "Edited" },
        state: state.as_str(),
        old_bytes: edit.old_bytes,
        new_bytes: edit.new_bytes,
        warning,
    })?;
    // Asked to requeue and refused: the edit stands, the command did not do all it was asked.
    match edit.conflict {
        Some(_) => Err(CliError::NotAllDone(None)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `@FILE` or `@-` read as given; anything else is the JSON itself.
fn read_payload(arg: &str) -> Result<Vec<u8>, CliError> {
    match arg.strip_prefix('@') {
        Some("-") => {
            let mut buf = Vec::new();
            io::stdin().read_to_end(&mut buf)?;
            Ok(buf)
        }
        Some(path) => std::fs::read(path)
            .map_err(|e| CliError::Usage(format!("cannot read the payload file '{}': {e}", sanitize(path)))),
        None => Ok(arg.as_bytes().to_vec()),
    }
}

#[derive(Serialize)]
struct View {
    id: String,
    /// `Edited` or `EditedAndRequeued`.
    result: &'static str,
    /// The job's state afterwards.
    state: &'static str,
    old_bytes: usize,
    new_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

impl Render for View {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(
            out,
            "{}  payload replaced ({} -> {}; the old one is kept in `bw audit`){}",
            self.id,
            bytes(self.old_bytes),
            bytes(self.new_bytes),
            if self.result == "EditedAndRequeued" { ", requeued: Scheduled now, budget reset" } else { "" }
        )?;
        if let Some(w) = &self.warning {
            writeln!(out, "warning: {}", sanitize(w))?;
        }
        Ok(())
    }
}
