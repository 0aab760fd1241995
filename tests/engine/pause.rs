//! Pauses as running engines meet them: two engines (each its own connections, as two worker
//! processes would be) skip a paused queue and a paused wire name while other work drains, pick
//! the work up within a poll of a resume, and see a `--for` pause lapse by itself. The engine
//! has no pause code: the store's claim does it.

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry};
use backwave::store::PauseKind;
use backwave::{JobId, JobState, Store};

use super::support::*;
use crate::backend::both_backends;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.handle::<u32>("charge-card", |_, _| Ok(())).queue("critical");
    r.handle::<u32>("audit-log", |_, _| Ok(())).queue("critical");
    r.handle::<u32>("send-email", |_, _| Ok(())).queue("default");
    r
}

fn enqueue(store: &Store, wire_name: &str, n: u32) -> Vec<JobId> {
    let r = registry();
    (0..n).map(|i| r.enqueue(store, wire_name, &i).unwrap()).collect()
}

fn states(store: &Store, ids: &[JobId]) -> Vec<JobState> {
    ids.iter().map(|id| job(store, *id).state).collect()
}

fn all_succeeded(store: &Store, ids: &[JobId]) -> bool {
    states(store, ids).iter().all(|s| *s == JobState::Succeeded)
}

both_backends! {
    fn two_engines_skip_a_paused_queue_and_a_paused_wire_name_while_other_work_drains() {
        let t = test_store();
        let charges = enqueue(&t.store, "charge-card", 5);
        let audits = enqueue(&t.store, "audit-log", 5);
        let emails = enqueue(&t.store, "send-email", 5);
        t.store.pause(ACTOR, PauseKind::Queue, "critical", None, false).unwrap();
        let policy = DispatchPolicy::strict(["critical", "default"]);
        let engines: Vec<_> = (0..2)
            .map(|i| {
                let mut e = Engine::new(&t.db, registry());
                e.add_worker_group(group(&format!("g{i}"), policy.clone(), 3));
                e.start().unwrap()
            })
            .collect();

        wait_for("the unpaused queue to drain", Duration::from_secs(10), || all_succeeded(&t.store, &emails).then_some(()));
        std::thread::sleep(Duration::from_millis(200)); // ten polls of each engine
        assert!(states(&t.store, &charges).iter().chain(&states(&t.store, &audits)).all(|s| *s == JobState::Scheduled));

        // Swap the queue pause for a wire-name pause that lapses by itself (late enough that a
        // busy machine's slow resume is still told apart from the lapse).
        let until = t.store.now() + 4_000;
        t.store.pause(ACTOR, PauseKind::WireName, "charge-card", Some(until), false).unwrap();
        let resumed = Instant::now();
        t.store.resume(ACTOR, PauseKind::Queue, "critical").unwrap();
        wait_for("audit-log to run after the resume", Duration::from_secs(10), || {
            all_succeeded(&t.store, &audits).then_some(())
        });
        assert!(resumed.elapsed() < Duration::from_millis(3_500), "took {:?} after the resume", resumed.elapsed());
        assert!(
            states(&t.store, &charges).iter().all(|s| *s == JobState::Scheduled),
            "the paused wire name waits in its resumed queue"
        );
        wait_for("the --for pause to lapse", Duration::from_secs(10), || all_succeeded(&t.store, &charges).then_some(()));
        for id in &charges {
            let claimed_at = t.store.history(*id).unwrap().iter().find(|e| e.to == JobState::Running).unwrap().at;
            assert!(claimed_at >= until, "charge-card was claimed at {claimed_at}, before its pause lapsed at {until}");
        }
        for e in engines {
            e.shutdown(Duration::from_secs(1));
        }
    }
}
