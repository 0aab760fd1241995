//! The default drain with the no-op registered by `handle_async` against the same drain with
//! `handle`, on SQLite and PostgreSQL: plain and async alternate (plain, async, plain, async,
//! plain, async), each on a fresh store, and the rows show the median of 3 of each, every run's
//! figure, and the ratio of the medians, so that one run compares them fairly on a noisy machine.

use std::path::Path;

use backwave::engine::Registry;

use super::{drain_with, enqueue, fresh_store_on, registry, Settings, QUEUE};

/// Runs of each kind; the rows take their median.
pub const RUNS: usize = 3;

/// The no-op as an async handler: the same work as [`registry`]'s, a future instead of a call.
fn async_registry() -> Registry {
    let mut r = Registry::new();
    r.handle_async::<u32, _, _>("noop", |_, _| async { Ok(()) }).queue(QUEUE);
    r
}

/// The median of `runs` (an odd count) and the runs in the order measured, for a row's note.
pub fn median(runs: &[f64]) -> (f64, String) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let listed = runs.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ");
    (sorted[sorted.len() / 2], listed)
}

/// The two rows of each backend (target: async >= 0.9x plain).
pub fn rows(dir: &Path, n: usize, row: &mut impl FnMut(String, String, String)) {
    for backend in ["sqlite", "postgres"] {
        let mut runs = [Vec::new(), Vec::new()];
        for run in 0..RUNS {
            for (i, registry) in [registry as fn() -> Registry, async_registry].into_iter().enumerate() {
                let name = format!("async_drain_{i}_{run}");
                let (db, store, _schema) = fresh_store_on(backend, dir, &name);
                enqueue(&store, n, 0);
                runs[i].push(drain_with(&db, &store, n, registry(), Settings::Default));
                // The store's connection closes before its schema is dropped.
                drop(store);
            }
        }
        let ((plain, plain_runs), (asy, async_runs)) = (median(&runs[0]), median(&runs[1]));
        row(
            format!("drain, {backend}, 1 worker, default, plain handler (median of {RUNS})"),
            format!("{plain:.0}"),
            format!("runs {plain_runs}"),
        );
        row(
            format!("drain, {backend}, 1 worker, default, async handler (median of {RUNS})"),
            format!("{asy:.0}"),
            format!("{:.2}x the plain handler (target >= 0.9x); runs {async_runs}", asy / plain),
        );
    }
}
