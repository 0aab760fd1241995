//! Quieting and resuming worker processes, written once: the permission first, a selector that
//! matches no registered worker refused, only the workers that change touched (a second quiet
//! keeps the first one's time and actor), and one audit row naming them. A backend supplies
//! the statements ([`QuietTx`]).

use super::{AuditAction, StoreTx};
use crate::error::Result;
use crate::model::{Millis, Permission};
use crate::store::WorkerSelector;

/// The statements quiet and resume need, per dialect, in one write transaction.
pub(crate) trait QuietTx: StoreTx {
    /// How many registered workers `selector` matches.
    fn count_workers(&mut self, selector: &WorkerSelector) -> Result<u64>;
    /// Quiet (by `by` at `now`) the matching workers not quiet yet, or lift the quiet of
    /// those quiet: the ids of the workers changed, in any order.
    fn change_quiet(&mut self, selector: &WorkerSelector, quiet: bool, actor: &str, now: Millis)
        -> Result<Vec<String>>;
}

/// `bw workers quiet` (`quiet`) or `bw workers resume`: needs `operate`, checked first. Returns
/// the ids that changed, sorted.
pub(crate) fn set_quiet(
    tx: &mut (impl QuietTx + ?Sized),
    actor: &str,
    selector: &WorkerSelector,
    quiet: bool,
) -> Result<Vec<String>> {
    tx.require(actor, Permission::Operate)?;
    let now = tx.now()?;
    if tx.count_workers(selector)? == 0 {
        return Err(selector.unmatched());
    }
    let mut ids = tx.change_quiet(selector, quiet, actor, now)?;
    ids.sort();
    if !ids.is_empty() {
        let action = if quiet { AuditAction::Quiet } else { AuditAction::ResumeWorker };
        tx.audit(now, actor, action, None, &selector_detail(selector, &ids))?;
    }
    Ok(ids)
}

/// The audit detail of a quiet or resume: the selector and the workers it changed.
pub(crate) fn selector_detail(sel: &WorkerSelector, ids: &[String]) -> String {
    let (col, v) = sel.column();
    format!("{col} {v}: {}", ids.join(", "))
}
