//! Enqueue from async code (`AsyncStore`) against the sync `Store` on the same backend: single
//! jobs one transaction each, and `enqueue_many` in batches of 1,000, from one task awaiting each
//! call in turn on a multi-thread runtime (like for like with the sync loop), alternating sync
//! and async runs (sync, async, sync, async, sync, async), each on a fresh store: the rows show
//! the median of 3 of each, every run's figure, and the async medians' share of the sync ones.

use std::time::Instant;

use backwave::{AsyncStore, NewJob, Store};

use super::async_drain::{median, RUNS};

/// Single enqueues per run: one transaction (a WAL commit, a server round trip) each.
const SINGLES: usize = 2_000;
const BATCH: usize = 1_000;

/// The process's CPU time (user + system, seconds) and context switches (voluntary and not) so
/// far: per job, they show a hand-off's cost even when a loaded machine blurs the rates.
fn usage() -> (f64, i64) {
    // SAFETY: getrusage(2) fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime) + secs(u.ru_stime), u.ru_nvcsw + u.ru_nivcsw)
}

/// CPU microseconds and context switches per job since `before`.
fn cost(before: (f64, i64), jobs: usize) -> (f64, f64) {
    let now = usage();
    (1e6 * (now.0 - before.0) / jobs as f64, (now.1 - before.1) as f64 / jobs as f64)
}

fn jobs(from: usize, n: usize) -> Vec<NewJob> {
    (from..from + n).map(|i| NewJob::new("noop", super::QUEUE, format!("{i}").into_bytes())).collect()
}

fn sync_rates(store: &Store, n: usize) -> ((f64, (f64, f64)), f64) {
    let (start, before) = (Instant::now(), usage());
    for job in jobs(0, SINGLES) {
        store.enqueue(&job).expect("enqueue");
    }
    let single = (SINGLES as f64 / start.elapsed().as_secs_f64(), cost(before, SINGLES));
    let start = Instant::now();
    for from in (0..n).step_by(BATCH) {
        store.enqueue_many(&jobs(from, BATCH.min(n - from))).expect("enqueue_many");
    }
    (single, n as f64 / start.elapsed().as_secs_f64())
}

/// Run `task` as a task of `runtime` (on a worker thread, as an application's request is, not
/// on the thread that blocks on the runtime) and wait for its answer.
fn in_task<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    task: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    runtime.block_on(runtime.spawn(task)).expect("the bench task")
}

fn async_rates(runtime: &tokio::runtime::Runtime, store: Store, n: usize) -> ((f64, (f64, f64)), f64) {
    in_task(runtime, async move {
        let store = AsyncStore::from_store(store, 1);
        let (start, before) = (Instant::now(), usage());
        for job in jobs(0, SINGLES) {
            store.enqueue(job).await.expect("async enqueue");
        }
        let single = (SINGLES as f64 / start.elapsed().as_secs_f64(), cost(before, SINGLES));
        let start = Instant::now();
        for from in (0..n).step_by(BATCH) {
            store.enqueue_many(jobs(from, BATCH.min(n - from))).await.expect("async enqueue_many");
        }
        (single, n as f64 / start.elapsed().as_secs_f64())
    })
}

/// Single enqueues each handed to tokio's blocking pool and awaited (what `AsyncStore` did before
/// it ran calls in place on a multi-thread runtime): the cost of that hand-off, for comparison.
fn handed_off_rate(runtime: &tokio::runtime::Runtime, store: Store) -> (f64, (f64, f64)) {
    let store = std::sync::Arc::new(std::sync::Mutex::new(store));
    let shared = store.clone();
    let rate = in_task(runtime, async move {
        let (start, before) = (Instant::now(), usage());
        for job in jobs(0, SINGLES) {
            let store = shared.clone();
            tokio::task::spawn_blocking(move || store.lock().unwrap().enqueue(&job)).await.unwrap().expect("enqueue");
        }
        (SINGLES as f64 / start.elapsed().as_secs_f64(), cost(before, SINGLES))
    });
    // Closed here, off the runtime: a PostgreSQL connection's close blocks.
    drop(store);
    rate
}

/// The four rows of one backend, each run on a fresh store made by `fresh`.
pub fn rows(
    backend: &str,
    n: usize,
    mut fresh: impl FnMut(&str) -> Store,
    row: &mut impl FnMut(String, String, String),
) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // Per kind (sync, AsyncStore, spawn_blocking per call): single-job rates, their CPU µs and
    // context switches per job, and enqueue_many rates (none for the hand-off).
    let mut runs: [[Vec<f64>; 4]; 3] = Default::default();
    for run in 0..RUNS {
        let s = sync_rates(&fresh(&format!("sync_{run}")), n);
        let a = async_rates(&runtime, fresh(&format!("async_{run}")), n);
        let h = (handed_off_rate(&runtime, fresh(&format!("handoff_{run}"))), f64::NAN);
        for (kind, ((rate, (cpu, switches)), many)) in [s, a, h].into_iter().enumerate() {
            for (i, v) in [rate, cpu, switches, many].into_iter().enumerate() {
                runs[kind][i].push(v);
            }
        }
    }
    let kinds = ["sync", "AsyncStore", "spawn_blocking per call"];
    let (sync_single, sync_many) = (median(&runs[0][0]).0, median(&runs[0][3]).0);
    for (kind, name) in kinds.into_iter().enumerate() {
        let (rate, listed) = median(&runs[kind][0]);
        let (cpu, switches) = (median(&runs[kind][1]).0, median(&runs[kind][2]).0);
        let share = if kind == 0 { String::new() } else { format!("{:.2}x sync; ", rate / sync_single) };
        let target = if kind == 1 { "(target >= 0.9x) " } else { "" };
        row(
            format!("{backend}enqueue, single jobs, {name} (median of {RUNS})"),
            format!("{rate:.0}"),
            format!("{share}{target}{cpu:.0} µs CPU, {switches:.1} context switches per job; runs {listed}"),
        );
    }
    for (kind, name) in kinds.into_iter().enumerate().take(2) {
        let (rate, listed) = median(&runs[kind][3]);
        let share = if kind == 0 { String::new() } else { format!("{:.2}x sync (target >= 0.9x); ", rate / sync_many) };
        row(
            format!("{backend}enqueue_many 1000, {name} (median of {RUNS})"),
            format!("{rate:.0}"),
            format!("{share}runs {listed}"),
        );
    }
}

/// The rows of both backends: SQLite stores in `dir`, PostgreSQL schemas on the bench server.
pub fn both_backends(dir: &std::path::Path, n: usize, row: &mut impl FnMut(String, String, String)) {
    let mut made = 0;
    rows(
        "",
        n,
        |name| {
            made += 1;
            super::fresh_store(dir, &format!("async_{name}-{made}.db")).1
        },
        row,
    );
    let schemas = std::cell::RefCell::new(Vec::new());
    rows(
        "postgres ",
        n,
        |name| {
            let schema = super::pg::Schema::new(super::backend::server_url(), &format!("bench_async_{name}"));
            let store = Store::create(schema.url.as_str()).expect("create the store");
            schemas.borrow_mut().push(schema);
            store
        },
        row,
    );
}
