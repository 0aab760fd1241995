//! The groups an on-call engineer triages by, for both backends: Dead-Lettered jobs by wire
//! name and cause fingerprint, Quarantined jobs by wire name and reason, with the live workers
//! that handle each wire name now. Each backend reads the rows in its SQL (`store/groups.rs`,
//! `postgres/health/groups.rs`).

use std::collections::HashMap;

use serde::Serialize;

use crate::model::{Millis, QuarantineReason, WorkerInfo};

/// Dead-Lettered jobs that share a wire name and a cause fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CauseGroup {
    pub wire_name: String,
    pub fingerprint: String,
    /// One real cause of the group, the most recent.
    pub example: String,
    pub count: u64,
    pub first_seen: Millis,
    pub last_seen: Millis,
}

/// Quarantined jobs that share a wire name and a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuarantineGroup {
    pub wire_name: String,
    pub reason: QuarantineReason,
    pub example: String,
    pub count: u64,
    pub first_seen: Millis,
    pub last_seen: Millis,
    /// Live workers that handle this wire name now.
    pub live_handlers: u64,
}

/// One group of Quarantined jobs as read, before its live handlers are known: wire name, reason
/// (as stored), count, first and last seen, the latest cause.
pub(crate) type QuarantineRow = (String, String, u64, Millis, Millis, Option<String>);

/// The groups with how many live workers handle each wire name now; a reason this build does not
/// know is left out. Both backends.
pub(crate) fn quarantine_groups_from(
    rows: Vec<QuarantineRow>,
    handlers: &HashMap<String, u64>,
) -> Vec<QuarantineGroup> {
    rows.into_iter()
        .filter_map(|(wire_name, reason, count, first_seen, last_seen, example)| {
            Some(QuarantineGroup {
                live_handlers: handlers.get(&wire_name).copied().unwrap_or(0),
                reason: reason.parse().ok()?,
                wire_name,
                example: example.unwrap_or_default(),
                count,
                first_seen,
                last_seen,
            })
        })
        .collect()
}

/// For each wire name, how many of `workers` are live at `now` and handle it. Both backends.
pub(crate) fn live_handlers_from(workers: &[WorkerInfo], now: Millis) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for w in workers.iter().filter(|w| w.is_live(now)) {
        for name in &w.wire_names {
            *out.entry(name.clone()).or_default() += 1;
        }
    }
    out
}
