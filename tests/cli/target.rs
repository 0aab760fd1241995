//! `--db` / `BW_DB` given a PostgreSQL URL in a build with no PostgreSQL backend (issue 12): one
//! line saying so, exit 2 (usage), the password never printed, and nothing created where `bw`
//! runs, whichever command was asked for.

use std::path::Path;

use predicates::prelude::*;

use super::harness::*;

const URL: &str = "postgres://u:secret@h/db";

/// `bw ARGS` in the empty folder `dir`, with `BW_DB` unset unless `env` sets it.
fn bw_in(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = bw_at(Path::new("unused"));
    cmd.env_remove("BW_DB").current_dir(dir).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.assert()
}

fn assert_refused_and_untouched(dir: &Path, out: &assert_cmd::assert::Assert, wanted: &str) {
    let output = out.get_output();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(wanted), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "created {left:?}");
}

#[test]
fn a_postgres_url_is_refused_with_exit_2_without_the_password_or_a_file() {
    let refusal = "'postgres://u:***@h/db' is a PostgreSQL URL, but this build of BackWave supports SQLite files only";
    let commands: &[&[&str]] = &[
        &["stats"],
        &["init"],
        &["jobs", "list"],
        &["requeue", "--state", "dead-lettered", "--yes"],
        &["check"],
        &["top"],
        &["demo", "--no-tui", "--duration", "1s"],
        &["generate", "--jobs", "10"],
    ];
    for args in commands {
        let dir = tempfile::tempdir().unwrap();
        let flag = [&["--db", URL][..], args].concat();
        let out = bw_in(dir.path(), &[], &flag);
        assert_refused_and_untouched(dir.path(), &out, refusal);
        let out = bw_in(dir.path(), &[("BW_DB", URL)], args);
        assert_refused_and_untouched(dir.path(), &out, refusal);
    }
}

#[test]
fn a_malformed_postgres_url_is_quoted_redacted_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = bw_in(dir.path(), &[], &["--db", "POSTGRESQL://u:secret@h:54x2/db", "stats"]);
    assert_refused_and_untouched(
        dir.path(),
        &out,
        "'POSTGRESQL://u:***@h:54x2/db' is not a PostgreSQL URL: the port '54x2' is not a number from 1 to 65535",
    );
}

#[test]
fn a_file_named_like_a_url_is_reached_through_dot_slash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("postgres:")).unwrap();
    bw_in(dir.path(), &[], &["--db", "./postgres://x", "init"]).success();
    assert!(dir.path().join("postgres:/x").is_file());
    bw_in(dir.path(), &[], &["--db", "./postgres://x", "stats"]).success();
}

#[test]
fn help_names_path_or_url_and_never_shows_a_bw_db_password() {
    let dir = tempfile::tempdir().unwrap();
    bw_in(dir.path(), &[("BW_DB", URL)], &["--help"])
        .success()
        .stdout(predicate::str::contains("--db <PATH|URL>").and(predicate::str::contains("secret").not()));
}
