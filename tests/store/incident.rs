//! Incident actions in the store: pause and resume (the claim honours them, a wire-name pause
//! stays index-bound however many paused jobs wait), run now, bulk cancel, payload repair, and
//! the migration of a version-1 store made by the previous release.

use std::time::Duration;

use backwave::store::{
    JobFilter, LimitSpec, PauseKind, PauseResult, RawConnection, ResumeResult, RunNowResult, CLAIM_NEXT_WIRE_NAME_SQL,
    CLAIM_WIRE_NAME_SQL, SCHEMA_VERSION,
};
use backwave::{Clock, Error, JobState, NewJob, Store};

use super::{failed, policy, Fixture, ADMIN, T0, WORKER};
use crate::backend::both_backends;

const STRANGER: &str = "mallory";

fn table_dump(store: &Store) -> String {
    let mut out = String::new();
    for sql in ["SELECT * FROM jobs ORDER BY id", "SELECT * FROM transitions ORDER BY seq", "SELECT * FROM pauses"] {
        for row in store.raw_query(sql, &[]).unwrap() {
            out.push_str(&row.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join("|"));
            out.push('\n');
        }
    }
    out
}

fn audit_actions(store: &Store) -> Vec<(String, String, Option<String>)> {
    store.audit_entries(0, 1000).unwrap().into_iter().map(|e| (e.actor, e.action, e.detail)).collect()
}

// ---- pause and resume ------------------------------------------------------------------------

both_backends! {
    fn a_paused_queue_is_not_claimed_while_other_queues_drain_and_resume_brings_it_back() {
        let fx = Fixture::new();
        let critical = fx.enqueue("charge-card", "critical");
        let other = fx.enqueue("charge-card", "default");
        assert_eq!(fx.store.pause(ADMIN, PauseKind::Queue, "critical", None, false).unwrap(), PauseResult::Paused);
        let p = policy(3, Duration::from_secs(1));
        let queues = ["critical".to_string(), "default".to_string()];
        let req = backwave::store::ClaimRequest {
            worker_id: WORKER,
            group: "g",
            queues: &queues,
            limit: 10,
            lease: crate::store::LEASE,
            policy: &p,
            handler_policies: &[],
        };
        let claimed: Vec<_> = fx.store.claim(&req).unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(claimed, [other], "only the unpaused queue is claimed");
        // Enqueues still land in the paused queue.
        let later = fx.enqueue("send-email", "critical");
        assert!(fx.claim_as(WORKER, "critical", 10, &p).is_empty());
        assert_eq!(fx.store.resume(ADMIN, PauseKind::Queue, "critical").unwrap(), ResumeResult::Resumed);
        let claimed: Vec<_> = fx.claim_as(WORKER, "critical", 10, &p).into_iter().map(|j| j.id).collect();
        assert_eq!(claimed, [critical, later]);
        assert_eq!(fx.store.resume(ADMIN, PauseKind::Queue, "critical").unwrap(), ResumeResult::NotPaused);
        let audit = audit_actions(&fx.store);
        assert!(audit.contains(&(ADMIN.into(), "pause".into(), Some("queue critical until resumed".into()))), "{audit:?}");
        assert!(audit.contains(&(ADMIN.into(), "resume".into(), Some("queue critical".into()))), "{audit:?}");
        fx.assert_sound();
    }
}

both_backends! {
    fn a_paused_wire_name_is_skipped_in_its_queue_and_every_other_job_is_claimed_in_due_order() {
        let fx = Fixture::new();
        let jobs = [
            NewJob::new("charge-card", "critical", vec![]).due_at(T0 - 50),
            NewJob::new("send-email", "critical", vec![]).due_at(T0 - 40),
            NewJob::new("charge-card", "critical", vec![]).due_at(T0 - 30),
            NewJob::new("audit-log", "critical", vec![]).due_at(T0 - 20),
            NewJob::new("send-email", "critical", vec![]).due_at(T0 + 60_000),
            NewJob::new("charge-card", "default", vec![]).due_at(T0 - 10),
        ];
        let ids = fx.store.enqueue_many(&jobs).unwrap();
        let plan = fx.store.plan_pause(ADMIN, PauseKind::WireName, "charge-card", false).unwrap();
        assert_eq!((plan.scheduled, plan.running), (3, 0), "both queues, due now or not");
        let plan = fx.store.plan_pause(ADMIN, PauseKind::Queue, "critical", false).unwrap();
        assert_eq!((plan.scheduled, plan.running), (5, 0));
        let until = T0 + 30 * 60_000;
        fx.store.pause(ADMIN, PauseKind::WireName, "charge-card", Some(until), false).unwrap();
        let p = policy(3, Duration::from_secs(1));
        let claimed: Vec<_> = fx.claim_as(WORKER, "critical", 10, &p).into_iter().map(|j| j.id).collect();
        assert_eq!(claimed, [ids[1], ids[3]], "the due unpaused jobs, oldest due first, nothing due later");
        assert!(fx.claim_as(WORKER, "default", 10, &p).is_empty(), "the wire name is paused in every queue");
        // A running job of a paused wire name finishes normally.
        fx.store.resume(ADMIN, PauseKind::WireName, "charge-card").unwrap();
        let running = fx.claim_as(WORKER, "default", 1, &p).remove(0);
        let plan = fx.store.plan_pause(ADMIN, PauseKind::WireName, "charge-card", false).unwrap();
        assert_eq!((plan.scheduled, plan.running), (2, 1));
        fx.store.pause(ADMIN, PauseKind::WireName, "charge-card", Some(until), false).unwrap();
        assert_eq!(
            fx.report(&running, backwave::store::Outcome::Succeeded),
            backwave::store::Fenced::Accepted(JobState::Succeeded)
        );
        // --for expires by itself.
        fx.clock.set(until);
        let claimed: Vec<_> = fx.claim_as(WORKER, "critical", 10, &p).into_iter().map(|j| j.id).collect();
        assert_eq!(claimed, [ids[0], ids[2], ids[4]], "the paused jobs, and the one due since");
        assert!(fx.store.pauses().unwrap().is_empty(), "a lapsed pause is not listed");
        fx.assert_sound();
    }
}

/// The cost the issue warns about: with 20,000 paused jobs due at the head of a queue, a claim
/// must not read them all. It steps from one wire name to the next on jobs_claim_wire (the
/// library's own statements, counted here as plan.rs counts CLAIM_SQL).
#[test]
fn a_wire_name_pause_does_not_make_every_claim_walk_the_paused_backlog() {
    let fx = Fixture::new();
    let mut jobs: Vec<NewJob> =
        (0..20_000).map(|i| NewJob::new("charge-card", "critical", vec![]).due_at(T0 - 100_000 + i)).collect();
    jobs.extend((0..5).map(|i| NewJob::new("send-email", "critical", vec![]).due_at(T0 - 10 + i)));
    fx.store.enqueue_many(&jobs).unwrap();
    fx.store.pause(ADMIN, PauseKind::WireName, "charge-card", None, false).unwrap();
    let claimed = fx.claim_as(WORKER, "critical", 3, &policy(3, Duration::from_secs(1)));
    assert_eq!(claimed.len(), 3);
    assert!(claimed.iter().all(|j| j.wire_name == "send-email"), "only the unpaused wire name");

    // The walk the claim made, step by step, on the same statements.
    const NEXT: usize = 0;
    const DUE: usize = 1;
    let (names, stats) = fx
        .store
        .raw_statements(&[CLAIM_NEXT_WIRE_NAME_SQL, CLAIM_WIRE_NAME_SQL], |s| {
            let mut names = Vec::new();
            let mut after = String::new();
            loop {
                let rows = s.query(NEXT, &["critical".into(), (&after).into()], 1).unwrap();
                let Some(row) = rows.first() else { break };
                let name = row[0].as_str().to_string();
                if name != "charge-card" {
                    s.query(DUE, &["critical".into(), (&name).into(), T0.into()], 3).unwrap();
                }
                names.push(name.clone());
                after = name;
            }
            names
        })
        .unwrap();
    assert_eq!(names, ["charge-card", "send-email"]);
    for stat in &stats {
        assert_eq!(stat.fullscan_steps, 0);
        assert_eq!(stat.sorts, 0);
    }
    let steps = stats[NEXT].vm_steps + stats[DUE].vm_steps;
    assert!(steps < 400, "a claim around 20,000 paused jobs ran {steps} VM steps: it walks the paused backlog");
}

both_backends! {
    fn pausing_an_unknown_name_is_refused_quoting_it_unless_forced() {
        let fx = Fixture::new();
        fx.enqueue("charge-card", "critical");
        let before = table_dump(&fx.store);
        let err = fx.store.pause(ADMIN, PauseKind::Queue, "critcal", None, false).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));
        assert!(err.to_string().contains("unknown queue 'critcal'") && err.to_string().contains("set `force` to pause it"), "{err}");
        let err = fx.store.pause(ADMIN, PauseKind::WireName, "charge-crd", None, false).unwrap_err();
        assert!(err.to_string().contains("unknown wire-name 'charge-crd'"), "{err}");
        assert_eq!(table_dump(&fx.store), before, "a refused pause changed the store");
        // Ahead of time, on purpose.
        fx.store.pause(ADMIN, PauseKind::Queue, "bulk-import", None, true).unwrap();
        assert_eq!(fx.store.pauses().unwrap()[0].name, "bulk-import");
    }
}

/// Whether a wire name is known is a scan of every job when it is not (the typo case: 160-175 ms
/// at 1,000,000 jobs). That scan runs in a read transaction ahead of the write, so a mistyped
/// `bw pause` or `bw limit` never holds SQLite's one write lock, which every claim, completion
/// and heartbeat waits for: it is refused while another connection holds the lock. A known name
/// waits for the lock as every write does.
#[test]
fn a_mistyped_pause_or_limit_is_refused_without_taking_the_write_lock() {
    let fx = Fixture::new();
    fx.enqueue("charge-card", "critical");
    let holder = RawConnection::open(fx.path()).unwrap();
    holder.batch("BEGIN IMMEDIATE").unwrap();
    fx.store.set_busy_timeout(Duration::from_millis(50)).unwrap();
    let two = LimitSpec { concurrency: Some(2), rate: None };
    for kind in [PauseKind::WireName, PauseKind::Queue] {
        let err = fx.store.pause(ADMIN, kind, "charge-crd", None, false).unwrap_err();
        assert!(err.to_string().contains(&format!("unknown {kind} 'charge-crd'")), "{err:?}");
        let err = fx.store.set_limit(ADMIN, kind, "charge-crd", &two, None, false).unwrap_err();
        assert!(err.to_string().contains(&format!("unknown {kind} 'charge-crd'")), "{err:?}");
    }
    let err = fx.store.pause(ADMIN, PauseKind::WireName, "charge-card", None, false).unwrap_err();
    assert!(matches!(err, Error::Busy), "{err:?}");
    let err = fx.store.pause(ADMIN, PauseKind::WireName, "charge-crd", None, true).unwrap_err();
    assert!(matches!(err, Error::Busy), "forced: {err:?}");
    holder.batch("ROLLBACK").unwrap();
    fx.store.pause(ADMIN, PauseKind::WireName, "charge-card", None, false).unwrap();
    assert_eq!(fx.store.pauses().unwrap().len(), 1);
}

both_backends! {
    // Issue 18: SQLite checked a past expiry before the permission (InvalidInput, exit 2) and
    // PostgreSQL the permission first (PermissionDenied, exit 1). One order now, both backends:
    // permission, then the input; the plan of a pause too.
    fn a_pause_is_refused_for_its_permission_before_its_input_on_both_backends() {
        let fx = Fixture::new();
        fx.enqueue("charge-card", "critical");
        let denied = |r: backwave::Result<()>| matches!(r, Err(Error::PermissionDenied { .. }));
        let pause = |actor, name, until, force| fx.store.pause(actor, PauseKind::Queue, name, until, force).map(|_| ());
        let plan = |actor, name| fx.store.plan_pause(actor, PauseKind::Queue, name, false).map(|_| ());
        assert!(denied(pause(STRANGER, "critical", Some(T0 - 1), false)), "past expiry");
        assert!(denied(pause(STRANGER, "critcal", None, false)), "unknown name");
        assert!(denied(pause(STRANGER, "bad\nname", None, true)), "control character");
        assert!(denied(plan(STRANGER, "critcal")), "plan");
        let bad = |r: backwave::Result<()>| matches!(r, Err(Error::InvalidInput(_)));
        assert!(bad(pause(ADMIN, "critical", Some(T0 - 1), false)), "past expiry");
        assert!(bad(plan(ADMIN, "critcal")), "unknown name");
        assert!(fx.store.pauses().unwrap().is_empty());
        // A schedule's pause keeps the same order.
        let nightly = backwave::schedule::Schedule::new("nightly", "0 2 * * *", "export", "bulk", "{}");
        fx.store.declare_schedules("app", &[nightly]).unwrap();
        let pause_schedule = |actor, name, until| fx.store.pause_schedule(actor, name, until).map(|_| ());
        assert!(denied(pause_schedule(STRANGER, "nightly", Some(T0 - 1))), "schedule, past expiry");
        assert!(denied(pause_schedule(STRANGER, "nosuch", None)), "schedule, unknown name");
        assert!(bad(pause_schedule(ADMIN, "nightly", Some(T0 - 1))), "schedule, past expiry");
        assert!(fx.store.schedule_row("nightly").unwrap().unwrap().paused_until.is_none());
    }
}

both_backends! {
    fn pausing_needs_operate_and_pausing_again_replaces_the_expiry() {
        let fx = Fixture::new();
        fx.enqueue("charge-card", "critical");
        let err = fx.store.pause(STRANGER, PauseKind::Queue, "critical", None, false).unwrap_err();
        assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
        assert!(matches!(fx.store.resume(STRANGER, PauseKind::Queue, "critical"), Err(Error::PermissionDenied { .. })));
        assert!(fx.store.pauses().unwrap().is_empty());
        fx.store.pause(ADMIN, PauseKind::Queue, "critical", Some(T0 + 1_000), false).unwrap();
        let again = fx.store.pause(ADMIN, PauseKind::Queue, "critical", None, false).unwrap();
        assert_eq!(again, PauseResult::Extended { previous_until: Some(T0 + 1_000) });
        let pauses = fx.store.pauses().unwrap();
        assert_eq!(pauses.len(), 1);
        assert_eq!((pauses[0].until, pauses[0].paused_by.as_str(), pauses[0].paused_at), (None, ADMIN, T0));
        assert!(fx.store.pause(ADMIN, PauseKind::Queue, "critical", Some(T0), false).is_err(), "an expiry in the past");
    }
}

// ---- run now -----------------------------------------------------------------------------------

both_backends! {
    fn run_now_makes_a_scheduled_retry_due_without_touching_its_attempt_or_budget() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        let p = policy(5, Duration::from_secs(3600));
        let job = fx.claim_one("q", &p);
        fx.report(&job, failed("boom"));
        let waiting = fx.job(id);
        assert_eq!((waiting.state, waiting.attempt), (JobState::Scheduled, 1));
        assert_eq!(waiting.due_at, T0 + 3_600_000);
        let dead = fx.enqueue("w", "other");
        fx.store.cancel(ADMIN, &[dead]).unwrap();
        let missing = backwave::JobId::new();

        let results = fx.store.run_now(ADMIN, &[id, dead, missing]).unwrap();
        assert_eq!(
            results,
            [
                RunNowResult::Due { was_due_at: T0 + 3_600_000 },
                RunNowResult::NotScheduled { state: JobState::Cancelled },
                RunNowResult::NotFound
            ]
        );
        let now_due = fx.job(id);
        assert_eq!(now_due.due_at, T0);
        assert_eq!((now_due.attempt, now_due.max_attempts, now_due.delay_table), (1, Some(5), waiting.delay_table));
        assert_eq!(fx.store.history(id).unwrap().len(), fx.store.history(id).unwrap().len());
        let audit = audit_actions(&fx.store);
        assert!(audit.contains(&(ADMIN.into(), "run-now".into(), Some(format!("due_at was {}", T0 + 3_600_000)))));
        // The next claim takes it as attempt 2 of 5.
        assert_eq!(fx.claim_one("q", &p).attempt, 2);
    }
}

both_backends! {
    fn run_now_of_a_running_job_changes_nothing() {
        let fx = Fixture::new();
        let id = fx.enqueue("w", "q");
        fx.claim_one("q", &policy(3, Duration::from_secs(1)));
        let before = table_dump(&fx.store);
        assert_eq!(fx.store.run_now(ADMIN, &[id]).unwrap(), [RunNowResult::NotScheduled { state: JobState::Running }]);
        assert_eq!(table_dump(&fx.store), before);
        assert!(matches!(fx.store.run_now(STRANGER, &[id]), Err(Error::PermissionDenied { .. })));
    }
}

both_backends! {
    fn bulk_run_now_plans_exactly_and_makes_only_later_jobs_due() {
        let fx = Fixture::new();
        let mut jobs: Vec<NewJob> = (0..1_200).map(|i| NewJob::new("w", "q", vec![]).due_at(T0 + 1_000 + i)).collect();
        jobs.extend((0..3).map(|_| NewJob::new("w", "q", vec![]).due_at(T0 - 5)));
        jobs.push(NewJob::new("w", "elsewhere", vec![]).due_at(T0 + 99));
        fx.store.enqueue_many(&jobs).unwrap();
        let filter = JobFilter { queue: Some("q".into()), ..Default::default() };
        let plan = fx.store.plan_run_now(ADMIN, &filter).unwrap();
        assert_eq!((plan.matching, plan.would_run_now, plan.already_due), (1_203, 1_200, 3));
        let mut seen = Vec::new();
        let n = fx.store.run_now_matching(ADMIN, &filter, |p| seen.push(p)).unwrap();
        assert_eq!(n, 1_200);
        assert_eq!(seen.iter().map(|p| p.done).collect::<Vec<_>>(), [500, 1_000, 1_200], "batches of 500");
        let after = fx.store.plan_run_now(ADMIN, &filter).unwrap();
        assert_eq!((after.would_run_now, after.already_due), (0, 1_203));
        assert_eq!(fx.store.plan_run_now(ADMIN, &JobFilter::default()).unwrap().would_run_now, 1, "the other queue untouched");
        fx.assert_sound();
    }
}

// ---- bulk cancel -------------------------------------------------------------------------------

both_backends! {
    fn bulk_cancel_plans_exactly_then_cancels_scheduled_and_asks_running_to_stop() {
        let fx = Fixture::new();
        let mut jobs: Vec<NewJob> = (0..700).map(|_| NewJob::new("charge-card", "q", vec![])).collect();
        jobs.extend((0..4).map(|_| NewJob::new("send-email", "q", vec![])));
        fx.store.enqueue_many(&jobs).unwrap();
        let running = fx.claim_as(WORKER, "q", 2, &policy(3, Duration::from_secs(1)));
        assert!(running.iter().all(|j| j.wire_name == "charge-card"));
        fx.store.cancel(ADMIN, &[running[0].id]).unwrap();
        let filter = JobFilter { wire_name: Some("charge-card".into()), ..Default::default() };
        let plan = fx.store.plan_cancel(ADMIN, &filter).unwrap();
        assert_eq!((plan.matching, plan.would_cancel, plan.would_ask_to_stop, plan.already_asked), (700, 698, 1, 1));
        let mut batches = 0;
        let done = fx.store.cancel_matching(ADMIN, &filter, |_| batches += 1).unwrap();
        assert_eq!((done.cancelled, done.asked_to_stop), (698, 1));
        assert_eq!(batches, 2);
        let counts = fx.store.counts().unwrap();
        assert_eq!(counts.total(JobState::Cancelled), 698);
        assert_eq!(counts.total(JobState::Scheduled), 4, "the other wire name is untouched");
        assert_eq!(counts.total(JobState::Running), 2, "running jobs end Cancelled when their handler stops");
        let after = fx.store.plan_cancel(ADMIN, &filter).unwrap();
        assert_eq!((after.would_cancel, after.would_ask_to_stop, after.already_asked), (0, 0, 2));
        // Each cancelled job has its own log entry with the actor.
        let h =
            fx.store.history(fx.store.list_jobs(&JobFilter::state(JobState::Cancelled), 1, 0).unwrap().jobs[0].id).unwrap();
        assert_eq!(h.last().unwrap().actor.as_deref(), Some(ADMIN));
        assert!(matches!(fx.store.cancel_matching(STRANGER, &filter, |_| {}), Err(Error::PermissionDenied { .. })));
        fx.assert_sound();
    }
}

// ---- payload repair ----------------------------------------------------------------------------

fn quarantine_undecodable(fx: &Fixture) -> backwave::JobId {
    let id = fx.store.enqueue(&NewJob::new("resize", "q", vec![0xff, 0x00])).unwrap();
    let job = fx.claim_one("q", &policy(3, Duration::from_secs(1)));
    fx.report(
        &job,
        backwave::store::Outcome::Quarantined {
            reason: backwave::QuarantineReason::UndecodablePayload,
            cause: "payload does not decode".into(),
        },
    );
    id
}

both_backends! {
    fn a_payload_repair_keeps_the_old_payload_in_the_audit_and_can_requeue_in_the_same_transaction() {
        let fx = Fixture::new();
        let id = quarantine_undecodable(&fx);
        let edit = fx.store.edit_payload(ADMIN, id, br#"{"width":640}"#, true).unwrap();
        assert_eq!((edit.from, edit.old_bytes, edit.new_bytes, edit.requeued), (JobState::Quarantined, 2, 13, true));
        let job = fx.job(id);
        assert_eq!(
            (job.state, job.attempt, job.payload.as_slice()),
            (JobState::Scheduled, 0, br#"{"width":640}"#.as_slice())
        );
        let audit = fx.store.audit_entries(0, 100).unwrap();
        let entry = audit.iter().find(|e| e.action == "edit-payload").expect("audited");
        assert_eq!(entry.job_id, Some(id));
        let detail: serde_json::Value = serde_json::from_str(entry.detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail["old_payload_hex"], "ff00", "the old payload, not UTF-8, is kept whole");
        let last = fx.store.history(id).unwrap().pop().unwrap();
        assert_eq!(
            (last.from, last.to, last.actor.as_deref()),
            (Some(JobState::Quarantined), JobState::Scheduled, Some(ADMIN))
        );
    }
}

both_backends! {
    fn a_payload_edit_of_a_succeeded_job_or_with_malformed_json_is_refused_and_changes_nothing() {
        let fx = Fixture::new();
        let q = quarantine_undecodable(&fx);
        let ok = fx.enqueue("w", "ok");
        let job = fx.claim_one("ok", &policy(3, Duration::from_secs(1)));
        fx.report(&job, backwave::store::Outcome::Succeeded);
        let before = table_dump(&fx.store);
        let audit_before = fx.store.audit_entries(0, 100).unwrap().len();

        let err = fx.store.edit_payload(ADMIN, ok, b"{}", false).unwrap_err();
        assert!(matches!(err, Error::WrongState { state: JobState::Succeeded, .. }), "{err}");
        assert!(err.to_string().contains(&ok.to_string()), "{err}");
        let err = fx.store.edit_payload(ADMIN, q, br#"{"width": 64"#, true).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));
        assert!(err.to_string().contains(r#"'{"width": 64'"#) && err.to_string().contains("not valid JSON"), "{err}");
        assert!(matches!(fx.store.edit_payload(STRANGER, q, b"{}", false), Err(Error::PermissionDenied { .. })));

        assert_eq!(table_dump(&fx.store), before);
        assert_eq!(fx.store.audit_entries(0, 100).unwrap().len(), audit_before);
    }
}

// ---- migration ---------------------------------------------------------------------------------

fn v1_store(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("v1.db");
    let conn = backwave::store::RawConnection::open(&path).unwrap();
    conn.batch(include_str!("../../fixtures/store-v1.sql")).unwrap();
    conn.batch("PRAGMA journal_mode = WAL").unwrap();
    drop(conn);
    path
}

const V1_T: i64 = 1_796_040_000_000;

#[test]
fn opening_a_version_1_store_for_writing_migrates_it_in_place_keeping_every_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_store(&dir);
    let jobs_before: Vec<String> = backwave::store::RawConnection::open(&path)
        .unwrap()
        .query("SELECT * FROM jobs ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join("|"))
        .collect();
    let store = Store::open(&path).unwrap().with_clock(Clock::manual(V1_T));
    assert_eq!(store.schema_version(), SCHEMA_VERSION);
    assert_eq!(store.pragma("user_version").unwrap().as_i64(), SCHEMA_VERSION);
    // Every column a version-1 job had, as it was; the columns added since (version 3's unique
    // job columns, version 15's trace context) are NULL.
    let columns = jobs_before.first().map_or(0, |row| row.split('|').count());
    let rows_after = store.raw_query("SELECT * FROM jobs ORDER BY id", &[]).unwrap();
    let jobs_after: Vec<String> = rows_after
        .iter()
        .map(|row| row[..columns].iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join("|"))
        .collect();
    assert_eq!(jobs_after, jobs_before, "the migration is additive");
    // ... but for version 16's priority, which every job gains at its default (0); every other
    // column added since is NULL.
    assert!(!rows_after.is_empty());
    for row in &rows_after {
        let added = &row[columns..];
        let zeros = added.iter().filter(|v| **v == backwave::store::RawValue::Integer(0)).count();
        let nulls = added.iter().filter(|v| **v == backwave::store::RawValue::Null).count();
        assert_eq!((zeros, nulls), (1, added.len() - 1), "{row:?}");
    }
    assert!(store.list_jobs(&Default::default(), 100, 0).unwrap().jobs.iter().all(|j| j.priority == 0));
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    super::assert_counts_exact(&store);
    // The new tables work at once: pause the queue of the due job, then claim.
    store.pause("alice", PauseKind::WireName, "charge-card", None, false).unwrap();
    let p = policy(3, Duration::from_secs(1));
    let queues = ["critical".to_string()];
    let req = backwave::store::ClaimRequest {
        worker_id: WORKER,
        group: "g",
        queues: &queues,
        limit: 5,
        lease: super::LEASE,
        policy: &p,
        handler_policies: &[],
    };
    assert!(store.claim(&req).unwrap().is_empty(), "the one due job is charge-card, paused");
    store.resume("alice", PauseKind::WireName, "charge-card").unwrap();
    assert_eq!(store.claim(&req).unwrap().len(), 1);
    // Version 5's tables too: a limit, and a quiet worker's columns.
    let spec = backwave::store::LimitSpec { concurrency: Some(1), rate: None };
    store.set_limit("alice", PauseKind::Queue, "critical", &spec, None, true).unwrap();
    assert_eq!(store.limits().unwrap()[0].running, 1);
    assert!(store.worker_states().is_ok());
    // Opening again finds it migrated and changes nothing.
    drop(store);
    assert_eq!(Store::open(&path).unwrap().schema_version(), SCHEMA_VERSION);
}

/// Migration 11 edits the id CHECK inside the table's text: the text it looks for must be the one
/// every earlier store has, or the step would silently keep the old CHECK. A migrated store's
/// schema is a fresh store's, object by object and word for word.
#[test]
fn a_migrated_version_1_store_has_the_schema_of_a_fresh_store() {
    let dir = tempfile::tempdir().unwrap();
    let migrated = Store::open(v1_store(&dir)).unwrap();
    let fresh = Store::create(dir.path().join("fresh.db")).unwrap();
    let schema_of = |store: &Store| -> Vec<(String, String, String)> {
        store
            .raw_query("SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name", &[])
            .unwrap()
            .iter()
            .map(|row| (row[0].as_str().to_string(), row[1].as_str().to_string(), row[2].as_str().to_string()))
            .collect()
    };
    let schema = schema_of(&fresh);
    assert_eq!(schema_of(&migrated), schema);
    let sql_of = |name: &str| schema.iter().find(|(_, n, _)| n == name).map(|(_, _, sql)| sql.as_str());
    let jobs = sql_of("jobs").expect("the jobs table");
    assert!(!jobs.contains("NOT id GLOB") && jobs.contains("AND id GLOB '[0-9a-f-]"), "version 11's id CHECK: {jobs}");
    assert!(sql_of("jobs_insert").is_some());
    assert_eq!(
        (sql_of("jobs_count_insert"), sql_of("jobs_payload_limit_insert")),
        (None, None),
        "folded into jobs_insert"
    );
}

/// Where the unprivileged re-run of the read-only migration test finds its store.
const V1_CHILD_ENV: &str = "BW_STORE_TEST_V1_READ_ONLY_PATH";

/// What a version-1 store opened read-only does: it is read as it is, shows no pauses, and
/// refuses writes; nothing in the file changes.
fn check_v1_read_only(path: &std::path::Path) {
    let store = Store::open(path).unwrap();
    assert!(store.is_read_only(), "{} should open read-only", path.display());
    assert_eq!(store.schema_version(), 1);
    assert!(store.pauses().unwrap().is_empty());
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 2);
    let err = store.pause("alice", PauseKind::Queue, "critical", None, false).unwrap_err();
    assert!(matches!(err, Error::ReadOnly { .. }), "{err}");
}

#[test]
fn a_version_1_store_opened_read_only_is_read_as_it_is_and_not_migrated() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if let Some(path) = std::env::var_os(V1_CHILD_ENV) {
        check_v1_read_only(std::path::Path::new(&path));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = v1_store(&dir);
    let before = std::fs::read(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    // File permissions do not bind root: there the test runs itself again as `nobody`.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "store::incident::a_version_1_store_opened_read_only_is_read_as_it_is_and_not_migrated"])
            .arg("--nocapture")
            .env(V1_CHILD_ENV, &path)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
    } else {
        check_v1_read_only(&path);
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before, "a read-only open changed the file");
}

// ---- issue 19: the plan's set, the permission first ----------------------------------------------

both_backends! {
    fn a_bulk_cancel_acts_on_the_set_its_plan_counted_and_counts_what_arrived_after() {
        // The dashboard's filter said 65, the plan 68, the cancel did 69: jobs enqueued after
        // the plan were cancelled too, though nobody had confirmed them.
        let fx = Fixture::new();
        let jobs: Vec<NewJob> = (0..3).map(|_| NewJob::new("send-email", "q", vec![])).collect();
        fx.store.enqueue_many(&jobs).unwrap();
        let filter = JobFilter { wire_name: Some("send-email".into()), ..Default::default() };
        let plan = fx.store.plan_cancel(ADMIN, &filter).unwrap();
        assert_eq!(plan.would_cancel, 3);
        fx.clock.advance(Duration::from_secs(1));
        let late = fx.store.enqueue_many(&[NewJob::new("send-email", "q", vec![]), NewJob::new("send-email", "q", vec![])]).unwrap();
        let done = fx.store.cancel_planned(ADMIN, &plan, |_| {}).unwrap();
        assert_eq!((done.cancelled, done.asked_to_stop, done.arrived_after_plan), (3, 0, 2));
        for id in late {
            assert_eq!(fx.job(id).state, JobState::Scheduled, "a job the plan did not count was cancelled");
        }
        fx.assert_sound();
    }
}

both_backends! {
    fn a_bulk_requeue_and_run_now_act_on_the_set_their_plan_counted() {
        let fx = Fixture::new();
        let once = policy(1, Duration::from_secs(1));
        for _ in 0..2 {
            fx.enqueue("w", "q");
            let job = fx.claim_one("q", &once);
            fx.report(&job, failed("boom"));
        }
        let dead = JobFilter::state(JobState::DeadLettered);
        let plan = fx.store.plan_requeue(ADMIN, &dead).unwrap();
        assert_eq!(plan.matching, 2);
        // A third dead-letters after the plan.
        fx.clock.advance(Duration::from_secs(1));
        let late = fx.enqueue("w", "q");
        let job = fx.claim_one("q", &once);
        fx.report(&job, failed("boom"));
        let done = fx.store.requeue_planned(ADMIN, &plan, true, |_| {}).unwrap();
        assert_eq!((done.done, done.arrived_after_plan), (2, 1));
        assert_eq!(fx.job(late).state, JobState::DeadLettered);

        // Run now: jobs enqueued after its plan stay due later.
        let due_later = |n| (0..n).map(|_| NewJob::new("w", "r", vec![]).due_at(T0 + 3_600_000)).collect::<Vec<_>>();
        fx.store.enqueue_many(&due_later(2)).unwrap();
        let queue_r = JobFilter { queue: Some("r".into()), ..Default::default() };
        let plan = fx.store.plan_run_now(ADMIN, &queue_r).unwrap();
        fx.clock.advance(Duration::from_secs(1));
        let late = fx.store.enqueue_many(&due_later(1)).unwrap();
        let done = fx.store.run_now_planned(ADMIN, &plan, |_| {}).unwrap();
        assert_eq!((done.done, done.arrived_after_plan), (2, 1));
        assert!(fx.job(late[0]).due_at > fx.store.now(), "a job the plan did not count was made due");
        fx.assert_sound();
    }
}

both_backends! {
    fn a_bulk_plan_refuses_an_actor_without_operate_before_counting() {
        let fx = Fixture::new();
        fx.enqueue("w", "q");
        let all = JobFilter::default();
        assert!(matches!(fx.store.plan_requeue(STRANGER, &all), Err(Error::PermissionDenied { .. })));
        assert!(matches!(fx.store.plan_cancel(STRANGER, &all), Err(Error::PermissionDenied { .. })));
        assert!(matches!(fx.store.plan_run_now(STRANGER, &all), Err(Error::PermissionDenied { .. })));
        assert!(fx.store.plan_cancel(ADMIN, &all).is_ok());
    }
}

both_backends! {
    fn purge_by_id_deletes_only_terminal_jobs_and_audits_each() {
        let fx = Fixture::new();
        let once = policy(1, Duration::from_secs(1));
        let dead = fx.enqueue("w", "q");
        let job = fx.claim_one("q", &once);
        fx.report(&job, failed("boom"));
        let waiting = fx.enqueue("w", "q");
        let missing: backwave::JobId = "a0000099-0000-7000-8000-000000000099".parse().unwrap();
        let results = fx.store.purge_jobs(ADMIN, &[dead, waiting, missing]).unwrap();
        use backwave::store::PurgeResult;
        assert_eq!(
            results,
            [
                PurgeResult::Deleted { state: JobState::DeadLettered },
                PurgeResult::NotTerminal { state: JobState::Scheduled },
                PurgeResult::NotFound
            ]
        );
        assert!(fx.store.job(dead).unwrap().is_none());
        assert!(fx.store.history(dead).unwrap().is_empty());
        assert_eq!(fx.job(waiting).state, JobState::Scheduled);
        let audit = fx.store.audit_entries(0, 10).unwrap();
        assert_eq!(audit.iter().filter(|e| e.action == "purge" && e.job_id == Some(dead)).count(), 1);
        assert!(matches!(fx.store.purge_jobs(STRANGER, &[waiting]), Err(Error::PermissionDenied { .. })));
        fx.assert_sound();
    }
}

both_backends! {
    // Cancel and run-now decide each id once above both dialects (store/ops/jobs.rs): an id
    // named twice is decided on what the first did, and each change is logged or audited once,
    // under the action names the audit trail has always stored.
    fn an_id_named_twice_is_decided_on_what_the_first_did_on_both_backends() {
        use backwave::store::CancelResult;
        let fx = Fixture::new();
        let later = fx.store.enqueue(&NewJob::new("charge-card", "critical", vec![]).due_at(T0 + 60_000)).unwrap();
        let scheduled = fx.enqueue("charge-card", "default");
        let running = fx.enqueue("charge-card", "busy");
        fx.claim_one("busy", &policy(3, Duration::from_secs(1)));

        let ran = fx.store.run_now(ADMIN, &[later, later]).unwrap();
        assert_eq!(ran, [RunNowResult::Due { was_due_at: T0 + 60_000 }, RunNowResult::Due { was_due_at: T0 }]);
        assert_eq!(fx.job(later).due_at, T0);

        let cancelled = fx.store.cancel(ADMIN, &[scheduled, running, scheduled, running]).unwrap();
        assert_eq!(
            cancelled,
            [
                CancelResult::Cancelled,
                CancelResult::CancelRequested,
                CancelResult::NotCancellable { state: JobState::Cancelled },
                CancelResult::CancelRequested,
            ]
        );
        let audit: Vec<(String, String)> = audit_actions(&fx.store)
            .into_iter()
            .filter(|(_, action, _)| action != "grant")
            .map(|(_, action, detail)| (action, detail.unwrap_or_default()))
            .collect();
        assert_eq!(
            audit,
            [("run-now".to_string(), format!("due_at was {}", T0 + 60_000)), ("cancel-requested".into(), "attempt 1".into())]
        );
        let log = fx.store.history(scheduled).unwrap();
        assert_eq!(log.iter().filter(|t| t.to == JobState::Cancelled).count(), 1, "{log:?}");
        // The request to stop is honoured when the handler stops: the same policy ends it.
        let job = fx.job(running);
        fx.report(&job, backwave::store::Outcome::Cancelled);
        assert_eq!(fx.job(running).state, JobState::Cancelled);
    }
}
