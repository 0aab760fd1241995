//! Issue 19, the command-line half: what a tired operator tripped over at 3 a.m., each named
//! after what it shows and failing before its fix. Permissions refused before the plan, typos
//! answered with what was meant, Ctrl-C in a bulk action, a bulk action that acts on exactly
//! its plan, the log's header, wire names and dates, a follow into a closed pipe, the prompt
//! behind `2>&1 | tee`, and `bw purge ID…`.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use backwave::store::{current_actor, Outcome};
use backwave::{Clock, JobState, NewJob, Store};

use crate::backend::both_backends;
use crate::cli::harness::*;
use crate::cli::{at_a_terminal, pty, PTY_WAIT};

/// `bw` against `f`'s store as a plain process, for a test that reads its output as it comes.
fn plain_bw(f: &Fixture) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"));
    c.env("BW_DB", &f.db).env("BW_NOW", T).env("COLUMNS", "120");
    c
}

// ---- 5: the permission first -----------------------------------------------------------------

both_backends! {
    fn a_bulk_action_without_operate_is_refused_before_its_plan_and_its_question() {
        // Without `operate`, `requeue --state dead-lettered --force` counted every match, asked
        // "Requeue …?" and only then said the permission was missing.
        let f = Fixture::hostile_stranger();
        let runs = [
            f.run(&["requeue", "--state", "dead-lettered", "--force"]),
            f.run(&["requeue", "--state", "dead-lettered", "--dry-run"]),
            f.run(&["cancel", "--state", "scheduled"]),
            f.run(&["run-now", "--queue", "high", "--yes"]),
            f.run(&["purge", "--older-than", "1d"]),
        ];
        for r in &runs {
            assert_eq!(r.code, Some(1), "{r}");
            assert!(r.stdout.is_empty(), "nothing planned or printed before the refusal: {r}");
            assert!(r.stderr.contains("lacks the 'operate' permission"), "{r}");
        }
        insta::assert_snapshot!("cli__a_bulk_action_without_operate_is_refused_before_its_plan_and_its_question", transcript(&runs));

        // At a terminal nothing is asked either.
        let mut t = at_a_terminal(&f, 100, &["requeue", "--state", "dead-lettered", "--force"], &[]);
        assert_eq!(t.wait_exit(PTY_WAIT), 1);
        let screen = t.screen();
        assert!(!screen.contains("[y/N]") && screen.contains("lacks the 'operate' permission"), "{screen}");
    }
}

// ---- 6: typos --------------------------------------------------------------------------------

both_backends! {
    fn typos_in_a_queue_wire_name_or_state_say_what_was_probably_meant() {
        let f = Fixture::hostile_admin();
        let runs = [
            f.run(&["jobs", "list", "--queue", "critcal"]),
            f.run(&["requeue", "--state", "dead-lettered", "--queue", "lwo", "--dry-run"]),
            f.run(&["jobs", "list", "--wire-name", "flakey"]),
            f.run(&["cancel", "--state", "scheduled", "--wire-name", "send-emial", "--dry-run"]),
            f.run(&["jobs", "list", "--state", "dead"]),
            f.run(&["jobs", "list", "--state", "failed"]),
            // A real queue with nothing in that state says nothing more.
            f.run(&["jobs", "list", "--state", "quarantined", "--queue", "high"]),
        ];
        assert!(runs[0].stderr.contains("did you mean 'critical'?"), "{}", runs[0]);
        assert!(runs[1].stderr.contains("did you mean 'low'?"), "{}", runs[1]);
        assert!(runs[2].stderr.contains("did you mean 'flaky'?"), "{}", runs[2]);
        assert!(runs[3].stderr.contains("did you mean 'send-email'?"), "{}", runs[3]);
        assert!(runs[4].stderr.contains("did you mean 'dead-lettered'?"), "{}", runs[4]);
        assert!(runs[5].stderr.contains("did you mean 'dead-lettered'?"), "{}", runs[5]);
        assert!(runs[6].stderr.is_empty(), "{}", runs[6]);
        insta::assert_snapshot!("cli__typos_in_a_queue_wire_name_or_state_say_what_was_probably_meant", transcript(&runs));
    }
}

#[test]
fn a_store_path_missing_its_extension_names_the_store_meant_not_bw_init() {
    // `bw --db demo2 stats` suggested `bw init --db demo2`, which makes a second, empty store.
    let dir = tempfile::tempdir().unwrap();
    drop(Store::create(dir.path().join("demo2.db")).unwrap());
    let out = bw_at(dir.path().join("demo2")).current_dir(dir.path()).arg("stats").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.starts_with("bw: error: no BackWave store at "), "{err}");
    assert!(err.contains("did you mean --db ") && err.contains("demo2.db?"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Relative, as typed.
    let out = bw_at("demo2").current_dir(dir.path()).arg("stats").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean --db demo2.db?"), "{err}");
    // Nothing near: the plain answer, and nothing created.
    let out = bw_at("payments").current_dir(dir.path()).arg("stats").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("create one with `bw init --db payments`") && !err.contains("did you mean"), "{err}");
    assert!(!dir.path().join("payments").exists());
}

// ---- 7: Ctrl-C in a bulk action ----------------------------------------------------------------

/// `n` dead-lettered jobs of wire name "w" in queue "default".
fn dead_letters(f: &Fixture, n: usize) {
    let store = f.store();
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let jobs: Vec<NewJob> = chunk.iter().map(|_| NewJob::new("w", "default", vec![])).collect();
        end_as(&store, &jobs, |_| Outcome::Failed { message: "boom".into(), detail: None, retry_in: None });
    }
}

both_backends! {
    fn ctrl_c_during_a_bulk_requeue_says_what_was_done_and_that_a_rerun_finishes() {
        // The last line was `requeued 13,500 of 79,683 (16%)`, then exit 130 in silence.
        let f = Fixture::hostile_admin();
        dead_letters(&f, 12_000);
        let total = f.store().counts().unwrap().total(JobState::DeadLettered);
        let mut child = plain_bw(&f)
            .args(["requeue", "--state", "dead-lettered", "--force", "--yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.starts_with("requeued "), "{first}");
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let mut rest = String::new();
        err.read_to_string(&mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{first}{rest}");
        let line = rest.lines().find(|l| l.starts_with("bw: interrupted: ")).unwrap_or_else(|| panic!("{rest}"));
        let done: u64 = line["bw: interrupted: requeued ".len()..].split(' ').next().unwrap().replace(',', "").parse().unwrap();
        assert!(
            line.ends_with(&format!(
                "of {}; every batch is committed whole, nothing is half-done. Run the same command again to requeue the rest.",
                thousands(total)
            )),
            "{line}"
        );
        let left = f.store().counts().unwrap().total(JobState::DeadLettered);
        assert!(done > 0 && done < total, "the interrupt was not part-way: {line}");
        assert_eq!(total - left, done, "what it says it did is what the store holds");
        // The rerun finishes the rest.
        f.bw().args(["requeue", "--state", "dead-lettered", "--force", "--yes"]).assert().success();
        assert_eq!(f.store().counts().unwrap().total(JobState::DeadLettered), 0);
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---- 8: exactly the plan -------------------------------------------------------------------------

both_backends! {
    fn a_bulk_cancel_does_exactly_what_it_asked_and_leaves_jobs_that_arrived_after() {
        // The plan asked "Cancel 68 jobs?", then reported "Cancelled 69": jobs enqueued while
        // the question was on the screen were cancelled too.
        let f = Fixture::hostile_admin();
        let question = "Cancel 1 scheduled job with wire name \"send-email\" (1 at once, 0 running asked to stop)? [y/N]";
        let mut t = at_a_terminal(&f, 140, &["cancel", "--state", "scheduled", "--wire-name", "send-email"], &[]);
        t.wait_for(question, PTY_WAIT);
        // Two more arrive while the operator reads the question (a second later).
        let later = Store::open(&f.db).unwrap().with_clock(Clock::manual(T_MS + 1_000));
        let arrived = later.enqueue_many(&[NewJob::new("send-email", "high", vec![]), NewJob::new("send-email", "high", vec![])]).unwrap();
        t.send("y");
        t.send(pty::keys::ENTER);
        let code = t.wait_exit(PTY_WAIT);
        let screen = t.screen();
        assert_eq!(code, 0, "{screen}");
        assert!(screen.contains("Cancelled 1 scheduled job with wire name \"send-email\"; asked 0 running to stop."), "{screen}");
        assert!(screen.contains("2 jobs arrived after the plan: left alone. Run the command again to cancel them."), "{screen}");
        for id in arrived {
            assert_eq!(f.store().job(id).unwrap().unwrap().state, JobState::Scheduled, "a job the operator never saw was cancelled");
        }
    }
}

// ---- 10: the log ---------------------------------------------------------------------------------

both_backends! {
    fn log_tail_has_a_header_a_wire_name_column_and_dates_when_entries_span_days() {
        let f = Fixture::hostile();
        let runs = [
            f.run(&["log", "tail", "-n", "4"]),
            // The next morning, yesterday's 11:59 must not read as today's.
            f.run_env(&[("BW_NOW", "2026-12-01T08:00:00Z")], &["log", "tail", "-n", "4"]),
        ];
        assert!(runs[0].stdout.starts_with("TIME "), "{}", runs[0]);
        assert!(runs[1].stdout.lines().nth(1).unwrap().starts_with("2026-11-30 "), "{}", runs[1]);
        insta::assert_snapshot!("cli__log_tail_has_a_header_a_wire_name_column_and_dates_when_entries_span_days", transcript(&runs));
    }
}

both_backends! {
    fn log_follow_into_a_closed_pipe_exits_on_a_quiet_store() {
        // `bw log tail --follow | head -2` never ended: nothing new was written, so the closed
        // pipe was never noticed.
        let f = Fixture::hostile();
        let mut child = plain_bw(&f).args(["log", "tail", "-n", "1", "--follow"]).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut header = String::new();
        out.read_line(&mut header).unwrap();
        assert!(header.starts_with("TIME "), "{header}");
        drop(out); // `head` has what it wanted and exits
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("bw log tail --follow kept running after its reader went away");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}");
    }
}

// ---- the smaller ones ------------------------------------------------------------------------

both_backends! {
    fn a_prompt_behind_2_to_1_pipe_tee_is_still_asked_at_the_terminal() {
        // `bw requeue … 2>&1 | tee log` refused ("stdin is not a terminal, so pass --yes") though
        // the operator sat at the terminal.
        let f = Fixture::hostile_admin();
        let bw = assert_cmd::cargo::cargo_bin("bw");
        let script = format!("'{}' requeue --state dead-lettered 2>&1 | cat", bw.display());
        let mut t = pty::Term::new(140, 24).env("BW_DB", &f.db).env("BW_NOW", T).spawn("sh", &["-c", &script]);
        t.wait_for("with a fresh attempt budget?", PTY_WAIT);
        t.send("y");
        t.send(pty::keys::ENTER);
        t.wait_exit(PTY_WAIT);
        let screen = t.screen();
        assert!(screen.contains("Requeued 4 dead-lettered jobs."), "{screen}");
    }
}

both_backends! {
    fn piped_stats_shorten_multi_kb_causes() {
        let f = Fixture::hostile();
        let out = f.bw().env_remove("COLUMNS").arg("stats").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest < 300, "a line of {widest} characters:\n{text}");
        assert!(text.contains('…'), "a long cause is shown cut: {text}");
    }
}

both_backends! {
    fn json_stats_give_every_state_of_every_queue_zeros_included() {
        let f = Fixture::hostile();
        let v = json(&f.bw().args(["--format", "json", "stats"]).output().unwrap().stdout);
        for (queue, states) in v["by_queue"].as_object().unwrap() {
            let names: Vec<&String> = states.as_object().unwrap().keys().collect();
            assert_eq!(names.len(), 7, "queue {queue}: {names:?}");
        }
        assert_eq!(v["by_queue"]["ops"]["scheduled"], 0);
    }
}

both_backends! {
    fn counts_of_one_read_in_the_singular() {
        // "1 scheduled jobs … match", "1 are due".
        let f = Fixture::hostile_admin();
        let runs = [f.run(&["cancel", "--state", "scheduled", "--wire-name", "send-email", "--dry-run"])];
        assert!(runs[0].stdout.starts_with("1 scheduled job with wire name \"send-email\" matches."), "{}", runs[0]);
        insta::assert_snapshot!("cli__counts_of_one_read_in_the_singular", transcript(&runs));
    }
}

// ---- bw purge ID… ----------------------------------------------------------------------------------

both_backends! {
    fn purge_by_id_deletes_terminal_jobs_with_their_log_audited_and_refuses_the_rest() {
        let f = Fixture::hostile_admin();
        let dry = f.run(&["purge", "a0000004", "a0000019", "ffffffff", "--dry-run"]);
        assert_eq!(dry.code, Some(0), "{dry}");
        assert!(f.store().job(f.store().resolve_id("a0000004").unwrap()).unwrap().is_some(), "a dry run deletes nothing");
        let run = f.run(&["purge", "a0000004", "a0000019", "ffffffff", "--yes"]);
        assert_eq!(run.code, Some(1), "{run}");
        let store = f.store();
        assert!(matches!(store.resolve_id("a0000004"), Err(backwave::Error::JobNotFound(_))), "deleted");
        let gone = "a0000004-0000-7000-8000-000000000004".parse().unwrap();
        assert!(store.history(gone).unwrap().is_empty(), "its log went with it");
        assert_eq!(store.job(store.resolve_id("a0000019").unwrap()).unwrap().unwrap().state, JobState::Scheduled);
        let audit = store.audit_entries(0, 10).unwrap();
        let e = audit.iter().find(|e| e.action == "purge" && e.job_id == Some(gone)).expect("audited");
        assert_eq!(e.actor, current_actor());
        assert!(e.detail.as_deref().unwrap().contains("\"wire_name\":\"resize-image\""), "{e:?}");
        // Without operate, refused before anything is asked or deleted.
        let stranger = Fixture::hostile_stranger();
        let refused = stranger.run(&["purge", "a0000004", "--yes"]);
        assert_eq!(refused.code, Some(1), "{refused}");
        insta::assert_snapshot!("cli__purge_by_id_deletes_terminal_jobs_with_their_log_audited_and_refuses_the_rest", transcript(&[dry, run, refused]));
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: on a store nobody administers (`bw generate` builds one),
    // a missing permission said "an admin can run `bw grant root admin`", and `bw grant` said the
    // same of itself: a dead end. The refusal now says how to become the admin.
    fn a_refusal_on_a_store_without_an_admin_says_how_to_become_one() {
        let f = Fixture::hostile();
        let r = f.run(&["requeue", "a0000003"]);
        assert_eq!(r.code, Some(1), "{r}");
        assert!(r.stderr.contains("lacks the 'operate' permission"), "{r}");
        assert!(r.stderr.contains("this store has no admin yet: `bw init` on it makes you its admin"), "{r}");
        assert!(f.run(&["init"]).code == Some(0));
        let r = f.run(&["requeue", "a0000003"]);
        assert_eq!(r.code, Some(0), "{r}");
        // Where someone else administers the store, the refusal points at them as before.
        let f = Fixture::hostile_stranger();
        let r = f.run(&["requeue", "a0000003"]);
        assert_eq!(r.code, Some(1), "{r}");
        assert!(r.stderr.contains("an admin can run `bw grant") && !r.stderr.contains("no admin yet"), "{r}");
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: `bw resume queue critcal` said only that it was not
    // paused, while `critical` stayed paused.
    fn resuming_a_typo_of_a_paused_name_says_which_one_is_paused() {
        let f = Fixture::hostile_admin();
        assert_eq!(f.run(&["pause", "queue", "critical"]).code, Some(0));
        let r = f.run(&["resume", "queue", "critcal"]);
        assert_eq!(r.code, Some(1), "{r}");
        assert!(r.stderr.contains("queue 'critcal' was not paused: nothing resumed; did you mean 'critical'?"), "{r}");
        // Nothing close: said as before.
        let r = f.run(&["resume", "queue", "high"]);
        assert!(r.stderr.contains("queue 'high' was not paused: nothing resumed\n"), "{r}");
    }
}

// ---- a shorter retention ---------------------------------------------------------------------

both_backends! {
    fn shortening_the_retention_says_what_the_next_sweep_would_delete_by_state_and_asks() {
        // Found at 3 a.m.: `config set retention 0s` (or `1m` meant as `1M`) said `retention 0s`
        // and the next sweep emptied the Dead-Lettered and Quarantined lists unasked.
        let f = Fixture::hostile_admin();
        let default = f.store().retention().unwrap();
        let failed = f.store().purgeable_by_state(i64::MAX).unwrap();
        assert!(failed.iter().any(|(s, n)| *s == JobState::DeadLettered && *n > 0), "{failed:?}");
        let refused = f.run(&["config", "set", "retention", "0s"]);
        assert_eq!(refused.code, Some(2), "{refused}");
        assert!(refused.stderr.contains("refusing to shorten the retention without confirmation"), "{refused}");
        assert_eq!(f.store().retention().unwrap(), default, "unchanged");

        // At a terminal the question counts what would go, failures first; No keeps it.
        let mut t = at_a_terminal(&f, 200, &["config", "set", "retention", "0s"], &[]);
        t.wait_for("Set it? [y/N]", PTY_WAIT);
        t.send("n");
        t.send(pty::keys::ENTER);
        assert_eq!(t.wait_exit(PTY_WAIT), 1);
        let screen = t.screen();
        assert!(screen.contains("With retention 0s the next sweep deletes"), "{screen}");
        assert!(screen.contains("Dead-Lettered") && screen.contains("with their log"), "{screen}");
        assert_eq!(f.store().retention().unwrap(), default, "unchanged");

        // A longer retention deletes nothing sooner: nothing to ask. --yes goes ahead.
        assert_eq!(f.run(&["config", "set", "retention", "30d"]).code, Some(0));
        let yes = f.run(&["config", "set", "retention", "0s", "--yes"]);
        assert_eq!(yes.code, Some(0), "{yes}");
        assert_eq!(f.store().retention().unwrap(), Duration::ZERO);

        // `bw purge` says the same breakdown.
        let dry = f.run(&["purge", "--older-than", "0s", "--dry-run"]);
        assert!(dry.stdout.contains("with their log: ") && dry.stdout.contains("Dead-Lettered"), "{dry}");
    }
}

// ---- hints a person pastes -------------------------------------------------------------------

both_backends! {
    fn the_reveal_hint_is_the_command_as_typed_with_its_db() {
        // Found at 3 a.m.: `bw --db STORE jobs show X` hinted `bw jobs show X --detail`, which
        // pasted opened ./backwave.db (and suggested `bw init`).
        let f = Fixture::hostile_admin();
        let out = plain_bw(&f).env_remove("BW_DB").args(["--db", f.db.arg(), "jobs", "show", "a0000004"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let hint = stdout.lines().find(|l| l.starts_with("Reveal failure detail: ")).unwrap_or_else(|| panic!("{stdout}"));
        assert!(hint.starts_with("Reveal failure detail: bw --db "), "{hint}");
        assert!(hint.ends_with(" jobs show a0000004 --detail"), "{hint}");
    }
}

both_backends! {
    fn a_dry_run_that_would_requeue_nothing_without_force_says_force_not_run_again() {
        // Found at 3 a.m.: "0 would be requeued … N would quarantine again" ended "Run again
        // without --dry-run to requeue them", and the run then refused with "pass --force".
        let f = Fixture::hostile_admin();
        let dry = f.run(&["requeue", "--state", "quarantined", "--wire-name", "legacy-report", "--dry-run"]);
        assert_eq!(dry.code, Some(0), "{dry}");
        assert!(dry.stdout.contains("0 would be requeued"), "{dry}");
        assert!(dry.stdout.contains("Nothing would be requeued without --force; run again with --force"), "{dry}");
        assert!(!dry.stdout.contains("Run again without --dry-run"), "{dry}");
    }
}

// ---- issue 39: a requeue while no worker runs --------------------------------------------------

both_backends! {
    fn a_requeue_while_no_worker_runs_says_the_jobs_wait_not_that_they_quarantine_again() {
        // The service was stopped: no live worker at all. `bw requeue` said "no live worker
        // handles 'always-fails'; it will quarantine again", yet the jobs waited and ran (four
        // attempts) once the service came back: nobody claims them meanwhile.
        let f = Fixture::empty();
        let store = Store::create(&f.db).unwrap().with_clock(Clock::manual(T_MS));
        store.bootstrap_admin(&current_actor()).unwrap();
        dead_letter(&store, "always-fails", 3);
        let ids: Vec<String> = store
            .list_jobs(&backwave::store::JobFilter { states: vec![JobState::DeadLettered], ..Default::default() }, 10, 0)
            .unwrap()
            .jobs
            .iter()
            .map(|j| j.id.to_string())
            .collect();
        let plan = f.run(&["requeue", "--state", "dead-lettered", "--dry-run"]);
        assert_eq!(plan.code, Some(0), "{plan}");
        assert!(plan.stdout.contains("3 would be requeued"), "{plan}");
        assert!(plan.stdout.contains("No live worker is running now: they wait"), "{plan}");
        assert!(!plan.stdout.contains("(skipped unless --force)"), "{plan}");
        let one = f.run(&["requeue", &ids[0]]);
        assert_eq!(one.code, Some(0), "{one}");
        assert!(one.stdout.contains("no live worker runs now: it waits until one starts"), "{one}");
        assert!(!one.stdout.contains("quarantine again"), "{one}");
        // Without --force the bulk requeue takes them all: none would quarantine again.
        let bulk = f.run(&["requeue", "--state", "dead-lettered", "--yes"]);
        assert_eq!(bulk.code, Some(0), "{bulk}");
        assert!(bulk.stdout.contains("Requeued 2"), "{bulk}");
        assert_eq!(store.count_jobs(&backwave::store::JobFilter { states: vec![JobState::Scheduled], ..Default::default() }).unwrap(), 3);
    }
}
