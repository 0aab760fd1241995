//! Wake on enqueue (issue 40): an idle group starts a job the moment it is enqueued, by this
//! process (the store's bell) or by another connection or process (PostgreSQL's notifications,
//! SQLite's `data_version`), not at its next poll. Every group here polls once a minute, so a
//! job that starts within seconds was started by a wake-up; the latency itself is measured by
//! the benchmarks (`peers/run.sh latency`), never here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, EngineHandle, HandlerError, Registry, WorkerGroup};
use backwave::store::Heard;
use backwave::{JobId, JobState, NewJob, RetryPolicy, Store};

use super::support::*;
use crate::backend::{both_backends, TestDb};

/// A poll interval no test waits for: a job that starts sooner was woken.
const NEVER: Duration = Duration::from_secs(60);
/// How long a woken job may take to start on a loaded test machine (the benchmarks measure the
/// real figure, milliseconds): far below [`NEVER`].
const SOON: Duration = Duration::from_secs(10);

/// The moment each job's handler started, by payload.
type Starts = Arc<Mutex<Vec<(u32, Instant)>>>;

fn engine(t: &TestStore, poll_only: bool, starts: &Starts) -> EngineHandle {
    let mut registry = Registry::new();
    let s = Arc::clone(starts);
    registry
        .handle::<u32>("ping", move |n, _| {
            s.lock().unwrap().push((n, Instant::now()));
            Ok(())
        })
        .queue("q");
    let mut engine = Engine::new(&t.db, registry);
    engine.poll_only(poll_only);
    engine.add_worker_group(WorkerGroup { poll_interval: NEVER, ..group("idle", DispatchPolicy::strict(["q"]), 3) });
    let running = engine.start().unwrap();
    // Let the first claim find nothing: from here on the group is idle until something wakes it.
    std::thread::sleep(Duration::from_millis(200));
    running
}

/// Enqueue on a connection of the database's own driver inside a transaction of its own, as
/// another process would: nothing in this process hears of it but through the store.
fn enqueue_elsewhere(db: &TestDb, n: u32) -> JobId {
    let job = NewJob::new("ping", "q", serde_json::to_vec(&n).unwrap());
    match db.schema() {
        None => {
            let mut conn = backwave::rusqlite::Connection::open(db.file()).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            let tx = conn.transaction().unwrap();
            let id = backwave::enqueue_in_sqlite(&tx, &job).unwrap().id();
            tx.commit().unwrap();
            id
        }
        Some(_) => {
            let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
            let mut tx = client.transaction().unwrap();
            let id = backwave::enqueue_in_postgres(&mut tx, &job).unwrap().id();
            tx.commit().unwrap();
            id
        }
    }
}

fn wait_succeeded(store: &Store, id: JobId, within: Duration) {
    wait_for(&format!("job {id} to succeed"), within, || (job(store, id).state == JobState::Succeeded).then_some(()));
}

both_backends! {
    fn a_job_enqueued_by_another_connection_starts_without_waiting_for_the_poll() {
        let t = test_store();
        let starts = Starts::default();
        let running = engine(&t, false, &starts);
        for n in 0..3 {
            let id = enqueue_elsewhere(&t.db, n);
            wait_succeeded(&t.store, id, SOON);
        }
        assert_eq!(starts.lock().unwrap().len(), 3);
        running.shutdown(Duration::from_secs(5));
    }

    fn a_job_enqueued_by_this_process_rings_its_groups_even_when_they_only_poll() {
        let t = test_store();
        let starts = Starts::default();
        let running = engine(&t, true, &starts);
        // Another `Store` of this process (as a request handler holds): the bell, no listener.
        let other = Store::open(&t.db).unwrap();
        for n in 0..3 {
            let id = other.enqueue(&NewJob::new("ping", "q", serde_json::to_vec(&n).unwrap())).unwrap();
            wait_succeeded(&t.store, id, SOON);
        }
        running.shutdown(Duration::from_secs(5));
    }

    fn poll_only_leaves_another_connections_job_to_the_poll() {
        let t = test_store();
        let starts = Starts::default();
        let mut registry = Registry::new();
        let s = Arc::clone(&starts);
        registry.handle::<u32>("ping", move |n, _| {
            s.lock().unwrap().push((n, Instant::now()));
            Ok(())
        }).queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.poll_only(true);
        let poll = Duration::from_millis(700);
        engine.add_worker_group(WorkerGroup { poll_interval: poll, ..group("idle", DispatchPolicy::strict(["q"]), 3) });
        let running = engine.start().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // Enqueued right after an empty claim: the next look is the poll's, up to 700 ms later.
        let ids: Vec<JobId> = (0..3).map(|n| {
            let id = enqueue_elsewhere(&t.db, n);
            wait_succeeded(&t.store, id, SOON);
            id
        }).collect();
        // Each started within a poll interval of its enqueue (the log's own times). Each waits
        // about one interval, so the middle of the three is held to it (a look later than the
        // poll's, such as a backoff growing while idle, would put it near two intervals); one
        // start gets room for a busy machine's slow turn.
        let mut waits: Vec<i64> = ids
            .iter()
            .map(|id| {
                let log = t.store.history(*id).unwrap();
                log[1].at - log[0].at
            })
            .collect();
        waits.sort();
        // And not sooner: a wake-up (the listener's notification, SQLite's look every 4 ms)
        // would start each within milliseconds. The middle one, enqueued just after the look
        // that found its predecessor's queue empty, waits most of an interval.
        assert!(waits[1] >= 150, "started {waits:?} ms after their enqueues: woken, not polled");
        assert!(waits[1] <= 700 + 300, "started {waits:?} ms after their enqueues with a 700 ms poll");
        assert!(waits[2] <= 700 + 1_300, "started {waits:?} ms after their enqueues with a 700 ms poll");
        running.shutdown(Duration::from_secs(5));
    }

    fn a_retry_due_later_starts_at_its_due_time_not_at_the_next_poll() {
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<u32>("flaky", |_, ctx| {
            if ctx.attempt() == 1 { Err(HandlerError::msg("once")) } else { Ok(()) }
        }).queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup {
            poll_interval: NEVER,
            retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(300)).unwrap(),
            ..group("idle", DispatchPolicy::strict(["q"]), 3)
        });
        let running = engine.start().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let id = t.store.enqueue(&NewJob::new("flaky", "q", serde_json::to_vec(&1u32).unwrap())).unwrap();
        let started = Instant::now();
        while job(&t.store, id).state != JobState::Succeeded {
            assert!(
                started.elapsed() < SOON,
                "job {id} did not succeed: {:?}\n{:?}\n{:?}",
                job(&t.store, id),
                t.store.history(id).unwrap(),
                running.stats()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let log = t.store.history(id).unwrap();
        let states: Vec<JobState> = log.iter().map(|e| e.to).collect();
        assert_eq!(states, [JobState::Scheduled, JobState::Running, JobState::Scheduled, JobState::Running, JobState::Succeeded]);
        // The retry was due 300 ms after the failure; its claim came right after that, not a
        // minute later at the poll. (The benchmarks time it; here a loaded machine gets slack.)
        let (failed, retried) = (log[2].at, log[3].at);
        assert!(retried - failed >= 300, "claimed {} ms after the failure, before its due time", retried - failed);
        assert!(retried - failed < 300 + 5_000, "claimed {} ms after the failure: it waited for a poll", retried - failed);
        running.shutdown(Duration::from_secs(5));
    }

    fn a_burst_of_ten_batches_is_heard_at_most_ten_times_per_queue() {
        let t = test_store();
        let mut listener = t.store.listen().unwrap();
        let mut enqueued = 0;
        for batch in 0..10u32 {
            let jobs: Vec<NewJob> = (0..1_000u32)
                .map(|i| NewJob::new("ping", "q", serde_json::to_vec(&(batch * 1_000 + i)).unwrap()))
                .collect();
            enqueued += t.store.enqueue_many(&jobs).unwrap().len();
        }
        assert_eq!(enqueued, 10_000);
        // Everything the listener hears until it has heard nothing for a second.
        let mut heard = Vec::new();
        loop {
            let more = listener.wait(Duration::from_secs(1)).unwrap();
            if more.is_empty() {
                break;
            }
            heard.extend(more);
        }
        // PostgreSQL: one notification per queue per transaction; SQLite: one change of the
        // file per commit, which a listener may see as one.
        let about_q = heard.iter().filter(|h| matches!(h, Heard::Queue(q) if q == "q") || **h == Heard::Anything).count();
        assert!((1..=10).contains(&about_q), "heard {heard:?}");
        assert!(heard.iter().all(|h| matches!(h, Heard::Queue(q) if q == "q") || *h == Heard::Anything), "{heard:?}");
    }
}

/// A listening connection that the server ends (`pg_terminate_backend`, a failover, an idle
/// timeout) is opened again, and the job enqueued meanwhile starts without the poll.
#[test]
fn a_killed_listening_connection_is_opened_again_and_the_missed_job_starts() {
    let _backend = crate::backend::use_backend(crate::backend::Backend::Postgres);
    let t = test_store();
    let starts = Starts::default();
    let running = engine(&t, false, &starts);
    let schema = t.db.schema().unwrap().to_string();
    let listening = |t: &TestStore| {
        let rows = crate::backend::plain_query(
            &t.db,
            &format!("SELECT pid::bigint FROM pg_stat_activity WHERE application_name = left('backwave listen {schema}', 63)"),
        );
        rows.into_iter().map(|r| r[0].as_i64()).collect::<Vec<i64>>()
    };
    let before = wait_for("the listening connection", SOON, || {
        let pids = listening(&t);
        (!pids.is_empty()).then_some(pids)
    });
    crate::backend::plain_query(
        &t.db,
        &format!("SELECT pg_terminate_backend(pid)::int FROM unnest(ARRAY{before:?}::int[]) AS p(pid)"),
    );
    // Enqueued while it may still be down: the reconnection claims at once.
    let first = enqueue_elsewhere(&t.db, 1);
    wait_succeeded(&t.store, first, SOON);
    wait_for("a new listening connection", SOON, || listening(&t).iter().any(|p| !before.contains(p)).then_some(()));
    // And the new one hears the next job.
    let second = enqueue_elsewhere(&t.db, 2);
    wait_succeeded(&t.store, second, SOON);
    running.shutdown(Duration::from_secs(5));
}
