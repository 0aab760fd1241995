//! `bw limit`, `bw limits`, `bw workers quiet|resume` and where they show (issue 21): each
//! command's table (snapshotted whole) and JSON, its refusals (one line quoting the bad value,
//! exit 2, nothing changed), `bw jobs show` naming the limit a due job waits on, and the quiet
//! worker in `bw workers`, `bw check` and `bw metrics`.

use backwave::store::{current_actor, ClaimRequest, LimitDefault, LimitSpec, PauseKind};
use backwave::{NewJob, RetryPolicy, Store, WorkerInfo};

use super::backend::both_backends;
use super::harness::*;

/// Snapshots beside the other `cli__*` ones in tests/snapshots, without this module's prefix.
fn snapshots_beside_the_others() -> insta::internals::SettingsBindDropGuard {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("../snapshots");
    settings.bind_to_scope()
}

fn admin_store() -> Fixture {
    let f = Fixture::empty();
    let store = Store::create(&f.db).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    f
}

fn worker(store: &Store, id: &str, host: &str) {
    store
        .register_worker(&WorkerInfo {
            id: id.into(),
            group: "payments".into(),
            host: host.into(),
            pid: 1,
            wire_names: vec!["charge-card".into()],
            queues: vec!["critical".into()],
            started_at: T_MS - 60_000,
            last_heartbeat_at: T_MS,
            stale_after_ms: 30_000,
        })
        .unwrap();
}

/// Two charge-card jobs due, one claimed (Running) by `web-1`'s worker.
fn one_running(f: &Fixture) -> (Store, Vec<backwave::JobId>) {
    let store = f.store();
    worker(&store, "web-1/7/payments#0001", "web-1");
    let ids = store
        .enqueue_many(&[
            NewJob::new("charge-card", "critical", b"1".to_vec()).due_at(T_MS - 10_000),
            NewJob::new("charge-card", "critical", b"2".to_vec()).due_at(T_MS - 5_000),
        ])
        .unwrap();
    let p = RetryPolicy::default();
    let queues = ["critical".to_string()];
    let req = ClaimRequest {
        worker_id: "web-1/7/payments#0001",
        group: "payments",
        queues: &queues,
        limit: 1,
        lease: std::time::Duration::from_secs(60),
        policy: &p,
        handler_policies: &[],
    };
    assert_eq!(store.claim(&req).unwrap().len(), 1);
    (store, ids)
}

both_backends! {
    fn limit_and_limits_print_tables_and_json_and_a_waiting_job_says_what_it_waits_on() {
        let f = admin_store();
        let (store, ids) = one_running(&f);
        let default = LimitDefault {
            kind: PauseKind::WireName,
            name: "charge-card".into(),
            spec: LimitSpec { concurrency: Some(5), rate: None },
        };
        store.declare_limits("web-1/7", &[default]).unwrap();
        let runs = [
            f.run(&["limit", "wire-name", "charge-card", "--concurrency", "1"]),
            f.run(&["limit", "wire-name", "charge-card", "--rate", "50/s", "--for", "30m"]),
            f.run(&["limit", "queue", "critical", "--rate", "600/1m"]),
            f.run(&["limits"]),
            f.run(&["limit", "queue", "critical", "--clear"]),
            f.run(&["limit", "queue", "critical", "--clear"]),
        ];
        let _s = snapshots_beside_the_others();
        insta::assert_snapshot!("cli__limit_and_limits", transcript(&runs));

        let v = json(&f.bw().args(["--format", "json", "limits"]).assert().success().get_output().stdout);
        let l = &v["limits"][0];
        assert_eq!(
            (l["kind"].as_str(), l["name"].as_str(), l["source"].as_str()),
            (Some("wire-name"), Some("charge-card"), Some("operator"))
        );
        assert_eq!(
            (l["concurrency"].as_u64(), l["rate"]["n"].as_u64(), l["rate"]["window_ms"].as_u64()),
            (Some(1), Some(50), Some(1000))
        );
        assert_eq!((l["running"].as_u64(), l["budget"].as_u64(), l["held_back"].as_u64()), (Some(1), Some(0), Some(1)));
        assert_eq!(l["operator"]["set_by"], current_actor());
        assert_eq!(l["operator"]["until"], "2026-11-30T12:30:00.000Z");
        assert_eq!(l["application"]["concurrency"], 5);
        assert_eq!(l["application"]["set_by"], "web-1/7");

        // The job left Scheduled says why, in the table and the JSON.
        let waiting =
            ids.iter().find(|id| store.job(**id).unwrap().unwrap().state == backwave::JobState::Scheduled).unwrap();
        let show = text(&f.bw().args(["jobs", "show", &waiting.to_string()]).assert().success().get_output().stdout);
        assert!(show.contains("Waits on") && show.contains("the limit on wire-name 'charge-card'"), "{show}");
        let v = json(
            &f.bw().args(["--format", "json", "jobs", "show", &waiting.to_string()]).assert().success().get_output().stdout,
        );
        assert_eq!(v["waits_on_limit"]["name"], "charge-card");
        assert_eq!(v["waits_on_limit"]["running"], 1);

        let stats = json(&f.bw().args(["--format", "json", "stats"]).assert().success().get_output().stdout);
        assert_eq!(stats["limits"].as_array().unwrap().len(), 1);
        let check = json(&f.bw().args(["--format", "json", "check"]).assert().get_output().stdout);
        let latency = check["checks"].as_array().unwrap().iter().find(|c| c["name"] == "latency").unwrap().clone();
        let message = latency["message"].as_str().unwrap();
        assert!(
            message.contains("held back by a limit: wire-name 'charge-card' (concurrency 1, rate 50/s), 1 due held"),
            "{message}"
        );
        let metrics = text(&f.bw().arg("metrics").assert().success().get_output().stdout);
        for line in [
            "backwave_limit_concurrency{kind=\"wire-name\",name=\"charge-card\"} 1",
            "backwave_limit_rate_per_second{kind=\"wire-name\",name=\"charge-card\"} 50",
            "backwave_limit_running{kind=\"wire-name\",name=\"charge-card\"} 1",
            "backwave_limit_held_back{kind=\"wire-name\",name=\"charge-card\"} 1",
        ] {
            assert!(metrics.contains(line), "no {line:?} in:\n{metrics}");
        }
        let audit = text(&f.bw().arg("audit").assert().success().get_output().stdout);
        assert!(audit.contains("limit") && audit.contains("unlimit"), "{audit}");
    }

    fn bad_limits_are_one_line_errors_quoting_the_value_and_change_nothing() {
        let f = admin_store();
        for (args, quoted) in [
            (&["limit", "wire-name", "x", "--rate", "50"][..], "'50'"),
            (&["limit", "wire-name", "x", "--rate", "0/s"][..], "'0/s'"),
            (&["limit", "wire-name", "x", "--concurrency", "0"][..], "'0'"),
            (&["limit", "wire-name", "x", "--concurrency", "-3"][..], "'-3'"),
            (&["limit", "wire-name", "x"][..], "'x'"),
            (&["limit", "wire-name", "x", "--concurrency", "2", "--for", "0s"][..], "'0s'"),
        ] {
            let out = f.bw().args(args).assert().code(2);
            let err = text(&out.get_output().stderr);
            assert!(err.contains(quoted), "{args:?}: {err}");
        }
        f.bw().args(["limit", "queue", "q", "--clear", "--concurrency", "2"]).assert().code(2);
        assert!(f.store().limits().unwrap().is_empty(), "a refused limit was written");
        // Without operate, refused with exit 1 and nothing written.
        let g = Fixture::hostile_stranger();
        g.bw().args(["limit", "queue", "critical", "--concurrency", "2"]).assert().code(1);
        assert!(g.store().limits().unwrap().is_empty());
    }

    fn workers_quiet_and_resume_by_host_show_in_workers_check_and_metrics() {
        let f = admin_store();
        let (store, _) = one_running(&f);
        worker(&store, "web-2/9/payments#0002", "web-2");
        let runs = [
            f.run(&["workers", "quiet", "--host", "web-1"]),
            f.run(&["workers", "quiet", "--host", "web-1"]),
            f.run(&["workers"]),
            f.run(&["workers", "quiet", "--host", "no-such-host"]),
            f.run(&["workers", "quiet"]),
        ];
        let _s = snapshots_beside_the_others();
        insta::assert_snapshot!("cli__workers_quiet", transcript(&runs));
        let v = json(&f.bw().args(["--format", "json", "workers"]).assert().success().get_output().stdout);
        let w = v["workers"].as_array().unwrap().iter().find(|w| w["host"] == "web-1").unwrap().clone();
        assert_eq!((w["state"].as_str(), w["running"].as_u64()), (Some("quiet"), Some(1)));
        assert_eq!(w["quiet_by"], current_actor());
        let other = v["workers"].as_array().unwrap().iter().find(|w| w["host"] == "web-2").unwrap().clone();
        assert_eq!(other["state"], "live");

        // Quiet longer than --max-quiet: a warning naming it.
        let check = |now: &str| {
            let out = f.bw().env("BW_NOW", now).args(["--format", "json", "check"]).output().unwrap();
            let v = json(&out.stdout);
            v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "quiet-worker").unwrap().clone()
        };
        assert_eq!(check(T)["status"], "ok", "quiet for no time yet");
        let late = check("2026-11-30T13:30:00Z");
        assert_eq!(late["status"], "warning");
        let message = late["message"].as_str().unwrap();
        assert!(
            message.contains("quiet longer than 1h: 'web-1/7/payments#0001'") && message.contains("0 running"),
            "{message}"
        ); // its lease lapsed meanwhile
        let metrics = text(&f.bw().arg("metrics").assert().success().get_output().stdout);
        assert!(metrics.contains("backwave_workers_quiet 1"), "{metrics}");

        let out = f.bw().args(["--format", "json", "workers", "resume", "web-1/7/payments#0001"]).assert().success();
        assert_eq!(json(&out.get_output().stdout)["ids"][0], "web-1/7/payments#0001");
        let audit = text(&f.bw().arg("audit").assert().success().get_output().stdout);
        assert!(audit.contains("quiet") && audit.contains("resume-worker"), "{audit}");
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: once a worker was quiet, `bw workers` at 120 columns cut
    // every id to `vm/1331…` for the long status beside it, and `bw workers quiet` took only a
    // whole id: quieting one worker needed a wider terminal or JSON.
    fn a_worker_is_named_by_the_unique_start_or_end_of_its_id_which_the_table_keeps_when_it_cuts_one() {
        let f = admin_store();
        let (store, _) = one_running(&f);
        worker(&store, "web-2/9/payments-with-a-long-group-name#0002", "web-2");
        // The tail the table shows, a host/pid start: each names one worker.
        let out = f.bw().args(["--format", "json", "workers", "quiet", "#0002"]).assert().success();
        assert_eq!(json(&out.get_output().stdout)["ids"][0], "web-2/9/payments-with-a-long-group-name#0002");
        let out = f.bw().args(["--format", "json", "workers", "quiet", "web-1/7"]).assert().success();
        assert_eq!(json(&out.get_output().stdout)["ids"][0], "web-1/7/payments#0001");
        // A start two ids share is refused naming both (it read as "no registered worker", which
        // sent an operator looking for a worker that was there).
        let out = f.bw().args(["workers", "resume", "web-"]).assert().code(2);
        let err = text(&out.get_output().stderr);
        assert!(
            err.contains("'web-' is the start or end of 2 registered workers' ids: 'web-1/7/payments#0001', 'web-2/9/")
                && err.contains("give more of it"),
            "{err}"
        );
        // One too short to be sure of names none: refused as before.
        for typed in ["#00", "2"] {
            let out = f.bw().args(["workers", "resume", typed]).assert().code(2);
            let err = text(&out.get_output().stderr);
            assert!(err.contains(&format!("no registered worker has id '{typed}'")), "{err}");
        }
        // Both quiet now, with long statuses: in 100 columns an id cut to fit keeps the tail
        // that names it.
        let table = text(&f.bw().env("COLUMNS", "100").arg("workers").assert().success().get_output().stdout);
        assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
        for (id, tail) in [("web-1/7/payments#0001", "#0001"), ("web-2/9/payments-with-a-long-group-name#0002", "#0002")] {
            let line = table.lines().find(|l| l.contains(tail)).unwrap_or_else(|| panic!("no {tail} in:\n{table}"));
            assert!(line.starts_with(id) || line.split_whitespace().next().unwrap().ends_with(&format!("…{tail}")), "{line}");
        }
        assert!(table.contains("…#0002"), "the long id is cut, keeping its tail:\n{table}");
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: `bw enqueue send-emial --queue high` printed only the new
    // id, and a worker quarantined the job 150 ms later as unhandled.
    fn enqueueing_a_wire_name_no_live_worker_handles_warns_with_the_name_meant() {
        let f = admin_store();
        // No worker live: enqueueing ahead of a deploy is normal, and nothing is said.
        let out = f.bw().args(["enqueue", "charge-crad", "--queue", "critical"]).assert().success();
        assert!(out.get_output().stderr.is_empty(), "{}", text(&out.get_output().stderr));
        worker(&f.store(), "web-1/7/payments#0001", "web-1");
        let out = f.bw().args(["enqueue", "charge-crad", "--queue", "critical"]).assert().success();
        let err = text(&out.get_output().stderr);
        assert_eq!(
            err,
            "bw: warning: no live worker handles wire name 'charge-crad'; did you mean 'charge-card'? (enqueued; a \
             worker that claims it without a handler quarantines it)\n"
        );
        assert_eq!(text(&out.get_output().stdout).lines().count(), 1, "the id, as always");
        let out = f.bw().args(["enqueue", "charge-card", "--queue", "critical"]).assert().success();
        assert!(out.get_output().stderr.is_empty(), "{}", text(&out.get_output().stderr));
        assert_eq!(f.store().counts().unwrap().total(backwave::JobState::Scheduled), 3, "all three enqueued");
        // The same for a queue no live worker claims from (found in the next walkthrough:
        // `--queue hgh` was enqueued without a word, to wait for a worker that never comes).
        let out = f.bw().args(["enqueue", "charge-card", "--queue", "critcal"]).assert().success();
        assert_eq!(
            text(&out.get_output().stderr),
            "bw: warning: no live worker claims from queue 'critcal'; did you mean 'critical'? (enqueued; it waits \
             until one does)\n"
        );
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: a limit set for an hour and then changed without `--for`
    // lost its expiry without a word; and a name limited or paused ahead of its first job with
    // `--force` could not be changed or paused again without `--force` ("unknown wire-name").
    fn a_change_that_lifts_a_limits_expiry_says_so_and_a_forced_name_is_known_afterwards() {
        let f = admin_store();
        f.bw().args(["limit", "wire-name", "new-thing", "--rate", "50/s", "--for", "1h"]).assert().code(2);
        f.bw().args(["limit", "wire-name", "new-thing", "--rate", "50/s", "--for", "1h", "--force"]).assert().success();
        let out = f.bw().args(["limit", "wire-name", "new-thing", "--concurrency", "3"]).assert().success();
        let said = text(&out.get_output().stdout);
        assert!(said.contains("now concurrency 3, rate 50/s until `bw limit --clear`"), "{said}");
        assert!(said.contains("It was to lapse at 2026-11-30T13:00:00.000Z; given without --for, it now lasts until cleared"), "{said}");
        // Given with --for, or with no expiry to lift, nothing more is said.
        let out = f.bw().args(["--format", "json", "limit", "wire-name", "new-thing", "--concurrency", "4"]).assert().success();
        assert!(json(&out.get_output().stdout).get("lifted_until").is_none());
        // A pause, forced ahead of its first job, is extended without --force.
        f.bw().args(["pause", "queue", "later", "--force"]).assert().success();
        f.bw().args(["pause", "queue", "later", "--for", "1h"]).assert().success();
    }
}
