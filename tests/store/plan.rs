//! The claim query stays fast on a big backlog: it runs on the `(queue, priority, due_at, id)`
//! partial index over scheduled jobs, one priority at a time, and stops each priority's range at
//! its first job due in the future, however many wait behind it.

use std::time::Duration;

use backwave::store::{
    Outcome, RawValue, CLAIM_SQL, REQUEUE_LOG_SQL, REQUEUE_MOVE_SQL, SUCCEED_FENCE_SQL, SUCCEED_LOG_SQL,
    SUCCEED_MOVE_SQL,
};
use backwave::{JobState, NewJob, RetryPolicy};

use super::{failed, Fixture, T0};

#[test]
fn the_claim_query_uses_the_jobs_claim_priority_index_without_sorting() {
    let fx = Fixture::new();
    let plan = fx.store.explain(CLAIM_SQL, &["q".into(), T0.into()]).unwrap();
    assert_eq!(
        plan,
        ["SEARCH jobs USING INDEX jobs_claim_priority (queue=? AND priority=? AND due_at<?)"],
        "no scan, no temp b-tree"
    );
}

/// Future retries of priority 0 sit in the index before every due job of priority 9: read as one
/// range over the queue, a claim would step over all of them to reach the due ones.
#[test]
fn a_claim_steps_over_no_future_job_of_a_priority_ahead_of_the_due_ones() {
    let fx = Fixture::new();
    let mut jobs: Vec<NewJob> = (0..3000).map(|i| NewJob::new("w", "q", vec![]).due_at(T0 + 60_000 + i)).collect();
    jobs.extend((0..3).map(|i| NewJob::new("w", "q", vec![]).priority(9).due_at(T0 - 10 + i)));
    jobs.extend((0..3000).map(|i| NewJob::new("w", "q", vec![]).priority(5).due_at(T0 + 60_000 + i)));
    fx.store.enqueue_many(&jobs).unwrap();
    let (rows, stats) =
        fx.store.raw_statements(&[CLAIM_SQL], |s| s.query(0, &["q".into(), T0.into()], usize::MAX)).unwrap();
    assert_eq!(rows.unwrap().len(), 3, "only the due jobs");
    assert_eq!((stats[0].fullscan_steps, stats[0].sorts), (0, 0));
    let steps = stats[0].vm_steps;
    assert!(steps < 600, "the claim query walked {steps} VM steps for 3 rows: it is scanning the future retries");
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

/// A bulk requeue of 100,000 dead-lettered jobs took 6 s instead of under 1: each batch's two
/// statements were answered from the `jobs_failed_list` index over every failed job, testing
/// each against the batch's ids, so the whole requeue read the failed jobs once per batch of 500.
/// A batch must cost its own ids, found by the primary key, whatever waits beside them.
#[test]
fn regression_a_bulk_requeue_batch_reads_its_own_jobs_not_every_failed_one() {
    let fx = Fixture::new();
    let jobs: Vec<NewJob> = (0..3000).map(|_| NewJob::new("w", "q", vec![])).collect();
    let claimed = fx.ended("q", &jobs, |_, _| failed("boom"));
    assert_eq!(fx.job(claimed[0].id).state, JobState::DeadLettered);

    let batch = format!("[\"{}\",\"{}\"]", claimed[10].id, claimed[2000].id);
    let log_params = [(&batch).into(), T0.into(), "alice".into(), "r".into()];
    let move_params = [(&batch).into(), T0.into()];
    for (sql, params) in [(REQUEUE_LOG_SQL, &log_params[..]), (REQUEUE_MOVE_SQL, &move_params[..])] {
        let plan = fx.store.explain(sql, params).unwrap();
        assert!(
            plan.iter().any(|p| p.starts_with("SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|p| p.contains("jobs_failed_list")), "{plan:?}");
    }
    // No rows to read: the first step runs each statement whole.
    let ((), stats) = fx
        .store
        .raw_statements(&[REQUEUE_LOG_SQL, REQUEUE_MOVE_SQL], |s| {
            s.query(0, &log_params, usize::MAX).unwrap();
            s.query(1, &move_params, usize::MAX).unwrap();
        })
        .unwrap();
    for (i, stat) in stats.iter().enumerate() {
        assert_eq!(stat.fullscan_steps, 0, "statement {i}");
        assert!(stat.vm_steps < 1000, "statement {i} ran {} VM steps for 2 jobs among 3,000 failed", stat.vm_steps);
    }
    assert_eq!(fx.job(claimed[10].id).state, JobState::Scheduled);
    assert_eq!(fx.job(claimed[2000].id).state, JobState::Scheduled);
    assert_eq!(fx.job(claimed[11].id).state, JobState::DeadLettered);
}

/// A filter naming one state could not use the partial indexes over that state: SQLite reads
/// `state IN ('x')` as `state = +'x'`, which does not imply `WHERE state = 'x'`. The count
/// behind a listing of one dead-letter cause group walked every dead-lettered job (13-20 ms on
/// 1,000,000 jobs); rendered `state = 'x'` it seeks the group's own index range.
#[test]
fn a_one_state_filter_counts_on_that_states_own_index() {
    use backwave::store::JobFilter;
    let fx = Fixture::new();
    let cause_group = JobFilter {
        wire_name: Some("w".into()),
        fingerprint: Some("boom".into()),
        ..JobFilter::state(JobState::DeadLettered)
    };
    let plan = fx.store.explain_count_jobs(&cause_group).unwrap();
    assert!(plan.iter().any(|p| p.contains("jobs_dead_causes (wire_name=? AND cause_fingerprint=?")), "{plan:?}");
    let quarantined = JobFilter { wire_name: Some("w".into()), ..JobFilter::state(JobState::Quarantined) };
    let plan = fx.store.explain_count_jobs(&quarantined).unwrap();
    assert!(plan.iter().any(|p| p.contains("jobs_quarantine (wire_name=?)")), "{plan:?}");
    let scheduled = JobFilter { queue: Some("q".into()), ..JobFilter::state(JobState::Scheduled) };
    let plan = fx.store.explain_count_jobs(&scheduled).unwrap();
    // Either index over Scheduled jobs that begins with the queue (both are as narrow).
    assert!(
        plan.iter().any(|p| p.contains("jobs_claim (queue=?)") || p.contains("jobs_claim_priority (queue=?)")),
        "{plan:?}"
    );
}

/// A page of one small failure group (`bw top`'s group view, `bw jobs list --state
/// dead-lettered --wire-name W` of one cause) walked every failed job newest first in
/// `jobs_failed_list` until it had its rows (12-26 ms on 1,000,000 jobs, on every refresh), or,
/// planned the other way, read each row's payload overflow pages to reach the columns after it.
/// It now takes its keys from the group's own index range and its columns from the covering
/// index, and pages through the group exactly as the plain listing did.
#[test]
fn a_failure_groups_page_takes_its_range_of_the_groups_index_and_its_columns_from_the_list_index() {
    use backwave::store::{JobFilter, Outcome};
    use backwave::QuarantineReason;
    let fx = Fixture::new();
    let jobs: Vec<NewJob> = (0..3010).map(|_| NewJob::new("w", "q", vec![])).collect();
    let outcome = |i: usize| match i % 602 {
        7 => failed("disk full"),
        9 => Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "nobody handles w".into() },
        _ => failed("boom"),
    };
    fx.ended("q", &jobs, |i, _| outcome(i));

    let dead = JobFilter { wire_name: Some("w".into()), ..JobFilter::state(JobState::DeadLettered) };
    let quarantined = JobFilter { wire_name: Some("w".into()), ..JobFilter::state(JobState::Quarantined) };
    let groups = [
        (
            JobFilter { fingerprint: Some("disk full".into()), ..dead.clone() },
            "jobs_dead_causes (wire_name=? AND cause_fingerprint=?",
        ),
        (
            JobFilter { quarantine_reason: Some(QuarantineReason::NoHandler), ..quarantined.clone() },
            "jobs_quarantine (wire_name=? AND quarantine_reason=?",
        ),
    ];
    for (group, range) in &groups {
        let plan = fx.store.explain_list_jobs(group, 2).unwrap();
        assert!(plan.iter().any(|p| p.contains(range)), "{plan:?}");
        assert!(
            plan.iter().any(|p| p.contains("COVERING INDEX jobs_failed_list (state=? AND finished_at=?")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|p| p.starts_with("SCAN")), "{plan:?}");

        // The same jobs, in the same order, as the whole state's listing filtered here, by
        // pages of 2 after a cursor and by offset.
        let all =
            fx.store.list_jobs(&JobFilter { states: group.states.clone(), ..Default::default() }, 10_000, 0).unwrap();
        let expected: Vec<_> = all
            .jobs
            .iter()
            .filter(|j| j.cause_fingerprint == group.fingerprint.clone().or(j.cause_fingerprint.clone()))
            .filter(|j| j.quarantine_reason == group.quarantine_reason.or(j.quarantine_reason))
            .map(|j| j.id)
            .collect();
        assert_eq!(expected.len(), 5);
        let mut paged = Vec::new();
        let mut page = fx.store.list_jobs(group, 2, 0).unwrap();
        assert_eq!(page.total, 5);
        loop {
            paged.extend(page.jobs.iter().map(|j| j.id));
            let Some(next) = page.next.clone() else { break };
            page = fx.store.list_jobs_after(group, 2, &next).unwrap();
        }
        assert_eq!(paged, expected);
        let third = fx.store.list_jobs(group, 2, 2).unwrap();
        assert_eq!(third.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), expected[2..4]);
    }
    // A wire name alone is no group: its listing keeps the plain statement.
    let plan = fx.store.explain_list_jobs(&dead, 2).unwrap();
    assert!(!plan.iter().any(|p| p.contains("jobs_dead_causes")), "{plan:?}");
}

/// A batch of successes names its jobs by id, and each of its three statements must find them by
/// primary key whatever else runs: here other workers run 2,400 jobs and 500 ran before, with
/// the table's statistics taken (`ANALYZE`) and without. On PostgreSQL the same promise needed
/// the statements rewritten (`store::postgres_only::the_batch_statements_probe_…`);
/// SQLite's planner keeps it as written, and this test keeps it kept. (SQLite's heartbeat reads
/// and renews one lease at a time by `id = ?`.)
#[test]
fn a_batch_of_successes_finds_its_jobs_by_id() {
    let fx = Fixture::new();
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let jobs: Vec<NewJob> = (0..3000).map(|_| NewJob::new("w", "q", vec![])).collect();
    fx.store.enqueue_many(&jobs).unwrap();
    let done = fx.claim_as("another-worker", "q", 500, &policy);
    fx.report_all(&done, |_, _| Outcome::Succeeded);
    assert_eq!(fx.claim_as("another-worker", "q", 2_400, &policy).len(), 2_400);
    let by_id = |table: &str| format!("SEARCH {table} USING INDEX sqlite_autoindex_jobs_1 (id=?)");
    for analyzed in [false, true] {
        if analyzed {
            fx.store.raw_batch("ANALYZE").unwrap();
        }
        let explain = |sql: &str, params: usize| fx.store.explain(sql, &vec![RawValue::Null; params]).unwrap();
        let (fence, log, moved) =
            (explain(SUCCEED_FENCE_SQL, 1), explain(SUCCEED_LOG_SQL, 2), explain(SUCCEED_MOVE_SQL, 2));
        assert_eq!(fence[0], by_id("jobs"), "the fence ({analyzed}): {fence:?}");
        assert_eq!(moved[0], by_id("jobs"), "the move ({analyzed}): {moved:?}");
        assert!(log.contains(&by_id("j")), "the log ({analyzed}): {log:?}");
        for plan in [&fence, &log, &moved] {
            assert!(!plan.iter().any(|step| step.contains("jobs_active") || step.starts_with("SCAN j")), "{plan:?}");
        }
    }
}
