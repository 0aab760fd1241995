//! Faults only a database server has. The server ends a worker's connections mid-drain
//! (`pg_terminate_backend`, as a restart, a failover or a network cut would): the worker
//! reconnects on its next call and carries on; every job still ends Succeeded exactly once, the
//! counts stay exact, and the store errors it went through are in its stats. And roles: a worker
//! role with exactly the grants the README lists drains and sweeps; a role that may only read
//! opens the store read-only, and its writes exit 3.

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::{JobState, NewJob, RetryPolicy, Store};

use super::backend::{use_backend, Backend, TestDb};

const JOBS: usize = 600;

#[test]
fn a_worker_whose_connections_are_cut_mid_drain_reconnects_and_every_job_succeeds_once() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.enqueue_many(&(0..JOBS).map(|i| NewJob::new("work", "q", format!("{i}"))).collect::<Vec<_>>()).unwrap();
    // The engine's own connections carry a name of their own, so that only they are cut (the
    // test server is shared with other tests).
    let name = format!("cut_{}", std::process::id());
    let target = format!("{}&application_name={name}", db.arg());
    let mut registry = Registry::new();
    registry
        .handle::<u32>("work", |_, _| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        })
        .queue("q");
    let mut engine = Engine::new(target.as_str(), registry);
    engine.add_worker_group(WorkerGroup {
        name: "cut".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(20),
        retry_policy: RetryPolicy::new(5, Duration::ZERO).unwrap(),
        concurrency: 4,
        ..WorkerGroup::default()
    });
    let running = engine.start().unwrap();

    let mut killer = postgres::Client::connect(db.arg(), postgres::NoTls).unwrap();
    let started = Instant::now();
    let mut cut = 0;
    loop {
        let done = store.counts().unwrap().total(JobState::Succeeded);
        if done >= JOBS as u64 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the drain stalled at {done} of {JOBS}");
        let n = killer
            .query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", &[&name])
            .unwrap()
            .len();
        cut += n;
        std::thread::sleep(Duration::from_millis(60));
    }
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5));
    assert!(cut > 0, "no connection was cut: the test proved nothing");
    assert!(stats.iter().map(|s| s.errors).sum::<u64>() > 0, "the engine saw no store error: {stats:?}");

    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    let counts = store.counts().unwrap();
    assert_eq!(counts.total(JobState::Succeeded), JOBS as u64, "{counts:?}");
    let page = store.list_jobs(&backwave::store::JobFilter::state(JobState::Succeeded), JOBS, 0).unwrap();
    for job in &page.jobs {
        let outcomes = store.history(job.id).unwrap().into_iter().filter(|t| t.to == JobState::Succeeded).count();
        assert_eq!(outcomes, 1, "job {} succeeded {outcomes} times", job.id);
    }
    eprintln!("connection loss: {cut} connections cut; {stats:?}");
}

/// A login role for this test only, dropped (with what it owns and its grants) afterwards.
struct Role {
    admin: String,
    name: String,
}

impl Role {
    fn new(db: &TestDb, tag: &str, grants: &str) -> Role {
        let name = format!("bw_{tag}_{}", std::process::id());
        let schema = db.schema().unwrap();
        let mut c = postgres::Client::connect(db.arg(), postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "DROP ROLE IF EXISTS {name}; CREATE ROLE {name} LOGIN; GRANT USAGE ON SCHEMA {schema} TO {name}; {}",
            grants.replace("{role}", &name)
        ))
        .unwrap();
        Role { admin: db.arg().to_string(), name }
    }

    /// The test's URL, logged in as this role.
    fn url(&self) -> String {
        self.admin.replacen("user=postgres", &format!("user={}", self.name), 1)
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP OWNED BY {0}; DROP ROLE IF EXISTS {0}", self.name));
        }
    }
}

#[test]
fn a_worker_role_with_the_readmes_grants_drains_and_sweeps_and_a_read_only_role_only_reads() {
    let _g = use_backend(Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin("alice").unwrap();
    store.set_setting("alice", backwave::store::SettingKey::Retention, "1ms").unwrap();
    store.enqueue_many(&(0..50).map(|i| NewJob::new("work", "q", format!("{i}"))).collect::<Vec<_>>()).unwrap();
    // A limit in force that never binds: every claim reads it, counts under it and charges its
    // rate window, with the worker's grants.
    let spec = backwave::store::LimitSpec {
        concurrency: Some(1000),
        rate: Some(backwave::store::Rate::parse("100000/s").unwrap()),
    };
    store.set_limit("alice", backwave::store::PauseKind::WireName, "work", &spec, None).unwrap();

    // README "Running on PostgreSQL": what a worker role needs, and nothing more.
    let worker = Role::new(
        &db,
        "worker",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON jobs, transitions, workers, job_counts, job_count_deltas,
                                                  limit_windows TO {role};
         GRANT SELECT ON backwave_schema, settings, pauses, limits TO {role};",
    );
    let mut registry = Registry::new();
    registry.handle::<u32>("work", |_, _| Ok(())).queue("q");
    let mut engine = Engine::new(worker.url().as_str(), registry);
    engine.sweep_interval(Duration::from_millis(50));
    engine.add_worker_group(WorkerGroup {
        name: "restricted".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(20),
        ..WorkerGroup::default()
    });
    let running = engine.start().unwrap();
    let started = Instant::now();
    // Drained, then swept away by the retention sweep (1 ms), all under the worker's role.
    while store.counts().unwrap().total(JobState::Succeeded) > 0 || store.count_jobs(&Default::default()).unwrap() > 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "stalled: {:?}", running.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5));
    assert_eq!(stats.iter().map(|s| s.succeeded).sum::<u64>(), 50, "{stats:?}");
    assert_eq!(stats.iter().map(|s| s.errors).sum::<u64>(), 0, "the worker role lacked a grant: {stats:?}");
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());

    // A role that may only read opens the store read-only: reads work, writes exit 3.
    let reader = Role::new(
        &db,
        "reader",
        "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role};".replace("{schema}", db.schema().unwrap()).as_str(),
    );
    store.enqueue(&NewJob::new("work", "q", "1")).unwrap();
    let bw = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bw")).env("BW_DB", reader.url()).args(args).output().unwrap()
    };
    let list = bw(&["jobs", "list", "--state", "scheduled"]);
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    assert!(String::from_utf8_lossy(&list.stdout).contains("work"));
    let cancel = bw(&["cancel", "--state", "scheduled", "--yes"]);
    let stderr = String::from_utf8_lossy(&cancel.stderr);
    assert_eq!(cancel.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("read-only"), "{stderr}");
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 1, "nothing changed");
}
