//! Broken and unwritable store files, through the library: a truncated, empty, foreign or
//! too-new file is refused with a clear error and left byte-for-byte as it was; a store this
//! user may not write opens read-only, serves reads and refuses every write.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use backwave::store::JobFilter;
use backwave::{Error, JobState, NewJob, Store};

use super::support;

/// A store with a few hundred jobs, closed (so the WAL is checkpointed into the main file).
pub fn filled_store(path: &Path, jobs: usize) {
    let store = Store::create(path).unwrap();
    store.bootstrap_admin(&backwave::store::current_actor()).unwrap();
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| NewJob::new("mail.send", "default", format!(r#"{{"n":{i},"pad":"{}"}}"#, "x".repeat(200))))
        .collect();
    store.enqueue_many(&batch).unwrap();
}

fn open_err(path: &Path) -> Error {
    Store::open(path).expect_err("a broken store opened")
}

/// The file is unchanged and SQLite left nothing beside it.
fn assert_untouched(path: &Path, before: &[u8]) {
    assert_eq!(std::fs::read(path).unwrap(), before, "the broken file was modified");
    for side in ["-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(side);
        assert!(!PathBuf::from(p).exists(), "opening a broken file left a {side} file beside it");
    }
}

#[test]
fn empty_file_is_refused_and_left_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").unwrap();
    let e = open_err(&db);
    assert!(matches!(e, Error::NotAStore { .. }), "{e:?}");
    assert!(e.to_string().contains("empty") && e.to_string().contains("empty.db"), "{e}");
    assert_untouched(&db, b"");
}

#[test]
fn non_sqlite_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    let text = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&db, &text).unwrap();
    for e in [open_err(&db), Store::create(&db).expect_err("create adopted a text file")] {
        assert!(matches!(e, Error::NotAStore { .. }), "{e:?}");
        assert!(e.to_string().contains("not an SQLite database"), "{e}");
    }
    assert_untouched(&db, &text);
}

#[test]
fn truncated_store_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cut.db");
    filled_store(&db, 400);
    let full = std::fs::read(&db).unwrap();
    assert!(full.len() > 64 * 1024, "the fixture store is too small to cut: {}", full.len());
    // Cut in the middle of the pages, and inside the 100-byte header.
    for cut in [full.len() / 2, 4096 + 17, 60] {
        std::fs::write(&db, &full[..cut]).unwrap();
        for e in [open_err(&db), Store::create(&db).expect_err("create adopted a truncated store")] {
            assert!(matches!(e, Error::Corrupt { .. }), "cut at {cut}: {e:?}");
            assert!(e.to_string().contains("truncated"), "{e}");
        }
        assert_untouched(&db, &full[..cut]);
    }
}

#[test]
fn future_schema_version_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("future.db");
    filled_store(&db, 10);
    {
        let conn = backwave::store::RawConnection::open(&db).unwrap();
        conn.batch("PRAGMA user_version = 99").unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    for e in [open_err(&db), Store::create(&db).expect_err("create migrated a future store")] {
        assert!(matches!(e, Error::SchemaTooNew { found: 99, .. }), "{e:?}");
        assert!(e.to_string().contains("99") && e.to_string().contains("upgrade"), "{e}");
    }
    assert_untouched(&db, &before);
}

/// A store file nobody may write, in a folder this user may write.
#[test]
fn read_only_store_file_serves_reads_and_refuses_writes() {
    if let Some(db) = support::unprivileged_child() {
        return read_only_checks(&db);
    }
    let dir = support::shared_tempdir();
    let db = dir.path().join("ro.db");
    filled_store(&db, 50);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    support::run_unprivileged(
        "faults::broken_files::read_only_store_file_serves_reads_and_refuses_writes",
        &db,
        read_only_checks,
    );
}

/// A writable store file in a folder this user may not write: WAL cannot make its side files.
#[test]
fn store_in_read_only_folder_serves_reads_and_refuses_writes() {
    if let Some(db) = support::unprivileged_child() {
        return read_only_checks(&db);
    }
    let dir = support::shared_tempdir();
    let db = dir.path().join("ro.db");
    filled_store(&db, 50);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    support::run_unprivileged(
        "faults::broken_files::store_in_read_only_folder_serves_reads_and_refuses_writes",
        &db,
        read_only_checks,
    );
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn read_only_checks(db: &Path) {
    let before = std::fs::read(db).unwrap();
    let store = Store::open(db).expect("a read-only store must still open for reading");
    assert!(store.is_read_only());
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 50);
    let page = store.list_jobs(&JobFilter::state(JobState::Scheduled), 10, 0).unwrap();
    assert_eq!(page.jobs.len(), 10);
    let id = page.jobs[0].id;
    assert_eq!(store.resolve_id(&id.to_string()).unwrap(), id);
    assert_eq!(store.history(id).unwrap().len(), 1);

    let e = store.enqueue(&NewJob::new("mail.send", "default", "{}")).expect_err("enqueued into a read-only store");
    assert!(matches!(e, Error::ReadOnly { .. }), "{e:?}");
    assert!(e.to_string().contains("read-only"), "{e}");
    let e = store.cancel(&backwave::store::current_actor(), &[id]).expect_err("cancelled in a read-only store");
    assert!(matches!(e, Error::ReadOnly { .. }), "{e:?}");
    assert!(matches!(store.reap_expired(10), Err(Error::ReadOnly { .. })));
    drop(store);
    assert_eq!(std::fs::read(db).unwrap(), before, "a read-only open changed the file");
}
