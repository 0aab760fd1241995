//! `bw schedules` and `bw schedule pause|resume|trigger` through the real binary (issue 20):
//! the table and its JSON, `--dry-run`, the refusals (one line quoting the bad input, exit 2,
//! nothing changed), and what `bw check` and `bw metrics` say about schedules. Both backends.

use backwave::schedule::{MissedTicks, Schedule};
use backwave::store::current_actor;
use backwave::{Clock, Store};

use super::backend::both_backends;
use super::harness::*;

/// Three schedules declared two hours before `T`: `hourly-report` nobody declared since
/// (orphaned, its tick an hour overdue), `nightly` paused, `every-minute` fired once.
fn schedules_store() -> (Fixture, backwave::JobId) {
    let f = Fixture::empty();
    let clock = Clock::manual(T_MS - 2 * 3_600_000);
    let store = Store::create(&f.db).unwrap().with_clock(clock.clone());
    store.bootstrap_admin(&current_actor()).unwrap();
    let defs = [
        Schedule::new("hourly-report", "0 * * * *", "build-report", "reports", r#"{"kind":"hourly"}"#),
        Schedule::new("nightly", "0 2 * * *", "export", "bulk", "{}")
            .zone("Europe/Berlin")
            .missed(MissedTicks::CatchUp { max: 2 }),
        Schedule::new("every-minute", "* * * * *", "ping", "default", "{}"),
    ];
    store.declare_schedules("app", &defs).unwrap();
    clock.set(T_MS - 90_000);
    let (fired, _) = store.fire_due_schedules(&["every-minute".to_string()]).unwrap();
    let job = fired[0].fired[0].1;
    clock.set(T_MS);
    store.touch_schedules(&["nightly".to_string(), "every-minute".to_string()]).unwrap();
    store.pause_schedule(&current_actor(), "nightly", None).unwrap();
    (f, job)
}

/// A whole-output snapshot in tests/snapshots, beside every other `cli__` one.
fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, text);
    });
}

both_backends! {
    fn schedules_list_pause_resume_and_trigger_with_dry_runs() {
        let (f, job) = schedules_store();
        let runs = [
            f.run(&["schedules"]),
            f.run(&["schedule", "pause", "hourly-report", "--for", "2h", "--dry-run"]),
            f.run(&["schedule", "pause", "hourly-report", "--for", "2h"]),
            f.run(&["schedule", "resume", "nightly", "--dry-run"]),
            f.run(&["schedule", "resume", "nightly"]),
            f.run(&["schedule", "resume", "nightly"]),
            f.run(&["schedule", "trigger", "every-minute", "--dry-run"]),
            f.run(&["schedules"]),
        ];
        // The job id is random: a stand-in of the same width keeps the columns.
        let shown = transcript(&runs).replace(&job.short(), &"j".repeat(job.short().len()));
        snapshot("cli__schedules_list_pause_resume_and_trigger_with_dry_runs", &shown);
        let audit: Vec<String> =
            f.store().audit_entries(0, 50).unwrap().into_iter().map(|a| a.action).collect();
        assert_eq!(audit.iter().filter(|a| a.starts_with("schedule-pause")).count(), 2, "{audit:?}");
        assert_eq!(audit.iter().filter(|a| *a == "schedule-resume").count(), 1, "{audit:?}");
        assert!(!audit.contains(&"schedule-trigger".to_string()), "a dry run triggered: {audit:?}");
    }

    fn schedules_json_and_trigger_json_follow_the_contract() {
        let (f, job) = schedules_store();
        let v = json(&f.bw().args(["--format", "json", "schedules"]).assert().success().get_output().stdout);
        let list = v["schedules"].as_array().unwrap();
        assert_eq!(list.len(), 3);
        let every = &list[0];
        assert_eq!(every["name"], "every-minute");
        assert_eq!(every["cron"], "* * * * *");
        assert_eq!(every["zone"], "UTC");
        assert_eq!(every["missed"], "latest");
        assert_eq!(every["next_fire"], "2026-11-30T12:01:00.000Z");
        assert_eq!(every["last_tick"], "2026-11-30T11:58:00.000Z");
        assert_eq!(every["last_fire"], "2026-11-30T11:58:30.000Z");
        assert_eq!(every["last_job"], job.to_string());
        assert_eq!(every["last_job_state"], "scheduled");
        assert_eq!(every["overdue_seconds"], 60);
        assert_eq!((every["paused"].as_bool(), every["orphaned"].as_bool()), (Some(false), Some(false)));
        let hourly = &list[1];
        assert_eq!((hourly["name"].as_str(), hourly["orphaned"].as_bool()), (Some("hourly-report"), Some(true)));
        assert_eq!(hourly["overdue_seconds"], 3600);
        assert_eq!(hourly["last_fire"], serde_json::Value::Null);
        let nightly = &list[2];
        assert_eq!((nightly["paused"].as_bool(), nightly["paused_by"].as_str()), (Some(true), Some(current_actor().as_str())));
        assert_eq!((nightly["missed"].as_str(), nightly["catch_up_max"].as_i64()), (Some("catch-up"), Some(2)));
        assert_eq!(nightly["next_fire"], serde_json::Value::Null, "paused until resumed: no next fire");

        let v = json(&f.bw().args(["--format", "json", "schedule", "trigger", "every-minute"]).assert().success().get_output().stdout);
        assert_eq!(v["result"], "Triggered");
        let made: backwave::JobId = v["job"].as_str().unwrap().parse().unwrap();
        let store = f.store();
        let j = store.job(made).unwrap().unwrap();
        assert_eq!((j.wire_name.as_str(), j.queue.as_str()), ("ping", "default"));
        assert_eq!(j.labels["triggered-by"], current_actor());
        let row = store.schedule("every-minute").unwrap().row;
        assert_eq!(row.last_job_id, Some(made));
        assert_eq!(row.last_tick, T_MS - 120_000, "a trigger is outside the tick sequence");
        let v = json(&f.bw().args(["--format", "json", "schedule", "pause", "nightly", "--dry-run"]).assert().success().get_output().stdout);
        assert_eq!(v["result"], "WouldPause");
    }

    fn a_bad_schedule_name_or_duration_is_refused_in_one_line_with_exit_2_and_nothing_changes() {
        let (f, _) = schedules_store();
        let runs = [
            f.run(&["schedule", "pause", "no-such-schedule"]),
            f.run(&["schedule", "trigger", "bad\u{1b}[2Jname"]),
            f.run(&["schedule", "pause", "hourly-report", "--for", "0s"]),
        ];
        for r in &runs {
            assert_eq!(r.code, Some(2), "{r}");
            assert_eq!(r.stderr.lines().count(), 1, "{r}");
            assert_inert(&r.stderr);
        }
        snapshot("cli__a_bad_schedule_name_or_duration_is_refused", &transcript(&runs));
        assert!(!f.store().schedule("hourly-report").unwrap().paused);
    }

    fn check_warns_of_an_overdue_schedule_and_metrics_export_its_time_since_last_fire() {
        let (f, _) = schedules_store();
        // (The fixture's due job has no worker, so the store as a whole is critical.)
        let out = f.bw().args(["--format", "json", "check"]).output().unwrap();
        let v = json(&out.stdout);
        let check = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "overdue-schedule").unwrap().clone();
        assert_eq!(check["status"], "warning");
        assert_eq!(check["value"], 3600.0);
        assert_eq!(check["threshold"], 30.0);
        let message = check["message"].as_str().unwrap();
        assert!(message.contains("'hourly-report' tick overdue by 1h, orphaned"), "{message}");
        assert!(message.contains("'every-minute' tick overdue by 1m"), "{message}");
        assert!(!message.contains("nightly"), "a paused schedule is not judged: {message}");
        // A longer grace: only the hour-late one.
        let out = f.bw().args(["--format", "json", "check", "--schedule-grace", "5m"]).output().unwrap();
        let v = json(&out.stdout);
        let check = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "overdue-schedule").unwrap().clone();
        assert!(!check["message"].as_str().unwrap().contains("every-minute"), "{check}");

        let metrics = text(&f.bw().arg("metrics").assert().success().get_output().stdout);
        assert!(metrics.contains("backwave_schedule_seconds_since_last_fire{schedule=\"every-minute\"} 90\n"), "{metrics}");
        assert!(!metrics.contains("backwave_schedule_seconds_since_last_fire{schedule=\"hourly-report\"}"), "never fired");
        assert!(metrics.contains("backwave_schedule_paused{schedule=\"nightly\"} 1\n"), "{metrics}");
        assert!(metrics.contains("backwave_schedule_orphaned{schedule=\"hourly-report\"} 1\n"), "{metrics}");
        assert!(metrics.contains("backwave_check_status{check=\"overdue-schedule\"} 1\n"), "{metrics}");
    }
}
