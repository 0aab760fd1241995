//! What only async handlers have (issue 22): `ctx.cancelled()` as a future, futures dropped at the
//! end of a shutdown's grace, a group's concurrency counted in futures rather than threads, plain
//! and async handlers in one registry, and liveness that never depends on the application's
//! runtime: a handler blocking its runtime thread costs no other job its lease. The behaviours
//! both kinds share run for both in the other files (`both_flavors!`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backwave::engine::{CancelReason, DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
use backwave::store::{CancelResult, LEASE_EXPIRED};
use backwave::{DetailStatus, JobState};

use super::support::*;
use crate::backend::both_backends;

fn strict(q: &str) -> DispatchPolicy {
    DispatchPolicy::strict([q])
}

/// Sets its flag when dropped: tells whether the engine dropped a future.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

both_backends! {
    fn ctx_cancelled_resolves_on_an_operator_cancel_and_the_job_ends_cancelled() {
        let t = test_store();
        let started = Arc::new(AtomicU32::new(0));
        let mut registry = Registry::new();
        let s = Arc::clone(&started);
        registry
            .handle_async::<String, _, _>("long", move |_, ctx| {
                s.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(30)) => Err(HandlerError::msg("never cancelled")),
                        reason = ctx.cancelled() => {
                            assert_eq!(reason, CancelReason::Operator);
                            Err(HandlerError::cancelled())
                        }
                    }
                }
            })
            .queue("q");
        let id = registry.enqueue(&t.store, "long", "x").unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { lease: Duration::from_millis(300), ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        wait_for("the handler to start", Duration::from_secs(10), || (started.load(Ordering::SeqCst) == 1).then_some(()));
        let asked = Instant::now();
        assert_eq!(t.store.cancel(ACTOR, &[id]).unwrap(), [CancelResult::CancelRequested]);
        let j = wait_terminal(&t.store, id);
        // Reached within a heartbeat (100 ms at this lease), not at the 30 s sleep's end.
        assert!(asked.elapsed() < Duration::from_secs(5), "the cancel took {:?}", asked.elapsed());
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Cancelled, 1));
        assert_eq!(j.terminal_cause.as_deref(), Some("cancelled by tester"));
    }
}

both_backends! {
    /// At the deadline a future that awaits `ctx.cancelled()` stops and reports nothing (a host
    /// shutdown reports nothing): its lease is ended at once, so the next reaper inherits the
    /// job as a lapse; one that ignores it is dropped once the engine stops waiting, its job
    /// left to its lease, as a stuck handler thread's is.
    fn shutdown_ends_the_lease_of_futures_that_stop_when_asked_and_drops_the_rest() {
        let t = test_store();
        let started = Arc::new(AtomicU32::new(0));
        let dropped = Arc::new(AtomicBool::new(false));
        let mut registry = Registry::new();
        let (s, d) = (Arc::clone(&started), Arc::clone(&dropped));
        registry
            .handle_async::<bool, _, _>("wait", move |listens, ctx| {
                s.fetch_add(1, Ordering::SeqCst);
                let flag = DropFlag(Arc::clone(&d));
                async move {
                    if listens {
                        ctx.cancelled().await;
                        return Err(HandlerError::cancelled());
                    }
                    let _flag = flag;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(())
                }
            })
            .queue("q");
        let listening = registry.enqueue(&t.store, "wait", &true).unwrap();
        let deaf = registry.enqueue(&t.store, "wait", &false).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        let lease = Duration::from_secs(60);
        engine.add_worker_group(WorkerGroup { concurrency: 2, lease, ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        let worker = running.worker_ids()[0].1.clone();
        wait_for("both futures to start", Duration::from_secs(10), || (started.load(Ordering::SeqCst) == 2).then_some(()));
        let report = running.shutdown(Duration::from_millis(300));

        assert_eq!((report.stopped, report.abandoned), (1, 1), "{report:?}");
        assert!(dropped.load(Ordering::SeqCst), "the future that ignored the deadline still runs");
        let l = job(&t.store, listening);
        assert_eq!((l.state, l.attempt, l.lease_owner.as_deref()), (JobState::Running, 1, Some(worker.as_str())), "nothing reported");
        assert!(l.lease_expires_at.unwrap() <= t.store.now(), "the listening job's lease was ended at once");
        let d = job(&t.store, deaf);
        assert_eq!((d.state, d.lease_owner.as_deref()), (JobState::Running, Some(worker.as_str())), "left to its lease");
        assert!(d.lease_expires_at.unwrap() > t.store.now() + 30_000, "the deaf job keeps its lease");

        // Any worker's next reap inherits the stopped job as a lapse: one failed attempt. (A lease
        // ended at `now` lapses once the clock has moved past it.)
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(t.store.reap_expired(10).unwrap(), 1);
        let last = t.store.history(listening).unwrap().pop().unwrap();
        assert_eq!((last.to, last.reason.as_deref(), last.attempt), (JobState::Scheduled, Some(LEASE_EXPIRED), 1));
        assert_eq!(last.worker_id.as_deref(), Some(worker.as_str()));
        assert_eq!(job(&t.store, deaf).state, JobState::Running, "the deaf job waits for its lease");
    }
}

both_backends! {
    /// Concurrency 40 on the engine's own runtime (at most 4 threads): 40 futures wait at once.
    fn a_group_s_concurrency_is_the_number_of_futures_in_flight() {
        let t = test_store();
        let (now, peak) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let mut registry = Registry::new();
        let (n, p) = (Arc::clone(&now), Arc::clone(&peak));
        registry
            .handle_async::<u32, _, _>("io", move |_, _| {
                let (n, p) = (Arc::clone(&n), Arc::clone(&p));
                async move {
                    let inflight = n.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(inflight, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    n.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                }
            })
            .queue("q");
        let jobs: Vec<_> = (0..120).map(|i| registry.job("io", &i).unwrap().into_new_job(t.store.now())).collect();
        t.store.enqueue_many(&jobs).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { concurrency: 40, lease: Duration::from_secs(5), ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        wait_for("every job to succeed", Duration::from_secs(30), || {
            (t.store.counts().unwrap().total(JobState::Succeeded) == 120).then_some(())
        });
        running.shutdown(Duration::from_secs(1));
        assert_eq!(peak.load(Ordering::SeqCst), 40, "futures in flight at the peak");
    }
}

both_backends! {
    /// One registry, one group: a plain handler (on the runtime's blocking pool) and async ones,
    /// each with its retries, its panic caught with its message, and quarantine before decoding.
    fn plain_and_async_handlers_share_a_registry_and_a_group() {
        let t = test_store();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        let r = Arc::clone(&ran);
        registry
            .handle::<u32>("plain", move |n, ctx| {
                r.lock().unwrap().push(format!("plain {n} #{}", ctx.attempt()));
                if ctx.attempt() == 1 {
                    panic!("plain {n} panics once");
                }
                Ok(())
            })
            .queue("q");
        let r = Arc::clone(&ran);
        registry
            .handle_async::<u32, _, _>("async", move |n, ctx| {
                let r = Arc::clone(&r);
                async move {
                    tokio::task::yield_now().await;
                    r.lock().unwrap().push(format!("async {n} #{}", ctx.attempt()));
                    if ctx.attempt() == 1 {
                        panic!("async {n} panics once, after an await");
                    }
                    Ok(())
                }
            })
            .queue("q");
        let plain = registry.enqueue(&t.store, "plain", &1u32).unwrap();
        let future = registry.enqueue(&t.store, "async", &2u32).unwrap();
        let undecodable = backwave::engine::Enqueue::new("async", "q", "not a number").unwrap().enqueue(&t.store).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { concurrency: 2, ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        let (p, f, u) = (wait_terminal(&t.store, plain), wait_terminal(&t.store, future), wait_terminal(&t.store, undecodable));
        running.shutdown(Duration::from_secs(1));
        assert_eq!((p.state, p.attempt), (JobState::Succeeded, 2));
        assert_eq!((f.state, f.attempt), (JobState::Succeeded, 2));
        assert_eq!((u.state, u.attempt, u.quarantine_reason), (JobState::Quarantined, 1, Some(backwave::QuarantineReason::UndecodablePayload)));
        let mut ran = ran.lock().unwrap().clone();
        ran.sort();
        assert_eq!(ran, ["async 2 #1", "async 2 #2", "plain 1 #1", "plain 1 #2"]);
        for (id, message) in [(plain, "plain 1 panics once"), (future, "async 2 panics once, after an await")] {
            let first = t.store.history(id).unwrap().into_iter().find(|e| e.from == Some(JobState::Running)).unwrap();
            assert!(matches!(&first.detail, DetailStatus::Hidden { kind, .. } if kind == "panic"), "{:?}", first.detail);
            assert_eq!(first.reason.as_deref(), Some(message));
            let detail = &t.store.reveal_failure_detail(ACTOR, id).unwrap()[0].1;
            assert_eq!((detail.kind.as_str(), detail.message.as_str()), ("panic", message));
        }
    }
}

both_backends! {
    /// Registering a wire name again replaces its handler, whichever kind either is.
    fn registering_a_wire_name_again_replaces_the_handler_of_either_kind() {
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<u32>("job", |_, _| Err(HandlerError::msg("the replaced plain handler ran"))).queue("old");
        registry.handle_async::<u32, _, _>("job", |_, _| async { Ok(()) }).queue("q");
        assert!(registry.has_async());
        assert_eq!((registry.wire_names(), registry.queue_of("job")), (vec!["job".to_string()], Some("q")));
        let id = registry.enqueue(&t.store, "job", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 1));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(j.state, JobState::Succeeded);

        let mut registry = Registry::new();
        registry.handle_async::<u32, _, _>("job", |_, _| async { Ok(()) });
        registry.handle::<u32>("job", |_, _| Ok(()));
        assert!(!registry.has_async(), "the async handler was replaced");
    }
}

both_backends! {
    /// The classic mistake: a handler blocks its runtime thread (a blocking wait, here until the
    /// test releases it, more than two leases later) on the application's runtime of one worker
    /// thread, while other async jobs wait on that runtime.
    /// Heartbeats run on the engine's own threads: every lease is renewed all along, no job is
    /// reaped or re-delivered, and each runs once.
    fn a_handler_blocking_its_runtime_thread_past_the_lease_costs_no_other_job_its_lease() {
        const LEASE: Duration = Duration::from_millis(300);
        let t = test_store();
        let app = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let blocking = Arc::new(AtomicBool::new(false));
        // Released by the test once it has seen the leases renewed; 30 s at most.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let mut registry = Registry::new();
        let (r, b) = (Arc::clone(&runs), Arc::clone(&blocking));
        registry
            .handle_async::<u32, _, _>("work", move |n, ctx| {
                let (r, b, released) = (Arc::clone(&r), Arc::clone(&b), Arc::clone(&released));
                async move {
                    r.lock().unwrap().push((n, ctx.attempt()));
                    if n == 0 {
                        b.store(true, Ordering::SeqCst);
                        let _ = released.lock().unwrap().recv_timeout(Duration::from_secs(30));
                        b.store(false, Ordering::SeqCst);
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Ok(())
                }
            })
            .queue("q");
        let ids: Vec<_> = (0..12u32).map(|n| registry.enqueue(&t.store, "work", &n).unwrap()).collect();
        let mut engine = Engine::new(&t.db, registry);
        engine.runtime(app.handle().clone());
        engine.add_worker_group(WorkerGroup { concurrency: 4, lease: LEASE, ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        // A second worker reaping every 20 ms would take any lease that lapsed.
        let mut watcher = Engine::new(&t.db, Registry::new());
        watcher.add_worker_group(group("watcher", strict("other"), 3));
        let watching = watcher.start().unwrap();

        wait_for("the handler to block its runtime thread", Duration::from_secs(10), || {
            blocking.load(Ordering::SeqCst).then_some(())
        });
        // While the only runtime thread is blocked, the leases of the jobs it holds are renewed.
        let held = |t: &TestStore| -> Vec<(backwave::JobId, i64)> {
            ids.iter()
                .map(|id| job(&t.store, *id))
                .filter(|j| j.state == JobState::Running)
                .map(|j| (j.id, j.lease_expires_at.unwrap()))
                .collect()
        };
        let before = held(&t);
        assert!(before.len() > 1, "the blocker and jobs behind it hold leases: {before:?}");
        std::thread::sleep(2 * LEASE);
        assert!(blocking.load(Ordering::SeqCst), "the handler still blocks");
        let after = held(&t);
        // A job still waiting in the ready buffer may have been handed back meanwhile (no attempt
        // spent): the ones still held are the ones whose leases must have moved.
        let mut renewed = 0;
        for (id, expiry) in &before {
            if let Some((_, now)) = after.iter().find(|(a, _)| a == id) {
                assert!(now > expiry, "job {id}: lease at {expiry}, still at {now}");
                renewed += 1;
            }
        }
        assert!(renewed > 1, "leases renewed while the runtime thread was blocked: {renewed}");
        release.send(()).unwrap();

        for id in &ids {
            assert_eq!(wait_terminal(&t.store, *id).state, JobState::Succeeded);
        }
        let reaped = watching.stats()[0].reaped + running.stats()[0].reaped;
        watching.shutdown(Duration::from_secs(1));
        running.shutdown(Duration::from_secs(1));
        assert_eq!(reaped, 0);
        let mut runs = runs.lock().unwrap().clone();
        runs.sort();
        assert_eq!(runs, (0..12).map(|n| (n, 1)).collect::<Vec<_>>(), "each job ran once, at attempt 1");
        for id in &ids {
            assert!(t.store.history(*id).unwrap().iter().all(|e| e.reason.as_deref() != Some(LEASE_EXPIRED)));
        }
        app.shutdown_background();
    }
}
