//! A handler that stops on a cancellation nobody requested fails a plain attempt; its log
//! entry must carry the failure detail like any other failure, not claim it was switched off.

use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry};
use backwave::store::UNREQUESTED_CANCEL;
use backwave::{DetailStatus, JobState};

use super::support::*;

both_flavors! {
    fn an_unrequested_cancellation_keeps_its_failure_detail_instead_of_saying_not_captured() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "self-cancel", |_, ctx| if ctx.attempt() == 1 { Err(HandlerError::cancelled()) } else { Ok(()) })
            .queue("q");
        let id = registry.enqueue(&t.store, "self-cancel", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 3));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        let failed = t.store.history(id).unwrap().into_iter().find(|e| e.attempt == 1 && e.to == JobState::Scheduled);
        let failed = failed.expect("attempt 1 failed and retried");
        assert_eq!(failed.reason.as_deref(), Some(UNREQUESTED_CANCEL));
        assert!(
            matches!(&failed.detail, DetailStatus::Hidden { kind, .. } if kind == "cancelled"),
            "capture is on, yet the entry says {:?}",
            failed.detail
        );
    }
}
