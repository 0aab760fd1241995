//! The triage groups on SQLite: the statements that read them (the groups themselves and how
//! they are formed are `ops/groups.rs`'s), and the dead-letter cause groups as a health read
//! needs them: every group from one pass over the covering `jobs_dead_causes` index, an example
//! cause looked up only for the groups shown, and the jobs Dead-Lettered since the window opened.
//! Read-only.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::error::Result;
use crate::model::Millis;
use crate::store::health::Group;
use crate::store::ops::groups::{live_handlers_from, quarantine_groups_from, QuarantineRow};
use crate::store::{CauseGroup, QuarantineGroup};

/// Jobs Dead-Lettered at or after `?1`: a range of `jobs_finished (state, finished_at)`, which
/// `finished_at IS NOT NULL` (implied by the state) makes usable, covering.
pub const DEAD_SINCE_SQL: &str = "SELECT count(*) FROM jobs WHERE state = 'dead-lettered' \
                                  AND finished_at IS NOT NULL AND finished_at >= ?1";

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

/// Every cause group, largest first: one pass over the covering `jobs_dead_causes` index, no
/// example (a correlated example per group read thousands of rows when causes were many).
pub(super) fn cause_groups(conn: &Connection) -> Result<Vec<Group>> {
    let mut stmt = conn.prepare_cached(
        "SELECT wire_name, cause_fingerprint, count(*) AS n, min(finished_at), max(finished_at) AS last_seen
         FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint
         ORDER BY n DESC, last_seen DESC, wire_name, cause_fingerprint",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Group {
            wire_name: r.get(0)?,
            fingerprint: r.get(1)?,
            count: r.get::<_, i64>(2)? as u64,
            first_seen: r.get(3)?,
            last_seen: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The latest real cause of the Dead-Lettered jobs of `wire_name` with `fingerprint` (none: no
/// fingerprint), by the covering index: the example a [`CauseGroup`] shows.
pub(super) fn example(conn: &Connection, wire_name: &str, fingerprint: Option<&str>) -> Result<Option<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT terminal_cause FROM jobs WHERE state = 'dead-lettered' AND wire_name = ?1 AND cause_fingerprint IS ?2
         ORDER BY finished_at DESC LIMIT 1",
    )?;
    Ok(stmt.query_row(params![wire_name, fingerprint], |r| r.get(0)).optional()?.flatten())
}

pub(super) fn dead_since(conn: &Connection, since: Millis) -> Result<u64> {
    let n: i64 = conn.prepare_cached(DEAD_SINCE_SQL)?.query_row([since], |r| r.get(0))?;
    Ok(n as u64)
}
