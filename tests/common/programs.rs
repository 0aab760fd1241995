//! Outside programs a test drives. Only the `sqlite3` shell is one (it is the store contract's
//! independent client); every other program a test runs is `bw` itself. A test that needs one
//! fails, naming what to install, when it is missing: it never passes without having run.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The path of `program` on PATH; panics naming what to install when there is none.
pub fn require(program: &str, install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .unwrap_or_else(|| panic!("this test needs `{program}` on PATH: install it ({install}; .ci/run does)"))
}

/// The `sqlite3` shell.
pub fn sqlite3() -> PathBuf {
    require("sqlite3", "apt-get install sqlite3")
}

/// The example program `name` (a worker process, the shop service), built by cargo for this
/// run's profile the first time a test asks in this process. Always built, never just found:
/// a filtered run (`cargo test --test runner engine::`) does not build examples, and a binary
/// left from an earlier build would run old code.
pub fn example(name: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf();
    let path = dir.join("examples").join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.get_or_insert_with(HashSet::new).insert(name.to_string()) {
        // target/debug is the `dev` profile; any other folder is named as its profile.
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(other) => other,
        };
        let mut cargo = Command::new(env!("CARGO"));
        // What cargo set for this test process describes the package, not the build; passed
        // on, ring's build script (which watches CARGO_MANIFEST_DIR) and everything after it
        // would be built again, a minute and more of both cores while the other tests run.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_CRATE_", "CARGO_PRIMARY_"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                cargo.env_remove(&*key);
            }
        }
        let status = cargo
            .args(["build", "--quiet", "--profile", profile, "--example", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo to build examples/{name}.rs: {e}"));
        assert!(status.success(), "building examples/{name}.rs failed");
    }
    assert!(path.exists(), "no {name} binary at {}", path.display());
    path
}
