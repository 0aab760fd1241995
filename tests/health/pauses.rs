//! Health meets pauses (#10 x #11): a paused queue is reported, not judged; a paused wire name's
//! due jobs are held apart from its queue's latency; a pause left in force too long warns; and
//! `bw check`, `bw metrics` and `bw stats` say so. Each both ways.

use std::time::Duration;

use backwave::store::{
    CheckName, PauseKind, RawValue, Status, Thresholds, CLAIM_NEXT_WIRE_NAME_SQL, DUE_WIRE_NAME_SQL,
};
use openmetrics_parser::{PrometheusType, PrometheusValue};
use predicates::prelude::*;
use serde_json::Value;

use crate::backend::both_backends;
use crate::health::fixture::*;

/// A live worker serving `critical`, and three of its jobs due 20 minutes ago: latency critical.
fn late_critical_queue() -> Fx {
    let fx = Fx::new();
    fx.worker("w1", &["critical"], &["charge-card", "send-email"], NOW);
    for _ in 0..3 {
        fx.scheduled_as("critical", "charge-card", NOW - 20 * MINUTE);
    }
    fx
}

both_backends! {
    fn a_paused_queue_with_old_due_jobs_is_reported_paused_not_critical_and_is_critical_again_once_resumed() {
        let fx = late_critical_queue();
        assert_eq!(fx.health().check(CheckName::Latency).status, Status::Critical);

        fx.pause(PauseKind::Queue, "critical", None);
        let h = fx.health();
        assert_eq!(h.status, Status::Ok, "{:#?}", h.checks);
        let q = h.queues.iter().find(|q| q.queue == "critical").unwrap();
        let pause = q.paused.as_ref().expect("the queue is reported paused");
        assert_eq!((pause.paused_by.as_str(), pause.paused_at, pause.until), (ADMIN, NOW, None));
        assert_eq!((q.due_now, q.oldest_due_at, q.held_by_pause), (0, None, 3), "every due job is held");
        let latency = h.check(CheckName::Latency);
        assert!(
            latency.message.contains("not judged, paused: 'critical' paused by 'alice' until resumed, 3 due"),
            "{}",
            latency.message
        );
        assert_eq!(h.pauses.len(), 1);

        fx.resume(PauseKind::Queue, "critical");
        let h = fx.health();
        assert_eq!(h.check(CheckName::Latency).status, Status::Critical);
        let q = h.queues.iter().find(|q| q.queue == "critical").unwrap();
        assert_eq!((q.due_now, q.held_by_pause, q.paused.is_some()), (3, 0, false));
    }
}

both_backends! {
    fn a_paused_queue_without_a_live_worker_is_not_unworked_and_a_lapsed_pause_is_judged_again() {
        let fx = Fx::new();
        fx.scheduled("bulk", NOW - 10 * MINUTE);
        assert_eq!(fx.health().check(CheckName::UnworkedQueue).status, Status::Critical);
        fx.pause(PauseKind::Queue, "bulk", Some(NOW + 30 * MINUTE));
        let h = fx.health();
        assert_eq!(h.check(CheckName::UnworkedQueue).status, Status::Ok, "{}", h.check(CheckName::UnworkedQueue).message);
        assert_eq!(h.check(CheckName::Latency).status, Status::Ok);
        // `--for 30m` ran out: the queue is judged as any other.
        fx.advance(Duration::from_secs(31 * 60));
        let h = fx.health();
        assert!(h.pauses.is_empty());
        assert_eq!(h.check(CheckName::UnworkedQueue).status, Status::Critical);
        assert_eq!(h.check(CheckName::Latency).status, Status::Critical);
    }
}

both_backends! {
    fn a_paused_wire_names_old_due_jobs_do_not_trip_latency_but_other_names_do() {
        let fx = late_critical_queue();
        fx.scheduled_as("critical", "send-email", NOW - MINUTE);
        // The same wire name waiting in another queue is held there too, counted per queue.
        fx.worker("w2", &["bulk"], &["charge-card"], NOW);
        fx.scheduled_as("bulk", "charge-card", NOW - 30 * SECOND);
        fx.pause(PauseKind::WireName, "charge-card", None);

        let h = fx.health();
        assert_eq!(h.check(CheckName::Latency).status, Status::Ok, "{}", h.check(CheckName::Latency).message);
        let q = h.queues.iter().find(|q| q.queue == "critical").unwrap();
        assert_eq!((q.due_now, q.oldest_due_age_ms, q.held_by_pause), (1, MINUTE as u64, 3));
        assert!(q.paused.is_none(), "the queue itself is not paused");
        let bulk = h.queues.iter().find(|q| q.queue == "bulk").unwrap();
        assert_eq!((bulk.due_now, bulk.oldest_due_at, bulk.held_by_pause), (0, None, 1));
        assert_eq!(h.held_by_wire_name.get("charge-card"), Some(&4));
        // bw stats and bw top read the same numbers.
        let latency = fx.store.queue_latency().unwrap();
        let l = latency.iter().find(|l| l.queue == "critical").unwrap();
        assert_eq!((l.due_now, l.oldest_due_age_ms, l.held_by_pause), (1, MINUTE as u64, 3));

        // Another wire name waiting too long in the same queue is latency all the same.
        fx.scheduled_as("critical", "send-email", NOW - 10 * MINUTE);
        let h = fx.health();
        let latency = h.check(CheckName::Latency);
        assert_eq!((latency.status, latency.value), (Status::Critical, 600.0));
        assert!(latency.message.contains("'critical' 10m (2 due)"), "{}", latency.message);

        // Older than the paused jobs, it is simply the oldest.
        fx.scheduled_as("critical", "send-email", NOW - 40 * MINUTE);
        let q = fx.health().queues.into_iter().find(|q| q.queue == "critical").unwrap();
        assert_eq!((q.due_now, q.oldest_due_age_ms, q.held_by_pause), (3, 40 * MINUTE as u64, 3));

        // Resumed: the charge-card jobs are due again, and the oldest of them counts.
        fx.resume(PauseKind::WireName, "charge-card");
        let q = fx.health().queues.into_iter().find(|q| q.queue == "critical").unwrap();
        assert_eq!((q.due_now, q.oldest_due_age_ms, q.held_by_pause), (6, 40 * MINUTE as u64, 0));
    }
}

both_backends! {
    fn a_pause_in_force_longer_than_max_pause_warns_as_forgotten() {
        let fx = late_critical_queue();
        fx.pause(PauseKind::WireName, "charge-card", None);
        assert_eq!(fx.health().check(CheckName::ForgottenPause).status, Status::Ok);
        fx.advance(Duration::from_secs(59 * 60));
        fx.worker("w1", &["critical"], &["charge-card"], NOW + 59 * MINUTE);
        let check = fx.health().check(CheckName::ForgottenPause).clone();
        assert_eq!((check.status, check.value, check.threshold), (Status::Ok, 3540.0, 3600.0));
        assert_eq!(check.message, "1 pause(s) in force, the longest for 59m");

        fx.advance(Duration::from_secs(2 * 60));
        let h = fx.health();
        let check = h.check(CheckName::ForgottenPause);
        assert_eq!((check.status, check.value), (Status::Warning, 3660.0));
        assert_eq!(
            check.message,
            "paused longer than 1h: wire-name 'charge-card' paused by 'alice' until resumed for 1h 1m, 3 due held"
        );
        assert_eq!(h.status, Status::Warning, "the held jobs are not latency");
        // A longer threshold tolerates it; resuming clears it.
        let t = Thresholds { max_pause: Duration::from_secs(2 * 3600), ..Thresholds::default() };
        assert_eq!(fx.store.health(&t).unwrap().check(CheckName::ForgottenPause).status, Status::Ok);
        fx.resume(PauseKind::WireName, "charge-card");
        let check = fx.health().check(CheckName::ForgottenPause).clone();
        assert_eq!((check.status, check.message.as_str()), (Status::Ok, "nothing is paused"));
    }
}

fn plan(fx: &Fx, sql: &str, params: &[RawValue]) -> Vec<String> {
    fx.store.explain(sql, params).unwrap()
}

#[test]
fn what_a_paused_wire_name_holds_is_read_from_ranges_of_the_wire_name_claim_index_not_the_table() {
    let fx = Fx::new();
    assert_eq!(
        plan(&fx, DUE_WIRE_NAME_SQL, &["q".into(), "charge-card".into(), NOW.into()]),
        ["SEARCH jobs USING COVERING INDEX jobs_claim_wire (queue=? AND wire_name=? AND due_at<?)"],
        "one range per paused name and queue"
    );
    assert_eq!(
        plan(&fx, CLAIM_NEXT_WIRE_NAME_SQL, &["q".into(), "".into()]),
        ["SEARCH jobs USING COVERING INDEX jobs_claim_wire (queue=? AND wire_name>?)"],
        "one probe per wire name waiting in the queue"
    );
}

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

both_backends! {
    fn bw_check_reports_a_paused_queue_in_its_table_and_json_and_exits_0_until_the_pause_is_forgotten() {
        let fx = late_critical_queue();
        fx.bw().arg("check").assert().code(2).stdout(predicate::str::starts_with("BACKWAVE CRITICAL: latency\n"));
        fx.pause(PauseKind::Queue, "critical", Some(NOW + 150 * MINUTE));
        fx.bw()
            .arg("check")
            .assert()
            .code(0)
            .stdout(predicate::str::starts_with("BACKWAVE OK: all 10 checks pass\n"))
            .stdout(predicate::str::contains(
                "  queue critical: paused by alice until 2026-11-30T14:30:00.000Z (for under 1s), 3 due held\n",
            ));

        let out = fx.bw().args(["--format", "json", "check"]).assert().code(0).get_output().stdout.clone();
        let v = json(&out);
        let q = &v["queues"][0];
        assert_eq!(
            (q["queue"].as_str(), q["due_now"].as_u64(), q["held_by_pause"].as_u64()),
            (Some("critical"), Some(0), Some(3))
        );
        assert_eq!(q["paused"]["paused_by"], "alice");
        assert_eq!(q["paused"]["until"], "2026-11-30T14:30:00.000Z");
        let pauses = v["pauses"].as_array().unwrap();
        assert_eq!(pauses.len(), 1);
        let mut keys: Vec<&str> = pauses[0].as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["held", "kind", "name", "paused_at", "paused_by", "until"]);
        assert_eq!((pauses[0]["kind"].as_str(), pauses[0]["held"].as_u64()), (Some("queue"), Some(3)));
        let forgotten = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "forgotten-pause").unwrap();
        assert_eq!((forgotten["status"].as_str(), forgotten["threshold"].as_f64()), (Some("ok"), Some(3600.0)));

        // Two hours on (the worker still heartbeating), the pause is a forgotten one: exit 1.
        fx.worker("w1", &["critical"], &["charge-card"], NOW + 2 * HOUR);
        let later = || {
            let mut c = fx.bw();
            c.env("BW_NOW", "2026-11-30T14:00:00Z");
            c
        };
        later()
            .arg("check")
            .assert()
            .code(1)
            .stdout(predicate::str::starts_with("BACKWAVE WARNING: forgotten-pause\n"))
            .stdout(predicate::str::contains("queue 'critical' paused by 'alice'"));
        later().args(["check", "--max-pause", "3h"]).assert().code(0);
        later()
            .args(["check", "--max-pause", "a while"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains("'a while' is not a duration"));
    }
}

/// The value of the sample of `family` whose labels are exactly `labels`.
fn value(text: &str, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let e = openmetrics_parser::prometheus::parse_prometheus(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    let f = e.families.get(family).unwrap_or_else(|| panic!("no family {family}"));
    assert_eq!(f.family_type, PrometheusType::Gauge);
    let found = f.iter_samples().find_map(|s| {
        let set = s.get_labelset().unwrap();
        let all = labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v));
        (all && f.get_label_names().len() == labels.len()).then(|| match &s.value {
            PrometheusValue::Gauge(n) => n.as_f64(),
            other => panic!("{other:?}"),
        })
    });
    found
}

both_backends! {
    fn bw_metrics_exports_pauses_and_held_jobs_apart_from_the_due_gauges_with_bounded_labels() {
        let fx = late_critical_queue();
        fx.scheduled_as("critical", "send-email", NOW - MINUTE);
        fx.scheduled("bulk", NOW - 10 * SECOND);
        let metrics = |args: &[&str]| {
            let out = fx.bw().arg("metrics").args(args).assert().success().get_output().stdout.clone();
            String::from_utf8(out).unwrap()
        };
        let text = metrics(&[]);
        assert_eq!(value(&text, "backwave_queue_due_jobs", &[("queue", "critical")]), Some(4.0));
        assert_eq!(value(&text, "backwave_queue_held_jobs", &[("queue", "critical")]), Some(0.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "queue"), ("name", "critical")]), None);

        fx.pause(PauseKind::WireName, "charge-card", None);
        fx.pause(PauseKind::Queue, "bulk", None);
        let text = metrics(&[]);
        assert_eq!(value(&text, "backwave_queue_due_jobs", &[("queue", "critical")]), Some(1.0));
        assert_eq!(value(&text, "backwave_queue_oldest_due_age_seconds", &[("queue", "critical")]), Some(60.0));
        assert_eq!(value(&text, "backwave_queue_held_jobs", &[("queue", "critical")]), Some(3.0));
        assert_eq!(value(&text, "backwave_queue_due_jobs", &[("queue", "bulk")]), Some(0.0));
        assert_eq!(value(&text, "backwave_queue_held_jobs", &[("queue", "bulk")]), Some(1.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "wire-name"), ("name", "charge-card")]), Some(1.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "queue"), ("name", "bulk")]), Some(1.0));
        assert_eq!(value(&text, "backwave_check_status", &[("check", "latency")]), Some(0.0));
        assert_eq!(value(&text, "backwave_check_status", &[("check", "forgotten-pause")]), Some(0.0));

        // Past --top, pauses are counted under (other), per kind.
        fx.pause(PauseKind::WireName, "send-email", None);
        let text = metrics(&["--top", "1"]);
        assert_eq!(value(&text, "backwave_paused", &[("kind", "wire-name"), ("name", "charge-card")]), Some(1.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "wire-name"), ("name", "(other)")]), Some(1.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "wire-name"), ("name", "send-email")]), None);
        assert_eq!(value(&text, "backwave_paused", &[("kind", "queue"), ("name", "bulk")]), Some(1.0));
        assert_eq!(value(&text, "backwave_paused", &[("kind", "queue"), ("name", "(other)")]), None);
    }
}

both_backends! {
    fn bw_stats_latency_marks_a_paused_queue_and_counts_held_jobs_apart() {
        let fx = late_critical_queue();
        fx.scheduled_as("critical", "send-email", NOW - 90 * SECOND);
        fx.scheduled("bulk", NOW - 10 * SECOND);
        fx.bw().arg("stats").assert().success().stdout(predicate::str::contains("HELD BY PAUSE").not());

        fx.pause(PauseKind::WireName, "charge-card", None);
        fx.pause(PauseKind::Queue, "bulk", None);
        fx.bw()
            .arg("stats")
            .assert()
            .success()
            .stdout(predicate::str::is_match(r"(?m)^QUEUE\s+DUE NOW\s+OLDEST WAITED\s+HELD BY PAUSE\s*$").unwrap())
            .stdout(predicate::str::is_match(r"(?m)^bulk\s+0\s+-\s+1\s+PAUSED\s*$").unwrap())
            .stdout(predicate::str::is_match(r"(?m)^critical\s+1\s+1m30s\s+3\s*$").unwrap());
        let v = json(&fx.bw().args(["--format", "json", "stats"]).assert().success().get_output().stdout.clone());
        let l = &v["latency"];
        assert_eq!((l["critical"]["due_now"].as_u64(), l["critical"]["held_by_pause"].as_u64()), (Some(1), Some(3)));
        assert_eq!(l["critical"]["oldest_due_age_seconds"], 90.0);
        assert_eq!(l["critical"]["paused"], false);
        assert_eq!((l["bulk"]["due_now"].as_u64(), l["bulk"]["held_by_pause"].as_u64()), (Some(0), Some(1)));
        assert_eq!(l["bulk"]["paused"], true);
    }
}
