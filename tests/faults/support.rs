//! Harness pieces shared by the fault tests: paths of the built binaries, running a check as an
//! unprivileged user (root ignores file permissions, so read-only tests must drop to `nobody`
//! when the suite runs as root, as it does in containers), and small store helpers.

use std::path::{Path, PathBuf};
use std::process::Command;

use backwave::{Store, StoreTarget};

/// Set in a child test process re-run as an unprivileged user: the store path to check.
const CHILD_ENV: &str = "BW_FAULTS_UNPRIVILEGED_DB";
/// `nobody` on Linux.
const NOBODY: u32 = 65534;

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// In the re-run child, the store the parent prepared.
pub fn unprivileged_child() -> Option<PathBuf> {
    std::env::var_os(CHILD_ENV).map(PathBuf::from)
}

/// A temporary folder every user may enter, so a check re-run as `nobody` can reach it.
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

pub fn drop_privileges(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if is_root() {
        cmd.uid(NOBODY).gid(NOBODY).env("HOME", "/tmp");
    }
    cmd
}

/// Run `check(db)` as a user without write access: in this process when it is not root, else in
/// this test binary re-run as `nobody` with only `test` selected.
pub fn run_unprivileged(test: &str, db: &Path, check: impl FnOnce(&Path)) {
    if !is_root() {
        return check(db);
    }
    let exe = std::env::current_exe().unwrap();
    let out = drop_privileges(Command::new(exe).args([test, "--exact", "--nocapture", "--test-threads=1"]))
        .env(CHILD_ENV, db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the unprivileged re-run of {test} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `bw` binary that cargo built for this test run.
pub fn bw() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bw"))
}

/// The store's integrity check (on SQLite `PRAGMA integrity_check` and the foreign keys):
/// nothing to report.
pub fn assert_intact(db: impl Into<StoreTarget>) {
    let store = Store::open(db).unwrap();
    let problems = store.check_integrity().unwrap();
    assert!(problems.is_empty(), "the store is damaged: {problems:?}");
}
