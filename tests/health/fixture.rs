//! Stores for the health tests, written row by row through the schema contract (as another
//! program would), so each test sets exactly the due times, finish times and heartbeats it judges.
//! The store is on the test's backend (`crate::backend`); the rows are SQL both databases read
//! alike (values written as literals: a text bound to a `uuid` column is SQLite's habit only).

use std::cell::Cell;
use std::time::Duration;

use assert_cmd::Command;
use backwave::store::{Health, PauseKind, ResumeResult, Thresholds};
use backwave::{cause_fingerprint, Clock, Store, WorkerInfo};
use tempfile::TempDir;

use crate::backend::TestDb;

/// 2026-11-30T12:00:00Z: the instant every test stands at (`BW_NOW` for the binary).
pub const NOW: i64 = 1_796_040_000_000;
pub const NOW_TEXT: &str = "2026-11-30T12:00:00Z";
pub const SECOND: i64 = 1_000;
pub const MINUTE: i64 = 60 * SECOND;
pub const HOUR: i64 = 60 * MINUTE;
/// Who pauses in these tests.
pub const ADMIN: &str = "alice";

/// `text` as an SQL string literal.
pub fn lit(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Fields drop in order: the store's connections close before its schema is dropped.
pub struct Fx {
    pub store: Store,
    next: Cell<u64>,
    pub db: TestDb,
    _dir: TempDir,
}

impl Fx {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "health.db");
        let store = Store::create(&db).unwrap().with_clock(Clock::manual(NOW));
        Fx { store, next: Cell::new(1), db, _dir: dir }
    }

    /// The folder the SQLite file is in (tests about files).
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    fn id(&self) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("00000000-0000-7000-8000-{n:012x}")
    }

    /// A Scheduled `send-email` job of `queue` due at `due_at`.
    pub fn scheduled(&self, queue: &str, due_at: i64) -> String {
        self.scheduled_as(queue, "send-email", due_at)
    }

    /// A Scheduled job of `queue` with `wire_name`, due at `due_at`.
    pub fn scheduled_as(&self, queue: &str, wire_name: &str, due_at: i64) -> String {
        let id = self.id();
        let (wire_name, queue) = (lit(wire_name), lit(queue));
        self.store
            .raw_execute(
                &format!(
                    "INSERT INTO jobs (id, wire_name, queue, state, due_at, created_at, updated_at)
                     VALUES ('{id}', {wire_name}, {queue}, 'scheduled', {due_at}, {due_at}, {due_at})"
                ),
                &[],
            )
            .unwrap();
        id
    }

    /// Pause a queue or wire name as `alice` (an admin), now, until `until` or resumed.
    pub fn pause(&self, kind: PauseKind, name: &str, until: Option<i64>) {
        self.store.bootstrap_admin(ADMIN).unwrap();
        self.store.pause(ADMIN, kind, name, until, true).unwrap();
    }

    pub fn resume(&self, kind: PauseKind, name: &str) {
        assert_eq!(self.store.resume(ADMIN, kind, name).unwrap(), ResumeResult::Resumed);
    }

    /// A Dead-Lettered job of `wire_name` that ended with `cause` at `finished_at`.
    pub fn dead(&self, wire_name: &str, cause: &str, finished_at: i64) {
        let (id, wire_name, at) = (self.id(), lit(wire_name), finished_at);
        let (fingerprint, cause) = (lit(&cause_fingerprint(cause)), lit(cause));
        self.store
            .raw_execute(
                &format!(
                    "INSERT INTO jobs (id, wire_name, queue, state, attempt, max_attempts, due_at, terminal_cause,
                                       cause_fingerprint, created_at, updated_at, finished_at)
                     VALUES ('{id}', {wire_name}, 'default', 'dead-lettered', 3, 3, {at}, {cause}, {fingerprint},
                             {at}, {at}, {at})"
                ),
                &[],
            )
            .unwrap();
    }

    /// A job of `wire_name` Quarantined `no-handler` at `finished_at`.
    pub fn quarantined(&self, wire_name: &str, finished_at: i64) {
        let cause = format!("no handler is registered for wire name '{wire_name}'");
        let (id, wire_name, at) = (self.id(), lit(wire_name), finished_at);
        let (fingerprint, cause) = (lit(&cause_fingerprint(&cause)), lit(&cause));
        self.store
            .raw_execute(
                &format!(
                    "INSERT INTO jobs (id, wire_name, queue, state, attempt, due_at, terminal_cause, cause_fingerprint,
                                       quarantine_reason, created_at, updated_at, finished_at)
                     VALUES ('{id}', {wire_name}, 'default', 'quarantined', 1, {at}, {cause}, {fingerprint},
                             'no-handler', {at}, {at}, {at})"
                ),
                &[],
            )
            .unwrap();
    }

    /// A registered worker serving `queues` and `wire_names`, last heard from at `heartbeat`
    /// (stale 30 s after it).
    pub fn worker(&self, id: &str, queues: &[&str], wire_names: &[&str], heartbeat: i64) {
        self.store
            .register_worker(&WorkerInfo {
                id: id.into(),
                group: "group".into(),
                host: "host".into(),
                pid: 42,
                wire_names: wire_names.iter().map(|s| s.to_string()).collect(),
                queues: queues.iter().map(|s| s.to_string()).collect(),
                started_at: heartbeat,
                last_heartbeat_at: heartbeat,
                stale_after_ms: 30_000,
            })
            .unwrap();
    }

    pub fn health(&self) -> Health {
        self.store.health(&Thresholds::default()).unwrap()
    }

    /// The clock moves; the rows stay.
    pub fn advance(&self, by: Duration) {
        self.store.clock().advance(by);
    }

    /// `bw` against this store at NOW.
    pub fn bw(&self) -> Command {
        let mut c = Command::cargo_bin("bw").unwrap();
        c.env("BW_DB", &self.db).env("BW_NOW", NOW_TEXT).env("COLUMNS", "200").env_remove("NO_COLOR");
        c.timeout(Duration::from_secs(60));
        c
    }
}
