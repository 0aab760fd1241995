//! Stores for the `bw` tests, built through the library or loaded from fixtures/hostile.sql,
//! and a `bw` command with the clock, width and colour pinned.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use backwave::store::{current_actor, ClaimRequest, Completion, Outcome};
use backwave::{Clock, NewJob, RetryPolicy, Store};
use tempfile::TempDir;

/// The instant fixtures/hostile.sql is built around.
pub const T: &str = "2026-11-30T12:00:00Z";
pub const T_MS: i64 = 1_796_040_000_000;

pub struct Fixture {
    /// Held so the directory lives as long as the fixture.
    pub _dir: TempDir,
    pub db: PathBuf,
}

impl Fixture {
    pub fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bw.db");
        Fixture { _dir: dir, db }
    }

    /// fixtures/hostile.sql: 33 jobs in every state, hostile text, no grants.
    pub fn hostile() -> Self {
        let f = Fixture::empty();
        let store = Store::create(&f.db).unwrap();
        store.connection().execute_batch(include_str!("../../fixtures/hostile.sql")).unwrap();
        f
    }

    /// The hostile store with the user running the tests as admin.
    pub fn hostile_admin() -> Self {
        let f = Fixture::hostile();
        f.store().bootstrap_admin(&current_actor()).unwrap();
        f
    }

    /// The hostile store whose admin is someone else: the test user holds nothing.
    pub fn hostile_stranger() -> Self {
        let f = Fixture::hostile();
        f.store().bootstrap_admin("someone-else").unwrap();
        f
    }

    pub fn store(&self) -> Store {
        Store::open(&self.db).unwrap().with_clock(Clock::manual(T_MS))
    }

    /// `bw` against this store.
    pub fn bw(&self) -> Command {
        bw_at(&self.db)
    }

    /// Grant the test user `permission`, as the other admin.
    pub fn grant_me(&self, permission: backwave::Permission) {
        self.store().grant("someone-else", &current_actor(), permission).unwrap();
    }
}

pub fn bw_at(db: &Path) -> Command {
    let mut c = Command::cargo_bin("bw").unwrap();
    c.env("BW_DB", db).env("BW_NOW", T).env("COLUMNS", "120").env_remove("NO_COLOR").timeout(Duration::from_secs(60));
    c
}

/// `n` Dead-Lettered jobs of `wire_name`, made the way the engine makes them: enqueue, claim
/// under a one-attempt policy, fail.
pub fn dead_letter(store: &Store, wire_name: &str, n: usize) {
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let queues = vec!["default".to_string()];
    let mut left = n;
    while left > 0 {
        let k = left.min(500);
        let jobs: Vec<NewJob> = (0..k).map(|i| NewJob::new(wire_name, "default", format!("{{\"n\":{i}}}"))).collect();
        store.enqueue_many(&jobs).unwrap();
        let claimed = store
            .claim(&ClaimRequest {
                worker_id: "w-test",
                group: "test",
                queues: &queues,
                limit: k,
                lease: Duration::from_secs(60),
                policy: &policy,
            })
            .unwrap();
        let done: Vec<Completion> = claimed
            .iter()
            .map(|j| Completion {
                job_id: j.id,
                worker_id: "w-test".into(),
                attempt: j.attempt,
                outcome: Outcome::Failed { message: format!("gateway timeout (job {})", j.id), detail: None },
            })
            .collect();
        store.complete_many(&done).unwrap();
        left -= k;
    }
}

pub fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

pub fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec()).unwrap()
}

/// No byte that a terminal would act on: ESC, BEL, CR, DEL, C1 (as UTF-8), bidi overrides.
pub fn assert_inert(out: &str) {
    for (i, c) in out.chars().enumerate() {
        let bad = (c.is_control() && c != '\n') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        assert!(!bad, "control character U+{:04X} at char {i} in output:\n{out}", c as u32);
    }
}
