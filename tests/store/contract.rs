//! `schema.sql` is the contract: a store built by the plain `sqlite3` shell from it, with jobs
//! written by hand the way another language's worker would, is read and run by the library;
//! and what the library writes reads back in the shell.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use backwave::store::{JobFilter, Outcome};
use backwave::{JobId, JobState, Store};

use super::{Fixture, T0};
use crate::backend::both_backends;

fn sqlite3(db: &Path, input: &str) -> String {
    let mut child = Command::new(super::programs::sqlite3())
        .arg("-bail")
        .arg(db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the sqlite3 shell");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "sqlite3 failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const HAND_WRITTEN: &str = r#"
INSERT INTO jobs (id, wire_name, queue, labels, payload, due_at, created_at, updated_at)
VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 'send-email', 'critical',
        '{"tenant":"acme","priority":3,"beta":true}', '{"to":"ops@example.com"}',
        1767225600000, 1767225600000, 1767225600000);
INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 1767225600000, NULL, 'scheduled', 0);
INSERT INTO jobs (id, wire_name, queue, payload, state, attempt, max_attempts, due_at, terminal_cause,
                  created_at, updated_at, finished_at)
VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11', 'resize', 'bulk', X'00ff10', 'dead-lettered', 3, 3,
        1767225000000, 'gateway timeout (attempt 3)', 1767225000000, 1767225500000, 1767225500000);
"#;

#[test]
fn a_store_built_by_the_sqlite3_shell_is_read_and_run_by_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shell.db");
    let schema = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.sql")).unwrap();
    assert_eq!(schema, backwave::store::SCHEMA_SQL, "the library embeds schema.sql verbatim");
    sqlite3(&db, &schema);
    sqlite3(&db, HAND_WRITTEN);

    let clock = backwave::Clock::manual(T0);
    let store = Store::open(&db).unwrap().with_clock(clock.clone());
    let email: JobId = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap();
    let job = store.job(email).unwrap().unwrap();
    assert_eq!(
        (job.wire_name.as_str(), job.queue.as_str(), job.state),
        ("send-email", "critical", JobState::Scheduled)
    );
    assert_eq!(job.payload, br#"{"to":"ops@example.com"}"#, "a TEXT payload reads as its bytes");
    let labels: Vec<(&str, &str)> = job.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        labels,
        [("beta", "true"), ("priority", "3"), ("tenant", "acme")],
        "non-string label values read as text"
    );
    assert_eq!((job.attempt, job.max_attempts, job.delay_table), (0, None, None));
    let dead = store.job("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b11".parse().unwrap()).unwrap().unwrap();
    assert_eq!((dead.state, dead.payload.as_slice()), (JobState::DeadLettered, &[0u8, 0xff, 0x10][..]));
    assert_eq!(dead.terminal_cause.as_deref(), Some("gateway timeout (attempt 3)"));
    // Counts came from the schema's triggers, not from the library.
    let counts = store.counts().unwrap();
    assert_eq!((counts.total(JobState::Scheduled), counts.total(JobState::DeadLettered)), (1, 1));
    assert_eq!(store.list_jobs(&JobFilter::state(JobState::DeadLettered), 10, 0).unwrap().total, 1);
    assert!(
        matches!(store.resolve_id("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b1"), Err(backwave::Error::AmbiguousId { .. })),
        "two jobs share the prefix"
    );
    assert_eq!(store.history(email).unwrap().len(), 1);

    // The library runs the hand-written job: claimed, failed once, retried by the default
    // policy's table (its jitter seed was left at 0), then succeeded.
    let fx_policy = backwave::RetryPolicy::default();
    let queues = ["critical".to_string()];
    let req = backwave::store::ClaimRequest {
        worker_id: super::WORKER,
        group: "g",
        queues: &queues,
        limit: 10,
        lease: Duration::from_secs(30),
        policy: &fx_policy,
        handler_policies: &[],
    };
    let claimed = store.claim(&req).unwrap();
    assert_eq!(claimed.len(), 1);
    let report = |outcome| {
        store
            .complete(&backwave::store::Completion {
                job_id: email,
                worker_id: super::WORKER.into(),
                attempt: store.job(email).unwrap().unwrap().attempt,
                outcome,
            })
            .unwrap()
    };
    report(super::failed("smtp down"));
    assert_eq!(store.job(email).unwrap().unwrap().due_at, T0 + 2_000);
    clock.advance(Duration::from_secs(2));
    store.claim(&req).unwrap();
    report(Outcome::Succeeded);
    assert_eq!(store.job(email).unwrap().unwrap().state, JobState::Succeeded);
    assert!(store.check_integrity().unwrap().is_empty());
    super::assert_counts_exact(&store);
    drop(store);

    // And the shell reads what the library wrote.
    let out = sqlite3(&db, "SELECT state, attempt, max_attempts FROM jobs WHERE queue = 'critical';\n");
    assert_eq!(out.trim(), "succeeded|2|10");
    let log = sqlite3(&db, "SELECT group_concat(to_state, ',') FROM (SELECT to_state FROM transitions WHERE job_id LIKE '0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10' ORDER BY seq);\n");
    assert_eq!(log.trim(), "scheduled,running,scheduled,running,succeeded");
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check; PRAGMA foreign_key_check;\n").trim(), "ok");
}

#[test]
fn the_schema_refuses_rows_that_break_the_contract() {
    // What the CHECKs guard is what the library relies on when it reads another program's rows.
    let fx = Fixture::new();
    let conn = &fx.store;
    let insert = |cols: &str, vals: &str| {
        conn.raw_execute(&format!("INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at{cols}) VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b99', 'w', 'q', 0, 0, 0{vals})"), &[])
    };
    assert!(insert(", state", ", 'dead'").is_err(), "an unknown state");
    assert!(insert(", labels", ", '[1,2]'").is_err(), "labels that are not an object");
    assert!(insert(", state", ", 'running'").is_err(), "running without a lease");
    assert!(insert(", state", ", 'succeeded'").is_err(), "terminal without a finish time");
    assert!(conn.raw_execute("INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at) VALUES ('0192F3A1-7C2E-7B1D-9F0A-2F1E5D8C4B99', 'w', 'q', 0, 0, 0)", &[]).is_err(), "upper-case ids");
    assert!(insert("", "").is_ok());
}

both_backends! {
    fn a_job_claimed_by_another_program_without_a_delay_table_retries_on_the_default_policy() {
        // Another language's worker claimed it and wrote no budget or table, then died. Waiting 0 s
        // would make a failing job spin; the default policy's 2 s is what the schema promises.
        let fx = Fixture::new();
        fx.store
            .raw_batch(
                "INSERT INTO jobs (id, wire_name, queue, state, attempt, due_at, lease_owner, lease_expires_at,
                                   created_at, updated_at)
                 VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10', 'w', 'q', 'running', 1, 0, 'other-worker',
                         1767225600000, 0, 0);",
            )
            .unwrap();
        fx.clock.advance(Duration::from_secs(1));
        assert_eq!(fx.store.reap_expired(10).unwrap(), 1);
        let job = fx.job("0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap());
        assert_eq!((job.state, job.attempt), (JobState::Scheduled, 1));
        assert_eq!(job.due_at, T0 + 1_000 + 2_000);
        fx.assert_sound();
    }
}

both_backends! {
    fn jobs_written_without_a_jitter_seed_still_get_their_own_jitter() {
        let fx = Fixture::new();
        for tail in ["10", "11"] {
            fx.store
                .raw_execute(
                    &format!(
                        "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
                         VALUES ('0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b{tail}', 'w', 'q', 0, 0, 0)"
                    ),
                    &[],
                )
                .unwrap();
        }
        let p = backwave::RetryPolicy::new(5, backwave::Backoff::exponential(Duration::from_secs(10)).jitter(0.5)).unwrap();
        let jobs = fx.claim_as(crate::store::WORKER, "q", 2, &p);
        assert_eq!(jobs.len(), 2);
        assert_ne!(jobs[0].delay_table, jobs[1].delay_table, "two jobs must not retry in lockstep");
    }
}

both_backends! {
    fn plain_text_filter_matches_id_wire_name_queue_labels_and_cause() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::backend::TestDb::new(dir.path());
        let store = backwave::Store::create(&db).unwrap();
        let a =
            store.enqueue(&backwave::NewJob::new("charge-card", "high", b"{}".to_vec()).label("tenant", "acme")).unwrap();
        let b = store.enqueue(&backwave::NewJob::new("send-email", "Low-Priority", b"{}".to_vec())).unwrap();
        let find = |text: &str| {
            let f = backwave::store::JobFilter { text: Some(text.into()), ..Default::default() };
            let mut ids: Vec<_> = store.list_jobs(&f, 10, 0).unwrap().jobs.into_iter().map(|j| j.id).collect();
            ids.sort();
            ids
        };
        assert_eq!(find("CHARGE"), vec![a], "wire name, case-insensitive");
        assert_eq!(find("low-prio"), vec![b], "queue");
        assert_eq!(find("acme"), vec![a], "label value");
        assert_eq!(find(&b.short()), vec![b], "id");
        assert_eq!(find("nothing-like-this"), Vec::<backwave::JobId>::new());
    }
}
