//! Opening files: a missing path is never created, a file that is not a store (or is damaged,
//! or too new) is refused with a typed error and left byte-for-byte as it was, a read-only file
//! or folder still reads, and the pragmas the store relies on are really in force.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use backwave::store::{JobFilter, RawConnection, RawValue, SCHEMA_VERSION};
use backwave::{Error, JobState, NewJob, Store};

use super::{Fixture, ADMIN};

/// The bytes and mtime of a file, to prove nothing touched it.
fn snapshot(path: &Path) -> (Vec<u8>, SystemTime) {
    (fs::read(path).unwrap(), fs::metadata(path).unwrap().modified().unwrap())
}

/// Files in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// Open `path`, expect it refused, and check that neither it nor its folder changed.
fn refused(path: &Path) -> Error {
    let before = (snapshot(path), listing(path.parent().unwrap()));
    let err = Store::open(path).expect_err("a file that is not a usable store must be refused");
    assert_eq!((snapshot(path), listing(path.parent().unwrap())), before, "refusing {} wrote to it", path.display());
    // `create` refuses it just the same: it is not an empty file to initialise.
    if fs::metadata(path).unwrap().len() > 0 {
        Store::create(path).expect_err("create must not take over a file that is not a store");
        assert_eq!((snapshot(path), listing(path.parent().unwrap())), before);
    }
    err
}

fn made_store(dir: &Path) -> PathBuf {
    let fx_path = dir.join("store.db");
    let store = Store::create(&fx_path).unwrap();
    store.enqueue(&NewJob::new("w", "q", b"{}".to_vec())).unwrap();
    drop(store);
    fx_path
}

#[test]
fn opening_a_missing_path_creates_nothing_and_says_how_to_create_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.db");
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::StoreMissing { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("`Store::create`") && !msg.contains("bw "),
        "{msg}"
    );
    assert!(listing(dir.path()).is_empty(), "nothing was created: {:?}", listing(dir.path()));
    // A missing folder too.
    assert!(matches!(Store::open(dir.path().join("sub/x.db")), Err(Error::StoreMissing { .. })));
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn a_text_file_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    fs::write(&path, "remember to buy milk\n".repeat(50)).unwrap();
    let err = refused(&path);
    assert!(matches!(err, Error::NotAStore { .. }), "{err:?}");
    assert!(err.to_string().contains("not an SQLite database"), "{err}");
}

#[test]
fn a_zero_length_file_is_refused_untouched_by_open_and_initialised_by_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    fs::write(&path, b"").unwrap();
    let err = refused(&path);
    assert!(matches!(err, Error::NotAStore { .. }), "{err:?}");
    assert!(err.to_string().contains("empty"), "{err}");
    // `touch x.db && bw init --db x.db` is a fair thing to do.
    Store::create(&path).unwrap();
    assert!(Store::open(&path).is_ok());
}

#[test]
fn a_truncated_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = made_store(dir.path());
    let full = fs::read(&path).unwrap();
    assert!(full.len() >= 4 * 4096, "a store spans several pages");
    for keep in [full.len() / 2, 4096, 99, 20] {
        fs::write(&path, &full[..keep]).unwrap();
        let err = refused(&path);
        assert!(matches!(err, Error::Corrupt { .. }), "cut to {keep} bytes: {err:?}");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}

#[test]
fn a_database_from_a_newer_backwave_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = made_store(dir.path());
    {
        let conn = RawConnection::open(&path).unwrap();
        conn.batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1)).unwrap();
    }
    let err = refused(&path);
    match &err {
        Error::SchemaTooNew { found, supported, .. } => {
            assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION))
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert!(err.to_string().contains("upgrade the backwave library"), "{err}");
}

#[test]
fn another_programs_sqlite_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let conn = RawConnection::open(&path).unwrap();
        conn.batch("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'x');")
            .unwrap();
    }
    let err = refused(&path);
    assert!(matches!(err, Error::NotAStore { .. }), "{err:?}");
    assert!(err.to_string().contains("no BackWave schema"), "{err}");
}

#[test]
fn pragmas_are_in_force_after_open() {
    let fx = Fixture::new();
    let reopened = Store::open(fx.path()).unwrap();
    for store in [&fx.store, &reopened] {
        let pragma = |name: &str| store.pragma(name).unwrap();
        assert_eq!(pragma("journal_mode"), RawValue::Text("wal".into()));
        assert_eq!(pragma("synchronous"), RawValue::Integer(1), "NORMAL");
        assert_eq!(pragma("foreign_keys"), RawValue::Integer(1));
        assert_eq!(pragma("busy_timeout"), RawValue::Integer(5000));
        assert_eq!(pragma("user_version"), RawValue::Integer(SCHEMA_VERSION));
    }
    // `create` on an existing store opens it and changes nothing.
    let id = fx.enqueue("w", "q");
    let again = Store::create(fx.path()).unwrap();
    assert_eq!(again.job(id).unwrap().map(|j| j.state), Some(JobState::Scheduled));
}

/// What a read-only store must do: every read works, every write is `Error::ReadOnly`.
fn check_read_only(path: &Path) {
    let before = snapshot(path);
    let store = Store::open(path).unwrap();
    assert!(store.is_read_only(), "{} should open read-only", path.display());
    let page = store.list_jobs(&JobFilter::default(), 10, 0).unwrap();
    assert_eq!(page.jobs.len(), 1);
    let id = page.jobs[0].id;
    assert_eq!(store.job(id).unwrap().unwrap().wire_name, "w");
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 1);
    assert_eq!(store.history(id).unwrap().len(), 1);
    assert!(store.check_integrity().unwrap().is_empty());
    let writes: Vec<(&str, Result<(), Error>)> = vec![
        ("enqueue", store.enqueue(&NewJob::new("w", "q", vec![])).map(drop)),
        ("requeue", store.requeue(ADMIN, &[id]).map(drop)),
        ("cancel", store.cancel(ADMIN, &[id]).map(drop)),
        ("reap", store.reap_expired(10).map(drop)),
        ("sweep", store.sweep(i64::MAX, 10).map(drop)),
    ];
    for (what, result) in writes {
        match result {
            Err(Error::ReadOnly { why }) => assert!(why.contains("not writable"), "{what}: {why}"),
            other => panic!("{what} on a read-only store: expected Error::ReadOnly, got {other:?}"),
        }
    }
    drop(store);
    assert_eq!(snapshot(path), before);
}

#[test]
fn read_only_stores_read_and_refuse_writes() {
    use std::os::unix::fs::PermissionsExt;
    // File permissions do not bind root, and CI runs as root: there this test starts itself
    // again as `nobody`, which finds the store's path in the environment and checks it.
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        check_read_only(Path::new(&path));
        return;
    }
    let set_mode = |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    // Case 1: the file is read-only, the folder writable. Case 2: the folder is read-only.
    for (file_mode, dir_mode) in [(0o444, 0o777), (0o666, 0o555)] {
        let dir = tempfile::tempdir().unwrap();
        let path = made_store(dir.path());
        set_mode(&path, file_mode);
        set_mode(dir.path(), dir_mode);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "store::open::read_only_stores_read_and_refuse_writes", "--nocapture"])
                .env(CHILD_ENV, &path)
                .uid(65534)
                .gid(65534)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.contains("1 passed"), "file {file_mode:o} dir {dir_mode:o}:\n{text}");
        } else {
            check_read_only(&path);
        }
        set_mode(dir.path(), 0o755);
    }
}

use std::os::unix::process::CommandExt;

/// Where the unprivileged re-run of the read-only test finds its store.
const CHILD_ENV: &str = "BW_STORE_TEST_READ_ONLY_PATH";

#[test]
fn two_processes_creating_the_same_new_store_both_succeed() {
    // The engine creates its store if missing; several worker processes start at once.
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("race.db");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::create(&path).map(|s| s.enqueue(&NewJob::new("w", "q", vec![])).unwrap())
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().expect("every concurrent create succeeds");
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 4);
        assert!(store.check_integrity().unwrap().is_empty());
    }
}

/// The driver's error type stays inside `store/`: any other failure is `Error::Database` with
/// the driver's own message (what `bw` prints, exit 3), and a write lock held past the busy
/// timeout is still `Error::Busy`, not a generic database error.
#[test]
fn driver_errors_keep_their_message_as_error_database_and_a_held_lock_is_still_busy() {
    let fx = Fixture::new();
    let err = fx.store.raw_execute("INSERT INTO nope VALUES (1)", &[]).unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    assert_eq!(err.to_string(), "no such table: nope");

    let holder = RawConnection::open(fx.path()).unwrap();
    holder.batch("BEGIN IMMEDIATE").unwrap();
    fx.store.set_busy_timeout(std::time::Duration::from_millis(50)).unwrap();
    let err = fx.store.enqueue(&NewJob::new("w", "q", vec![])).unwrap_err();
    assert!(matches!(err, Error::Busy), "{err:?}");
    holder.batch("ROLLBACK").unwrap();
    fx.store.enqueue(&NewJob::new("w", "q", vec![])).unwrap();
}
