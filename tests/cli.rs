//! `bw` as an operator meets it: the real binary against stores built by the library and by
//! fixtures/hostile.sql, with the clock pinned (BW_NOW) and the width pinned (COLUMNS).
//! JSON output is checked by parsing it, never by matching its text.

#[path = "cli/harness.rs"]
mod harness;
#[path = "cli/incident.rs"]
mod incident;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use backwave::store::{current_actor, JobFilter, SettingKey};
use backwave::{JobState, NewJob, Permission, Store};
use harness::*;
use predicates::prelude::*;

// ---- init, opening, exit 3 -----------------------------------------------------------------

#[test]
fn init_creates_a_private_store_and_makes_its_user_admin() {
    let f = Fixture::empty();
    let out = f.bw().args(["--format", "json", "init"]).assert().success().get_output().stdout.clone();
    let v = json(&out);
    assert_eq!(v["created"], true);
    assert_eq!(v["made_admin"], true);
    assert_eq!(v["admin"], current_actor());
    let mode = std::fs::metadata(&f.db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let store = Store::open(&f.db).unwrap();
    assert!(store.permissions(&current_actor()).unwrap().contains(&Permission::Admin));
    // Again: an existing store is left as it is, and nobody else becomes admin.
    f.bw().arg("init").assert().success().stdout(predicate::str::contains("is ready"));
}

#[test]
fn reading_a_missing_store_exits_3_and_creates_nothing() {
    let f = Fixture::empty();
    f.bw().args(["jobs", "list"]).assert().code(3).stderr(predicate::str::contains("no BackWave store"));
    f.bw().args(["requeue", "a0000001"]).assert().code(3);
    assert!(!f.db.exists(), "a reading command created the store");
}

#[test]
fn a_file_that_is_not_a_store_exits_3() {
    let f = Fixture::empty();
    std::fs::write(&f.db, "not a database at all, just text that is long enough to have a header").unwrap();
    f.bw().arg("stats").assert().code(3).stderr(predicate::str::contains("not an SQLite database"));
}

#[test]
fn a_store_locked_by_another_writer_exits_3_naming_the_lock() {
    let f = Fixture::hostile_admin();
    let holder = rusqlite::Connection::open(&f.db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    f.bw()
        .args(["--busy-timeout", "200ms", "requeue", "a0000003"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("locked").and(predicate::str::contains("write lock")));
    assert!(started.elapsed() < Duration::from_secs(10));
    // Reading still works under WAL while the writer holds its lock.
    f.bw().args(["--busy-timeout", "200ms", "jobs", "list"]).assert().success();
    holder.execute_batch("ROLLBACK").unwrap();
    f.bw().args(["--busy-timeout", "200ms", "--format", "json", "requeue", "a0000003"]).assert().success();
}

// ---- jobs list -----------------------------------------------------------------------------

#[test]
fn jobs_list_json_follows_the_contract() {
    let f = Fixture::hostile();
    let out = f.bw().args(["--format", "json", "jobs", "list", "--state", "dead-lettered"]).assert().success();
    let v = json(&out.get_output().stdout);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(v["total"], 10);
    assert_eq!(jobs.len(), 10);
    let keys = [
        "id",
        "state",
        "wire_name",
        "queue",
        "labels",
        "attempt",
        "max_attempts",
        "created_at",
        "due_at",
        "finished_at",
        "terminal_cause",
        "quarantine_reason",
    ];
    for j in jobs {
        for k in keys {
            assert!(j.get(k).is_some(), "job lacks '{k}': {j}");
        }
        assert_eq!(j["state"], "dead-lettered");
        assert!(j["quarantine_reason"].is_null());
        assert!(j["finished_at"].as_str().unwrap().ends_with('Z'));
        assert!(j["labels"].is_object());
    }
    // Newest first.
    let finished: Vec<&str> = jobs.iter().map(|j| j["finished_at"].as_str().unwrap()).collect();
    let mut sorted = finished.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(finished, sorted);
}

#[test]
fn jobs_list_pages_with_a_footer_and_the_next_command() {
    let f = Fixture::hostile();
    let out = f.bw().args(["jobs", "list", "--state", "dead-lettered", "--limit", "3"]).assert().success();
    let t = text(&out.get_output().stdout);
    assert!(t.contains("Showing 1-3 of 10."), "{t}");
    assert!(t.contains("Next page: bw jobs list --state dead-lettered --limit 3 --page 2"), "{t}");
    assert!(t.lines().next().unwrap().starts_with("ID "), "{t}");
    assert!(t.contains("FINISHED") && t.contains("CAUSE"), "terminal columns: {t}");
    let p4 =
        f.bw().args(["jobs", "list", "--state", "dead-lettered", "--limit", "3", "--page", "4"]).assert().success();
    let t4 = text(&p4.get_output().stdout);
    assert!(t4.contains("Showing 10-10 of 10."), "{t4}");
    assert!(!t4.contains("Next page"), "{t4}");
    // The cursor pages agree with the offset pages.
    let j1 = json(&f.bw().args(["--format", "json", "jobs", "list", "--limit", "3"]).output().unwrap().stdout);
    let cursor = j1["next_cursor"].as_str().unwrap().to_string();
    let j2 = json(
        &f.bw().args(["--format", "json", "jobs", "list", "--limit", "3", "--after", &cursor]).output().unwrap().stdout,
    );
    let o2 = json(
        &f.bw().args(["--format", "json", "jobs", "list", "--limit", "3", "--page", "2"]).output().unwrap().stdout,
    );
    assert_eq!(j2["jobs"], o2["jobs"]);
}

#[test]
fn jobs_list_columns_adapt_to_the_state() {
    let f = Fixture::hostile();
    let sched = text(&f.bw().args(["jobs", "list", "--state", "scheduled"]).output().unwrap().stdout);
    assert!(sched.lines().next().unwrap().contains("NEXT ATTEMPT"), "{sched}");
    assert!(sched.contains("in 10s") || sched.contains("due now"), "{sched}");
    let run = text(&f.bw().args(["jobs", "list", "--state", "running"]).output().unwrap().stdout);
    assert!(run.lines().next().unwrap().contains("WORKER") && run.contains("LEASE"), "{run}");
    assert!(run.contains("demo-host/4242/strict-priority#0001"), "lease owner shown as host/pid/group: {run}");
}

#[test]
fn long_causes_are_cut_to_the_terminal_width() {
    let f = Fixture::hostile();
    for cols in ["80", "120"] {
        let out = f.bw().env("COLUMNS", cols).args(["jobs", "list", "--state", "dead-lettered"]).output().unwrap();
        let t = text(&out.stdout);
        let width: usize = cols.parse().unwrap();
        for line in t.lines().filter(|l| !l.starts_with("Showing")) {
            let w = unicode_width(line);
            assert!(w <= width, "line of {w} cells at COLUMNS={cols}: {line}");
        }
        assert!(t.contains('…'), "the several-KB cause was cut: {t}");
    }
}

fn unicode_width(s: &str) -> usize {
    // East Asian wide characters take two cells; good enough for the fixture's CJK and emoji.
    s.chars()
        .map(|c| match c as u32 {
            0x1100..=0x115F
            | 0x2E80..=0xA4CF
            | 0xAC00..=0xD7A3
            | 0xF900..=0xFAFF
            | 0xFF00..=0xFF60
            | 0x1F300..=0x1FAFF => 2,
            0x200B..=0x200F | 0x0300..=0x036F => 0,
            _ => 1,
        })
        .sum()
}

#[test]
fn empty_results_are_said_in_words() {
    let f = Fixture::hostile();
    f.bw()
        .args(["jobs", "list", "--state", "dead-lettered", "--queue", "nowhere"])
        .assert()
        .success()
        .stdout("No dead-lettered jobs in queue \"nowhere\".\n");
    f.bw()
        .args(["jobs", "list", "--state", "quarantined", "--wire-name", "x"])
        .assert()
        .success()
        .stdout(predicate::str::contains("No quarantined jobs with wire name \"x\"."));
    let e = Fixture::empty();
    e.bw().arg("init").assert().success();
    e.bw().args(["log", "tail"]).assert().success().stdout("No log entries.\n");
    e.bw().arg("workers").assert().success().stdout(predicate::str::starts_with("No workers registered"));
    e.bw().arg("stats").assert().success().stdout(predicate::str::contains("No jobs in this store."));
    let v = json(&e.bw().args(["--format", "json", "jobs", "list"]).output().unwrap().stdout);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0);
    assert_eq!(v["total"], 0);
}

#[test]
fn bad_input_gets_one_line_quoting_the_value_and_exit_2() {
    let f = Fixture::hostile();
    let cases: &[(&[&str], &str)] = &[
        (&["jobs", "list", "--state", "dead"], "'dead'"),
        (&["jobs", "list", "--since", "fortnight"], "'fortnight'"),
        (&["jobs", "list", "--before", "yesterday-ish"], "'yesterday-ish'"),
        (&["jobs", "list", "--label", "tenant"], "'tenant'"),
        (&["jobs", "list", "--after", "garbage"], "'garbage'"),
        (&["jobs", "show", "zz;drop"], "'zz;drop'"),
        (&["requeue", "not-an-id"], "'not-an-id'"),
        (&["enqueue", "x", "--payload", "{oops"], "'{oops'"),
        (&["--busy-timeout", "soon", "stats"], "'soon'"),
        (&["backoff", "exponential", "2s", "--jitter", "7"], "jitter"),
        (&["config", "set", "colour", "blue"], "'colour'"),
        (&["grant", "bob", "superuser"], "'superuser'"),
    ];
    for (args, quoted) in cases {
        let out = f.bw().args(*args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(quoted), "{args:?} should quote {quoted}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed data: {}", text(&out.stdout));
    }
}

// ---- jobs show -----------------------------------------------------------------------------

#[test]
fn an_ambiguous_id_prefix_lists_the_candidates_and_exits_2() {
    let f = Fixture::hostile();
    f.bw().args(["jobs", "show", "a00000"]).assert().code(2).stderr(
        predicate::str::contains("ambiguous").and(predicate::str::contains("a0000001-0000-7000-8000-000000000001")),
    );
    f.bw().args(["jobs", "show", "ffff"]).assert().code(1).stderr(predicate::str::contains("no job matches 'ffff'"));
}

#[test]
fn jobs_show_has_the_delay_table_budget_handlers_and_history() {
    let f = Fixture::hostile();
    let out = f.bw().args(["jobs", "show", "a0000004"]).assert().success();
    let t = text(&out.get_output().stdout);
    for want in [
        "Dead-Lettered",
        "5 of 5 used, 0 left",
        "Delay table",
        "dead-lettered on failure",
        "History (11 entries; times UTC, 2026-11-30)",
        "1 live worker handles 'resize-image'",
    ] {
        assert!(t.contains(want), "missing {want:?}:\n{t}");
    }
    // Hidden detail shows its type and size, never its text.
    assert!(t.contains("hidden: panic, 449 B"), "{t}");
    assert!(!t.contains("backtrace"), "{t}");

    let v = json(&f.bw().args(["--format", "json", "jobs", "show", "a0000018"]).output().unwrap().stdout);
    assert_eq!(v["job"]["state"], "scheduled");
    assert!(v["job"]["next_attempt_at"].is_string());
    assert_eq!(v["job"]["budget_left"], 6);
    assert_eq!(v["job"]["delay_table_ms"].as_array().unwrap().len(), 9);
    let history = v["history"].as_array().unwrap();
    assert!(!history.is_empty());
    for e in history {
        for k in ["seq", "job_id", "at", "from", "to", "attempt", "worker_id", "actor", "reason"] {
            assert!(e.get(k).is_some(), "log entry lacks '{k}': {e}");
        }
        assert!(e.get("failure_detail").is_none(), "detail present without --detail: {e}");
    }
    let q = json(&f.bw().args(["--format", "json", "jobs", "show", "a0000013"]).output().unwrap().stdout);
    assert_eq!(q["job"]["quarantine_reason"], "no-handler");
    assert_eq!(q["live_handlers"], 0);
}

#[test]
fn detail_is_refused_without_the_permission_and_revealed_and_audited_with_it() {
    let f = Fixture::hostile_stranger();
    let out = f.bw().args(["--format", "json", "jobs", "show", "a0000004", "--detail"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("view-failure-detail"), "{}", text(&out.stderr));
    let v = json(&out.stdout);
    let hidden: Vec<_> = v["history"].as_array().unwrap().iter().filter(|e| e["detail_status"] == "hidden").collect();
    assert_eq!(hidden.len(), 5);
    assert_eq!(hidden[0]["detail_type"], "panic");
    assert!(v["history"].as_array().unwrap().iter().all(|e| e.get("failure_detail").is_none()));

    f.grant_me(Permission::ViewFailureDetail);
    let out = f.bw().args(["--format", "json", "jobs", "show", "a0000004", "--detail"]).assert().success();
    let v = json(&out.get_output().stdout);
    let revealed: Vec<_> =
        v["history"].as_array().unwrap().iter().filter(|e| e["detail_status"] == "revealed").collect();
    assert_eq!(revealed.len(), 5);
    assert_eq!(revealed[0]["failure_detail"]["type"], "panic");
    let audit = f.store().audit_entries(0, 100).unwrap();
    assert!(audit.iter().any(|a| a.action == "reveal-failure-detail"
        && a.actor == current_actor()
        && a.job_id.map(|j| j.to_string()) == Some("a0000004-0000-7000-8000-000000000004".into())));
    let t = text(&f.bw().args(["jobs", "show", "a0000004", "--detail"]).output().unwrap().stdout);
    assert!(t.contains("called `Option::unwrap()`") && t.contains("backtrace"), "{t}");
}

#[test]
fn switched_off_failure_detail_says_so() {
    let f = Fixture::hostile_admin();
    f.bw().args(["config", "set", "failure_detail", "off"]).assert().success();
    // a0000006 failed while detail was not captured: there is nothing to reveal, and bw says why.
    let out = f.bw().args(["jobs", "show", "a0000006", "--detail"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("switched off"), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("switched off for this store"));
    f.bw().args(["config", "get", "failure_detail"]).assert().success().stdout("off\n");
}

// ---- hostile text --------------------------------------------------------------------------

#[test]
fn causes_with_terminal_escapes_print_inert() {
    let f = Fixture::hostile_admin();
    let runs: &[&[&str]] = &[
        &["jobs", "list"],
        &["jobs", "list", "--state", "dead-lettered"],
        &["jobs", "list", "--state", "running"],
        &["jobs", "list", "--state", "quarantined"],
        &["jobs", "show", "a0000007", "--detail"],
        &["jobs", "show", "a0000016"],
        &["jobs", "show", "a0000021"],
        &["log", "tail", "-n", "500", "--detail"],
        &["stats"],
        &["workers"],
        &["audit"],
        &["requeue", "--state", "quarantined", "--dry-run"],
    ];
    for args in runs {
        for format in ["table", "json"] {
            let out = f.bw().args(["--format", format]).args(*args).output().unwrap();
            assert!(out.status.success(), "{args:?} {format}: {}", text(&out.stderr));
            let t = text(&out.stdout);
            assert_inert(&t);
            if format == "json" {
                json(&out.stdout);
            }
        }
    }
    // The escapes are shown, escaped, not dropped: an operator can see something was there.
    let t = text(&f.bw().args(["jobs", "show", "a0000007"]).output().unwrap().stdout);
    assert!(t.contains("\\e]0;pwned\\x07"), "{t}");
    // JSON keeps the exact text for scripts.
    let v = json(&f.bw().args(["--format", "json", "jobs", "show", "a0000007"]).output().unwrap().stdout);
    assert!(v["job"]["terminal_cause"].as_str().unwrap().contains("\u{1b}]0;pwned\u{7}"));
}

// ---- requeue and cancel --------------------------------------------------------------------

#[test]
fn requeue_by_id_reports_each_id_and_exits_1_when_any_was_refused() {
    let f = Fixture::hostile_admin();
    let out = f.bw().args(["--format", "json", "requeue", "a0000003", "a0000001", "ffffffff"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("2 of 3 ids were not requeued"), "{}", text(&out.stderr));
    let v = json(&out.stdout);
    let r = v["results"].as_array().unwrap();
    assert_eq!(r[0]["result"], "Requeued");
    assert_eq!(r[0]["id"], "a0000003-0000-7000-8000-000000000003");
    assert_eq!(r[0]["state"], "scheduled");
    assert_eq!(r[1]["result"], "NotRequeueable");
    assert_eq!(r[1]["state"], "succeeded");
    assert_eq!(r[2]["result"], "NotFound");
    assert!(r[2]["state"].is_null());
    let job = f.store().job("a0000003-0000-7000-8000-000000000003".parse().unwrap()).unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Scheduled, 0));
    let last = f.store().history(job.id).unwrap().pop().unwrap();
    assert_eq!(last.actor.as_deref(), Some(current_actor().as_str()));

    // Table: one line per id, and the warning for a wire name nobody handles.
    let t = f.bw().args(["requeue", "a0000012"]).assert().success();
    let t = text(&t.get_output().stdout);
    assert!(t.contains("Requeued") && t.contains("no live worker handles 'noop'"), "{t}");
    f.bw()
        .args(["requeue", "a0000001"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("NotRequeueable (succeeded)"));
}

#[test]
fn operating_without_the_permission_is_refused_and_changes_nothing() {
    let f = Fixture::hostile_stranger();
    for args in [
        &["requeue", "a0000003"][..],
        &["cancel", "a0000017"],
        &["requeue", "--state", "dead-lettered", "--yes", "--force"],
        &["purge", "--older-than", "1s", "--yes"],
        &["enqueue", "ping"],
        &["grant", "bob", "operate"],
        &["config", "set", "retention", "7d"],
    ] {
        f.bw().args(args).assert().code(1).stderr(predicate::str::contains("lacks the"));
    }
    let counts = f.store().counts().unwrap();
    assert_eq!(counts.total(JobState::DeadLettered), 10);
    assert_eq!(counts.total(JobState::Scheduled), 4);
    f.grant_me(Permission::Operate);
    f.bw().args(["requeue", "a0000003"]).assert().success();
    f.bw().args(["cancel", "a0000017"]).assert().success();
}

#[test]
fn bulk_requeue_counts_exactly_asks_and_needs_force_for_unhandled_wire_names() {
    let f = Fixture::hostile_admin();
    let v = json(
        &f.bw().args(["--format", "json", "requeue", "--state", "dead-lettered", "--dry-run"]).output().unwrap().stdout,
    );
    assert_eq!(v["matching"], 10);
    assert_eq!(v["would_requeue"], 4);
    assert_eq!(v["would_requarantine"], 6);
    let t = text(&f.bw().args(["requeue", "--state", "dead-lettered", "--dry-run"]).output().unwrap().stdout);
    assert!(t.contains("10 dead-lettered jobs match.") && t.contains("4 would be requeued"), "{t}");
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 10, "dry run changed nothing");

    // No terminal and no --yes: refused, nothing changed.
    f.bw()
        .args(["requeue", "--state", "dead-lettered"])
        .write_stdin("y\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--yes"));
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 10);

    // --yes: the handled ones; the rest are skipped and the exit status says so.
    let out = f.bw().args(["--format", "json", "requeue", "--state", "dead-lettered", "--yes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out.stdout);
    assert_eq!((v["requeued"].as_u64(), v["skipped_requarantine"].as_u64()), (Some(4), Some(6)));
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 6);
    // Only unhandled ones left: refused without --force, done with it.
    f.bw()
        .args(["requeue", "--state", "dead-lettered", "--yes"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--force"));
    f.bw().args(["requeue", "--state", "dead-lettered", "--yes", "--force"]).assert().success();
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 0);
    f.bw().args(["requeue", "--state", "succeeded"]).assert().code(2).stderr(predicate::str::contains("'succeeded'"));
    f.bw().args(["requeue", "a0000001", "--state", "quarantined"]).assert().code(2);
}

#[test]
fn concurrent_bulk_requeues_requeue_each_job_exactly_once() {
    let f = Fixture::empty();
    f.bw().arg("init").assert().success();
    dead_letter(&f.store(), "charge-card", 3_000);
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
            .env("BW_DB", &f.db)
            .env("BW_NOW", T)
            .args(["--format", "json", "requeue", "--state", "dead-lettered", "--yes", "--force"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert!(b.status.success(), "{}", text(&b.stderr));
    let n = |o: &std::process::Output| json(&o.stdout)["requeued"].as_u64().unwrap();
    assert_eq!(n(&a) + n(&b), 3_000, "a={} b={}", n(&a), n(&b));
    let store = f.store();
    let per_job: Vec<i64> = store
        .connection()
        .prepare("SELECT count(*) FROM transitions WHERE from_state = 'dead-lettered' AND to_state = 'scheduled' GROUP BY job_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(per_job.len(), 3_000);
    assert!(per_job.iter().all(|&c| c == 1));
    assert_eq!(store.count_jobs(&JobFilter::state(JobState::Scheduled)).unwrap(), 3_000);
}

#[test]
fn concurrent_requeues_of_the_same_ids_requeue_each_once() {
    let f = Fixture::hostile_admin();
    let ids = ["a0000003", "a0000004", "a0000005", "a0000006"];
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
            .env("BW_DB", &f.db)
            .args(["--format", "json", "requeue"])
            .args(ids)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let requeued: usize = outs
        .iter()
        .map(|o| json(&o.stdout)["results"].as_array().unwrap().iter().filter(|r| r["result"] == "Requeued").count())
        .sum();
    assert_eq!(requeued, ids.len());
}

#[test]
fn an_id_given_twice_is_acted_on_and_reported_once() {
    // The second mention was refused as "NotRequeueable (scheduled)" and the command exited 1.
    let f = Fixture::hostile_admin();
    let out = f.bw().args(["requeue", "a0000004", "a0000004-0000-7000-8000-000000000004"]).assert().success();
    let stdout = text(&out.get_output().stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("Requeued"), "{stdout}");
    let out = f.bw().args(["cancel", "a0000004", "a0000004"]).assert().success();
    assert_eq!(text(&out.get_output().stdout).lines().count(), 1);
}

#[test]
fn bulk_requeue_dry_run_says_undecodable_payloads_will_quarantine_again() {
    // charge-card has a live worker, so its undecodable quarantines counted as "would be
    // requeued" with nothing said: requeued, they all quarantined again.
    let f = Fixture::hostile();
    let out = f
        .bw()
        .args(["requeue", "--state", "quarantined", "--wire-name", "charge-card", "--dry-run"])
        .assert()
        .success();
    let stdout = text(&out.get_output().stdout);
    assert!(stdout.contains("2 would be requeued"), "{stdout}");
    assert!(stdout.contains("2 were quarantined because their payload did not decode"), "{stdout}");
    // No such line where nothing is undecodable.
    let out = f.bw().args(["requeue", "--state", "dead-lettered", "--dry-run"]).assert().success();
    assert!(!text(&out.get_output().stdout).contains("did not decode"));
}

#[test]
fn cancel_reports_each_id() {
    let f = Fixture::hostile_admin();
    let out =
        f.bw().args(["--format", "json", "cancel", "a0000017", "a0000020", "a0000001", "ffffffff"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out.stdout);
    let r: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["result"].as_str().unwrap()).collect();
    assert_eq!(r, ["Cancelled", "CancelRequested", "NotCancellable", "NotFound"]);
    f.bw().args(["cancel", "a0000019"]).assert().success().stdout(predicate::str::contains("Cancelled"));
}

// ---- log tail ------------------------------------------------------------------------------

#[test]
fn log_tail_shows_the_last_entries_oldest_first() {
    let f = Fixture::hostile();
    let v = json(&f.bw().args(["--format", "json", "log", "tail", "-n", "3"]).output().unwrap().stdout);
    let e = v["entries"].as_array().unwrap();
    assert_eq!(e.len(), 3);
    let seqs: Vec<i64> = e.iter().map(|x| x["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seqs[2], f.store().last_seq().unwrap());
    let t = text(&f.bw().env("COLUMNS", "400").args(["log", "tail", "--job", "a0000004"]).output().unwrap().stdout);
    assert_eq!(t.lines().count(), 11, "{t}");
    assert!(t.contains("[detail hidden: panic, 449 B]"), "{t}");
    let dl = json(
        &f.bw()
            .args(["--format", "json", "log", "tail", "--state", "dead-lettered", "-n", "100"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(dl["entries"].as_array().unwrap().iter().all(|e| e["to"] == "dead-lettered"));
}

#[test]
fn log_follow_prints_every_new_entry_once_and_ctrl_c_ends_cleanly() {
    let f = Fixture::empty();
    f.bw().arg("init").assert().success();
    let store = f.store();
    store.enqueue(&NewJob::new("warm", "default", "{}")).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .env("BW_DB", &f.db)
        .args(["--format", "json", "log", "tail", "-n", "1", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&first).unwrap()["seq"], 1);
    // A steady stream of writes, one commit each.
    let writer = {
        let db = f.db.clone();
        std::thread::spawn(move || {
            let s = Store::open(&db).unwrap();
            for i in 0..200 {
                s.enqueue(&NewJob::new("stream", "default", format!("{{\"i\":{i}}}"))).unwrap();
                if i % 20 == 0 {
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
        })
    };
    let mut seqs = vec![1i64];
    while seqs.len() < 201 {
        let line = lines.next().expect("follow ended early").unwrap();
        seqs.push(serde_json::from_str::<serde_json::Value>(&line).unwrap()["seq"].as_i64().unwrap());
    }
    writer.join().unwrap();
    assert_eq!(seqs, (1..=201).collect::<Vec<_>>(), "missed or repeated entries");
    // SAFETY: signalling our own child process by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "Ctrl-C should end --follow with status 0, got {status:?}");
}

// ---- stats, workers ------------------------------------------------------------------------

#[test]
fn stats_counts_causes_and_quarantines_with_live_handlers() {
    let f = Fixture::hostile();
    let v = json(&f.bw().args(["--format", "json", "stats"]).output().unwrap().stdout);
    assert_eq!(v["totals"]["dead-lettered"], 10);
    assert_eq!(v["totals"]["quarantined"], 5);
    assert_eq!(v["by_queue"]["ops"]["dead-lettered"], 5);
    let causes = v["dead_letter_causes"].as_array().unwrap();
    assert_eq!(causes.iter().map(|c| c["count"].as_u64().unwrap()).sum::<u64>(), 10);
    let q = v["quarantines"].as_array().unwrap();
    let card = q.iter().find(|g| g["wire_name"] == "charge-card").unwrap();
    assert_eq!(
        (card["reason"].as_str(), card["count"].as_u64(), card["live_handlers"].as_u64()),
        (Some("undecodable-payload"), Some(2), Some(1))
    );
    let legacy = q.iter().find(|g| g["wire_name"] == "legacy-report").unwrap();
    assert_eq!(legacy["live_handlers"], 0);
    let t = text(&f.bw().arg("stats").output().unwrap().stdout);
    assert!(t.contains("Top dead-letter causes") && t.contains("LIVE HANDLER") && t.contains("all queues"), "{t}");
}

#[test]
fn stats_counts_fit_an_80_column_terminal_instead_of_wrapping_the_total() {
    // The full state names made the counts table 87 columns: TOTAL wrapped onto its own line.
    let f = Fixture::hostile();
    let out = f.bw().arg("stats").env("COLUMNS", "80").assert().success();
    let stdout = text(&out.get_output().stdout);
    let counts: Vec<&str> = stdout.lines().take_while(|l| !l.is_empty()).collect();
    assert!(counts[0].contains("Dead") && counts[0].ends_with("TOTAL"), "{stdout}");
    for line in &counts {
        assert!(unicode_width(line) <= 80, "wider than 80: {line:?}");
    }
    assert!(counts.iter().any(|l| l.starts_with("all queues") && l.trim_end().ends_with("33")), "{stdout}");
    // With room, the states keep their full names.
    let wide = text(&f.bw().arg("stats").env("COLUMNS", "120").assert().success().get_output().stdout);
    assert!(wide.lines().next().unwrap().contains("Dead-Lettered"), "{wide}");
}

#[test]
fn workers_shows_live_and_stale() {
    let f = Fixture::hostile();
    let v = json(&f.bw().args(["--format", "json", "workers"]).output().unwrap().stdout);
    let w = v["workers"].as_array().unwrap();
    assert_eq!(w.len(), 3);
    assert_eq!(w.iter().filter(|w| w["live"] == true).count(), 2);
    let t = text(&f.bw().arg("workers").output().unwrap().stdout);
    assert!(t.contains("stale") && t.contains("live") && t.contains("4242"), "{t}");
}

// ---- enqueue, purge, backoff, access, config, completions ----------------------------------

#[test]
fn enqueue_prints_the_id_of_a_job_that_then_exists() {
    let f = Fixture::hostile_admin();
    let out = f
        .bw()
        .args([
            "enqueue",
            "send-email",
            "--queue",
            "high",
            "--payload",
            r#"{"to":"a@b"}"#,
            "--label",
            "tenant=acme",
            "--in",
            "90s",
        ])
        .assert()
        .success();
    let id = text(&out.get_output().stdout).trim().to_string();
    let job = f.store().job(id.parse().unwrap()).unwrap().unwrap();
    assert_eq!((job.wire_name.as_str(), job.queue.as_str(), job.state), ("send-email", "high", JobState::Scheduled));
    assert_eq!(job.labels.get("tenant").map(String::as_str), Some("acme"));
    assert_eq!(job.due_at, T_MS + 90_000);
    let v = json(&f.bw().args(["--format", "json", "enqueue", "ping"]).output().unwrap().stdout);
    assert!(v["id"].as_str().unwrap().parse::<backwave::JobId>().is_ok());
}

#[test]
fn purge_counts_asks_and_deletes_old_terminal_jobs() {
    let f = Fixture::hostile_admin();
    let v =
        json(&f.bw().args(["--format", "json", "purge", "--older-than", "30m", "--dry-run"]).output().unwrap().stdout);
    let n = v["jobs"].as_u64().unwrap();
    assert!(n > 0);
    f.bw().args(["purge", "--older-than", "30m"]).assert().code(2).stderr(predicate::str::contains("--yes"));
    let before = f.store().counts().unwrap();
    let total_before: u64 = JobState::ALL.iter().map(|s| before.total(*s)).sum();
    let v = json(&f.bw().args(["--format", "json", "purge", "--older-than", "30m", "--yes"]).output().unwrap().stdout);
    assert_eq!(v["jobs"].as_u64(), Some(n));
    let after = f.store().counts().unwrap();
    assert_eq!(JobState::ALL.iter().map(|s| after.total(*s)).sum::<u64>(), total_before - n);
    // Default: the store's retention (14d): nothing that old here.
    f.bw().args(["purge", "--dry-run"]).assert().success().stdout(predicate::str::starts_with("0 terminal jobs"));
    assert!(f.store().audit_entries(0, 100).unwrap().iter().any(|a| a.action == "purge"));
}

#[test]
fn backoff_prints_the_schedule() {
    let f = Fixture::empty();
    let v = json(
        &f.bw()
            .args(["--format", "json", "backoff", "exponential", "2s", "--cap", "5m", "--max-attempts", "10"])
            .output()
            .unwrap()
            .stdout,
    );
    let steps = v["steps"].as_array().unwrap();
    let waits: Vec<Option<u64>> = steps.iter().map(|s| s["wait_ms"].as_u64()).collect();
    let secs = [2, 4, 8, 16, 32, 64, 128, 256, 300];
    assert_eq!(waits[..9], secs.iter().map(|s| Some(s * 1000)).collect::<Vec<_>>()[..]);
    assert_eq!(waits[9], None);
    assert_eq!(steps[8]["next_attempt_after_ms"], 810_000);
    let t = text(&f.bw().args(["backoff", "default"]).output().unwrap().stdout);
    assert!(t.contains("13m30s") && t.contains("dead-lettered on failure"), "{t}");
    let j = json(
        &f.bw()
            .args(["--format", "json", "backoff", "fixed", "10s", "--jitter", "0.2", "--max-attempts", "3"])
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(j["steps"][0]["wait_min_ms"], 8000);
    assert_eq!(j["steps"][0]["wait_max_ms"], 12000);
    f.bw().args(["backoff", "linear"]).assert().code(2);
}

#[test]
fn backoff_of_a_long_linear_curve_over_many_attempts_does_not_overflow() {
    // The total wait was summed in u64 and panicked ("attempt to add with overflow").
    let f = Fixture::empty();
    let out = f.bw().args(["backoff", "linear", "900y", "--max-attempts", "2000"]).assert().success();
    let stdout = text(&out.get_output().stdout);
    assert!(stdout.lines().last().unwrap().starts_with("2000 attempts in total"), "{stdout}");
    let json = json(
        &f.bw()
            .args(["--format", "json", "backoff", "linear", "900y", "--max-attempts", "2000"])
            .assert()
            .success()
            .get_output()
            .stdout,
    );
    let steps = json["steps"].as_array().unwrap();
    let at: Vec<u64> = steps.iter().filter_map(|s| s["next_attempt_after_ms"].as_u64()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "times since the first try never go backwards");
}

#[test]
fn help_describes_every_command_including_jobs_log_and_config() {
    // `bw --help` listed jobs, log and config with a blank description.
    let f = Fixture::empty();
    let out = f.bw().arg("--help").assert().success();
    let help = text(&out.get_output().stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .collect();
    assert!(commands.len() >= 15, "{help}");
    for line in commands {
        assert!(line.split_whitespace().count() > 1, "no description: {line:?}");
    }
}

#[test]
fn revoking_the_last_admin_warns_and_says_how_to_get_one_back() {
    let f = Fixture::hostile_admin();
    let me = current_actor();
    f.bw().args(["grant", "bob", "admin"]).assert().success();
    let out = f.bw().args(["revoke", "bob", "admin"]).assert().success();
    assert!(out.get_output().stderr.is_empty(), "another admin is left: {}", text(&out.get_output().stderr));
    let out = f.bw().args(["revoke", &me, "admin"]).assert().success();
    let stderr = text(&out.get_output().stderr);
    assert!(stderr.contains("no admin now") && stderr.contains("bw init"), "{stderr}");
    // And `bw init` does bring one back.
    f.bw().arg("init").assert().success();
    assert!(f.store().permissions(&me).unwrap().contains(&Permission::Admin));
}

#[test]
fn backoff_with_an_absurd_attempt_budget_is_refused_instead_of_aborting() {
    // --max-attempts 4000000000 allocated a 288 GB schedule and the process aborted.
    let f = Fixture::empty();
    let out = f.bw().args(["backoff", "exponential", "1s", "--max-attempts", "4000000000"]).assert().code(2);
    let stderr = text(&out.get_output().stderr);
    assert!(stderr.contains("4000000000") && stderr.contains("10000"), "{stderr}");
    f.bw().args(["backoff", "exponential", "1s", "--max-attempts", "10000"]).assert().success();
}

#[test]
fn grant_revoke_audit_and_config() {
    let f = Fixture::hostile_admin();
    f.bw()
        .args(["grant", "bob", "operate"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Granted operate to bob"));
    assert!(f.store().permissions("bob").unwrap().contains(&Permission::Operate));
    f.bw().args(["revoke", "bob", "operate"]).assert().success();
    f.bw().args(["revoke", "bob", "operate"]).assert().success().stdout(predicate::str::contains("did not hold"));
    f.bw().args(["config", "set", "retention", "7d"]).assert().success();
    assert_eq!(f.store().setting(SettingKey::Retention).unwrap(), "7d");
    let v = json(&f.bw().args(["--format", "json", "audit", "--since", "1h"]).output().unwrap().stdout);
    let actions: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for a in ["grant", "revoke", "config"] {
        assert!(actions.contains(&a), "{actions:?}");
    }
    let list = json(&f.bw().args(["--format", "json", "config", "list"]).output().unwrap().stdout);
    assert_eq!(list["settings"].as_array().unwrap().len(), 2);
}

#[test]
fn completions_are_generated() {
    let f = Fixture::empty();
    for shell in ["bash", "zsh", "fish"] {
        f.bw().args(["completions", shell]).assert().success().stdout(predicate::str::contains("requeue"));
    }
    f.bw().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn a_closed_pipe_is_a_quiet_success() {
    let f = Fixture::empty();
    f.bw().arg("init").assert().success();
    dead_letter(&f.store(), "charge-card", 2_000);
    let bw = assert_cmd::cargo::cargo_bin("bw");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("set -o pipefail; '{}' jobs list --limit 2000 | head -1", bw.display()))
        .env("BW_DB", &f.db)
        .output()
        .unwrap();
    assert!(out.status.success(), "status {:?}, stderr: {}", out.status, text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

// ---- at a terminal (through `script`, which gives the command a pseudo-terminal) ------------

/// Run `bw ARGS` on a pseudo-terminal with `input` typed; None when `script` is missing.
fn on_a_tty(f: &Fixture, args: &str, input: &str, env: &[(&str, &str)]) -> Option<std::process::Output> {
    which("script")?;
    let bw = assert_cmd::cargo::cargo_bin("bw");
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &format!("'{}' {args}", bw.display()), "/dev/null"])
        .env("BW_DB", &f.db)
        .env("BW_NOW", T)
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    Some(child.wait_with_output().unwrap())
}

fn which(program: &str) -> Option<()> {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()?
        .status
        .success()
        .then_some(())
}

#[test]
fn rows_never_wrap_on_a_narrow_terminal_in_colour() {
    // The last-resort cut was skipped when colour was on, that is at every real terminal: a
    // Running row's worker wrapped onto a line of its own at 80 columns.
    let f = Fixture::hostile();
    let Some(out) = on_a_tty(&f, "jobs list --limit 4", "", &[("COLUMNS", "80")]) else { return };
    let screen = text(&out.stdout);
    assert!(screen.contains("\u{1b}["), "coloured at a terminal: {screen}");
    let plain = strip_ansi(&screen);
    let rows: Vec<&str> = plain.lines().filter(|l| l.starts_with("000000")).collect();
    assert_eq!(rows.len(), 4, "{plain}");
    for line in plain.lines() {
        assert!(unicode_width(line.trim_end_matches('\r')) <= 80, "wider than 80: {line:?}");
    }
    assert!(rows[0].contains("Running") && rows[0].trim_end().ends_with('…'), "{plain}");
}

/// The text of a coloured screen, without its SGR sequences.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn one_state_lists_at_80_columns_keep_whole_wire_names_instead_of_a_state_column() {
    // `--state dead-lettered` at 80 columns spent 15 cells repeating "Dead-Lettered" and cut
    // every wire name to 8 ("notify-…").
    let f = Fixture::hostile();
    let out = f.bw().args(["jobs", "list", "--state", "dead-lettered"]).env("COLUMNS", "80").assert().success();
    let stdout = text(&out.get_output().stdout);
    assert!(stdout.starts_with("ID        WIRE NAME"), "{stdout}");
    assert!(stdout.contains("notify-user") && stdout.contains("sync-inventory"), "{stdout}");
    assert!(!stdout.contains("Dead-Lettered"), "{stdout}");
    // Several states, or room enough: the column stays.
    let mixed = f.bw().args(["jobs", "list", "--state", "dead-lettered,quarantined"]).env("COLUMNS", "80").assert();
    assert!(text(&mixed.get_output().stdout).contains("STATE"));
    let wide = f.bw().args(["jobs", "list", "--state", "dead-lettered"]).env("COLUMNS", "120").assert();
    assert!(text(&wide.get_output().stdout).contains("Dead-Lettered"));
}

#[test]
fn running_jobs_at_80_columns_keep_their_lease_on_the_row() {
    // A long worker id pushed LEASE past the edge and the row wrapped.
    let f = Fixture::hostile();
    let out = f.bw().args(["jobs", "list", "--state", "running"]).env("COLUMNS", "80").assert().success();
    let stdout = text(&out.get_output().stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("000000")).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for row in rows {
        assert!(unicode_width(row) <= 80, "wider than 80: {row:?}");
        assert!(row.ends_with(" left") || row.ends_with(" ago"), "the lease is shown: {row:?}");
    }
}

#[test]
fn bulk_requeue_at_a_terminal_asks_with_the_count() {
    let f = Fixture::hostile_admin();
    let Some(out) = on_a_tty(&f, "requeue --state dead-lettered", "n\n", &[]) else { return };
    let t = text(&out.stdout);
    assert!(t.contains("Requeue 4 dead-lettered jobs with a fresh attempt budget?"), "{t}");
    assert!(t.contains("nothing requeued"), "{t}");
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 10);
    let out = on_a_tty(&f, "requeue --state dead-lettered", "y\n", &[]).unwrap();
    assert!(text(&out.stdout).contains("Requeued 4 dead-lettered jobs."), "{}", text(&out.stdout));
    assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 6);
}

#[test]
fn colour_only_at_a_terminal_and_never_with_no_color() {
    let f = Fixture::hostile();
    let Some(out) = on_a_tty(&f, "jobs list --state dead-lettered", "", &[]) else { return };
    assert!(text(&out.stdout).contains("\u{1b}[31mDead-Lettered\u{1b}[0m"), "{}", text(&out.stdout));
    let plain = on_a_tty(&f, "--no-color jobs list --state dead-lettered", "", &[]).unwrap();
    assert!(!text(&plain.stdout).contains('\u{1b}'), "{}", text(&plain.stdout));
    let env = on_a_tty(&f, "jobs list --state dead-lettered", "", &[("NO_COLOR", "1")]).unwrap();
    assert!(!text(&env.stdout).contains('\u{1b}'), "{}", text(&env.stdout));
    // Piped: no colour either.
    assert!(!f.bw().args(["jobs", "list", "--state", "dead-lettered"]).output().unwrap().stdout.contains(&0x1b));
}

#[test]
fn an_error_into_a_closed_stderr_pipe_keeps_its_exit_status_instead_of_panicking() {
    // `bw ... 2>&1 | head` closed stderr before the error line; eprintln! panicked (exit 101).
    let f = Fixture::hostile_stranger();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .args(["requeue", "a0000004"])
        .env("BW_DB", &f.db)
        .env("BW_NOW", T)
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
}
