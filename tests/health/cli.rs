//! `bw check` and `bw stats`' latency as a monitor and an operator meet them: exit statuses,
//! the first line, the JSON document (parsed, never matched as text).

use predicates::prelude::*;
use serde_json::Value;

use crate::backend::both_backends;
use crate::health::fixture::*;

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

both_backends! {
    fn bw_check_exits_0_on_a_store_with_nothing_wrong() {
        let fx = Fx::new();
        fx.worker("w1", &["high"], &["send-email"], NOW);
        fx.scheduled("high", NOW - 10 * SECOND);
        fx.bw().arg("check").assert().code(0).stdout(predicate::str::starts_with("BACKWAVE OK: all 10 checks pass\n"));
    }
}

both_backends! {
    fn bw_check_exits_1_on_a_warning_and_2_on_a_critical() {
        let fx = Fx::new();
        fx.worker("w1", &["default"], &["send-email"], NOW);
        fx.dead("charge-card", "card processor returned 502", NOW - 5 * MINUTE);
        fx.bw()
            .arg("check")
            .assert()
            .code(1)
            .stdout(predicate::str::starts_with("BACKWAVE WARNING: new-cause\n"))
            .stdout(predicate::str::contains("card processor returned 502"));
        // The same store judged with a looser threshold passes.
        fx.bw().args(["check", "--max-new-causes", "1"]).assert().code(0);

        fx.scheduled("default", NOW - 20 * MINUTE);
        fx.bw()
            .arg("check")
            .assert()
            .code(2)
            .stdout(predicate::str::starts_with("BACKWAVE CRITICAL: latency, new-cause\n"));
        fx.bw().args(["check", "--max-latency", "30m", "--max-new-causes", "1"]).assert().code(0);
        // A queue left out on purpose is not judged for latency.
        fx.bw().args(["check", "--exclude-queue", "default", "--max-new-causes", "1"]).assert().code(0);
    }
}

both_backends! {
    fn bw_check_json_has_one_entry_per_check_with_name_status_value_threshold_and_message() {
        let fx = Fx::new();
        fx.scheduled("bulk", NOW - 10 * MINUTE);
        let out = fx.bw().args(["--format", "json", "check"]).assert().code(2).get_output().stdout.clone();
        let v = json(&out);
        assert_eq!(v["status"], "critical");
        assert_eq!(v["exit_code"], 2);
        assert_eq!(v["at"], "2026-11-30T12:00:00.000Z");
        let checks = v["checks"].as_array().unwrap();
        let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "latency",
                "unworked-queue",
                "dead-lettered",
                "new-cause",
                "unhandled-quarantine",
                "stale-workers",
                "forgotten-pause",
                "quiet-worker",
                "overdue-schedule",
                "stuck-workflow"
            ]
        );
        for c in checks {
            let mut keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(keys, ["message", "name", "status", "threshold", "unit", "value"], "{c}");
            assert!(c["value"].is_number() && c["threshold"].is_number() && c["message"].is_string());
        }
        assert_eq!(checks[0]["status"], "critical");
        assert_eq!(checks[0]["value"], 600.0);
        assert_eq!(checks[0]["threshold"], 300.0);
        assert_eq!(checks[0]["unit"], "seconds");
        assert_eq!(checks[1]["status"], "critical", "no live worker serves bulk");
        assert_eq!(v["queues"][0]["queue"], "bulk");
        assert_eq!(v["queues"][0]["due_now"], 1);
        assert_eq!(v["queues"][0]["oldest_due_age_seconds"], 600.0);
    }
}

#[test]
fn bw_check_on_a_missing_store_exits_3_unknown() {
    let fx = Fx::new();
    let missing = fx.dir().join("nowhere.db");
    fx.bw().env("BW_DB", &missing).arg("check").assert().code(3).stderr(predicate::str::contains("no BackWave store"));
    // A monitor reads stdout (found at 3 a.m.: it was empty, and the cron recipe of docs/alerting.md mailed
    // a blank subject): the UNKNOWN verdict is its first line, or the JSON document's status.
    let out = fx.bw().env("BW_DB", &missing).arg("check").assert().code(3).get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("BACKWAVE UNKNOWN: no BackWave store at '"), "{out}");
    let out =
        fx.bw().env("BW_DB", &missing).args(["check", "--format", "json"]).assert().code(3).get_output().stdout.clone();
    let doc = json(&out);
    assert_eq!((doc["status"].as_str(), doc["exit_code"].as_u64()), (Some("unknown"), Some(3)), "{doc}");
    assert!(doc["error"].as_str().unwrap().contains("no BackWave store"), "{doc}");
}

both_backends! {
    fn bw_check_refuses_a_malformed_threshold_quoting_it() {
        let fx = Fx::new();
        fx.bw()
            .args(["check", "--max-latency", "soon"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains("'soon' is not a duration"));
    }
}

both_backends! {
    fn bw_stats_shows_queue_latency_in_its_table_and_json() {
        let fx = Fx::new();
        fx.scheduled("high", NOW - 90 * SECOND);
        fx.scheduled("high", NOW - 10 * SECOND);
        fx.scheduled("high", NOW + HOUR);
        fx.scheduled("low", NOW + HOUR);
        fx.bw()
            .arg("stats")
            .assert()
            .success()
            .stdout(predicate::str::contains("Due now, waiting for a worker (queue latency):"))
            .stdout(predicate::str::is_match(r"(?m)^high\s+2\s+1m30s\s*$").unwrap())
            .stdout(predicate::str::is_match(r"(?m)^low\s").unwrap().count(1));
        let v = json(&fx.bw().args(["--format", "json", "stats"]).assert().success().get_output().stdout.clone());
        assert_eq!(v["latency"]["high"]["due_now"], 2);
        assert_eq!(v["latency"]["high"]["oldest_due_at"], "2026-11-30T11:58:30.000Z");
        assert_eq!(v["latency"]["high"]["oldest_due_age_seconds"], 90.0);
        assert_eq!(v["latency"]["low"]["due_now"], 0);
        assert_eq!(v["latency"]["low"]["oldest_due_at"], Value::Null);
    }
}

both_backends! {
    fn hostile_text_in_the_store_reaches_neither_check_nor_metrics_output_raw() {
        let fx = Fx::new();
        crate::backend::load_sqlite_fixture(&fx.db, include_str!("../../fixtures/hostile.sql"));
        let raw = |c: char| (c.is_control() && c != '\n') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        for args in [&["check"][..], &["--format", "json", "check"], &["metrics"]] {
            let out = fx.bw().args(args).output().unwrap();
            assert!(matches!(out.status.code(), Some(0..=2)), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8(out.stdout).unwrap();
            assert!(text.contains("legacy-report"), "{args:?} did not read the fixture:\n{text}");
            assert!(!text.chars().any(raw), "{args:?} printed database text raw:\n{text}");
        }
    }
}

both_backends! {
    fn bw_metrics_listen_on_an_address_in_use_exits_2_naming_it() {
        let fx = Fx::new();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        fx.bw()
            .args(["metrics", "--listen", &addr])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("cannot listen on '{addr}'")));
        fx.bw()
            .args(["metrics", "--listen", "localhost:http"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("'localhost:http'"));
    }
}
