//! Queue latency on SQLite: the index probes of a latency read, each a range of a claim index
//! (`jobs_claim`, and `jobs_claim_wire` around a paused wire name), covering. The arithmetic
//! around pauses is the shared `store::health::latency`.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::super::jobs::CLAIM_NEXT_WIRE_NAME_SQL;
use super::SqliteStore;
use crate::error::Result;
use crate::model::Millis;
use crate::store::health::{latency, DueProbe, InForce};
use crate::store::QueueLatency;

/// Due Scheduled jobs of one queue: how many, and the earliest `due_at` among them. Ten ranges
/// of the claim index (`jobs_claim_priority (queue, priority, due_at) WHERE state =
/// 'scheduled'`), one per priority, covering, so the cost is the number of due jobs, never the
/// backlog waiting for later nor the terminal rows. Named with INDEXED BY because the planner
/// may otherwise prefer `jobs_active` and read every Scheduled row. `?1` is the queue, `?2` now.
pub const DUE_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim_priority \
                           WHERE state = 'scheduled' AND queue = ?1 \
                           AND priority IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9) AND due_at <= ?2";

/// Due Scheduled jobs of one wire name `?2` in queue `?1` at `?3`: how many, and the earliest
/// `due_at`. A range of `jobs_claim_wire (queue, wire_name, due_at) WHERE state = 'scheduled'`,
/// covering: what a paused wire name holds back in a queue costs one probe, and the oldest due
/// job among the names not paused one probe per name waiting in the queue, never a walk over
/// the paused backlog.
pub const DUE_WIRE_NAME_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim_wire \
                                     WHERE state = 'scheduled' AND queue = ?1 AND wire_name = ?2 AND due_at <= ?3";

impl SqliteStore {
    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        let now = self.now();
        self.read(|conn| {
            let pauses = self.pauses()?;
            let in_force = InForce::new(&pauses);
            let counts = self.counts()?;
            let mut held = BTreeMap::new();
            let mut probe = SqliteProbe(conn);
            counts.by_queue.keys().map(|q| latency(&mut probe, &counts, q, now, &in_force, &mut held)).collect()
        })
    }
}

/// [`DueProbe`] on an SQLite connection, inside the caller's read.
pub(super) struct SqliteProbe<'c>(pub(super) &'c Connection);

impl DueProbe for SqliteProbe<'_> {
    fn due(&mut self, queue: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        let (n, oldest): (i64, Option<Millis>) =
            self.0.prepare_cached(DUE_SQL)?.query_row(params![queue, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((n.max(0) as u64, oldest))
    }

    fn due_of(&mut self, queue: &str, wire_name: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        let (n, oldest): (i64, Option<Millis>) = self
            .0
            .prepare_cached(DUE_WIRE_NAME_SQL)?
            .query_row(params![queue, wire_name, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((n.max(0) as u64, oldest))
    }

    fn next_wire_name(&mut self, queue: &str, after: &str) -> Result<Option<String>> {
        Ok(self
            .0
            .prepare_cached(CLAIM_NEXT_WIRE_NAME_SQL)?
            .query_row(params![queue, after], |r| r.get::<_, String>(0))
            .optional()?)
    }
}
