//! Starting a demo store over (`bw demo --reset`): every row of every BackWave table deleted in
//! one transaction, the schema and its version kept, the store still marked as the demo's. Only
//! a store `bw demo` made (`mark_demo`, in `admin.rs`) is ever emptied; the check and the
//! emptying are one transaction, so nothing else is emptied even by a race. Emptying rows in
//! place, rather than deleting a file, is what works the same on a PostgreSQL database, which
//! `bw` cannot delete.

use rusqlite::OptionalExtension;

use super::SqliteStore;
use crate::error::Result;
use crate::store::ops::demo::{not_a_demo_store, TABLES};
use crate::store::StoreTarget;

impl SqliteStore {
    pub fn reset_demo(&self) -> Result<()> {
        self.write(|tx| {
            let kind: Option<String> =
                tx.query_row("SELECT value FROM settings WHERE key = 'store_kind'", [], |r| r.get(0)).optional()?;
            if kind.as_deref() != Some("demo") {
                return Err(not_a_demo_store(&StoreTarget::File(self.path.clone())));
            }
            for table in TABLES {
                tx.execute(&format!("DELETE FROM {table}"), [])?;
            }
            tx.execute("INSERT INTO settings (key, value) VALUES ('store_kind', 'demo')", [])?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Error;
    use crate::model::{NewJob, Permission, WorkerInfo};
    use crate::store::ops::demo::created_tables;
    use crate::store::{PauseKind, SettingKey, SCHEMA_SQL};

    fn rows(store: &SqliteStore, table: &str) -> i64 {
        store.conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn the_reset_empties_every_table_of_the_schema() {
        let mut tables = created_tables(SCHEMA_SQL);
        let mut emptied: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
        tables.sort();
        emptied.sort();
        assert!(!tables.is_empty());
        assert_eq!(emptied, tables, "schema.sql's tables and the ones a demo reset empties");
    }

    #[test]
    fn a_demo_store_is_emptied_whole_and_stays_a_working_demo_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::create(&dir.path().join("demo.db")).unwrap();
        store.mark_demo().unwrap();
        assert!(store.bootstrap_admin("alice").unwrap());
        store.grant("alice", "bob", Permission::Operate).unwrap();
        store.set_setting("alice", SettingKey::Retention, "3d").unwrap();
        let id = store.enqueue_many(&[NewJob::new("flaky", "low", b"{}".to_vec())]).unwrap()[0].id();
        store.cancel("alice", &[id]).unwrap();
        // Pauses, limits and schedules are written once above the backends, on `Store`.
        let same = crate::Store::open(dir.path().join("demo.db")).unwrap();
        same.pause("alice", PauseKind::Queue, "low", None, false).unwrap();
        store
            .register_worker(&WorkerInfo {
                id: "h/1/g#a".into(),
                group: "g".into(),
                host: "h".into(),
                pid: 1,
                wire_names: vec!["flaky".into()],
                queues: vec!["low".into()],
                started_at: store.now(),
                last_heartbeat_at: store.now(),
                stale_after_ms: 30_000,
            })
            .unwrap();
        let spec = crate::store::LimitSpec { concurrency: None, rate: Some(crate::store::Rate::parse("5/s").unwrap()) };
        same.set_limit("alice", PauseKind::Queue, "low", &spec, None, true).unwrap();
        same.resume("alice", PauseKind::Queue, "low").unwrap();
        let low = ["low".to_string()];
        let policy = crate::RetryPolicy::default();
        let req = crate::store::ClaimRequest {
            worker_id: "h/1/g#a",
            group: "g",
            queues: &low,
            limit: 1,
            lease: std::time::Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        };
        store.enqueue_many(&[NewJob::new("flaky", "low", b"{}".to_vec())]).unwrap();
        assert_eq!(store.claim(&req).unwrap().len(), 1, "a claim under the rate limit writes its window");
        same.pause("alice", PauseKind::Queue, "low", None, false).unwrap();
        same.declare_schedules("app", &[crate::Schedule::new("hourly", "0 * * * *", "report", "low", "{}")]).unwrap();
        let mut wf = crate::Workflow::new("w");
        let first = wf.add(NewJob::new("flaky", "low", b"{}".to_vec()));
        wf.add_after(NewJob::new("flaky", "low", b"{}".to_vec()), &[first]).unwrap();
        same.enqueue_workflow(&wf).unwrap();
        for table in TABLES {
            assert!(rows(&store, table) > 0, "the test left {table} empty before the reset");
        }

        store.reset_demo().unwrap();

        for table in TABLES.iter().filter(|t| **t != "settings") {
            assert_eq!(rows(&store, table), 0, "{table} after the reset");
        }
        assert_eq!(rows(&store, "settings"), 1, "only the demo mark is left");
        assert!(store.is_demo().unwrap());
        assert!(!store.has_admin().unwrap());
        assert_eq!(store.retention().unwrap(), Duration::from_secs(14 * 86_400), "settings back to defaults");
        assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
        store.enqueue_many(&[NewJob::new("flaky", "low", b"{}".to_vec())]).unwrap()[0].id();
        assert_eq!(store.counts().unwrap().total(crate::JobState::Scheduled), 1, "the counts start from zero");
    }

    #[test]
    fn a_store_the_demo_did_not_make_is_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("real.db");
        let store = SqliteStore::create(&path).unwrap();
        let id = store.enqueue_many(&[NewJob::new("payroll", "critical", b"{}".to_vec())]).unwrap()[0].id();
        let e = store.reset_demo().unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "'{}' is not a demo store: only a store marked as a demo store (`Store::mark_demo`) is ever emptied",
                path.display()
            )
        );
        assert!(store.job(id).unwrap().is_some());
        assert_eq!(rows(&store, "transitions"), 1);
    }
}
