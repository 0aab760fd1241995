//! Rows another program may write while following `schema.sql`: odd values its CHECKs allow.
//! Reading or running them must never panic, and one odd row must not stop the others.

use std::time::Duration;

use backwave::store::LogFilter;
use backwave::{JobState, RetryPolicy};

use super::{Fixture, T0, WORKER};
use crate::backend::both_backends;

both_backends! {
    fn a_worker_row_with_an_extreme_heartbeat_time_does_not_panic_the_liveness_check() {
        let fx = Fixture::new();
        fx.store
            .raw_batch(
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
}

both_backends! {
    fn a_job_whose_attempt_counter_cannot_rise_neither_panics_the_claim_nor_blocks_its_queue() {
        let fx = Fixture::new();
        // Due first, and at the top of what an attempt (u32) can count: a claim cannot raise it.
        fx.store
            .raw_execute(
                "INSERT INTO jobs (id, wire_name, queue, attempt, due_at, created_at, updated_at)
                 VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 'w', 'q', 4294967295, 0, 0, 0)",
                &[],
            )
            .unwrap();
        let ordinary = fx.enqueue("w", "q");
        let jobs = fx.claim_as(WORKER, "q", 2, &RetryPolicy::new(3, Duration::from_secs(1)).unwrap());
        assert_eq!(jobs.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>(), [(ordinary, 1)]);
        let odd = fx.job("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap());
        assert_eq!((odd.state, odd.attempt), (JobState::Scheduled, u32::MAX), "left as it was written");
        fx.assert_sound();
    }
}

#[test]
fn a_log_entry_with_a_negative_sequence_number_does_not_panic_the_search_by_time() {
    let fx = Fixture::new();
    let id = fx.enqueue("w", "q");
    fx.store
        .raw_execute(
            "INSERT INTO transitions (seq, job_id, at, from_state, to_state, attempt)
             VALUES (-9223372036854775808, ?1, 0, NULL, 'scheduled', 0)",
            &[id.to_string().into()],
        )
        .unwrap();
    let end = fx.store.log_end().unwrap();
    // The answer is where a reader of the entries at or after the time starts.
    let seqs_from = |at| -> Vec<i64> {
        let cursor = fx.store.log_cursor_at(at).unwrap();
        fx.store.log_after(&LogFilter::default(), cursor, 10).unwrap().iter().map(|t| t.seq).collect()
    };
    assert_eq!(seqs_from(T0), [end.seq], "the enqueue entry is the first at T0");
    assert_eq!(seqs_from(0), [i64::MIN, end.seq], "no cursor (0, seq) is before i64::MIN: it is read too");
    assert_eq!(seqs_from(T0 + 1), Vec::<i64>::new());
    assert_eq!(fx.store.log_cursor_at(T0 + 1).unwrap(), end, "after every entry: the end");
}

#[test]
fn a_budget_beyond_what_u32_counts_neither_blocks_the_reaper_nor_hides_the_job() {
    // Another program's "unlimited": max_attempts = 10^10 (the schema asks only >= 1). Reaping
    // reads it for every lapsed lease, oldest first; it must not fail every other reap too.
    let fx = Fixture::new();
    fx.store
        .raw_execute(
            "INSERT INTO jobs (id, wire_name, queue, state, attempt, max_attempts, due_at, lease_owner,
                               lease_expires_at, created_at, updated_at)
             VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 'w', 'q', 'running', 1, 10000000000, 0,
                     'other-program', 1, 0, 0)",
            &[],
        )
        .unwrap();
    fx.store
        .raw_execute(
            "INSERT INTO jobs (id, wire_name, queue, state, attempt, max_attempts, due_at, lease_owner,
                               lease_expires_at, created_at, updated_at)
             VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11', 'w', 'q', 'running', 1, 'unlimited', 0,
                     'other-program', 2, 0, 0)",
            &[],
        )
        .unwrap();
    let ordinary = fx.enqueue("w", "q2");
    fx.claim_as(super::WORKER, "q2", 1, &backwave::RetryPolicy::new(3, std::time::Duration::from_secs(1)).unwrap());
    fx.clock.advance(super::LEASE + std::time::Duration::from_secs(1));
    assert_eq!(fx.store.reap_expired(10).unwrap(), 3);
    assert_eq!(fx.job(ordinary).state, backwave::JobState::Scheduled);
    let odd = fx.job("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap());
    assert_eq!((odd.state, odd.attempt, odd.max_attempts), (backwave::JobState::Scheduled, 1, Some(u32::MAX)));
    let text = fx.job("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11".parse().unwrap());
    assert_eq!((text.state, text.max_attempts), (backwave::JobState::Scheduled, None), "no budget: the default's");
    fx.assert_sound();
}

both_backends! {
    fn listing_jobs_with_no_practical_limit_returns_every_job() {
        // usize::MAX / u64::MAX as "all": the page asked SQLite for limit + 1 rows, which
        // overflowed (a panic in debug builds, LIMIT 0 and an empty page in release).
        let fx = Fixture::new();
        let ids: Vec<_> = (0..3).map(|_| fx.enqueue("w", "q")).collect();
        let all = backwave::store::JobFilter::default();
        let page = fx.store.list_jobs(&all, usize::MAX, 0).unwrap();
        assert_eq!((page.jobs.len(), page.total, page.next), (3, 3, None));
        assert!(ids.iter().all(|id| page.jobs.iter().any(|j| j.id == *id)));
        assert!(fx.store.list_jobs(&all, usize::MAX, u64::MAX).unwrap().jobs.is_empty(), "past the end");
    }
}

#[test]
fn advancing_a_manual_clock_by_duration_max_saturates_instead_of_going_back_in_time() {
    // Duration::MAX in ms, cast with `as i64`, is -1: the clock went back a millisecond.
    let clock = backwave::Clock::manual(T0);
    clock.advance(std::time::Duration::MAX);
    assert_eq!(clock.now(), i64::MAX);
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(clock.now(), i64::MAX);
}

#[test]
fn a_row_the_library_cannot_read_is_passed_over_by_claim_and_reap_instead_of_stopping_them() {
    // Both rows pass every CHECK: an id with a hyphen where a UUID has a hex digit, and a
    // running job whose attempt is beyond what a u32 counts. Each used to fail the whole claim
    // of its queue, or every reap in the store, for as long as it stayed there.
    let fx = Fixture::new();
    fx.store
        .raw_batch(
            "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
             VALUES ('01234567-89ab-cdef-0123-4567-9abcdef', 'w', 'q', 0, 0, 0);
             INSERT INTO jobs (id, wire_name, queue, state, attempt, due_at, lease_owner, lease_expires_at,
                               created_at, updated_at)
             VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 'w', 'r', 'running', 5000000000, 0, 'other', 1, 0, 0);",
        )
        .unwrap();
    let ordinary = fx.enqueue("w", "q");
    let claimed = fx.claim_as(WORKER, "q", 5, &RetryPolicy::new(3, Duration::from_secs(1)).unwrap());
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), [ordinary]);
    fx.clock.advance(super::LEASE + Duration::from_secs(1));
    assert_eq!(fx.store.reap_expired(10).unwrap(), 1, "the ordinary job's lapsed lease is reaped");
    assert_eq!(fx.job(ordinary).state, JobState::Scheduled);
    fx.assert_sound();
}

both_backends! {
    fn bulk_requeue_and_its_plan_work_at_the_last_instant_a_store_time_holds() {
        // "Finished by now" was now + 1: an overflow (a panic in debug builds) on a clock at i64::MAX.
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let job = fx.claim_one("q", &RetryPolicy::new(1, Duration::from_secs(1)).unwrap());
        fx.report(&job, crate::store::failed("boom"));
        fx.clock.set(i64::MAX);
        let all = backwave::store::JobFilter::default();
        assert_eq!(fx.store.plan_requeue(crate::store::ADMIN, &all).unwrap().matching, 1);
        assert_eq!(fx.store.requeue_matching(crate::store::ADMIN, &all, |_| {}).unwrap(), 1);
        assert_eq!(fx.job(id).state, JobState::Scheduled);
    }
}

both_backends! {
    fn a_purge_that_dies_after_its_first_batch_has_audited_what_it_deleted() {
        // The audit entry was written in its own transaction after the last batch: a process that
        // died between batches had deleted jobs with no trace of who did it.
        let fx = Fixture::new();
        const BATCH: usize = 500; // the store's bulk batch
        let n = BATCH + 10;
        for _ in 0..n {
            fx.enqueue("w", "q");
        }
        let jobs = fx.claim_as(WORKER, "q", n, &RetryPolicy::new(1, Duration::from_secs(1)).unwrap());
        for j in &jobs {
            fx.report(j, backwave::store::Outcome::Succeeded);
        }
        fx.clock.advance(Duration::from_secs(1));
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fx.store.purge(crate::store::ADMIN, fx.clock.now(), |_| panic!("the process dies after the first batch"))
        }));
        assert!(died.is_err());
        let left = fx.store.count_purgeable(fx.clock.now()).unwrap();
        let deleted = n as u64 - left;
        assert_eq!(deleted, BATCH as u64, "one batch committed");
        let audit = fx.store.audit_entries(0, 100).unwrap();
        let purges: Vec<_> = audit.iter().filter(|a| a.action == "purge" && a.actor == crate::store::ADMIN).collect();
        assert_eq!(purges.len(), 1, "{audit:?}");
        assert!(purges[0].detail.as_deref().unwrap_or("").starts_with(&format!("{deleted} jobs")), "{purges:?}");
    }
}

both_backends! {
    /// A busy timeout past what SQLite's busy timeout and PostgreSQL's `lock_timeout` hold
    /// (2^31 - 1 ms) is refused on both backends, the store left as it was: the SQLite driver
    /// panicked on it (found through `bw --busy-timeout 30d`).
    fn a_busy_timeout_past_what_the_store_holds_is_refused_and_the_store_still_answers() {
        let fx = Fixture::new();
        fx.store.set_busy_timeout(backwave::store::MAX_BUSY_TIMEOUT).unwrap();
        let e = fx.store.set_busy_timeout(Duration::from_secs(30 * 86_400)).unwrap_err();
        assert!(matches!(e, backwave::Error::InvalidInput(_)), "{e}");
        assert!(e.to_string().starts_with("a busy timeout of 2592000000 ms is too long"), "{e}");
        fx.store.set_busy_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(fx.store.counts().unwrap().total(JobState::Scheduled), 0);
    }
}
