//! The test harness's PostgreSQL side on its own (tests/common/backend.rs): it finds or starts
//! the server, and the URL a test's store gets really puts every connection in that test's
//! schema, so parallel tests and their child processes never see each other's rows.

use backwave::store::RawValue;
use backwave::StoreTarget;

use crate::backend::{use_backend, Backend, TestDb};

fn client(url: &str) -> backwave::postgres::Client {
    backwave::postgres::Client::connect(url, backwave::postgres::NoTls).unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

fn schema_exists(url: &str, schema: &str) -> bool {
    client(url).query_one("SELECT count(*) FROM pg_namespace WHERE nspname = $1", &[&schema]).unwrap().get::<_, i64>(0)
        == 1
}

#[test]
fn postgres_test_schema_is_the_search_path_of_every_connection_and_is_dropped_after() {
    let _backend = use_backend(Backend::Postgres);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (TestDb::new(dir.path()), TestDb::new(dir.path()));
    assert_eq!(a.backend(), Backend::Postgres);
    assert!(matches!(a.target(), StoreTarget::Postgres(_)), "{a:?}");
    let schema = a.schema().unwrap().to_string();
    assert!(schema.starts_with("bw_") && schema.len() <= 63, "{schema}");
    assert!(schema.ends_with("_and_is_dropped_after"), "named after its test: {schema}");
    assert_ne!(a.schema(), b.schema(), "each test store has a schema of its own");

    // Through the very string `--db` and `BW_DB` get, as a child process would connect.
    let mut conn = client(a.arg());
    let current: String = conn.query_one("SELECT current_schema()", &[]).unwrap().get(0);
    assert_eq!(current, schema);
    conn.batch_execute("CREATE TABLE jobs (id int); INSERT INTO jobs VALUES (1)").unwrap();
    let n: i64 = client(a.arg()).query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(n, 1, "a second connection sees the same schema");
    let err = client(b.arg()).query_one("SELECT count(*) FROM jobs", &[]).unwrap_err();
    assert_eq!(
        err.code(),
        Some(&backwave::postgres::error::SqlState::UNDEFINED_TABLE),
        "another test's schema is empty: {err:?}"
    );
    drop(conn);

    let url = b.arg().to_string();
    drop(a);
    assert!(!schema_exists(&url, &schema), "the schema of a passed test is dropped with its store");
}

#[test]
fn sqlite_test_store_is_a_file_in_the_tests_folder() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(dir.path());
    assert_eq!((db.backend(), db.schema()), (Backend::Sqlite, None));
    assert_eq!(db.file(), dir.path().join("backwave.db"));
    assert_eq!(db.arg(), dir.path().join("backwave.db").to_str().unwrap());
    let _backend = use_backend(Backend::Postgres);
    {
        let _inner = use_backend(Backend::Sqlite);
        assert_eq!(TestDb::new(dir.path()).backend(), Backend::Sqlite);
    }
    assert_eq!(crate::backend::current(), Backend::Postgres, "a guard restores the backend it replaced");
}

/// The PostgreSQL side of `plain_query` and `load_sqlite_fixture`, on tables shaped as
/// docs/postgres.md §4.3 types them (the real schema is the backend's; this one is the test's).
#[test]
fn postgres_fixture_rows_are_copied_typed_by_column_and_read_back_plainly() {
    let db = TestDb::postgres();
    client(db.arg())
        .batch_execute(
            "CREATE TABLE jobs (id uuid PRIMARY KEY, wire_name text NOT NULL, queue text NOT NULL,
                 labels jsonb NOT NULL DEFAULT '{}', payload bytea NOT NULL DEFAULT '', state text NOT NULL,
                 attempt bigint NOT NULL, max_attempts bigint, due_at bigint NOT NULL, lease_owner text,
                 lease_expires_at bigint, worker_group text, delay_table jsonb, jitter_seed bigint NOT NULL,
                 cancel_requested_by text, terminal_cause text, cause_fingerprint text, quarantine_reason text,
                 created_at bigint NOT NULL, updated_at bigint NOT NULL, finished_at bigint,
                 unique_key text, unique_states bigint, unique_window bigint, traceparent text, output bytea,
                 progress double precision, progress_message text, workflow_id uuid, priority bigint NOT NULL DEFAULT 0);
             CREATE TABLE transitions (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                 xid xid8 NOT NULL DEFAULT pg_current_xact_id(), job_id uuid NOT NULL REFERENCES jobs ON DELETE CASCADE,
                 at bigint NOT NULL, from_state text, to_state text NOT NULL, attempt bigint NOT NULL, worker_id text,
                 actor text, reason text, failure_detail json, detail_status text);",
        )
        .unwrap();
    let id = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10";
    crate::backend::load_sqlite_fixture(
        &db,
        &format!(
            "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, attempt, due_at, created_at, updated_at,
                               finished_at, terminal_cause)
             VALUES ('{id}', 'w', 'q', '{{\"tenant\":\"acme\"}}', X'00FF', 'dead-lettered', 1, 5, 5, 7, 7,
                     'boom' || char(27) || '[31m');
             INSERT INTO transitions (seq, job_id, at, from_state, to_state, attempt, failure_detail, detail_status)
             VALUES (41, '{id}', 5, NULL, 'scheduled', 0, NULL, NULL),
                    (42, '{id}', 7, 'scheduled', 'dead-lettered', 1, json_object('message', 'boom'), 'captured');"
        ),
    );
    let jobs =
        crate::backend::plain_query(&db, "SELECT id, labels, payload, attempt, max_attempts, terminal_cause FROM jobs");
    assert_eq!(
        jobs,
        [vec![
            RawValue::Text(id.into()),
            RawValue::Text(r#"{"tenant":"acme"}"#.into()),
            RawValue::Blob(vec![0, 255]),
            RawValue::Integer(1),
            RawValue::Null,
            RawValue::Text("boom\u{1b}[31m".into()),
        ]]
    );
    let log =
        crate::backend::plain_query(&db, "SELECT seq, failure_detail, detail_status FROM transitions ORDER BY seq");
    assert_eq!(
        log,
        [
            vec![RawValue::Integer(41), RawValue::Null, RawValue::Null],
            vec![
                RawValue::Integer(42),
                RawValue::Text(r#"{"message":"boom"}"#.into()),
                RawValue::Text("captured".into())
            ]
        ]
    );
    let next: i64 = client(db.arg())
        .query_one(
            "INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ($1, 8, 'scheduled', 0) RETURNING seq",
            &[&id.parse::<uuid::Uuid>().unwrap()],
        )
        .unwrap()
        .get(0);
    assert_eq!(next, 43, "the log's sequence continues after the copied entries");
}
