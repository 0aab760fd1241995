//! Something holds the whole store for longer than a lease: on SQLite a process that holds (or
//! froze holding) the write lock, on PostgreSQL a lock on the jobs table (a migration, a VACUUM
//! FULL). Every worker's heartbeat waits behind it alike, and the first writer through once it
//! is free may be a reaper that finds leases lapsed only for that wait: a lapse is reaped only
//! once confirmed (seen again a second later, the expiry unmoved). A live worker keeps its job,
//! whichever reaper gets the store first, while a worker that really died meanwhile still
//! loses its lease once the store is free again.

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Enqueue, Registry, WorkerGroup};
use backwave::store::LEASE_EXPIRED;
use backwave::JobState;

use super::support::*;
use crate::backend::{both_backends, TestDb};

/// A lease of 300 ms: a heartbeat every 100 ms; the store is held for 1.2 s, four leases.
const LEASE: Duration = Duration::from_millis(300);
const HOLD: Duration = Duration::from_millis(1_200);

/// Hold every writer (and, on PostgreSQL, every reader of `jobs`) off the store for `hold`, from
/// a connection of the database's own client, as another program would; `held` is called once
/// the hold is in place (a connection can take a while on a busy machine).
fn hold_store(db: &TestDb, hold: Duration, held: impl FnOnce()) {
    match db.schema() {
        None => {
            let conn = backwave::rusqlite::Connection::open(db.file()).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            held();
            std::thread::sleep(hold);
            conn.execute_batch("COMMIT").unwrap();
        }
        Some(_) => {
            let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
            client.batch_execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").unwrap();
            held();
            std::thread::sleep(hold);
            client.batch_execute("COMMIT").unwrap();
        }
    }
}

/// [`hold_store`] on a thread of `scope`; returns once the hold is in place.
fn hold_store_beside<'s>(scope: &'s std::thread::Scope<'s, '_>, db: &'s TestDb, hold: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    scope.spawn(move || hold_store(db, hold, move || tx.send(()).unwrap()));
    rx.recv_timeout(Duration::from_secs(30)).expect("the store held");
}

/// A watcher engine on the same store with nothing to run: it looks for lapsed leases every
/// 20 ms. Its own lease is long (a heartbeat interval of 2 s) so that only the store holds it
/// up, never a slow turn of its own on a loaded machine.
fn watcher(db: &TestDb) -> backwave::engine::EngineHandle {
    let mut watcher = Engine::new(db, Registry::new());
    watcher.add_worker_group(WorkerGroup {
        lease: Duration::from_secs(6),
        ..group("watcher", DispatchPolicy::strict(["other"]), 1)
    });
    watcher.start().unwrap()
}

/// A live worker runs a 2.5 s job under its 300 ms lease while the store is held for 1.2 s; the
/// watcher starts before the hold, or (`watcher_after`) just as the store comes back. Nobody
/// reaps the job: it succeeds at its first attempt (max attempts 1: a lapse would dead-letter it).
fn a_live_worker_keeps_its_job_across_a_held_store(watcher_after: bool) {
    let t = test_store();
    let mut registry = Registry::new();
    registry
        .handle::<u64>("long", |ms, _| {
            std::thread::sleep(Duration::from_millis(ms));
            Ok(())
        })
        .queue("q");
    let id = registry.enqueue(&t.store, "long", &2_500u64).unwrap();
    let mut engine = Engine::new(&t.db, registry);
    engine.add_worker_group(WorkerGroup { lease: LEASE, ..group("g", DispatchPolicy::strict(["q"]), 1) });
    let running = engine.start().unwrap();
    let before = (!watcher_after).then(|| watcher(&t.db));
    wait_for("the job to run", Duration::from_secs(10), || {
        (job(&t.store, id).state == JobState::Running).then_some(())
    });

    let held = Instant::now();
    hold_store(&t.db, HOLD, || ());
    assert!(held.elapsed() >= HOLD);
    let watching = before.unwrap_or_else(|| watcher(&t.db));

    let j = wait_terminal(&t.store, id);
    let reaped = (running.stats()[0].reaped, watching.stats()[0].reaped);
    watching.shutdown(Duration::from_secs(1));
    running.shutdown(Duration::from_secs(1));
    assert_eq!((j.state, j.attempt), (JobState::Succeeded, 1), "{:?}", t.store.history(id).unwrap());
    assert_eq!(reaped, (0, 0));
    assert!(t.store.history(id).unwrap().iter().all(|e| e.reason.as_deref() != Some(LEASE_EXPIRED)));
}

both_backends! {
    fn a_store_held_past_every_lease_lapses_no_live_worker_s_lease() {
        a_live_worker_keeps_its_job_across_a_held_store(false);
    }

    /// The reaper that gets the store first once it is free has seen no stall at all: it was
    /// started as the store came back (a replacement worker, a deploy), so nothing it did ever
    /// waited. Its first look races the live worker's queued heartbeat, and often wins.
    fn a_reaper_started_as_the_store_comes_back_reaps_no_live_worker_s_lease() {
        a_live_worker_keeps_its_job_across_a_held_store(true);
    }

    fn a_worker_that_died_while_the_store_was_held_still_loses_its_lease_once_it_is_free() {
        let t = test_store();
        let id = Enqueue::new("sleepy", "sleepy", "zzz").unwrap().enqueue(&t.store).unwrap();
        let mut child = ChildWorker::spawn(&[t.db.arg(), "sleepy", "3", &LEASE.as_millis().to_string()]);
        wait_for("the child to run the job", Duration::from_secs(10), || {
            let j = job(&t.store, id);
            (j.state == JobState::Running && j.lease_owner.as_deref() == Some(child.worker_id.as_str())).then_some(())
        });
        let watching = watcher(&t.db);
        std::thread::scope(|s| {
            hold_store_beside(s, &t.db, HOLD);
            std::thread::sleep(HOLD / 4);
            child.kill();
        });
        let freed = Instant::now();

        wait_for("the dead worker's lease to be reaped", Duration::from_secs(10), || {
            let j = job(&t.store, id);
            (j.state == JobState::Scheduled && j.attempt == 1).then_some(())
        });
        // Confirmed after the stall, then reaped: within seconds of the store coming back, not
        // never.
        assert!(freed.elapsed() < Duration::from_secs(6), "reaped {:?} after the store was free", freed.elapsed());
        // The watcher counts its reap once the reaping transaction has committed: the job may be
        // read Scheduled a moment before the count moves (seen under load).
        wait_for("the watcher to count its reap", Duration::from_secs(5), || {
            (watching.stats()[0].reaped == 1).then_some(())
        });
        let lapse = t.store.history(id).unwrap().into_iter().last().unwrap();
        assert_eq!((lapse.from, lapse.reason.as_deref()), (Some(JobState::Running), Some(LEASE_EXPIRED)));
        watching.shutdown(Duration::from_secs(1));
    }
}

both_backends! {
    /// `serve_until`: a stop held up by the store (here its lease ends and the registry
    /// row wait behind the hold) ends at the third SIGTERM or SIGINT, as the signal would end a
    /// process without a handler; the first asked for the grace period, the second cut it short.
    fn a_third_stop_signal_ends_a_worker_whose_stop_the_held_store_holds_up() {
        use std::os::unix::process::ExitStatusExt;
        let t = test_store();
        let id = Enqueue::new("sleepy", "sleepy", "zzz").unwrap().enqueue(&t.store).unwrap();
        let mut child = ChildWorker::spawn(&[t.db.arg(), "sleepy", "3", "60000"]);
        let worker = child.worker_id.clone();
        // Its handler running, not only its job claimed: a job claimed but not started is handed
        // back at the first signal and the child ends at once (exit 0), before the test could
        // see it marked stopping (seen once in a CI run).
        assert_eq!(child.next_line(), format!("started {id}"));
        child.signal(libc::SIGTERM);
        // A wait, not a timing: under a full parallel run the child has taken over 10 s to be
        // scheduled and write it (once in a run of 1,075 tests), and once over 30 s (in 1,084;
        // the child's warnings, on the test's stderr, say what its store answered meanwhile).
        wait_for("the worker to be marked stopping", Duration::from_secs(90), || {
            if let Some(status) = child.child.try_wait().unwrap() {
                panic!("the child ended ({status}) before it was marked stopping");
            }
            t.store.worker_states().unwrap().iter().find(|s| s.id == worker)?.stopping_at.map(drop)
        });
        std::thread::scope(|s| {
            hold_store_beside(s, &t.db, Duration::from_secs(8));
            child.signal(libc::SIGINT);
            std::thread::sleep(Duration::from_millis(700));
            assert!(child.child.try_wait().unwrap().is_none(), "the stop was not held up by the store");
            let third = Instant::now();
            child.signal(libc::SIGTERM);
            let status = wait_for("the child to end", Duration::from_secs(5), || child.child.try_wait().unwrap());
            assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
            assert!(third.elapsed() < Duration::from_secs(3), "ended {:?} after the third signal", third.elapsed());
        });
    }
}
