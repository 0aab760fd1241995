//! `BW_BENCH_ONLY=retry`: how late a retry starts after its due time (issue 40: a retry due in
//! 300 ms starts within 25 ms of it). On each backend, one idle `WorkerGroup::default()` (the
//! 250 ms poll as shipped, with a 300 ms retry delay) runs `BW_BENCH_RETRIES` jobs (default 30)
//! one after another; each fails its first attempt and succeeds its second. A job's lateness is
//! the time of the log entry that claimed attempt 2 minus the due time its failure wrote (the
//! job keeps it), both by the store's clock in milliseconds. Printed: p50, p90 and the maximum.

use std::path::Path;
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
use backwave::{JobState, NewJob, RetryPolicy, Store};

fn lateness(db: &str, n: usize) -> Vec<i64> {
    let store = Store::create(db).expect("create the store");
    let mut registry = Registry::new();
    registry
        .handle::<u32>("retry-once", |_, ctx| if ctx.attempt() == 1 { Err(HandlerError::msg("once")) } else { Ok(()) })
        .queue("q");
    let mut engine = Engine::new(db, registry);
    engine.add_worker_group(WorkerGroup {
        policy: DispatchPolicy::strict(["q"]),
        retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(300)).expect("a policy"),
        ..WorkerGroup::default()
    });
    let running = engine.start().expect("start the engine");
    std::thread::sleep(Duration::from_millis(500));
    let mut late = Vec::with_capacity(n);
    for i in 0..n {
        let id = store.enqueue(&NewJob::new("retry-once", "q", i.to_string())).expect("enqueue");
        let started = Instant::now();
        let job = loop {
            let job = store.job(id).expect("read").expect("the job");
            if job.state == JobState::Succeeded {
                break job;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "job {id} did not succeed: {job:?}");
            std::thread::sleep(Duration::from_millis(5));
        };
        let log = store.history(id).expect("its log");
        let retried = log.iter().filter(|e| e.to == JobState::Running).nth(1).expect("a second claim").at;
        late.push(retried - job.due_at);
        // Idle again, as an application's worker between failures.
        std::thread::sleep(Duration::from_millis(50 + (i as u64 * 37) % 100));
    }
    running.shutdown(Duration::from_secs(5));
    late.sort_unstable();
    late
}

/// The rows: SQLite, then PostgreSQL on `server`.
pub fn rows(dir: &Path, server: &str) {
    let n: usize = std::env::var("BW_BENCH_RETRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let at = |v: &[i64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    println!();
    println!("a retry due 300 ms after its failure: how late attempt 2 starts, WorkerGroup::default(), {n} jobs");
    println!("| store      | p50 ms | p90 ms | max ms |");
    println!("|------------|-------:|-------:|-------:|");
    let file = dir.join("retry.db");
    let v = lateness(file.to_str().expect("a path"), n);
    println!("| SQLite     | {:>6} | {:>6} | {:>6} |", at(&v, 0.5), at(&v, 0.9), v[v.len() - 1]);
    let schema = super::pg::Schema::new(server, "bench_retry");
    let v = lateness(&schema.url, n);
    println!("| PostgreSQL | {:>6} | {:>6} | {:>6} |", at(&v, 0.5), at(&v, 0.9), v[v.len() - 1]);
    println!();
}
