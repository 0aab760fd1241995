//! Queue latency on PostgreSQL: the index probes behind it (ranges of `jobs_claim_priority`, and of
//! `jobs_claim_wire` around a paused wire name), and [`PgStore::queue_latency`], which reads the
//! pauses, the counts and the probes in one snapshot and leaves the arithmetic around pauses to
//! the shared `store::health::latency`.

use std::collections::BTreeMap;

use super::{PgStore, Snapshot, Tx};
use crate::error::Result;
use crate::model::Millis;
use crate::store::health::{latency, InForce};
use crate::store::QueueLatency;

/// [`crate::store::DUE_SQL`] on PostgreSQL: the due Scheduled jobs of queue `$1` at `$2`, how many
/// and the earliest `due_at`. Its `WHERE` implies `jobs_claim_priority`'s predicate, and the
/// array of priorities makes the index one range `(queue, priority, due_at <= $2)` per priority,
/// index-only: a range over every priority at once would read each priority's future jobs too.
pub(crate) const DUE_SQL: &str = "SELECT count(*), min(due_at) FROM jobs WHERE state = 'scheduled' AND queue = $1 \
     AND priority = ANY ('{0,1,2,3,4,5,6,7,8,9}'::bigint[]) AND due_at <= $2";

/// [`crate::store::DUE_WIRE_NAME_SQL`] on PostgreSQL: the same for wire name `$2` of queue `$1` at
/// `$3`, a range of `jobs_claim_wire`.
pub(crate) const DUE_WIRE_NAME_SQL: &str = "SELECT count(*), min(due_at) FROM jobs \
     WHERE state = 'scheduled' AND queue = $1 AND wire_name = $2 AND due_at <= $3";

/// The first wire name after `$2` among the Scheduled jobs of queue `$1`: one probe of
/// `jobs_claim_wire`, so the names waiting in a queue are visited once each, however many jobs
/// each has.
pub(crate) const NEXT_WIRE_NAME_SQL: &str = "SELECT wire_name FROM jobs \
     WHERE state = 'scheduled' AND queue = $1 AND wire_name > $2 ORDER BY wire_name LIMIT 1";

impl PgStore {
    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        self.read(|tx| {
            let now = tx.now()?;
            let pauses = super::pauses(tx, now)?;
            let in_force = InForce::new(&pauses);
            let counts = super::counts(tx)?;
            let mut snapshot = Snapshot { tx, now, version: 0 };
            let mut held = BTreeMap::new();
            counts.by_queue.keys().map(|q| latency(&mut snapshot, &counts, q, now, &in_force, &mut held)).collect()
        })
    }
}

pub(super) fn due(tx: &mut Tx<'_>, queue: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
    let r = tx.query_one(DUE_SQL, &[&queue, &now])?;
    Ok((r.try_get::<_, i64>(0)?.max(0) as u64, r.try_get(1)?))
}

pub(super) fn due_of(tx: &mut Tx<'_>, queue: &str, wire_name: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
    let r = tx.query_one(DUE_WIRE_NAME_SQL, &[&queue, &wire_name, &now])?;
    Ok((r.try_get::<_, i64>(0)?.max(0) as u64, r.try_get(1)?))
}

pub(super) fn next_wire_name(tx: &mut Tx<'_>, queue: &str, after: &str) -> Result<Option<String>> {
    Ok(tx.query_opt(NEXT_WIRE_NAME_SQL, &[&queue, &after])?.map(|r| r.try_get(0)).transpose()?)
}
