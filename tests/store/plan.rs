//! The claim query stays fast on a big backlog: it runs on the `(queue, due_at)` partial index
//! over scheduled jobs and stops at the first job due in the future, however many wait behind it.

use backwave::store::CLAIM_SQL;
use backwave::NewJob;

use super::{Fixture, T0};

#[test]
fn the_claim_query_uses_the_jobs_claim_index_without_sorting() {
    let fx = Fixture::new();
    let plan = fx.store.explain(CLAIM_SQL, &["q".into(), T0.into()]).unwrap();
    assert_eq!(plan, ["SEARCH jobs USING INDEX jobs_claim (queue=? AND due_at<?)"], "no scan, no temp b-tree");
}

#[test]
fn a_claim_stops_at_the_first_future_job_instead_of_walking_the_backlog() {
    let fx = Fixture::new();
    // Three due jobs, then 3000 retries waiting for later in the same queue, and 3000 due jobs
    // in another queue.
    let mut jobs: Vec<NewJob> = (0..3).map(|i| NewJob::new("w", "q", vec![]).due_at(T0 - 10 + i)).collect();
    jobs.extend((0..3000).map(|i| NewJob::new("w", "q", vec![]).due_at(T0 + 60_000 + i)));
    jobs.extend((0..3000).map(|_| NewJob::new("w", "other", vec![])));
    fx.store.enqueue_many(&jobs).unwrap();

    let (rows, stats) =
        fx.store.raw_statements(&[CLAIM_SQL], |s| s.query(0, &["q".into(), T0.into()], usize::MAX)).unwrap();
    let due: Vec<String> = rows.unwrap().iter().map(|r| r[0].as_str().to_string()).collect();
    assert_eq!(due.len(), 3, "only the due jobs");
    // The VM ran a few dozen steps per row returned, not one per job in the backlog.
    let steps = stats[0].vm_steps;
    assert_eq!(stats[0].fullscan_steps, 0);
    assert_eq!(stats[0].sorts, 0);
    assert_eq!(stats[0].reprepares, 0);
    assert!(steps < 300, "the claim query walked {steps} VM steps for 3 rows: it is scanning the backlog");

    // And through the library: a claim takes the due jobs in due order and nothing else.
    let claimed = fx.claim_as(super::WORKER, "q", 100, &super::policy(3, std::time::Duration::from_secs(1)));
    assert_eq!(claimed.iter().map(|j| j.id.to_string()).collect::<Vec<_>>(), due);
    assert!(claimed.windows(2).all(|w| w[0].due_at <= w[1].due_at));
}

/// A `LIMIT ?` in the claim made SQLite re-parse and re-plan it on every call (a new LIMIT value
/// may change the plan), which cost about a fifth of a claim's time.
#[test]
fn regression_the_claim_statement_is_not_reprepared_on_every_call() {
    let fx = Fixture::new();
    fx.store.enqueue_many(&[NewJob::new("w", "q", vec![]), NewJob::new("w", "other", vec![])]).unwrap();
    let ((), stats) = fx
        .store
        .raw_statements(&[CLAIM_SQL], |s| {
            for (queue, at) in [("q", T0), ("other", T0 + 1), ("q", T0 + 2), ("none", T0 + 3)] {
                s.query(0, &[queue.into(), at.into()], usize::MAX).unwrap();
            }
        })
        .unwrap();
    assert_eq!(stats[0].reprepares, 0);
}
