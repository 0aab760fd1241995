//! `--db` / `BW_DB` given a PostgreSQL URL that `bw` cannot use (issue 12): a malformed URL, a
//! server that cannot be reached, `bw generate --force` (which replaces files only), or any URL
//! in a build without the `postgres` feature. Each is one line quoting the URL with its password as `***`,
//! its exit status, and nothing created where `bw` runs, whichever command was asked for.

use std::path::Path;

use predicates::prelude::*;

use super::harness::*;

/// Every kind of command: reads, the creator, a bulk writer, the probe, the dashboard, the demo
/// (which picks its own store) and the generator.
const COMMANDS: &[&[&str]] = &[
    &["stats"],
    &["init"],
    &["jobs", "list"],
    &["requeue", "--state", "dead-lettered", "--yes"],
    &["check"],
    &["top"],
    &["demo", "--no-tui", "--duration", "1s"],
    &["generate", "--jobs", "10"],
];

/// `bw ARGS` in the empty folder `dir`, with `BW_DB` unset unless `env` sets it.
fn bw_in(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = bw_at(Path::new("unused"));
    cmd.env_remove("BW_DB").current_dir(dir).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.assert()
}

fn assert_refused_and_untouched(dir: &Path, out: &assert_cmd::assert::Assert, code: i32, wanted: &str) {
    let output = out.get_output();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    let stdout = text(&output.stdout);
    // `bw check` says UNKNOWN on stdout for a monitor (one line, redacted); nothing else prints.
    let for_a_monitor = stdout.starts_with("BACKWAVE UNKNOWN: ") && stdout.lines().count() == 1;
    assert!(stdout.is_empty() || for_a_monitor, "{stdout}");
    assert!(!stdout.contains("secret"), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(wanted), "wanted {wanted:?} in {stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "created {left:?}");
}

/// Run `args` on `url` given both ways, `--db` and `BW_DB`, each in a fresh empty folder.
fn assert_every_way(url: &str, args: &[&str], code: i32, wanted: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = bw_in(dir.path(), &[], &[&["--db", url][..], args].concat());
    assert_refused_and_untouched(dir.path(), &out, code, wanted);
    let out = bw_in(dir.path(), &[("BW_DB", url)], args);
    assert_refused_and_untouched(dir.path(), &out, code, wanted);
}

#[test]
fn a_malformed_postgres_url_is_quoted_redacted_with_exit_2() {
    let url = "POSTGRESQL://u:secret@h:54x2/db";
    let shown = "'POSTGRESQL://u:***@h:54x2/db'";
    for args in COMMANDS {
        assert_every_way(
            url,
            args,
            2,
            &format!("{shown} is not a PostgreSQL URL: the port '54x2' is not a number from 1 to 65535"),
        );
    }
}

/// A URL of another scheme, one with spaces around it, or one whose password holds an unencoded
/// '?': refused with exit 2 and the password redacted, before anything is created. The first
/// two once became file names, and "no store at" printed the password twice (found by a review
/// driving `bw` with bad input); the third quoted the password's head as a port.
#[test]
fn a_url_of_another_scheme_or_with_spaces_around_it_is_refused_with_its_password_redacted() {
    for (url, wanted) in [
        (
            "mysql://alice:secret@host/db",
            "'mysql://alice:***@host/db' is neither an SQLite file's path nor a postgresql:// URL",
        ),
        (" postgres://u:secret@h/db", "' postgres://u:***@h/db' has spaces around it"),
        ("postgres://u:hun?secret@h/db", "'postgres://u:***@h/db' is not a PostgreSQL URL: the user info holds a '?'"),
        // An unset variable: no store at all, not a file named ''.
        ("", "'' names no store: give an SQLite file's path or a postgresql:// URL"),
    ] {
        for args in COMMANDS {
            assert_every_way(url, args, 2, wanted);
        }
    }
}

/// A unix socket folder that does not exist: the connection fails at once, as a server that is
/// down does, and the password (in the user info and as a parameter) never shows.
#[cfg(feature = "postgres")]
#[test]
fn an_unreachable_server_is_one_line_with_exit_3_without_the_password_or_a_file() {
    let url = "postgresql://u:secret@/x?host=/nonexistent&password=secret";
    let shown = "'postgresql://u:***@/x?host=/nonexistent&password=***'";
    for args in COMMANDS {
        assert_every_way(url, args, 3, &format!("cannot connect to the store at {shown}: "));
    }
}

#[test]
fn generate_force_is_refused_on_a_url_before_connecting_with_exit_2() {
    // Unreachable, and it does not matter: nothing connects.
    let url = "postgres://u:secret@/x?host=/nonexistent";
    assert_every_way(
        url,
        &["generate", "--jobs", "10", "--force"],
        2,
        "--force replaces an SQLite file, never a PostgreSQL store: generate into a schema without one \
         (e.g. DROP SCHEMA … CASCADE; CREATE SCHEMA …), not 'postgres://u:***@/x?host=/nonexistent' with --force",
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
    bw_in(dir.path(), &[("BW_DB", "postgres://u:secret@h/db")], &["--help"])
        .success()
        .stdout(predicate::str::contains("--db <PATH|URL>").and(predicate::str::contains("secret").not()));
}

/// Found in a 3 a.m. walkthrough: the "Next page: bw --db '…' jobs list … --page 2" hint that
/// `bw jobs list` prints was built from the command line as typed, password and all, onto stdout
/// (a terminal's scrollback, a pasted incident log). It shows the URL as every message does.
#[cfg(feature = "postgres")]
#[test]
fn the_next_page_hint_never_shows_the_urls_password() {
    let _g = crate::backend::use_backend(crate::backend::Backend::Postgres);
    let f = Fixture::hostile_admin();
    // The tests' server trusts its socket, so any password connects.
    let url = format!("{}&password=secret", f.db.arg());
    let shown = format!("{}&password=***", f.db.arg());
    for db_args in [vec!["--db".to_string(), url.clone()], vec![format!("--db={url}")]] {
        let mut cmd = bw_at("unused");
        cmd.env_remove("BW_DB").args(&db_args).args(["jobs", "list", "--limit", "2"]);
        let out = cmd.output().unwrap();
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stderr}");
        let hint = stdout.lines().find(|l| l.contains("--page 2")).unwrap_or_else(|| panic!("no next page: {stdout}"));
        assert!(hint.contains(&shown), "{hint}");
        assert!(!stdout.contains("secret") && !stderr.contains("secret"), "{stdout}{stderr}");
    }
}
