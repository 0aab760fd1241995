//! The groups an on-call engineer triages by, on PostgreSQL: Dead-Lettered jobs by wire name and
//! cause fingerprint (from the covering `jobs_dead_causes` index), Quarantined jobs by wire name
//! and reason (from `jobs_quarantine`), with the live workers that handle each wire name now.
//! What the groups mean and how they are shown is shared with SQLite (`ops/groups.rs`, `sqlite/health/groups.rs`).

use std::collections::HashMap;

use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::Millis;
use crate::store::health::Group;
use crate::store::ops::groups::{live_handlers_from, quarantine_groups_from, QuarantineRow};
use crate::store::{CauseGroup, QuarantineGroup};

/// The `$1` largest dead-letter cause groups (then the latest seen), each with its latest real
/// cause; a group without a fingerprint is named by that cause. The groups come from one pass
/// over `jobs_dead_causes`; the example is looked up only for the groups kept, one index probe
/// each: `= fp` for a fingerprint, `IS NULL` for none (null-safe equality, `IS NOT DISTINCT
/// FROM`, is not an index condition and would read the wire name's every entry; ordering by the
/// fingerprint too lets the `IS NULL` probe stop at its first entry, as [`EXAMPLE_NO_FINGERPRINT_SQL`]).
const CAUSE_GROUPS_SQL: &str = "WITH g AS MATERIALIZED (
        SELECT wire_name, cause_fingerprint AS fp, count(*) AS n, min(finished_at) AS first_seen,
               max(finished_at) AS last_seen
        FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint
        ORDER BY n DESC, last_seen DESC, wire_name COLLATE \"C\", cause_fingerprint COLLATE \"C\" NULLS FIRST LIMIT $1)
    SELECT g.wire_name, coalesce(g.fp, ex.cause, ''), g.n, g.first_seen, g.last_seen, ex.cause
    FROM g LEFT JOIN LATERAL (
        (SELECT terminal_cause AS cause FROM jobs j WHERE j.state = 'dead-lettered'
           AND j.wire_name = g.wire_name AND j.cause_fingerprint = g.fp ORDER BY j.finished_at DESC LIMIT 1)
        UNION ALL
        (SELECT terminal_cause FROM jobs j WHERE j.state = 'dead-lettered' AND g.fp IS NULL
           AND j.wire_name = g.wire_name AND j.cause_fingerprint IS NULL
         ORDER BY j.cause_fingerprint DESC, j.finished_at DESC LIMIT 1)
    ) ex ON true
    ORDER BY g.n DESC, g.last_seen DESC, g.wire_name COLLATE \"C\", g.fp COLLATE \"C\" NULLS FIRST";

/// Every dead-letter cause group, largest first, without examples: one pass over the covering
/// `jobs_dead_causes` index.
const ALL_CAUSE_GROUPS_SQL: &str = "SELECT wire_name, cause_fingerprint, count(*) AS n, min(finished_at), \
     max(finished_at) AS last_seen FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint \
     ORDER BY n DESC, last_seen DESC, wire_name COLLATE \"C\", cause_fingerprint COLLATE \"C\" NULLS FIRST";

/// The latest cause of the group `$1`, fingerprint `$2`: one probe of `jobs_dead_causes`.
const EXAMPLE_SQL: &str = "SELECT terminal_cause FROM jobs WHERE state = 'dead-lettered' AND wire_name = $1 \
     AND cause_fingerprint = $2 ORDER BY finished_at DESC LIMIT 1";

/// The latest cause of the group `$1` without a fingerprint. The planner does not count `IS NULL`
/// as fixing a column's order, so without the fingerprint in `ORDER BY` it reads and sorts the
/// whole group (a bitmap scan) instead of stopping at the first entry of the index, read backward.
const EXAMPLE_NO_FINGERPRINT_SQL: &str = "SELECT terminal_cause FROM jobs WHERE state = 'dead-lettered' \
     AND wire_name = $1 AND cause_fingerprint IS NULL ORDER BY cause_fingerprint DESC, finished_at DESC LIMIT 1";

/// Quarantined jobs by wire name and reason, largest first: grouping reads `jobs_quarantine`, and
/// the example is one probe of it per group.
const QUARANTINE_SQL: &str = "SELECT wire_name, quarantine_reason, count(*), min(finished_at), max(finished_at),
        (SELECT terminal_cause FROM jobs j2 WHERE j2.state = 'quarantined'
           AND j2.wire_name = j.wire_name AND j2.quarantine_reason = j.quarantine_reason
         ORDER BY j2.finished_at DESC LIMIT 1)
     FROM jobs j WHERE state = 'quarantined'
     GROUP BY wire_name, quarantine_reason
     ORDER BY count(*) DESC, wire_name COLLATE \"C\", quarantine_reason COLLATE \"C\"";

/// Jobs Dead-Lettered at or after `$1`: a range of `jobs_finished (state, finished_at)`.
pub(super) const DEAD_SINCE_SQL: &str =
    "SELECT count(*) FROM jobs WHERE state = 'dead-lettered' AND finished_at IS NOT NULL AND finished_at >= $1";

impl PgStore {
    pub fn cause_groups(&self, limit: usize) -> Result<Vec<CauseGroup>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|tx| {
            tx.query(CAUSE_GROUPS_SQL, &[&limit])?
                .iter()
                .map(|r| {
                    Ok(CauseGroup {
                        wire_name: r.try_get(0)?,
                        fingerprint: r.try_get(1)?,
                        count: r.try_get::<_, i64>(2)?.max(0) as u64,
                        first_seen: r.try_get(3)?,
                        last_seen: r.try_get(4)?,
                        example: r.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
                    })
                })
                .collect()
        })
    }

    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>> {
        self.read(|tx| {
            let now = tx.now()?;
            let workers = super::workers(tx)?;
            Ok(quarantine_groups_from(quarantine_rows(tx)?, &live_handlers_from(&workers, now)))
        })
    }

    pub fn live_handlers(&self) -> Result<HashMap<String, u64>> {
        self.read(|tx| {
            let now = tx.now()?;
            Ok(live_handlers_from(&super::workers(tx)?, now))
        })
    }
}

pub(super) fn all_cause_groups(tx: &mut Tx<'_>) -> Result<Vec<Group>> {
    tx.query(ALL_CAUSE_GROUPS_SQL, &[])?
        .iter()
        .map(|r| {
            Ok(Group {
                wire_name: r.try_get(0)?,
                fingerprint: r.try_get(1)?,
                count: r.try_get::<_, i64>(2)?.max(0) as u64,
                first_seen: r.try_get::<_, Millis>(3)?,
                last_seen: r.try_get::<_, Millis>(4)?,
            })
        })
        .collect()
}

pub(super) fn example(tx: &mut Tx<'_>, wire_name: &str, fingerprint: Option<&str>) -> Result<Option<String>> {
    let row = match fingerprint {
        Some(fp) => tx.query_opt(EXAMPLE_SQL, &[&wire_name, &fp])?,
        None => tx.query_opt(EXAMPLE_NO_FINGERPRINT_SQL, &[&wire_name])?,
    };
    Ok(row.map(|r| r.try_get::<_, Option<String>>(0)).transpose()?.flatten())
}

pub(super) fn quarantine_rows(tx: &mut Tx<'_>) -> Result<Vec<QuarantineRow>> {
    tx.query(QUARANTINE_SQL, &[])?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get::<_, i64>(2)?.max(0) as u64,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
            ))
        })
        .collect()
}
