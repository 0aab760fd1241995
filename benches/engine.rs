//! Benchmark: the engine's throughput against the raw SQLite ceiling (prints a table).
//!
//! `cargo bench --bench engine` enqueues 100,000 no-op jobs and drains them with 1, 2 and 4
//! workers (each its own engine, store connection and worker group, as separate processes
//! would be); measures the same claim + fenced complete + transition rows in plain SQL at 1, 10
//! and the engine's own batch size of jobs per transaction (best of 2 each); and drains due jobs
//! with and without a 100,000-job backlog of future-due retries in the same queue (best of 3
//! each). `BW_BENCH_JOBS=20000` shrinks the run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::store::CLAIM_SQL;
use backwave::{JobState, RetryPolicy, Store};
use rusqlite::{params, OptionalExtension};

const QUEUE: &str = "bench";
/// Handler threads per worker: enough that each claim and each completion batch is large.
const CONCURRENCY: usize = 32;
const ENQUEUE_BATCH: usize = 1000;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.handle::<u32>("noop", |_, _| Ok(())).queue(QUEUE);
    r
}

fn fresh_store(dir: &Path, name: &str) -> (PathBuf, Store) {
    let path = dir.join(name);
    let store = Store::create(&path).expect("create store");
    (path, store)
}

/// Enqueue `n` no-op jobs due now (and `backlog` due in an hour, like retries waiting for their
/// backoff); returns jobs/s of the due ones.
fn enqueue(store: &Store, n: usize, backlog: usize) -> f64 {
    let registry = registry();
    if backlog > 0 {
        let later = store.now() + 3_600_000;
        for chunk in (0..backlog).collect::<Vec<_>>().chunks(ENQUEUE_BATCH) {
            let jobs: Vec<_> = chunk
                .iter()
                .map(|i| registry.job("noop", &(*i as u32)).unwrap().due_at(later).into_new_job(0))
                .collect();
            store.enqueue_many(&jobs).expect("enqueue backlog");
        }
    }
    let start = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(ENQUEUE_BATCH) {
        let now = store.now();
        let jobs: Vec<_> =
            chunk.iter().map(|i| registry.job("noop", &(*i as u32)).unwrap().into_new_job(now)).collect();
        store.enqueue_many(&jobs).expect("enqueue");
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Drain `n` due jobs with `workers` engines; jobs/s from start to the last success.
fn drain(path: &Path, store: &Store, n: usize, workers: usize) -> f64 {
    let start = Instant::now();
    let running: Vec<_> = (0..workers)
        .map(|w| {
            let mut engine = Engine::new(path, registry());
            engine.add_worker_group(WorkerGroup {
                name: format!("bench-{w}"),
                policy: DispatchPolicy::strict([QUEUE]),
                poll_interval: Duration::from_millis(5),
                retry_policy: RetryPolicy::default(),
                concurrency: CONCURRENCY,
                ..WorkerGroup::default()
            });
            engine.start().expect("start engine")
        })
        .collect();
    loop {
        if store.counts().expect("counts").total(JobState::Succeeded) >= n as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    for r in running {
        let stats = r.stats();
        assert!(stats.iter().all(|s| s.errors == 0), "store errors while draining: {stats:?}");
        r.shutdown(Duration::from_secs(5));
    }
    rate
}

/// The raw ceiling: what the engine does per job, in plain SQL on one connection, `per_tx`
/// jobs per transaction: claim (select due, set running with lease and delay table, log),
/// then the fenced completion (read the attempt, check the fence, set succeeded, log).
fn raw_ceiling(store: &Store, n: usize, per_tx: usize) -> f64 {
    let conn = store.connection();
    let worker = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10";
    let start = Instant::now();
    let mut done = 0;
    while done < n {
        let now = backwave::store::system_now();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let claimed: Vec<(String, u32)> = {
            let mut pick = conn.prepare_cached(CLAIM_SQL).unwrap();
            // CLAIM_SQL has no LIMIT: like the store, stop stepping at the batch size.
            let ids: Vec<(String, u32)> = pick
                .query_map(params![QUEUE, now], |r| Ok((r.get(0)?, r.get::<_, u32>(6)?)))
                .unwrap()
                .take(per_tx)
                .collect::<Result<_, _>>()
                .unwrap();
            let mut update = conn
                .prepare_cached(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1, max_attempts = 10, delay_table = ?2,
                            lease_owner = ?3, lease_expires_at = ?4, worker_group = 'raw', updated_at = ?5
                     WHERE id = ?1 AND state = 'scheduled'",
                )
                .unwrap();
            let mut log = conn
                .prepare_cached(
                    "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .unwrap();
            for (id, attempt) in &ids {
                update
                    .execute(params![
                        id,
                        "[2000,4000,8000,16000,32000,64000,128000,256000,300000]",
                        worker,
                        now + 60_000,
                        now
                    ])
                    .unwrap();
                log.execute(params![id, now, "scheduled", "running", attempt + 1, worker]).unwrap();
            }
            ids
        };
        conn.execute_batch("COMMIT").unwrap();
        assert!(!claimed.is_empty(), "the raw drain ran out of jobs at {done}");
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        {
            let mut fence = conn
                .prepare_cached("SELECT attempt, lease_owner FROM jobs WHERE id = ?1 AND state = 'running'")
                .unwrap();
            let mut finish = conn
                .prepare_cached(
                    "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
                            finished_at = ?2, updated_at = ?2 WHERE id = ?1",
                )
                .unwrap();
            let mut log = conn
                .prepare_cached(
                    "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .unwrap();
            for (id, attempt) in &claimed {
                let row: Option<(u32, Option<String>)> =
                    fence.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional().unwrap();
                assert_eq!(row, Some((attempt + 1, Some(worker.to_string()))), "fence");
                finish.execute(params![id, now]).unwrap();
                log.execute(params![id, now, "running", "succeeded", attempt + 1, worker]).unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
        done += claimed.len();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let n: usize = std::env::var("BW_BENCH_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rows: Vec<(String, f64, String)> = Vec::new();
    let mut row = |what: String, rate: f64, note: String| {
        eprintln!("  {what}: {rate:.0} jobs/s {note}");
        rows.push((what, rate, note));
    };
    eprintln!("engine bench: {n} no-op jobs, {CONCURRENCY} handler threads per worker");

    let mut ceiling = Vec::new();
    // 1, 10, and the engine's own batch size (its claims fill all free handler threads).
    for per_tx in [1, 10, CONCURRENCY] {
        // One job per transaction is slow enough that a fifth of the jobs measures it well.
        let jobs = if per_tx == 1 { n / 5 } else { n };
        // The best of two runs: the ceiling should not be lowered by a neighbour's burst.
        let rate = (0..2)
            .map(|run| {
                let (_, store) = fresh_store(dir.path(), &format!("raw-{per_tx}-{run}.db"));
                enqueue(&store, jobs, 0);
                raw_ceiling(&store, jobs, per_tx)
            })
            .fold(0.0, f64::max);
        ceiling.push(rate);
        row(format!("raw SQL ceiling, {per_tx} job(s)/tx"), rate, String::new());
    }
    let best_ceiling = ceiling.iter().cloned().fold(0.0, f64::max);

    let mut best_engine = 0.0f64;
    for workers in [1, 2, 4] {
        let (path, store) = fresh_store(dir.path(), &format!("drain-{workers}.db"));
        let enq = enqueue(&store, n, 0);
        row(format!("enqueue ({workers}-worker store)"), enq, format!("batches of {ENQUEUE_BATCH}"));
        let rate = drain(&path, &store, n, workers);
        best_engine = best_engine.max(rate);
        row(
            format!("engine drain, {workers} worker(s)"),
            rate,
            format!("{:.0}% of the raw ceiling at its batch size ({CONCURRENCY}/tx)", 100.0 * rate / ceiling[2]),
        );
    }

    // Short drains are noisy on a shared machine: drain half the job count (about two seconds
    // each), alternate the two stores three times and compare the best run of each.
    let due = n / 2;
    let (mut plain, mut with_backlog) = (0.0f64, 0.0f64);
    for run in 0..3 {
        let (path, store) = fresh_store(dir.path(), &format!("no-backlog-{run}.db"));
        enqueue(&store, due, 0);
        plain = plain.max(drain(&path, &store, due, 1));
        let (path, store) = fresh_store(dir.path(), &format!("backlog-{run}.db"));
        enqueue(&store, due, n);
        with_backlog = with_backlog.max(drain(&path, &store, due, 1));
    }
    row(format!("drain {due} due, no backlog (best of 3)"), plain, String::new());
    let slowdown = 100.0 * (plain - with_backlog) / plain;
    let note = if slowdown > 0.0 {
        format!("{slowdown:.1}% slower than without (target <= 10%)")
    } else {
        format!("not slower ({:.1}% faster; target <= 10% slower)", -slowdown)
    };
    row(format!("drain {due} due, {n} future-due (best of 3)"), with_backlog, note);

    println!();
    println!("| measurement                                     |     jobs/s | note");
    println!("|-------------------------------------------------|-----------:|------");
    for (what, rate, note) in &rows {
        println!("| {what:<47} | {rate:>10.0} | {note}");
    }
    println!();
    println!(
        "engine share: best drain {best_engine:.0} jobs/s = {:.0}% of the best raw ceiling {best_ceiling:.0} jobs/s \
         (any batch size; target >= 70%)",
        100.0 * best_engine / best_ceiling
    );
}
