//! A run of a job that this same worker claims again while the earlier run is still going:
//! its lease was reaped (and maybe the job requeued), so the earlier run is stale. Its outcome
//! must never count for the new claim, and its end must not take the new claim's heartbeat away.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, EngineHandle, HandlerError, Registry, WorkerGroup};
use backwave::store::{RequeueResult, LEASE_EXPIRED};
use backwave::{Clock, JobId, JobState, RetryPolicy, Store};

use super::support::*;

const LEASE: Duration = Duration::from_millis(300);

/// A handler whose run `n` (1-based, counted over all attempts) blocks until gate `n` opens,
/// ignoring its cancellation signal, then fails if `fail_first` and it is run 1.
struct Gated {
    runs: Arc<AtomicU32>,
    gates: Arc<[AtomicBool; 2]>,
}

impl Gated {
    fn new() -> Self {
        Gated { runs: Arc::new(AtomicU32::new(0)), gates: Arc::new([AtomicBool::new(false), AtomicBool::new(false)]) }
    }

    fn registry(&self, fail_first: bool) -> Registry {
        let (runs, gates) = (Arc::clone(&self.runs), Arc::clone(&self.gates));
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "gated", move |_, _| {
            let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
            while !gates[(run as usize - 1).min(1)].load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if run == 1 && fail_first {
                return Err(HandlerError::msg("stale run 1 finished late"));
            }
            Ok(())
        })
        .queue("q");
        registry
    }

    fn open(&self, run: usize) {
        self.gates[run - 1].store(true, Ordering::SeqCst);
    }

    fn wait_runs(&self, n: u32) {
        wait_for(&format!("handler run {n} to start"), Duration::from_secs(10), || {
            (self.runs.load(Ordering::SeqCst) >= n).then_some(())
        });
    }
}

fn start(t: &TestStore, clock: &Clock, registry: Registry, policy: RetryPolicy) -> EngineHandle {
    let mut engine = Engine::new(&t.db, registry);
    engine.clock(clock.clone());
    engine.add_worker_group(WorkerGroup {
        name: "g".into(),
        policy: DispatchPolicy::strict(["q"]),
        poll_interval: Duration::from_millis(10),
        retry_policy: policy,
        concurrency: 2,
        lease: LEASE,
        ..WorkerGroup::default()
    });
    engine.start().unwrap()
}

/// Let attempt `attempt` of the job lapse on the manual clock and reap it (the engine's own
/// heartbeat may renew it in between: try until it is gone).
fn lapse(store: &Store, clock: &Clock, id: JobId, attempt: u32) {
    // The clock moves just past this attempt's lease as last read (a heartbeat may have renewed
    // it), never further: moving it a whole lease each round could lapse the next attempt too
    // when the engine reaped and claimed again in between (on PostgreSQL a reap skips a row
    // the engine holds locked, so this may take more than one round).
    wait_for("the lease to lapse and be reaped", Duration::from_secs(10), || {
        let j = job(store, id);
        if j.state != JobState::Running || j.attempt != attempt {
            return Some(());
        }
        clock.set(clock.now().max(j.lease_expires_at.unwrap() + 1));
        store.reap_expired(10).unwrap();
        None
    });
}

fn outcomes_seen(running: &EngineHandle) -> u64 {
    let s = &running.stats()[0];
    s.succeeded + s.retried + s.dead_lettered + s.cancelled + s.fenced_out
}

both_flavors! {
    fn a_stale_run_s_late_outcome_never_counts_for_the_same_worker_s_claim_after_a_requeue() {
        let t = test_store();
        let clock = Clock::manual(1_767_225_600_000);
        let store = Store::open(&t.db).unwrap().with_clock(clock.clone());
        let gated = Gated::new();
        let id = store.enqueue(&backwave::NewJob::new("gated", "q", b"1".to_vec())).unwrap();
        let running = start(&t, &clock, gated.registry(true), RetryPolicy::new(1, Duration::ZERO).unwrap());
        gated.wait_runs(1);

        // Attempt 1's lease lapses on its last attempt; an operator requeues it and the same
        // worker claims it again as attempt 1 while run 1 still hangs.
        lapse(&store, &clock, id, 1);
        assert_eq!(job(&store, id).terminal_cause.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(store.requeue(ACTOR, &[id]).unwrap(), [RequeueResult::Requeued { from: JobState::DeadLettered }]);
        gated.wait_runs(2);
        let j = job(&store, id);
        assert_eq!((j.state, j.attempt), (JobState::Running, 1));

        // Run 1 now fails: that is the old execution speaking, not the one that holds the claim.
        gated.open(1);
        wait_for("run 1's outcome to be handled", Duration::from_secs(10), || (outcomes_seen(&running) >= 1).then_some(()));
        let j = job(&store, id);
        assert_eq!(
            (j.state, j.terminal_cause.as_deref()),
            (JobState::Running, None),
            "the stale run's failure was recorded against the new claim"
        );

        gated.open(2);
        let j = wait_terminal(&store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 1));
        assert!(store.history(id).unwrap().iter().all(|e| e.reason.as_deref() != Some("stale run 1 finished late")));
    }
}

both_flavors! {
    fn a_stale_run_ending_does_not_stop_the_heartbeat_of_the_same_worker_s_next_attempt() {
        let t = test_store();
        let clock = Clock::manual(1_767_225_600_000);
        let store = Store::open(&t.db).unwrap().with_clock(clock.clone());
        let gated = Gated::new();
        let id = store.enqueue(&backwave::NewJob::new("gated", "q", b"1".to_vec())).unwrap();
        let running = start(&t, &clock, gated.registry(false), RetryPolicy::new(3, Duration::ZERO).unwrap());
        gated.wait_runs(1);

        lapse(&store, &clock, id, 1);
        gated.wait_runs(2);
        assert_eq!((job(&store, id).state, job(&store, id).attempt), (JobState::Running, 2));

        // Run 1 succeeds late: fenced out. Attempt 2 must keep being heartbeated.
        gated.open(1);
        wait_for("run 1's late success to be fenced out", Duration::from_secs(10), || {
            (running.stats()[0].fenced_out >= 1).then_some(())
        });
        // Half a lease passes, and attempt 2 is heartbeated after it (waited for, not slept: a
        // fixed sleep fails on a host that keeps the dispatcher off the CPU for as long).
        clock.advance(LEASE / 2);
        let renewed_past = clock.now() + LEASE.as_millis() as i64;
        wait_for("attempt 2 to be heartbeated after the fenced-out run", Duration::from_secs(10), || {
            (job(&store, id).lease_expires_at.is_some_and(|at| at >= renewed_past)).then_some(())
        });
        clock.advance(LEASE / 2 + Duration::from_millis(10));
        let reaped = store.reap_expired(10).unwrap();
        let j = job(&store, id);
        assert_eq!(
            (reaped, j.state, j.attempt),
            (0, JobState::Running, 2),
            "attempt 2's lease lapsed although its worker is alive and its handler running"
        );

        gated.open(2);
        let j = wait_terminal(&store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        let lapsed: Vec<u32> = store
            .history(id)
            .unwrap()
            .iter()
            .filter(|e| e.reason.as_deref() == Some(LEASE_EXPIRED))
            .map(|e| e.attempt)
            .collect();
        assert_eq!(lapsed, [1]);
    }
}
