//! Operator actions: requeue from every state, the retention sweep, id prefixes, and failure
//! detail (its switch, its permission, its audit trail).

use std::time::Duration;

use backwave::store::{Outcome, RequeueResult, SettingKey};
use backwave::{DetailStatus, Error, FailureDetail, JobId, JobState, Permission, QuarantineReason};

use super::{failed, policy, Fixture, ADMIN, LEASE, T0};
use crate::backend::both_backends;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// One job in each of the six states, in `JobState::ALL` order.
fn one_of_each(fx: &Fixture) -> Vec<JobId> {
    let p = policy(1, Duration::from_secs(1));
    let mut ids = Vec::new();
    ids.push(fx.enqueue("w", "scheduled"));
    let running = fx.enqueue("w", "running");
    fx.claim_one("running", &p);
    ids.push(running);
    let succeeded = fx.enqueue("w", "succeeded");
    let job = fx.claim_one("succeeded", &p);
    fx.report(&job, Outcome::Succeeded);
    ids.push(succeeded);
    let dead = fx.enqueue("w", "dead");
    let job = fx.claim_one("dead", &p);
    fx.report(&job, failed("always fails"));
    ids.push(dead);
    let quarantined = fx.enqueue("w", "quarantined");
    let job = fx.claim_one("quarantined", &p);
    fx.report(&job, Outcome::Quarantined { reason: QuarantineReason::UndecodablePayload, cause: "bad".into() });
    ids.push(quarantined);
    let cancelled = fx.enqueue("w", "cancelled");
    fx.store.cancel(ADMIN, &[cancelled]).unwrap();
    ids.push(cancelled);
    for (id, state) in ids.iter().zip(JobState::ALL) {
        assert_eq!(fx.job(*id).state, state);
    }
    ids
}

both_backends! {
    fn requeue_changes_only_dead_lettered_and_quarantined_jobs() {
        let fx = Fixture::new();
        let ids = one_of_each(&fx);
        fx.clock.advance(Duration::from_secs(5));
        let before: Vec<_> = ids.iter().map(|id| (fx.job(*id), fx.store.history(*id).unwrap())).collect();
        let results = fx.store.requeue("bob-admin", &ids).unwrap_err();
        assert!(matches!(results, Error::PermissionDenied { permission: Permission::Operate, .. }), "{results}");
        fx.store.grant(ADMIN, "bob", Permission::Operate).unwrap();
        let results = fx.store.requeue("bob", &ids).unwrap();
        assert_eq!(
            results,
            [
                RequeueResult::NotRequeueable { state: JobState::Scheduled },
                RequeueResult::NotRequeueable { state: JobState::Running },
                RequeueResult::NotRequeueable { state: JobState::Succeeded },
                RequeueResult::Requeued { from: JobState::DeadLettered },
                RequeueResult::Requeued { from: JobState::Quarantined },
                RequeueResult::NotRequeueable { state: JobState::Cancelled },
            ]
        );
        for (i, id) in ids.iter().enumerate() {
            let job = fx.job(*id);
            if matches!(i, 3 | 4) {
                assert_eq!(job.state, JobState::Scheduled);
                assert_eq!(job.attempt, 0, "budget reset: the next claim is attempt 1");
                assert_eq!(job.due_at, T0 + 5_000, "due now");
                assert_eq!((job.finished_at, job.terminal_cause, job.quarantine_reason), (None, None, None));
                let last = fx.store.history(*id).unwrap().pop().unwrap();
                assert_eq!((last.to, last.actor.as_deref(), last.attempt), (JobState::Scheduled, Some("bob"), 0));
            } else {
                assert_eq!(
                    (job, fx.store.history(*id).unwrap()),
                    before[i],
                    "state {:?} must not change",
                    JobState::ALL[i]
                );
            }
        }
        // The requeued dead-lettered job gets a whole new budget.
        let p = policy(2, Duration::from_secs(1));
        let job = fx.claim_one("dead", &p);
        assert_eq!(job.attempt, 1);
        fx.report(&job, failed("again"));
        assert_eq!(fx.job(ids[3]).state, JobState::Scheduled, "attempt 1 of 2 retries");
        // Unknown ids are NotFound, not errors.
        assert_eq!(fx.store.requeue(ADMIN, &[JobId::new()]).unwrap(), [RequeueResult::NotFound]);
        fx.assert_sound();
    }
}

both_backends! {
    fn retention_sweep_deletes_old_terminal_jobs_with_their_log() {
        let fx = Fixture::new();
        let ids = one_of_each(&fx); // terminal ones finished at T0
        fx.clock.advance(DAY * 10);
        let recent = fx.enqueue("w", "recent");
        let job = fx.claim_one("recent", &policy(1, Duration::from_secs(1)));
        fx.report(&job, Outcome::Succeeded);
        assert_eq!(fx.store.retention().unwrap(), DAY * 14);
        fx.clock.advance(DAY * 4 + Duration::from_secs(1)); // the T0 jobs are now 14 days and 1 s old
        assert_eq!(fx.store.count_purgeable(fx.clock.now() - (DAY * 14).as_millis() as i64).unwrap(), 4);
        assert_eq!(fx.store.sweep_expired(2).unwrap(), 2, "a sweep batch is bounded");
        assert_eq!(fx.store.sweep_expired(100).unwrap(), 2);
        assert_eq!(fx.store.sweep_expired(100).unwrap(), 0);
        for (id, state) in ids.iter().zip(JobState::ALL) {
            let gone = fx.store.job(*id).unwrap().is_none();
            assert_eq!(gone, state.is_terminal(), "{state}");
            assert_eq!(fx.store.history(*id).unwrap().is_empty(), gone, "the log goes with its job");
        }
        assert_eq!(fx.job(recent).state, JobState::Succeeded, "younger than the cutoff: kept");
        let orphans = fx
            .store
            .raw_scalar("SELECT count(*) FROM transitions WHERE job_id NOT IN (SELECT id FROM jobs)", &[])
            .unwrap()
            .as_i64();
        assert_eq!(orphans, 0);
        // The retention is a setting; a shorter one sweeps the recent job too.
        fx.store.set_setting(ADMIN, SettingKey::Retention, "1d").unwrap();
        assert_eq!(fx.store.sweep_expired(100).unwrap(), 1);
        assert!(fx.store.job(recent).unwrap().is_none());
        fx.assert_sound();
    }
}

both_backends! {
    fn purge_needs_operate_and_is_audited() {
        let fx = Fixture::new();
        one_of_each(&fx);
        fx.clock.advance(DAY);
        let err = fx.store.purge("mallory", fx.clock.now(), |_| {}).unwrap_err();
        assert!(matches!(err, Error::PermissionDenied { .. }));
        let mut seen = Vec::new();
        assert_eq!(fx.store.purge(ADMIN, fx.clock.now(), |p| seen.push(p)).unwrap(), 4);
        assert_eq!(seen.last().map(|p| (p.done, p.total)), Some((4, 4)));
        let audit = fx.store.audit_entries(0, 100).unwrap();
        assert!(audit.iter().any(|a| a.action == "purge" && a.actor == ADMIN), "{audit:?}");
    }
}

both_backends! {
    fn ids_resolve_from_unique_prefixes() {
        let fx = Fixture::new();
        // Ids chosen so that prefixes collide: 0192f3a1-... twice, 0192f3b2-... once.
        let ids = [
            "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10",
            "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11",
            "0192f3b2-0000-7000-8000-000000000001",
        ];
        for id in ids {
            fx.store
                .raw_execute(
                    &format!("INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at) VALUES ('{id}', 'w', 'q', 0, 0, 0)"),
                    &[],
                )
                .unwrap();
        }
        let full: JobId = ids[2].parse().unwrap();
        assert_eq!(fx.store.resolve_id("0192f3b2").unwrap(), full);
        assert_eq!(fx.store.resolve_id("0192F3B2").unwrap(), full, "case does not matter");
        assert_eq!(fx.store.resolve_id("0192f3b20000").unwrap(), full, "hyphens optional");
        assert_eq!(fx.store.resolve_id(ids[0]).unwrap(), ids[0].parse().unwrap());
        assert_eq!(
            fx.store.resolve_id("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b1").unwrap_err().to_string(),
            format!("job id '0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b1' is ambiguous: it matches the start or the end of {}, {}", ids[0], ids[1])
        );
        match fx.store.resolve_id("0192f3") {
            Err(Error::AmbiguousId { prefix, candidates }) => {
                assert_eq!(prefix, "0192f3");
                assert_eq!(candidates, ids);
            }
            other => panic!("expected AmbiguousId, got {other:?}"),
        }
        let err = fx.store.resolve_id("deadbeef").unwrap_err();
        assert!(matches!(err, Error::JobNotFound(_)));
        assert_eq!(err.to_string(), "no job matches 'deadbeef'");
        for bad in ["", "xyz", "0192;drop table jobs", "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10ff"] {
            let err = fx.store.resolve_id(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{bad:?}: {err:?}");
            assert!(err.to_string().contains(&format!("'{bad}'")), "the error quotes the bad value: {err}");
        }
    }
}

both_backends! {
    fn with_failure_detail_switched_off_entries_say_not_captured_and_the_cause_is_still_written() {
        let fx = Fixture::new();
        fx.store.set_setting(ADMIN, SettingKey::FailureDetail, "off").unwrap();
        assert!(!fx.store.failure_detail_enabled().unwrap());
        let id = fx.enqueue("pii", "q");
        let job = fx.claim_one("q", &policy(1, Duration::from_secs(1)));
        let detail = FailureDetail { kind: "E".into(), message: "card 4111-1111".into(), ..Default::default() };
        fx.report(&job, Outcome::Failed { message: "card declined".into(), detail: Some(detail), retry_in: None });
        let last = fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!(last.detail, DetailStatus::NotCaptured);
        assert_eq!(last.reason.as_deref(), Some("card declined"));
        assert_eq!(fx.job(id).terminal_cause.as_deref(), Some("card declined"));
        let stored = fx
            .store
            .raw_query(&format!("SELECT failure_detail FROM transitions WHERE seq = {}", last.seq), &[])
            .unwrap()
            .remove(0)
            .remove(0)
            .as_opt_str()
            .map(str::to_string);
        assert_eq!(stored, None, "nothing of the detail reaches the database");
        assert!(matches!(fx.store.reveal_failure_detail(ADMIN, id), Err(Error::FailureDetailOff)));
    }
}

both_backends! {
    fn detail_captured_before_the_switch_went_off_is_not_revealed_while_it_is_off() {
        let fx = Fixture::new();
        let id = fx.enqueue("pii", "q");
        let job = fx.claim_one("q", &policy(1, Duration::from_secs(1)));
        let detail = FailureDetail { kind: "E".into(), message: "card 4111-1111".into(), ..Default::default() };
        fx.report(&job, Outcome::Failed { message: "card declined".into(), detail: Some(detail.clone()), retry_in: None });
        fx.store.set_setting(ADMIN, SettingKey::FailureDetail, "off").unwrap();
        assert!(matches!(fx.store.reveal_failure_detail(ADMIN, id), Err(Error::FailureDetailOff)));
        fx.store.set_setting(ADMIN, SettingKey::FailureDetail, "on").unwrap();
        let revealed = fx.store.reveal_failure_detail(ADMIN, id).unwrap();
        assert_eq!(revealed.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>(), vec![detail]);
    }
}

both_backends! {
    fn revealing_failure_detail_needs_the_permission_and_is_audited() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let job = fx.claim_one("q", &policy(1, Duration::from_secs(1)));
        let detail = FailureDetail { kind: "panic".into(), message: "index out of bounds".into(), ..Default::default() };
        fx.report(&job, Outcome::Failed { message: "index out of bounds".into(), detail: Some(detail.clone()), retry_in: None });
        match fx.store.reveal_failure_detail("carol", id) {
            Err(Error::PermissionDenied { actor, permission }) => {
                assert_eq!((actor.as_str(), permission), ("carol", Permission::ViewFailureDetail))
            }
            other => panic!("expected PermissionDenied, got {other:?}"),
        }
        assert!(fx.store.audit_entries(0, 100).unwrap().iter().all(|a| a.action != "reveal-failure-detail"));
        fx.store.grant(ADMIN, "carol", Permission::ViewFailureDetail).unwrap();
        fx.clock.advance(LEASE);
        let revealed = fx.store.reveal_failure_detail("carol", id).unwrap();
        assert_eq!(revealed.len(), 1);
        assert_eq!(revealed[0].1, detail);
        let audit = fx.store.audit_entries(0, 100).unwrap();
        let reveal = audit.iter().find(|a| a.action == "reveal-failure-detail").expect("the reveal is audited");
        assert_eq!((reveal.actor.as_str(), reveal.job_id, reveal.at), ("carol", Some(id), T0 + LEASE.as_millis() as i64));
    }
}

both_backends! {
    /// `JobId::short()` was the first 8 hex digits, which in a time-ordered id are the timestamp:
    /// every job made in the same minute showed the same short id, and none of them resolved.
    fn regression_short_ids_of_jobs_made_in_the_same_minute_resolve_to_their_job() {
        let fx = Fixture::new();
        let ids = fx.store.enqueue_many(&vec![backwave::NewJob::new("w", "q", vec![]); 50]).unwrap();
        for id in &ids {
            assert_eq!(fx.store.resolve_id(&id.short()).unwrap(), *id, "short id {}", id.short());
            assert_eq!(fx.store.resolve_id(&id.short().to_uppercase()).unwrap(), *id);
        }
        // The shared time prefix is still a prefix: ambiguous, with the candidates listed.
        match fx.store.resolve_id(&ids[0].to_string()[..8]) {
            Err(Error::AmbiguousId { candidates, .. }) => {
                assert_eq!(candidates.len(), 6, "five ids and an ellipsis: {candidates:?}");
                assert_eq!(candidates[5], "…");
            }
            other => panic!("expected AmbiguousId, got {other:?}"),
        }
    }
}

both_backends! {
    /// A bulk requeue of one failed state and one wire name, or of one cause group, takes its
    /// batches from the name's own index range on SQLite: it requeues exactly the matching jobs,
    /// over several batches, and leaves the others of the state, the name and the group alone.
    fn a_bulk_requeue_of_one_wire_name_or_cause_group_requeues_exactly_its_jobs() {
        use backwave::store::JobFilter;
        use backwave::NewJob;
        let fx = Fixture::new();
        // 1,300 jobs over three batches of 500: "a" quarantined (1,000) and dead-lettered by two
        // causes (150 + 50), "b" quarantined and dead-lettered (50 each).
        let names = |i: usize| if i < 1250 { "a" } else { "b" };
        let jobs: Vec<NewJob> = (0..1300).map(|i| NewJob::new(names(i), "q", vec![])).collect();
        let outcome = |wire_name: &str, i: usize| match (wire_name, i % 26) {
            ("a", 0..=2) => failed("disk full"),
            ("a", 3) => failed("boom"),
            ("a", _) => Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "nobody handles a".into() },
            (_, n) if n % 2 == 0 => failed("boom"),
            _ => Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "nobody handles b".into() },
        };
        fx.ended("q", &jobs, |i, j| outcome(&j.wire_name, i));
        let count = |state: JobState, wire_name: &str| {
            let f = JobFilter { wire_name: Some(wire_name.into()), ..JobFilter::state(state) };
            fx.store.count_jobs(&f).unwrap()
        };
        let (a_quarantined, a_dead) = (count(JobState::Quarantined, "a"), count(JobState::DeadLettered, "a"));
        assert_eq!(a_quarantined + a_dead, 1250);
        assert!(a_quarantined > 1000, "{a_quarantined}");
        let (b_quarantined, b_dead) = (count(JobState::Quarantined, "b"), count(JobState::DeadLettered, "b"));

        let name = JobFilter { wire_name: Some("a".into()), ..JobFilter::state(JobState::Quarantined) };
        assert_eq!(fx.store.requeue_matching(ADMIN, &name, |_| {}).unwrap(), a_quarantined);
        assert_eq!(count(JobState::Quarantined, "a"), 0);
        assert_eq!(count(JobState::Scheduled, "a"), a_quarantined);
        assert_eq!((count(JobState::DeadLettered, "a"), count(JobState::Quarantined, "b")), (a_dead, b_quarantined));

        let disk_full = JobFilter {
            wire_name: Some("a".into()),
            fingerprint: Some("disk full".into()),
            ..JobFilter::state(JobState::DeadLettered)
        };
        let in_group = fx.store.count_jobs(&disk_full).unwrap();
        assert!(in_group > 0 && in_group < a_dead, "{in_group} of {a_dead}");
        assert_eq!(fx.store.requeue_matching(ADMIN, &disk_full, |_| {}).unwrap(), in_group);
        assert_eq!(count(JobState::DeadLettered, "a"), a_dead - in_group, "the other cause stays");
        assert_eq!(count(JobState::DeadLettered, "b"), b_dead, "the same cause of another name stays");
        // A wire name over both failed states.
        let b = JobFilter { wire_name: Some("b".into()), ..JobFilter::default() };
        assert_eq!(fx.store.requeue_matching(ADMIN, &b, |_| {}).unwrap(), b_dead + b_quarantined);
        assert_eq!(count(JobState::Scheduled, "b"), b_dead + b_quarantined);
        assert_eq!(count(JobState::DeadLettered, "a"), a_dead - in_group);
        fx.assert_sound();
    }
}
