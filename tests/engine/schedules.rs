//! Recurring schedules across processes (issue 20): four `engine_worker` processes declare one
//! every-second schedule on a clock the test moves through a file, and each tick gets exactly one
//! job while processes are SIGKILLed and restarted, with no leader among them; ticks missed while
//! every process was down follow the missed-tick policy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::both_backends;
use crate::engine::support::*;
use backwave::schedule::TICK_LABEL;
use backwave::Store;

/// 2026-01-01T00:00:00.500Z: half a second past a tick, so "due" is never a matter of a millisecond.
const START: i64 = 1_767_225_600_500;

/// The shared clock: the children follow this file (replaced by a rename, never half-written).
struct FileClock(PathBuf);

impl FileClock {
    fn new(dir: &Path, at: i64) -> FileClock {
        let c = FileClock(dir.join("clock"));
        c.set(at);
        c
    }

    fn set(&self, at: i64) {
        let tmp = self.0.with_extension("tmp");
        std::fs::write(&tmp, at.to_string()).unwrap();
        std::fs::rename(&tmp, &self.0).unwrap();
    }
}

fn spawn(t: &TestStore, clock: &FileClock, missed: &str) -> ChildWorker {
    ChildWorker::spawn(&[t.db.arg(), "ticks", clock.0.to_str().unwrap(), missed])
}

/// The tick label of every job the schedule made, in creation order.
fn ticks(store: &Store) -> Vec<String> {
    store
        .raw_query("SELECT id FROM jobs WHERE wire_name = 'tick' ORDER BY created_at, id", &[])
        .unwrap()
        .into_iter()
        .map(|r| job(store, r[0].as_str().parse().unwrap()).labels[TICK_LABEL].clone())
        .collect()
}

fn count(store: &Store) -> usize {
    store.raw_scalar("SELECT count(*) FROM jobs WHERE wire_name = 'tick'", &[]).unwrap().as_i64() as usize
}

fn wait_count(store: &Store, n: usize, at_tick: i64) {
    wait_for(&format!("{n} tick jobs by tick {at_tick}"), Duration::from_secs(20), || {
        (count(store) >= n).then_some(())
    });
}

/// `2026-01-01T00:00:07Z` for the tick `n` seconds after START's second.
fn label(n: i64) -> String {
    let t = jiff::Timestamp::from_millisecond(START - 500 + n * 1000).unwrap();
    t.to_string()
}

both_backends! {
    fn four_processes_fire_every_tick_exactly_once_while_killed_and_restarted_and_missed_ticks_follow_the_policy() {
        let t = test_store();
        let dir = tempfile::tempdir().unwrap();
        let clock = FileClock::new(dir.path(), START);
        let mut workers: Vec<ChildWorker> = (0..4).map(|_| spawn(&t, &clock, "latest")).collect();
        let mut expected: Vec<String> = Vec::new();
        // A small LCG: which process dies is arbitrary but reproducible.
        let mut seed: u64 = 0x5eed;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut tick = 0i64;
        while tick < 240 {
            if tick == 120 {
                // Every process down while ten ticks pass: under `latest` only the last fires.
                for w in &mut workers {
                    w.kill();
                }
                tick += 10;
                clock.set(START + tick * 1000);
                workers = (0..4).map(|_| spawn(&t, &clock, "latest")).collect();
                expected.push(label(tick));
                wait_count(&t.store, expected.len(), tick);
                continue;
            }
            tick += 1;
            clock.set(START + tick * 1000);
            if tick % 7 == 0 {
                // Killed just as the tick comes due: perhaps inside its firing transaction.
                let victim = next(workers.len());
                workers[victim].kill();
                workers[victim] = spawn(&t, &clock, "latest");
            }
            expected.push(label(tick));
            wait_count(&t.store, expected.len(), tick);
        }
        // Let any late duplicate land before counting.
        std::thread::sleep(Duration::from_millis(300));
        let fired = ticks(&t.store);
        assert_eq!(fired.len(), expected.len(), "one job per tick, no more");
        let mut sorted = fired.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "exactly the ticks that came due, each once");
        assert!(expected.len() >= 200, "{} ticks", expected.len());
        assert!(!fired.contains(&label(125)), "a tick missed while all were down did not fire");
        drop(workers);
        let row = t.store.schedule("every-second").unwrap().row;
        assert_eq!(row.last_tick, START - 500 + tick * 1000);
    }

    fn ticks_missed_while_every_process_was_down_catch_up_to_the_bound_or_are_skipped() {
        // Down from tick 1 to 41: ticks 2 to 41 missed, the last one 0.5 s old (on time).
        let cases = [
            ("catch-up-3", vec![label(1), label(39), label(40), label(41)]),
            // Skip drops the 39 late ticks; the latest is within the grace, so it fires.
            ("skip", vec![label(1), label(41)]),
        ];
        for (missed, want) in cases {
            let t = test_store();
            let dir = tempfile::tempdir().unwrap();
            let clock = FileClock::new(dir.path(), START);
            let mut w = spawn(&t, &clock, missed);
            clock.set(START + 1000);
            wait_count(&t.store, 1, 1);
            w.kill();
            clock.set(START + 41_000);
            let _w = spawn(&t, &clock, missed);
            wait_count(&t.store, want.len(), 41);
            std::thread::sleep(Duration::from_millis(300));
            let fired = ticks(&t.store);
            assert_eq!(fired, want, "{missed}");
        }
    }
}
