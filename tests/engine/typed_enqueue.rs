//! Typed enqueue anywhere (issue 41): a cloneable `Enqueuer` request handlers hold for the
//! service's lifetime (sync and async, before and after the engine stops), and typed enqueue
//! inside the application's own transaction (rusqlite, postgres, tokio-postgres) with the
//! registry's queue, labels and payload check, its handler's retry policy at claim, a unique
//! rule given per job or by the registration, committed or rolled back with the application's own write.

use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry};
use backwave::{AsyncStore, Enqueued, JobState, RetryPolicy, UniqueRule};
use serde::{Deserialize, Serialize};

use super::support::*;
use crate::backend::{both_backends, Backend};

#[derive(Serialize, Deserialize)]
struct ShipOrder {
    order: u64,
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.handle::<ShipOrder>("ship-order", |_, _| Ok(())).queue("orders").label("team", "shop");
    registry
        .handle::<ShipOrder>("charge-card", |_, _| Err(HandlerError::msg("declined")))
        .queue("orders")
        .retry(RetryPolicy::new(2, Duration::from_millis(10)).unwrap());
    registry.handle::<ShipOrder>("invoice", |_, _| Ok(())).queue("orders").unique(UniqueRule::by_payload());
    registry
}

both_backends! {
    /// The handle is cloned into a thread and into async code; both enqueue typed jobs on the
    /// registered queue with the registered labels while the engine serves, a payload of the
    /// wrong type is refused before anything is stored, and the handle still enqueues after the
    /// engine's shutdown (the job waits for the next engine).
    fn a_cloned_enqueuer_enqueues_typed_jobs_sync_and_async_and_outlives_the_engine() {
        let t = test_store();
        let mut engine = Engine::new(&t.db, registry());
        engine.add_worker_group(group("g", DispatchPolicy::strict(["orders"]), 3));
        let before_start = engine.enqueuer();
        let running = engine.start().unwrap();
        let jobs = running.enqueuer();

        let (db, handle) = (t.db.target(), jobs.clone());
        let from_thread = std::thread::spawn(move || {
            let store = backwave::Store::open(db).unwrap();
            handle.enqueue(&store, "ship-order", &ShipOrder { order: 1 }).unwrap()
        })
        .join()
        .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (db, handle) = (t.db.target(), jobs.clone());
        let from_async = rt.block_on(async move {
            let store = AsyncStore::open(db).await.unwrap();
            handle.enqueue_async(&store, "ship-order", &ShipOrder { order: 2 }).await.unwrap()
        });
        let from_before = before_start.enqueue(&t.store, "ship-order", &ShipOrder { order: 3 }).unwrap();
        for id in [from_thread, from_async, from_before] {
            let j = wait_terminal(&t.store, id);
            assert_eq!((j.state, j.queue.as_str()), (JobState::Succeeded, "orders"));
            assert_eq!(j.labels.get("team").map(String::as_str), Some("shop"));
        }
        let wrong = jobs.enqueue(&t.store, "ship-order", &"not an order");
        assert!(matches!(wrong, Err(backwave::Error::InvalidInput(ref m)) if m.contains("does not decode")), "{wrong:?}");
        running.shutdown(Duration::from_secs(1));

        let later = jobs.enqueue(&t.store, "ship-order", &ShipOrder { order: 4 }).unwrap();
        assert_eq!(job(&t.store, later).state, JobState::Scheduled);
        drop(rt);
    }
}

/// Enqueue `job` of the registry in the application's own transaction on `t`'s database,
/// beside the application's own write, committed or rolled back.
fn in_app_tx(t: &TestStore, commit: bool, tokio_client: bool, job: backwave::engine::Enqueue) -> Enqueued {
    match t.db.backend() {
        Backend::Sqlite => {
            let mut conn = backwave::rusqlite::Connection::open(t.db.file()).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            conn.execute("CREATE TABLE IF NOT EXISTS orders (n INTEGER)", []).unwrap();
            let tx = conn.transaction_with_behavior(backwave::rusqlite::TransactionBehavior::Immediate).unwrap();
            tx.execute("INSERT INTO orders VALUES (1)", []).unwrap();
            let done = job.enqueue_in_sqlite(&tx).unwrap();
            if commit {
                tx.commit().unwrap()
            } else {
                tx.rollback().unwrap()
            }
            done
        }
        Backend::Postgres if tokio_client => {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let url = t.db.arg().to_string();
            rt.block_on(async move {
                let (mut client, connection) =
                    backwave::tokio_postgres::connect(&url, backwave::tokio_postgres::NoTls).await.unwrap();
                tokio::spawn(connection);
                client.batch_execute("CREATE TABLE IF NOT EXISTS orders (n bigint)").await.unwrap();
                let tx = client.transaction().await.unwrap();
                tx.execute("INSERT INTO orders VALUES (1)", &[]).await.unwrap();
                let done = job.enqueue_in_tokio_postgres(&tx).await.unwrap();
                if commit {
                    tx.commit().await.unwrap()
                } else {
                    tx.rollback().await.unwrap()
                }
                done
            })
        }
        Backend::Postgres => {
            let mut client = backwave::postgres::Client::connect(t.db.arg(), backwave::postgres::NoTls).unwrap();
            client.batch_execute("CREATE TABLE IF NOT EXISTS orders (n bigint)").unwrap();
            let mut tx = client.transaction().unwrap();
            tx.execute("INSERT INTO orders VALUES (1)", &[]).unwrap();
            let done = job.enqueue_in_postgres(&mut tx).unwrap();
            if commit {
                tx.commit().unwrap()
            } else {
                tx.rollback().unwrap()
            }
            done
        }
    }
}

both_backends! {
    /// A typed job enqueued in the application's transaction has its registered queue and
    /// labels; a rollback leaves nothing, a unique rule answers the holder inside a later
    /// transaction, and the handler's own retry policy (2 attempts) is the one its job gets at
    /// claim. On PostgreSQL through both the blocking and the tokio client.
    fn typed_enqueue_in_the_application_s_transaction_keeps_the_registry_s_rules() {
        let clients: &[bool] = if crate::backend::current() == Backend::Postgres { &[false, true] } else { &[false] };
        for &tokio_client in clients {
            let t = test_store();
            let jobs = Engine::new(&t.db, registry()).enqueuer();
            let rolled_back = in_app_tx(&t, false, tokio_client, jobs.job("ship-order", &ShipOrder { order: 1 }).unwrap());
            assert!(t.store.job(rolled_back.id()).unwrap().is_none(), "a rolled-back enqueue left a job");

            let kept = in_app_tx(&t, true, tokio_client, jobs.job("ship-order", &ShipOrder { order: 2 }).unwrap());
            let j = job(&t.store, kept.id());
            assert_eq!((j.state, j.queue.as_str(), j.wire_name.as_str()), (JobState::Scheduled, "orders", "ship-order"));
            assert_eq!(j.labels.get("team").map(String::as_str), Some("shop"));

            let unique = || jobs.job("ship-order", &ShipOrder { order: 3 }).unwrap().unique(UniqueRule::key("order:3"));
            let first = in_app_tx(&t, true, tokio_client, unique());
            let second = in_app_tx(&t, true, tokio_client, unique());
            assert!(matches!(first, Enqueued::Created(_)), "{first:?}");
            assert_eq!(second, Enqueued::Duplicate(first.id()));
            // The registration's own rule applies with no word from the caller: one invoice
            // per order, whichever transaction enqueues it.
            let invoice = || jobs.job("invoice", &ShipOrder { order: 7 }).unwrap();
            let first = in_app_tx(&t, true, tokio_client, invoice());
            assert!(matches!(first, Enqueued::Created(_)), "{first:?}");
            assert_eq!(in_app_tx(&t, true, tokio_client, invoice()), Enqueued::Duplicate(first.id()));
            assert_eq!(invoice().insert(&t.store).unwrap(), Enqueued::Duplicate(first.id()));
            let other = jobs.job("invoice", &ShipOrder { order: 8 }).unwrap().insert(&t.store).unwrap();
            assert!(matches!(other, Enqueued::Created(_)), "{other:?}");

            let charge = in_app_tx(&t, true, tokio_client, jobs.job("charge-card", &ShipOrder { order: 4 }).unwrap());
            let mut engine = Engine::new(&t.db, registry());
            engine.add_worker_group(group("g", DispatchPolicy::strict(["orders"]), 5));
            let running = engine.start().unwrap();
            let c = wait_terminal(&t.store, charge.id());
            running.shutdown(Duration::from_secs(1));
            assert_eq!((c.state, c.attempt, c.max_attempts), (JobState::DeadLettered, 2, Some(2)));
        }
    }
}
