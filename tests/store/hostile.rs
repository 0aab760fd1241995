//! Rows another program may write while following `schema.sql`: odd values its CHECKs allow.
//! Reading or running them must never panic, and one odd row must not stop the others.

use super::{Fixture, T0};

#[test]
fn a_worker_row_with_an_extreme_heartbeat_time_does_not_panic_the_liveness_check() {
    let fx = Fixture::new();
    fx.store
        .connection()
        .execute_batch(
            "INSERT INTO workers (id, worker_group, host, pid, wire_names, started_at, last_heartbeat_at)
             VALUES ('far-past', 'g', 'h', 1, '[\"send-email\"]', 0, -9223372036854775808);
             INSERT INTO workers (id, worker_group, host, pid, wire_names, started_at, last_heartbeat_at)
             VALUES ('alive', 'g', 'h', 2, '[\"resize\"]', 0, 1767225600000);",
        )
        .unwrap();
    let live = fx.store.live_handlers().unwrap();
    assert_eq!(live.get("send-email"), None, "a heartbeat at the start of time is stale");
    assert_eq!(live.get("resize"), Some(&1));
    let workers = fx.store.workers().unwrap();
    assert!(workers.iter().any(|w| w.id == "far-past" && !w.is_live(T0)));
}
