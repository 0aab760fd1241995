//! Terminal safety: every output path of `bw` over the hostile fixture (escape sequences, OSC
//! title sets, C1 controls, DEL, bidi overrides, CRLF stack traces, invalid UTF-8) must reach
//! the terminal inert. Tables: no byte below 0x20 but newline, no DEL, no C1 control. JSON: the
//! same for the raw bytes, every control escaped inside strings, and the document still parses.
//! (The dashboard's TestBackend buffer is checked the same way by `tests/tui.rs`,
//! `hostile_text_never_reaches_the_screen_as_control_characters`.)

use std::path::Path;
use std::process::{Command, Output, Stdio};

use backwave::store::current_actor;
use backwave::{JobState, Permission, Store};

use super::support;
use crate::backend::{both_backends, load_sqlite_fixture, TestDb};

/// What a terminal may safely receive: text with newlines (and tabs), nothing that acts.
pub fn assert_inert(bytes: &[u8], what: &str) {
    for (i, &b) in bytes.iter().enumerate() {
        assert!(
            b >= 0x20 && b != 0x7f || b == b'\n' || b == b'\t',
            "{what}: control byte 0x{b:02x} at {i}: {:?}",
            String::from_utf8_lossy(&bytes[i.saturating_sub(40)..(i + 40).min(bytes.len())])
        );
    }
    let text = String::from_utf8_lossy(bytes);
    if let Some((i, c)) = text.char_indices().find(|(_, c)| ('\u{80}'..='\u{9f}').contains(c)) {
        panic!("{what}: C1 control U+{:04X} at {i}", c as u32);
    }
    for c in ['\u{202e}', '\u{202d}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{200b}', '\u{feff}'] {
        assert!(!text.contains(c), "{what}: invisible format control U+{:04X} reached the terminal", c as u32);
    }
}

fn hostile_store(dir: &Path) -> TestDb {
    let db = TestDb::named(dir, "hostile.db");
    drop(Store::create(&db).unwrap());
    load_sqlite_fixture(&db, include_str!("../../fixtures/hostile.sql"));
    let store = Store::open(&db).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    assert!(store.permissions(&current_actor()).unwrap().contains(&Permission::ViewFailureDetail));
    db
}

fn run(db: &TestDb, args: &[&str]) -> Output {
    let out = Command::new(support::bw())
        .arg("--db")
        .arg(db)
        .args(args)
        .env("BW_NOW", "2026-11-30T12:00:00Z")
        .env("COLUMNS", "120")
        .env_remove("BW_DB")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bw {} on the hostile fixture failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn check(db: &TestDb, args: &[&str]) {
    let what = format!("bw {}", args.join(" "));
    let out = run(db, args);
    assert!(!out.stdout.is_empty(), "{what} printed nothing");
    assert_inert(&out.stdout, &what);
    assert_inert(&out.stderr, &format!("{what} (stderr)"));
    if args.contains(&"json") {
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: not one JSON document ({e})"));
        assert!(!doc.is_null());
    }
}

both_backends! {
    fn every_output_path_on_the_hostile_fixture_is_inert() {
        let dir = tempfile::tempdir().unwrap();
        let db = hostile_store(dir.path());
        let store = Store::open(&db).unwrap();
        let ids: Vec<String> =
            store.list_jobs(&Default::default(), 1_000, 0).unwrap().jobs.iter().map(|j| j.id.to_string()).collect();
        assert!(ids.len() >= 30, "the fixture has {} jobs", ids.len());
        drop(store);

        for format in ["table", "json"] {
            let f = ["--format", format];
            check(&db, &[&f[..], &["jobs", "list", "--limit", "1000"]].concat());
            for state in JobState::ALL {
                check(&db, &[&f[..], &["jobs", "list", "--state", state.as_str()]].concat());
            }
            check(&db, &[&f[..], &["log", "tail", "-n", "1000"]].concat());
            check(&db, &[&f[..], &["log", "tail", "-n", "1000", "--detail"]].concat());
            check(&db, &[&f[..], &["stats"]].concat());
            check(&db, &[&f[..], &["workers"]].concat());
            for id in &ids {
                check(&db, &[&f[..], &["jobs", "show", id]].concat());
                check(&db, &[&f[..], &["jobs", "show", id, "--detail"]].concat());
            }
        }
    }
}

both_backends! {
    /// The JSON keeps what was stored (escaped), so scripts see the real text.
    fn json_output_escapes_controls_but_keeps_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let db = hostile_store(dir.path());
        let out = run(&db, &["--format", "json", "jobs", "list", "--limit", "1000"]);
        let raw = String::from_utf8(out.stdout).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let mut strings = Vec::new();
        collect_strings(&doc, &mut strings);
        assert!(
            strings.iter().any(|s| s.contains('\u{1b}')),
            "no decoded string holds the fixture's ESC: the JSON lost the stored text"
        );
        assert!(raw.contains("\\u001b"), "ESC is not escaped as \\u001b in the raw JSON");
    }
}

fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}
