//! Each check of `Store::health` crossing its threshold both ways, on the library.

use std::time::Duration;

use backwave::store::{
    CheckName, RawValue, Status, Thresholds, TransitionCounter, CAUSE_GROUPS, DEAD_SINCE_SQL, DUE_SQL,
};
use backwave::JobState;

use crate::backend::both_backends;
use crate::health::fixture::*;

fn status(fx: &Fx, name: CheckName) -> Status {
    fx.health().check(name).status
}

both_backends! {
    fn a_store_with_nothing_wrong_passes_every_check() {
        let fx = Fx::new();
        fx.worker("w1", &["high"], &["send-email"], NOW);
        fx.scheduled("high", NOW - 10 * SECOND);
        fx.scheduled("high", NOW + HOUR);
        fx.dead("send-email", "smtp refused (attempt 3)", NOW - 2 * HOUR);
        let h = fx.health();
        assert_eq!(h.status, Status::Ok, "{:#?}", h.checks);
        assert_eq!(h.checks.len(), CheckName::ALL.len());
        assert!(h.checks.iter().all(|c| c.status == Status::Ok));
        // The whole read serializes, for an application exposing it its own way.
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["status"], "ok");
        assert_eq!(v["counts"]["by_queue"]["high"]["scheduled"], 2);
        assert_eq!(v["queues"][1]["queue"], "high", "queues by name: default (the dead letter), high");
    }
}

both_backends! {
    fn latency_is_critical_once_the_oldest_due_job_waits_past_max_latency() {
        let fx = Fx::new();
        fx.worker("w1", &["high"], &["send-email"], NOW);
        fx.scheduled("high", NOW - 4 * MINUTE);
        fx.scheduled("high", NOW - MINUTE);
        let h = fx.health();
        let q = h.queues.iter().find(|q| q.queue == "high").unwrap();
        assert_eq!((q.due_now, q.oldest_due_age_ms), (2, 4 * MINUTE as u64));
        assert_eq!(h.check(CheckName::Latency).status, Status::Ok);
        assert_eq!(h.check(CheckName::Latency).value, 240.0);

        // Two minutes on, the oldest has waited 6 minutes: over the 5-minute default.
        fx.advance(Duration::from_secs(120));
        fx.worker("w1", &["high"], &["send-email"], NOW + 2 * MINUTE);
        let h = fx.health();
        let latency = h.check(CheckName::Latency);
        assert_eq!(latency.status, Status::Critical);
        assert_eq!((latency.value, latency.threshold), (360.0, 300.0));
        assert!(latency.message.contains("'high'"), "{}", latency.message);
        assert_eq!(h.status, Status::Critical);

        // A queue left out on purpose is not judged.
        let t = Thresholds { exclude_queues: ["high".to_string()].into(), ..Thresholds::default() };
        assert_eq!(fx.store.health(&t).unwrap().check(CheckName::Latency).status, Status::Ok);
    }
}

both_backends! {
    fn jobs_due_later_are_not_latency() {
        let fx = Fx::new();
        fx.scheduled("high", NOW + 10 * MINUTE);
        fx.scheduled("high", NOW + 3 * HOUR);
        let latency = fx.store.queue_latency().unwrap();
        assert_eq!(latency.len(), 1);
        assert_eq!((latency[0].due_now, latency[0].oldest_due_at, latency[0].oldest_due_age_ms), (0, None, 0));
        assert_eq!(status(&fx, CheckName::Latency), Status::Ok);
        assert_eq!(status(&fx, CheckName::UnworkedQueue), Status::Ok);
    }
}

both_backends! {
    fn a_queue_with_due_jobs_and_no_live_worker_is_critical_after_the_grace() {
        let fx = Fx::new();
        fx.scheduled("bulk", NOW - 30 * SECOND);
        // Within the one-minute grace (a deploy restarting its workers).
        assert_eq!(status(&fx, CheckName::UnworkedQueue), Status::Ok);
        fx.advance(Duration::from_secs(60));
        let h = fx.health();
        let unworked = h.check(CheckName::UnworkedQueue);
        assert_eq!(unworked.status, Status::Critical);
        assert!(unworked.message.contains("'bulk'"), "{}", unworked.message);
        // A stale worker of the queue does not count; a live one does.
        fx.worker("gone", &["bulk"], &["send-email"], NOW - HOUR);
        assert_eq!(status(&fx, CheckName::UnworkedQueue), Status::Critical);
        fx.worker("w1", &["bulk"], &["send-email"], NOW + 90 * SECOND);
        assert_eq!(status(&fx, CheckName::UnworkedQueue), Status::Ok);
        // Found at 3 a.m.: a quiet worker claims nothing, so it does not serve the queue (the
        // check said ok while the queue's only worker was quiet and its jobs waited).
        fx.store.bootstrap_admin(ADMIN).unwrap();
        let quieted = fx.store.quiet_workers(ADMIN, &backwave::store::WorkerSelector::Id("w1".into())).unwrap();
        assert_eq!(quieted, ["w1"]);
        let h = fx.health();
        let unworked = h.check(CheckName::UnworkedQueue);
        assert_eq!(unworked.status, Status::Critical, "{}", unworked.message);
        assert!(unworked.message.contains("quiet and stopping workers claim nothing"), "{}", unworked.message);
        assert_eq!(h.queues.iter().find(|q| q.queue == "bulk").unwrap().live_workers, 0);
        fx.store.resume_workers(ADMIN, &backwave::store::WorkerSelector::Id("w1".into())).unwrap();
        assert_eq!(status(&fx, CheckName::UnworkedQueue), Status::Ok);
    }
}

both_backends! {
    fn dead_letters_in_the_window_are_critical_above_max_dead() {
        let fx = Fx::new();
        for i in 0..10 {
            fx.dead("charge-card", "gateway timeout", NOW - (i + 1) * MINUTE);
        }
        // Older than the one-hour window: history, not this incident.
        for _ in 0..50 {
            fx.dead("charge-card", "gateway timeout", NOW - 3 * HOUR);
        }
        let h = fx.health();
        assert_eq!(h.dead_lettered_in_window, 10);
        assert_eq!(h.check(CheckName::DeadLettered).status, Status::Ok);
        fx.dead("charge-card", "gateway timeout", NOW - SECOND);
        let h = fx.health();
        let dead = h.check(CheckName::DeadLettered);
        assert_eq!((dead.status, dead.value, dead.threshold), (Status::Critical, 11.0, 10.0));
        assert!(dead.message.contains("gateway timeout"), "{}", dead.message);
    }
}

both_backends! {
    fn a_cause_first_seen_yesterday_is_not_new_and_one_first_seen_5_minutes_ago_is() {
        let fx = Fx::new();
        // Yesterday's failure, failing again now: the same fingerprint, so not new.
        fx.dead("sync-inventory", "warehouse 17 unreachable", NOW - 24 * HOUR);
        fx.dead("sync-inventory", "warehouse 18 unreachable", NOW - 5 * MINUTE);
        let h = fx.health();
        assert!(h.new_causes.is_empty(), "{:?}", h.new_causes);
        assert_eq!(h.check(CheckName::NewCause).status, Status::Ok);

        fx.dead("charge-card", "card processor returned 502 for 'acct-9'", NOW - 5 * MINUTE);
        let h = fx.health();
        assert_eq!(h.new_causes.len(), 1);
        assert_eq!(h.new_causes[0].wire_name, "charge-card");
        let new = h.check(CheckName::NewCause);
        assert_eq!((new.status, new.value), (Status::Warning, 1.0));
        assert!(
            new.message.contains("'charge-card'") && new.message.contains("card processor returned 502"),
            "{}",
            new.message
        );

        // The window decides what "new" means: over the last 3 minutes nothing is.
        let t = Thresholds { window: Duration::from_secs(180), ..Thresholds::default() };
        assert!(fx.store.health(&t).unwrap().new_causes.is_empty());
        // And a threshold of one new cause tolerates it.
        let t = Thresholds { max_new_causes: 1, ..Thresholds::default() };
        assert_eq!(fx.store.health(&t).unwrap().check(CheckName::NewCause).status, Status::Ok);
    }
}

both_backends! {
    fn causes_differing_only_by_a_hex_id_without_digits_are_one_group_and_not_new() {
        let fx = Fx::new();
        // Regression: a hex id with no decimal digit kept its letters, so each was its own group
        // and set off new-cause.
        fx.dead("upload", "upload of blob cdfabdfdebcd failed", NOW - 24 * HOUR);
        fx.dead("upload", "upload of blob fedcbafedcba failed", NOW - 5 * MINUTE);
        let h = fx.health();
        assert_eq!(h.cause_groups_total, 1, "{:?}", h.causes);
        assert_eq!(h.causes[0].fingerprint, "upload of blob <hex> failed");
        assert_eq!(h.causes[0].count, 2);
        assert!(h.new_causes.is_empty(), "{:?}", h.new_causes);
        assert_eq!(h.check(CheckName::NewCause).status, Status::Ok);
    }
}

both_backends! {
    fn a_flood_of_distinct_new_causes_is_counted_whole_and_carried_bounded() {
        let fx = Fx::new();
        for i in 0..150 {
            // Letters, not digits: each is its own fingerprint.
            let word: String = format!("{i:03}").chars().map(|d| (b'a' + d.to_digit(10).unwrap() as u8) as char).collect();
            fx.dead("import", &format!("unknown column {word}"), NOW - MINUTE);
        }
        let h = fx.health();
        assert_eq!((h.cause_groups_total, h.new_causes_total), (150, 150));
        assert_eq!((h.causes.len(), h.new_causes.len()), (CAUSE_GROUPS, CAUSE_GROUPS));
        assert!(h.new_causes.iter().all(|c| c.example.starts_with("unknown column ")));
        let new = h.check(CheckName::NewCause);
        assert_eq!(new.value, 150.0);
        assert!(new.message.ends_with(" and 145 more"), "{}", new.message);
    }
}

both_backends! {
    fn a_recently_quarantined_wire_name_without_a_live_handler_warns_until_one_appears() {
        let fx = Fx::new();
        fx.quarantined("legacy-report", NOW - 3 * HOUR);
        assert_eq!(status(&fx, CheckName::UnhandledQuarantine), Status::Ok, "old quarantines are history");
        fx.quarantined("legacy-report", NOW - 5 * MINUTE);
        let h = fx.health();
        let unhandled = h.check(CheckName::UnhandledQuarantine);
        assert_eq!((unhandled.status, unhandled.value), (Status::Warning, 1.0));
        assert!(unhandled.message.contains("'legacy-report' (jobs: 2)"), "{}", unhandled.message);
        fx.worker("w1", &["default"], &["legacy-report"], NOW);
        assert_eq!(status(&fx, CheckName::UnhandledQuarantine), Status::Ok);
    }
}

both_backends! {
    fn workers_that_stopped_heartbeating_in_the_window_warn_and_older_ones_do_not() {
        let fx = Fx::new();
        fx.worker("live", &["high"], &["send-email"], NOW - 5 * SECOND);
        fx.worker("long-gone", &["high"], &["send-email"], NOW - 5 * HOUR);
        let h = fx.health();
        assert_eq!((h.workers.live, h.workers.stale), (1, 1));
        assert_eq!(h.check(CheckName::StaleWorkers).status, Status::Ok);
        fx.worker("node-7/4242/bulk#ab12", &["bulk"], &["resize-image"], NOW - 10 * MINUTE);
        let h = fx.health();
        let stale = h.check(CheckName::StaleWorkers);
        assert_eq!((stale.status, stale.value), (Status::Warning, 1.0));
        assert!(stale.message.contains("node-7/4242/bulk#ab12"), "{}", stale.message);
        assert_eq!(h.workers.recently_stale, ["node-7/4242/bulk#ab12"]);
    }
}

fn plan(fx: &Fx, sql: &str, params: &[RawValue]) -> Vec<String> {
    fx.store.explain(sql, params).unwrap()
}

#[test]
fn the_due_count_reads_a_range_of_the_claim_index_not_the_table() {
    let fx = Fx::new();
    let plan = plan(&fx, DUE_SQL, &["q".into(), NOW.into()]);
    assert_eq!(
        plan,
        ["SEARCH jobs USING COVERING INDEX jobs_claim_priority (queue=? AND priority=? AND due_at<?)"],
        "ten ranges, no scan"
    );
}

#[test]
fn the_recent_dead_letter_count_reads_a_range_of_the_finished_index_not_the_table() {
    let fx = Fx::new();
    let plan = plan(&fx, DEAD_SINCE_SQL, &[(NOW - HOUR).into()]);
    assert_eq!(plan, ["SEARCH jobs USING COVERING INDEX jobs_finished (state=? AND finished_at>?)"], "no scan");
}

both_backends! {
    fn transitions_are_counted_from_the_log_after_the_first_read_only() {
        let fx = Fx::new();
        let job = fx.scheduled("high", NOW);
        let log = |to: &str| {
            fx.store
                .raw_execute(
                    &format!("INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ('{job}', {NOW}, '{to}', 1)"),
                    &[],
                )
                .unwrap();
        };
        log("scheduled");
        log("running");
        let mut counter = TransitionCounter::default();
        fx.store.count_transitions(&mut counter).unwrap();
        assert!(counter.by_state.is_empty(), "the first read is the baseline");
        assert_eq!(counter.last.map(|c| c.seq), Some(2));
        log("scheduled");
        log("running");
        log("dead-lettered");
        fx.store.count_transitions(&mut counter).unwrap();
        assert_eq!(counter.by_state.get(&JobState::Running), Some(&1));
        assert_eq!(counter.by_state.get(&JobState::DeadLettered), Some(&1));
        assert_eq!(counter.by_state.values().sum::<u64>(), 3);
        assert_eq!(counter.last.map(|c| c.seq), Some(5), "the next count starts after the fifth");
        fx.store.count_transitions(&mut counter).unwrap();
        assert_eq!(counter.by_state.values().sum::<u64>(), 3, "nothing new: nothing counted twice");
        assert_eq!(fx.health().log_seq, 5);
    }
}

both_backends! {
    // Issue 20: a schedule stored with a payload over payload_limit (the limit lowered since)
    // fails every tick, seen only in the ticker's error count. bw check names it at once.
    fn a_stored_schedule_whose_payload_is_over_the_payload_limit_is_named_by_overdue_schedule() {
        let fx = Fx::new();
        fx.store.bootstrap_admin(ADMIN).unwrap();
        let payload = format!("\"{}\"", "x".repeat(2000));
        let s = backwave::Schedule::new("nightly-export", "0 2 * * *", "export", "bulk", payload);
        fx.store.declare_schedules("app", &[s]).unwrap();
        assert_eq!(status(&fx, CheckName::OverdueSchedule), Status::Ok, "within the default 1 MiB");
        fx.store.set_setting(ADMIN, backwave::store::SettingKey::PayloadLimit, "1KiB").unwrap();
        let h = fx.health();
        let check = h.check(CheckName::OverdueSchedule);
        assert_eq!(check.status, Status::Warning, "{check:?}");
        assert!(
            check.message.contains("'nightly-export' payload is 2002 bytes, over payload_limit (1024 bytes): every tick fails"),
            "{}",
            check.message
        );
        // Paused, it fires nothing anyway: not named.
        fx.store.pause_schedule(ADMIN, "nightly-export", None).unwrap();
        assert_eq!(status(&fx, CheckName::OverdueSchedule), Status::Ok);
    }
}
