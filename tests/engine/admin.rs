//! The application's first store has an admin (issue 41): `Engine::admin` names who becomes the
//! store's admin when the engine starts on a store that has none, so the on-call's first requeue
//! is not refused; a store that has one keeps it, and a name nobody could hold is refused before
//! anything is stored.

use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, Registry};
use backwave::{Error, Permission, Store};

use super::support::*;
use crate::backend::{both_backends, TestDb};

fn engine(db: &TestDb, admin: &str) -> Engine {
    let mut engine = Engine::new(db, Registry::new());
    engine.admin(admin);
    engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 3));
    engine
}

both_backends! {
    fn an_engine_names_the_admin_of_a_store_it_creates_and_leaves_an_existing_one_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let running = engine(&db, "oncall").start().unwrap();
        let store = Store::open(&db).unwrap();
        assert!(store.permissions("oncall").unwrap().contains(&Permission::Admin));
        // The on-call can act at once: grant a teammate.
        store.grant("oncall", "ann", Permission::Operate).unwrap();
        running.shutdown(Duration::from_secs(5));
        // Another engine naming someone else changes nothing: the store has its admin.
        let running = engine(&db, "mallory").start().unwrap();
        assert!(!store.permissions("mallory").unwrap().contains(&Permission::Admin));
        running.shutdown(Duration::from_secs(5));
    }

    fn an_admin_name_nobody_could_hold_is_refused_before_anything_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        Store::create(&db).unwrap();
        let err = engine(&db, "on call").start().unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
        assert!(err.to_string().contains("'on call'"), "{err}");
        assert!(!Store::open(&db).unwrap().has_admin().unwrap());
    }
}
