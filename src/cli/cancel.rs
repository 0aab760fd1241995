//! bw cancel: end jobs that have not reached a terminal state. A Scheduled job is Cancelled at
//! once; a Running one is asked to stop and ends Cancelled when its handler stops or its lease
//! lapses. One result per id, exit 1 when any was not cancelled.

use std::process::ExitCode;

use super::json::IdResult;
use super::requeue::{finish, not_found, resolve_all, IdResults};
use super::{CliError, Ctx};
use crate::store::CancelResult;
use crate::JobState;

/// Cancel jobs by id (needs operate).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Job ids or unique id prefixes.
    #[arg(value_name = "ID", required = true)]
    pub ids: Vec<String>,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let resolved = resolve_all(&store, &a.ids)?;
    let found: Vec<_> = resolved.iter().filter_map(|(_, id)| *id).collect();
    let outcomes = store.cancel(&ctx.actor, &found)?;
    let mut outcome = outcomes.into_iter();
    let mut results = Vec::new();
    for (text, id) in &resolved {
        let Some(id) = id else {
            results.push(not_found(text));
            continue;
        };
        let id = id.to_string();
        results.push(match outcome.next().expect("one outcome per found id") {
            CancelResult::Cancelled => {
                IdResult { id, result: "Cancelled", state: Some(JobState::Cancelled.as_str()), warning: None }
            }
            CancelResult::CancelRequested => {
                IdResult { id, result: "CancelRequested", state: Some(JobState::Running.as_str()), warning: None }
            }
            CancelResult::NotCancellable { state } => {
                IdResult { id, result: "NotCancellable", state: Some(state.as_str()), warning: None }
            }
            CancelResult::NotFound => not_found(text),
        });
    }
    finish(ctx, IdResults { results, verb: "cancelled" })
}
