//! Enqueue from async code (`AsyncStore`, issue 22) on both backends, inside a multi-thread and
//! a current-thread tokio runtime: no panic (the blocking PostgreSQL client panics on a runtime
//! thread), the same rows as the sync store, and a runtime thread that keeps running other tasks
//! while an enqueue waits on the database.
//!
//! `async_tests!` is `#[tokio::test(flavor = …)]` by hand for each backend: the fixture (a
//! PostgreSQL schema made and dropped with the blocking client) is set up and torn down outside
//! the runtime, and the body runs in `Runtime::block_on`, as `#[tokio::test]` runs it.

use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use backwave::{AsyncStore, Enqueued, Error, NewJob, UniqueRule};

use super::backend::{self, use_backend, Backend};
use super::*;

/// `name::{sqlite,postgres}_{multi_thread,current_thread}`, each running `body(fixture, store)`
/// in a fresh runtime of that flavour, `store` an `AsyncStore` on the fixture's store and clock.
macro_rules! async_tests {
    ($(fn $name:ident($f:ident, $store:ident) $body:block)*) => {$(
        mod $name {
            use super::*;
            async fn body($f: Rc<Fixture>, $store: AsyncStore) $body
            #[test]
            fn sqlite_multi_thread() { run(Backend::Sqlite, true, body) }
            #[test]
            fn sqlite_current_thread() { run(Backend::Sqlite, false, body) }
            #[test]
            fn postgres_multi_thread() { run(Backend::Postgres, true, body) }
            #[test]
            fn postgres_current_thread() { run(Backend::Postgres, false, body) }
        }
    )*};
}

fn run<F: Future<Output = ()>>(backend: Backend, multi_thread: bool, body: impl FnOnce(Rc<Fixture>, AsyncStore) -> F) {
    let _backend = use_backend(backend);
    let fixture = Rc::new(Fixture::new());
    // Opened outside the runtime only for the manual clock; `AsyncStore::open` opens inside one.
    let store = AsyncStore::from_store(Store::open(&fixture.db).unwrap().with_clock(fixture.clock.clone()), 4);
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    }
    .unwrap();
    runtime.block_on(body(fixture.clone(), store));
    drop(runtime);
    Rc::into_inner(fixture).expect("the body let go of the fixture").assert_sound();
}

async_tests! {
    fn async_enqueue_stores_what_the_sync_store_stores(f, store) {
        let one = store.enqueue(NewJob::new("send-email", "high", br#"{"to":"ann"}"#.to_vec()).label("t", "x")).await.unwrap();
        let many = store
            .enqueue_many((0..5).map(|i| NewJob::new("resize", "bulk", format!("{i}").into_bytes())).collect())
            .await
            .unwrap();
        assert_eq!(many.len(), 5);
        let job = job_of(&store, one).await;
        assert_eq!((job.wire_name.as_str(), job.queue.as_str(), job.state), ("send-email", "high", JobState::Scheduled));
        assert_eq!(job.labels.get("t").map(String::as_str), Some("x"));
        assert_eq!(job.created_at, T0, "the store's clock");
        let rule = UniqueRule::key("digest");
        let first = store.insert(NewJob::new("digest", "low", b"1".to_vec()).unique(rule.clone())).await.unwrap();
        let again = store.insert_many(vec![NewJob::new("digest", "low", b"2".to_vec()).unique(rule)]).await.unwrap();
        assert!(matches!(first, Enqueued::Created(_)), "{first:?}");
        assert_eq!(again, vec![Enqueued::Duplicate(first.id())]);
        // Any other store operation, on one of the store's connections.
        let counts = store.call(|s| s.counts()).await.unwrap();
        assert_eq!((counts.queue_total("high"), counts.queue_total("bulk"), counts.queue_total("low")), (1, 5, 1));
        // Opened inside the runtime, on the system clock.
        let opened = AsyncStore::open(f.db.target()).await.unwrap();
        let id = opened.enqueue(NewJob::new("send-email", "high", b"{}".to_vec())).await.unwrap();
        assert!(job_of(&opened, id).await.created_at > T0);
        // Dropped on a runtime thread: their PostgreSQL connections close without a panic.
        drop((store, opened));
    }

    fn a_typed_job_enqueues_on_the_async_store_as_on_the_sync_one(_f, store) {
        // Typed enqueue from async code (an application developer's walkthrough found it on the
        // sync `Store` only): the registry's queue and labels, the payload checked against the
        // handler's type, a relative due time by the store's clock.
        use backwave::engine::Registry;
        let mut registry = Registry::new();
        registry.handle::<u32>("resize", |_, _| Ok(())).queue("bulk").label("team", "media");
        let id = registry.enqueue_async(&store, "resize", &7u32).await.unwrap();
        let job = job_of(&store, id).await;
        assert_eq!((job.queue.as_str(), job.payload.as_slice()), ("bulk", b"7".as_slice()));
        assert_eq!(job.labels.get("team").map(String::as_str), Some("media"));
        let later = registry.job("resize", &8u32).unwrap().due_in(std::time::Duration::from_secs(60));
        let later = later.insert_async(&store).await.unwrap();
        assert_eq!(job_of(&store, later.id()).await.due_at, T0 + 60_000);
        let err = registry.enqueue_async(&store, "resize", "not a number").await.unwrap_err();
        assert!(err.to_string().contains("does not decode as u32"), "{err}");
        let err = registry.enqueue_async(&store, "resise", &1u32).await.unwrap_err();
        assert!(err.to_string().contains("'resise'"), "{err}");
        assert_eq!(store.call(|s| s.counts()).await.unwrap().queue_total("bulk"), 2);
    }

    fn many_tasks_enqueueing_at_once_all_land(_f, store) {
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..10 {
                        store.enqueue(NewJob::new("w", "q", format!("[{t},{i}]").into_bytes())).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(store.call(|s| s.counts()).await.unwrap().queue_total("q"), 160);
    }

    fn async_enqueue_refuses_bad_input_as_the_store_does(_f, store) {
        let err = store.enqueue(NewJob::new("", "q", b"1".to_vec())).await.unwrap_err();
        assert!(matches!(&err, Error::InvalidInput(m) if m == "the wire name must not be empty"), "{err:?}");
        let err = store.enqueue_many(vec![NewJob::new("w", "q", vec![b'x'; 2 << 20])]).await.unwrap_err();
        assert!(matches!(err, Error::PayloadTooLarge { .. }), "{err:?}");
        assert_eq!(store.call(|s| s.counts()).await.unwrap().queue_total("q"), 0);
    }

    fn a_runtime_thread_runs_other_tasks_while_an_enqueue_waits_for_the_database(f, store) {
        // The application holds a unique key in a transaction it has not committed yet; the
        // async insert of that key waits for it (SQLite: for the write lock; PostgreSQL: for the
        // racing insert to commit, ON CONFLICT). Meanwhile a ticker on the same runtime ticks.
        let job = NewJob::new("digest", "low", b"1".to_vec()).unique(UniqueRule::key("held"));
        let (holding, held) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let db_arg = f.db.arg().to_string();
        let backend = f.db.backend();
        let app_job = job.clone();
        let app = std::thread::spawn(move || hold_in_app_tx(backend, &db_arg, &app_job, holding, released));
        let holder = held.recv().unwrap();

        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let insert = tokio::spawn({
            let store = store.clone();
            async move { store.insert(job).await }
        });
        // 300 ms at least, and on a loaded host up to 2 s (under the store's 5 s lock wait) for
        // the ticker's 20 ticks.
        let waiting = std::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        while ticks.load(Ordering::Relaxed) < 20 && waiting.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!insert.is_finished(), "the insert did not wait for the application's transaction");
        let ticked = ticks.load(Ordering::Relaxed);
        assert!(ticked >= 20, "the runtime ran only {ticked} ticks of 5 ms in {:?} while the enqueue waited", waiting.elapsed());
        release.send(()).unwrap();
        app.join().unwrap();
        assert_eq!(insert.await.unwrap().unwrap(), Enqueued::Duplicate(holder));
        ticker.abort();
        drop(store);
    }
}

/// A job read through the async store (the fixture's `Store` blocks: not on a runtime thread).
async fn job_of(store: &AsyncStore, id: backwave::JobId) -> Job {
    store.call(move |s| s.job(id)).await.unwrap().expect("the job exists")
}

/// In the application's own transaction on its own connection: enqueue `job`, say its id, hold
/// the transaction open until released, then commit.
fn hold_in_app_tx(
    backend: Backend,
    db: &str,
    job: &NewJob,
    holding: std::sync::mpsc::Sender<backwave::JobId>,
    released: std::sync::mpsc::Receiver<()>,
) {
    match backend {
        Backend::Sqlite => {
            let mut conn = backwave::rusqlite::Connection::open(db).unwrap();
            let tx = conn.transaction_with_behavior(backwave::rusqlite::TransactionBehavior::Immediate).unwrap();
            holding.send(backwave::enqueue_in_sqlite(&tx, job).unwrap().id()).unwrap();
            released.recv().unwrap();
            tx.commit().unwrap();
        }
        Backend::Postgres => {
            let mut client = backwave::postgres::Client::connect(db, backwave::postgres::NoTls).unwrap();
            let mut tx = client.transaction().unwrap();
            holding.send(backwave::enqueue_in_postgres(&mut tx, job).unwrap().id()).unwrap();
            released.recv().unwrap();
            tx.commit().unwrap();
        }
    }
}

#[cfg(feature = "postgres")]
#[test]
fn an_async_enqueue_on_postgres_through_tokio_postgres_commits_or_rolls_back_with_the_application() {
    let _backend = backend::use_backend(Backend::Postgres);
    let f = Fixture::new();
    let url = f.db.arg().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (kept, dropped) = runtime.block_on(async move {
        let (mut client, connection) =
            backwave::tokio_postgres::connect(&url, backwave::tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        let mut ids = Vec::new();
        for commit in [true, false] {
            let tx = client.transaction().await.unwrap();
            let job = NewJob::new("ship-order", "orders", b"{}".to_vec());
            ids.push(backwave::enqueue_in_tokio_postgres(&tx, &job).await.unwrap().id());
            if commit {
                tx.commit().await.unwrap()
            } else {
                tx.rollback().await.unwrap()
            }
        }
        (ids[0], ids[1])
    });
    assert_eq!(f.job(kept).state, JobState::Scheduled);
    assert!(f.store.job(dropped).unwrap().is_none());
    f.assert_sound();
}
