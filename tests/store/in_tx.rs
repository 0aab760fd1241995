//! Enqueue inside the application's own transaction (issue 22): a rollback leaves nothing, a
//! commit is claimable at once, a unique job behaves as it does through the store. On SQLite the
//! application's `rusqlite` transaction on the store's file; on PostgreSQL its `postgres`
//! transaction through the library, and the `backwave_enqueue` SQL function any driver calls,
//! which must write exactly the rows the library writes.

use backwave::rusqlite::TransactionBehavior;
use backwave::store::SettingKey;
use backwave::{enqueue_in_postgres, enqueue_in_sqlite, Enqueued, Error, JobId, NewJob, Store, UniqueRule};

use super::backend::{both_backends, plain_query, TestDb};
use super::*;

/// The application's own connection to the store's database, and a transaction on it in which
/// `f` runs; committed when `commit`, else rolled back.
fn in_app_tx<T>(db: &TestDb, commit: bool, f: impl FnOnce(&mut AppTx<'_>) -> T) -> T {
    match db.backend() {
        backend::Backend::Sqlite => {
            let mut conn = backwave::rusqlite::Connection::open(db.file()).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            conn.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)", []).unwrap();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
            let mut app = AppTx::Sqlite(tx);
            let out = f(&mut app);
            let AppTx::Sqlite(tx) = app else { unreachable!() };
            if commit {
                tx.commit().unwrap()
            } else {
                tx.rollback().unwrap()
            }
            out
        }
        backend::Backend::Postgres => {
            let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
            client.batch_execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY)").unwrap();
            let tx = client.transaction().unwrap();
            let mut app = AppTx::Postgres(tx);
            let out = f(&mut app);
            let AppTx::Postgres(tx) = app else { unreachable!() };
            if commit {
                tx.commit().unwrap()
            } else {
                tx.rollback().unwrap()
            }
            out
        }
    }
}

enum AppTx<'a> {
    Sqlite(backwave::rusqlite::Transaction<'a>),
    Postgres(backwave::postgres::Transaction<'a>),
}

impl AppTx<'_> {
    /// The application's own write, in its transaction.
    fn own_write(&mut self, order: &str) {
        match self {
            AppTx::Sqlite(tx) => {
                tx.execute("INSERT INTO orders VALUES (?1)", [order]).unwrap();
            }
            AppTx::Postgres(tx) => {
                tx.execute("INSERT INTO orders VALUES ($1)", &[&order]).unwrap();
            }
        }
    }

    /// Whether the job is in `jobs` as this transaction sees it.
    fn sees(&mut self, id: JobId) -> bool {
        match self {
            AppTx::Sqlite(tx) => {
                tx.query_row("SELECT count(*) FROM jobs WHERE id = ?1", [id.to_string()], |r| r.get::<_, i64>(0))
                    .unwrap()
                    == 1
            }
            AppTx::Postgres(tx) => {
                tx.query_one("SELECT count(*) FROM jobs WHERE id = $1", &[&id.0]).unwrap().get::<_, i64>(0) == 1
            }
        }
    }

    fn enqueue(&mut self, job: &NewJob) -> backwave::Result<Enqueued> {
        match self {
            AppTx::Sqlite(tx) => enqueue_in_sqlite(tx, job),
            AppTx::Postgres(tx) => enqueue_in_postgres(tx, job),
        }
    }
}

fn orders(db: &TestDb) -> usize {
    plain_query(db, "SELECT count(*) FROM orders")[0][0].as_i64() as usize
}

/// A store on the system clock: the application's enqueue takes its time from the system (or
/// database) clock, so a claim at the fixture's manual time would find the job not yet due.
fn system_clock_store(db: &TestDb) -> Store {
    Store::open(db).unwrap()
}

fn claim_now(store: &Store, queue: &str) -> Vec<Job> {
    let queues = [queue.to_string()];
    let policy = policy(3, Duration::from_secs(1));
    store
        .claim(&ClaimRequest {
            worker_id: WORKER,
            group: "g",
            queues: &queues,
            limit: 10,
            lease: LEASE,
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap()
}

both_backends! {
    fn a_job_enqueued_in_a_transaction_that_rolls_back_never_exists() {
        let f = Fixture::new();
        let id = in_app_tx(&f.db, false, |tx| {
            tx.own_write("o-1");
            let id = tx.enqueue(&NewJob::new("ship-order", "orders", br#"{"order":"o-1"}"#.to_vec())).unwrap().id();
            assert!(tx.sees(id), "the job is not there inside its own transaction");
            id
        });
        assert_eq!(orders(&f.db), 0);
        assert!(f.store.job(id).unwrap().is_none(), "the rolled-back job exists");
        assert!(f.store.history(id).unwrap().is_empty(), "the rolled-back job left log entries");
        assert!(claim_now(&system_clock_store(&f.db), "orders").is_empty());
        f.assert_sound();
    }

    fn a_job_enqueued_in_a_committed_transaction_is_claimable_at_once() {
        let f = Fixture::new();
        let job = NewJob::new("ship-order", "orders", br#"{"order":"o-1"}"#.to_vec()).label("tenant", "acme");
        let id = in_app_tx(&f.db, true, |tx| {
            tx.own_write("o-1");
            tx.enqueue(&job).unwrap()
        });
        let Enqueued::Created(id) = id else { panic!("not created: {id:?}") };
        assert_eq!(orders(&f.db), 1);
        let claimed = claim_now(&system_clock_store(&f.db), "orders");
        assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id]);
        assert_eq!(claimed[0].payload, job.payload);
        assert_eq!(claimed[0].labels, job.labels);
        let history = f.store.history(id).unwrap();
        assert_eq!(
            history.iter().map(|t| (t.from, t.to, t.attempt)).collect::<Vec<_>>(),
            vec![(None, JobState::Scheduled, 0), (Some(JobState::Scheduled), JobState::Running, 1)]
        );
        f.assert_sound();
    }

    fn a_unique_job_in_a_transaction_is_a_duplicate_of_its_holder_and_a_rollback_frees_its_key() {
        let f = Fixture::new();
        let job = NewJob::new("report", "low", b"{}".to_vec()).unique(UniqueRule::key("report:2026-12-01"));
        // Twice in one transaction: the second answers the first; both gone with the rollback.
        let first = in_app_tx(&f.db, false, |tx| {
            let a = tx.enqueue(&job).unwrap();
            let b = tx.enqueue(&job).unwrap();
            assert!(matches!(a, Enqueued::Created(_)), "{a:?}");
            assert_eq!(b, Enqueued::Duplicate(a.id()));
            a.id()
        });
        assert!(f.store.job(first).unwrap().is_none());
        // The key is free again: the store stores it, and the application's next transaction
        // answers that job as the holder.
        let held = f.store.insert(&job).unwrap();
        assert!(matches!(held, Enqueued::Created(_)), "{held:?}");
        let again = in_app_tx(&f.db, true, |tx| tx.enqueue(&job).unwrap());
        assert_eq!(again, Enqueued::Duplicate(held.id()));
        f.assert_sound();
    }

    fn an_enqueue_in_a_transaction_refuses_what_the_store_refuses() {
        let f = Fixture::new();
        f.store.set_setting(ADMIN, SettingKey::PayloadLimit, "8").unwrap();
        in_app_tx(&f.db, false, |tx| {
            match tx.enqueue(&NewJob::new("big", "q", b"0123456789".to_vec())) {
                Err(Error::PayloadTooLarge { bytes: 10, limit: 8, .. }) => {}
                other => panic!("a 10-byte payload over an 8-byte limit: {other:?}"),
            }
        });
        in_app_tx(&f.db, false, |tx| {
            let err = tx.enqueue(&NewJob::new(" ", "q", b"1".to_vec())).unwrap_err();
            assert_eq!(err.to_string(), f.store.enqueue(&NewJob::new(" ", "q", b"1".to_vec())).unwrap_err().to_string());
            let rule = UniqueRule::key("k").states(&[JobState::Scheduled]);
            let err = tx.enqueue(&NewJob::new("w", "q", b"1".to_vec()).unique(rule)).unwrap_err();
            assert!(err.to_string().contains("leave out running"), "{err}");
        });
        assert_eq!(f.store.counts().unwrap().queue_total("q"), 0);
    }
}

#[test]
fn an_enqueue_in_a_transaction_on_a_file_that_is_not_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let mut conn = backwave::rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE orders (id TEXT)").unwrap();
    let tx = conn.transaction().unwrap();
    let err = enqueue_in_sqlite(&tx, &NewJob::new("w", "q", b"1".to_vec())).unwrap_err();
    assert!(matches!(err, Error::NotAStore { .. }), "{err:?}");
    assert!(err.to_string().contains("schema version is 0"), "{err}");
}

/// The columns of a job that do not depend on when or under which id it was stored.
fn row_of(db: &TestDb, id: JobId) -> Vec<backwave::store::RawValue> {
    plain_query(
        db,
        &format!(
            "SELECT wire_name, queue, labels::text, encode(payload, 'escape'), state, attempt, due_at - created_at,
                    unique_key, unique_states, unique_window, updated_at = created_at, priority,
                    (SELECT count(*) FROM transitions t WHERE t.job_id = j.id AND t.from_state IS NULL
                        AND t.to_state = 'scheduled' AND t.attempt = 0 AND t.at = j.created_at
                        AND t.worker_id IS NULL AND t.actor IS NULL AND t.reason IS NULL)
             FROM jobs j WHERE id = '{id}'"
        ),
    )
    .remove(0)
}

/// `SELECT * FROM backwave_enqueue(…)` on the plain driver, as any other program would.
fn sql_enqueue(client: &mut backwave::postgres::Client, call: &str) -> Enqueued {
    let row = client.query_one(&format!("SELECT job_id, created FROM {call}"), &[]).unwrap();
    let id = JobId(row.get(0));
    if row.get(1) {
        Enqueued::Created(id)
    } else {
        Enqueued::Duplicate(id)
    }
}

#[test]
fn the_sql_function_writes_the_rows_the_library_writes() {
    let _g = backend::use_backend(backend::Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin(ADMIN).unwrap();
    let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let cases: [(NewJob, &str); 5] = [
        (
            NewJob::new("send-email", "default", br#"{"to":"ann"}"#.to_vec()),
            r#"backwave_enqueue('send-email', '{"to":"ann"}')"#,
        ),
        (
            NewJob::new("send-email", "high", br#"{"to":"bob"}"#.to_vec()).label("tenant", "acme").label("a", "b"),
            r#"backwave_enqueue('send-email', '{"to":"bob"}', queue => 'high', labels => '{"tenant":"acme","a":"b"}')"#,
        ),
        (
            NewJob::new("send-email", "high", br#"{"to":"cy"}"#.to_vec()).priority(3),
            r#"backwave_enqueue('send-email', '{"to":"cy"}', queue => 'high', priority => 3)"#,
        ),
        (
            NewJob::new("digest", "low", b"[1, 2]".to_vec()).unique(UniqueRule::by_payload()),
            "backwave_enqueue('digest', '[1, 2]', queue => 'low', unique_by_payload => true)",
        ),
        (
            NewJob::new("report", "low", b"7".to_vec()).unique(
                UniqueRule::key("report:7")
                    .states(&[JobState::Scheduled, JobState::Running, JobState::Succeeded])
                    .period(Duration::from_secs(86_400)),
            ),
            "backwave_enqueue('report', '7', queue => 'low', unique_key => 'report:7',
                              unique_states => '{scheduled,running,succeeded}', unique_period => '1 day')",
        ),
    ];
    for (job, call) in &cases {
        let by_library = store.insert(job).unwrap();
        let Enqueued::Created(lib_id) = by_library else { panic!("{by_library:?}") };
        let lib_row = row_of(&db, lib_id);
        if job.unique.is_some() {
            // Same key: the function answers the library's job as the holder, and stores nothing.
            assert_eq!(sql_enqueue(&mut client, call), Enqueued::Duplicate(lib_id), "{call}");
            store.cancel(ADMIN, &[lib_id]).unwrap();
        }
        let Enqueued::Created(sql_id) = sql_enqueue(&mut client, call) else { panic!("{call}") };
        if job.unique.is_some() {
            // A job cancelled before being claimed is Cancelled; the library's row as it was
            // stored is what the function's must equal, state aside.
            let mut sql_row = row_of(&db, sql_id);
            let mut lib_row = lib_row.clone();
            sql_row.remove(4);
            lib_row.remove(4);
            assert_eq!(sql_row, lib_row, "{call}");
        } else {
            assert_eq!(row_of(&db, sql_id), lib_row, "{call}");
        }
        assert_eq!(lib_row.last().unwrap().as_i64(), 1, "one creation entry: {call}");
    }
    // Ids are time-ordered v7 UUIDs with the jitter seed from their random tail, as the library's.
    let seeds = plain_query(
        &db,
        "SELECT count(*) FROM jobs WHERE substring(id::text, 15, 1) = '7'
             AND jitter_seed = ('x' || encode(substring(uuid_send(id) FROM 9 FOR 8), 'hex'))::bit(64)::bigint",
    );
    assert_eq!(seeds[0][0].as_i64(), 10);
    // A due time as timestamptz is the library's milliseconds.
    let later = sql_enqueue(&mut client, "backwave_enqueue('w', '1', due_at => '2030-01-01 00:00:00.123+00')");
    assert_eq!(store.job(later.id()).unwrap().unwrap().due_at, 1_893_456_000_123);
    assert_counts_exact(&store);
}

#[test]
fn the_sql_function_refuses_bad_input_with_the_librarys_words_and_a_rollback_leaves_nothing() {
    let _g = backend::use_backend(backend::Backend::Postgres);
    let db = TestDb::postgres();
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin(ADMIN).unwrap();
    let mut client = backwave::postgres::Client::connect(db.arg(), backwave::postgres::NoTls).unwrap();
    let library = |job: NewJob| store.enqueue(&job).unwrap_err().to_string();
    let refused = |client: &mut backwave::postgres::Client, call: &str| -> String {
        let e = client.query_one(&format!("SELECT * FROM {call}"), &[]).unwrap_err();
        assert_eq!(e.code().map(|c| c.code()), Some("22023"), "{call}: {e:?}");
        e.as_db_error().unwrap().message().to_string()
    };
    let expect_same = |client: &mut backwave::postgres::Client, call: &str, job: NewJob| {
        let lib = library(job);
        let sql = refused(client, call);
        assert!(lib.ends_with(&sql), "{call}: the library says {lib:?}, the function {sql:?}");
    };
    expect_same(&mut client, "backwave_enqueue(' ', '1')", NewJob::new(" ", "q", b"1".to_vec()));
    expect_same(&mut client, "backwave_enqueue('w', '1', queue => '')", NewJob::new("w", "", b"1".to_vec()));
    expect_same(&mut client, "backwave_enqueue(E'a\\tb', '1')", NewJob::new("a\tb", "q", b"1".to_vec()));
    expect_same(
        &mut client,
        "backwave_enqueue('w', '1', unique_key => 'k', unique_states => '{scheduled}')",
        NewJob::new("w", "q", b"1".to_vec()).unique(UniqueRule::key("k").states(&[JobState::Scheduled])),
    );
    expect_same(
        &mut client,
        "backwave_enqueue('w', '1', priority => 12)",
        NewJob::new("w", "q", b"1".to_vec()).priority(12),
    );
    assert!(
        refused(&mut client, "backwave_enqueue('w', '1', priority => -1)").contains("the priority -1 is out of range")
    );
    assert!(refused(&mut client, r#"backwave_enqueue('w', '1', labels => '{"n":1}')"#).contains(r#"{"n": 1}"#));
    assert!(refused(&mut client, "backwave_enqueue('w', '1', unique_period => '1 hour')").contains("need unique_key"));
    // Over the payload limit: the limit's own SQLSTATE, both sizes named.
    store.set_setting(ADMIN, SettingKey::PayloadLimit, "4").unwrap();
    let e = client.query_one("SELECT * FROM backwave_enqueue('w', '\"long\"')", &[]).unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("54000"), "{e:?}");
    assert!(e.as_db_error().unwrap().message().contains("payload of 6 bytes"), "{e:?}");
    store.set_setting(ADMIN, SettingKey::PayloadLimit, "1048576").unwrap();

    // A rollback leaves nothing: no job, no log entry, no count.
    let mut tx = client.transaction().unwrap();
    let Enqueued::Created(id) = ({
        let row = tx.query_one("SELECT job_id, created FROM backwave_enqueue('w', '1', queue => 'q')", &[]).unwrap();
        if row.get(1) {
            Enqueued::Created(JobId(row.get(0)))
        } else {
            Enqueued::Duplicate(JobId(row.get(0)))
        }
    }) else {
        panic!("not created")
    };
    tx.rollback().unwrap();
    assert!(store.job(id).unwrap().is_none());
    assert!(store.history(id).unwrap().is_empty());
    assert_eq!(store.counts().unwrap().queue_total("q"), 0);
    assert_counts_exact(&store);
}
