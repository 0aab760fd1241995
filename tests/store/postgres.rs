//! What only PostgreSQL can get wrong: several hosts' connections writing at once. The contract
//! file against SQLite's, column by column; the log followed by cursor while writers commit out
//! of sequence order; counts exact under concurrent writers; racing creates and `bw init`s.
//! Each test makes its own schema on the test server (tests/common/backend.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use backwave::store::{ClaimRequest, Completion, LeaseStatus, LogFilter, Outcome};
use backwave::{JobId, JobState, LogCursor, NewJob, RetryPolicy, Store};

use super::backend::{plain_query, use_backend, Backend, TestDb};

fn pg_db() -> TestDb {
    let _g = use_backend(Backend::Postgres);
    TestDb::postgres()
}

/// Tables and their columns with their type family and nullability, as each backend declares them.
type Columns = BTreeMap<(String, String), (String, bool)>;

fn family(declared: &str) -> String {
    match declared.to_ascii_lowercase().as_str() {
        "integer" | "bigint" => "integer",
        "text" | "uuid" | "jsonb" | "json" => "text",
        "blob" | "bytea" => "bytes",
        // SQLite has no boolean: a 0-or-1 INTEGER (`job_edges.met`).
        "boolean" => "integer",
        "real" | "double precision" => "real",
        other => other,
    }
    .into()
}

#[test]
fn the_postgres_contract_has_every_table_and_column_of_the_sqlite_contract() {
    let dir = tempfile::tempdir().unwrap();
    let lite = TestDb::sqlite(dir.path().join("contract.db"));
    let lite_store = Store::create(&lite).unwrap();
    let mut sqlite = Columns::new();
    let tables = lite_store
        .raw_query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", &[])
        .unwrap();
    for t in tables {
        let table = t[0].as_str().to_string();
        for c in lite_store.raw_query(&format!("PRAGMA table_info({table})"), &[]).unwrap() {
            // cid, name, type, notnull, default, pk: a primary key is NOT NULL on PostgreSQL.
            let not_null = c[3].as_i64() == 1 || c[5].as_i64() > 0;
            sqlite.insert((table.clone(), c[1].as_str().to_string()), (family(c[2].as_str()), not_null));
        }
    }

    let pg = pg_db();
    Store::create(&pg).unwrap();
    let mut postgres = Columns::new();
    for c in plain_query(
        &pg,
        "SELECT table_name::text, column_name::text, data_type::text, (is_nullable = 'NO')::int
         FROM information_schema.columns WHERE table_schema = current_schema()",
    ) {
        postgres.insert(
            (c[0].as_str().to_string(), c[1].as_str().to_string()),
            (family(c[2].as_str()), c[3].as_i64() == 1),
        );
    }
    // What PostgreSQL has on purpose and SQLite has not (schema-postgres.sql says why).
    for extra in [
        ("transitions", "xid"),
        ("job_count_deltas", "queue"),
        ("job_count_deltas", "state"),
        ("job_count_deltas", "d"),
    ] {
        assert!(
            postgres.remove(&(extra.0.into(), extra.1.into())).is_some(),
            "{extra:?} is gone from schema-postgres.sql"
        );
    }
    // The view that shows failure detail's type and size to roles that may not read it.
    postgres.retain(|(table, _), _| table != "backwave_schema" && table != "bw_failure_detail_shapes");
    // `xid8` and `json` aside, each column is the same family with the same nullability.
    assert_eq!(postgres, sqlite, "schema-postgres.sql and schema.sql disagree (left: PostgreSQL)");
}

#[test]
fn a_log_followed_by_cursor_gets_every_entry_once_while_writers_commit_out_of_order() {
    // Sequence numbers are taken at insert and committed later: a writer holding its transaction
    // open commits entries with lower numbers after others with higher ones. A reader by seq
    // skipped those for ever; by (xid, seq) below the horizon, it gets each exactly once.
    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let start = store.log_end().unwrap();
    let done = AtomicBool::new(false);
    let writers = 4;
    let barrier = Barrier::new(writers + 2);
    let mut delivered: Vec<LogCursor> = Vec::new();
    thread::scope(|s| {
        for w in 0..writers {
            let (db, barrier) = (&db, &barrier);
            s.spawn(move || {
                let mut raw = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
                let store = Store::open(db).unwrap();
                barrier.wait();
                for i in 0..40 {
                    if (i + w) % 3 == 0 {
                        // A slow writer: its entry's seq is taken now, its commit comes later.
                        let mut tx = raw.transaction().unwrap();
                        let id = uuid::Uuid::now_v7();
                        tx.execute(
                            "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
                             VALUES ($1, 'slow', 'q', 0, 0, 0)",
                            &[&id],
                        )
                        .unwrap();
                        tx.execute(
                            "INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ($1, 0, 'scheduled', 0)",
                            &[&id],
                        )
                        .unwrap();
                        thread::sleep(Duration::from_millis(5 + (i * 7 + w * 3) as u64 % 20));
                        tx.commit().unwrap();
                    } else {
                        store.enqueue(&NewJob::new("fast", "q", "{}")).unwrap();
                    }
                }
            });
        }
        let (db, barrier, done) = (&db, &barrier, &done);
        let delivered = &mut delivered;
        s.spawn(move || {
            let store = Store::open(db).unwrap();
            barrier.wait();
            let mut after = start;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let batch = store.log_after(&LogFilter::default(), after, 50).unwrap();
                if let Some(last) = batch.last() {
                    after = last.cursor();
                }
                let empty = batch.is_empty();
                delivered.extend(batch.iter().map(|t| t.cursor()));
                if finished && empty {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
        });
        barrier.wait();
        // The writers end when the scope's first threads are joined; tell the reader after.
        while plain_query(db, "SELECT count(*) FROM transitions")[0][0].as_i64() < (writers * 40) as i64 {
            thread::sleep(Duration::from_millis(5));
        }
        // Every writer's transactions are committed once they are all counted; let the reader
        // drain what is left, then stop.
        done.store(true, Ordering::SeqCst);
    });
    // The case that matters happened: an entry delivered after one with a higher seq (a reader
    // by seq alone would have lost it).
    let behind = delivered.windows(2).filter(|w| w[1].seq < w[0].seq).count();
    assert!(behind > 0, "no writer committed out of sequence order: the test proved nothing");
    let mut sorted = delivered.clone();
    sorted.sort();
    assert_eq!(delivered, sorted, "delivered in cursor order");
    let unique: BTreeSet<i64> = delivered.iter().map(|c| c.seq).collect();
    assert_eq!(unique.len(), delivered.len(), "an entry delivered twice");
    let all: BTreeSet<i64> =
        plain_query(&db, "SELECT seq FROM transitions").into_iter().map(|r| r[0].as_i64()).collect();
    assert_eq!(unique, all, "every committed entry delivered");
    assert_eq!(all.len(), writers * 40);
}

#[test]
fn counts_stay_exact_with_four_hosts_claiming_failing_and_completing_at_once() {
    // Per-row count triggers ported as they are deadlocked here within seconds (a claim moves
    // scheduled -> running, a failure running -> scheduled, locking the two count rows in
    // opposite orders); the statement-level deltas share no row.
    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let jobs: Vec<NewJob> = (0..800).map(|i| NewJob::new("w", ["a", "b"][i % 2], "{}")).collect();
    store.enqueue_many(&jobs).unwrap();
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    thread::scope(|s| {
        for w in 0..4 {
            let (db, policy) = (&db, &policy);
            s.spawn(move || {
                let store = Store::open(db).unwrap();
                let worker = format!("host-{w}");
                let queues = ["a".to_string(), "b".to_string()];
                loop {
                    let claimed = store
                        .claim(&ClaimRequest {
                            worker_id: &worker,
                            group: "g",
                            queues: &queues,
                            limit: 16,
                            lease: Duration::from_secs(60),
                            policy,
                            handler_policies: &[],
                        })
                        .unwrap();
                    if claimed.is_empty() {
                        break;
                    }
                    let outcomes: Vec<Completion> = claimed
                        .iter()
                        .enumerate()
                        .map(|(i, j)| {
                            let outcome = if i % 4 == 0 {
                                Outcome::Failed { message: "boom".into(), detail: None, retry_in: None }
                            } else {
                                Outcome::Succeeded
                            };
                            Completion { job_id: j.id, worker_id: worker.clone(), attempt: j.attempt, outcome }
                        })
                        .collect();
                    store.complete_many(&outcomes).unwrap();
                    if w == 0 {
                        // One host also folds the deltas now and then, as the engine's reaper does.
                        store.reap_expired(100).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    let counts = store.counts().unwrap();
    let terminal = counts.total(JobState::Succeeded) + counts.total(JobState::DeadLettered);
    assert_eq!(terminal, 800, "{counts:?}");
}

/// Migration 12 took the log's foreign key away for two statement triggers (issue 23): an entry
/// still names a job that exists, whoever writes it, and a deleted job still takes its entries.
#[test]
fn without_a_foreign_key_every_log_entry_names_a_job_and_goes_with_it() {
    use backwave::postgres::error::SqlState;
    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let ids = store.enqueue_many(&[NewJob::new("w", "q", "{}"), NewJob::new("w", "q", "{}")]).unwrap();
    let (a, b) = (ids[0].to_string(), ids[1].to_string());
    let mut c = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let entries = |c: &mut backwave::postgres::Client, id: &str| -> i64 {
        c.query_one(&format!("SELECT count(*) FROM transitions WHERE job_id = '{id}'"), &[]).unwrap().get(0)
    };
    assert_eq!((entries(&mut c, &a), entries(&mut c, &b)), (1, 1), "each job's creation entry");

    // An entry for a job that is not there is refused, even beside one for a job that is.
    let ghost = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10";
    let refused = c
        .batch_execute(&format!(
            "INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
             VALUES ('{a}', 1, 'scheduled', 'cancelled', 0), ('{ghost}', 1, 'scheduled', 'cancelled', 0)"
        ))
        .unwrap_err();
    assert_eq!(refused.code(), Some(&SqlState::FOREIGN_KEY_VIOLATION), "{refused:?}");
    assert!(format!("{refused:?}").contains(ghost), "the error names the missing job: {refused:?}");
    assert_eq!(entries(&mut c, &a), 1, "the statement wrote nothing");
    // Moving an entry to a job that is not there is refused the same way.
    let moved =
        c.batch_execute(&format!("UPDATE transitions SET job_id = '{ghost}' WHERE job_id = '{a}'")).unwrap_err();
    assert_eq!(moved.code(), Some(&SqlState::FOREIGN_KEY_VIOLATION), "{moved:?}");

    // Deleting a job deletes its entries, and only its.
    c.batch_execute(&format!("DELETE FROM jobs WHERE id = '{a}'")).unwrap();
    assert_eq!((entries(&mut c, &a), entries(&mut c, &b)), (0, 1));
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    // An entry left behind by a program that switched the trigger off is reported.
    c.batch_execute(&format!(
        "ALTER TABLE transitions DISABLE TRIGGER transitions_job_insert;
         INSERT INTO transitions (job_id, at, from_state, to_state, attempt) VALUES ('{ghost}', 1, NULL, 'scheduled', 0);
         ALTER TABLE transitions ENABLE TRIGGER transitions_job_insert"
    ))
    .unwrap();
    assert_eq!(store.check_integrity().unwrap(), ["1 log entries name a job that is not in jobs"]);
}

#[test]
fn eight_processes_creating_one_store_at_once_apply_the_schema_once_and_make_one_admin() {
    let db = pg_db();
    let barrier = Barrier::new(8);
    let made: Vec<bool> = thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let store = Store::create(db).unwrap();
                    store.bootstrap_admin(&format!("user{i}")).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(made.iter().filter(|m| **m).count(), 1, "{made:?}");
    assert_eq!(plain_query(&db, "SELECT count(*) FROM backwave_schema")[0][0].as_i64(), 1);
    assert_eq!(plain_query(&db, "SELECT count(*) FROM grants WHERE permission = 'admin'")[0][0].as_i64(), 1);
}

#[test]
fn an_entry_committed_late_is_delivered_in_its_place_not_skipped() {
    // docs/postgres.md §3c case 2, step by step: A takes its xid first and logs last; B takes a
    // later xid, logs first and commits first. While A runs, B's entry is held back (no cursor
    // passes A's place); once A commits both come, A's first. A reader by seq below the horizon
    // would deliver A's entry (the higher seq) and then skip B's.
    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let connect = || backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let (mut a, mut b) = (connect(), connect());
    let job = "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
               VALUES ($1, 'log.check', 'default', 0, 0, 0)";
    let entry = "INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ($1, 0, 'scheduled', 0) RETURNING seq";
    let (ja, jb) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let mut ta = a.transaction().unwrap();
    ta.execute(job, &[&ja]).unwrap();
    let mut tb = b.transaction().unwrap();
    tb.execute(job, &[&jb]).unwrap();
    let seq_b: i64 = tb.query_one(entry, &[&jb]).unwrap().get(0);
    tb.commit().unwrap();
    let seq_a: i64 = ta.query_one(entry, &[&ja]).unwrap().get(0);
    assert!(seq_a > seq_b);

    let all = LogFilter::default();
    assert_eq!(store.log_after(&all, LogCursor::default(), 10).unwrap(), vec![]);
    assert_eq!(store.log_tail(&all, 10).unwrap(), vec![]);
    assert_eq!(store.log_end().unwrap(), LogCursor::default());
    ta.commit().unwrap();
    let entries = store.log_after(&all, LogCursor::default(), 10).unwrap();
    let got: Vec<(uuid::Uuid, i64)> = entries.iter().map(|t| (t.job_id.0, t.seq)).collect();
    assert_eq!(got, vec![(ja, seq_a), (jb, seq_b)]);
    assert!(entries[0].xid < entries[1].xid);
    assert_eq!(store.log_end().unwrap(), entries[1].cursor());
}

#[test]
fn a_long_transaction_elsewhere_on_the_server_does_not_hold_this_stores_log_back() {
    // The horizon is the oldest transaction writing to this store's tables, not the cluster's
    // oldest: another store's (or application's) long transaction delays nothing here.
    let elsewhere = pg_db();
    Store::create(&elsewhere).unwrap();
    let mut other = backwave::postgres::Client::connect(elsewhere.arg(), backwave::postgres::NoTls).unwrap();
    let mut long = other.transaction().unwrap();
    long.execute(
        "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at) VALUES ($1, 'x', 'q', 0, 0, 0)",
        &[&uuid::Uuid::now_v7()],
    )
    .unwrap();

    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let id = store.enqueue(&NewJob::new("send-email", "high", "{}")).unwrap();
    let tail = store.log_tail(&LogFilter::default(), 10).unwrap();
    assert_eq!(tail.iter().map(|t| t.job_id).collect::<Vec<_>>(), [id], "held back by another store's transaction");
    assert_eq!(store.log_end().unwrap(), tail[0].cursor());
    long.rollback().unwrap();
}

#[test]
fn eight_processes_opening_a_store_of_the_base_version_migrate_it_once_and_keep_every_row() {
    // The base contract is schema-postgres.sql up to its first migration block (version 2);
    // every later block is a step an older store takes when it is opened for writing.
    let file = include_str!("../../schema-postgres.sql");
    let base = file.find("-- migration 3 begin").map_or(file, |at| &file[..at]);
    let db = pg_db();
    let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    client.batch_execute(&format!("BEGIN; {base}; COMMIT")).unwrap();
    client
        .execute(
            "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at) VALUES ($1, 'x', 'q', 0, 0, 0)",
            &[&uuid::Uuid::now_v7()],
        )
        .unwrap();
    assert_eq!(plain_query(&db, "SELECT version FROM backwave_schema")[0][0].as_i64(), 2);

    let barrier = Barrier::new(8);
    let versions: Vec<i64> = thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (db, barrier) = (&db, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    Store::open(db).unwrap().schema_version()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(versions, vec![backwave::store::SCHEMA_VERSION; 8]);
    assert_eq!(plain_query(&db, "SELECT version FROM backwave_schema")[0][0].as_i64(), backwave::store::SCHEMA_VERSION);
    assert_eq!(plain_query(&db, "SELECT count(*) FROM jobs")[0][0].as_i64(), 1);
    // Version 16's priority: the job stored before it is at the default.
    assert_eq!(plain_query(&db, "SELECT priority FROM jobs")[0][0].as_i64(), 0);
    let store = Store::open(&db).unwrap();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
}

/// A version-15 store with a job and a role granted the enqueue functions (docs/postgres.md,
/// roles): migration 16 gives the job the default priority, and the role may still enqueue,
/// with the old call forms and with the new argument.
#[test]
fn a_version_15_store_migrates_to_priorities_keeping_its_jobs_and_the_enqueue_grants() {
    let file = include_str!("../../schema-postgres.sql");
    let v15 = &file[..file.find("-- migration 16 begin").unwrap()];
    let db = pg_db();
    let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    client.batch_execute(&format!("BEGIN; {v15}; COMMIT")).unwrap();
    assert_eq!(plain_query(&db, "SELECT version FROM backwave_schema")[0][0].as_i64(), 15);
    let role = format!("bw_prio_{}", uuid::Uuid::now_v7().simple());
    client
        .batch_execute(&format!(
            "CREATE ROLE {role};
             GRANT EXECUTE ON FUNCTION backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[],
                 interval, text) TO {role};
             SELECT * FROM backwave_enqueue('old', '1', queue => 'q')"
        ))
        .unwrap();
    let store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version(), backwave::store::SCHEMA_VERSION);
    assert_eq!(plain_query(&db, "SELECT wire_name, priority FROM jobs")[0][1].as_i64(), 0);
    let granted = plain_query(
        &db,
        &format!(
            "SELECT has_function_privilege('{role}', 'backwave_enqueue(text, json, text, timestamptz, jsonb, text,
                 boolean, text[], interval, text, bigint)', 'EXECUTE')"
        ),
    );
    assert_eq!(granted[0][0], backwave::store::RawValue::Integer(1));
    client.batch_execute("SELECT * FROM backwave_enqueue('new', '2', queue => 'q', priority => 4)").unwrap();
    client
        .batch_execute(
            "SELECT * FROM backwave_enqueue_bytes('pos', '\\x33', 'q', NULL, '{}', NULL, false, NULL, NULL, NULL)",
        )
        .unwrap();
    let rows = plain_query(&db, "SELECT wire_name, priority FROM jobs ORDER BY wire_name");
    let got: Vec<(String, i64)> = rows.iter().map(|r| (r[0].as_str().to_string(), r[1].as_i64())).collect();
    assert_eq!(got, [("new".to_string(), 4), ("old".to_string(), 0), ("pos".to_string(), 0)]);
    client.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}")).unwrap();
}

/// A store's connection keeps its statements prepared, and PostgreSQL, after five runs of one,
/// may switch it to a generic plan: one made without the parameters' values, priced on the table
/// as it was then. A worker that started on a near-empty queue got, for its claim, a plan that
/// reads every job and sorts them (and an UPDATE that reads them all again to find the picked
/// rows), and for its completions and heartbeats plans made for a table of a few rows: once a
/// burst of 300,000 jobs arrived, each claim of 1,000 took 1.3 s instead of 11 ms, and went on
/// doing so until an ANALYZE happened to replace the plans. The engine's statements over `jobs`
/// are planned for the values they run with, every time: on any store's session, where they
/// are sent whole each run, and on an engine's own sessions, where they run prepared under
/// `plan_cache_mode = force_custom_plan`.
#[test]
fn a_worker_that_started_on_an_empty_queue_never_claims_a_grown_backlog_with_a_plan_made_for_the_empty_one() {
    let _g = use_backend(Backend::Postgres);
    let fx = super::Fixture::new();
    let prepared = claim_a_burst_after_a_quiet_queue(&fx);
    let claim = prepared.iter().find(|p| p.contains("WITH picked AS"));
    assert_eq!(claim, None, "a plain session sends its claim whole, never runs it prepared");
}

/// The same on the sessions an engine opens for its own work ([`Store::for_engine`]): there the
/// claim, its completion and its heartbeat run prepared, parsed once, and each run is still
/// planned for its values.
#[test]
fn an_engine_session_runs_its_claim_prepared_and_still_plans_it_for_every_run() {
    let _g = use_backend(Backend::Postgres);
    let mut fx = super::Fixture::new();
    fx.store = Store::open(&fx.db).unwrap().with_clock(fx.clock.clone()).for_engine().unwrap();
    let prepared = claim_a_burst_after_a_quiet_queue(&fx);
    // Each of the 13 claims, heartbeats and completions planned for its values.
    let ran = |head: &str| {
        prepared.iter().any(|p| p.contains(head) && p.split(' ').next().and_then(|n| n.parse::<u32>().ok()) == Some(13))
    };
    assert!(ran("WITH picked AS"), "the claim ran prepared, planned on each of its 13 runs: {prepared:#?}");
    assert!(ran("UPDATE jobs SET lease_expires_at"), "the heartbeat too: {prepared:#?}");
    assert!(ran("UPDATE jobs SET state = 'succeeded'"), "the completion too: {prepared:#?}");

    // A new session (the old one killed) is opened the same way.
    let pid = fx.store.raw_query("SELECT pg_backend_pid()", &[]).unwrap()[0][0].as_i64();
    let killer = Store::open(&fx.db).unwrap();
    killer.raw_query(&format!("SELECT pg_terminate_backend({pid})"), &[]).unwrap();
    // The first call after the kill finds the connection gone; the next connects again.
    let mode = |store: &Store| match store.raw_query("SHOW plan_cache_mode", &[]) {
        Ok(rows) => rows[0][0].as_str().to_string(),
        Err(_) => store.raw_query("SHOW plan_cache_mode", &[]).unwrap()[0][0].as_str().to_string(),
    };
    assert_eq!(mode(&fx.store), "force_custom_plan");
    assert_eq!(mode(&killer), "auto", "a store not opened for an engine keeps the server's default");
}

/// The two statements an idle group runs most, the read before each claim (pauses, limits,
/// whether the worker is quiet) and the look for a lapsed lease at every poll, are planned once
/// per session and their plans kept, on the sessions an engine claims on too, which plan every
/// statement with parameters for its values: on the database's clock they have none (the
/// worker's id is in the read's text). Planned at each run they cost 0.26 and 0.23 ms of
/// planning for 0.02 and 0.01 ms of reading.
#[test]
fn an_engine_session_plans_the_read_before_a_claim_and_the_lapse_look_once() {
    let _g = use_backend(Backend::Postgres);
    let fx = super::Fixture::new();
    let store = Store::open(&fx.db).unwrap().for_engine().unwrap();
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    for round in 0..8 {
        if round % 2 == 0 {
            store.enqueue_many(&[NewJob::new("w", "q", "{}")]).unwrap();
        }
        let queues = ["q".to_string()];
        let req = ClaimRequest {
            worker_id: super::WORKER,
            group: "g",
            queues: &queues,
            limit: 10,
            lease: super::LEASE,
            policy: &policy,
            handler_policies: &[],
        };
        assert_eq!(store.claim(&req).unwrap().len(), usize::from(round % 2 == 0));
        assert!(!store.has_lapsed_leases().unwrap(), "every lease runs for another minute");
    }
    let plans = |pattern: &str| -> Vec<(i64, i64, String)> {
        let sql = format!(
            "SELECT generic_plans, custom_plans, parameter_types::text FROM pg_prepared_statements
             WHERE statement ~ '{pattern}' AND statement !~ 'pg_prepared_statements'"
        );
        let rows = store.raw_query(&sql, &[]).unwrap();
        rows.iter().map(|r| (r[0].as_i64(), r[1].as_i64(), r[2].as_str().to_string())).collect()
    };
    let once = [(8, 0, "{}".to_string())];
    assert_eq!(plans("LEFT JOIN pauses"), once, "the read before a claim: no parameters, one plan run 8 times");
    assert_eq!(plans("ORDER BY lease_expires_at LIMIT 1"), once, "the lapse look: the same");
}

/// Which session an engine claims on: one of its own, every statement planned for its values
/// (`plan_cache_mode = force_custom_plan`, as the tests above show on such a session), except
/// in poll-only mode ([`Engine::poll_only`], meant for a pooler in transaction mode, which
/// hands each transaction whatever server session is free and would carry the setting to other
/// clients): there a plain session, the server's default left as it was. Seen from inside the
/// claim itself: a trigger on the claim's move to Running notes the setting of the session
/// that runs it.
///
/// [`Engine::poll_only`]: backwave::engine::Engine::poll_only
#[test]
fn an_engine_claims_on_a_session_planned_for_each_run_but_not_when_it_only_polls() {
    use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
    for poll_only in [false, true] {
        let db = pg_db();
        let store = Store::create(&db).unwrap();
        store
            .raw_batch(
                "CREATE TABLE claimed_with (plan_cache_mode text);
                 CREATE FUNCTION note_plan_cache_mode() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     INSERT INTO claimed_with VALUES (current_setting('plan_cache_mode'));
                     RETURN NEW;
                 END $$;
                 CREATE TRIGGER note_plan_cache_mode BEFORE UPDATE OF state ON jobs
                     FOR EACH ROW WHEN (NEW.state = 'running') EXECUTE FUNCTION note_plan_cache_mode();",
            )
            .unwrap();
        let server_default = store.raw_query("SHOW plan_cache_mode", &[]).unwrap()[0][0].as_str().to_string();
        assert_eq!(server_default, "auto", "the test server keeps PostgreSQL's default");

        let mut registry = Registry::new();
        registry.handle::<u32>("w", |_, _| Ok(())).queue("q");
        let mut engine = Engine::new(&db, registry);
        engine.poll_only(poll_only);
        engine.add_worker_group(WorkerGroup {
            name: "g".into(),
            policy: DispatchPolicy::strict(["q"]),
            poll_interval: Duration::from_millis(50),
            ..WorkerGroup::default()
        });
        let running = engine.start().unwrap();
        store.enqueue_many(&(0..3).map(|n| NewJob::new("w", "q", n.to_string())).collect::<Vec<_>>()).unwrap();
        crate::engine::support::wait_for("the three jobs to succeed", Duration::from_secs(30), || {
            (store.counts().unwrap().total(JobState::Succeeded) == 3).then_some(())
        });
        running.shutdown(Duration::from_secs(5));

        let modes: BTreeSet<String> = store
            .raw_query("SELECT DISTINCT plan_cache_mode FROM claimed_with", &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().to_string())
            .collect();
        let expected = if poll_only { "auto" } else { "force_custom_plan" };
        assert_eq!(
            modes,
            BTreeSet::from([expected.to_string()]),
            "the claims of an engine with poll_only({poll_only}) ran on sessions with these settings"
        );
    }
}

/// 12 single jobs claimed, heartbeated and completed one by one on `fx`'s session, then a burst
/// of 20,000 and a claim of 100 of it: asserts that no statement of that session over `jobs`
/// ran a generic plan, and returns the session's prepared statements over `jobs` that ran
/// custom plans, each as `N custom plans: SQL`.
fn claim_a_burst_after_a_quiet_queue(fx: &super::Fixture) -> Vec<String> {
    let store = &fx.store;
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let run = |claimed: Vec<backwave::Job>| {
        let held: Vec<_> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
        store.heartbeat(super::WORKER, &held, super::LEASE).unwrap();
        fx.report_all(&claimed, |_, _| Outcome::Succeeded);
        claimed.len()
    };
    // A quiet queue: a job at a time, claimed, heartbeated and completed, well past the five
    // runs after which PostgreSQL weighs a generic plan.
    for _ in 0..12 {
        fx.enqueue("w", "q");
        assert_eq!(run(fx.claim_as(super::WORKER, "q", 10, &policy)), 1);
    }
    // The burst, then the same worker's next claim.
    let burst: Vec<NewJob> = (0..20_000).map(|_| NewJob::new("w", "q", "{}")).collect();
    store.enqueue_many(&burst).unwrap();
    assert_eq!(run(fx.claim_as(super::WORKER, "q", 100, &policy)), 100);

    // The session's prepared statements that read or update jobs (the insert has one plan
    // whatever the table holds): none ran a generic plan. Without the fix the claim, the
    // completion and the heartbeat each ran eight.
    let prepared = |plans: &str| -> Vec<String> {
        store
            .raw_query(
                &format!(
                    "SELECT {plans}, statement FROM pg_prepared_statements
                     WHERE {plans} > 0 AND statement ~ '(FROM|UPDATE) jobs' ORDER BY statement"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| {
                let sql = r[1].as_str().split_whitespace().collect::<Vec<_>>().join(" ");
                format!("{} {}: {sql}", r[0].as_i64(), plans.replace('_', " "))
            })
            .collect()
    };
    assert_eq!(
        prepared("generic_plans"),
        Vec::<String>::new(),
        "statements of the worker's session ran a plan made without its values"
    );
    prepared("custom_plans")
}

/// Found by an application developer's walkthrough: inside `#[tokio::main]` the sync `Store` and
/// `Engine::start` on PostgreSQL panicked ("Cannot start a runtime from within a runtime": the
/// driver blocks on a runtime of its own), where the same code on SQLite worked. On a
/// multi-threaded runtime they now lend the thread (`block_in_place`), both on the thread that
/// runs `block_on` (as `#[tokio::main]` runs `main`) and on a worker; dropping a store there,
/// which closes its connection, too.
#[test]
fn the_sync_store_and_an_engine_work_inside_a_multi_threaded_tokio_runtime() {
    use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
    let db = pg_db();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let url = db.arg().to_string();
    rt.block_on(async {
        let store = Store::create(url.as_str()).unwrap();
        store.enqueue_many(&(0..20).map(|_| NewJob::new("w", "q", "1")).collect::<Vec<_>>()).unwrap();
        let seen = store.snapshot(|s| Ok(s.counts()?.total(JobState::Scheduled))).unwrap();
        assert_eq!(seen, 20);
        let on_a_worker = tokio::spawn({
            let url = url.clone();
            async move {
                let store = Store::open(url.as_str()).unwrap();
                let n = store.counts().unwrap().total(JobState::Scheduled);
                drop(store);
                n
            }
        });
        assert_eq!(on_a_worker.await.unwrap(), 20);

        let mut registry = Registry::new();
        registry.handle::<u32>("w", |_, _| Ok(())).queue("q");
        let mut engine = Engine::new(url.as_str(), registry);
        engine.add_worker_group(WorkerGroup {
            name: "g".into(),
            policy: DispatchPolicy::strict(["q"]),
            poll_interval: Duration::from_millis(20),
            ..WorkerGroup::default()
        });
        let running = engine.start().unwrap();
        crate::engine::support::wait_for(
            "the engine started inside the runtime to drain",
            Duration::from_secs(30),
            || (store.counts().unwrap().total(JobState::Succeeded) == 20).then_some(()),
        );
        running.shutdown(Duration::from_secs(5));
        drop(store);
    });
}

/// The release trigger is queued only for a statement that ended a workflow job (schema 21): an
/// update of a job outside workflows calls neither `jobs_release_mark` nor `jobs_release`, one
/// that ends a workflow's parent calls each once and releases its child, and one that ends both
/// kinds at once releases too, leaving no mark behind. Read from EXPLAIN ANALYZE, which names
/// each trigger it called.
#[test]
fn the_release_trigger_runs_only_for_statements_that_end_a_workflow_job() {
    let db = pg_db();
    let store = Store::create(&db).unwrap();
    let plain = store.enqueue(&NewJob::new("w", "q", b"1".to_vec())).unwrap();
    let other = store.enqueue(&NewJob::new("w", "q", b"2".to_vec())).unwrap();
    let mut wf = backwave::Workflow::new("w");
    let parent = wf.add(NewJob::new("w", "q", b"3".to_vec()));
    let child = wf.add_after(NewJob::new("w", "q", b"4".to_vec()), &[parent]).unwrap();
    let e = store.enqueue_workflow(&wf).unwrap();
    let (parent, child) = (e.job(parent), e.job(child));

    let mut c = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    // Each update in a transaction rolled back: the triggers EXPLAIN ANALYZE says ran, and the
    // child's state the update left.
    let mut ended = |ids: &[backwave::JobId]| -> (Vec<String>, String) {
        let list = ids.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(", ");
        let mut tx = c.transaction().unwrap();
        let plan: Vec<String> = tx
            .query(
                &format!(
                    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) UPDATE jobs SET state = 'succeeded', finished_at = 5,
                     lease_owner = NULL, lease_expires_at = NULL WHERE id IN ({list})"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        let state: String = tx.query_one(&format!("SELECT state FROM jobs WHERE id = '{child}'"), &[]).unwrap().get(0);
        // The release spent the mark: the transaction's next statement is not marked.
        let mark: Option<String> =
            tx.query_one("SELECT current_setting('backwave.release', true)", &[]).unwrap().get(0);
        assert_ne!(mark.as_deref(), Some("on"), "{ids:?}");
        tx.rollback().unwrap();
        let triggers = plan.iter().filter(|l| l.starts_with("Trigger jobs_release")).cloned().collect();
        (triggers, state)
    };
    let (triggers, state) = ended(&[plain, other]);
    assert!(triggers.is_empty(), "{triggers:?}");
    assert_eq!(state, "waiting");
    for ids in [vec![parent], vec![plain, parent, other]] {
        let (triggers, state) = ended(&ids);
        assert_eq!(triggers.len(), 2, "{triggers:?}");
        assert!(triggers.iter().all(|t| t.ends_with("calls=1")), "{triggers:?}");
        assert_eq!(state, "scheduled", "{ids:?}");
    }
}

/// A claim's commit does not wait for the WAL flush: its statement sets `synchronous_commit` off
/// for its own transaction (inside a transaction block, from the claim to its `COMMIT`; outside
/// one, the statement's own), and never for the session, so every completion, enqueue and
/// operator action after it on the same connection waits for its flush as the server says. A
/// claim lost in a server crash puts its jobs back as they were (the store's documentation of
/// the claim statement says why that is the one write BackWave can afford to lose).
#[test]
fn a_claim_commits_without_waiting_for_the_wal_flush_and_leaves_the_session_as_it_was() {
    let _g = use_backend(Backend::Postgres);
    let fx = super::Fixture::new();
    let jobs: Vec<NewJob> = (0..4).map(|_| NewJob::new("w", "q", "{}")).collect();
    fx.store.enqueue_many(&jobs).unwrap();
    let mut c = backwave::postgres::Client::connect(fx.db.arg(), backwave::postgres::NoTls).unwrap();
    let setting =
        |c: &mut backwave::postgres::Client| -> String { c.query_one("SHOW synchronous_commit", &[]).unwrap().get(0) };
    let server = setting(&mut c);
    assert_ne!(server, "off", "the test server runs with synchronous_commit on");

    // In a transaction block: off from the claim to the commit, then the server's again.
    let mut tx = c.transaction().unwrap();
    assert_eq!(tx.query_one("SHOW synchronous_commit", &[]).unwrap().get::<_, String>(0), server);
    assert_eq!(claim_one(&mut tx), 1);
    assert_eq!(tx.query_one("SHOW synchronous_commit", &[]).unwrap().get::<_, String>(0), "off");
    tx.commit().unwrap();
    assert_eq!(setting(&mut c), server);
    // Alone, as the store runs its usual claim: its own transaction, nothing left behind.
    assert_eq!(claim_one(&mut c), 1);
    assert_eq!(setting(&mut c), server);

    // The store's own claim, on its own session, and the completion after it.
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let claimed = fx.claim_as(super::WORKER, "q", 10, &policy);
    assert_eq!(claimed.len(), 2);
    let session = || fx.store.raw_query("SHOW synchronous_commit", &[]).unwrap()[0][0].as_str().to_string();
    assert_eq!(session(), server);
    fx.report_all(&claimed, |_, _| Outcome::Succeeded);
    assert_eq!(session(), server);
    assert!(claimed.iter().all(|j| fx.job(j.id).state == JobState::Succeeded));
}

/// Run the store's claim statement on `c` for one job of queue `q`: how many it took.
fn claim_one(c: &mut impl backwave::postgres::GenericClient) -> usize {
    let now = backwave::store::system_now();
    let (names, shared_table) = (Vec::<String>::new(), None::<&str>);
    let args: [&(dyn backwave::postgres::types::ToSql + Sync); 9] =
        [&"q", &now, &1_i64, &names, &"w1", &"g", &(now + 60_000), &3_i64, &shared_table];
    c.query(backwave::store::POSTGRES_CLAIM_SQL, &args).unwrap().len()
}

/// Every group of every worker looks for lapsed leases each poll interval, busy or idle. With
/// `state = 'running'` in that look, and statistics taken before any job ran (as after a burst),
/// PostgreSQL walked `jobs_active`'s Running range, the entry every claim left there since the
/// last vacuum included (3.4 ms a look in the engine bench's drains, 4 % of a claiming
/// connection's time with two worker processes): a cost growing with the jobs running and run.
/// The look asks for the lowest lapsed lease, which only `jobs_lease` yields in order, so it is
/// one probe of it; and it still answers as before.
#[test]
fn the_look_for_a_lapsed_lease_probes_the_lease_index_not_the_running_jobs() {
    let _g = use_backend(Backend::Postgres);
    // Statistics taken while every job waits (as after a burst: none runs yet), and none at all
    // (a table never analyzed).
    for analyzed in [true, false] {
        // 500 still running under a lease of a minute.
        let (fx, policy) = after_a_burst(analyzed, super::WORKER);
        assert_eq!(fx.claim_as(super::WORKER, "q", 500, &policy).len(), 500);

        // The statement as a session keeps it: prepared, without parameters (on the database's
        // clock, past these leases of the manual clock's 2026-01-01), its one plan.
        let look = backwave::store::POSTGRES_LAPSED_LOOK_SQL;
        fx.store.raw_batch(&format!("PREPARE bw_look AS {look}")).unwrap();
        let plan = plan_of(&fx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE bw_look");
        println!("analyzed: {analyzed}\n{plan}");
        assert!(plan.contains("Scan using jobs_lease on jobs"), "one probe of the lease index ({analyzed}): {plan}");
        assert!(!plan.contains("jobs_active") && !plan.contains("Seq Scan"), "no walk ({analyzed}): {plan}");
        assert!(!plan.contains("Sort"), "the index gives the order ({analyzed}): {plan}");

        assert!(!fx.store.has_lapsed_leases().unwrap(), "every lease runs for another minute");
        fx.clock.advance(super::LEASE + Duration::from_secs(1));
        assert!(fx.store.has_lapsed_leases().unwrap(), "the 500 leases lapsed");
    }
}

/// The engine's batch statements on Running jobs (a batch of successes, with and without
/// outputs; a heartbeat, with and without progress; the hand-back of unstarted jobs) name their
/// jobs by id, and each job must be one probe of the primary key. With the fence's state test
/// written `state = 'running'`, on statistics taken before a burst was claimed (or none),
/// PostgreSQL read every Running job through `jobs_active` instead, each claim's dead entry
/// included, and joined them with the batch: in the engine bench's drain with four worker
/// processes a batch of 1,400 successes read 2,900 pages of the table for it and a heartbeat of
/// 417 leases took 142 ms, costs that grew with the jobs running everywhere rather than with the
/// batch. Here other workers run 450 jobs and 2,000 ran before; this worker's 50 are planned for
/// each statement, then heartbeated and recorded, and both still answer as before.
#[test]
fn the_batch_statements_probe_their_jobs_by_id_not_every_running_job() {
    use backwave::store::{
        POSTGRES_HAND_BACK_SQL, POSTGRES_HEARTBEAT_SQL, POSTGRES_HEARTBEAT_WITH_PROGRESS_SQL, POSTGRES_SUCCEED_SQL,
        POSTGRES_SUCCEED_WITH_OUTPUT_SQL,
    };
    let _g = use_backend(Backend::Postgres);
    for analyzed in [true, false] {
        let (fx, policy) = after_a_burst(analyzed, "another-worker");
        let others = fx.claim_as("another-worker", "q", 450, &policy);
        let ours = fx.claim_as(super::WORKER, "q", 50, &policy);
        assert_eq!((others.len(), ours.len()), (450, 50));

        // Each statement as the engine's sessions run it: prepared, planned for its values.
        let ids = format!("'{{{}}}'", ours.iter().map(|j| j.id.to_string()).collect::<Vec<_>>().join(","));
        let attempts = format!("'{{{}}}'", vec!["1"; ours.len()].join(","));
        let workers = format!("'{{{}}}'", vec![super::WORKER; ours.len()].join(","));
        let worker = format!("'{}'", super::WORKER);
        let each = |value: &str, ty: &str| format!("array_fill({value}::{ty}, ARRAY[{}])", ours.len());
        let statements = [
            (
                "bw_succeed",
                POSTGRES_SUCCEED_SQL,
                "uuid[], text[], bigint[], bigint",
                format!("{ids}, {workers}, {attempts}, NULL"),
            ),
            (
                "bw_succeed_with_output",
                POSTGRES_SUCCEED_WITH_OUTPUT_SQL,
                "uuid[], text[], bigint[], bigint, bytea[]",
                format!("{ids}, {workers}, {attempts}, NULL, {}", each("'\\x7b7d'", "bytea")),
            ),
            (
                "bw_heartbeat",
                POSTGRES_HEARTBEAT_SQL,
                "uuid[], bigint[], text, bigint, bigint, bigint",
                format!("{ids}, {attempts}, {worker}, NULL, 60000, 42000"),
            ),
            (
                "bw_heartbeat_with_progress",
                POSTGRES_HEARTBEAT_WITH_PROGRESS_SQL,
                "uuid[], bigint[], text, bigint, bigint, float8[], text[], bigint",
                format!(
                    "{ids}, {attempts}, {worker}, NULL, 60000, {}, {}, 42000",
                    each("0.5", "float8"),
                    each("'half'", "text")
                ),
            ),
            (
                "bw_hand_back",
                POSTGRES_HAND_BACK_SQL,
                "uuid[], bigint[], text, bigint, text",
                format!("{ids}, {attempts}, {worker}, 0, 'handed back'"),
            ),
        ];
        fx.store.raw_batch("SET plan_cache_mode = force_custom_plan").unwrap();
        for (name, sql, types, args) in &statements {
            fx.store.raw_batch(&format!("PREPARE {name}({types}) AS {sql}")).unwrap();
            let plan = plan_of(&fx, &format!("EXPLAIN (COSTS OFF) EXECUTE {name}({args})"));
            println!("{name}, analyzed: {analyzed}\n{plan}");
            // The primary key, as an index scan or a bitmap of its entries: one probe per id.
            assert!(plan.contains("jobs_pkey"), "{name}: a probe by id ({analyzed}): {plan}");
            for walk in ["jobs_active", "jobs_lease", "jobs_claim", "Seq Scan on jobs"] {
                assert!(!plan.contains(walk), "{name}: no {walk} ({analyzed}): {plan}");
            }
        }

        // And they answer as before: every lease held, every success recorded and logged.
        let held: Vec<(JobId, u32)> = ours.iter().map(|j| (j.id, 1)).collect();
        let statuses = fx.store.heartbeat(super::WORKER, &held, super::LEASE).unwrap();
        assert!(statuses.iter().all(|s| *s == LeaseStatus::Held { cancel_requested: false }), "{statuses:?}");
        fx.report_all(&ours, |_, _| Outcome::Succeeded);
        assert!(ours.iter().all(|j| fx.job(j.id).state == JobState::Succeeded));
        assert!(others.iter().all(|j| fx.job(j.id).state == JobState::Running), "the others' jobs untouched");
    }
}

/// A store after a burst: 2,500 jobs of queue "q" enqueued, statistics taken while they all
/// waited (`analyzed`) or never, then 2,000 of them claimed by `worker` and succeeded, whose
/// Running entries stay in `jobs_active` until a vacuum. On such a table a statement that reads
/// Running jobs through an index walks every claim's dead entry.
fn after_a_burst(analyzed: bool, worker: &str) -> (super::Fixture, RetryPolicy) {
    let fx = super::Fixture::new();
    let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
    let jobs: Vec<NewJob> = (0..2_500).map(|_| NewJob::new("w", "q", "{}")).collect();
    fx.store.enqueue_many(&jobs).unwrap();
    if analyzed {
        fx.store.raw_batch("ANALYZE jobs").unwrap();
    }
    let done = fx.claim_as(worker, "q", 2_000, &policy);
    assert_eq!(done.len(), 2_000);
    fx.report_all(&done, |_, _| Outcome::Succeeded);
    (fx, policy)
}

/// The plan an `EXPLAIN …` statement prints, its lines joined.
fn plan_of(fx: &super::Fixture, explain: &str) -> String {
    let rows = fx.store.raw_query(explain, &[]).unwrap();
    rows.iter().map(|r| r[0].as_str().to_string()).collect::<Vec<_>>().join("\n")
}
