//! The job store as its users meet it: the engine's claim / heartbeat / complete / reap path,
//! the operator's requeue / cancel / purge, opening files that are not stores, and the
//! `schema.sql` contract as another program (the `sqlite3` shell) writes it.
//!
//! Time is a manual clock everywhere, so leases lapse when a test says so and never by accident.
//! Tests in `both_backends!` run once on an SQLite file and once on PostgreSQL (`name::sqlite`,
//! `name::postgres`); the others are about SQLite files and run on SQLite only.

#[path = "store/async_enqueue.rs"]
mod async_enqueue;
use crate::backend;
#[path = "store/contract.rs"]
mod contract;
#[path = "store/filter.rs"]
mod filter;
#[path = "store/hostile.rs"]
mod hostile;
#[path = "store/in_tx.rs"]
mod in_tx;
#[path = "store/incident.rs"]
mod incident;
#[path = "store/lifecycle.rs"]
mod lifecycle;
#[path = "store/limits.rs"]
mod limits;
#[path = "store/log.rs"]
mod log;
#[path = "store/open.rs"]
mod open;
#[path = "store/operator.rs"]
mod operator;
#[path = "store/output.rs"]
mod output;
#[path = "store/payloads.rs"]
mod payloads;
#[path = "store/plan.rs"]
mod plan;
#[path = "store/postgres.rs"]
mod postgres_only;
use crate::programs;
#[path = "store/priority.rs"]
mod priority;
#[path = "store/retry.rs"]
mod retry;
#[path = "store/schedules.rs"]
mod schedules;
#[path = "store/server.rs"]
mod server;
#[path = "store/show.rs"]
mod show;
#[path = "store/snapshot.rs"]
mod snapshot;
#[path = "store/unique.rs"]
mod unique;

use std::path::PathBuf;
use std::time::Duration;

use backend::TestDb;

use backwave::store::{ClaimRequest, Completion, Fenced, Outcome};
use backwave::{Clock, Job, JobId, JobState, NewJob, RetryPolicy, Store};

/// 2026-01-01T00:00:00Z: far from 0 so that "due now" and "finished 14 days ago" are ordinary numbers.
pub const T0: i64 = 1_767_225_600_000;
pub const ADMIN: &str = "alice";
pub const WORKER: &str = "0192f3a1-0000-7000-8000-00000000000a";
pub const OTHER_WORKER: &str = "0192f3a1-0000-7000-8000-00000000000b";
pub const LEASE: Duration = Duration::from_secs(60);

/// A fresh store on the test's backend (a file in its own folder, or a schema of its own), on a
/// manual clock, with `alice` as admin. Fields drop in order: the store's connections close
/// before its schema is dropped.
pub struct Fixture {
    pub store: Store,
    pub clock: Clock,
    pub db: TestDb,
    /// Held, never read: the folder (and an SQLite store in it) lives as long as the fixture.
    _dir: tempfile::TempDir,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let clock = Clock::manual(T0);
        let store = Store::create(&db).unwrap().with_clock(clock.clone());
        assert!(store.bootstrap_admin(ADMIN).unwrap());
        Fixture { store, clock, db, _dir: dir }
    }

    /// Register a live worker `id` on `host`, of group "g", serving "email" on "mail", as of
    /// the store's now.
    pub fn register_worker(&self, id: &str, host: &str) {
        let now = self.store.now();
        let info = backwave::WorkerInfo {
            id: id.into(),
            group: "g".into(),
            host: host.into(),
            pid: 1,
            wire_names: vec!["email".into()],
            queues: vec!["mail".into()],
            started_at: now,
            last_heartbeat_at: now,
            stale_after_ms: 30_000,
        };
        self.store.register_worker(&info).unwrap();
    }

    /// The SQLite file (tests about files only).
    pub fn path(&self) -> PathBuf {
        self.db.file().to_path_buf()
    }

    pub fn enqueue(&self, wire_name: &str, queue: &str) -> JobId {
        self.store.enqueue(&NewJob::new(wire_name, queue, br#"{"n":1}"#.to_vec())).unwrap()
    }

    /// Claim up to `limit` due jobs of `queue` as `worker` under `policy`.
    pub fn claim_as(&self, worker: &str, queue: &str, limit: usize, policy: &RetryPolicy) -> Vec<Job> {
        let queues = [queue.to_string()];
        self.store
            .claim(&ClaimRequest {
                worker_id: worker,
                group: "default",
                queues: &queues,
                limit,
                lease: LEASE,
                policy,
                handler_policies: &[],
            })
            .unwrap()
    }

    /// Claim the one due job of `queue` as [`WORKER`]; panics if there is none.
    pub fn claim_one(&self, queue: &str, policy: &RetryPolicy) -> Job {
        let mut jobs = self.claim_as(WORKER, queue, 1, policy);
        assert_eq!(jobs.len(), 1, "expected one due job in queue {queue}");
        jobs.remove(0)
    }

    pub fn report(&self, job: &Job, outcome: Outcome) -> Fenced {
        self.report_as(job.lease_owner.as_deref().unwrap(), job.id, job.attempt, outcome)
    }

    /// End the claimed `jobs` in one batch, as [`Fixture::report`] ends one: job `i` with
    /// `outcome(i, job)`.
    pub fn report_all(&self, jobs: &[Job], outcome: impl Fn(usize, &Job) -> Outcome) {
        let ends: Vec<Completion> = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| Completion {
                job_id: j.id,
                worker_id: j.lease_owner.clone().unwrap(),
                attempt: j.attempt,
                outcome: outcome(i, j),
            })
            .collect();
        self.store.complete_many(&ends).unwrap();
    }

    /// Enqueue `jobs` (all of queue `queue`), claim them all as [`WORKER`] with one attempt
    /// each, and end them in one batch: job `i` of the claim with `outcome(i, job)`. Returns the
    /// claimed jobs, in claim order.
    pub fn ended(&self, queue: &str, jobs: &[NewJob], outcome: impl Fn(usize, &Job) -> Outcome) -> Vec<Job> {
        self.store.enqueue_many(jobs).unwrap();
        let claimed = self.claim_as(WORKER, queue, jobs.len(), &policy(1, Duration::from_secs(1)));
        assert_eq!(claimed.len(), jobs.len(), "every job enqueued was claimed");
        self.report_all(&claimed, outcome);
        claimed
    }

    pub fn report_as(&self, worker: &str, id: JobId, attempt: u32, outcome: Outcome) -> Fenced {
        self.store.complete(&Completion { job_id: id, worker_id: worker.to_string(), attempt, outcome }).unwrap()
    }

    pub fn job(&self, id: JobId) -> Job {
        self.store.job(id).unwrap().expect("job exists")
    }

    /// Assert the database is sound: integrity_check and foreign_key_check clean, and the
    /// trigger-kept counts equal a real GROUP BY.
    pub fn assert_sound(&self) {
        assert_eq!(self.store.check_integrity().unwrap(), Vec::<String>::new());
        assert_counts_exact(&self.store);
    }
}

pub fn failed(message: &str) -> Outcome {
    Outcome::Failed { message: message.to_string(), detail: None, retry_in: None }
}

pub fn policy(max_attempts: u32, wait: Duration) -> RetryPolicy {
    RetryPolicy::new(max_attempts, wait).unwrap()
}

/// `job_counts` (kept by triggers) against counting every row.
pub fn assert_counts_exact(store: &Store) {
    let rows = |sql: &str| -> Vec<(String, String, i64)> {
        store
            .raw_query(sql, &[])
            .unwrap()
            .into_iter()
            .map(|r| (r[0].as_str().to_string(), r[1].as_str().to_string(), r[2].as_i64()))
            .collect()
    };
    let mut real = rows("SELECT queue, state, count(*) FROM jobs GROUP BY queue, state");
    // On PostgreSQL the triggers append per-statement deltas, folded into job_counts now and
    // then: the count is the two added up.
    let mut kept = match backend::current() {
        backend::Backend::Sqlite => rows("SELECT queue, state, n FROM job_counts WHERE n != 0"),
        backend::Backend::Postgres => rows(
            "SELECT queue, state, sum(n)::bigint FROM (SELECT queue, state, n FROM job_counts
                 UNION ALL SELECT queue, state, d FROM job_count_deltas) c
             GROUP BY queue, state HAVING sum(n) <> 0",
        ),
    };
    real.sort();
    kept.sort();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    assert_eq!(kept, real, "job_counts drifted from the jobs table");
    // And the library's view of them.
    let counts = store.counts().unwrap();
    for (queue, state, n) in &real {
        let state: JobState = state.parse().unwrap();
        assert_eq!(counts.by_queue[queue][&state], *n as u64, "{queue} {state}");
    }
}
