//! Outside programs a test drives. Only the `sqlite3` shell is one (it is the store contract's
//! independent client); every other program a test runs is `bw` itself. A test that needs one
//! fails, naming what to install, when it is missing: it never passes without having run.
#![allow(dead_code)] // each binary uses the part it needs

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

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
