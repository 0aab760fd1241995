//! Stores for the health tests, written row by row through the schema contract (as another
//! program would), so each test sets exactly the due times, finish times and heartbeats it judges.

use std::cell::Cell;
use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use backwave::store::{Health, PauseKind, ResumeResult, Thresholds};
use backwave::{cause_fingerprint, Clock, Store, WorkerInfo};
use tempfile::TempDir;

/// 2026-11-30T12:00:00Z: the instant every test stands at (`BW_NOW` for the binary).
pub const NOW: i64 = 1_796_040_000_000;
pub const NOW_TEXT: &str = "2026-11-30T12:00:00Z";
pub const SECOND: i64 = 1_000;
pub const MINUTE: i64 = 60 * SECOND;
pub const HOUR: i64 = 60 * MINUTE;
/// Who pauses in these tests.
pub const ADMIN: &str = "alice";

pub struct Fx {
    _dir: TempDir,
    pub db: PathBuf,
    pub store: Store,
    next: Cell<u64>,
}

impl Fx {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("health.db");
        let store = Store::create(&db).unwrap().with_clock(Clock::manual(NOW));
        Fx { _dir: dir, db, store, next: Cell::new(1) }
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
        self.store
            .raw_execute(
                "INSERT INTO jobs (id, wire_name, queue, state, due_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'scheduled', ?4, ?4, ?4)",
                &[(&id).into(), wire_name.into(), queue.into(), due_at.into()],
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
        self.store
            .raw_execute(
                "INSERT INTO jobs (id, wire_name, queue, state, attempt, max_attempts, due_at, terminal_cause,
                                   cause_fingerprint, created_at, updated_at, finished_at)
                 VALUES (?1, ?2, 'default', 'dead-lettered', 3, 3, ?3, ?4, ?5, ?3, ?3, ?3)",
                &[
                    self.id().into(),
                    wire_name.into(),
                    finished_at.into(),
                    cause.into(),
                    cause_fingerprint(cause).into(),
                ],
            )
            .unwrap();
    }

    /// A job of `wire_name` Quarantined `no-handler` at `finished_at`.
    pub fn quarantined(&self, wire_name: &str, finished_at: i64) {
        let cause = format!("no handler is registered for wire name '{wire_name}'");
        self.store
            .raw_execute(
                "INSERT INTO jobs (id, wire_name, queue, state, attempt, due_at, terminal_cause, cause_fingerprint,
                                   quarantine_reason, created_at, updated_at, finished_at)
                 VALUES (?1, ?2, 'default', 'quarantined', 1, ?3, ?4, ?5, 'no-handler', ?3, ?3, ?3)",
                &[
                    self.id().into(),
                    wire_name.into(),
                    finished_at.into(),
                    (&cause).into(),
                    cause_fingerprint(&cause).into(),
                ],
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
