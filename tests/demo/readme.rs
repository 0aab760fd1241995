//! Every command README.md shows is run (issue 6: a README example that fails is a bug).
//!
//! In ```console blocks each `$ ` line runs, in order, against a store holding
//! `fixtures/hostile.sql` (the README's ids are that fixture's); ```sh blocks run whole as
//! scripts. A command must exit 0 unless the README says on that line that it exits 1. What is
//! not run here is run elsewhere, and named: `cargo run --release -- demo` is
//! `demo_for_10s_leaves_every_path_in_the_store` (the same binary, `--no-tui`), `cargo test` is
//! this suite, and `cargo bench` is the benchmarks, too slow for a test. The lines run on both
//! backends: on SQLite against `./backwave.db`, as shown; on PostgreSQL with `BW_DB` naming the
//! test's schema, the fixture copied into it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::backend::{both_backends, load_sqlite_fixture, Backend, TestDb};

const README: &str = include_str!("../../README.md");

/// A command the README shows: a `$ ` line of a ```console block, or a whole ```sh block.
struct Shown {
    line: usize,
    text: String,
}

/// Every shown command, in README order.
fn shown_commands() -> Vec<Shown> {
    let mut out = Vec::new();
    let mut block: Option<(&str, usize, Vec<&str>)> = None;
    for (i, line) in README.lines().enumerate() {
        if let Some(lang) = line.strip_prefix("```") {
            match block.take() {
                None => block = Some((lang.trim(), i + 2, Vec::new())),
                Some(("sh", start, body)) => out.push(Shown { line: start, text: body.join("\n") }),
                Some(_) => {}
            }
            continue;
        }
        if let Some((lang, _, body)) = &mut block {
            match (*lang, line.strip_prefix("$ ")) {
                ("console", Some(cmd)) => out.push(Shown { line: i + 1, text: cmd.to_string() }),
                ("sh", _) => body.push(line),
                _ => {}
            }
        }
    }
    out
}

fn run(dir: &Path, db: &TestDb, shown: &Shown) -> (i32, String) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_bw")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let follow = shown.text.contains("--follow");
    // A follower is stopped with Ctrl-C; `exec` makes it the process the signal lands on, as it
    // is under an interactive shell (a non-interactive `sh` would die of the signal itself).
    let script = if follow { format!("exec {}", shown.text) } else { shown.text.clone() };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .env("BW_NOW", "2026-11-30T12:00:00Z")
        .env("COLUMNS", "100")
        .env_remove("BW_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if db.backend() == Backend::Postgres {
        cmd.env("BW_DB", db.arg());
    }
    // Its own process group, so Ctrl-C can go to the whole pipeline as a terminal sends it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().unwrap();
    if follow {
        // It runs until interrupted, as at a terminal: let it print, then Ctrl-C it.
        std::thread::sleep(Duration::from_millis(800));
        // SAFETY: kill(2) on the process group of our own child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    }
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

both_backends! {
    fn every_command_shown_in_the_readme_runs() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        drop(backwave::Store::create(&db).unwrap());
        load_sqlite_fixture(&db, crate::HOSTILE_SQL);
        std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.sql"), dir.path().join("schema.sql")).unwrap();

        let shown = shown_commands();
        let mut ran = 0;
        for s in &shown {
            let first = s.text.split_whitespace().next().unwrap_or("");
            if first == "cargo" {
                continue; // named in the module comment
            }
            assert!(
                ["bw", "sqlite3", "sh"].contains(&first),
                "README line {}: `{}` is neither run here nor named as run elsewhere",
                s.line,
                s.text
            );
            if s.text.contains("sqlite3 ") {
                crate::programs::sqlite3();
            }
            let (code, output) = run(dir.path(), &db, s);
            let expected = if s.text.contains("exit 1") { 1 } else { 0 };
            assert_eq!(code, expected, "README line {}: `{}` exited {code}:\n{output}", s.line, s.text);
            ran += 1;
        }
        assert!(ran >= 20, "only {ran} README commands found: did the README's blocks change shape?");
    }
}

/// `bw top` and `bw demo` need a terminal; the README names them in prose and tables, and the
/// tests that drive them for real are `tui::e2e` and `tty::demo_dashboard_…` (on a pty) and
/// `demo_for_10s_…`. This keeps the README from showing a `$ bw top` line that nobody runs.
#[test]
fn the_readme_shows_no_terminal_only_command_as_a_line_to_run() {
    for s in shown_commands() {
        assert!(
            !s.text.starts_with("bw top") && !s.text.starts_with("bw demo"),
            "README line {} shows `{}` as a command; these need a terminal and are tested on a pty",
            s.line,
            s.text
        );
    }
}
