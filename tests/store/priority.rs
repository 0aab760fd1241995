//! Priority within a queue (issue 40): 0 is claimed first, then 1, … 9; within a priority by due
//! time, then id. Only due jobs count: a future job of priority 0 holds back no due job of 9.
//! Across queues the group's order is unchanged. The claim reads one index, and sorts nothing,
//! on both backends.

use backwave::store::ClaimRequest;
use backwave::{Error, Job, JobId, NewJob};

use super::{assert_counts_exact, policy, Fixture, ADMIN, LEASE, T0, WORKER};
use crate::backend::{both_backends, plain_query, use_backend, Backend};

fn ids(jobs: &[Job]) -> Vec<JobId> {
    jobs.iter().map(|j| j.id).collect()
}

fn claim_from(fx: &Fixture, queues: &[&str], limit: usize) -> Vec<Job> {
    let queues: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    let policy = policy(3, std::time::Duration::from_secs(1));
    fx.store
        .claim(&ClaimRequest {
            worker_id: WORKER,
            group: "default",
            queues: &queues,
            limit,
            lease: LEASE,
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap()
}

both_backends! {
    fn a_queue_is_claimed_priority_0_first_then_by_due_time_then_id() {
        let fx = Fixture::new();
        let at = |p: u8, due: i64| NewJob::new("w", "q", b"{}".to_vec()).priority(p).due_at(due);
        // Enqueued in an order that is none of the claim's.
        let e = fx
            .store
            .enqueue_many(&[at(9, T0 - 50), at(5, T0 - 10), at(0, T0 - 1), at(5, T0 - 30), at(0, T0 - 2), at(9, T0 - 60)])
            .unwrap();
        let [low_late, mid_late, top_late, mid_early, top_early, low_early] = [0, 1, 2, 3, 4, 5].map(|i| e[i]);
        // The same priority and due time: id order, which is enqueue order for the library's ids.
        let tied = fx.store.enqueue_many(&[at(5, T0 - 20), at(5, T0 - 20), at(5, T0 - 20)]).unwrap();
                assert!(tied.windows(2).all(|w| w[0] < w[1]));

        let first = claim_from(&fx, &["q"], 3);
        assert_eq!(ids(&first), [top_early, top_late, mid_early]);
        assert_eq!(first.iter().map(|j| j.priority).collect::<Vec<_>>(), [0, 0, 5]);
        let rest = claim_from(&fx, &["q"], 100);
        assert_eq!(ids(&rest), [vec![tied[0], tied[1], tied[2], mid_late, low_early, low_late]].concat());
        assert!(claim_from(&fx, &["q"], 100).is_empty());
        assert_counts_exact(&fx.store);
    }

    fn a_future_job_of_a_first_priority_holds_back_no_due_job_of_a_later_one() {
        let fx = Fixture::new();
        let later = fx.store.enqueue(&NewJob::new("w", "q", b"{}".to_vec()).priority(0).due_at(T0 + 60_000)).unwrap();
        let due = fx.store.enqueue(&NewJob::new("w", "q", b"{}".to_vec()).priority(9).due_at(T0 - 1)).unwrap();
        assert_eq!(ids(&claim_from(&fx, &["q"], 10)), [due]);
        // The wake-up still knows the earliest due time, whatever its priority.
        assert_eq!(fx.store.next_due(&["q".to_string()]).unwrap(), Some(T0 + 60_000));
        fx.clock.advance(std::time::Duration::from_secs(60));
        assert_eq!(ids(&claim_from(&fx, &["q"], 10)), [later]);
    }

    fn strict_order_across_queues_is_unchanged_by_priority() {
        let fx = Fixture::new();
        // The first queue's last priority still comes before the second queue's first.
        let high = fx.store.enqueue(&NewJob::new("w", "high", b"{}".to_vec()).priority(9)).unwrap();
        let low = fx.store.enqueue(&NewJob::new("w", "low", b"{}".to_vec()).priority(0)).unwrap();
        assert_eq!(ids(&claim_from(&fx, &["high", "low"], 1)), [high]);
        assert_eq!(ids(&claim_from(&fx, &["high", "low"], 1)), [low]);
        // Around a paused wire name the claim keeps the same order.
        let pri = |p: u8, name: &str| NewJob::new(name, "q", b"{}".to_vec()).priority(p);
        let e = fx.store.enqueue_many(&[pri(0, "paused"), pri(7, "a"), pri(2, "b"), pri(2, "a")]).unwrap();
        fx.store.pause(ADMIN, backwave::store::PauseKind::WireName, "paused", None, false).unwrap();
        assert_eq!(ids(&claim_from(&fx, &["q"], 10)), [e[2], e[3], e[1]]);
    }

    fn a_priority_outside_0_to_9_is_refused_quoting_it_and_nothing_is_enqueued() {
        let fx = Fixture::new();
        let err = fx
            .store
            .enqueue_many(&[NewJob::new("w", "q", b"{}".to_vec()), NewJob::new("w", "q", b"{}".to_vec()).priority(10)])
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        assert_eq!(err.to_string(), "the priority 10 is out of range: a priority is 0 (claimed first) to 9 (claimed last)");
        assert_eq!(fx.store.counts().unwrap().total(backwave::JobState::Scheduled), 0);
        // The default, and both ends, are taken.
        for p in [0, 9] {
            let id = fx.store.enqueue(&NewJob::new("w", "q", b"{}".to_vec()).priority(p)).unwrap();
            assert_eq!(fx.job(id).priority, p);
        }
        assert_eq!(fx.job(fx.enqueue("w", "q")).priority, 0);
    }

    fn the_registry_enqueues_a_wire_name_at_its_registered_priority_and_one_job_may_override_it() {
        let fx = Fixture::new();
        let mut registry = backwave::Registry::new();
        registry.handle::<u64>("bulk-export", |_, _| Ok(())).queue("q").priority(8);
        registry.handle::<u64>("plain", |_, _| Ok(())).queue("q");
        assert_eq!(registry.priority_of("bulk-export"), Some(8));
        let bulk = registry.enqueue(&fx.store, "bulk-export", &1u64).unwrap();
        let urgent = registry.job("bulk-export", &2u64).unwrap().priority(0).enqueue(&fx.store).unwrap();
        let plain = registry.enqueue(&fx.store, "plain", &3u64).unwrap();
        assert_eq!([bulk, urgent, plain].map(|id| fx.job(id).priority), [8, 0, 0]);
        assert_eq!(ids(&claim_from(&fx, &["q"], 10)), [urgent, plain, bulk]);
        // A registered priority out of range is refused at enqueue, nothing stored.
        registry.handle::<u64>("wrong", |_, _| Ok(())).queue("q").priority(12);
        let e = registry.enqueue(&fx.store, "wrong", &4u64).unwrap_err();
        assert!(e.to_string().contains("the priority 12 is out of range"), "{e}");
        assert_eq!(fx.store.counts().unwrap().total(backwave::JobState::Scheduled), 0);
    }

    fn a_program_writing_its_own_sql_gets_the_default_priority_and_the_check_holds_the_range() {
        let fx = Fixture::new();
        let insert = |id: &str, extra_col: &str, extra_val: &str| {
            format!(
                "INSERT INTO jobs (id, wire_name, queue, payload, due_at, created_at, updated_at{extra_col})
                 VALUES ('{id}', 'w', 'q', '', 1, 1, 1{extra_val})"
            )
        };
        fx.store.raw_execute(&insert("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10", "", ""), &[]).unwrap();
        let id: JobId = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap();
        assert_eq!(fx.job(id).priority, 0);
        let refused = fx.store.raw_execute(&insert("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11", ", priority", ", 10"), &[]);
        assert!(refused.is_err(), "{refused:?}");
    }
}

/// The claim's plan on PostgreSQL, for values as a worker binds them: one index scan of
/// `jobs_claim_priority` per priority in turn (a nested loop over the priorities) with the
/// priority, the queue and the due bound in its index condition, nothing sorted before the
/// batch is picked, and the loop stopped once the first priority fills the batch.
#[test]
fn the_postgres_claim_reads_jobs_claim_priority_one_priority_at_a_time_without_sorting() {
    let _g = use_backend(Backend::Postgres);
    let fx = Fixture::new();
    let mut jobs: Vec<NewJob> = (0..2000).map(|i| NewJob::new("w", "q", b"{}".to_vec()).due_at(T0 + 1 + i)).collect();
    jobs.extend((0..2000).map(|i| NewJob::new("w", "q", b"{}".to_vec()).priority((i % 10) as u8).due_at(T0 - i)));
    fx.store.enqueue_many(&jobs).unwrap();
    fx.store.raw_batch("ANALYZE jobs").unwrap();
    fx.store
        .raw_batch(&format!(
            "PREPARE bw_claim (text, bigint, bigint, text[], text, text, bigint, bigint, text) AS {}",
            backwave::store::POSTGRES_CLAIM_SQL
        ))
        .unwrap();
    let explain = |n: i64| -> Vec<String> {
        let sql = format!(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
             EXECUTE bw_claim('q', {T0}, {n}, '{{}}', 'w1', 'g', {}, 3, NULL)",
            T0 + 60_000
        );
        let rows = fx.store.raw_query(&sql, &[]).unwrap();
        rows.iter().map(|r| r[0].as_str().to_string()).collect()
    };
    let plan = explain(10);
    let text = plan.join("\n");
    println!("{text}");
    let scans: Vec<&String> = plan.iter().filter(|l| l.contains("Index Scan")).collect();
    assert!(!scans.is_empty() && scans.iter().all(|l| l.contains("using jobs_claim_priority")), "{text}");
    assert!(text.contains("(priority = pr.p)"), "the priority is in the index condition: {text}");
    assert!(text.contains("Function Scan on generate_series pr (actual rows=1 loops=1)"), "one priority read: {text}");
    assert!(text.contains("due_at <= "), "{text}");
    // The only sort is of the claimed rows returned; the picking side sorts nothing.
    let picked = text.split("CTE picked").nth(1).unwrap().split("CTE claimed").next().unwrap();
    assert!(!picked.contains("Sort"), "{text}");
    // EXPLAIN ANALYZE ran the claim: it took the first 10 due jobs of priority 0. The claim
    // takes the other 190 next, in order, and then priority 1.
    let claimed = claim_from(&fx, &["q"], 190);
    assert_eq!(claimed.len(), 190);
    assert!(claimed.iter().all(|j| j.priority == 0 && j.due_at <= T0));
    assert!(claimed.windows(2).all(|w| (w[0].due_at, w[0].id) < (w[1].due_at, w[1].id)));
    let next = claim_from(&fx, &["q"], 1);
    assert_eq!(next[0].priority, 1);
    assert_eq!(plain_query(&fx.db, "SELECT count(*) FROM jobs WHERE state = 'running'")[0][0].as_i64(), 201);
}
