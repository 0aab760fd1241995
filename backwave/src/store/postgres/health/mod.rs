//! The store's health on PostgreSQL: [`PgStore::health`] reads everything the report needs in one
//! REPEATABLE READ snapshot and hands it to the shared `store::health::gather`, which puts the
//! report together and judges it exactly as on SQLite. This file owns the snapshot's reads of
//! the pauses, counts and the log's sequence (each a function of a transaction, so the
//! operations `pauses` and `counts` can be one of them in a read; the registry's `workers`, read
//! the same way, is `jobs.rs`'s, beside the registry); the latency probes live in `latency.rs`,
//! the dead-letter and quarantine groups in `groups.rs`. Every query is answered from an index
//! or the trigger-kept counts (no hints needed: each one's `WHERE` implies its partial index's
//! predicate), never a scan of the jobs.

mod groups;
mod latency;

use super::jobs::workers;
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{JobState, Millis, WorkerInfo};
use crate::store::health::{gather, DueProbe, Group, HealthRead};
use crate::store::ops::groups::QuarantineRow;
use crate::store::{Health, Pause, PauseKind, StateCounts, Thresholds};

impl PgStore {
    pub fn health(&self, thresholds: &Thresholds) -> Result<Health> {
        self.read(|tx| {
            let now = tx.now()?;
            gather(&mut Snapshot { tx, now, version: self.version }, now, thresholds)
        })
    }
}

/// One read transaction and its instant: what a health read, a latency read or a group read
/// asks of PostgreSQL.
pub(super) struct Snapshot<'t, 'a> {
    pub(super) tx: &'t mut Tx<'a>,
    pub(super) now: Millis,
    /// The store's schema version (the `schedules` table is there from version 7 on).
    pub(super) version: i64,
}

/// The pauses in force at `now`, queues first, then by name (`queue` sorts before `wire-name`).
const PAUSES_SQL: &str = "SELECT kind, name, paused_by, paused_at, until FROM pauses \
                          WHERE until IS NULL OR until > $1 ORDER BY kind, name";

/// Jobs by queue and state: the folded counts plus the deltas not folded yet, exact at the
/// snapshot because a fold moves rows from one table to the other in one transaction.
const COUNTS_SQL: &str = "SELECT queue, state, sum(n)::bigint FROM (
                              SELECT queue, state, n FROM job_counts
                              UNION ALL SELECT queue, state, d FROM job_count_deltas) c
                          GROUP BY queue, state HAVING sum(n) <> 0";

/// The log's sequence: the identity's last value (it never goes back, even when the retention
/// sweep deleted every entry; read only where the role may), or the highest entry.
const LOG_SEQ_SQL: &str = "SELECT greatest(
        (SELECT CASE WHEN has_sequence_privilege(s, 'SELECT') THEN pg_sequence_last_value(s) END
           FROM (SELECT pg_get_serial_sequence('transitions', 'seq')::regclass AS s) q),
        (SELECT max(seq) FROM transitions), 0)";

/// The pauses in force at `now`, queues first, then by name, as of `tx`. Here rather than in
/// `operator.rs` because a health read needs them inside its own snapshot; `PgStore::pauses`
/// can be this in a read.
pub(in crate::store::postgres) fn pauses(tx: &mut Tx<'_>, now: Millis) -> Result<Vec<Pause>> {
    let rows = tx.query(PAUSES_SQL, &[&now])?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        // A kind another program wrote that this build does not know holds nothing here.
        let Some(kind) = PauseKind::parse(r.try_get(0)?) else { continue };
        out.push(Pause {
            kind,
            name: r.try_get(1)?,
            paused_by: r.try_get(2)?,
            paused_at: r.try_get(3)?,
            until: r.try_get(4)?,
        });
    }
    Ok(out)
}

/// Jobs by queue and state as of `tx` (folded counts plus unfolded deltas). `PgStore::counts`
/// can be this in a read.
pub(in crate::store::postgres) fn counts(tx: &mut Tx<'_>) -> Result<StateCounts> {
    let mut counts = StateCounts::default();
    for r in tx.query(COUNTS_SQL, &[])? {
        let (queue, state, n): (String, String, i64) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
        if let Ok(state) = state.parse::<JobState>() {
            counts.by_queue.entry(queue).or_default().insert(state, n.max(0) as u64);
        }
    }
    Ok(counts)
}

impl HealthRead for Snapshot<'_, '_> {
    fn limits(&mut self, now: Millis) -> Result<Vec<crate::store::LimitStatus>> {
        super::limit::read_statuses(self.tx, now)
    }

    fn worker_states(&mut self, now: Millis) -> Result<Vec<crate::store::WorkerState>> {
        super::limit::read_states(self.tx, now)
    }

    fn pauses(&mut self) -> Result<Vec<Pause>> {
        pauses(self.tx, self.now)
    }

    fn counts(&mut self) -> Result<StateCounts> {
        counts(self.tx)
    }

    fn workers(&mut self) -> Result<Vec<WorkerInfo>> {
        workers(self.tx)
    }

    fn cause_groups(&mut self) -> Result<Vec<Group>> {
        groups::all_cause_groups(self.tx)
    }

    fn example(&mut self, wire_name: &str, fingerprint: Option<&str>) -> Result<Option<String>> {
        groups::example(self.tx, wire_name, fingerprint)
    }

    fn quarantine_rows(&mut self) -> Result<Vec<QuarantineRow>> {
        groups::quarantine_rows(self.tx)
    }

    fn dead_since(&mut self, since: Millis) -> Result<u64> {
        let n: i64 = self.tx.query_one(groups::DEAD_SINCE_SQL, &[&since])?.try_get(0)?;
        Ok(n.max(0) as u64)
    }

    fn log_seq(&mut self) -> Result<i64> {
        Ok(self.tx.query_one(LOG_SEQ_SQL, &[])?.try_get(0)?)
    }

    fn schedule_rows(&mut self) -> Result<Vec<crate::store::ScheduleRow>> {
        if self.version < 7 {
            return Ok(Vec::new());
        }
        crate::store::postgres::schedules::select_rows(self.tx, self.version, None)
    }

    fn payload_limit(&mut self) -> Result<u64> {
        super::admin::payload_limit(self.tx)
    }

    fn stuck_workflows(&mut self) -> Result<Vec<crate::store::health::StuckWorkflow>> {
        if self.version < 18 {
            return Ok(Vec::new());
        }
        self.tx
            .query(crate::store::health::STUCK_WORKFLOWS_SQL, &[])?
            .iter()
            .map(|r| {
                Ok(crate::store::health::StuckWorkflow {
                    id: crate::WorkflowId(r.try_get(0)?),
                    name: r.try_get(1)?,
                    stuck: r.try_get::<_, i64>(2)?.max(0) as u64,
                })
            })
            .collect()
    }
}

// The latency probes, for `gather`'s per-queue latency.
impl DueProbe for Snapshot<'_, '_> {
    fn due(&mut self, queue: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        latency::due(self.tx, queue, now)
    }

    fn due_of(&mut self, queue: &str, wire_name: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        latency::due_of(self.tx, queue, wire_name, now)
    }

    fn next_wire_name(&mut self, queue: &str, after: &str) -> Result<Option<String>> {
        latency::next_wire_name(self.tx, queue, after)
    }
}
