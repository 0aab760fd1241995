//! The store's health on SQLite: the reads of [`HealthRead`], all inside one read transaction,
//! handed to the shared `store::health::gather`, which puts the report together and judges it
//! for both backends. The cause groups and quarantines are `groups.rs`, the latency probes
//! `latency.rs`.

mod groups;
mod latency;

pub use self::groups::DEAD_SINCE_SQL;
use self::groups::{cause_groups, dead_since, example, quarantine_rows};
use self::latency::SqliteProbe;
pub use self::latency::{DUE_SQL, DUE_WIRE_NAME_SQL};
use rusqlite::Connection;

use super::SqliteStore;
use crate::error::Result;
use crate::model::{Millis, WorkerInfo};
use crate::store::health::{gather, DueProbe, Group, HealthRead, StuckWorkflow, STUCK_WORKFLOWS_SQL};
use crate::store::ops::groups::QuarantineRow;
use crate::store::{Health, LimitStatus, Pause, ScheduleRow, StateCounts, Thresholds, WorkerState};

impl SqliteStore {
    pub fn health(&self, thresholds: &Thresholds) -> Result<Health> {
        let now = self.now();
        self.read(|conn| gather(&mut SqliteHealth { store: self, conn }, now, thresholds))
    }
}

/// [`HealthRead`] inside an SQLite read transaction.
struct SqliteHealth<'a> {
    store: &'a SqliteStore,
    conn: &'a rusqlite::Connection,
}

impl DueProbe for SqliteHealth<'_> {
    fn due(&mut self, queue: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        SqliteProbe(self.conn).due(queue, now)
    }

    fn due_of(&mut self, queue: &str, wire_name: &str, now: Millis) -> Result<(u64, Option<Millis>)> {
        SqliteProbe(self.conn).due_of(queue, wire_name, now)
    }

    fn next_wire_name(&mut self, queue: &str, after: &str) -> Result<Option<String>> {
        SqliteProbe(self.conn).next_wire_name(queue, after)
    }
}

impl HealthRead for SqliteHealth<'_> {
    fn pauses(&mut self) -> Result<Vec<Pause>> {
        self.store.pauses()
    }

    fn counts(&mut self) -> Result<StateCounts> {
        self.store.counts()
    }

    fn workers(&mut self) -> Result<Vec<WorkerInfo>> {
        self.store.workers()
    }

    fn cause_groups(&mut self) -> Result<Vec<Group>> {
        cause_groups(self.conn)
    }

    fn example(&mut self, wire_name: &str, fingerprint: Option<&str>) -> Result<Option<String>> {
        example(self.conn, wire_name, fingerprint)
    }

    fn quarantine_rows(&mut self) -> Result<Vec<QuarantineRow>> {
        quarantine_rows(self.conn)
    }

    fn dead_since(&mut self, since: Millis) -> Result<u64> {
        dead_since(self.conn, since)
    }

    fn log_seq(&mut self) -> Result<i64> {
        log_seq(self.conn)
    }

    fn limits(&mut self, now: Millis) -> Result<Vec<LimitStatus>> {
        if self.store.version < 5 {
            return Ok(Vec::new());
        }
        super::limit::read_statuses(self.conn, now)
    }

    fn worker_states(&mut self, now: Millis) -> Result<Vec<WorkerState>> {
        if self.store.version < 5 {
            return Ok(Vec::new());
        }
        super::limit::read_states(self.conn, now)
    }

    fn schedule_rows(&mut self) -> Result<Vec<ScheduleRow>> {
        if self.store.version < 7 {
            return Ok(Vec::new());
        }
        super::schedules::select_rows(self.conn, self.store.version, None)
    }

    fn payload_limit(&mut self) -> Result<u64> {
        super::admin::payload_limit(self.conn)
    }

    fn stuck_workflows(&mut self) -> Result<Vec<StuckWorkflow>> {
        if self.store.version < 18 {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare_cached(STUCK_WORKFLOWS_SQL)?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
        rows.map(|r| {
            let (id, name, n) = r?;
            Ok(StuckWorkflow { id: id.parse()?, name, stuck: n as u64 })
        })
        .collect()
    }
}

/// The log's sequence: AUTOINCREMENT keeps the highest ever used in sqlite_sequence, so it holds
/// after the retention sweep deleted every entry; max(seq) covers a store whose sequence row
/// another program removed.
fn log_seq(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'transitions'), 0),
                    coalesce((SELECT max(seq) FROM transitions), 0))",
        )?
        .query_row([], |r| r.get(0))?)
}
