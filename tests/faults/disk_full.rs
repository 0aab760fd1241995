//! A full disk, for real: a small tmpfs mounted in a mount namespace of its own (`unshare`, as
//! root or as a user mapped to root), the store copied onto it and the rest of it filled. `bw`
//! says the disk is full (not SQLite's "disk I/O error"), exits 3, and the store is intact once
//! there is room again; `bw demo` shows the error while it runs and exits non-zero when the
//! disk stays full.

use std::path::Path;
use std::process::{Command, Output};

use backwave::store::current_actor;
use backwave::Store;

use super::support;

/// Run `script` (sh) in a new mount namespace with a tmpfs of `size` mounted at `$MNT`, `$BW`
/// the binary under test and `$STORE` the store to copy there.
fn on_a_small_disk(store: &Path, size: &str, script: &str) -> Output {
    let mnt = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("unshare");
    if !support::is_root() {
        cmd.arg("--map-root-user");
    }
    let out = cmd
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("set -u; mount -t tmpfs -o size={size} bwfull \"$MNT\" || exit 99; {script}"))
        .env("MNT", mnt.path())
        .env("BW", support::bw())
        .env("STORE", store)
        .env_remove("BW_DB")
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(99),
        "could not mount a tmpfs in a mount namespace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_store_without_a_wal_file_on_a_full_disk_says_the_disk_is_full_and_stays_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let store = Store::create(&db).unwrap();
    // The admin the namespace's `bw` runs as: this user, or root when mapped to it.
    store.bootstrap_admin(&current_actor()).unwrap();
    store.grant(&current_actor(), "root", backwave::Permission::Admin).unwrap();
    drop(store);
    assert!(!dir.path().join("store.db-wal").exists(), "the store was left with a -wal file");

    let out = on_a_small_disk(
        &db,
        "1m",
        r#"cp "$STORE" "$MNT/s.db"
           head -c 2M /dev/zero > "$MNT/fill" 2>/dev/null
           "$BW" --db "$MNT/s.db" grant bob operate; echo "full: $?"
           rm "$MNT/fill"
           "$BW" --db "$MNT/s.db" grant bob operate; echo "room: $?"
           "$BW" --db "$MNT/s.db" audit >/dev/null; echo "read: $?""#,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("full: 3"), "{stdout}\n{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.contains("the disk holding the store is full"), "{stderr}");
    assert!(!first.contains("disk I/O error") || first.contains("filesystem has"), "{stderr}");
    assert!(stdout.contains("room: 0"), "with room again the grant works: {stdout}\n{stderr}");
    assert!(stdout.contains("read: 0"), "{stdout}\n{stderr}");
}

#[test]
fn demo_on_a_disk_that_fills_up_shows_the_error_as_it_happens_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    // `bw demo` makes its own store; an empty folder's worth on the small disk.
    let out = on_a_small_disk(
        &dir.path().join("unused.db"),
        "8m",
        r#"cd "$MNT"
           "$BW" --db "$MNT/demo.db" --format json demo --no-tui --duration 8s --rate 200 --reset > /dev/null &
           demo=$!
           sleep 2
           head -c 16M /dev/zero > "$MNT/fill" 2>/dev/null
           wait $demo; echo "demo: $?""#,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("demo: 3"), "the demo should exit 3 when the disk stays full: {stdout}\n{stderr}");
    let stopping = stderr.find("stopping the workers").unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stderr[..stopping].contains("enqueue: the disk holding the store is full"),
        "the error was not shown while the demo ran: {stderr}"
    );
    assert!(stderr.contains("the store did not recover"), "{stderr}");
}
