//! The fixtures, the large-store generator and `bw demo`, met the way a user meets them: the
//! fixture loaded through the library, `bw generate` and `bw demo` run as the real binary.

use crate::backend;
use crate::programs;
use crate::pty;
#[path = "demo/readme.rs"]
mod readme;
#[path = "demo/shop.rs"]
mod shop;
#[path = "demo/tty.rs"]
mod tty;

use std::collections::BTreeMap;

use backend::{both_backends, TestDb};
use backwave::store::{JobRow, TransitionRow};
use backwave::{cause_fingerprint, JobState, Store};

const HOSTILE_SQL: &str = include_str!("../fixtures/hostile.sql");

/// A fresh store at a temporary path with the hostile fixture loaded, as the fixture's header
/// tells other tests to do it.
fn hostile_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("hostile.db")).unwrap();
    store.raw_batch(HOSTILE_SQL).unwrap();
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
    let conn = &store;
    let counts = |sql: &str| -> BTreeMap<(String, String), i64> {
        conn.raw_query(sql, &[])
            .unwrap()
            .into_iter()
            .map(|r| ((r[0].as_str().to_string(), r[1].as_str().to_string()), r[2].as_i64()))
            .collect()
    };
    let real = counts("SELECT queue, state, count(*) FROM jobs GROUP BY 1, 2");
    let kept = counts("SELECT queue, state, n FROM job_counts WHERE n > 0");
    assert_eq!(kept, real);

    // Both quarantine reasons, operator requeues and cancels with their actor, captured and
    // not-captured failure detail, a payload that is not UTF-8.
    let one = |sql: &str| conn.raw_scalar(sql, &[]).unwrap().as_i64();
    assert_eq!(one("SELECT count(DISTINCT quarantine_reason) FROM jobs"), 2);
    assert!(one("SELECT count(*) FROM transitions WHERE to_state = 'scheduled' AND actor IS NOT NULL") >= 3);
    assert!(one("SELECT count(*) FROM transitions WHERE to_state = 'cancelled' AND actor IS NOT NULL") >= 2);
    assert!(one("SELECT count(*) FROM transitions WHERE detail_status = 'not-captured'") >= 3);
    assert!(one("SELECT count(*) FROM transitions WHERE detail_status = 'captured'") >= 10);
    assert!(one("SELECT count(*) FROM jobs WHERE length(terminal_cause) > 4096") >= 1);
    assert!(one("SELECT count(*) FROM jobs WHERE terminal_cause = ''") >= 1);
    let payloads: Vec<Vec<u8>> =
        conn.raw_query("SELECT payload FROM jobs", &[]).unwrap().iter().map(|r| r[0].as_bytes().to_vec()).collect();
    assert!(payloads.iter().any(|p| std::str::from_utf8(p).is_err()), "a payload that is not UTF-8");
    assert!(payloads.iter().any(|p| p.contains(&0x1b)), "a payload with an escape sequence");
}

#[test]
fn hostile_fixture_loads_with_the_sqlite3_shell_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shell.db");
    // The fixture header's command, from the crate root (CI installs the sqlite3 shell).
    programs::sqlite3();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("sqlite3 \"$DB\" < schema.sql && sqlite3 \"$DB\" < fixtures/hostile.sql")
        .env("DB", &db)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("sh");
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = Store::open(&db).unwrap();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    assert_eq!(store.counts().unwrap().total(JobState::DeadLettered), 10);
    assert_eq!(store.list_jobs(&Default::default(), 100, 0).unwrap().total, 33);
}

#[test]
fn hostile_fixture_is_consistent_with_what_the_library_writes() {
    let (_dir, store) = hostile_store();
    let conn = &store;
    // Each terminal job's fingerprint is the library's, so cause groups here are real groups.
    let causes: Vec<(String, String, String)> = conn
        .raw_query("SELECT id, terminal_cause, cause_fingerprint FROM jobs WHERE terminal_cause IS NOT NULL", &[])
        .unwrap()
        .into_iter()
        .map(|r| (r[0].as_str().to_string(), r[1].as_str().to_string(), r[2].as_str().to_string()))
        .collect();
    for (id, cause, fingerprint) in &causes {
        assert_eq!(fingerprint, &cause_fingerprint(cause), "fingerprint of job {id}");
    }
    // The log follows time, and each job's last entry lands where the job is.
    let out_of_order = conn
        .raw_scalar("SELECT count(*) FROM transitions a JOIN transitions b ON b.seq = a.seq + 1 WHERE b.at < a.at", &[])
        .unwrap()
        .as_i64();
    assert_eq!(out_of_order, 0);
    for job in store.list_jobs(&Default::default(), 100, 0).unwrap().jobs {
        let history = store.history(job.id).unwrap();
        let last = history.last().unwrap();
        assert_eq!(last.to, job.state, "last log entry of {}", job.id);
        assert_eq!(last.attempt, job.attempt, "attempt of {}", job.id);
        assert_eq!(history[0].from, None, "first entry of {} creates it", job.id);
    }
}

// ---------------------------------------------------------------------------------------------
// `bw generate`

const PINNED_NOW: &str = "2026-11-30T12:00:00Z";
const PINNED_NOW_MS: i64 = 1_796_040_000_000;

fn bw() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("bw").unwrap();
    cmd.env_remove("BW_DB").env("BW_NOW", PINNED_NOW).env("NO_COLOR", "1");
    cmd
}

fn query_i64(store: &Store, sql: &str) -> i64 {
    store.raw_scalar(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")).as_i64()
}

#[test]
fn generate_20000_jobs_makes_a_consistent_store_that_follows_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.db");
    let out = bw().arg("--db").arg(&db).args(["generate", "--jobs", "20000"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("done: 20,000 jobs") && stderr.contains("jobs/s"), "{stderr}");

    let store = Store::open(&db).unwrap();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new(), "integrity and foreign keys");
    let conn = &store;
    assert_eq!(query_i64(conn, "SELECT count(*) FROM jobs"), 20_000);
    let per_job = query_i64(conn, "SELECT count(*) FROM transitions") as f64 / 20_000.0;
    assert!((4.0..6.0).contains(&per_job), "about five log entries per job, got {per_job}");

    // job_counts is what the triggers would have kept: a real GROUP BY.
    let mismatched = query_i64(
        conn,
        "SELECT count(*) FROM (
             SELECT queue, state, count(*) AS n FROM jobs GROUP BY 1, 2
             EXCEPT SELECT queue, state, n FROM job_counts WHERE n > 0)",
    );
    assert_eq!(mismatched, 0);
    assert_eq!(query_i64(conn, "SELECT count(*) FROM job_counts WHERE n <= 0"), 0);

    // Each job's attempt is the number of claims in its log since its last requeue, its last
    // entry lands in its state, and no entry is later than the generation instant.
    let wrong_attempts = query_i64(
        conn,
        "SELECT count(*) FROM jobs j WHERE j.attempt != (
             SELECT count(*) FROM transitions t WHERE t.job_id = j.id AND t.to_state = 'running'
             AND t.seq > coalesce((SELECT max(seq) FROM transitions r WHERE r.job_id = j.id
                                   AND r.actor IS NOT NULL AND r.to_state = 'scheduled'), 0))",
    );
    assert_eq!(wrong_attempts, 0);
    let wrong_last = query_i64(
        conn,
        "SELECT count(*) FROM jobs j WHERE j.state != (
             SELECT to_state FROM transitions t WHERE t.job_id = j.id ORDER BY seq DESC LIMIT 1)",
    );
    assert_eq!(wrong_last, 0);
    assert!(query_i64(conn, "SELECT max(at) FROM transitions") <= PINNED_NOW_MS);
    let out_of_order =
        query_i64(conn, "SELECT count(*) FROM transitions a JOIN transitions b ON b.seq = a.seq + 1 WHERE b.at < a.at");
    assert_eq!(out_of_order, 0, "the log follows time, as commits append it");

    // The mix: every state, both quarantine reasons, dead-letters across many causes, lapsed
    // leases, delayed jobs, operator requeues and cancels, captured and not-captured detail.
    // Every state but Waiting: the generator writes no workflow.
    for state in JobState::ALL.into_iter().filter(|s| *s != JobState::Waiting) {
        assert!(store.counts().unwrap().total(state) > 0, "no {state} jobs");
    }
    assert!(query_i64(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") > 15_000);
    assert_eq!(query_i64(conn, "SELECT count(DISTINCT quarantine_reason) FROM jobs"), 2);
    let causes = query_i64(conn, "SELECT count(DISTINCT cause_fingerprint) FROM jobs WHERE state = 'dead-lettered'");
    assert!((20..100).contains(&causes), "a few dozen dead-letter causes, got {causes}");
    assert!(query_i64(conn, "SELECT count(*) FROM jobs WHERE terminal_cause = 'lease expired'") > 0);
    assert!(
        query_i64(conn, &format!("SELECT count(*) FROM jobs WHERE state = 'scheduled' AND due_at > {PINNED_NOW_MS}"))
            > 0
    );
    assert!(
        query_i64(
            conn,
            &format!("SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at < {PINNED_NOW_MS}")
        ) > 0
    );
    assert!(query_i64(conn, "SELECT count(*) FROM transitions WHERE actor IS NOT NULL AND to_state = 'scheduled'") > 0);
    assert!(query_i64(conn, "SELECT count(*) FROM transitions WHERE actor IS NOT NULL AND to_state = 'cancelled'") > 0);
    assert!(query_i64(conn, "SELECT count(*) FROM transitions WHERE detail_status = 'captured'") > 0);
    assert!(query_i64(conn, "SELECT count(*) FROM transitions WHERE detail_status = 'not-captured'") > 0);
    assert!(query_i64(conn, "SELECT count(*) FROM workers") >= 2);
    for row in conn
        .raw_query(
            "SELECT id, terminal_cause, cause_fingerprint FROM jobs WHERE terminal_cause IS NOT NULL LIMIT 500",
            &[],
        )
        .unwrap()
    {
        let (id, cause, fingerprint) = (row[0].as_str(), row[1].as_str(), row[2].as_str());
        assert_eq!(fingerprint, cause_fingerprint(cause), "fingerprint of {id}");
    }

    // The file follows schema.sql exactly: the same tables, indexes and triggers, the same SQL,
    // and it is handed over in WAL mode.
    let schema_of = |store: &Store| -> Vec<(String, String, Option<String>)> {
        store
            .raw_query("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name", &[])
            .unwrap()
            .into_iter()
            .map(|r| (r[0].as_str().to_string(), r[1].as_str().to_string(), r[2].as_opt_str().map(str::to_string)))
            .collect()
    };
    let fresh = Store::create(dir.path().join("fresh.db")).unwrap();
    assert_eq!(schema_of(conn), schema_of(&fresh));
    assert_eq!(conn.pragma("journal_mode").unwrap().as_str(), "wal");
}

#[test]
fn generate_is_deterministic_for_a_seed_and_an_instant() {
    let dir = tempfile::tempdir().unwrap();
    let dump = |name: &str, seed: &str| {
        let db = dir.path().join(name);
        bw().arg("--db").arg(&db).args(["generate", "--jobs", "3000", "--seed", seed]).assert().success();
        let store = Store::open(&db).unwrap();
        let text = |sql: &str| store.raw_scalar(sql, &[]).unwrap().as_str().to_string();
        let jobs = text("SELECT group_concat(id || state || attempt || due_at || coalesce(terminal_cause, ''), '|') FROM (SELECT * FROM jobs ORDER BY id)");
        let log = text("SELECT group_concat(seq || job_id || at || to_state || coalesce(reason, '') || coalesce(failure_detail, ''), '|') FROM transitions");
        (jobs, log)
    };
    let a = dump("a.db", "7");
    let b = dump("b.db", "7");
    let c = dump("c.db", "8");
    assert!(a == b, "same seed, same store");
    assert!(a.0 != c.0, "another seed, another store");
}

#[test]
fn generate_refuses_an_existing_file_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("precious.db");
    std::fs::write(&db, b"not yours").unwrap();
    let out = bw().arg("--db").arg(&db).args(["generate", "--jobs", "10"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("precious.db") && stderr.contains("--force"), "{stderr}");
    assert_eq!(std::fs::read(&db).unwrap(), b"not yours");

    bw().arg("--db").arg(&db).args(["generate", "--jobs", "10", "--force"]).assert().success();
    assert_eq!(query_i64(&Store::open(&db).unwrap(), "SELECT count(*) FROM jobs"), 10);
}

/// `bw ARGS` on `db`: its exit status and stdout, with the `--db` it was given spelled `<db>`
/// (the next-page hint repeats it).
fn bw_on(db: &TestDb, args: &[&str]) -> (Option<i32>, String) {
    let out = bw().arg("--db").arg(db).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let quoted = shell_words::quote(db.arg()).to_string();
    (out.status.code(), stdout.replace(&quoted, "<db>"))
}

/// `bw generate` on PostgreSQL: the same seed and instant make the same store as on SQLite, so
/// every reader prints the same, and the store is whole (exact counts, every index, the log's
/// job check and the count triggers back as the schema has them).
#[test]
fn generate_on_postgres_makes_the_store_it_makes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = TestDb::sqlite(dir.path().join("big.db"));
    let pg = TestDb::postgres();
    for db in [&file, &pg] {
        let out = bw().arg("--db").arg(db).args(["generate", "--jobs", "100000"]).assert().success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(stderr.contains("done: 100,000 jobs") && stderr.contains("jobs/s"), "{stderr}");
        eprintln!("{db:?}: {}", stderr.lines().find(|l| l.starts_with("done")).unwrap_or_default());
        let store = Store::open(db).unwrap();
        assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new(), "{db:?}");
        let total: u64 = JobState::ALL.iter().map(|s| store.counts().unwrap().total(*s)).sum();
        assert_eq!(total, 100_000, "{db:?}");
    }
    let reads: [&[&str]; 6] = [
        &["stats"],
        &["check"],
        &["jobs", "list", "--state", "dead-lettered"],
        &["jobs", "list", "--state", "running"],
        &["log", "tail", "-n", "200"],
        &["workers"],
    ];
    for args in reads {
        let (on_file, on_pg) = (bw_on(&file, args), bw_on(&pg, args));
        assert!(matches!(on_file.0, Some(0..=2)), "bw {args:?} on SQLite: {on_file:?}");
        assert!(on_file.1.lines().count() > 2, "bw {args:?} printed next to nothing: {}", on_file.1);
        assert_eq!(on_file, on_pg, "bw {args:?} on SQLite, then on PostgreSQL");
    }

    // The log: numbered in the generator's (time) order, all written by the loading transaction.
    let one = |sql: &str| backend::plain_query(&pg, sql)[0][0].as_i64();
    assert_eq!(
        one("SELECT count(*) FROM transitions a JOIN transitions b ON b.seq = a.seq + 1 WHERE b.at < a.at"),
        0,
        "the log follows time"
    );
    assert_eq!(one("SELECT count(DISTINCT xid) FROM transitions"), 1);
    assert_eq!(one("SELECT count(*) FROM job_count_deltas"), 0, "the counts are in job_counts");

    // The schema objects set aside for the load are back, as a fresh store has them.
    let fresh = TestDb::postgres();
    Store::create(&fresh).unwrap();
    let objects = |db: &TestDb| -> Vec<Vec<String>> {
        let schema = db.schema().unwrap();
        backend::plain_query(
            db,
            "SELECT 'index', indexname::text, indexdef FROM pg_indexes WHERE schemaname = current_schema()
             UNION ALL SELECT 'constraint', conname::text, pg_get_constraintdef(oid) FROM pg_constraint
                       WHERE connamespace = current_schema()::regnamespace
             UNION ALL SELECT 'trigger', tgname::text, tgenabled::text FROM pg_trigger
                       WHERE tgrelid IN ('jobs'::regclass, 'transitions'::regclass) AND NOT tgisinternal
             ORDER BY 1, 2",
        )
        .iter()
        .map(|r| r.iter().map(|v| v.as_str().replace(schema, "<schema>")).collect())
        .collect()
    };
    let loaded = objects(&pg);
    assert!(loaded.iter().filter(|o| o[0] == "index").count() >= 10, "{loaded:?}");
    // The log's check of each entry's job (schema 12), switched off for the load, is on again.
    assert!(loaded.iter().any(|o| o[..] == ["trigger", "transitions_job_insert", "O"]), "{loaded:?}");
    assert_eq!(loaded, objects(&fresh));
}

#[test]
fn generate_refuses_a_postgres_schema_that_holds_a_store_and_changes_nothing() {
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.enqueue(&backwave::NewJob::new("mine", "q", b"{}".to_vec())).unwrap();
    let out = bw().arg("--db").arg(&db).args(["generate", "--jobs", "10"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("already holds a BackWave store: generate refuses to touch it"), "{stderr}");
    assert_eq!(query_i64(&store, "SELECT count(*) FROM jobs"), 1);
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
}

/// A job for [`Store::create_loaded`], scheduled and created at `at`.
fn loaded_job(id: &str, at: i64) -> JobRow {
    JobRow {
        id: id.into(),
        wire_name: "w".into(),
        queue: "q".into(),
        labels: "{}".into(),
        payload: b"{}".to_vec(),
        state: JobState::Scheduled,
        attempt: 0,
        max_attempts: None,
        due_at: at,
        lease_owner: None,
        lease_expires_at: None,
        worker_group: None,
        delay_table: None,
        cancel_requested_by: None,
        terminal_cause: None,
        quarantine_reason: None,
        created_at: at,
        updated_at: at,
        finished_at: None,
    }
}

fn loaded_entry(job: &JobRow) -> TransitionRow {
    TransitionRow {
        job_id: job.id.clone(),
        at: job.created_at,
        from: None,
        to: JobState::Scheduled,
        attempt: 0,
        worker_id: None,
        actor: None,
        reason: None,
        failure_detail: None,
        detail_status: None,
    }
}

both_backends! {
    /// Enough rows that several batches went to the database before the failure.
    fn a_load_that_fails_part_way_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let failed = Store::create_loaded(&db, 20_000, |loader| {
            for i in 0..20_000 {
                let job = loaded_job(&uuid::Uuid::from_u128(i + 1).to_string(), PINNED_NOW_MS);
                loader.job(job.clone())?;
                loader.transition(loaded_entry(&job))?;
            }
            Err::<(), _>(backwave::Error::InvalidInput("the generator gave up".into()))
        });
        assert_eq!(failed.unwrap_err().to_string(), "the generator gave up");
        match db.backend() {
            // The new file stays, without a row.
            backend::Backend::Sqlite => assert_eq!(query_i64(&Store::open(&db).unwrap(), "SELECT count(*) FROM jobs"), 0),
            // Not even the schema: a second load starts from an empty one.
            backend::Backend::Postgres => {
                let tables = backend::plain_query(
                    &db,
                    "SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace",
                );
                assert_eq!(tables[0][0].as_i64(), 0, "the failed load left objects behind");
                let job = loaded_job("0190c2a0-0000-7000-8000-000000000001", PINNED_NOW_MS);
                let (store, ()) = Store::create_loaded(&db, 1, |loader| {
                    loader.job(job.clone())?;
                    loader.transition(loaded_entry(&job))
                })
                .unwrap();
                assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 1);
                assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
            }
        }
    }
}

#[test]
fn a_postgres_load_refuses_a_job_id_that_is_not_a_uuid_quoting_it() {
    let db = TestDb::postgres();
    let failed = Store::create_loaded(&db, 10, |loader| loader.job(loaded_job("job-1", PINNED_NOW_MS)));
    assert_eq!(failed.unwrap_err().to_string(), "'job-1' is not a job id (a UUID)");
    assert!(matches!(Store::open(&db), Err(backwave::Error::NotAStore { .. })), "nothing was created");
}

// ---------------------------------------------------------------------------------------------
// `bw demo`

/// `bw` for the demo: the real clock (the workers run in real time), no BW_NOW.
fn bw_live() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("bw").unwrap();
    cmd.env_remove("BW_DB").env_remove("BW_NOW").env("NO_COLOR", "1");
    cmd
}

/// `bw --db DB --format json ARGS...`, parsed.
fn bw_json(db: &TestDb, args: &[&str]) -> serde_json::Value {
    let out = bw_live().arg("--db").arg(db).args(["--format", "json"]).args(args).output().unwrap();
    assert!(out.status.success(), "bw {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bw {args:?} printed no JSON ({e})"))
}

fn jobs_in(db: &TestDb, state: &str) -> Vec<serde_json::Value> {
    bw_json(db, &["jobs", "list", "--state", state, "--limit", "1000"])["jobs"].as_array().unwrap().clone()
}

both_backends! {
    fn demo_for_10s_leaves_every_path_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "demo.db");
        // A demo store from an earlier run, replaced by --reset.
        let old = Store::create(&db).unwrap();
        old.mark_demo().unwrap();
        let old_job = old.enqueue(&backwave::NewJob::new("left-over", "old", b"{}".to_vec())).unwrap();
        drop(old);

        let out = bw_live()
            .arg("--db")
            .arg(&db)
            .args(["demo", "--no-tui", "--duration", "10s", "--reset"])
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        for want in ["QUEUE", "DEAD-LETTERED", "QUARANTINED", "total", "jobs list --state dead-lettered", "0 charged twice"]
        {
            assert!(stdout.contains(want), "summary lacks {want:?}:\n{stdout}");
        }
        let store = Store::open(&db).unwrap();
        assert!(store.is_demo().unwrap());
        assert!(store.job(old_job).unwrap().is_none(), "--reset started over");
        drop(store);

        assert!(!jobs_in(&db, "succeeded").is_empty(), "Succeeded jobs");
        assert!(!jobs_in(&db, "scheduled").is_empty(), "Scheduled jobs");

        // Dead-Lettered three ways: by error (flaky, seed 000's message), by panic, by lapsed lease.
        let dead = jobs_in(&db, "dead-lettered");
        let cause = |j: &serde_json::Value| j["terminal_cause"].as_str().unwrap_or_default().to_string();
        let flaky = dead.iter().find(|j| j["wire_name"] == "flaky").expect("a flaky job dead-lettered");
        assert!(cause(flaky).starts_with("flaky '") && cause(flaky).ends_with("always fails (attempt 3)"), "{flaky}");
        assert_eq!(flaky["attempt"], 3);
        assert!(dead.iter().any(|j| j["wire_name"] == "wedge" && cause(j) == "lease expired"), "a lapsed lease");
        let panicked = dead.iter().find(|j| j["wire_name"] == "resize-image").expect("a panicking job dead-lettered");
        assert_eq!(panicked["attempt"], 5, "strict-priority allows 5 attempts");

        // Quarantined for both reasons, on attempt 1, the handler never having run.
        let quarantined = jobs_in(&db, "quarantined");
        for reason in ["no-handler", "undecodable-payload"] {
            let q = quarantined.iter().find(|j| j["quarantine_reason"] == reason).unwrap_or_else(|| panic!("{reason}"));
            assert_eq!(q["attempt"], 1);
        }
        assert!(quarantined.iter().any(|j| j["wire_name"] == "legacy-report"));

        // The operator's cancel, with the actor in the log.
        let cancelled = jobs_in(&db, "cancelled");
        assert!(!cancelled.is_empty());

        // Transition entries carry failure detail: the panic's shows its type, and the demo's user
        // (made admin on the demo store) can reveal flaky's.
        let show = |id: &str, detail: bool| {
            let mut args = vec!["jobs", "show", id];
            if detail {
                args.push("--detail");
            }
            bw_json(&db, &args)
        };
        let history = show(panicked["id"].as_str().unwrap(), false)["history"].as_array().unwrap().clone();
        let failures: Vec<_> = history.iter().filter(|e| e["detail_status"] == "hidden").collect();
        assert_eq!(failures.len(), 5, "one failing entry per attempt: {history:?}");
        assert!(failures.iter().all(|e| e["detail_type"] == "panic"));
        let revealed = show(flaky["id"].as_str().unwrap(), true);
        let details: Vec<_> = revealed["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["failure_detail"]["message"].as_str().map(str::to_string))
            .collect();
        assert_eq!(details.len(), 3, "{revealed}");
        assert!(details[0].ends_with("always fails (attempt 1)"), "{details:?}");
        let charge = jobs_in(&db, "succeeded").into_iter().find(|j| j["wire_name"] == "charge-card").expect("a charge");
        assert_eq!(charge["attempt"], 3, "charge-card succeeds on attempt 3");

        // Every command the summary suggests works on the result (`top` needs a terminal: the
        // dashboard's own tests drive it on a pty).
        let explore: Vec<&str> = stdout.lines().skip_while(|l| !l.starts_with("Explore")).skip(1).collect();
        assert!(explore.len() >= 6, "{stdout}");
        for line in explore {
            let line = line.trim().replace("ID", flaky["id"].as_str().unwrap());
            let words = shell_words::split(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(words[0], "bw", "{line}");
            if words.iter().any(|w| w == "top") {
                continue;
            }
            let out = bw_live().args(&words[1..]).output().unwrap();
            assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
            assert!(!out.stdout.is_empty(), "{line} printed nothing");
        }

        let store = Store::open(&db).unwrap();
        assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
        let cancels = store
            .log_tail(&backwave::store::LogFilter { to_states: vec![JobState::Cancelled], ..Default::default() }, 10)
            .unwrap();
        assert!(cancels.iter().any(|t| t.actor.is_some()), "the cancel names its operator");
    }
}

#[test]
fn demo_refuses_a_file_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("real.db");
    let store = Store::create(&db).unwrap();
    let id = store.enqueue(&backwave::NewJob::new("payroll", "critical", b"{}".to_vec())).unwrap();
    drop(store);
    let out = bw_live().arg("--db").arg(&db).args(["demo", "--no-tui", "--reset"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("real.db") && stderr.contains("not a demo store"), "{stderr}");
    assert!(Store::open(&db).unwrap().job(id).unwrap().is_some(), "untouched");

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "mine").unwrap();
    bw_live().arg("--db").arg(&text).args(["demo", "--no-tui"]).assert().code(2);
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "mine");
}

#[test]
fn demo_without_a_terminal_says_how_to_reset_an_earlier_demo() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("backwave-demo.db");
    Store::create(&db).unwrap().mark_demo().unwrap();
    // No --db: the demo's own file in the current directory, never ./backwave.db.
    let out = bw_live().current_dir(dir.path()).args(["demo", "--no-tui"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("backwave-demo.db") && stderr.contains("--reset"), "{stderr}");
    assert!(!dir.path().join("backwave.db").exists());
}

/// Regression: `bw demo` runs several Stores in one process (one per worker group, and its
/// crashing node opens new ones every few seconds). Opening a Store read the file's header
/// through a plain descriptor and closed it, which drops every POSIX lock the process holds on
/// the file, SQLite's included; another process (`bw stats`, `bw top`) then believed itself
/// the last user, checkpointed and deleted the WAL under the demo's connections, which failed
/// with "disk I/O error" (SQLITE_IOERR_SHORT_READ).
#[test]
fn opening_a_second_store_in_a_process_keeps_the_first_ones_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let first = Store::create(&db).unwrap();
    first.enqueue(&backwave::NewJob::new("send-email", "high", b"{}".to_vec())).unwrap();
    let wal = dir.path().join("shared.db-wal");
    assert!(wal.exists());
    for _ in 0..3 {
        drop(Store::open(&db).unwrap());
    }
    // Another process opens and closes the store. While `first` is open here, it must not be
    // able to take the exclusive lock that lets the last connection delete the WAL.
    bw_live().arg("--db").arg(&db).arg("stats").assert().success();
    assert!(wal.exists(), "another process deleted the WAL under an open connection");
    assert_eq!(first.counts().unwrap().total(JobState::Scheduled), 1);
}
