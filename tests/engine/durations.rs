//! Durations an application passes in, at their extremes: `Duration::MAX` reads as "never" or
//! "as long as it takes", and must mean that rather than panic on an `Instant` overflow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::store::CancelResult;
use backwave::JobState;

use super::support::*;
use crate::backend::both_backends;

fn group_q(name: &str) -> WorkerGroup {
    group(name, DispatchPolicy::strict(["q"]), 1)
}

both_backends! {
    fn shutdown_with_an_unbounded_grace_period_waits_for_the_handler_instead_of_panicking() {
        let t = test_store();
        let mut registry = Registry::new();
        let started = Arc::new(AtomicBool::new(false));
        registry
            .handle::<u64>("slow", {
                let started = Arc::clone(&started);
                move |ms, _| {
                    started.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(ms));
                    Ok(())
                }
            })
            .queue("q");
        let id = registry.enqueue(&t.store, "slow", &300u64).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group_q("g"));
        let running = engine.start().unwrap();
        // Started, not just claimed: a claimed job no handler has started is handed back at shutdown.
        wait_for("the handler to start", Duration::from_secs(10), || started.load(Ordering::SeqCst).then_some(()));
        let report = running.shutdown(Duration::MAX);
        assert_eq!(report.abandoned, 0);
        assert_eq!(job(&t.store, id).state, JobState::Succeeded);
    }
}

both_backends! {
    fn a_handler_sleeping_for_duration_max_wakes_on_an_operator_cancel() {
        let t = test_store();
        let mut registry = Registry::new();
        registry
            .handle::<u32>("forever", |_, ctx| {
                ctx.sleep(Duration::MAX)?;
                Ok(())
            })
            .queue("q");
        let id = registry.enqueue(&t.store, "forever", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group_q("g"));
        let running = engine.start().unwrap();
        wait_for("the job to run", Duration::from_secs(10), || {
            (job(&t.store, id).state == JobState::Running).then_some(())
        });
        // Long enough for a handler that failed at once to have been recorded.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(t.store.cancel(ACTOR, &[id]).unwrap(), [CancelResult::CancelRequested]);
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        let cause = format!("cancelled by {ACTOR}");
        assert_eq!((j.state, j.terminal_cause.as_deref()), (JobState::Cancelled, Some(cause.as_str())));
        let last = t.store.history(id).unwrap().pop().unwrap();
        assert_eq!(last.reason.as_deref(), Some(cause.as_str()), "the handler stopped on the cancel, not by failing");
    }
}

both_backends! {
    fn a_group_with_an_enormous_poll_interval_still_claims_what_is_due_when_it_starts() {
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<u32>("noop", |_, _| Ok(())).queue("q");
        let id = registry.enqueue(&t.store, "noop", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.sweep_interval(Duration::MAX);
        engine.add_worker_group(WorkerGroup { poll_interval: Duration::MAX, ..group_q("g") });
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        let stats = running.stats();
        running.shutdown(Duration::from_secs(1));
        assert_eq!(j.state, JobState::Succeeded);
        assert_eq!(stats[0].last_error, None);
    }
}
