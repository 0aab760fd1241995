//! The engine's path: claim raises the attempt, failures spend the budget, a lapsed lease is a
//! failed attempt like any other, the fence discards stale outcomes, cancel ends jobs only when
//! an operator asked.

use std::collections::HashSet;
use std::time::Duration;

use backwave::store::{Completion, Confirmed, Fenced, Lapse, LeaseStatus, Outcome, LEASE_EXPIRED, UNREQUESTED_CANCEL};
use backwave::{FailureDetail, JobState, NewJob, QuarantineReason, RetryPolicy};

use super::{failed, policy, Fixture, ADMIN, LEASE, OTHER_WORKER, T0, WORKER};
use crate::backend::both_backends;

const SEC: Duration = Duration::from_secs(1);

/// Fail a job until it stops being Scheduled; returns the attempt numbers seen at claim and
/// the states after each failure.
fn fail_until_terminal(fx: &Fixture, id: backwave::JobId, p: &RetryPolicy) -> (Vec<u32>, Vec<JobState>) {
    let (mut attempts, mut states) = (Vec::new(), Vec::new());
    loop {
        let job = fx.claim_one("q", p);
        assert_eq!(job.id, id);
        attempts.push(job.attempt);
        let Fenced::Accepted(state) = fx.report(&job, failed(&format!("boom {}", job.attempt))) else {
            panic!("a current attempt's failure must be accepted")
        };
        states.push(state);
        if state != JobState::Scheduled {
            return (attempts, states);
        }
        fx.clock.advance(Duration::from_secs(3600));
    }
}

both_backends! {
    fn with_max_attempts_3_the_third_failure_dead_letters() {
        let fx = Fixture::new();
        let id = fx.enqueue("flaky", "q");
        let (attempts, states) = fail_until_terminal(&fx, id, &policy(3, SEC));
        assert_eq!(attempts, [1, 2, 3], "attempt numbers as the handler sees them");
        assert_eq!(states, [JobState::Scheduled, JobState::Scheduled, JobState::DeadLettered]);
        let job = fx.job(id);
        assert_eq!(job.terminal_cause.as_deref(), Some("boom 3"), "the cause is the last failure's message");
        assert_eq!(job.cause_fingerprint.as_deref(), Some("boom #"));
        assert_eq!(job.budget_left(), Some(0));
        fx.assert_sound();
    }
}

both_backends! {
    fn with_max_attempts_1_the_first_failure_dead_letters() {
        let fx = Fixture::new();
        let id = fx.enqueue("once", "q");
        let (attempts, states) = fail_until_terminal(&fx, id, &policy(1, SEC));
        assert_eq!(attempts, [1]);
        assert_eq!(states, [JobState::DeadLettered]);
        fx.assert_sound();
    }
}

both_backends! {
    fn the_attempt_rises_at_claim_not_at_failure() {
        let fx = Fixture::new();
        let id = fx.enqueue("work", "q");
        assert_eq!(fx.job(id).attempt, 0, "never claimed");
        let job = fx.claim_one("q", &policy(3, SEC));
        assert_eq!((job.attempt, fx.job(id).attempt), (1, 1), "claim makes it attempt 1, before anything fails");
        fx.report(&job, failed("nope"));
        assert_eq!(fx.job(id).attempt, 1, "the failure does not count again");
        let history = fx.store.history(id).unwrap();
        let steps: Vec<_> = history.iter().map(|t| (t.from, t.to, t.attempt)).collect();
        assert_eq!(
            steps,
            [
                (None, JobState::Scheduled, 0),
                (Some(JobState::Scheduled), JobState::Running, 1),
                (Some(JobState::Running), JobState::Scheduled, 1),
            ]
        );
    }
}

both_backends! {
    fn a_failed_attempt_waits_by_the_jobs_own_delay_table() {
        let fx = Fixture::new();
        let id = fx.enqueue("work", "q");
        let p = RetryPolicy::default();
        let job = fx.claim_one("q", &p);
        assert_eq!(job.max_attempts, Some(10));
        assert_eq!(job.delay_table.as_deref(), Some(&[2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000][..]));
        fx.report(&job, failed("x"));
        assert_eq!(fx.job(id).due_at, T0 + 2000);
        // Not due yet: a claim one millisecond early finds nothing.
        fx.clock.advance(Duration::from_millis(1999));
        assert!(fx.claim_as(WORKER, "q", 1, &p).is_empty());
        fx.clock.advance(Duration::from_millis(1));
        let job = fx.claim_one("q", &p);
        fx.report(&job, failed("x"));
        assert_eq!(fx.job(id).due_at, T0 + 2000 + 4000);
    }
}

both_backends! {
    /// A handler's own retry policy (`Registration::retry`, passed to the claim as
    /// `handler_policies`) replaces the group's for its wire name only, from the claim on: its
    /// job carries those attempts and that delay table, an error and a lapse both wait by them,
    /// and it dead-letters at its own last attempt. A job of another wire name in the same claim
    /// keeps the group's policy.
    fn a_handler_s_own_retry_policy_replaces_the_group_s_for_its_wire_name_at_claim() {
        let fx = Fixture::new();
        // The group's policy at the first claim, another group's at the second.
        let groups = [policy(5, Duration::from_secs(7)), policy(10, SEC)];
        let own = [("capture".to_string(), policy(2, Duration::from_secs(30)))];
        let capture_err = fx.enqueue("capture", "q");
        let capture_lapse = fx.enqueue("capture", "q");
        let report = fx.enqueue("report", "q");
        let queues = ["q".to_string()];
        let req = |group: usize| backwave::store::ClaimRequest {
            worker_id: WORKER,
            group: "g",
            queues: &queues,
            limit: 3,
            lease: LEASE,
            policy: &groups[group],
            handler_policies: &own,
        };
        let jobs = fx.store.claim(&req(0)).unwrap();
        let claimed: Vec<_> = jobs.iter().map(|j| (j.id, j.max_attempts, j.delay_table.clone())).collect();
        assert_eq!(
            claimed,
            [
                (capture_err, Some(2), Some(vec![30_000])),
                (capture_lapse, Some(2), Some(vec![30_000])),
                (report, Some(5), Some(vec![7_000; 4])),
            ]
        );
        for j in &jobs {
            let stored = fx.job(j.id);
            assert_eq!((stored.max_attempts, stored.delay_table.clone()), (j.max_attempts, j.delay_table.clone()), "{}", j.wire_name);
        }
        fx.report(&jobs[0], failed("declined"));
        fx.report(&jobs[2], failed("no data"));
        fx.clock.advance(LEASE + Duration::from_millis(1));
        assert_eq!(fx.store.reap_expired(100).unwrap(), 1);
        assert_eq!(fx.job(capture_err).due_at, T0 + 30_000);
        assert_eq!(fx.job(capture_lapse).due_at, T0 + LEASE.as_millis() as i64 + 1 + 30_000);
        assert_eq!(fx.job(report).due_at, T0 + 7_000);
        // The second attempt is the capture's last, whatever the claiming group allows.
        fx.clock.advance(Duration::from_secs(3600));
        let again = fx.store.claim(&req(1)).unwrap();
        assert_eq!(
            again.iter().map(|j| (j.id, j.attempt, j.max_attempts)).collect::<Vec<_>>(),
            [(report, 2, Some(10)), (capture_err, 2, Some(2)), (capture_lapse, 2, Some(2))],
            "in due order"
        );
        for j in &again {
            fx.report(j, failed("again"));
        }
        let states: Vec<_> = [capture_err, capture_lapse, report].into_iter().map(|id| fx.job(id).state).collect();
        assert_eq!(states, [JobState::DeadLettered, JobState::DeadLettered, JobState::Scheduled]);
        fx.assert_sound();
    }
}

both_backends! {
    /// The claim decides a job's handler policy before the group's delay table (`ops/claim.rs`):
    /// under a jittered group policy, where every other job draws a table of its own, a job its
    /// handler's policy covers carries and stores that policy's table, and the other job the
    /// group's, each drawn from its own seed.
    fn a_handler_s_own_policy_holds_under_a_jittered_group_policy() {
        let fx = Fixture::new();
        let jittered = RetryPolicy::new(4, backwave::Backoff::exponential(Duration::from_secs(1)).jitter(0.5)).unwrap();
        let own = [("capture".to_string(), policy(2, Duration::from_secs(30)))];
        let capture = fx.enqueue("capture", "q");
        let report = fx.enqueue("report", "q");
        let queues = ["q".to_string()];
        let req = backwave::store::ClaimRequest {
            worker_id: WORKER,
            group: "g",
            queues: &queues,
            limit: 2,
            lease: LEASE,
            policy: &jittered,
            handler_policies: &own,
        };
        let jobs = fx.store.claim(&req).unwrap();
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [capture, report]);
        assert_eq!((jobs[0].max_attempts, jobs[0].delay_table.clone()), (Some(2), Some(vec![30_000])));
        let group_table = jobs[1].delay_table.clone().expect("the group's table");
        assert_eq!((jobs[1].max_attempts, group_table.len()), (Some(4), 3));
        for j in &jobs {
            let stored = fx.job(j.id);
            assert_eq!((stored.max_attempts, stored.delay_table.clone()), (j.max_attempts, j.delay_table.clone()), "{}", j.wire_name);
        }
    }
}

both_backends! {
    /// A handler's own wait for a retry (`HandlerError::retry_in`, e.g. an upstream's
    /// Retry-After) replaces the delay table's for that attempt only; the attempt counts, and on
    /// the last one the job dead-letters as after any failure.
    fn a_failure_with_its_own_retry_wait_is_due_then_and_still_counts() {
        let fx = Fixture::new();
        let p = policy(3, Duration::from_secs(7));
        let id = fx.enqueue("call-api", "q");
        let rate_limited = || Outcome::Failed { message: "429".into(), detail: None, retry_in: Some(Duration::from_secs(90)) };
        let job = fx.claim_one("q", &p);
        fx.report(&job, rate_limited());
        let j = fx.job(id);
        assert_eq!((j.state, j.attempt, j.due_at), (JobState::Scheduled, 1, T0 + 90_000));
        fx.clock.advance(Duration::from_secs(90));
        let job = fx.claim_one("q", &p);
        fx.report(&job, failed("500"));
        assert_eq!(fx.job(id).due_at, T0 + 90_000 + 7_000, "the next wait is the table's");
        fx.clock.advance(Duration::from_secs(7));
        let job = fx.claim_one("q", &p);
        fx.report(&job, rate_limited());
        let j = fx.job(id);
        assert_eq!((j.state, j.attempt, j.terminal_cause.as_deref()), (JobState::DeadLettered, 3, Some("429")));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_lapsed_lease_consumes_one_attempt_exactly_like_an_error() {
        let fx = Fixture::new();
        let p = policy(3, Duration::from_secs(7));
        let by_error = fx.enqueue("work", "q");
        let by_lease = fx.enqueue("work", "q");
        let jobs = fx.claim_as(WORKER, "q", 2, &p);
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [by_error, by_lease]);
        // One attempt fails in the handler; the other's worker goes silent.
        fx.report(&jobs[0], failed("handler error"));
        fx.clock.advance(LEASE);
        assert_eq!(fx.store.reap_expired(100).unwrap(), 0, "a lease lapses strictly after its expiry");
        fx.clock.advance(Duration::from_millis(1));
        assert_eq!(fx.store.reap_expired(100).unwrap(), 1);
        let (e, l) = (fx.job(by_error), fx.job(by_lease));
        assert_eq!((e.state, l.state), (JobState::Scheduled, JobState::Scheduled));
        assert_eq!((e.attempt, l.attempt), (1, 1));
        // Both wait the same 7 s from the moment their failure was noticed.
        assert_eq!(e.due_at, T0 + 7_000);
        assert_eq!(l.due_at, T0 + LEASE.as_millis() as i64 + 1 + 7_000);
        let last = fx.store.history(by_lease).unwrap().pop().unwrap();
        assert_eq!(
            (last.to, last.reason.as_deref(), last.worker_id.as_deref()),
            (JobState::Scheduled, Some(LEASE_EXPIRED), Some(WORKER))
        );
        // The next claim is attempt 2 for both.
        fx.clock.advance(Duration::from_secs(3600));
        let again = fx.claim_as(OTHER_WORKER, "q", 2, &p);
        assert_eq!(again.iter().map(|j| j.attempt).collect::<Vec<_>>(), [2, 2]);
        fx.assert_sound();
    }
}

both_backends! {
    fn a_lease_that_lapses_on_the_last_attempt_dead_letters_with_cause_lease_expired() {
        let fx = Fixture::new();
        let id = fx.enqueue("hangs", "q");
        let p = policy(2, SEC);
        for attempt in 1..=2 {
            let job = fx.claim_one("q", &p);
            assert_eq!(job.attempt, attempt);
            fx.clock.advance(LEASE + SEC);
            assert_eq!(fx.store.reap_expired(10).unwrap(), 1);
            fx.clock.advance(SEC); // the retry's wait
        }
        let job = fx.job(id);
        assert_eq!(job.state, JobState::DeadLettered);
        assert_eq!(job.terminal_cause.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(job.finished_at, Some(fx.clock.now() - 1000), "finished when the reaper noticed");
        assert_eq!((job.lease_owner, job.lease_expires_at), (None, None));
        fx.assert_sound();
    }
}

both_backends! {
    /// The engine's reaper reaps a lapse only once an earlier look saw it with the same expiry:
    /// a heartbeat in between (one that waited behind a lock, say) moves the expiry, and the
    /// lapse it then shows is a new one, seen but not reaped.
    fn a_confirmed_reap_takes_only_lapses_seen_before_with_their_expiry_unmoved() {
        let fx = Fixture::new();
        let p = policy(3, SEC);
        let (silent, renewed) = (fx.enqueue("work", "q"), fx.enqueue("work", "q"));
        let claimed = fx.claim_as(WORKER, "q", 2, &p);
        assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), [silent, renewed]);
        fx.clock.advance(LEASE + SEC);
        let lapsed_at = fx.clock.now() - SEC.as_millis() as i64;
        let lapse = |id, at| Lapse { job_id: id, attempt: 1, expired_at: at };

        let first = fx.store.reap_lapsed(10, Confirmed::Seen(&HashSet::new())).unwrap().unwrap();
        assert_eq!((first.reaped, first.seen.clone()), (0, vec![lapse(silent, lapsed_at), lapse(renewed, lapsed_at)]));
        assert_eq!(fx.job(silent).state, JobState::Running, "seen is not reaped");

        assert_eq!(fx.store.heartbeat(WORKER, &[(renewed, 1)], LEASE).unwrap(), [LeaseStatus::Held { cancel_requested: false }]);
        let renewed_until = fx.clock.now() + LEASE.as_millis() as i64;
        fx.clock.advance(LEASE + SEC);
        let seen: HashSet<Lapse> = first.seen.into_iter().collect();
        let second = fx.store.reap_lapsed(10, Confirmed::Seen(&seen)).unwrap().unwrap();
        assert_eq!((second.reaped, second.seen), (1, vec![lapse(renewed, renewed_until)]));
        assert_eq!(fx.job(silent).state, JobState::Scheduled);
        assert_eq!(fx.store.history(silent).unwrap().last().unwrap().reason.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(fx.job(renewed).state, JobState::Running, "renewed since it was seen: a new lapse");

        // A tool reaps every lapse at once, unconfirmed.
        assert_eq!(fx.store.reap_expired(10).unwrap(), 1);
        assert_eq!(fx.job(renewed).state, JobState::Scheduled);
        fx.assert_sound();
    }
}

both_backends! {
    fn reaping_uses_the_table_written_at_claim_even_without_the_workers_policy() {
        // The worker that claimed had a jittered policy; whoever reaps knows nothing of it and
        // still schedules the retry at exactly the wait the job's table says.
        let fx = Fixture::new();
        let id = fx.enqueue("work", "q");
        let p = RetryPolicy::new(4, backwave::Backoff::exponential(Duration::from_secs(10)).jitter(0.3)).unwrap();
        let job = fx.claim_one("q", &p);
        let table = job.delay_table.clone().unwrap();
        assert_eq!(table.len(), 3);
        fx.clock.advance(LEASE + SEC);
        let reaper = backwave::Store::open(&fx.db).unwrap().with_clock(fx.clock.clone());
        assert_eq!(reaper.reap_expired(10).unwrap(), 1);
        assert_eq!(fx.job(id).due_at, fx.clock.now() + table[0] as i64);
        // The table is the job's: claiming again with the same policy writes the same table.
        fx.clock.advance(Duration::from_secs(3600));
        let again = fx.claim_one("q", &p);
        assert_eq!(again.delay_table.unwrap(), table, "a jittered table never changes under its job");
        // Two jobs get different jitter.
        let other = fx.enqueue("work", "q");
        let other_job = fx.claim_one("q", &p);
        assert_eq!(other_job.id, other);
        assert_ne!(other_job.delay_table.unwrap(), table);
    }
}

both_backends! {
    fn the_fence_discards_a_stale_workers_outcome_and_changes_nothing() {
        let fx = Fixture::new();
        let id = fx.enqueue("slow", "q");
        let p = policy(3, SEC);
        let first = fx.claim_one("q", &p);
        // The first worker stalls past its lease; the job is reaped and claimed by another.
        fx.clock.advance(LEASE + SEC);
        fx.store.reap_expired(10).unwrap();
        fx.clock.advance(Duration::from_secs(10));
        let second = fx.claim_as(OTHER_WORKER, "q", 1, &p).remove(0);
        assert_eq!(second.attempt, 2);
        let before = (fx.job(id), fx.store.history(id).unwrap());
        // The stale worker wakes up and reports, every way it can.
        for outcome in [
            Outcome::Succeeded,
            failed("late"),
            Outcome::Cancelled,
            Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "x".into() },
        ] {
            assert_eq!(fx.report(&first, outcome.clone()), Fenced::Rejected, "{outcome:?}");
            // Right worker, wrong attempt; and right attempt, wrong worker.
            assert_eq!(fx.report_as(OTHER_WORKER, id, 1, outcome.clone()), Fenced::Rejected);
            assert_eq!(fx.report_as(WORKER, id, 2, outcome.clone()), Fenced::Rejected);
        }
        assert_eq!((fx.job(id), fx.store.history(id).unwrap()), before, "a rejected outcome changes nothing");
        // The stale heartbeat is told the lease is lost.
        assert_eq!(fx.store.heartbeat(WORKER, &[(id, 1)], LEASE).unwrap(), [LeaseStatus::Lost]);
        // The current attempt completes.
        assert_eq!(fx.report(&second, Outcome::Succeeded), Fenced::Accepted(JobState::Succeeded));
        fx.assert_sound();
    }
}

both_backends! {
    fn no_job_reaches_succeeded_twice() {
        let fx = Fixture::new();
        let id = fx.enqueue("pay", "q");
        let job = fx.claim_one("q", &policy(3, SEC));
        let done = Completion { job_id: id, worker_id: WORKER.into(), attempt: 1, outcome: Outcome::Succeeded };
        // The same success reported twice in one batch and again later.
        let results = fx.store.complete_many(&[done.clone(), done.clone()]).unwrap();
        assert_eq!(results, [Fenced::Accepted(JobState::Succeeded), Fenced::Rejected]);
        assert_eq!(fx.store.complete(&done).unwrap(), Fenced::Rejected);
        assert_eq!(fx.report(&job, failed("after success")), Fenced::Rejected);
        let succeeded = fx.store.history(id).unwrap().iter().filter(|t| t.to == JobState::Succeeded).count();
        assert_eq!(succeeded, 1);
        let job = fx.job(id);
        assert_eq!((job.state, job.finished_at), (JobState::Succeeded, Some(T0)));
        // Nor can reaping touch it: it holds no lease.
        fx.clock.advance(LEASE * 10);
        assert_eq!(fx.store.reap_expired(10).unwrap(), 0);
    }
}

both_backends! {
    fn heartbeat_renews_the_lease_and_carries_the_cancel_request() {
        let fx = Fixture::new();
        let id = fx.enqueue("long", "q");
        let job = fx.claim_one("q", &policy(3, SEC));
        fx.clock.advance(Duration::from_secs(50));
        assert_eq!(fx.store.heartbeat(WORKER, &[(id, 1)], LEASE).unwrap(), [LeaseStatus::Held { cancel_requested: false }]);
        assert_eq!(fx.job(id).lease_expires_at, Some(T0 + 50_000 + 60_000));
        // Past the first lease but within the renewed one: nothing to reap.
        fx.clock.advance(Duration::from_secs(50));
        assert_eq!(fx.store.reap_expired(10).unwrap(), 0);
        fx.store.cancel(ADMIN, &[id]).unwrap();
        assert_eq!(fx.store.heartbeat(WORKER, &[(id, 1)], LEASE).unwrap(), [LeaseStatus::Held { cancel_requested: true }]);
        assert_eq!(fx.job(job.id).state, JobState::Running, "asking to stop is not stopping");
    }
}

/// Counts every write of a `jobs` row in `row_writes`, on either backend.
fn count_row_writes(fx: &Fixture) -> impl Fn() -> i64 + '_ {
    let sql = match crate::backend::current() {
        crate::backend::Backend::Sqlite => {
            "CREATE TABLE row_writes (id TEXT);
             CREATE TRIGGER row_writes AFTER UPDATE ON jobs BEGIN INSERT INTO row_writes VALUES (new.id); END"
        }
        crate::backend::Backend::Postgres => {
            "CREATE TABLE row_writes (id uuid);
             CREATE FUNCTION row_writes() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN INSERT INTO row_writes VALUES (NEW.id); RETURN NULL; END $$;
             CREATE TRIGGER row_writes AFTER UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION row_writes()"
        }
    };
    fx.store.raw_batch(sql).unwrap();
    || fx.store.raw_scalar("SELECT count(*) FROM row_writes", &[]).unwrap().as_i64()
}

both_backends! {
    /// A heartbeat reads every lease it names but rewrites a job's row only when the lease is
    /// due: less than two thirds of it left, and one heartbeat's gap (42 s of a minute). So a
    /// long job's row is written every 18 s or so of a one-minute lease, not every 2 s, and no
    /// lease of a worker heartbeating on time falls under two thirds of its length.
    fn a_heartbeat_reads_every_lease_and_renews_only_those_due() {
        assert_eq!(backwave::store::renewal_threshold(LEASE), 42_000);
        assert_eq!(backwave::store::renewal_threshold(Duration::from_secs(6)), 6_000, "a short lease: every heartbeat");
        assert_eq!(backwave::store::renewal_threshold(Duration::from_millis(300)), 300);
        let fx = Fixture::new();
        let (a, b) = (fx.enqueue("long", "q"), fx.enqueue("long", "q"));
        let claimed = fx.claim_as(WORKER, "q", 2, &policy(3, SEC));
        assert_eq!(claimed.len(), 2);
        let writes = count_row_writes(&fx);
        let held = [(a, 1), (b, 1)];
        let beat = |worker: &str| fx.store.heartbeat(worker, &held, LEASE).unwrap();
        let running = LeaseStatus::Held { cancel_requested: false };

        // 17.9 s in, 42.1 s left: read, not written.
        fx.clock.advance(Duration::from_millis(17_900));
        assert_eq!(beat(WORKER), [running, running]);
        assert_eq!(writes(), 0, "no lease was due");
        assert_eq!(fx.job(a).lease_expires_at, Some(T0 + 60_000));
        // What a heartbeat tells needs no renewal: an operator's cancel, another worker's lease.
        fx.store.cancel(ADMIN, &[b]).unwrap();
        let before = writes();
        assert_eq!(beat(WORKER), [running, LeaseStatus::Held { cancel_requested: true }]);
        assert_eq!(beat(OTHER_WORKER), [LeaseStatus::Lost, LeaseStatus::Lost]);
        assert_eq!(writes(), before);

        // 18.1 s in, 41.9 s left: both due, both renewed from now.
        fx.clock.advance(Duration::from_millis(200));
        assert_eq!(beat(WORKER), [running, LeaseStatus::Held { cancel_requested: true }]);
        assert_eq!(writes(), before + 2);
        for id in [a, b] {
            assert_eq!(fx.job(id).lease_expires_at, Some(T0 + 18_100 + 60_000));
        }
        // Progress to write renews its lease with it, due or not; the other is left.
        fx.clock.advance(Duration::from_secs(2));
        let progress = [Some(backwave::Progress::new(0.5, "half").unwrap()), None];
        let statuses = fx.store.heartbeat_with_progress(WORKER, &held, &progress, LEASE).unwrap();
        assert_eq!(statuses, [running, LeaseStatus::Held { cancel_requested: true }]);
        assert_eq!(writes(), before + 3);
        assert_eq!(fx.job(a).lease_expires_at, Some(T0 + 20_100 + 60_000));
        assert_eq!(fx.job(b).lease_expires_at, Some(T0 + 18_100 + 60_000));
        // A heartbeat late past the lease, before any reaper: renewed, as any due lease.
        fx.clock.advance(Duration::from_secs(70));
        assert_eq!(beat(WORKER), [running, LeaseStatus::Held { cancel_requested: true }]);
        assert_eq!(fx.job(b).lease_expires_at, Some(T0 + 90_100 + 60_000));
        // A lease shorter than what is left cuts it: none ends the lease now (a shutdown's way).
        fx.clock.advance(SEC);
        assert_eq!(fx.store.heartbeat(WORKER, &[(a, 1)], Duration::ZERO).unwrap(), [running]);
        assert_eq!(fx.job(a).lease_expires_at, Some(T0 + 91_100));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_running_job_ends_cancelled_when_its_worker_reports_the_operators_cancel() {
        let fx = Fixture::new();
        let id = fx.enqueue("long", "q");
        let job = fx.claim_one("q", &policy(3, SEC));
        assert_eq!(fx.store.cancel(ADMIN, &[id]).unwrap(), [backwave::store::CancelResult::CancelRequested]);
        assert_eq!(fx.report(&job, Outcome::Cancelled), Fenced::Accepted(JobState::Cancelled));
        let job = fx.job(id);
        assert_eq!(job.state, JobState::Cancelled);
        assert_eq!(job.terminal_cause.as_deref(), Some("cancelled by alice"));
        let last = fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!(
            (last.from, last.to, last.actor.as_deref()),
            (Some(JobState::Running), JobState::Cancelled, Some(ADMIN))
        );
        fx.assert_sound();
    }
}

both_backends! {
    fn a_running_job_whose_worker_is_gone_ends_cancelled_when_its_lease_lapses() {
        let fx = Fixture::new();
        let id = fx.enqueue("long", "q");
        fx.claim_one("q", &policy(3, SEC));
        fx.store.cancel(ADMIN, &[id]).unwrap();
        fx.clock.advance(LEASE + SEC);
        assert_eq!(fx.store.reap_expired(10).unwrap(), 1);
        let job = fx.job(id);
        assert_eq!(job.state, JobState::Cancelled, "not retried: the operator asked it to stop");
        assert_eq!(job.attempt, 1);
        let last = fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!((last.to, last.actor.as_deref()), (JobState::Cancelled, Some(ADMIN)));
    }
}

both_backends! {
    fn a_handler_cancelling_itself_unasked_is_a_failed_attempt() {
        // An HttpClient timeout inside the handler: retries like any failure (seed 000).
        let fx = Fixture::new();
        let id = fx.enqueue("timeout", "q");
        let p = policy(2, SEC);
        let job = fx.claim_one("q", &p);
        assert_eq!(fx.report(&job, Outcome::Cancelled), Fenced::Accepted(JobState::Scheduled));
        let last = fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!((last.to, last.reason.as_deref(), last.actor), (JobState::Scheduled, Some(UNREQUESTED_CANCEL), None));
        fx.clock.advance(SEC);
        let job = fx.claim_one("q", &p);
        assert_eq!(fx.report(&job, Outcome::Cancelled), Fenced::Accepted(JobState::DeadLettered));
        assert_eq!(fx.job(id).terminal_cause.as_deref(), Some(UNREQUESTED_CANCEL));
    }
}

both_backends! {
    fn a_scheduled_job_is_cancelled_at_once_and_a_terminal_one_not_at_all() {
        use backwave::store::CancelResult;
        let fx = Fixture::new();
        let later = fx.store.enqueue(&NewJob::new("w", "q", vec![]).due_at(T0 + 3_600_000)).unwrap();
        let done = fx.enqueue("w", "q2");
        let job = fx.claim_one("q2", &policy(1, SEC));
        fx.report(&job, Outcome::Succeeded);
        let unknown = backwave::JobId::new();
        assert_eq!(
            fx.store.cancel(ADMIN, &[later, done, unknown]).unwrap(),
            [CancelResult::Cancelled, CancelResult::NotCancellable { state: JobState::Succeeded }, CancelResult::NotFound]
        );
        assert_eq!(fx.job(later).state, JobState::Cancelled);
        fx.clock.advance(Duration::from_secs(7200));
        assert!(fx.claim_as(WORKER, "q", 1, &policy(1, SEC)).is_empty(), "a cancelled job is never claimed");
        // Cancelling needs the operate permission.
        let err = fx.store.cancel("mallory", &[later]).unwrap_err();
        assert!(matches!(err, backwave::Error::PermissionDenied { .. }), "{err}");
    }
}

both_backends! {
    fn quarantine_on_claim_shows_attempt_1_and_never_retries() {
        let fx = Fixture::new();
        let id = fx.enqueue("gone", "q");
        let job = fx.claim_one("q", &policy(5, SEC));
        let outcome = Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "no handler for 'gone'".into() };
        assert_eq!(fx.report(&job, outcome), Fenced::Accepted(JobState::Quarantined));
        let job = fx.job(id);
        assert_eq!(
            (job.state, job.attempt, job.quarantine_reason),
            (JobState::Quarantined, 1, Some(QuarantineReason::NoHandler))
        );
        fx.clock.advance(Duration::from_secs(3600));
        assert!(fx.claim_as(WORKER, "q", 1, &policy(5, SEC)).is_empty());
    }
}

both_backends! {
    fn claim_and_complete_work_in_batches() {
        let fx = Fixture::new();
        let ids: Vec<_> = (0..25).map(|i| NewJob::new("batch", "q", format!("{{\"i\":{i}}}"))).collect();
        let ids = fx.store.enqueue_many(&ids).unwrap();
        let p = policy(2, SEC);
        let first = fx.claim_as(WORKER, "q", 10, &p);
        assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), ids[..10], "oldest due first");
        let rest = fx.claim_as(OTHER_WORKER, "q", 100, &p);
        assert_eq!(rest.len(), 15);
        assert!(fx.claim_as(WORKER, "q", 10, &p).is_empty());
        let completions: Vec<_> = first
            .iter()
            .enumerate()
            .map(|(i, j)| Completion {
                job_id: j.id,
                worker_id: WORKER.into(),
                attempt: 1,
                outcome: if i % 2 == 0 { Outcome::Succeeded } else { failed("odd") },
            })
            .collect();
        let results = fx.store.complete_many(&completions).unwrap();
        let expected: Vec<_> =
            (0..10).map(|i| Fenced::Accepted(if i % 2 == 0 { JobState::Succeeded } else { JobState::Scheduled })).collect();
        assert_eq!(results, expected);
        // A batch mixing current and stale completions: each judged alone.
        let mixed = [
            Completion { job_id: rest[0].id, worker_id: OTHER_WORKER.into(), attempt: 1, outcome: Outcome::Succeeded },
            Completion { job_id: rest[1].id, worker_id: WORKER.into(), attempt: 1, outcome: Outcome::Succeeded },
        ];
        assert_eq!(fx.store.complete_many(&mixed).unwrap(), [Fenced::Accepted(JobState::Succeeded), Fenced::Rejected]);
        // Written as one set: the accepted one logged, the rejected one untouched and unlogged.
        let last = |id| fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!((last(rest[0].id).to, last(rest[0].id).worker_id.as_deref()), (JobState::Succeeded, Some(OTHER_WORKER)));
        assert_eq!((last(rest[1].id).to, fx.job(rest[1].id).state), (JobState::Running, JobState::Running));
        assert_eq!(fx.store.complete_many(&[]).unwrap(), []);
        fx.assert_sound();
    }
}

both_backends! {
    fn strict_queue_order_serves_the_first_queue_with_a_due_job() {
        let fx = Fixture::new();
        let low = fx.enqueue("w", "low");
        let high_later = fx.store.enqueue(&NewJob::new("w", "high", vec![]).due_at(T0 + 10_000)).unwrap();
        let queues = ["high".to_string(), "low".to_string()];
        let p = policy(1, SEC);
        let req = |limit| backwave::store::ClaimRequest {
            worker_id: WORKER,
            group: "g",
            queues: &queues,
            limit,
            lease: LEASE,
            policy: &p,
            handler_policies: &[],
        };
        assert_eq!(fx.store.claim(&req(1)).unwrap()[0].id, low, "high has nothing due yet");
        fx.clock.advance(Duration::from_secs(10));
        let more = fx.enqueue("w", "low");
        let got: Vec<_> = fx.store.claim(&req(2)).unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(got, [high_later, more]);
    }
}

both_backends! {
    fn counts_stay_exact_through_a_mixed_scenario() {
        let fx = Fixture::new();
        let p = policy(2, SEC);
        for q in ["a", "b", "c"] {
            for _ in 0..6 {
                fx.enqueue("mix", q);
            }
        }
        let a = fx.claim_as(WORKER, "a", 6, &p);
        fx.report(&a[0], Outcome::Succeeded);
        fx.report(&a[1], failed("e"));
        fx.report(&a[2], Outcome::Quarantined { reason: QuarantineReason::UndecodablePayload, cause: "bad json".into() });
        fx.store.cancel(ADMIN, &[a[3].id]).unwrap();
        let b = fx.claim_as(WORKER, "b", 2, &p);
        fx.store.cancel(ADMIN, &[b[0].id]).unwrap();
        let c = fx.claim_as(WORKER, "c", 6, &p);
        fx.clock.advance(LEASE * 2);
        fx.store.reap_expired(100).unwrap();
        fx.clock.advance(LEASE * 2);
        let c2 = fx.claim_as(OTHER_WORKER, "c", 6, &p);
        assert_eq!(c2.len(), c.len());
        fx.clock.advance(LEASE * 2);
        fx.store.reap_expired(100).unwrap();
        fx.store.requeue(ADMIN, &c.iter().map(|j| j.id).collect::<Vec<_>>()).unwrap();
        fx.store.sweep(fx.clock.now() + 1, 3).unwrap();
        assert_eq!(
            fx.store.counts().unwrap().total(JobState::Running) as usize,
            fx.store.raw_scalar("SELECT count(*) FROM jobs WHERE state = 'running'", &[]).unwrap().as_i64() as usize
        );
        fx.assert_sound();
    }
}

both_backends! {
    fn failure_detail_is_kept_on_the_failing_entry_and_hidden_until_revealed() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let job = fx.claim_one("q", &policy(2, SEC));
        let detail = FailureDetail {
            kind: "std::io::Error".into(),
            message: "connection reset".into(),
            chain: vec!["tcp".into()],
            backtrace: Some("0: main".into()),
        };
        fx.report(&job, Outcome::Failed { message: "connection reset".into(), detail: Some(detail.clone()), retry_in: None });
        let entry = fx.store.history(id).unwrap().pop().unwrap();
        match &entry.detail {
            backwave::DetailStatus::Hidden { kind, bytes } => {
                assert_eq!(kind, "std::io::Error");
                assert!(*bytes > 0);
            }
            other => panic!("expected hidden detail, got {other:?}"),
        }
        assert_eq!(entry.reason.as_deref(), Some("connection reset"));
        let revealed = fx.store.reveal_failure_detail(ADMIN, id).unwrap();
        assert_eq!(revealed, [(entry.seq, detail)]);
    }
}

both_backends! {
    fn a_large_batch_stores_every_job_as_given_and_logs_each_once_in_batch_order() {
        // 1077 jobs: more than one multi-row statement of each size the store cuts a batch into.
        let fx = Fixture::new();
        let jobs: Vec<NewJob> = (0..1077)
            .map(|i| {
                let job = NewJob::new(format!("w{}", i % 4), format!("q{}", i % 3), format!("{{\"n\":{i}}}").into_bytes());
                match i % 5 {
                    0 => job.label("tenant", format!("t{i}")),
                    1 => job.due_at(T0 + i as i64),
                    _ => job,
                }
            })
            .collect();
        let ids = fx.store.enqueue_many(&jobs).unwrap();
        assert_eq!(ids.len(), jobs.len());
        for (job, id) in jobs.iter().zip(&ids) {
            let stored = fx.job(*id);
            assert_eq!(
                (&stored.wire_name, &stored.queue, &stored.labels, &stored.payload, stored.due_at, stored.state),
                (&job.wire_name, &job.queue, &job.labels, &job.payload, job.due_at.unwrap_or(T0), JobState::Scheduled)
            );
            let history = fx.store.history(*id).unwrap();
            assert_eq!(history.len(), 1, "{id}");
            assert_eq!((history[0].from, history[0].to, history[0].attempt, history[0].at), (None, JobState::Scheduled, 0, T0));
        }
        let logged: Vec<backwave::JobId> = fx
            .store
            .raw_query("SELECT CAST(job_id AS TEXT) FROM transitions ORDER BY seq", &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().parse().unwrap())
            .collect();
        assert_eq!(logged, ids);
        assert_eq!(fx.store.counts().unwrap().total(JobState::Scheduled), 1077);
        fx.assert_sound();
    }
}

both_backends! {
    /// A claim returns each job as the store then holds it, whatever the backend sends back of
    /// the row (PostgreSQL's only what the claim did not write): labels, trace context,
    /// priority, payload, the lease, the group, the budget and the delay table alike.
    fn a_claimed_job_is_the_job_the_store_then_holds() {
        let fx = Fixture::new();
        let mut labelled = NewJob::new("shaped", "q", "{\"n\":1}").priority(3).traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        labelled.labels.insert("team".into(), "shop".into());
        labelled.labels.insert("region".into(), "eu".into());
        let plain = NewJob::new("bare", "q", "{}");
        let ids = fx.store.enqueue_many(&[labelled, plain]).unwrap();
        let claimed = fx.claim_as(WORKER, "q", 10, &policy(4, SEC));
        assert_eq!(claimed.iter().map(|j| j.id).collect::<HashSet<_>>(), ids.iter().copied().collect());
        for job in claimed {
            assert!(job.delay_table.is_some(), "the group's table, written at the claim");
            assert_eq!(job, fx.job(job.id));
        }
        let labelled = fx.job(ids[0]);
        assert_eq!(labelled.labels.len(), 2);
        assert_eq!((labelled.priority, labelled.lease_owner.as_deref()), (3, Some(WORKER)));
        assert!(fx.job(ids[1]).labels.is_empty());
        fx.assert_sound();
    }
}
