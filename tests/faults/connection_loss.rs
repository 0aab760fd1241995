//! PostgreSQL only: the server ends a worker's connections mid-drain (`pg_terminate_backend`, as
//! a server restart, a failover or a network cut would). The worker reconnects on its next call
//! and carries on: every job still ends Succeeded exactly once, the counts stay exact, and the
//! store errors it went through are in its stats.

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
