//! The store refuses a group's completion writes for a while (a full disk, a trigger): the
//! outcome waits in the group's claim table and is retried on a deadline, while the heartbeat
//! goes on renewing every lease the group holds, the refused one's and the running ones'. No
//! lease lapses meanwhile, so nothing runs twice and no attempt is spent.
//!
//! On PostgreSQL a group writes its outcomes on a connection of its own, beside the one it claims
//! on: a completion the server holds up (behind another transaction's lock) holds up neither the
//! claims and handlers nor the heartbeat, and a shutdown waits for it to land.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::store::LEASE_EXPIRED;
use backwave::JobState;

use super::support::*;
use crate::backend::{self, both_backends, use_backend, Backend};

/// Refuses to record the success of a `quick` job, as a store out of disk would.
fn refuse_quick_successes() -> &'static str {
    match backend::current() {
        Backend::Sqlite => {
            "CREATE TRIGGER refuse_quick BEFORE UPDATE OF state ON jobs
             WHEN NEW.state = 'succeeded' AND NEW.wire_name = 'quick'
             BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
        }
        Backend::Postgres => {
            "CREATE FUNCTION refuse_quick() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'the disk is full'; END $$;
             CREATE TRIGGER refuse_quick BEFORE UPDATE OF state ON jobs FOR EACH ROW
             WHEN (NEW.state = 'succeeded' AND NEW.wire_name = 'quick') EXECUTE FUNCTION refuse_quick()"
        }
    }
}

fn accept_again() -> &'static str {
    match backend::current() {
        Backend::Sqlite => "DROP TRIGGER refuse_quick",
        Backend::Postgres => "DROP TRIGGER refuse_quick ON jobs",
    }
}

both_backends! {
    fn a_refused_completion_write_delays_no_heartbeat_and_no_lease_lapses_while_it_is_retried() {
        let t = test_store();
        t.store.raw_batch(refuse_quick_successes()).unwrap();
        let mut registry = Registry::new();
        registry.handle::<u32>("quick", |_, _| Ok(())).queue("q");
        registry
            .handle::<u64>("long", |ms, _| {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            })
            .queue("q");
        let quick = registry.enqueue(&t.store, "quick", &1u32).unwrap();
        let long = registry.enqueue(&t.store, "long", &1500u64).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        // A lease of 200 ms: a heartbeat every 67 ms. Each refused write is retried 100 ms later;
        // a dispatcher that slept off each refusal before heartbeating would stretch the gaps.
        engine.add_worker_group(WorkerGroup {
            concurrency: 2,
            lease: Duration::from_millis(200),
            ..group("g", DispatchPolicy::strict(["q"]), 1)
        });
        let running = engine.start().unwrap();
        // A second worker reaping every 20 ms would inherit any lease that lapsed.
        let mut watcher = Engine::new(&t.db, Registry::new());
        watcher.add_worker_group(group("watcher", DispatchPolicy::strict(["other"]), 1));
        let watching = watcher.start().unwrap();

        // The store refuses the quick job's success, again and again, while the long one runs.
        wait_for("five refused writes", Duration::from_secs(10), || (running.stats()[0].errors >= 5).then_some(()));
        assert_eq!(job(&t.store, quick).state, JobState::Running, "its outcome waits, its lease held");
        assert!(running.stats()[0].last_error.as_deref().is_some_and(|e| e.contains("the disk is full")));
        t.store.raw_batch(accept_again()).unwrap();

        let (q, l) = (wait_terminal(&t.store, quick), wait_terminal(&t.store, long));
        let reaped = watching.stats()[0].reaped;
        watching.shutdown(Duration::from_secs(1));
        let stats = running.stats()[0].clone();
        running.shutdown(Duration::from_secs(1));
        // Max attempts 1: a lapse would have dead-lettered either job.
        assert_eq!((q.state, q.attempt), (JobState::Succeeded, 1));
        assert_eq!((l.state, l.attempt), (JobState::Succeeded, 1));
        assert_eq!((reaped, stats.reaped, stats.fenced_out), (0, 0, 0));
        for id in [quick, long] {
            assert!(t.store.history(id).unwrap().iter().all(|e| e.reason.as_deref() != Some(LEASE_EXPIRED)));
        }
    }
}

#[test]
fn postgres_a_completion_held_up_by_the_server_holds_up_no_claim_or_heartbeat_and_lands_at_shutdown() {
    let _backend = use_backend(Backend::Postgres);
    let t = test_store();
    // The success of a `held` job waits for an advisory lock this test holds.
    let mut holder = backwave::postgres::Client::connect(t.db.arg(), backwave::postgres::NoTls).unwrap();
    holder.batch_execute("SELECT pg_advisory_lock(2323)").unwrap();
    t.store
        .raw_batch(
            "CREATE FUNCTION wait_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_advisory_xact_lock(2323); RETURN NEW; END $$;
             CREATE TRIGGER hold_success BEFORE UPDATE OF state ON jobs FOR EACH ROW
             WHEN (NEW.state = 'succeeded' AND NEW.wire_name = 'held') EXECUTE FUNCTION wait_for_test()",
        )
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    for name in ["held", "quick"] {
        let ran = Arc::clone(&ran);
        registry
            .handle::<u32>(name, move |_, _| {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .queue("q");
    }
    let held = registry.enqueue(&t.store, "held", &1u32).unwrap();
    let mut engine = Engine::new(&t.db, registry);
    // A lease of 600 ms (a heartbeat every 200 ms), held up for 3 leases below.
    const LEASE_MS: i64 = 600;
    engine.add_worker_group(WorkerGroup {
        lease: Duration::from_millis(LEASE_MS as u64),
        ..group("g", DispatchPolicy::strict(["q"]), 1)
    });
    let running = engine.start().unwrap();
    let mut watcher = Engine::new(&t.db, Registry::new());
    watcher.add_worker_group(group("watcher", DispatchPolicy::strict(["other"]), 1));
    let watching = watcher.start().unwrap();

    wait_for("the held job's handler", Duration::from_secs(10), || (ran.load(Ordering::SeqCst) == 1).then_some(()));
    // Its success is being written, and waits; the group claims and runs on meanwhile.
    let quick: Vec<_> = (0..3u32).map(|i| running.registry().enqueue(&t.store, "quick", &i).unwrap()).collect();
    wait_for("the quick jobs' handlers", Duration::from_secs(10), || (ran.load(Ordering::SeqCst) == 4).then_some(()));
    // Their outcomes wait for the next batch; their leases are renewed meanwhile, three leases
    // on (waited for rather than slept: a fixed sleep reads a lease a busy machine renews late).
    let first: Vec<i64> = quick.iter().map(|id| job(&t.store, *id).lease_expires_at.unwrap()).collect();
    wait_for("the quick jobs' leases renewed through three leases", Duration::from_secs(20), || {
        quick
            .iter()
            .zip(&first)
            .all(|(id, f)| job(&t.store, *id).lease_expires_at.unwrap() >= f + 3 * LEASE_MS)
            .then_some(())
    });
    assert_eq!(job(&t.store, held).state, JobState::Running, "its success is still held up");
    for id in &quick {
        assert_eq!(job(&t.store, *id).state, JobState::Running);
    }

    // The shutdown waits for the held batch, then writes the rest.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        holder.batch_execute("SELECT pg_advisory_unlock(2323)").unwrap();
    });
    let stats = running.stats()[0].clone();
    let report = running.shutdown(Duration::from_secs(10));
    release.join().unwrap();
    let reaped = watching.stats()[0].reaped;
    watching.shutdown(Duration::from_secs(1));
    for id in std::iter::once(held).chain(quick) {
        let j = job(&t.store, id);
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 1), "job {id}");
    }
    assert_eq!((reaped, stats.reaped, stats.fenced_out, report.abandoned), (0, 0, 0, 0));
}
