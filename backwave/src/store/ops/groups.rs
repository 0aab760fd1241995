//! The groups an on-call engineer triages by, for both backends: Dead-Lettered jobs by wire
//! name and cause fingerprint, Quarantined jobs by wire name and reason, with the live workers
//! that handle each wire name now. Each backend reads the rows in its SQL (`sqlite/health/groups.rs`,
//! `postgres/health/groups.rs`).

use std::collections::HashMap;

use serde::Serialize;

use crate::model::{Millis, QuarantineReason, WorkerInfo};

/// Dead-Lettered jobs that share a wire name and a cause fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CauseGroup {
    /// The jobs' wire name.
    pub wire_name: String,
    /// Their cause with its values masked ([`cause_fingerprint`](crate::cause_fingerprint)):
    /// filter by it ([`JobFilter::fingerprint`](crate::store::JobFilter::fingerprint)) to list
    /// or requeue the group.
    pub fingerprint: String,
    /// One real cause of the group, the most recent.
    pub example: String,
    /// How many jobs the group holds.
    pub count: u64,
    /// When its oldest job finished.
    pub first_seen: Millis,
    /// When its newest job finished.
    pub last_seen: Millis,
}

/// Quarantined jobs that share a wire name and a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuarantineGroup {
    /// The jobs' wire name.
    pub wire_name: String,
    /// Why they never ran.
    pub reason: QuarantineReason,
    /// One real cause of the group, the most recent.
    pub example: String,
    /// How many jobs the group holds.
    pub count: u64,
    /// When its oldest job was quarantined.
    pub first_seen: Millis,
    /// When its newest job was quarantined.
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
