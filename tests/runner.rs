//! Every integration test, in one binary (as jj's `tests/runner.rs`): one link of bundled SQLite,
//! postgres and ratatui instead of seven. Each area is a module named as its binary was
//! (`cargo test --test runner store::`, `… cli::refusals`), and the helpers in `tests/common`
//! are compiled once for all of them. `every_test_file_is_part_of_the_suite` fails when a file
//! under `tests/` is not reached from here, so a test file can never be left out silently.

#[path = "common/backend.rs"]
mod backend;
#[path = "common/programs.rs"]
mod programs;
#[path = "common/pty.rs"]
mod pty;

mod cli;
mod demo;
mod engine;
mod faults;
mod health;
mod store;
mod tui;

/// The crates `cargo tree` lists for the library with `features` (`-e normal,build`).
fn library_tree(features: &[&str]) -> std::collections::BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut args =
        vec!["tree", "--offline", "-p", "backwave", "-e", "normal,build", "--prefix", "none", "--format", "{p}"];
    args.extend_from_slice(features);
    let out = std::process::Command::new(cargo)
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    tree.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect()
}

/// An application that adds `backwave` compiles the library and its store drivers, and no crate
/// `bw` draws a terminal with: the library's dependency tree, every feature on, names none.
#[test]
fn the_library_compiles_no_terminal_crate() {
    let crates = library_tree(&["--all-features"]);
    // The tree read is the library's own: both store drivers are in it.
    for driver in ["rusqlite", "postgres"] {
        assert!(crates.contains(driver), "{driver} is missing from backwave's tree: {crates:?}");
    }
    let terminal =
        ["clap", "clap_complete", "ratatui", "crossterm", "comfy-table", "tui-input", "tiny_http", "unicode-width"];
    let found: Vec<&str> = terminal.into_iter().filter(|name| crates.contains(*name)).collect();
    assert!(found.is_empty(), "backwave depends on terminal crates {found:?}");
}

/// An SQLite application compiles neither the PostgreSQL client, TLS nor tokio: the library's
/// default features are SQLite alone (`postgres` and `tokio` are opt-in).
#[test]
fn the_library_default_features_compile_no_postgres_tls_or_tokio() {
    let crates = library_tree(&[]);
    assert!(crates.contains("rusqlite"), "rusqlite is missing from backwave's tree: {crates:?}");
    let heavy = ["postgres", "tokio-postgres", "rustls", "ring", "tokio"];
    let found: Vec<&str> = heavy.into_iter().filter(|name| crates.contains(*name)).collect();
    assert!(found.is_empty(), "backwave's default features compile {found:?}");
}

/// An application that adds `backwave` without its `opentelemetry` feature compiles the `tracing`
/// facade and nothing of OpenTelemetry, nor any subscriber; with the feature, the API and the
/// bridge (issue 41).
#[test]
fn the_library_compiles_opentelemetry_only_with_its_feature() {
    let otel = ["opentelemetry", "opentelemetry_sdk", "tracing-opentelemetry", "tracing-subscriber"];
    let plain = library_tree(&[]);
    assert!(plain.contains("tracing"), "the library speaks tracing: {plain:?}");
    let found: Vec<&str> = otel.into_iter().filter(|c| plain.contains(*c)).collect();
    assert!(found.is_empty(), "backwave without its opentelemetry feature depends on {found:?}");
    let with = library_tree(&["--features", "opentelemetry"]);
    for c in ["opentelemetry", "tracing-opentelemetry"] {
        assert!(with.contains(c), "the opentelemetry feature brings no {c}: {with:?}");
    }
    assert!(!with.contains("opentelemetry_sdk"), "the library picks no SDK: the application does");
}

/// Every `.rs` file under `tests/` is this file or named by a `#[path = "…"]` or a `mod` of a file
/// that is itself part of the suite.
#[test]
fn every_test_file_is_part_of_the_suite() {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    fn files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(path);
            }
        }
    }
    let mut all = BTreeSet::new();
    files(&root, &mut all);

    // Walk the module tree from this file: `#[path = "x"] mod m;` names x relative to the
    // declaring file's folder; a plain `mod m;` names m.rs beside it (or m/mod.rs).
    let mut reached = BTreeSet::new();
    let mut todo = vec![root.join("runner.rs")];
    while let Some(file) = todo.pop() {
        if !reached.insert(file.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let dir = file.parent().unwrap().to_path_buf();
        let mut path_attr: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("#[path = \"") {
                path_attr = rest.strip_suffix("\"]").map(str::to_string);
                continue;
            }
            let decl = line.strip_prefix("pub ").unwrap_or(line);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                let target = match path_attr.take() {
                    Some(p) => dir.join(p),
                    None if dir.join(format!("{name}.rs")).exists() => dir.join(format!("{name}.rs")),
                    None => dir.join(name).join("mod.rs"),
                };
                todo.push(target);
            } else if !line.starts_with("#[") {
                path_attr = None;
            }
        }
    }
    let left_out: Vec<_> = all.difference(&reached).collect();
    assert!(left_out.is_empty(), "test files no module declares, so they never run: {left_out:#?}");
}
