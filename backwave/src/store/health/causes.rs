//! Dead-letter cause groups as a health read needs them: every group from one pass over the
//! covering `jobs_dead_causes` index, an example cause looked up only for the groups shown, and
//! the jobs Dead-Lettered since the window opened. Read-only.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::model::Millis;
use crate::store::ops::groups::CauseGroup;

/// Jobs Dead-Lettered at or after `?1`: a range of `jobs_finished (state, finished_at)`, which
/// `finished_at IS NOT NULL` (implied by the state) makes usable, covering.
pub const DEAD_SINCE_SQL: &str = "SELECT count(*) FROM jobs WHERE state = 'dead-lettered' \
                                  AND finished_at IS NOT NULL AND finished_at >= ?1";

/// A dead-letter cause group before its example is looked up.
pub(crate) struct Group {
    pub(crate) wire_name: String,
    pub(crate) fingerprint: Option<String>,
    pub(crate) count: u64,
    pub(crate) first_seen: Millis,
    pub(crate) last_seen: Millis,
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

/// The groups as [`CauseGroup`]s, each with its latest real cause: one indexed lookup a group
/// (`example`). Both backends.
pub(crate) fn with_examples<'a>(
    mut example: impl FnMut(&str, Option<&str>) -> Result<Option<String>>,
    groups: impl Iterator<Item = &'a Group>,
) -> Result<Vec<CauseGroup>> {
    let mut out = Vec::new();
    for g in groups {
        let example = example(&g.wire_name, g.fingerprint.as_deref())?.unwrap_or_default();
        out.push(CauseGroup {
            wire_name: g.wire_name.clone(),
            // As `bw stats` shows it: a job written without a fingerprint groups by its cause.
            fingerprint: g.fingerprint.clone().unwrap_or_else(|| example.clone()),
            example,
            count: g.count,
            first_seen: g.first_seen,
            last_seen: g.last_seen,
        });
    }
    Ok(out)
}

pub(super) fn dead_since(conn: &Connection, since: Millis) -> Result<u64> {
    let n: i64 = conn.prepare_cached(DEAD_SINCE_SQL)?.query_row([since], |r| r.get(0))?;
    Ok(n as u64)
}
