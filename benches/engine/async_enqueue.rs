//! Enqueue from async code (`AsyncStore`) against the sync `Store` on the same backend: single
//! jobs one transaction each, and `enqueue_many` in batches of 1,000, from one task awaiting each
//! call in turn on a multi-thread runtime (like for like with the sync loop), alternating sync
//! and async runs, best of 2 each. The async rows' note is their share of the sync rate.

use std::time::Instant;

use backwave::{AsyncStore, NewJob, Store};

/// Single enqueues per run: one transaction (a WAL commit, a server round trip) each.
const SINGLES: usize = 2_000;
const BATCH: usize = 1_000;

fn jobs(from: usize, n: usize) -> Vec<NewJob> {
    (from..from + n).map(|i| NewJob::new("noop", super::QUEUE, format!("{i}").into_bytes())).collect()
}

fn sync_rates(store: &Store, n: usize) -> (f64, f64) {
    let start = Instant::now();
    for job in jobs(0, SINGLES) {
        store.enqueue(&job).expect("enqueue");
    }
    let single = SINGLES as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for from in (0..n).step_by(BATCH) {
        store.enqueue_many(&jobs(from, BATCH.min(n - from))).expect("enqueue_many");
    }
    (single, n as f64 / start.elapsed().as_secs_f64())
}

fn async_rates(runtime: &tokio::runtime::Runtime, store: Store, n: usize) -> (f64, f64) {
    runtime.block_on(async move {
        let store = AsyncStore::from_store(store, 1);
        let start = Instant::now();
        for job in jobs(0, SINGLES) {
            store.enqueue(job).await.expect("async enqueue");
        }
        let single = SINGLES as f64 / start.elapsed().as_secs_f64();
        let start = Instant::now();
        for from in (0..n).step_by(BATCH) {
            store.enqueue_many(jobs(from, BATCH.min(n - from))).await.expect("async enqueue_many");
        }
        (single, n as f64 / start.elapsed().as_secs_f64())
    })
}

/// The four rows of one backend, each run on a fresh store made by `fresh`.
pub fn rows(
    backend: &str,
    n: usize,
    mut fresh: impl FnMut(&str) -> Store,
    row: &mut impl FnMut(String, String, String),
) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (mut sync, mut asy) = ((0.0f64, 0.0f64), (0.0f64, 0.0f64));
    for run in 0..2 {
        let s = sync_rates(&fresh(&format!("sync_{run}")), n);
        let a = async_rates(&runtime, fresh(&format!("async_{run}")), n);
        sync = (sync.0.max(s.0), sync.1.max(s.1));
        asy = (asy.0.max(a.0), asy.1.max(a.1));
    }
    let share = |a: f64, s: f64| format!("{:.0}% of sync (target >= 90%)", 100.0 * a / s);
    row(format!("{backend}enqueue, single jobs, sync (best of 2)"), format!("{:.0}", sync.0), String::new());
    row(
        format!("{backend}enqueue, single jobs, AsyncStore (best of 2)"),
        format!("{:.0}", asy.0),
        share(asy.0, sync.0),
    );
    row(format!("{backend}enqueue_many 1000, sync (best of 2)"), format!("{:.0}", sync.1), String::new());
    row(format!("{backend}enqueue_many 1000, AsyncStore (best of 2)"), format!("{:.0}", asy.1), share(asy.1, sync.1));
}
