//! `bw` as an operator meets it: the real binary against stores built by the library and by
//! fixtures/hostile.sql, with the clock pinned (BW_NOW) and the width pinned (COLUMNS).
//! What a person reads is snapshotted whole (tests/snapshots/cli__*.snap: stdout, stderr and the
//! exit status of each command, see `harness::Run`); JSON output is checked by parsing it, never
//! by matching its text; a test about one property (a width, an exit code under odd conditions,
//! what the store holds afterwards) asserts that property. At a terminal, `bw` runs on a pty.

#[path = "cli/at3am.rs"]
mod at3am;
use crate::backend;
#[path = "cli/harness.rs"]
mod harness;
#[path = "cli/incident.rs"]
mod incident;
#[path = "cli/limits.rs"]
mod limits;
#[path = "cli/priority.rs"]
mod priority;
use crate::pty;
#[path = "cli/refusals.rs"]
mod refusals;
#[path = "cli/schedules.rs"]
mod schedules;
#[path = "cli/target.rs"]
mod target;
#[path = "cli/workflows.rs"]
mod workflows;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use backend::both_backends;
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
    let mode = std::fs::metadata(f.db.file()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let store = Store::open(&f.db).unwrap();
    assert!(store.permissions(&current_actor()).unwrap().contains(&Permission::Admin));
    // Again: an existing store is left as it is, and nobody else becomes admin.
    insta::assert_snapshot!(f.run(&["init"]));
}

#[test]
fn reading_a_missing_store_exits_3_and_creates_nothing() {
    let f = Fixture::empty();
    let runs = [f.run(&["jobs", "list"]), f.run(&["requeue", "a0000001"])];
    insta::assert_snapshot!(transcript(&runs));
    assert!(!f.db.file().exists(), "a reading command created the store");
}

#[test]
fn a_file_that_is_not_a_store_exits_3() {
    let f = Fixture::empty();
    std::fs::write(f.db.file(), "not a database at all, just text that is long enough to have a header").unwrap();
    insta::assert_snapshot!(f.run(&["stats"]));
}

/// A stdout that cannot be written (`/dev/full`: "No space left on device") is `bw`'s own output
/// failing, said as such with exit 4: never 3, which tells a monitor the store is down.
#[test]
fn a_stdout_that_cannot_be_written_exits_4_saying_so_not_3() {
    let f = Fixture::hostile_admin();
    assert_exits_4_into_a_full_disk(&["--db", f.db.arg(), "jobs", "list"]);
}

/// Run `bw args` with its stdout on `/dev/full`: exit 4, saying so on stderr.
fn assert_exits_4_into_a_full_disk(args: &[&str]) {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw")).args(args).stdout(full).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.starts_with("bw: error: bw's own input or output failed: No space left on device"), "{stderr}");
}

/// The completion scripts are written as every other output (found by a review: the
/// generator's own write panicked, exit 101): a closed pipe is a quiet success, a full disk exit 4.
#[test]
fn completions_into_a_closed_pipe_succeed_quietly_and_into_a_full_disk_exit_4() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_exits_4_into_a_full_disk(&["completions", "bash"]);
}

/// A job committed before its output failed: its id is said on stderr, so that the command is
/// not run again for an id it never printed (a second job).
#[test]
fn an_enqueue_whose_output_fails_says_the_new_jobs_id_on_stderr() {
    let f = Fixture::hostile_admin();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .args(["--db", f.db.arg(), "enqueue", "ping", "--queue", "q"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bw: enqueued job ")?.strip_suffix(", but its output could not be written"))
        .unwrap_or_else(|| panic!("no id said: {stderr}"));
    let job = f.store().job(id.parse().unwrap()).unwrap().expect("the job said is in the store");
    assert_eq!((job.wire_name.as_str(), job.queue.as_str()), ("ping", "q"));
}

/// Numbers past what the store can take are refused or read as what they mean, never a panic
/// (found by a review: both exited 101 with a backtrace).
#[test]
fn a_busy_timeout_past_24_days_is_refused_and_a_page_past_every_job_is_empty() {
    let f = Fixture::hostile_admin();
    f.bw()
        .args(["--busy-timeout", "30d", "stats"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("'30d' is too long a wait: at most 24 days"));
    f.bw()
        .args(["jobs", "list", "--page", "18446744073709551615"])
        .assert()
        .success()
        .stdout(predicate::str::contains("on this page"));
}

#[test]
fn a_store_locked_by_another_writer_exits_3_naming_the_lock() {
    let f = Fixture::hostile_admin();
    let holder = backwave::store::RawConnection::open(f.db.file()).unwrap();
    holder.batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    f.bw()
        .args(["--busy-timeout", "200ms", "requeue", "a0000003"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("locked").and(predicate::str::contains("write lock")));
    assert!(started.elapsed() < Duration::from_secs(10));
    // Reading still works under WAL while the writer holds its lock.
    f.bw().args(["--busy-timeout", "200ms", "jobs", "list"]).assert().success();
    holder.batch("ROLLBACK").unwrap();
    f.bw().args(["--busy-timeout", "200ms", "--format", "json", "requeue", "a0000003"]).assert().success();
}

// ---- jobs list -----------------------------------------------------------------------------

both_backends! {
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
}

both_backends! {
    fn jobs_list_pages_with_a_footer_and_the_next_command() {
        let f = Fixture::hostile();
        // The first page says how to get the next; the last page does not.
        let runs = [
            f.run(&["jobs", "list", "--state", "dead-lettered", "--limit", "3"]),
            f.run(&["jobs", "list", "--state", "dead-lettered", "--limit", "3", "--page", "4"]),
        ];
        insta::assert_snapshot!("cli__jobs_list_pages_with_a_footer_and_the_next_command", transcript(&runs));
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
}

both_backends! {
    fn jobs_list_columns_adapt_to_the_state() {
        let f = Fixture::hostile();
        // Scheduled: the next attempt. Running: the lease owner as host/pid/group, and the lease left.
        let runs = [f.run(&["jobs", "list", "--state", "scheduled"]), f.run(&["jobs", "list", "--state", "running"])];
        insta::assert_snapshot!("cli__jobs_list_columns_adapt_to_the_state", transcript(&runs));
    }
}

both_backends! {
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

both_backends! {
    fn empty_results_are_said_in_words() {
        let f = Fixture::hostile();
        let e = Fixture::empty();
        e.bw().arg("init").assert().success();
        let runs = [
            f.run(&["jobs", "list", "--state", "dead-lettered", "--queue", "nowhere"]),
            f.run(&["jobs", "list", "--state", "quarantined", "--wire-name", "x"]),
            e.run(&["jobs", "list"]),
            e.run(&["log", "tail"]),
            e.run(&["workers"]),
            e.run(&["stats"]),
        ];
        insta::assert_snapshot!("cli__empty_results_are_said_in_words", transcript(&runs));
        let v = json(&e.bw().args(["--format", "json", "jobs", "list"]).output().unwrap().stdout);
        assert_eq!(v["jobs"].as_array().unwrap().len(), 0);
        assert_eq!(v["total"], 0);
    }
}

both_backends! {
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
            (&["enqueue", "x", "--label", "a=1", "--label", "a=2"], "--label 'a' is given twice"),
            (&["enqueue", "x", "--unique-key", "k", "--unique-states", "scheduled,finished"], "'finished'"),
            (&["enqueue", "x", "--unique-key", "k", "--unique-states", "succeeded"], "'succeeded'"),
            (&["--busy-timeout", "soon", "stats"], "'soon'"),
            (&["backoff", "exponential", "2s", "--jitter", "7"], "jitter"),
            (&["config", "set", "colour", "blue"], "'colour'"),
            (&["grant", "bob", "superuser"], "'superuser'"),
        ];
        let mut runs = Vec::new();
        for (args, quoted) in cases {
            let run = f.run(args);
            assert_eq!(run.code, Some(2), "{run}");
            assert!(run.stderr.contains(quoted), "should quote {quoted}: {run}");
            assert!(run.stdout.is_empty(), "printed data: {run}");
            runs.push(run);
        }
        insta::assert_snapshot!("cli__bad_input_gets_one_line_quoting_the_value_and_exit_2", transcript(&runs));
    }
}

// ---- jobs show -----------------------------------------------------------------------------

both_backends! {
    fn an_ambiguous_id_prefix_lists_the_candidates_and_exits_2() {
        let f = Fixture::hostile();
        let runs = [f.run(&["jobs", "show", "a00000"]), f.run(&["jobs", "show", "ffff"])];
        insta::assert_snapshot!("cli__an_ambiguous_id_prefix_lists_the_candidates_and_exits_2", transcript(&runs));
    }
}

both_backends! {
    fn jobs_show_has_the_delay_table_budget_handlers_and_history() {
        let f = Fixture::hostile();
        // Hidden detail shows its type and size ("hidden: panic, 449 B"), never its text.
        let run = f.run(&["jobs", "show", "a0000004"]);
        assert!(!run.stdout.contains("backtrace"), "{run}");
        insta::assert_snapshot!("cli__jobs_show_has_the_delay_table_budget_handlers_and_history", run);

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
}

both_backends! {
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
        insta::assert_snapshot!("cli__detail_is_refused_without_the_permission_and_revealed_and_audited_with_it", f.run(&["jobs", "show", "a0000004", "--detail"]));
    }
}

both_backends! {
    fn switched_off_failure_detail_says_so() {
        let f = Fixture::hostile_admin();
        // a0000006 failed while detail was not captured: there is nothing to reveal, and bw says why.
        let runs = [
            f.run(&["config", "set", "failure_detail", "off"]),
            f.run(&["jobs", "show", "a0000006", "--detail"]),
            f.run(&["config", "get", "failure_detail"]),
        ];
        insta::assert_snapshot!("cli__switched_off_failure_detail_says_so", transcript(&runs));
    }
}

// ---- hostile text --------------------------------------------------------------------------

both_backends! {
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
}

// ---- requeue and cancel --------------------------------------------------------------------

both_backends! {
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
        let runs = [f.run(&["requeue", "a0000012"]), f.run(&["requeue", "a0000001"])];
        insta::assert_snapshot!("cli__requeue_by_id_reports_each_id_and_exits_1_when_any_was_refused", transcript(&runs));
    }
}

both_backends! {
    fn operating_without_the_permission_is_refused_and_changes_nothing() {
        let f = Fixture::hostile_stranger();
        let runs = [
            f.run(&["requeue", "a0000003"]),
            f.run(&["cancel", "a0000017"]),
            f.run(&["requeue", "--state", "dead-lettered", "--yes", "--force"]),
            f.run(&["purge", "--older-than", "1s", "--yes"]),
            f.run(&["enqueue", "ping"]),
            f.run(&["grant", "bob", "operate"]),
            f.run(&["config", "set", "retention", "7d"]),
        ];
        insta::assert_snapshot!("cli__operating_without_the_permission_is_refused_and_changes_nothing", transcript(&runs));
        let counts = f.store().counts().unwrap();
        assert_eq!(counts.total(JobState::DeadLettered), 10);
        assert_eq!(counts.total(JobState::Scheduled), 4);
        f.grant_me(Permission::Operate);
        f.bw().args(["requeue", "a0000003"]).assert().success();
        f.bw().args(["cancel", "a0000017"]).assert().success();
    }
}

both_backends! {
    fn bulk_requeue_counts_exactly_asks_and_needs_force_for_unhandled_wire_names() {
        let f = Fixture::hostile_admin();
        let v = json(
            &f.bw().args(["--format", "json", "requeue", "--state", "dead-lettered", "--dry-run"]).output().unwrap().stdout,
        );
        assert_eq!(v["matching"], 10);
        assert_eq!(v["would_requeue"], 4);
        assert_eq!(v["would_requarantine"], 6);
        let dry_run = f.run(&["requeue", "--state", "dead-lettered", "--dry-run"]);
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
        let unhandled = f.run(&["requeue", "--state", "dead-lettered", "--yes"]);
        let forced = f.run(&["requeue", "--state", "dead-lettered", "--yes", "--force"]);
        assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 0);
        let runs = [
            dry_run,
            unhandled,
            forced,
            f.run(&["requeue", "--state", "succeeded"]),
            f.run(&["requeue", "a0000001", "--state", "quarantined"]),
        ];
        insta::assert_snapshot!("cli__bulk_requeue_counts_exactly_asks_and_needs_force_for_unhandled_wire_names", transcript(&runs));
    }
}

both_backends! {
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
            .raw_query("SELECT count(*) FROM transitions WHERE from_state = 'dead-lettered' AND to_state = 'scheduled' GROUP BY job_id", &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_i64())
            .collect();
        assert_eq!(per_job.len(), 3_000);
        assert!(per_job.iter().all(|&c| c == 1));
        assert_eq!(store.count_jobs(&JobFilter::state(JobState::Scheduled)).unwrap(), 3_000);
    }
}

both_backends! {
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
}

both_backends! {
    fn an_id_given_twice_is_acted_on_and_reported_once() {
        // The second mention was refused as "NotRequeueable (scheduled)" and the command exited 1.
        let f = Fixture::hostile_admin();
        let runs = [
            f.run(&["requeue", "a0000004", "a0000004-0000-7000-8000-000000000004"]),
            f.run(&["cancel", "a0000004", "a0000004"]),
        ];
        insta::assert_snapshot!("cli__an_id_given_twice_is_acted_on_and_reported_once", transcript(&runs));
    }
}

both_backends! {
    fn bulk_requeue_dry_run_says_undecodable_payloads_will_quarantine_again() {
        // charge-card has a live worker, so its undecodable quarantines counted as "would be
        // requeued" with nothing said: requeued, they all quarantined again. (A plan needs the
        // permission to act: see `a_bulk_action_without_operate_is_refused_before_its_plan`.)
        let f = Fixture::hostile_admin();
        // The second says nothing about decoding: nothing there is undecodable.
        let runs = [
            f.run(&["requeue", "--state", "quarantined", "--wire-name", "charge-card", "--dry-run"]),
            f.run(&["requeue", "--state", "dead-lettered", "--dry-run"]),
        ];
        assert!(!runs[1].stdout.contains("did not decode"), "{}", runs[1]);
        insta::assert_snapshot!("cli__bulk_requeue_dry_run_says_undecodable_payloads_will_quarantine_again", transcript(&runs));
    }
}

both_backends! {
    fn cancel_reports_each_id() {
        let f = Fixture::hostile_admin();
        let out =
            f.bw().args(["--format", "json", "cancel", "a0000017", "a0000020", "a0000001", "ffffffff"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let v = json(&out.stdout);
        let r: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["result"].as_str().unwrap()).collect();
        assert_eq!(r, ["Cancelled", "CancelRequested", "NotCancellable", "NotFound"]);
        insta::assert_snapshot!("cli__cancel_reports_each_id", f.run(&["cancel", "a0000019"]));
    }
}

// ---- log tail ------------------------------------------------------------------------------

both_backends! {
    fn log_tail_shows_the_last_entries_oldest_first() {
        let f = Fixture::hostile();
        let v = json(&f.bw().args(["--format", "json", "log", "tail", "-n", "3"]).output().unwrap().stdout);
        let e = v["entries"].as_array().unwrap();
        assert_eq!(e.len(), 3);
        let seqs: Vec<i64> = e.iter().map(|x| x["seq"].as_i64().unwrap()).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(seqs[2], f.store().log_end().unwrap().seq);
        // One job's eleven entries under the header, its failure detail hidden ("[detail hidden:
        // panic, 449 B]").
        let job = f.run_env(&[("COLUMNS", "400")], &["log", "tail", "--job", "a0000004"]);
        assert_eq!(job.stdout.lines().count(), 12, "{job}");
        insta::assert_snapshot!("cli__log_tail_shows_the_last_entries_oldest_first", job);
        let dl = json(
            &f.bw()
                .args(["--format", "json", "log", "tail", "--state", "dead-lettered", "-n", "100"])
                .output()
                .unwrap()
                .stdout,
        );
        assert!(dl["entries"].as_array().unwrap().iter().all(|e| e["to"] == "dead-lettered"));
    }
}

both_backends! {
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
            let db = f.db.target();
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
}

// ---- stats, workers ------------------------------------------------------------------------

both_backends! {
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
        insta::assert_snapshot!("cli__stats_counts_causes_and_quarantines_with_live_handlers", f.run(&["stats"]));
    }
}

both_backends! {
    fn stats_counts_fit_an_80_column_terminal_instead_of_wrapping_the_total() {
        // The full state names made the counts table 87 columns: TOTAL wrapped onto its own line.
        let f = Fixture::hostile();
        let narrow = f.run_env(&[("COLUMNS", "80")], &["stats"]);
        for line in narrow.stdout.lines().take_while(|l| !l.is_empty()) {
            assert!(unicode_width(line) <= 80, "wider than 80: {line:?}");
        }
        // With room, the states keep their full names.
        let wide = f.run_env(&[("COLUMNS", "120")], &["stats"]);
        insta::assert_snapshot!("cli__stats_counts_fit_an_80_column_terminal_instead_of_wrapping_the_total", transcript(&[narrow, wide]));
    }
}

both_backends! {
    fn workers_shows_live_and_stale() {
        let f = Fixture::hostile();
        let v = json(&f.bw().args(["--format", "json", "workers"]).output().unwrap().stdout);
        let w = v["workers"].as_array().unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w.iter().filter(|w| w["live"] == true).count(), 2);
        insta::assert_snapshot!("cli__workers_shows_live_and_stale", f.run(&["workers"]));
    }
}

// ---- enqueue, purge, backoff, access, config, completions ----------------------------------

both_backends! {
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
}

both_backends! {
    fn enqueue_with_a_unique_key_prints_the_job_that_holds_the_key() {
        let f = Fixture::hostile_admin();
        let before = f.store().counts().unwrap().total(JobState::Scheduled);
        let key = ["enqueue", "nightly-report", "--unique-key", "report:2026-12-01"];
        let first = f.run(&key);
        assert_eq!(first.code, Some(0), "{first}");
        let id = first.stdout.trim().to_string();
        let again = f.run(&key);
        assert_eq!((again.code, again.stdout.trim()), (Some(0), id.as_str()), "{again}");
        let as_json = f.run(&[&["--format", "json"][..], &key[..]].concat());
        let v = json(as_json.stdout.as_bytes());
        assert_eq!((v["id"].as_str(), v["result"].as_str()), (Some(id.as_str()), Some("duplicate")));
        assert_eq!(v["unique_key"], "report:2026-12-01");
        let other = f.run(&[
            "enqueue",
            "nightly-report",
            "--unique-key",
            "report:2026-12-02",
            "--unique-states",
            "scheduled,running,succeeded",
            "--unique-for",
            "1d",
        ]);
        let other_id = other.stdout.trim().to_string();
        assert_ne!(other_id, id);
        assert_eq!(f.store().counts().unwrap().total(JobState::Scheduled), before + 2);
        let text = transcript(&[first, again, as_json, other]).replace(&id, "[ID 1]").replace(&other_id, "[ID 2]");
        insta::assert_snapshot!("cli__enqueue_with_a_unique_key_prints_the_job_that_holds_the_key", text);
    }
}

both_backends! {
    fn purge_counts_asks_and_deletes_old_terminal_jobs() {
        let f = Fixture::hostile_admin();
        let v =
            json(&f.bw().args(["--format", "json", "purge", "--older-than", "30m", "--dry-run"]).output().unwrap().stdout);
        let n = v["jobs"].as_u64().unwrap();
        assert!(n > 0);
        let unconfirmed = f.run(&["purge", "--older-than", "30m"]);
        let before = f.store().counts().unwrap();
        let total_before: u64 = JobState::ALL.iter().map(|s| before.total(*s)).sum();
        let v = json(&f.bw().args(["--format", "json", "purge", "--older-than", "30m", "--yes"]).output().unwrap().stdout);
        assert_eq!(v["jobs"].as_u64(), Some(n));
        let after = f.store().counts().unwrap();
        assert_eq!(JobState::ALL.iter().map(|s| after.total(*s)).sum::<u64>(), total_before - n);
        // Default: the store's retention (14d): nothing that old here.
        insta::assert_snapshot!("cli__purge_counts_asks_and_deletes_old_terminal_jobs", transcript(&[unconfirmed, f.run(&["purge", "--dry-run"])]));
        assert!(f.store().audit_entries(0, 100).unwrap().iter().any(|a| a.action == "purge"));
    }
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
    let j = json(
        &f.bw()
            .args(["--format", "json", "backoff", "fixed", "10s", "--jitter", "0.2", "--max-attempts", "3"])
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(j["steps"][0]["wait_min_ms"], 8000);
    assert_eq!(j["steps"][0]["wait_max_ms"], 12000);
    let runs = [
        f.run(&["backoff", "default"]),
        f.run(&["backoff", "exponential", "2s", "--cap", "5m", "--max-attempts", "10"]),
        f.run(&["backoff", "fixed", "10s", "--jitter", "0.2", "--max-attempts", "3"]),
        f.run(&["backoff", "linear"]),
    ];
    insta::assert_snapshot!(transcript(&runs));
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
    // Revoking bob leaves an admin (the test user): no warning. Revoking the last one warns, and
    // `bw init` does bring one back.
    let runs = [
        f.run(&["grant", "bob", "admin"]),
        f.run(&["revoke", "bob", "admin"]),
        f.run(&["revoke", &me, "admin"]),
        f.run(&["init"]),
    ];
    assert!(runs[1].stderr.is_empty(), "another admin is left: {}", runs[1]);
    insta::assert_snapshot!(transcript(&runs));
    assert!(f.store().permissions(&me).unwrap().contains(&Permission::Admin));
}

#[test]
fn backoff_with_an_absurd_attempt_budget_is_refused_instead_of_aborting() {
    // --max-attempts 4000000000 allocated a 288 GB schedule and the process aborted.
    let f = Fixture::empty();
    insta::assert_snapshot!(f.run(&["backoff", "exponential", "1s", "--max-attempts", "4000000000"]));
    f.bw().args(["backoff", "exponential", "1s", "--max-attempts", "10000"]).assert().success();
}

both_backends! {
    fn grant_revoke_audit_and_config() {
        let f = Fixture::hostile_admin();
        let grant = f.run(&["grant", "bob", "operate"]);
        assert!(f.store().permissions("bob").unwrap().contains(&Permission::Operate));
        let runs = [
            grant,
            f.run(&["revoke", "bob", "operate"]),
            f.run(&["revoke", "bob", "operate"]),
            f.run(&["config", "set", "retention", "7d"]),
            f.run(&["config", "list"]),
        ];
        insta::assert_snapshot!("cli__grant_revoke_audit_and_config", transcript(&runs));
        assert_eq!(f.store().setting(SettingKey::Retention).unwrap(), "7d");
        let v = json(&f.bw().args(["--format", "json", "audit", "--since", "1h"]).output().unwrap().stdout);
        let actions: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
        for a in ["grant", "revoke", "config"] {
            assert!(actions.contains(&a), "{actions:?}");
        }
        let list = json(&f.bw().args(["--format", "json", "config", "list"]).output().unwrap().stdout);
        assert_eq!(list["settings"].as_array().unwrap().len(), 4, "failure_detail, retention, payload_limit, output_limit");
    }
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
    // `bw jobs list --limit 2000 | head -1`: the reader goes after one line, with far more than
    // a pipe's buffer still to write.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .args(["jobs", "list", "--limit", "2000"])
        .env("BW_DB", &f.db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("ID "), "{first}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "status {:?}, stderr: {}", out.status, text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

// ---- at a terminal (on a pty: tests/common/pty.rs) -----------------------------------------

/// `bw ARGS` on a `cols`-wide terminal against `f`'s store, with `env` on top. COLUMNS is not
/// set: `bw` sizes itself from the terminal, as for a person.
fn at_a_terminal(f: &Fixture, cols: u16, args: &[&str], env: &[(&str, &str)]) -> pty::Pty {
    let mut term = pty::Term::new(cols, 24).env("BW_DB", &f.db).env("BW_NOW", T);
    for (k, v) in env {
        term = term.env(k, v);
    }
    term.spawn(assert_cmd::cargo::cargo_bin("bw"), args)
}

const PTY_WAIT: Duration = Duration::from_secs(20);

/// What `bw` wrote to the terminal, escapes included, with the terminal's CR LF as LF.
fn written(t: &pty::Pty) -> String {
    text(&t.transcript()).replace("\r\n", "\n")
}

both_backends! {
    fn rows_never_wrap_on_a_narrow_terminal_in_colour() {
        // The last-resort cut was skipped when colour was on, that is at every real terminal: a
        // Running row's worker wrapped onto a line of its own at 80 columns.
        let f = Fixture::hostile();
        let mut t = at_a_terminal(&f, 80, &["jobs", "list", "--limit", "4"], &[]);
        assert_eq!(t.wait_exit(PTY_WAIT), 0, "{}", t.screen());
        let out = written(&t);
        assert!(out.contains("\u{1b}["), "coloured at a terminal: {out}");
        let plain = strip_ansi(&out);
        let rows: Vec<&str> = plain.lines().filter(|l| l.starts_with("000000")).collect();
        assert_eq!(rows.len(), 4, "{plain}");
        for line in plain.lines() {
            assert!(unicode_width(line) <= 80, "wider than 80: {line:?}");
        }
        assert!(rows[0].contains("Running") && rows[0].trim_end().ends_with('…'), "{plain}");
        // And on the screen a person sees, no row spilled onto a line of its own.
        let screen = t.screen();
        assert_eq!(screen.trim_end().lines().count(), plain.trim_end().lines().count(), "{screen}");
    }
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

both_backends! {
    fn one_state_lists_at_80_columns_keep_whole_wire_names_instead_of_a_state_column() {
        // `--state dead-lettered` at 80 columns spent 15 cells repeating "Dead-Lettered" and cut
        // every wire name to 8 ("notify-…").
        let f = Fixture::hostile();
        let narrow = f.run_env(&[("COLUMNS", "80")], &["jobs", "list", "--state", "dead-lettered"]);
        assert!(!narrow.stdout.contains("Dead-Lettered"), "{narrow}");
        // Several states, or room enough: the column stays.
        let runs = [
            narrow,
            f.run_env(&[("COLUMNS", "80")], &["jobs", "list", "--state", "dead-lettered,quarantined"]),
            f.run_env(&[("COLUMNS", "120")], &["jobs", "list", "--state", "dead-lettered"]),
        ];
        insta::assert_snapshot!("cli__one_state_lists_at_80_columns_keep_whole_wire_names_instead_of_a_state_column", transcript(&runs));
    }
}

both_backends! {
    fn running_jobs_at_80_columns_keep_their_lease_on_the_row() {
        // A long worker id pushed LEASE past the edge and the row wrapped.
        let f = Fixture::hostile();
        let run = f.run_env(&[("COLUMNS", "80")], &["jobs", "list", "--state", "running"]);
        let rows: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("000000")).collect();
        assert_eq!(rows.len(), 3, "{run}");
        for row in rows {
            assert!(unicode_width(row) <= 80, "wider than 80: {row:?}");
            assert!(row.ends_with(" left") || row.ends_with(" ago"), "the lease is shown: {row:?}");
        }
        insta::assert_snapshot!("cli__running_jobs_at_80_columns_keep_their_lease_on_the_row", run);
    }
}

both_backends! {
    fn bulk_requeue_at_a_terminal_asks_with_the_count() {
        let f = Fixture::hostile_admin();
        // Typed once the whole question is on the screen, as a person would.
        let question = "Requeue 4 dead-lettered jobs with a fresh attempt budget? (6 more would quarantine again and are skipped; --force includes them) [y/N]";
        let mut t = at_a_terminal(&f, 100, &["requeue", "--state", "dead-lettered"], &[]);
        t.wait_for(question, PTY_WAIT);
        t.send("n");
        t.send(pty::keys::ENTER);
        let code = t.wait_exit(PTY_WAIT);
        let no = t.screen();
        assert!(no.contains("nothing requeued"), "{no}");
        assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 10);

        let mut t = at_a_terminal(&f, 100, &["requeue", "--state", "dead-lettered"], &[]);
        t.wait_for(question, PTY_WAIT);
        t.send("y");
        t.send(pty::keys::ENTER);
        let yes_code = t.wait_exit(PTY_WAIT);
        let yes = t.screen();
        assert!(yes.contains("Requeued 4 dead-lettered jobs."), "{yes}");
        assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 6);
        insta::assert_snapshot!("cli__bulk_requeue_at_a_terminal_asks_with_the_count", format!("{no}\n[exit status: {code}]\n\n{yes}\n[exit status: {yes_code}]"));
    }
}

#[test]
fn colour_only_at_a_terminal_and_never_with_no_color() {
    let f = Fixture::hostile();
    let list = ["jobs", "list", "--state", "dead-lettered"];
    let mut runs = [
        at_a_terminal(&f, 120, &list, &[]),
        at_a_terminal(&f, 120, &[&["--no-color"][..], &list].concat(), &[]),
        at_a_terminal(&f, 120, &list, &[("NO_COLOR", "1")]),
    ];
    let out: Vec<String> = runs
        .iter_mut()
        .map(|t| {
            assert_eq!(t.wait_exit(PTY_WAIT), 0, "{}", t.screen());
            written(t)
        })
        .collect();
    assert!(out[0].contains("\u{1b}[31mDead-Lettered\u{1b}[0m"), "{}", out[0]);
    assert!(!out[1].contains('\u{1b}'), "--no-color: {}", out[1]);
    assert!(!out[2].contains('\u{1b}'), "NO_COLOR: {}", out[2]);
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
