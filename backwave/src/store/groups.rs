//! The groups an on-call engineer triages by: Dead-Lettered jobs by wire name and cause
//! fingerprint, Quarantined jobs by wire name and reason, with the live workers that handle each
//! wire name now.

use std::collections::HashMap;

use rusqlite::Connection;
use serde::Serialize;

use super::SqliteStore;
use crate::error::Result;
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

impl SqliteStore {
    pub fn cause_groups(&self, limit: usize) -> Result<Vec<CauseGroup>> {
        Ok(self
            .conn
            .prepare_cached(
                // Group on the covering index first and fetch an example only for the groups
                // kept: a correlated example per group read thousands of rows (1.3 s at 1M jobs).
                "WITH g AS MATERIALIZED (
                     SELECT wire_name, cause_fingerprint AS fp, count(*) AS n, min(finished_at) AS first_seen,
                            max(finished_at) AS last_seen
                     FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint
                     ORDER BY n DESC, last_seen DESC, wire_name, fp LIMIT ?1)
                 SELECT wire_name, coalesce(fp, ex, ''), n, first_seen, last_seen, ex
                 FROM (SELECT g.*, (SELECT terminal_cause FROM jobs j2 WHERE j2.state = 'dead-lettered'
                                      AND j2.wire_name = g.wire_name AND j2.cause_fingerprint IS g.fp
                                      ORDER BY finished_at DESC LIMIT 1) AS ex FROM g)
                 ORDER BY n DESC, last_seen DESC, wire_name, fp",
            )?
            .query_map([limit as i64], |r| {
                Ok(CauseGroup {
                    wire_name: r.get(0)?,
                    fingerprint: r.get(1)?,
                    count: r.get::<_, i64>(2)? as u64,
                    first_seen: r.get(3)?,
                    last_seen: r.get(4)?,
                    example: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                })
            })?
            .collect::<Result<_, _>>()?)
    }

    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>> {
        let handlers = self.live_handlers()?;
        Ok(quarantine_groups_from(quarantine_rows(&self.conn)?, &handlers))
    }

    pub fn live_handlers(&self) -> Result<HashMap<String, u64>> {
        Ok(live_handlers_from(&self.workers()?, self.now()))
    }
}

/// One group of Quarantined jobs as read, before its live handlers are known: wire name, reason
/// (as stored), count, first and last seen, the latest cause.
pub(crate) type QuarantineRow = (String, String, u64, Millis, Millis, Option<String>);

/// Quarantined jobs by wire name and reason, largest first.
pub(crate) fn quarantine_rows(conn: &Connection) -> Result<Vec<QuarantineRow>> {
    Ok(conn
        .prepare_cached(
            // Grouping reads only the covering `jobs_quarantine` index; the example cause is
            // one indexed lookup per group, not a read of every quarantined row.
            "SELECT wire_name, quarantine_reason, count(*), min(finished_at), max(finished_at),
                    (SELECT terminal_cause FROM jobs j2 WHERE j2.state = 'quarantined'
                       AND j2.wire_name = j.wire_name AND j2.quarantine_reason = j.quarantine_reason
                     ORDER BY finished_at DESC LIMIT 1)
             FROM jobs j WHERE state = 'quarantined'
             GROUP BY wire_name, quarantine_reason ORDER BY count(*) DESC, wire_name, quarantine_reason",
        )?
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64, r.get(3)?, r.get(4)?, r.get(5)?))
        })?
        .collect::<Result<_, _>>()?)
}

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
