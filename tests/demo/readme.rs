//! Every command README.md shows is run, and every output it shows is compared (issues 6 and
//! 19: a README example that fails, or prints something else, is a bug).
//!
//! In ```console blocks each `$ ` line runs, in order, in one folder, against one store; the
//! lines under it, up to the next `$ ` line or the end of the block, are its output (stdout,
//! then stderr) and must match what it prints now: `...` on a line of its own stands for any
//! number of lines, `[..]` for any text within a line, and trailing spaces do not count. A
//! `$ ` line with nothing under it is only run. `$ export K=V` sets K for the lines after it.
//! ```sh blocks run whole as scripts. A command must exit 0 unless the README says on that line
//! that it exits 1. What is not run here is run elsewhere, and named: `cargo …` lines
//! (`cargo install --path .`, `cargo run --release -- demo` is
//! `demo_for_10s_leaves_every_path_in_the_store`, `cargo test` is this suite, `cargo bench` the
//! benchmarks). The lines run on both backends: on SQLite against `./backwave.db` as shown; on
//! PostgreSQL with `BW_DB` naming the test's schema, where the README's
//! `sqlite3 backwave.db < fixtures/hostile.sql` is done by copying the fixture into it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::backend::{both_backends, load_sqlite_fixture, Backend, TestDb};

const README: &str = include_str!("../../README.md");

/// The README's line that loads the example store.
const LOAD_FIXTURE: &str = "sqlite3 backwave.db < fixtures/hostile.sql";

/// A command the README shows: a `$ ` line of a ```console block, or a whole ```sh block.
struct Shown {
    line: usize,
    text: String,
    /// The output the README shows under it (console blocks), if any.
    output: Vec<String>,
}

/// Every shown command, in README order.
fn shown_commands() -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    let mut block: Option<(&str, usize, Vec<&str>)> = None;
    for (i, line) in README.lines().enumerate() {
        if let Some(lang) = line.strip_prefix("```") {
            match block.take() {
                None => block = Some((lang.split_whitespace().next().unwrap_or(""), i + 2, Vec::new())),
                Some(("sh", start, body)) => out.push(Shown { line: start, text: body.join("\n"), output: Vec::new() }),
                Some(_) => {}
            }
            continue;
        }
        if let Some((lang, _, body)) = &mut block {
            match (*lang, line.strip_prefix("$ ")) {
                ("console", Some(cmd)) => out.push(Shown { line: i + 1, text: cmd.to_string(), output: Vec::new() }),
                ("console", None) => {
                    if let Some(last) = out.last_mut() {
                        last.output.push(line.to_string());
                    }
                }
                ("sh", _) => body.push(line),
                _ => {}
            }
        }
    }
    out
}

/// Whether `actual` is what the README shows (`expected`), with its `...` and `[..]` elisions.
fn output_matches(expected: &[String], actual: &str) -> bool {
    let actual: Vec<&str> = actual.lines().map(str::trim_end).collect();
    lines_match(expected, &actual)
}

fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((e, rest)) => {
            actual.split_first().is_some_and(|(a, more)| line_matches(e.trim_end(), a) && lines_match(rest, more))
        }
    }
}

/// One line, where `[..]` matches any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = actual.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

fn run(dir: &Path, db: &TestDb, shown: &Shown, env: &[(String, String)]) -> (i32, String) {
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
        .env("COLUMNS", "100")
        .env_remove("BW_DB")
        .env_remove("BW_NOW")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
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
    fn every_command_shown_in_the_readme_runs_and_prints_what_it_shows() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        std::fs::create_dir(dir.path().join("fixtures")).unwrap();
        std::fs::write(dir.path().join("fixtures/hostile.sql"), crate::demo::HOSTILE_SQL).unwrap();
        std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.sql"), dir.path().join("schema.sql")).unwrap();

        let shown = shown_commands();
        let (mut ran, mut compared) = (0, 0);
        let mut env: Vec<(String, String)> = Vec::new();
        let mut failures = Vec::new();
        for s in &shown {
            let first = s.text.split_whitespace().next().unwrap_or("");
            if first == "cargo" {
                continue; // named in the module comment
            }
            if let Some((k, v)) = s.text.strip_prefix("export ").and_then(|kv| kv.split_once('=')) {
                env.push((k.trim().to_string(), v.split_whitespace().next().unwrap_or("").to_string()));
                continue;
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
            let (code, output) = if s.text.starts_with(LOAD_FIXTURE) && db.backend() == Backend::Postgres {
                load_sqlite_fixture(&db, crate::demo::HOSTILE_SQL);
                (0, String::new())
            } else {
                run(dir.path(), &db, s, &env)
            };
            let expected = if s.text.contains("exit 1") { 1 } else { 0 };
            assert_eq!(code, expected, "README line {}: `{}` exited {code}:\n{output}", s.line, s.text);
            ran += 1;
            if !s.output.is_empty() {
                compared += 1;
                if !output_matches(&s.output, &output) {
                    failures.push(format!(
                        "README line {}: `{}`\n--- the README shows:\n{}\n--- it prints:\n{output}",
                        s.line,
                        s.text,
                        s.output.join("\n")
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{} README outputs differ:\n\n{}", failures.len(), failures.join("\n\n"));
        assert!(ran >= 20, "only {ran} README commands found: did the README's blocks change shape?");
        assert!(compared >= 10, "only {compared} README outputs compared: did the README's blocks change shape?");
    }
}

#[test]
fn readme_outputs_match_with_elisions_and_only_then() {
    let shown = |s: &str| s.lines().map(String::from).collect::<Vec<_>>();
    assert!(output_matches(&shown("a\nb"), "a\nb  \n"));
    assert!(output_matches(&shown("a\n...\nz"), "a\nb\nc\nz\n"));
    assert!(output_matches(&shown("a\n...\nz"), "a\nz\n"));
    assert!(output_matches(&shown("took [..] ms, [..] rows"), "took 12 ms, 40 rows"));
    assert!(!output_matches(&shown("a\nb"), "a\nc\n"));
    assert!(!output_matches(&shown("a"), "a\nmore\n"));
    assert!(!output_matches(&shown("took [..] ms"), "took 12 s"));
    assert!(!output_matches(&shown("a\n...\nz"), "a\nb\n"));
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
