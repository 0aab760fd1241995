//! Priority within a queue through `bw` (issue 40): `bw enqueue --priority`, the PRI column of
//! `bw jobs list` and `bw schedules` (shown when a priority is set), `bw jobs show`, the JSON,
//! and `bw jobs set-priority` (operate, audited); a priority out of range is refused with exit 2
//! and changes nothing. Both backends.

use backwave::schedule::Schedule;
use backwave::store::current_actor;
use backwave::{Clock, NewJob, Store};

use super::backend::both_backends;
use super::harness::*;

/// A whole-output snapshot in tests/snapshots, beside every other `cli__` one.
fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, text);
    });
}

fn admin_store() -> (Fixture, Store) {
    let f = Fixture::empty();
    let store = Store::create(&f.db).unwrap().with_clock(Clock::manual(T_MS - 60_000));
    store.bootstrap_admin(&current_actor()).unwrap();
    (f, store)
}

fn scheduled_count(store: &Store) -> u64 {
    store.counts().unwrap().total(backwave::JobState::Scheduled)
}

both_backends! {
    fn bw_enqueue_refuses_a_priority_out_of_range_with_exit_2_and_enqueues_nothing() {
        let (f, store) = admin_store();
        let runs = [
            f.run(&["enqueue", "send-email", "--priority", "99"]),
            f.run(&["enqueue", "send-email", "--priority", "-1"]),
            f.run(&["enqueue", "send-email", "--priority", "high"]),
            f.run(&["jobs", "set-priority", "00000000", "10"]),
        ];
        for r in &runs {
            assert_eq!(r.code, Some(2), "{r}");
        }
        snapshot("cli__bw_enqueue_refuses_a_priority_out_of_range", &transcript(&runs));
        assert_eq!(scheduled_count(&store), 0);
    }

    fn bw_enqueue_sets_a_priority_that_list_show_json_and_set_priority_follow() {
        let (f, store) = admin_store();
        let low = f.bw().args(["enqueue", "export", "--queue", "bulk", "--priority", "7"]).assert().success();
        let low = text(&low.get_output().stdout).trim().to_string();
        let plain = store.enqueue(&NewJob::new("send-email", "bulk", "{}")).unwrap();
        let low_job = store.job(low.parse().unwrap()).unwrap().unwrap();
        assert_eq!(low_job.priority, 7);
        let runs = [
            f.run(&["jobs", "list", "--state", "scheduled"]),
            f.run(&["jobs", "set-priority", &low, "2"]),
            f.run(&["jobs", "set-priority", &low, "2"]),
        ];
        // Ids are random: stand-ins of the same width keep the columns.
        let mut shown = transcript(&runs);
        for (id, by) in [(low_job.id, "a"), (plain, "b")] {
            shown = shown.replace(&id.to_string(), &by.repeat(36)).replace(&id.short(), &by.repeat(id.short().len()));
        }
        snapshot("cli__bw_enqueue_sets_a_priority_that_list_and_set_priority_follow", &shown);
        let show = f.run(&["jobs", "show", &low]);
        assert!(show.stdout.contains("  Priority      2\n"), "{show}");
        let show_plain = f.run(&["jobs", "show", &plain.to_string()]);
        assert!(show_plain.stdout.contains("  Priority      0 (claimed first)\n"), "{show_plain}");
        // JSON: every job carries its priority.
        let v = json(&f.bw().args(["--format", "json", "jobs", "list"]).assert().success().get_output().stdout);
        let mut got: Vec<(String, u64)> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| (j["wire_name"].as_str().unwrap().to_string(), j["priority"].as_u64().unwrap()))
            .collect();
        got.sort();
        assert_eq!(got, [("export".to_string(), 2), ("send-email".to_string(), 0)]);
        let v = json(&f.bw().args(["--format", "json", "jobs", "show", &low]).assert().success().get_output().stdout);
        assert_eq!(v["job"]["priority"], 2);
        let v = json(
            &f.bw().args(["--format", "json", "jobs", "set-priority", &low, "9"]).assert().success().get_output().stdout,
        );
        assert_eq!((v["result"].as_str(), v["from"].as_u64(), v["to"].as_u64()), (Some("Changed"), Some(2), Some(9)));
        // Audited once per change, as a payload edit is; nothing for the unchanged one.
        let audit: Vec<_> = store.audit_entries(0, 50).unwrap().into_iter().filter(|a| a.action == "set-priority").collect();
        let details: Vec<_> = audit.iter().map(|a| a.detail.clone().unwrap_or_default()).collect();
        assert_eq!(details, ["priority 7 -> 2", "priority 2 -> 9"]);
        assert!(audit.iter().all(|a| a.actor == current_actor() && a.job_id == Some(low_job.id)));
        // Operate is needed.
        store.revoke(&current_actor(), &current_actor(), backwave::Permission::Admin).ok();
        let refused = f.run(&["jobs", "set-priority", &low, "1"]);
        assert_eq!(refused.code, Some(1), "{refused}");
        assert!(refused.stderr.contains("operate"), "{refused}");
        assert_eq!(store.job(low_job.id).unwrap().unwrap().priority, 9);
    }

    fn bw_schedules_shows_the_priority_of_the_jobs_a_schedule_enqueues() {
        let (f, store) = admin_store();
        store
            .declare_schedules(
                "app",
                &[
                    Schedule::new("nightly-export", "0 2 * * *", "export", "bulk", "{}").priority(8),
                    Schedule::new("every-minute", "* * * * *", "ping", "default", "{}"),
                ],
            )
            .unwrap();
        snapshot("cli__bw_schedules_shows_the_priority", &f.run(&["schedules"]).to_string());
        let v = json(&f.bw().args(["--format", "json", "schedules"]).assert().success().get_output().stdout);
        let got: Vec<_> = v["schedules"].as_array().unwrap().iter().map(|s| s["priority"].as_u64().unwrap()).collect();
        assert_eq!(got, [0, 8]);
    }
}
