//! Every command README.md and the pages under docs/ show is run, and every output they show is
//! compared (issues 6 and 19: an example that fails, or prints something else, is a bug).
//!
//! In ```console blocks each `$ ` line runs, in order, in one folder, against one store; the
//! lines under it, up to the next `$ ` line or the end of the block, are its output (stdout,
//! then stderr) and must match what it prints now: `...` on a line of its own stands for any
//! number of lines, `[..]` for any text within a line, and trailing spaces do not count. A
//! `$ ` line with nothing under it is only run. `$ export K=V` sets K for the lines after it.
//! ```sh blocks run whole as scripts. A command must exit 0 unless the page says on that line
//! that it exits 1. What is not run here is run elsewhere, and named: `cargo …` lines
//! (`cargo install --path .`, `cargo run --release -- demo` is
//! `demo_for_10s_leaves_every_path_in_the_store`, `cargo test` and `./test` are this suite,
//! `cargo bench` the benchmarks). The lines run on both backends: on SQLite against
//! `./backwave.db` as shown; on PostgreSQL with `BW_DB` naming a schema of the test's, where a
//! page's `sqlite3 backwave.db < fixtures/hostile.sql` is done by copying the fixture into it.
//!
//! Each page runs from its top in a folder and a store of its own, so a page that shows commands
//! sets up what they need itself and reads whole. Rust blocks are compiled as doctests of the
//! root package (`src/lib.rs`, one item per page); every other kind of block is shown, not run.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::backend::{both_backends, load_sqlite_fixture, Backend, TestDb};

/// A page whose examples are run: its path from the repository's root, and its text.
struct Page {
    path: &'static str,
    text: &'static str,
}

/// Every page, the README first. `every_docs_page_is_run_and_compiled` fails when a page under
/// docs/ is missing here or from the doctests in `src/lib.rs`.
const PAGES: &[Page] = &[
    Page { path: "README.md", text: include_str!("../../README.md") },
    Page { path: "docs/operating.md", text: include_str!("../../docs/operating.md") },
    Page { path: "docs/alerting.md", text: include_str!("../../docs/alerting.md") },
    Page { path: "docs/embedding.md", text: include_str!("../../docs/embedding.md") },
    Page { path: "docs/postgres.md", text: include_str!("../../docs/postgres.md") },
    Page { path: "docs/contract.md", text: include_str!("../../docs/contract.md") },
    Page { path: "docs/reference.md", text: include_str!("../../docs/reference.md") },
    Page { path: "docs/benchmarks.md", text: include_str!("../../docs/benchmarks.md") },
    Page { path: "docs/architecture.md", text: include_str!("../../docs/architecture.md") },
];

/// The line of a page that loads the example store.
const LOAD_FIXTURE: &str = "sqlite3 backwave.db < fixtures/hostile.sql";

/// The kinds of fenced block a page may hold. `console` and `sh` are run here, `rust` compiled
/// as a doctest; the rest are shown only. A shell block spelt another way (```bash) would escape
/// the run unnoticed, so an unknown kind fails `every_block_is_of_a_kind_the_suite_knows`.
const RUN: [&str; 2] = ["console", "sh"];
const SHOWN: [&str; 5] = ["text", "sql", "ini", "yaml", "rust"];

/// A fenced block: its kind (the info string's first word), the line of its first body line,
/// and its body with the fence's indentation taken off.
struct Block<'a> {
    lang: &'a str,
    first_line: usize,
    body: Vec<&'a str>,
}

/// Every fenced block of a page, also those indented inside a list item.
fn blocks(page: &str) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for (i, line) in page.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let lang = info.split([',', ' ']).next().unwrap_or("");
                open = Some((indent, Block { lang, first_line: i + 2, body: Vec::new() }));
            }
            (Some(_), Some(_)) => out.push(open.take().unwrap().1),
            (Some((indent, block)), None) => {
                let strip = line.len() - line.trim_start().len();
                block.body.push(&line[strip.min(*indent)..]);
            }
            (None, None) => {}
        }
    }
    out
}

/// A command a page shows: a `$ ` line of a ```console block, or a whole ```sh block.
struct Shown {
    line: usize,
    text: String,
    /// The output the page shows under it (console blocks), if any.
    output: Vec<String>,
}

/// Every shown command of a page, in page order.
fn shown_commands(page: &str) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    for block in blocks(page) {
        match block.lang {
            "sh" => out.push(Shown { line: block.first_line, text: block.body.join("\n"), output: Vec::new() }),
            "console" => {
                let mut in_command = false;
                for (i, line) in block.body.iter().enumerate() {
                    if let Some(cmd) = line.strip_prefix("$ ") {
                        out.push(Shown { line: block.first_line + i, text: cmd.to_string(), output: Vec::new() });
                        in_command = true;
                    } else if in_command {
                        out.last_mut().unwrap().output.push(line.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `actual` is what the page shows (`expected`), with its `...` and `[..]` elisions.
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
    let mut child = cmd.spawn().unwrap();
    // Its output read as it comes, so that a follower is interrupted only once it printed: `bw`
    // takes Ctrl-C over only after opening the store and reading the tail, which a busy machine
    // can take longer over than any fixed wait.
    let mut stdout = child.stdout.take().unwrap();
    let (printed, first) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut all, mut buf) = (Vec::new(), [0u8; 8192]);
        while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
            if all.is_empty() {
                let _ = printed.send(());
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    if follow {
        // It runs until interrupted, as at a terminal: let it print, then Ctrl-C it.
        let _ = first.recv_timeout(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) on the process group of our own child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    }
    let out = child.wait_with_output().unwrap();
    let stdout = reader.join().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// What running one page's commands came to: how many ran, how many outputs were compared,
/// and a message for each output that differed.
#[derive(Default)]
struct Ran {
    ran: usize,
    compared: usize,
    failures: Vec<String>,
}

/// Runs every command `page` shows, from its top, in a fresh folder with a fresh store.
fn run_page(page: &Page) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(dir.path());
    std::fs::create_dir(dir.path().join("fixtures")).unwrap();
    std::fs::write(dir.path().join("fixtures/hostile.sql"), crate::demo::HOSTILE_SQL).unwrap();
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.sql"), dir.path().join("schema.sql")).unwrap();

    let mut result = Ran::default();
    let mut env: Vec<(String, String)> = Vec::new();
    for s in shown_commands(page.text) {
        let first = s.text.split_whitespace().next().unwrap_or("");
        if first == "cargo" || first == "./test" {
            continue; // named in the module comment
        }
        if let Some((k, v)) = s.text.strip_prefix("export ").and_then(|kv| kv.split_once('=')) {
            env.push((k.trim().to_string(), v.split_whitespace().next().unwrap_or("").to_string()));
            continue;
        }
        assert!(
            ["bw", "sqlite3", "sh"].contains(&first),
            "{} line {}: `{}` is neither run here nor named as run elsewhere",
            page.path,
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
            run(dir.path(), &db, &s, &env)
        };
        let expected = if s.text.contains("exit 1") { 1 } else { 0 };
        assert_eq!(code, expected, "{} line {}: `{}` exited {code}:\n{output}", page.path, s.line, s.text);
        result.ran += 1;
        if !s.output.is_empty() {
            result.compared += 1;
            if !output_matches(&s.output, &output) {
                result.failures.push(format!(
                    "{} line {}: `{}`\n--- the page shows:\n{}\n--- it prints:\n{output}",
                    page.path,
                    s.line,
                    s.text,
                    s.output.join("\n")
                ));
            }
        }
    }
    result
}

both_backends! {
    fn every_command_shown_in_the_pages_runs_and_prints_what_it_shows() {
        let (mut ran, mut compared, mut failures) = (0, 0, Vec::new());
        let (mut readme_ran, mut readme_compared) = (0, 0);
        for page in PAGES {
            let result = run_page(page);
            if page.path == "README.md" {
                (readme_ran, readme_compared) = (result.ran, result.compared);
            }
            ran += result.ran;
            compared += result.compared;
            failures.extend(result.failures);
        }
        assert!(failures.is_empty(), "{} outputs differ:\n\n{}", failures.len(), failures.join("\n\n"));
        // Floors, about two thirds of what the pages hold now (56 run, 28 compared; the README's
        // tour 9 and 7), so that blocks whose shape changed (a fence the parser no longer sees)
        // cannot pass by running nothing.
        assert!(ran >= 40, "only {ran} commands found in the pages: did their blocks change shape?");
        assert!(compared >= 20, "only {compared} outputs compared in the pages: did their blocks change shape?");
        assert!(
            readme_ran >= 6 && readme_compared >= 4,
            "only {readme_ran} README commands found, {readme_compared} compared: did its tour change shape?"
        );
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

/// A console block indented under a list item runs like any other, and its output keeps its
/// own indentation relative to the fence.
#[test]
fn blocks_inside_list_items_are_found_and_unindented() {
    let page = "- item\n\n  ```console\n  $ bw stats\n    indented output\n  ```\n\n```sh\nbw workers\n```\n";
    let shown = shown_commands(page);
    assert_eq!(shown.len(), 2);
    assert_eq!((shown[0].line, shown[0].text.as_str()), (4, "bw stats"));
    assert_eq!(shown[0].output, ["  indented output"]);
    assert_eq!((shown[1].line, shown[1].text.as_str()), (9, "bw workers"));
}

/// `bw top` and `bw demo` need a terminal; the pages name them in prose and tables, and the
/// tests that drive them for real are `tui::e2e` and `tty::demo_dashboard_…` (on a pty) and
/// `demo_for_10s_…`. This keeps a page from showing a `$ bw top` line that nobody runs.
#[test]
fn no_page_shows_a_terminal_only_command_as_a_line_to_run() {
    for page in PAGES {
        for s in shown_commands(page.text) {
            assert!(
                !s.text.starts_with("bw top") && !s.text.starts_with("bw demo"),
                "{} line {} shows `{}` as a command; these need a terminal and are tested on a pty",
                page.path,
                s.line,
                s.text
            );
        }
    }
}

#[test]
fn every_block_is_of_a_kind_the_suite_knows() {
    for page in PAGES {
        for block in blocks(page.text) {
            assert!(
                RUN.contains(&block.lang) || SHOWN.contains(&block.lang),
                "{} line {}: a ```{} block is neither run ({RUN:?}) nor of a kind shown only ({SHOWN:?}); \
                 a shell example is ```console or ```sh, anything else not meant to run ```text",
                page.path,
                block.first_line - 1,
                block.lang
            );
        }
    }
}

/// No page under docs/ is left out of the run above or of the doctests that compile its Rust
/// blocks (`src/lib.rs`, one `include_str!` per page).
#[test]
fn every_docs_page_is_run_and_compiled() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let on_disk: BTreeSet<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| format!("docs/{}", path.file_name().unwrap().to_str().unwrap()))
        .collect();
    let listed: BTreeSet<String> =
        PAGES.iter().map(|p| p.path.to_string()).filter(|p| p.starts_with("docs/")).collect();
    assert_eq!(listed, on_disk, "PAGES (tests/demo/readme.rs) must list exactly the pages under docs/");

    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    for page in PAGES {
        let include = format!("include_str!(\"../{}\")", page.path);
        assert!(lib.contains(&include), "src/lib.rs does not compile the Rust blocks of {}: no {include}", page.path);
    }
}

/// Every relative link in the pages (`[text](docs/x.md)`, `[text](../schema.sql)`) names a file
/// that exists, and a `#fragment` names a heading of that page, as GitHub spells its anchors.
#[test]
fn every_relative_link_points_at_a_file_and_heading_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    for page in PAGES {
        let folder = Path::new(page.path).parent().unwrap();
        for (line, target) in links(page.text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() { Path::new(page.path).to_path_buf() } else { folder.join(file) };
            if !root.join(&path).exists() {
                broken.push(format!("{} line {line}: ({target}): {} does not exist", page.path, path.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                let text = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
                if !anchors(&text).iter().any(|a| a == fragment) {
                    broken.push(format!(
                        "{} line {line}: ({target}): no heading of {} has it",
                        page.path,
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{} broken links:\n{}", broken.len(), broken.join("\n"));
}

/// Every link target of a page with its line: `](target)` outside fenced blocks and code spans.
fn links(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    // A code span may run over a line break, so its state carries from line to line; a blank
    // line ends a paragraph and with it any span left open.
    let mut span: Option<usize> = None;
    for (i, line) in page.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            span = None;
            continue;
        }
        let mut prose = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '`' {
                if span.is_none() {
                    prose.push(c);
                }
                continue;
            }
            let mut run = 1;
            while chars.peek() == Some(&'`') {
                chars.next();
                run += 1;
            }
            span = match span {
                None => Some(run),
                Some(open) if open == run => None,
                other => other,
            };
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub gives a page's headings: lower case, spaces to `-`, everything but letters,
/// digits, `-` and `_` dropped; a repeated one gets `-1`, `-2`, ….
fn anchors(page: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let title = line.trim_start_matches('#');
        if fenced || title.len() == line.len() || !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.push(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

#[test]
fn links_and_anchors_are_read_as_github_reads_them() {
    let page = "# The store contract: `schema.sql`\n## Guarantees\n## Guarantees\n\
                see [a](docs/x.md#y), `[not](a link)` and ``[nor](this)``\n\
                ```text\n[no](link) # heading\n```\n[split `code\nspan` here](z.md)\n";
    assert_eq!(anchors(page), ["the-store-contract-schemasql", "guarantees", "guarantees-1"]);
    assert_eq!(links(page), [(4, "docs/x.md#y".to_string()), (9, "z.md".to_string())]);
}
