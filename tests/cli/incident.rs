//! The incident verbs through the real `bw` binary: pause / resume / pauses, run-now, bulk
//! cancel, payload repair, each with its JSON, its refusals (one line quoting the bad input,
//! nothing changed) and its permission; and the requeue that `bw requeue` and `bw top`'s action
//! path must do identically on one fixture.

use std::path::Path;

use backwave::store::{current_actor, Completion, Outcome, PauseKind};
use backwave::{Clock, JobId, JobState, NewJob, QuarantineReason, Store, WorkerInfo};
use bw::tui::data::{How, Op, Target};
use bw::tui::{Request, Response};
use predicates::prelude::*;

use super::harness::*;

/// A store made through the library, the test user as admin, nothing in it.
fn admin_store() -> Fixture {
    let f = Fixture::empty();
    let store = Store::create(f.db.file()).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    f
}

/// `n` Quarantined jobs of `wire_name` in queue "default", as the engine quarantines them.
fn quarantine(store: &Store, wire_name: &str, reason: QuarantineReason, n: usize) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n).map(|_| NewJob::new(wire_name, "default", vec![0xff])).collect();
    end_as(store, &jobs, |_| Outcome::Quarantined { reason, cause: format!("{reason} for {wire_name}") })
}

fn live_worker(store: &Store, wire_names: &[&str]) {
    store
        .register_worker(&WorkerInfo {
            id: "host/1/payments#0001".into(),
            group: "payments".into(),
            host: "host".into(),
            pid: 1,
            wire_names: wire_names.iter().map(|s| s.to_string()).collect(),
            queues: vec!["default".into(), "critical".into()],
            started_at: T_MS - 60_000,
            last_heartbeat_at: T_MS,
            stale_after_ms: 30_000,
        })
        .unwrap();
}

/// Every row of jobs, transitions, pauses and audit, in a stable order, as text.
fn dump(db: &Path) -> String {
    let conn = backwave::store::RawConnection::open(db).unwrap();
    let mut out = String::new();
    for sql in [
        "SELECT * FROM jobs ORDER BY id",
        "SELECT * FROM transitions ORDER BY seq",
        "SELECT * FROM pauses ORDER BY kind, name",
        "SELECT * FROM audit ORDER BY seq",
    ] {
        out.push_str(sql);
        out.push('\n');
        for row in conn.query(sql, &[]).unwrap() {
            out.push_str(&row.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join("|"));
            out.push('\n');
        }
    }
    out
}

fn one_line_error(stderr: &[u8], quoted: &str) {
    let err = text(stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("bw: error: ") && err.contains(quoted), "{err} should quote {quoted}");
}

// ---- one requeue, two front ends -------------------------------------------------------------

/// #13: `bw top`'s group requeue called requeue_matching, which also requeued jobs no live worker
/// handles, while `bw requeue --state …` skipped them. Both now go through one plan and one call
/// with force=false; the stores they leave must be identical, row for row.
#[test]
fn the_cli_and_the_dashboard_requeue_a_group_into_identical_stores() {
    let template = admin_store();
    {
        let store = template.store();
        live_worker(&store, &["charge-card", "resize"]);
        dead_letter(&store, "charge-card", 4);
        quarantine(&store, "legacy-export", QuarantineReason::NoHandler, 3);
        quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 2);
    }
    let fingerprint = template.store().cause_groups(10).unwrap()[0].fingerprint.clone();
    let cli = Fixture::empty();
    let top = Fixture::empty();
    std::fs::copy(template.db.file(), cli.db.file()).unwrap();
    std::fs::copy(template.db.file(), top.db.file()).unwrap();
    assert_eq!(dump(cli.db.file()), dump(top.db.file()));

    // 1. A dead-letter group whose wire name a live worker handles: requeued by both.
    cli.bw().args(["requeue", "--state", "dead-lettered", "--wire-name", "charge-card", "--yes"]).assert().success();
    let target = Target::CauseGroup { wire_name: "charge-card".into(), fingerprint };
    let done = dashboard_run(top.db.file(), Op::Requeue, target);
    assert_eq!(done.title, "Requeued 4 jobs");

    // 2. A quarantine group nobody handles: both leave it alone (the dashboard requeued it).
    cli.bw()
        .args(["requeue", "--state", "quarantined", "--wire-name", "legacy-export", "--yes"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("would quarantine again"));
    let target = Target::QuarantineGroup { wire_name: "legacy-export".into(), reason: QuarantineReason::NoHandler };
    let done = dashboard_run(top.db.file(), Op::Requeue, target);
    assert_eq!(done.title, "Requeued 0 jobs");
    assert!(done.refused && done.lines.iter().any(|l| l.contains("no live worker handles legacy-export")), "{done:?}");

    let (a, b) = (dump(cli.db.file()), dump(top.db.file()));
    assert_eq!(a, b, "the CLI and the dashboard left different stores");
    let store = cli.store();
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 4);
    assert_eq!(store.counts().unwrap().total(JobState::Quarantined), 5);
}

/// Found in a 3 a.m. walkthrough: `bw requeue … --force --dry-run` said "0 would be requeued"
/// (and 206 would quarantine again), and the same command with `--yes` then requeued 206. A dry
/// run counts what its own command would do.
#[test]
fn a_forced_dry_run_counts_the_jobs_the_forced_run_requeues() {
    let f = admin_store();
    let store = f.store();
    live_worker(&store, &["resize"]);
    quarantine(&store, "legacy-export", QuarantineReason::NoHandler, 3);
    quarantine(&store, "resize", QuarantineReason::NoHandler, 2);
    let plan = |extra: &[&str]| {
        let out = f.bw().args(["requeue", "--state", "quarantined", "--dry-run"]).args(extra).assert().success();
        text(&out.get_output().stdout)
    };
    let forced = plan(&["--force"]);
    assert!(forced.contains("5 would be requeued with a fresh attempt budget"), "{forced}");
    assert!(
        forced.contains("3 of them would quarantine again: no live worker handles their wire name (--force)"),
        "{forced}"
    );
    let plain = plan(&[]);
    assert!(plain.contains("2 would be requeued with a fresh attempt budget"), "{plain}");
    assert!(
        plain.contains("3 would quarantine again: no live worker handles their wire name (skipped unless --force)"),
        "{plain}"
    );
    let out = f.bw().args(["requeue", "--state", "quarantined", "--force", "--yes"]).assert().success();
    assert!(text(&out.get_output().stdout).contains("Requeued 5"), "{}", text(&out.get_output().stdout));
}

/// The dashboard's preview and `bw requeue --dry-run` count from the same plan.
#[test]
fn the_dashboard_preview_and_the_cli_dry_run_agree_on_the_undecodable_count() {
    let f = admin_store();
    let store = f.store();
    live_worker(&store, &["resize"]);
    let ids = quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 2);
    quarantine(&store, "legacy-export", QuarantineReason::NoHandler, 1);
    let out = f.bw().args(["--format", "json", "requeue", "--state", "quarantined", "--dry-run"]).assert().success();
    let plan = json(&out.get_output().stdout);
    assert_eq!((plan["matching"].as_u64(), plan["undecodable"].as_u64()), (Some(3), Some(2)));
    assert_eq!(plan["would_requarantine"], 1);
    let target = Target::QuarantineGroup { wire_name: "resize".into(), reason: QuarantineReason::UndecodablePayload };
    let Response::Preview(p) = bw::tui::serve(&store, &current_actor(), &Request::Preview { op: Op::Requeue, target })
    else {
        panic!("no preview")
    };
    assert_eq!((p.affected, p.undecodable, p.would_requarantine), (2, 2, 0));
    let Response::Preview(p) =
        bw::tui::serve(&store, &current_actor(), &Request::Preview { op: Op::Requeue, target: Target::Jobs(ids) })
    else {
        panic!("no preview")
    };
    assert_eq!((p.affected, p.undecodable, p.would_requarantine), (2, 2, 0));
}

// ---- every incident action, two front ends -----------------------------------------------------

/// Two copies of one store, for `bw` and for the dashboard's action path: a live worker for
/// charge-card on "critical" and "default", two charge-card jobs Scheduled for later in
/// "critical", one Running in "default", one Quarantined `resize` job whose payload did not
/// decode, two Quarantined `legacy-export` jobs nobody handles. Returns (cli, top, ids: [later, later, running, quarantined]).
fn twins() -> (Fixture, Fixture, Vec<JobId>) {
    let template = admin_store();
    let ids = {
        let store = template.store();
        live_worker(&store, &["charge-card"]);
        let later = |n: i64| store.enqueue(&NewJob::new("charge-card", "critical", "{}").due_at(T_MS + n)).unwrap();
        let (a, b) = (later(3_600_000), later(7_200_000));
        store.enqueue(&NewJob::new("charge-card", "default", "{}")).unwrap();
        let running = claim_all(&store, "default", 1).remove(0).id;
        let quarantined = quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 1).remove(0);
        quarantine(&store, "legacy-export", QuarantineReason::NoHandler, 2);
        vec![a, b, running, quarantined]
    };
    let cli = Fixture::empty();
    let top = Fixture::empty();
    std::fs::copy(template.db.file(), cli.db.file()).unwrap();
    std::fs::copy(template.db.file(), top.db.file()).unwrap();
    (cli, top, ids)
}

fn assert_same_stores(cli: &Fixture, top: &Fixture, what: &str) {
    let (a, b) = (dump(cli.db.file()), dump(top.db.file()));
    assert_eq!(a, b, "{what}: the CLI and the dashboard left different stores");
}

#[test]
fn the_cli_and_the_dashboard_pause_and_resume_into_identical_stores() {
    let (cli, top, _) = twins();
    let before = dump(cli.db.file());
    cli.bw().args(["pause", "queue", "critical"]).assert().success();
    cli.bw().args(["pause", "wire-name", "charge-card"]).assert().success();
    let queue = Target::Paused { kind: PauseKind::Queue, name: "critical".into() };
    let wire = Target::Paused { kind: PauseKind::WireName, name: "charge-card".into() };
    assert_eq!(dashboard_run(top.db.file(), Op::Pause, queue.clone()).title, "Paused queue critical");
    assert_eq!(dashboard_run(top.db.file(), Op::Pause, wire.clone()).title, "Paused wire-name charge-card");
    assert_same_stores(&cli, &top, "pause");
    assert_ne!(dump(cli.db.file()), before, "the pauses are in the store");

    cli.bw().args(["resume", "queue", "critical"]).assert().success();
    assert_eq!(dashboard_run(top.db.file(), Op::Resume, queue).title, "Resumed queue critical");
    assert_same_stores(&cli, &top, "resume");
    assert_eq!(cli.store().pauses().unwrap().len(), 1, "the wire name stays paused");
    cli.bw().args(["resume", "wire-name", "charge-card"]).assert().success();
    dashboard_run(top.db.file(), Op::Resume, wire);
    assert_same_stores(&cli, &top, "resume wire-name");
}

#[test]
fn the_cli_and_the_dashboard_run_now_into_identical_stores() {
    let (cli, top, ids) = twins();
    let (later, running) = (ids[0], ids[2]);
    // One due, one refused (Running): exit 1 from the CLI, a refused line from the dashboard.
    cli.bw().args(["run-now", &later.to_string(), &running.to_string()]).assert().code(1);
    let done = dashboard_run(top.db.file(), Op::RunNow, Target::Jobs(vec![later, running]));
    assert_eq!(done.title, "Due now: 1 of 2");
    assert!(done.refused && done.lines[1].contains("not made due: it is Running"), "{done:?}");
    assert_same_stores(&cli, &top, "run-now");
    assert_eq!(cli.store().job(later).unwrap().unwrap().due_at, T_MS);
}

#[test]
fn the_cli_and_the_dashboard_cancel_marked_jobs_into_identical_stores() {
    let (cli, top, ids) = twins();
    let marked = vec![ids[0], ids[1], ids[2]];
    cli.bw().arg("cancel").args(marked.iter().map(|id| id.to_string())).assert().success();
    let done = dashboard_run(top.db.file(), Op::Cancel, Target::Jobs(marked));
    assert_eq!(done.title, "Cancelled 3 of 3");
    assert_same_stores(&cli, &top, "cancel");
    let counts = cli.store().counts().unwrap();
    assert_eq!((counts.total(JobState::Cancelled), counts.total(JobState::Running)), (2, 1), "one asked to stop");
}

#[test]
fn the_cli_and_the_dashboard_edit_a_payload_into_identical_stores() {
    let (cli, top, ids) = twins();
    let q = ids[3];
    let payload = "{\"width\":640}";
    cli.bw().args(["jobs", "edit", &q.to_string(), "--payload", payload]).assert().success();
    let target = Target::Payload { id: q, payload: payload.as_bytes().to_vec(), requeue: false };
    assert!(!dashboard_run(top.db.file(), Op::EditPayload, target).refused);
    assert_same_stores(&cli, &top, "jobs edit");
    // And with the requeue in the same transaction.
    let again = "{\"width\":320}";
    cli.bw().args(["jobs", "edit", &q.to_string(), "--payload", again, "--requeue"]).assert().success();
    let target = Target::Payload { id: q, payload: again.as_bytes().to_vec(), requeue: true };
    let done = dashboard_run(top.db.file(), Op::EditPayload, target);
    assert!(done.lines[1].contains("requeued (was Quarantined)"), "{done:?}");
    assert_same_stores(&cli, &top, "jobs edit --requeue");
    let job = cli.store().job(q).unwrap().unwrap();
    assert_eq!((job.state, job.payload.as_slice()), (JobState::Scheduled, again.as_bytes()));
}

#[test]
fn the_cli_and_the_dashboard_cancel_a_filtered_set_into_identical_stores() {
    let (cli, top, _) = twins();
    let args = ["cancel", "--state", "scheduled,running", "--wire-name", "charge-card", "--yes"];
    cli.bw().args(args).assert().success();
    let filter = backwave::store::JobFilter {
        states: vec![JobState::Scheduled, JobState::Running],
        wire_name: Some("charge-card".into()),
        ..Default::default()
    };
    let target = Target::Matching { filter: Box::new(filter), described: "wire:charge-card".into() };
    let done = dashboard_run(top.db.file(), Op::Cancel, target);
    assert_eq!(done.title, "Cancelled 3");
    assert_same_stores(&cli, &top, "bulk cancel");
}

/// The dialog's `f` is `--force`: both requeue the jobs no live worker handles.
#[test]
fn the_cli_and_the_dashboard_force_a_group_requeue_into_identical_stores() {
    let (cli, top, _) = twins();
    cli.bw()
        .args(["requeue", "--state", "quarantined", "--wire-name", "legacy-export", "--force", "--yes"])
        .assert()
        .success();
    let target = Target::QuarantineGroup { wire_name: "legacy-export".into(), reason: QuarantineReason::NoHandler };
    let store = Store::open(top.db.file()).unwrap().with_clock(Clock::manual(T_MS));
    let Response::Done(done) = bw::tui::serve(
        &store,
        &current_actor(),
        &Request::Run { op: Op::Requeue, target, how: How { force: true, ..How::default() } },
    ) else {
        panic!("no report")
    };
    assert_eq!(done.title, "Requeued 2 jobs");
    assert!(!done.refused, "{done:?}");
    assert_same_stores(&cli, &top, "requeue --force");
    let c = top.store().counts().unwrap();
    assert_eq!((c.total(JobState::Scheduled), c.total(JobState::Quarantined)), (4, 1));
}

fn dashboard_run(db: &Path, op: Op, target: Target) -> bw::tui::data::Report {
    let store = Store::open(db).unwrap().with_clock(Clock::manual(T_MS));
    match bw::tui::serve(&store, &current_actor(), &Request::Run { op, target, how: How::default() }) {
        Response::Done(report) => report,
        other => panic!("expected a report, got {other:?}"),
    }
}

// ---- pause / resume / pauses --------------------------------------------------------------------

#[test]
fn pause_resume_and_pauses_speak_json_and_show_in_stats_and_workers() {
    let f = admin_store();
    let store = f.store();
    store.enqueue(&NewJob::new("charge-card", "critical", vec![])).unwrap();
    live_worker(&store, &["charge-card"]);
    let out = f.bw().args(["--format", "json", "pause", "wire-name", "charge-card", "--for", "30m"]).assert().success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["result"], "Paused");
    assert_eq!(v["kind"], "wire-name");
    assert_eq!(v["until"], "2026-11-30T12:30:00.000Z");
    f.bw()
        .args(["pause", "queue", "critical"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Paused queue 'critical'"));

    let out = f.bw().args(["--format", "json", "pauses"]).assert().success();
    let v = json(&out.get_output().stdout);
    let pauses = v["pauses"].as_array().unwrap();
    assert_eq!(pauses.len(), 2);
    assert_eq!(pauses[0]["kind"], "queue");
    assert_eq!(pauses[0]["paused_by"], current_actor());
    assert_eq!(pauses[0]["paused_at"], "2026-11-30T12:00:00.000Z");
    assert_eq!(pauses[0]["until"], serde_json::Value::Null);
    assert_eq!(pauses[1]["name"], "charge-card");
    let table = text(&f.bw().arg("pauses").assert().success().get_output().stdout);
    assert!(table.contains("charge-card") && table.contains("in 30m") && table.contains("until resumed"), "{table}");

    let stats = json(&f.bw().args(["--format", "json", "stats"]).assert().success().get_output().stdout);
    assert_eq!(stats["pauses"].as_array().unwrap().len(), 2);
    let workers = text(&f.bw().arg("workers").assert().success().get_output().stdout);
    assert!(workers.contains("Paused (not claimed by any worker):") && workers.contains("critical"), "{workers}");

    let out = f.bw().args(["--format", "json", "resume", "queue", "critical"]).assert().success();
    assert_eq!(json(&out.get_output().stdout)["result"], "Resumed");
    f.bw()
        .args(["resume", "queue", "critical"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("queue 'critical' was not paused"));
    let audit = text(&f.bw().arg("audit").assert().success().get_output().stdout);
    assert!(audit.contains("pause") && audit.contains("resume"), "{audit}");
}

#[test]
fn pausing_an_unknown_queue_is_a_one_line_error_quoting_it_and_changes_nothing() {
    let f = admin_store();
    f.store().enqueue(&NewJob::new("charge-card", "critical", vec![])).unwrap();
    let before = dump(f.db.file());
    let out = f.bw().args(["pause", "queue", "critcal"]).assert().code(2);
    one_line_error(&out.get_output().stderr, "'critcal'");
    assert!(text(&out.get_output().stderr).contains("--force"));
    f.bw().args(["pause", "queue", "critcal", "--dry-run"]).assert().code(2);
    assert_eq!(dump(f.db.file()), before);
    let out = f.bw().args(["--format", "json", "pause", "queue", "critical", "--dry-run"]).assert().success();
    let v = json(&out.get_output().stdout);
    assert_eq!(
        (v["result"].as_str(), v["scheduled"].as_u64(), v["running"].as_u64()),
        (Some("WouldPause"), Some(1), Some(0))
    );
    let table = text(&f.bw().args(["pause", "queue", "critical", "--dry-run"]).assert().success().get_output().stdout);
    assert!(table.contains("Would pause queue 'critical'") && table.contains("1 scheduled would wait"), "{table}");
    assert_eq!(dump(f.db.file()), before, "a dry run changed the store");
    f.bw().args(["pause", "queue", "bulk-import", "--force"]).assert().success();
}

#[test]
fn pausing_needs_operate() {
    let f = Fixture::empty();
    let store = Store::create(f.db.file()).unwrap();
    store.bootstrap_admin("someone-else").unwrap();
    store.enqueue(&NewJob::new("w", "critical", vec![])).unwrap();
    drop(store);
    let out = f.bw().args(["pause", "queue", "critical"]).assert().code(1);
    one_line_error(&out.get_output().stderr, "operate");
    assert!(f.store().pauses().unwrap().is_empty());
}

// ---- run-now ------------------------------------------------------------------------------------

#[test]
fn run_now_makes_scheduled_jobs_due_and_refuses_a_running_one_without_changing_it() {
    let f = admin_store();
    let store = f.store();
    let later = store.enqueue(&NewJob::new("w", "q", vec![]).due_at(T_MS + 3_600_000)).unwrap();
    store.enqueue(&NewJob::new("w", "running", vec![])).unwrap();
    let running = claim_all(&store, "running", 1).remove(0).id;
    let before = dump(f.db.file());

    let out = f.bw().args(["--format", "json", "run-now", &running.to_string()]).assert().code(1);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["results"][0]["result"], "NotScheduled");
    assert_eq!(v["results"][0]["state"], "running");
    let err = text(&out.get_output().stderr);
    assert_eq!(err, "bw: 1 of 1 id was not made due\n");
    assert_eq!(dump(f.db.file()), before, "a refused run-now changed the store");

    let out = f
        .bw()
        .args(["--format", "json", "run-now", &later.to_string(), &running.to_string(), "--dry-run"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(
        (&v["results"][0]["result"], &v["results"][1]["result"]),
        (&"WouldRunNow".into(), &"NotScheduled".into())
    );
    let out = f
        .bw()
        .args(["--format", "json", "cancel", &later.to_string(), &running.to_string(), "--dry-run"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(
        (&v["results"][0]["result"], &v["results"][1]["result"]),
        (&"WouldCancel".into(), &"WouldRequestCancel".into())
    );
    assert_eq!(dump(f.db.file()), before, "a dry run changed the store");

    let out = f.bw().args(["--format", "json", "run-now", &later.to_string(), "ffffffff"]).assert().code(1);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["results"][0]["result"], "Due");
    assert_eq!(v["results"][1]["result"], "NotFound");
    let job = f.store().job(later).unwrap().unwrap();
    assert_eq!((job.due_at, job.attempt), (T_MS, 0));
}

#[test]
fn bulk_run_now_prints_its_exact_plan_and_asks_for_confirmation() {
    let f = admin_store();
    let store = f.store();
    let jobs: Vec<NewJob> = (0..5).map(|i| NewJob::new("w", "q", vec![]).due_at(T_MS + 1_000 * (i - 1))).collect();
    store.enqueue_many(&jobs).unwrap();
    let out = f.bw().args(["--format", "json", "run-now", "--queue", "q", "--dry-run"]).assert().success();
    let v = json(&out.get_output().stdout);
    assert_eq!(
        (v["dry_run"].as_bool(), v["matching"].as_u64(), v["would_run_now"].as_u64()),
        (Some(true), Some(5), Some(3))
    );
    f.bw().args(["run-now", "--queue", "q"]).assert().code(2).stderr(predicate::str::contains("pass --yes"));
    f.bw().args(["run-now", "--state", "running"]).assert().code(2).stderr(predicate::str::contains("'running'"));
    let out = f.bw().args(["--format", "json", "run-now", "--queue", "q", "--yes"]).assert().success();
    assert_eq!(json(&out.get_output().stdout)["made_due"], 3);
    assert_eq!(f.store().plan_run_now(&current_actor(), &Default::default()).unwrap().would_run_now, 0);
}

// ---- bulk cancel --------------------------------------------------------------------------------

#[test]
fn bulk_cancel_dry_run_gives_the_exact_plan_then_cancels_with_yes() {
    let f = admin_store();
    let store = f.store();
    let jobs: Vec<NewJob> = (0..6).map(|_| NewJob::new("charge-card", "q", vec![])).collect();
    store.enqueue_many(&jobs).unwrap();
    store.enqueue(&NewJob::new("other", "q", vec![])).unwrap();
    claim_all(&store, "q", 2);
    let before = dump(f.db.file());
    let out = f
        .bw()
        .args(["--format", "json", "cancel", "--state", "scheduled,running", "--wire-name", "charge-card", "--dry-run"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["matching"], 6);
    assert_eq!(v["would_cancel"], 4);
    assert_eq!(v["would_ask_to_stop"], 2);
    let table = text(
        &f.bw()
            .args(["cancel", "--state", "scheduled", "--wire-name", "charge-card", "--dry-run"])
            .assert()
            .success()
            .get_output()
            .stdout,
    );
    assert!(table.contains("4 scheduled would end Cancelled at once"), "{table}");
    f.bw().args(["cancel", "--state", "succeeded"]).assert().code(2).stderr(predicate::str::contains("'succeeded'"));
    f.bw().args(["cancel", "--state", "scheduled", "--wire-name", "charge-card"]).assert().code(2);
    assert_eq!(dump(f.db.file()), before, "a dry run or a refusal changed the store");
    let out = f
        .bw()
        .args(["--format", "json", "cancel", "--state", "scheduled,running", "--wire-name", "charge-card", "--yes"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!((v["cancelled"].as_u64(), v["asked_to_stop"].as_u64()), (Some(4), Some(2)));
    assert_eq!(f.store().counts().unwrap().total(JobState::Scheduled), 1, "the other wire name is untouched");
}

// ---- payload repair -----------------------------------------------------------------------------

#[test]
fn jobs_edit_repairs_a_quarantined_payload_and_requeues_it() {
    let f = admin_store();
    let store = f.store();
    live_worker(&store, &["resize"]);
    let id = quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 1)[0];
    let file = f._dir.path().join("payload.json");
    std::fs::write(&file, br#"{"width": 640}"#).unwrap();
    let out = f
        .bw()
        .args([
            "--format",
            "json",
            "jobs",
            "edit",
            &id.to_string(),
            "--payload",
            &format!("@{}", file.display()),
            "--requeue",
        ])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["result"], "EditedAndRequeued");
    assert_eq!(v["state"], "scheduled");
    assert_eq!((v["old_bytes"].as_u64(), v["new_bytes"].as_u64()), (Some(1), Some(14)));
    let job = f.store().job(id).unwrap().unwrap();
    assert_eq!((job.state, job.payload.as_slice()), (JobState::Scheduled, br#"{"width": 640}"#.as_slice()));
    let audit = json(&f.bw().args(["--format", "json", "audit"]).assert().success().get_output().stdout);
    assert!(audit.to_string().contains("old_payload_hex"), "{audit}");
}

#[test]
fn jobs_edit_refuses_malformed_json_and_a_succeeded_job_in_one_line_changing_nothing() {
    let f = admin_store();
    let store = f.store();
    let q = quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 1)[0];
    store.enqueue(&NewJob::new("w", "ok", vec![])).unwrap();
    let done = claim_all(&store, "ok", 1).remove(0);
    store
        .complete(&Completion { job_id: done.id, worker_id: "w-test".into(), attempt: 1, outcome: Outcome::Succeeded })
        .unwrap();
    let before = dump(f.db.file());
    let out = f.bw().args(["jobs", "edit", &q.to_string(), "--payload", "{width: 640"]).assert().code(2);
    one_line_error(&out.get_output().stderr, "'{width: 640'");
    let out = f.bw().args(["jobs", "edit", &done.id.to_string(), "--payload", "{}"]).assert().code(1);
    one_line_error(&out.get_output().stderr, &done.id.to_string());
    assert!(
        text(&out.get_output().stderr).to_lowercase().contains("is succeeded"),
        "{}",
        text(&out.get_output().stderr)
    );
    f.bw().args(["jobs", "edit", &q.to_string(), "--payload", "@/nonexistent/payload.json"]).assert().code(2);
    assert_eq!(dump(f.db.file()), before);
}

/// Issue 24 finding 7: `bw jobs edit --payload @FILE` accepted 50 MiB. Every way `bw` writes a
/// payload refuses one over the store's limit in one line naming both sizes, exit 2, nothing
/// changed; the limit is a `bw config` setting.
#[test]
fn payloads_over_the_store_limit_are_refused_by_enqueue_and_jobs_edit_in_one_line_with_exit_2() {
    let f = admin_store();
    let store = f.store();
    let q = quarantine(&store, "resize", QuarantineReason::UndecodablePayload, 1)[0];
    let out = f.bw().args(["config", "get", "payload_limit"]).assert().success();
    assert_eq!(text(&out.get_output().stdout), "1048576\n", "the default, 1 MiB");
    f.bw().args(["config", "set", "payload-limit", "1KiB"]).assert().success();
    let out = f.bw().args(["config", "get", "payload_limit"]).assert().success();
    assert_eq!(text(&out.get_output().stdout), "1024\n");
    let before = dump(f.db.file());

    let big = format!("\"{}\"", "x".repeat(1100));
    let out = f.bw().args(["enqueue", "resize", "--payload", &big]).assert().code(2);
    one_line_error(&out.get_output().stderr, "(1102 bytes), over the store's payload_limit of 1.0 KiB (1024 bytes)");
    let file = f._dir.path().join("big.json");
    std::fs::write(&file, &big).unwrap();
    for requeue in [None, Some("--requeue")] {
        let mut cmd = f.bw();
        cmd.args(["jobs", "edit", &q.to_string(), "--payload", &format!("@{}", file.display())]);
        cmd.args(requeue);
        let out = cmd.assert().code(2);
        one_line_error(&out.get_output().stderr, "the payload is 1.1 KiB (1102 bytes)");
    }
    let out = f.bw().args(["config", "set", "payload_limit", "lots"]).assert().code(2);
    one_line_error(&out.get_output().stderr, "'lots'");
    assert_eq!(dump(f.db.file()), before, "nothing changed");
}

#[test]
fn bw_help_lists_the_incident_verbs() {
    let f = Fixture::empty();
    let help = text(&f.bw().arg("--help").assert().success().get_output().stdout);
    for verb in ["run-now", "pause", "resume", "pauses", "cancel"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(verb)), "{verb} missing from:\n{help}");
    }
    let jobs = text(&f.bw().args(["jobs", "--help"]).assert().success().get_output().stdout);
    assert!(jobs.contains("edit"), "{jobs}");
}

#[test]
fn the_pause_kind_names_are_the_store_spelling() {
    assert_eq!(PauseKind::WireName.as_str(), "wire-name");
}
