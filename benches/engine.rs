//! Benchmark: the engine's throughput against the raw SQLite ceiling (prints a table).
//!
//! `cargo bench --bench engine` enqueues 100,000 no-op jobs and drains them with 1, 2 and 4
//! workers (each its own engine, store connection and worker group, as separate processes
//! would be), with the settings a user gets (`WorkerGroup::default()`: 4 handler threads, 250 ms
//! poll) and tuned (32 handler threads, 5 ms poll), alternating, best of 2 each; measures the
//! same claim + fenced complete + transition rows in plain SQL at 1, 10, 32, 256 and 1024 jobs
//! per transaction (best of 2 each; the engine's claims reach about 1,000); drains due jobs with
//! and without a 100,000-job backlog of future-due retries in the same queue (best of 3 each);
//! and times enqueue-to-start of single jobs into an idle default group. Enqueue rates come
//! first, on both backends: plain jobs, and unique jobs (a new key each, then every key taken,
//! so each answer is a `Duplicate`), and enqueue from async code against sync
//! (`engine/async_enqueue.rs`); `BW_BENCH_ONLY=enqueue` stops after them. Then the same on
//! PostgreSQL (`engine/pg.rs`): the raw SKIP LOCKED ceiling on 1, 2 and 4 connections, the
//! store's own claim and record of successes in the same loop, and the drain by 1, 2 and 4
//! worker processes, each with its CPU a job (`engine/cpu.rs`), on the tests' server
//! (`BW_TEST_PG`, or a throwaway cluster). `BW_BENCH_JOBS=20000` shrinks the run.
//! `BW_BENCH_LIMITS=1` runs only the claim cost of limits (issue 21): the same drain with no
//! limit, with a limit in force that never binds (every claim reads and counts it), and with a
//! concurrency limit that does, on SQLite (and PostgreSQL with `BW_TEST_PG`);
//! `benches/compare-limits.sh` sets it beside a build without limit code.
//! `BW_BENCH_SCHEDULES=1` runs only the cost of schedules (issue 20): the same drain with no
//! schedule, and with 20 schedules ticking every second beside it (their jobs on a queue of
//! their own, served by a second group, as an application would), on SQLite.
//! Async handlers (issue 22): the default drain with the no-op registered by `handle_async`
//! beside the same drain with `handle`, on both backends (`engine/async_drain.rs`), alternating,
//! median of 3 each; `BW_BENCH_ONLY=async` runs only those rows and the AsyncStore enqueue rows.
//! `BW_BENCH_ONLY=postgres`: the PostgreSQL ceilings and drains alone.
//! `BW_BENCH_ONLY=idle`: an idle worker process's CPU, transactions and writes per second,
//! poll-only against listening, on both backends (`engine/idle.rs`).
//! `BW_BENCH_ONLY=retry`: how late a retry due in 300 ms starts after its due time, both backends.
//! `BW_BENCH_ONLY=workflow`: a fan-out/fan-in workflow 1 -> N -> 1 against N + 2 plain jobs,
//! enqueued and drained through the store on both backends, and the release cost per child.
//! `BW_BENCH_ONLY=enqueue-schema`: SQLite enqueue on schema 11 against schema 10's insert path
//! (`engine/enqueue_schema.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::{mpsc, Mutex};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup, DEFAULT_QUEUE};
use backwave::rusqlite::{params, OptionalExtension};
use backwave::store::{StoreTarget, CLAIM_SQL};
use backwave::{JobState, RetryPolicy, Store, UniqueRule};

/// The queue `WorkerGroup::default()` serves, so the default rows change nothing but the name.
const QUEUE: &str = DEFAULT_QUEUE;
/// Handler threads per worker in the tuned rows.
const TUNED_CONCURRENCY: usize = 32;
/// Single jobs timed from enqueue to handler start at low load.
const LATENCY_SAMPLES: usize = 20;
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

/// A fresh store on `backend`: "sqlite" is a file in `dir`, anything else a schema of its own on
/// the test server. With it its target, and the schema (None on SQLite), which the caller keeps
/// until the store is dropped: the store's connection closes before its schema is dropped.
fn fresh_store_on(backend: &str, dir: &Path, name: &str) -> (StoreTarget, Store, Option<pg::Schema>) {
    if backend == "sqlite" {
        let (path, store) = fresh_store(dir, &format!("{name}.db"));
        return (StoreTarget::from(path), store, None);
    }
    let schema = pg::Schema::new(backend::server_url(), &format!("bench_{name}"));
    let store = Store::create(schema.url.as_str()).expect("create the store");
    (StoreTarget::from(schema.url.as_str()), store, Some(schema))
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

/// Enqueue `n` no-op jobs due now, each unique by a key of its own, in batches of
/// [`ENQUEUE_BATCH`]; returns jobs/s. Then the same `n` keys again, every job answered
/// `Duplicate`; returns that rate too.
fn enqueue_unique(store: &Store, n: usize) -> (f64, f64) {
    let registry = registry();
    let mut rates = [0.0f64; 2];
    for (pass, rate) in rates.iter_mut().enumerate() {
        let start = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(ENQUEUE_BATCH) {
            let now = store.now();
            let jobs: Vec<_> = chunk
                .iter()
                .map(|i| {
                    let rule = UniqueRule::key(format!("bench-{i}"));
                    registry.job("noop", &(*i as u32)).unwrap().unique(rule).into_new_job(now)
                })
                .collect();
            let answers = store.insert_many(&jobs).expect("enqueue unique");
            assert!(answers.iter().all(|a| a.is_duplicate() == (pass == 1)), "pass {pass}: unexpected answers");
        }
        *rate = n as f64 / start.elapsed().as_secs_f64();
    }
    (rates[0], rates[1])
}

/// The enqueue rows of one backend: plain jobs and unique jobs (new keys, then every key taken)
/// into fresh stores made by `fresh`, alternating, best of 2 each.
fn enqueue_rows(
    backend: &str,
    n: usize,
    mut fresh: impl FnMut(&str) -> Store,
    row: &mut impl FnMut(String, String, String),
) {
    let (mut plain, mut unique, mut duplicate) = (0.0f64, 0.0f64, 0.0f64);
    for run in 0..2 {
        plain = plain.max(enqueue(&fresh(&format!("enqueue_plain_{run}")), n, 0));
        let (u, d) = enqueue_unique(&fresh(&format!("enqueue_unique_{run}")), n);
        (unique, duplicate) = (unique.max(u), duplicate.max(d));
    }
    row(format!("{backend}enqueue, batches of 1000 (best of 2)"), format!("{plain:.0}"), String::new());
    row(
        format!("{backend}enqueue unique, a new key each (best of 2)"),
        format!("{unique:.0}"),
        format!("{:.0}% of plain enqueue", 100.0 * unique / plain),
    );
    row(
        format!("{backend}enqueue unique, every key taken: Duplicate (best of 2)"),
        format!("{duplicate:.0}"),
        format!("{:.0}% of plain enqueue", 100.0 * duplicate / plain),
    );
}

/// The worker groups a drain runs.
#[derive(Clone, Copy, PartialEq)]
enum Settings {
    /// `WorkerGroup::default()`, named apart per worker.
    Default,
    /// 32 handler threads, 5 ms poll.
    Tuned,
}

impl Settings {
    fn group(self, name: String) -> WorkerGroup {
        match self {
            Settings::Default => WorkerGroup { name, ..WorkerGroup::default() },
            Settings::Tuned => WorkerGroup {
                name,
                policy: DispatchPolicy::strict([QUEUE]),
                poll_interval: Duration::from_millis(5),
                retry_policy: RetryPolicy::default(),
                concurrency: TUNED_CONCURRENCY,
                ..WorkerGroup::default()
            },
        }
    }

    fn label(self) -> String {
        match self {
            Settings::Default => "default settings (4 threads)".into(),
            Settings::Tuned => format!("tuned ({TUNED_CONCURRENCY} threads)"),
        }
    }
}

/// Drain `n` due jobs with `workers` engines; jobs/s from start to the last success.
fn drain(path: &Path, store: &Store, n: usize, workers: usize, settings: Settings) -> f64 {
    let start = Instant::now();
    let running: Vec<_> = (0..workers)
        .map(|w| {
            let mut engine = Engine::new(path, registry());
            engine.add_worker_group(settings.group(format!("bench-{w}")));
            engine.start().expect("start engine")
        })
        .collect();
    wait_for_successes(store, n, start, || {});
    let rate = n as f64 / start.elapsed().as_secs_f64();
    for r in running {
        let stats = r.stats();
        assert!(stats.iter().all(|s| s.errors == 0), "store errors while draining: {stats:?}");
        r.shutdown(Duration::from_secs(5));
    }
    rate
}

/// Returns once `n` jobs of `store` have succeeded, counting from `start`; `check` runs between
/// polls (to notice a worker that died). Each poll is a query the drain under test shares the
/// two cores with (on PostgreSQL a round trip and a server backend's time), so they come rarely
/// while the end is far (half the time the rest would take at the pace so far, at most 50 ms
/// apart) and every millisecond as it nears: a drain's rate is then measured to within a
/// millisecond or two, and the raw ceilings it is compared with, which nothing polls, are not
/// favoured by the poller's load. (A poll every 2 ms cost the engine's rows up to a tenth of a
/// core.)
fn wait_for_successes(store: &Store, n: usize, start: Instant, mut check: impl FnMut()) {
    loop {
        let done = store.counts().expect("counts").total(JobState::Succeeded) as usize;
        if done >= n {
            return;
        }
        check();
        let rest = match done {
            0 => Duration::from_millis(10),
            _ => start.elapsed().mul_f64((n - done) as f64 / done as f64 / 2.0),
        };
        std::thread::sleep(rest.clamp(Duration::from_millis(1), Duration::from_millis(50)));
    }
}

/// Enqueue-to-start of single jobs into an idle default group, one at a time, each at a
/// different point of the group's poll cycle: (median, max).
fn idle_latency(dir: &Path) -> (Duration, Duration) {
    let (path, store) = fresh_store(dir, "latency.db");
    let (tx, rx) = mpsc::channel::<Instant>();
    let tx = Mutex::new(tx);
    let mut registry = Registry::new();
    registry
        .handle::<u32>("timed", move |_, _| {
            let _ = tx.lock().unwrap().send(Instant::now());
            Ok(())
        })
        .queue(QUEUE);
    let mut engine = Engine::new(&path, registry);
    engine.add_worker_group(Settings::Default.group("latency".into()));
    let running = engine.start().expect("start engine");
    let poll = WorkerGroup::default().poll_interval;
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for i in 0..LATENCY_SAMPLES {
        // Spread the enqueues over the poll cycle (a fixed stride, not in step with it).
        std::thread::sleep(poll.mul_f64(((i * 7) % LATENCY_SAMPLES) as f64 / LATENCY_SAMPLES as f64));
        let job = running.registry().job("timed", &(i as u32)).unwrap().into_new_job(store.now());
        let enqueued = Instant::now();
        store.enqueue(&job).expect("enqueue");
        let started = rx.recv_timeout(Duration::from_secs(10)).expect("the job started");
        samples.push(started.saturating_duration_since(enqueued));
    }
    running.shutdown(Duration::from_secs(5));
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() - 1])
}

/// The raw ceiling: what the engine does per job, in plain SQL on one connection, `per_tx`
/// jobs per transaction: claim (select due, set running with lease and delay table, log),
/// then the fenced completion (read the attempt, check the fence, set succeeded, log).
///
/// This is a benchmark of SQLite itself, so it is the one place outside `store/` that names
/// rusqlite: it opens its own connection to the store's file with the pragmas `Store` sets
/// (WAL is a property of the file; synchronous, foreign keys, busy timeout and the statement
/// cache are per connection) and runs exactly the engine's claim SQL on it.
fn raw_ceiling(store: &Store, n: usize, per_tx: usize) -> f64 {
    let conn = backwave::rusqlite::Connection::open(store.target().to_string()).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = {}",
        backwave::store::BUSY_TIMEOUT.as_millis()
    ))
    .unwrap();
    conn.set_prepared_statement_cache_capacity(128);
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

#[path = "engine/async_drain.rs"]
mod async_drain;
#[path = "engine/async_enqueue.rs"]
mod async_enqueue;
#[allow(dead_code)] // the tests' helpers: the benches take only the server (`server_url`)
#[path = "../tests/common/backend.rs"]
mod backend;
#[path = "engine/cpu.rs"]
mod cpu;
#[path = "engine/enqueue_schema.rs"]
mod enqueue_schema;
#[path = "engine/idle.rs"]
mod idle;
#[path = "engine/pg.rs"]
mod pg;
#[path = "engine/retry_start.rs"]
mod retry_start;
#[path = "engine/workflow.rs"]
mod workflow;

/// The claim cost of limits (issue 21): the drain of `due` jobs by one tuned worker, alternating
/// fresh stores, the median of `BW_BENCH_ROUNDS` (3) each: no limit, a concurrency limit in force
/// that never binds (above the worker's slots: the claim reads, counts and charges it every
/// time), a rate limit that never binds, and a concurrency limit of 8 that does; on SQLite, and
/// on PostgreSQL when `BW_TEST_PG` is set. `BW_BENCH_LIMITS=none` runs the no-limit rows alone:
/// what `benches/compare-limits.sh` runs on this build and on one without limit code, A B A B A
/// B. Each row is also printed to stdout as `limits-row<TAB>backend<TAB>what<TAB>jobs/s` for it.
fn limits(dir: &Path, due: usize, row: &mut impl FnMut(String, String, String)) {
    use backwave::store::{LimitSpec, PauseKind, Rate};
    let mut specs: Vec<(&str, Option<LimitSpec>)> = vec![
        ("no limit", None),
        ("concurrency 100000 (never binds)", Some(LimitSpec { concurrency: Some(100_000), rate: None })),
        (
            "rate 1000000/s (never binds)",
            Some(LimitSpec { concurrency: None, rate: Some(Rate { n: 1_000_000, per: Duration::from_secs(1) }) }),
        ),
        ("concurrency 8 (binds: 32 threads)", Some(LimitSpec { concurrency: Some(8), rate: None })),
    ];
    if std::env::var("BW_BENCH_LIMITS").is_ok_and(|v| v == "none") {
        specs.truncate(1);
    }
    let rounds: usize = std::env::var("BW_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let mut backends = vec!["sqlite"];
    if std::env::var_os("BW_TEST_PG").is_some() {
        backends.push("postgres");
    }
    for backend in backends {
        let mut rates = vec![Vec::new(); specs.len()];
        for round in 0..rounds {
            for (i, (_, spec)) in specs.iter().enumerate() {
                let name = format!("limits_{i}_{round}");
                let (db, store, _schema) = fresh_store_on(backend, dir, &name);
                store.bootstrap_admin("bench").expect("admin");
                if let Some(spec) = spec {
                    store.set_limit("bench", PauseKind::WireName, "noop", spec, None, true).expect("limit");
                }
                enqueue(&store, due, 0);
                rates[i].push(limits_drain(&db, &store, due));
                // The store's connection closes before its schema is dropped.
                drop(store);
            }
        }
        let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
        for (i, (what, _)) in specs.iter().enumerate() {
            let note = if i == 0 {
                String::new()
            } else {
                format!("{:+.1}% against no limit", 100.0 * (medians[i] - medians[0]) / medians[0])
            };
            println!("limits-row\t{backend}\t{what}\t{:.0}", medians[i]);
            row(
                format!("drain {due}, {backend}, 1 tuned worker, {what} (median of {rounds})"),
                format!("{:.0}", medians[i]),
                note,
            );
        }
    }
}

/// One tuned worker drains `n` due jobs from `db`; jobs/s to the last success.
fn limits_drain(db: &StoreTarget, store: &Store, n: usize) -> f64 {
    drain_with(db, store, n, registry(), Settings::Tuned)
}

/// One engine of one `settings` group over `registry` drains `n` due jobs from `db`; jobs/s to
/// the last success, asserting no store error on the way.
fn drain_with(db: &StoreTarget, store: &Store, n: usize, registry: Registry, settings: Settings) -> f64 {
    let start = Instant::now();
    let mut engine = Engine::new(db, registry);
    engine.add_worker_group(settings.group("bench".into()));
    let running = engine.start().expect("start engine");
    wait_for_successes(store, n, start, || {});
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let stats = running.stats();
    assert!(stats.iter().all(|s| s.errors == 0), "store errors while draining: {stats:?}");
    running.shutdown(Duration::from_secs(5));
    rate
}

fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    if let Ok(url) = std::env::var("BW_BENCH_WORKER") {
        pg::worker(&url);
    }
    if let Ok(db) = std::env::var("BW_BENCH_IDLE_CHILD") {
        idle::child(&db);
    }
    // `BW_BENCH_SUBSCRIBER=info`: every row with an application's INFO subscriber installed
    // (`tracing-subscriber`'s fmt layer at INFO, writing to a sink), against none (issue 41): the
    // cost of the engine's spans and events to an application that logs.
    if std::env::var("BW_BENCH_SUBSCRIBER").is_ok_and(|v| v == "info") {
        let subscriber =
            tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).with_writer(std::io::sink).finish();
        tracing::subscriber::set_global_default(subscriber).expect("the first subscriber");
        eprintln!("engine bench: with an INFO subscriber (fmt to a sink)");
    }
    // `cargo bench` passes `--bench`; nothing else to parse.
    let n: usize = std::env::var("BW_BENCH_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut row = |what: String, value: String, note: String| {
        eprintln!("  {what}: {value} {note}");
        rows.push((what, value, note));
    };
    eprintln!("engine bench: {n} no-op jobs");
    // `BW_BENCH_ONLY=async`: the async rows alone.
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "async") {
        async_drain::rows(dir.path(), n, &mut row);
        async_enqueue::both_backends(dir.path(), n, &mut row);
        print_table(&rows);
        return;
    }
    // `BW_BENCH_ONLY=idle`: what an idle worker process costs (`engine/idle.rs`).
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "idle") {
        idle::rows(dir.path(), backend::server_url());
        return;
    }
    // `BW_BENCH_ONLY=retry`: how late a retry due in 300 ms starts (`engine/retry_start.rs`).
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "retry") {
        retry_start::rows(dir.path(), backend::server_url());
        return;
    }
    // `BW_BENCH_ONLY=workflow`: a 1 -> N -> 1 workflow against N + 2 plain jobs (`engine/workflow.rs`).
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "workflow") {
        workflow::rows(dir.path(), backend::server_url());
        return;
    }
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "enqueue-schema") {
        enqueue_schema::rows(dir.path(), n, &mut row);
        print_table(&rows);
        return;
    }
    if std::env::var_os("BW_BENCH_LIMITS").is_some() {
        limits(dir.path(), n / 2, &mut row);
        print_table(&rows);
        return;
    }
    if std::env::var_os("BW_BENCH_SCHEDULES").is_some() {
        schedules(dir.path(), n / 2, &mut row);
        print_table(&rows);
        return;
    }

    // `BW_BENCH_ONLY=postgres`: the PostgreSQL ceilings and drains alone.
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "postgres") {
        let (pg_ceiling, pg_best) = pg::run(backend::server_url(), n, &mut row);
        print_table(&rows);
        print_pg_summary(pg_ceiling, pg_best);
        return;
    }

    let mut made = 0;
    enqueue_rows(
        "",
        n,
        |name| {
            made += 1;
            fresh_store(dir.path(), &format!("{name}-{made}.db")).1
        },
        &mut row,
    );
    let pg_schemas = std::cell::RefCell::new(Vec::new());
    enqueue_rows(
        "postgres ",
        n,
        |name| {
            let schema = pg::Schema::new(backend::server_url(), &format!("bench_{name}"));
            let store = Store::create(schema.url.as_str()).expect("create the store");
            pg_schemas.borrow_mut().push(schema);
            store
        },
        &mut row,
    );
    drop(pg_schemas);
    async_enqueue::both_backends(dir.path(), n, &mut row);
    // `BW_BENCH_ONLY=enqueue`: the enqueue rows alone, a minute rather than a quarter hour.
    if std::env::var("BW_BENCH_ONLY").is_ok_and(|v| v == "enqueue") {
        print_table(&rows);
        return;
    }

    let mut best_ceiling = 0.0f64;
    for per_tx in [1, 10, 32, 256, 1024] {
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
        best_ceiling = best_ceiling.max(rate);
        row(format!("raw SQL ceiling, {per_tx} job(s)/tx"), format!("{rate:.0}"), String::new());
    }

    // Default and tuned side by side at each worker count, alternating, the best of two each
    // like the ceilings: a neighbour's burst on a shared machine should not decide the ratio.
    let mut best = [0.0f64; 2];
    let mut single = [0.0f64; 2];
    for workers in [1, 2, 4] {
        let mut rates = [0.0f64; 2];
        for run in 0..2 {
            for (i, settings) in [Settings::Default, Settings::Tuned].into_iter().enumerate() {
                let (path, store) = fresh_store(dir.path(), &format!("drain-{workers}-{i}-{run}.db"));
                enqueue(&store, n, 0);
                rates[i] = rates[i].max(drain(&path, &store, n, workers, settings));
            }
        }
        for (i, settings) in [Settings::Default, Settings::Tuned].into_iter().enumerate() {
            let rate = rates[i];
            best[i] = best[i].max(rate);
            if workers == 1 {
                single[i] = rate;
            }
            row(
                format!("drain, {workers} worker(s), {} (best of 2)", settings.label()),
                format!("{rate:.0}"),
                format!("{:.0}% of the best raw ceiling", 100.0 * rate / best_ceiling),
            );
        }
    }

    // Short drains are noisy on a shared machine: drain half the job count, alternate the two
    // stores three times and compare the best run of each.
    let due = n / 2;
    let (mut plain, mut with_backlog) = (0.0f64, 0.0f64);
    for run in 0..3 {
        let (path, store) = fresh_store(dir.path(), &format!("no-backlog-{run}.db"));
        enqueue(&store, due, 0);
        plain = plain.max(drain(&path, &store, due, 1, Settings::Default));
        let (path, store) = fresh_store(dir.path(), &format!("backlog-{run}.db"));
        enqueue(&store, due, n);
        with_backlog = with_backlog.max(drain(&path, &store, due, 1, Settings::Default));
    }
    row(format!("drain {due} due, no backlog (best of 3, default)"), format!("{plain:.0}"), String::new());
    let slowdown = 100.0 * (plain - with_backlog) / plain;
    let note = if slowdown > 0.0 {
        format!("{slowdown:.1}% slower than without (target <= 10%)")
    } else {
        format!("not slower ({:.1}% faster; target <= 10% slower)", -slowdown)
    };
    row(format!("drain {due} due, {n} future-due (best of 3, default)"), format!("{with_backlog:.0}"), note);

    // PostgreSQL: the server of the tests (BW_TEST_PG, or a throwaway cluster on a unix socket
    // with fsync off: compare the drain with the ceiling of the same run, not with SQLite).
    let (pg_ceiling, pg_best) = pg::run(backend::server_url(), n, &mut row);
    async_drain::rows(dir.path(), n, &mut row);

    let (median, max) = idle_latency(dir.path());
    row(
        format!("enqueue-to-start, idle default group ({LATENCY_SAMPLES} jobs)"),
        format!("{:.0} ms", median.as_secs_f64() * 1000.0),
        format!(
            "median; max {:.0} ms; poll interval {:?} (target: within one poll interval)",
            max.as_secs_f64() * 1000.0,
            WorkerGroup::default().poll_interval
        ),
    );

    print_table(&rows);
    println!(
        "default settings: 1 worker {:.0} jobs/s = {:.0}% of the best raw ceiling {best_ceiling:.0} (target >= 70%), \
         {:.0}% of the tuned 1-worker drain {:.0} (target >= 85%)",
        single[0],
        100.0 * single[0] / best_ceiling,
        100.0 * single[0] / single[1],
        single[1],
    );
    println!(
        "best over 1, 2, 4 workers: default {:.0} = {:.0}% of the ceiling, {:.0}% of tuned {:.0}",
        best[0],
        100.0 * best[0] / best_ceiling,
        100.0 * best[0] / best[1],
        best[1],
    );
    print_pg_summary(pg_ceiling, pg_best);
}

fn print_pg_summary(pg_ceiling: f64, pg_best: f64) {
    println!(
        "postgres: best drain over 1, 2, 4 worker processes {pg_best:.0} jobs/s = {:.0}% of the best raw SKIP LOCKED \
         ceiling {pg_ceiling:.0} (target >= 90%, issue 23; >= 70%, issue 14)",
        100.0 * pg_best / pg_ceiling,
    );
}

fn print_table(rows: &[(String, String, String)]) {
    println!();
    println!("| measurement                                                  |     jobs/s | note");
    println!("|--------------------------------------------------------------|-----------:|------");
    for (what, value, note) in rows {
        println!("| {what:<60} | {value:>10} | {note}");
    }
    println!();
}

/// The drain of `due` jobs by one tuned worker, alone and with 20 every-second schedules
/// declared by the same engine (their ticker's claims, inserts and the tick jobs' own runs on a
/// queue of their own), alternating, best of 3 each.
fn schedules(dir: &Path, due: usize, row: &mut impl FnMut(String, String, String)) {
    const SCHEDULES: usize = 20;
    let mut best = [0.0f64; 2];
    let mut fired = 0;
    for run in 0..3 {
        for (i, count) in [0, SCHEDULES].into_iter().enumerate() {
            let (path, store) = fresh_store(dir, &format!("schedules-{i}-{run}.db"));
            enqueue(&store, due, 0);
            let mut registry = registry();
            registry.handle::<u32>("tick", |_, _| Ok(())).queue("ticks");
            let mut engine = Engine::new(&path, registry);
            engine.add_worker_group(Settings::Tuned.group("bench".into()));
            engine.add_worker_group(WorkerGroup {
                name: "ticks".into(),
                policy: DispatchPolicy::strict(["ticks"]),
                ..WorkerGroup::default()
            });
            for k in 0..count {
                engine.add_schedule(backwave::Schedule::new(
                    format!("every-second-{k}"),
                    "* * * * * *",
                    "tick",
                    "ticks",
                    "0",
                ));
            }
            let start = Instant::now();
            let running = engine.start().expect("start engine");
            while store
                .counts()
                .expect("counts")
                .by_queue
                .get(QUEUE)
                .and_then(|m| m.get(&JobState::Succeeded))
                .copied()
                .unwrap_or(0)
                < due as u64
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            best[i] = best[i].max(due as f64 / start.elapsed().as_secs_f64());
            if count > 0 {
                fired += running.ticker().map_or(0, |t| t.fired);
            }
            let stats = running.stats();
            assert!(stats.iter().all(|s| s.errors == 0), "store errors while draining: {stats:?}");
            running.shutdown(Duration::from_secs(5));
        }
    }
    row(format!("drain {due}, 1 tuned worker, no schedule (best of 3)"), format!("{:.0}", best[0]), String::new());
    row(
        format!("drain {due}, 1 tuned worker, {SCHEDULES} schedules every second (best of 3)"),
        format!("{:.0}", best[1]),
        format!("{:+.1}% against none; {fired} tick jobs made over the 3 runs", 100.0 * (best[1] - best[0]) / best[0]),
    );
}
