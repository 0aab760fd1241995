//! Claim-ahead: a group holds more jobs claimed than it has handler threads, in a ready buffer,
//! when its handlers are quick. None of it may weaken a guarantee: a job that never started is
//! handed back without consuming an attempt (at shutdown, or when it waits behind handlers that
//! stalled), an operator's cancel reaches it before it starts, and an idle group still starts a
//! single new job within one poll interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, EngineHandle, Registry, WorkerGroup};
use backwave::store::{CancelResult, HANDED_BACK};
use backwave::{JobId, JobState};

use super::support::*;
use crate::backend::both_backends;

/// Quick jobs that raise the group's pace, so that it claims far ahead of its one thread.
const BURST: u32 = 3_000;
/// Jobs behind the burst whose first run blocks the only handler thread.
const HELD: u32 = 40;

/// A registry with `burst` (returns at once) and `held` (records that it started, then blocks
/// until the gate opens or the engine stops it).
struct Probe {
    started: Arc<Mutex<Vec<JobId>>>,
    gate: Arc<AtomicBool>,
}

impl Probe {
    fn new() -> Self {
        Probe { started: Arc::default(), gate: Arc::default() }
    }

    fn registry(&self) -> Registry {
        let (started, gate) = (Arc::clone(&self.started), Arc::clone(&self.gate));
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "burst", |_, _| Ok(())).queue("q");
        handle::<u32>(&mut registry, "held", move |_, ctx| {
            started.lock().unwrap().push(ctx.job_id());
            while !gate.load(Ordering::SeqCst) && ctx.cancellation().wait_timeout(Duration::from_millis(5)).is_none() {}
            Ok(())
        })
        .queue("q");
        registry
    }

    fn started(&self) -> Vec<JobId> {
        self.started.lock().unwrap().clone()
    }
}

/// One handler thread, quick heartbeats (a 600 ms lease: every 200 ms).
fn one_thread(name: &str) -> WorkerGroup {
    WorkerGroup { concurrency: 1, ..group(name, DispatchPolicy::strict(["q"]), 3) }
}

/// Enqueue the burst and the held jobs, start a one-thread group, and wait until the first held
/// job blocks its thread with more held jobs claimed behind it. Returns the engine, its worker
/// id, and the held jobs in enqueue order.
fn held_behind_a_stuck_handler(t: &TestStore, probe: &Probe) -> (EngineHandle, String, Vec<JobId>) {
    let registry = probe.registry();
    let burst: Vec<_> = (0..BURST).map(|i| registry.job("burst", &i).unwrap().into_new_job(t.store.now())).collect();
    t.store.enqueue_many(&burst).unwrap();
    let held: Vec<_> = (0..HELD).map(|i| registry.job("held", &i).unwrap().into_new_job(t.store.now())).collect();
    let held = t.store.enqueue_many(&held).unwrap();
    let mut engine = Engine::new(&t.db, registry);
    engine.add_worker_group(one_thread("ahead"));
    let running = engine.start().unwrap();
    let worker = running.worker_ids()[0].1.clone();
    wait_for("a held job to block the thread with others claimed behind it", Duration::from_secs(30), || {
        let claimed = held.iter().filter(|id| job(&t.store, **id).state == JobState::Running).count();
        (probe.started().len() == 1 && claimed >= 2).then_some(())
    });
    (running, worker, held)
}

/// A held job handed back: Scheduled again at attempt 0, its log the claim and its undoing.
fn assert_handed_back(t: &TestStore, id: JobId, worker: &str) {
    let j = job(&t.store, id);
    assert_eq!((j.state, j.attempt, j.lease_owner.as_deref()), (JobState::Scheduled, 0, None), "job {id}");
    let log: Vec<_> =
        t.store.history(id).unwrap().into_iter().map(|e| (e.from, e.to, e.attempt, e.worker_id, e.reason)).collect();
    assert_eq!(
        log,
        vec![
            (None, JobState::Scheduled, 0, None, None),
            (Some(JobState::Scheduled), JobState::Running, 1, Some(worker.to_string()), None),
            (Some(JobState::Running), JobState::Scheduled, 0, Some(worker.to_string()), Some(HANDED_BACK.to_string())),
        ],
        "job {id}"
    );
}

/// Run every job left with a second, unstuck engine; each ends Succeeded at attempt 1.
fn heir_runs_them_at_attempt_1(t: &TestStore, ids: &[JobId]) {
    let mut registry = Registry::new();
    handle::<u32>(&mut registry, "held", |_, _| Ok(())).queue("q");
    let mut engine = Engine::new(&t.db, registry);
    engine.add_worker_group(WorkerGroup { concurrency: 4, ..group("heir", DispatchPolicy::strict(["q"]), 3) });
    let heir = engine.start().unwrap();
    for id in ids {
        let j = wait_terminal(&t.store, *id);
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 1), "job {id} was charged for the claim it never ran");
    }
    heir.shutdown(Duration::from_secs(1));
}

both_flavors! {
    fn shutdown_hands_back_claimed_jobs_no_handler_started_without_consuming_an_attempt() {
        let t = test_store();
        let probe = Probe::new();
        let (running, worker, held) = held_behind_a_stuck_handler(&t, &probe);
        // Hand-backs of jobs that waited too long behind the stuck handler before the shutdown
        // (a slow machine) count with the shutdown's.
        let before = running.stats()[0].handed_back;
        let report = running.shutdown(Duration::ZERO);

        let stuck = probe.started()[0];
        assert_eq!(probe.started(), vec![stuck], "no other held job ever started");
        // Asked to stop at the deadline, the handler returned at once: its word is recorded
        // (issue 21), not left to a lapsing lease.
        assert_eq!(report.abandoned, 0, "the handler stopped when asked");
        assert_eq!(job(&t.store, stuck).state, JobState::Succeeded, "it returned Ok when asked to stop");
        let back: Vec<JobId> =
            held.iter().copied().filter(|id| t.store.history(*id).unwrap().len() > 1 && *id != stuck).collect();
        assert!(!back.is_empty(), "some held jobs were claimed ahead");
        assert_eq!(report.handed_back + before, back.len() as u64);
        for id in &back {
            assert_handed_back(&t, *id, &worker);
        }
        probe.gate.store(true, Ordering::SeqCst);
        heir_runs_them_at_attempt_1(&t, &back);
    }
}

both_flavors! {
    fn jobs_claimed_ahead_of_a_stalled_handler_are_handed_back_for_other_workers() {
        let t = test_store();
        let probe = Probe::new();
        let (running, worker, held) = held_behind_a_stuck_handler(&t, &probe);
        let stuck = probe.started()[0];
        let claimed: Vec<JobId> =
            held.iter().copied().filter(|id| *id != stuck && job(&t.store, *id).state == JobState::Running).collect();
        // The first worker stays stuck all along: another one runs the jobs it had claimed.
        wait_for("the jobs held behind the stuck handler to be handed back", Duration::from_secs(10), || {
            claimed.iter().all(|id| job(&t.store, *id).state == JobState::Scheduled).then_some(())
        });
        for id in &claimed {
            assert_handed_back(&t, *id, &worker);
        }
        // Jobs claimed after the snapshot above, before the stall showed in the pace, are handed
        // back too: the count agrees with the log.
        let in_log: usize = held
            .iter()
            .map(|id| t.store.history(*id).unwrap().iter().filter(|e| e.reason.as_deref() == Some(HANDED_BACK)).count())
            .sum();
        // The dispatcher counts a hand-back just after its commit: under load the test can read
        // the store in between (seen: 0 counted, 39 in the log), so wait for the count.
        wait_for("the hand-backs to be counted", Duration::from_secs(10), || {
            (running.stats()[0].handed_back == in_log as u64).then_some(())
        });
        assert!(in_log >= claimed.len());
        heir_runs_them_at_attempt_1(&t, &claimed);
        assert_eq!(probe.started(), vec![stuck]);
        probe.gate.store(true, Ordering::SeqCst);
        running.shutdown(Duration::from_secs(1));
    }
}

both_flavors! {
    fn an_operator_cancel_reaches_a_job_claimed_ahead_and_it_never_starts() {
        let t = test_store();
        let probe = Probe::new();
        let (running, _, held) = held_behind_a_stuck_handler(&t, &probe);
        let stuck = probe.started()[0];
        let waiting =
            held.iter().copied().find(|id| *id != stuck && job(&t.store, *id).state == JobState::Running).unwrap();
        // Asked of the claimed job; a machine that kept this thread off the CPU for the second
        // a buffered job waits before it is handed back finds it Scheduled again and cancels it
        // at once. Either way it must never start.
        let asked = t.store.cancel(ACTOR, &[waiting]).unwrap();
        assert!(matches!(asked[..], [CancelResult::CancelRequested | CancelResult::Cancelled]), "{asked:?}");
        let j = wait_terminal(&t.store, waiting);
        assert_eq!(j.state, JobState::Cancelled);
        assert_eq!(j.terminal_cause.as_deref(), Some(format!("cancelled by {ACTOR}").as_str()));
        let last = t.store.history(waiting).unwrap().pop().unwrap();
        assert_eq!((last.to, last.actor.as_deref()), (JobState::Cancelled, Some(ACTOR)));
        probe.gate.store(true, Ordering::SeqCst);
        for id in held.iter().filter(|id| **id != waiting) {
            assert_eq!(wait_terminal(&t.store, *id).state, JobState::Succeeded);
        }
        running.shutdown(Duration::from_secs(1));
        assert!(!probe.started().contains(&waiting), "the cancelled job's handler ran");
    }
}

both_backends! {
    fn a_single_job_enqueued_into_an_idle_engine_starts_within_one_poll_interval() {
        const POLL: Duration = Duration::from_millis(300);
        let t = test_store();
        let (tx, rx) = mpsc::channel::<Instant>();
        let tx = Mutex::new(tx);
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "burst", |_, _| Ok(())).queue("q");
        handle::<u32>(&mut registry, "timed", move |_, _| {
                tx.lock().unwrap().send(Instant::now()).unwrap();
                Ok(())
            })
            .queue("q");
        // A burst first, so the group has claimed far ahead before it goes idle.
        let burst: Vec<_> = (0..BURST).map(|i| registry.job("burst", &i).unwrap().into_new_job(t.store.now())).collect();
        t.store.enqueue_many(&burst).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup {
            poll_interval: POLL,
            concurrency: 4,
            ..group("idle", DispatchPolicy::strict(["q"]), 3)
        });
        let running = engine.start().unwrap();
        wait_for("the burst to drain", Duration::from_secs(60), || {
            (t.store.counts().unwrap().total(JobState::Succeeded) == BURST as u64).then_some(())
        });
        let mut waits = Vec::new();
        for i in 0..6u32 {
            // Each at another point of the poll cycle.
            std::thread::sleep(POLL.mul_f64(f64::from(i) / 6.0 + 0.1));
            let new = running.registry().job("timed", &i).unwrap().into_new_job(t.store.now());
            let enqueued = Instant::now();
            t.store.enqueue(&new).unwrap();
            let started = rx.recv_timeout(Duration::from_secs(10)).expect("the job started");
            waits.push(started.saturating_duration_since(enqueued));
        }
        running.shutdown(Duration::from_secs(1));
        waits.sort();
        // Within one poll interval as a rule; none waits for anything like a long sleep, with
        // room for a busy machine keeping a thread off the CPU for a while (the speed itself is
        // the latency benchmark's to measure).
        assert!(waits[waits.len() / 2] < POLL, "enqueue-to-start: {waits:?}");
        assert!(waits[waits.len() - 1] < POLL * 10, "enqueue-to-start: {waits:?}");
    }
}
