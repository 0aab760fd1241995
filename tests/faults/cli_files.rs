//! Broken, unwritable and hostile input as an operator meets it, through the `bw` binary: a
//! broken store file is refused with exit 3 and a one-line message naming the file, and is left
//! byte-for-byte as it was; a read-only store serves every read command and refuses every write
//! command clearly; a hostile `--payload` is a usage error that quotes it, never a panic.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use backwave::store::current_actor;
use backwave::{NewJob, Store};

use super::broken_files::filled_store;
use super::support;

fn bw(db: &Path) -> Command {
    let mut c = Command::new(support::bw());
    c.arg("--db").arg(db).env_remove("BW_NOW").env_remove("BW_DB").stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const READS: [&[&str]; 4] = [&["jobs", "list"], &["stats"], &["log", "tail"], &["workers"]];
const WRITES: [&[&str]; 4] = [
    &["requeue", "--state", "dead-lettered", "--yes"],
    &["cancel", "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10"],
    &["purge", "--older-than", "0s", "--yes"],
    &["enqueue", "mail.send"],
];

fn assert_store_error(out: &Output, what: &str, wanted: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{what}: {stderr}");
    assert!(out.stdout.is_empty(), "{what} printed data: {}", text(&out.stdout));
    assert!(stderr.contains(wanted), "{what}: {stderr:?} does not say {wanted:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: not a one-line error: {stderr}");
}

#[test]
fn bw_refuses_broken_store_files_with_exit_3_and_leaves_them_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.db");
    filled_store(&good, 400);
    let full = std::fs::read(&good).unwrap();
    let mut future = {
        let p = dir.path().join("future-src.db");
        filled_store(&p, 5);
        backwave::store::RawConnection::open(&p).unwrap().batch("PRAGMA user_version = 99").unwrap();
        std::fs::read(&p).unwrap()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.db", Vec::new(), "empty"),
        ("notes.db", b"not a database at all\n".repeat(100), "not an SQLite database"),
        ("cut.db", full[..full.len() / 2].to_vec(), "truncated"),
        ("header.db", full[..60].to_vec(), "truncated"),
        ("future.db", std::mem::take(&mut future), "schema version 99"),
    ];
    for (name, bytes, wanted) in cases {
        let db = dir.path().join(name);
        std::fs::write(&db, &bytes).unwrap();
        for args in READS.iter().chain(WRITES.iter()) {
            let out = bw(&db).args(*args).output().unwrap();
            let what = format!("bw {} on {name}", args.join(" "));
            assert_store_error(&out, &what, wanted);
            assert!(text(&out.stderr).contains(name), "{what}: the error does not name the file");
            assert_eq!(std::fs::read(&db).unwrap(), bytes, "{what} modified the file");
        }
        for side in ["-wal", "-shm", "-journal"] {
            assert!(!dir.path().join(format!("{name}{side}")).exists(), "bw left {name}{side} beside a broken file");
        }
    }
}

/// A missing store is never created by a command that only reads or operates.
#[test]
fn bw_never_creates_a_missing_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("missing.db");
    for args in READS.iter().chain(WRITES.iter()) {
        let out = bw(&db).args(*args).output().unwrap();
        assert_store_error(&out, &format!("bw {}", args.join(" ")), "bw init");
        assert!(!db.exists(), "bw {} created the store", args.join(" "));
    }
}

fn read_only_cli_checks(db: &Path) {
    let before = std::fs::read(db).unwrap();
    let id = {
        let store = Store::open(db).unwrap();
        store.list_jobs(&Default::default(), 1, 0).unwrap().jobs[0].id.to_string()
    };
    for args in READS.iter().copied().chain([&["jobs", "show", id.as_str()][..]]) {
        let out = support::drop_privileges(bw(db).args(args)).output().unwrap();
        assert!(out.status.success(), "bw {} on a read-only store: {}", args.join(" "), text(&out.stderr));
    }
    for args in WRITES.iter().copied().chain([&["cancel", id.as_str()][..]]) {
        let out = support::drop_privileges(bw(db).args(args)).output().unwrap();
        assert_store_error(&out, &format!("bw {} on a read-only store", args.join(" ")), "read-only");
    }
    // A reveal is refused too, saying why: it writes its audit row (a bare "read-only" read as
    // a refusal to read).
    let dead = {
        let store = Store::open(db).unwrap();
        let filter =
            backwave::store::JobFilter { states: vec![backwave::JobState::DeadLettered], ..Default::default() };
        store.list_jobs(&filter, 1, 0).unwrap().jobs[0].id.to_string()
    };
    let out = support::drop_privileges(bw(db).args(["jobs", "show", &dead, "--detail"])).output().unwrap();
    assert_store_error(&out, "bw jobs show --detail on a read-only store", "a reveal is recorded in the audit log");
    assert_eq!(std::fs::read(db).unwrap(), before, "a command changed the read-only store");
}

/// The store's operator when the check runs as `nobody`.
fn operator_store(db: &Path) {
    filled_store(db, 30);
    let store = Store::open(db).unwrap();
    let who = if support::is_root() { "nobody".to_string() } else { current_actor() };
    store.bootstrap_admin(&current_actor()).unwrap();
    store.grant(&current_actor(), &who, backwave::Permission::Operate).unwrap();
    store.grant(&current_actor(), &who, backwave::Permission::ViewFailureDetail).unwrap();
    // A dead-lettered and a succeeded job, so that a requeue or a purge has work to refuse.
    drop(store);
    let store = Store::open(db).unwrap();
    let policy = backwave::RetryPolicy::new(1, std::time::Duration::ZERO).unwrap();
    let claimed = store
        .claim(&backwave::store::ClaimRequest {
            worker_id: "w-1",
            group: "g",
            queues: &["default".to_string()],
            limit: 2,
            lease: std::time::Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap();
    let outcomes = [
        backwave::store::Outcome::Failed {
            message: "boom".into(),
            detail: Some(backwave::FailureDetail {
                kind: "std::io::Error".into(),
                message: "boom".into(),
                chain: vec![],
                backtrace: None,
            }),
            retry_in: None,
        },
        backwave::store::Outcome::Succeeded,
    ];
    for (j, outcome) in claimed.iter().zip(outcomes) {
        store
            .complete(&backwave::store::Completion { job_id: j.id, worker_id: "w-1".into(), attempt: 1, outcome })
            .unwrap();
    }
    store.register_worker(&live_worker()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
}

/// A live worker for `mail.send`, so a bulk requeue has jobs it would really requeue.
fn live_worker() -> backwave::WorkerInfo {
    let now = backwave::store::system_now();
    backwave::WorkerInfo {
        id: backwave::JobId::new().to_string(),
        group: "g".into(),
        host: "test".into(),
        pid: 1,
        wire_names: vec!["mail.send".into()],
        queues: vec!["default".into()],
        started_at: now,
        last_heartbeat_at: now,
        stale_after_ms: 3_600_000,
    }
}

#[test]
fn bw_on_a_read_only_store_file_reads_and_refuses_writes() {
    let dir = support::shared_tempdir();
    let db = dir.path().join("ro.db");
    operator_store(&db);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    read_only_cli_checks(&db);
}

#[test]
fn bw_on_a_store_in_a_read_only_folder_reads_and_refuses_writes() {
    let dir = support::shared_tempdir();
    let db = dir.path().join("ro.db");
    operator_store(&db);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    read_only_cli_checks(&db);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn hostile_payloads_are_usage_errors_that_quote_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    drop(store);
    let deep = "[".repeat(100_000);
    let payloads = ["", "{", "{\"a\":1,}", "NaN", "1e999999", "\u{1b}]0;pwned\u{7}", &deep];
    for p in payloads {
        let out = bw(&db).args(["enqueue", "mail.send", "--payload", p]).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "payload {p:.40?}: {stderr:.300}");
        assert!(stderr.contains("--payload"), "{stderr:.300}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "not one line: {stderr:.300}");
        super::terminal::assert_inert(&out.stderr, &format!("the error for payload {p:.20?}"));
        if !p.is_empty() && p.chars().all(|c| !c.is_control()) {
            assert!(stderr.contains(&p[..p.len().min(40)]), "the error does not quote the payload: {stderr:.300}");
        }
    }
    // JSON that escapes a control character is a fine payload: stored as given.
    let out = bw(&db).args(["enqueue", "mail.send", "--payload", r#"{"text":"\u001b[2J"}"#]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(Store::open(&db).unwrap().counts().unwrap().queue_total("default"), 1);
}

/// Found by the hostile-input tests: `bw purge` subtracts `--older-than` from now after casting
/// its milliseconds to i64 (`src/cli/purge.rs`, `run`). A duration past i64 milliseconds wraps:
/// `--older-than 18446743073709551s` becomes a cutoff in 2058 and the purge deletes EVERY
/// terminal job ("finished more than 213503970760d ago (before 2058-…)"), and
/// `--older-than 300000000y` wraps to a cutoff `rfc3339` cannot print, and bw panics.
#[test]
fn purge_older_than_an_enormous_duration_deletes_nothing() {
    for older in ["18446743073709551s", "300000000y"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("purge.db");
        terminal_store(&db, 50);
        let out = bw(&db).args(["purge", "--older-than", older, "--yes"]).output().unwrap();
        let left = Store::open(&db).unwrap().count_purgeable(i64::MAX).unwrap();
        assert_eq!(
            left,
            50,
            "purge --older-than {older} deleted {} of 50 recent jobs: {}",
            50 - left,
            text(&out.stdout)
        );
        assert_ne!(out.status.code(), Some(101), "bw purge --older-than {older} panicked: {}", text(&out.stderr));
    }
}

/// `n` jobs that succeeded just now; the current user may operate.
fn terminal_store(db: &Path, n: usize) {
    let store = Store::create(db).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    store.enqueue_many(&(0..n).map(|_| NewJob::new("w", "q", "{}")).collect::<Vec<_>>()).unwrap();
    let policy = backwave::RetryPolicy::default();
    let claimed = store
        .claim(&backwave::store::ClaimRequest {
            worker_id: "w-1",
            group: "g",
            queues: &["q".to_string()],
            limit: n,
            lease: std::time::Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap();
    let done: Vec<_> = claimed
        .iter()
        .map(|j| backwave::store::Completion {
            job_id: j.id,
            worker_id: "w-1".into(),
            attempt: j.attempt,
            outcome: backwave::store::Outcome::Succeeded,
        })
        .collect();
    store.complete_many(&done).unwrap();
    assert_eq!(store.count_purgeable(i64::MAX).unwrap(), n as u64);
}

/// Found by the hostile-input tests: a retention longer than i64 milliseconds (`300000000y`, an
/// admin's "keep forever") was accepted by `bw config set`, and the engine's unattended sweep
/// (`engine/runtime.rs`, `Dispatcher::sweep`) cast it to i64, which wraps negative, so the cutoff
/// landed in the future and the sweep deleted EVERY terminal job with its log.
#[test]
fn retention_longer_than_i64_millis_never_sweeps_everything() {
    use backwave::engine::{Engine, Registry, WorkerGroup};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("retention.db");
    terminal_store(&db, 50);
    let out = bw(&db).args(["config", "set", "retention", "300000000y"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "bw config set retention 300000000y: {}", text(&out.stderr));
    // Another program may still write it: the sweep must not read it as "delete everything".
    Store::open(&db)
        .unwrap()
        .raw_execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('retention', '300000000y')", &[])
        .unwrap();
    let mut engine = Engine::new(&db, Registry::new());
    engine.add_worker_group(WorkerGroup::new("sweeper")).sweep_interval(std::time::Duration::from_millis(20));
    let running = engine.start().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    running.shutdown(std::time::Duration::from_secs(1));
    let left = Store::open(&db).unwrap().count_purgeable(i64::MAX).unwrap();
    assert_eq!(left, 50, "the engine's sweep deleted {} of 50 jobs that finished just now", 50 - left);
}
