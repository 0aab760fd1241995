//! Stores for the `bw` tests, built through the library or loaded from fixtures/hostile.sql,
//! a `bw` command with the clock, width and colour pinned, and [`Run`]: one command's stdout,
//! stderr and exit status as one printable text, for whole-output snapshots. A fixture's store
//! is on the test's backend (`crate::backend`): the file `bw.db`, or a PostgreSQL schema.

use std::ffi::OsStr;
use std::time::Duration;

use assert_cmd::Command;
use backwave::store::{current_actor, ClaimRequest, Completion, Outcome};
use backwave::{Clock, NewJob, RetryPolicy, Store};
use tempfile::TempDir;

use crate::backend::{load_sqlite_fixture, TestDb};

/// The instant fixtures/hostile.sql is built around.
pub const T: &str = "2026-11-30T12:00:00Z";
pub const T_MS: i64 = 1_796_040_000_000;

/// Fields drop in order: the schema (on PostgreSQL), then the folder.
pub struct Fixture {
    /// The store: `f.db.file()` where a test is about the SQLite file.
    pub db: TestDb,
    /// Held so the directory lives as long as the fixture.
    pub _dir: TempDir,
}

impl Fixture {
    pub fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "bw.db");
        Fixture { db, _dir: dir }
    }

    /// fixtures/hostile.sql: 33 jobs in every state, hostile text, no grants.
    pub fn hostile() -> Self {
        let f = Fixture::empty();
        drop(Store::create(&f.db).unwrap());
        load_sqlite_fixture(&f.db, include_str!("../../fixtures/hostile.sql"));
        f
    }

    /// The hostile store with the user running the tests as admin.
    pub fn hostile_admin() -> Self {
        let f = Fixture::hostile();
        f.store().bootstrap_admin(&current_actor()).unwrap();
        f
    }

    /// The hostile store whose admin is someone else: the test user holds nothing.
    pub fn hostile_stranger() -> Self {
        let f = Fixture::hostile();
        f.store().bootstrap_admin("someone-else").unwrap();
        f
    }

    pub fn store(&self) -> Store {
        Store::open(&self.db).unwrap().with_clock(Clock::manual(T_MS))
    }

    /// `bw` against this store.
    pub fn bw(&self) -> Command {
        bw_at(&self.db)
    }

    /// Run `bw ARGS` against this store; see [`Run`].
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(&[], args)
    }

    /// Run `bw ARGS` with `env` set on top of the pinned environment (`COLUMNS=80`, …).
    pub fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        let mut cmd = self.bw();
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).chain(["bw".into()]).collect();
        let out = cmd.output().unwrap();
        Run::new(&self.db, format!("{} {}", shown.join(" "), shell_words(args)), out)
    }

    /// Grant the test user `permission`, as the other admin.
    pub fn grant_me(&self, permission: backwave::Permission) {
        self.store().grant("someone-else", &current_actor(), permission).unwrap();
    }
}

pub fn bw_at(db: impl AsRef<OsStr>) -> Command {
    let mut c = Command::cargo_bin("bw").unwrap();
    c.env("BW_DB", db).env("BW_NOW", T).env("COLUMNS", "120").env_remove("NO_COLOR").timeout(Duration::from_secs(60));
    c
}

/// Claim up to `n` due jobs of `queue` as worker `w-test` under a one-attempt policy.
pub fn claim_all(store: &Store, queue: &str, n: usize) -> Vec<backwave::Job> {
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let queues = [queue.to_string()];
    store
        .claim(&ClaimRequest {
            worker_id: "w-test",
            group: "test",
            queues: &queues,
            limit: n,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap()
}

/// Enqueue `jobs` into queue "default", claim them and record `outcome` for each, the way the
/// engine ends them. Returns their ids.
pub fn end_as(store: &Store, jobs: &[NewJob], outcome: impl Fn(&backwave::Job) -> Outcome) -> Vec<backwave::JobId> {
    store.enqueue_many(jobs).unwrap();
    let claimed = claim_all(store, "default", jobs.len());
    let done: Vec<Completion> = claimed
        .iter()
        .map(|j| Completion { job_id: j.id, worker_id: "w-test".into(), attempt: j.attempt, outcome: outcome(j) })
        .collect();
    store.complete_many(&done).unwrap();
    claimed.into_iter().map(|j| j.id).collect()
}

/// `n` Dead-Lettered jobs of `wire_name`, made the way the engine makes them: enqueue, claim
/// under a one-attempt policy, fail.
pub fn dead_letter(store: &Store, wire_name: &str, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(500);
        let jobs: Vec<NewJob> = (0..k).map(|i| NewJob::new(wire_name, "default", format!("{{\"n\":{i}}}"))).collect();
        end_as(store, &jobs, |j| Outcome::Failed {
            message: format!("gateway timeout (job {})", j.id),
            detail: None,
            retry_in: None,
        });
        left -= k;
    }
}

pub fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

pub fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec()).unwrap()
}

/// No byte that a terminal would act on: ESC, BEL, CR, DEL, C1 (as UTF-8), bidi overrides.
pub fn assert_inert(out: &str) {
    for (i, c) in out.chars().enumerate() {
        let bad = (c.is_control() && c != '\n') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        assert!(!bad, "control character U+{:04X} at char {i} in output:\n{out}", c as u32);
    }
}

/// One `bw` run as a snapshot shows it: the command line, stdout, stderr (when there is any)
/// and the exit status. The store's folder reads `[TMP]` (a PostgreSQL store's URL `[DB]`) and
/// the user running the tests `[me]`, so a snapshot is the same on every machine (time is pinned
/// by `BW_NOW`, ids by the fixtures).
pub struct Run {
    pub command: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn new(db: &TestDb, command: String, out: std::process::Output) -> Run {
        let redact = |bytes: &[u8]| {
            let text = String::from_utf8(bytes.to_vec()).expect("bw prints UTF-8");
            let text = match db.schema() {
                None => text.replace(&db.file().parent().unwrap().display().to_string(), "[TMP]"),
                Some(_) => text.replace(db.arg(), "[DB]").replace(&db.target().to_string(), "[DB]"),
            };
            replace_word(&text, &current_actor(), "[me]")
        };
        Run {
            command: redact(command.as_bytes()),
            code: out.status.code(),
            stdout: redact(&out.stdout),
            stderr: redact(&out.stderr),
        }
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "$ {}", self.command)?;
        f.write_str(&self.stdout)?;
        if !self.stderr.is_empty() {
            writeln!(f, "----- stderr -----")?;
            f.write_str(&self.stderr)?;
        }
        match self.code {
            Some(code) => writeln!(f, "[exit status: {code}]"),
            None => writeln!(f, "[killed by a signal]"),
        }
    }
}

/// Several runs, one after another, as one snapshot.
pub fn transcript(runs: &[Run]) -> String {
    runs.iter().map(Run::to_string).collect::<Vec<_>>().join("\n")
}

/// `args` as a person would type them: quoted where the shell would need it.
fn shell_words(args: &[&str]) -> String {
    let plain = |a: &str| !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    let quoted: Vec<String> =
        args.iter().map(|a| if plain(a) { a.to_string() } else { format!("'{}'", a.replace('\'', r"'\''")) }).collect();
    quoted.join(" ")
}

/// `text` with each whole-word `word` (not part of a longer name) replaced by `by`.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_name) || after.is_some_and(is_name) {
            out.push_str(word);
        } else {
            out.push_str(by);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}
