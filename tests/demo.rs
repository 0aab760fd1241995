//! The fixtures, the large-store generator and `bw demo`, met the way a user meets them: the
//! fixture loaded through the library, `bw generate` and `bw demo` run as the real binary.

use std::collections::BTreeMap;

use backwave::{cause_fingerprint, JobState, Store};

const HOSTILE_SQL: &str = include_str!("../fixtures/hostile.sql");

/// A fresh store at a temporary path with the hostile fixture loaded, as the fixture's header
/// tells other tests to do it.
fn hostile_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("hostile.db")).unwrap();
    store.connection().execute_batch(HOSTILE_SQL).unwrap();
    (dir, store)
}

#[test]
fn hostile_fixture_loads_with_every_state_and_a_clean_store() {
    let (_dir, store) = hostile_store();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());

    let counts = store.counts().unwrap();
    let expected = [
        (JobState::Scheduled, 4),
        (JobState::Running, 3),
        (JobState::Succeeded, 9),
        (JobState::DeadLettered, 10),
        (JobState::Quarantined, 5),
        (JobState::Cancelled, 2),
    ];
    for (state, n) in expected {
        assert_eq!(counts.total(state), n, "jobs in {state}");
    }

    // The triggers' job_counts equal a real count.
    let conn = store.connection();
    let real: BTreeMap<(String, String), i64> = conn
        .prepare("SELECT queue, state, count(*) FROM jobs GROUP BY 1, 2")
        .unwrap()
        .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let kept: BTreeMap<(String, String), i64> = conn
        .prepare("SELECT queue, state, n FROM job_counts WHERE n > 0")
        .unwrap()
        .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kept, real);

    // Both quarantine reasons, operator requeues and cancels with their actor, captured and
    // not-captured failure detail, a payload that is not UTF-8.
    let one = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(one("SELECT count(DISTINCT quarantine_reason) FROM jobs"), 2);
    assert!(one("SELECT count(*) FROM transitions WHERE to_state = 'scheduled' AND actor IS NOT NULL") >= 3);
    assert!(one("SELECT count(*) FROM transitions WHERE to_state = 'cancelled' AND actor IS NOT NULL") >= 2);
    assert!(one("SELECT count(*) FROM transitions WHERE detail_status = 'not-captured'") >= 3);
    assert!(one("SELECT count(*) FROM transitions WHERE detail_status = 'captured'") >= 10);
    assert!(one("SELECT count(*) FROM jobs WHERE length(terminal_cause) > 4096") >= 1);
    assert!(one("SELECT count(*) FROM jobs WHERE terminal_cause = ''") >= 1);
    let payloads: Vec<Vec<u8>> = conn
        .prepare("SELECT payload FROM jobs")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(payloads.iter().any(|p| std::str::from_utf8(p).is_err()), "a payload that is not UTF-8");
    assert!(payloads.iter().any(|p| p.contains(&0x1b)), "a payload with an escape sequence");
}

#[test]
fn hostile_fixture_is_consistent_with_what_the_library_writes() {
    let (_dir, store) = hostile_store();
    let conn = store.connection();
    // Each terminal job's fingerprint is the library's, so cause groups here are real groups.
    let causes: Vec<(String, String, String)> = conn
        .prepare("SELECT id, terminal_cause, cause_fingerprint FROM jobs WHERE terminal_cause IS NOT NULL")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (id, cause, fingerprint) in &causes {
        assert_eq!(fingerprint, &cause_fingerprint(cause), "fingerprint of job {id}");
    }
    // The log follows time, and each job's last entry lands where the job is.
    let out_of_order: i64 = conn
        .query_row(
            "SELECT count(*) FROM transitions a JOIN transitions b ON b.seq = a.seq + 1 WHERE b.at < a.at",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(out_of_order, 0);
    for job in store.list_jobs(&Default::default(), 100, 0).unwrap().jobs {
        let history = store.history(job.id).unwrap();
        let last = history.last().unwrap();
        assert_eq!(last.to, job.state, "last log entry of {}", job.id);
        assert_eq!(last.attempt, job.attempt, "attempt of {}", job.id);
        assert_eq!(history[0].from, None, "first entry of {} creates it", job.id);
    }
}
