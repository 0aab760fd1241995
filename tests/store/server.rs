//! The test harness's PostgreSQL side on its own (tests/common/backend.rs): it finds or starts
//! the server, and the URL a test's store gets really puts every connection in that test's
//! schema, so parallel tests and their child processes never see each other's rows.

use backwave::StoreTarget;

use crate::backend::{use_backend, Backend, TestDb};

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| panic!("connect {url}: {e}"))
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
        Some(&postgres::error::SqlState::UNDEFINED_TABLE),
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
