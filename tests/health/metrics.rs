//! `bw metrics`: the exposition read back by a real parser (escapes, families, label sets), the
//! bound on label cardinality, and `--listen` scraped over loopback by a real HTTP client.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};
use predicates::prelude::*;

use crate::backend::both_backends;
use crate::health::fixture::*;

type Exposition = MetricsExposition<PrometheusType, PrometheusValue>;

fn parse(text: &str) -> Exposition {
    openmetrics_parser::prometheus::parse_prometheus(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
}

/// The value of the sample of `family` whose labels are exactly `labels`.
fn value(e: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let f = e.families.get(family).unwrap_or_else(|| panic!("no family {family}"));
    f.iter_samples().find_map(|s| {
        let set = s.get_labelset().unwrap();
        let all = labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v));
        (all && f.get_label_names().len() == labels.len()).then(|| match &s.value {
            PrometheusValue::Gauge(n) | PrometheusValue::Unknown(n) => n.as_f64(),
            PrometheusValue::Counter(c) => c.value.as_f64(),
            other => panic!("{other:?}"),
        })
    })
}

fn samples(e: &Exposition, family: &str) -> usize {
    e.families.get(family).map_or(0, |f| f.iter_samples().count())
}

both_backends! {
    fn bw_metrics_prints_the_same_facts_as_check_and_escapes_database_text() {
        let fx = Fx::new();
        fx.worker("w1", &["high"], &["send-email"], NOW);
        fx.worker("w2", &["high"], &["send-email"], NOW - HOUR);
        fx.scheduled("high", NOW - 2 * MINUTE);
        fx.scheduled("high", NOW + HOUR);
        let hostile = "evil\"wire\\name\nnext, with=signs} \u{1b}]0;pwned\u{7}\u{202e}";
        fx.dead(hostile, "it said \"no\" \\ twice", NOW - 5 * MINUTE);
        fx.dead("charge-card", "gateway timeout", NOW - 2 * HOUR);
        fx.quarantined("legacy-report", NOW - MINUTE);
        let out = fx.bw().arg("metrics").assert().success().get_output().stdout.clone();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.chars().any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "database text reached the exposition raw"
        );
        let e = parse(&text);

        assert_eq!(value(&e, "backwave_jobs", &[("queue", "high"), ("state", "scheduled")]), Some(2.0));
        assert_eq!(value(&e, "backwave_jobs", &[("queue", "default"), ("state", "dead-lettered")]), Some(2.0));
        assert_eq!(value(&e, "backwave_queue_due_jobs", &[("queue", "high")]), Some(1.0));
        assert_eq!(value(&e, "backwave_queue_oldest_due_age_seconds", &[("queue", "high")]), Some(120.0));
        assert_eq!(value(&e, "backwave_queue_live_workers", &[("queue", "high")]), Some(1.0));
        // Quotes, backslashes and '=' ',' '}' come back exactly through the parser; the newline,
        // the terminal escape and the bidi override come back as the visible escapes `bw` prints.
        let shown = r#"evil"wire\name\nnext, with=signs} \e]0;pwned\x07\u{202e}"#;
        let fp = backwave::cause_fingerprint("it said \"no\" \\ twice");
        assert_eq!(value(&e, "backwave_dead_lettered_jobs", &[("wire_name", shown), ("cause", &fp)]), Some(1.0));
        assert_eq!(value(&e, "backwave_dead_lettered_recent_jobs", &[]), Some(1.0));
        assert_eq!(value(&e, "backwave_new_causes", &[]), Some(1.0));
        assert_eq!(
            value(&e, "backwave_quarantined_jobs", &[("wire_name", "legacy-report"), ("reason", "no-handler")]),
            Some(1.0)
        );
        assert_eq!(value(&e, "backwave_workers", &[("status", "live")]), Some(1.0));
        assert_eq!(value(&e, "backwave_workers", &[("status", "stale")]), Some(1.0));
        assert_eq!(value(&e, "backwave_check_status", &[("check", "new-cause")]), Some(1.0));
        assert_eq!(value(&e, "backwave_check_status", &[("check", "latency")]), Some(0.0));
        assert_eq!(e.families["backwave_log_entries_total"].family_type, PrometheusType::Counter);
        assert!(!e.families.contains_key("backwave_transitions_total"), "a one-shot print has nothing to count from");
    }
}

both_backends! {
    fn dead_letter_and_quarantine_labels_are_bounded_by_top_with_the_rest_summed_as_other() {
        let fx = Fx::new();
        for i in 0..30 {
            // Thirty distinct wire names: thirty cause groups.
            for _ in 0..=i {
                fx.dead(&format!("job-{i:02}"), "boom", NOW - 2 * HOUR);
            }
        }
        let out = fx.bw().args(["metrics", "--top", "5"]).assert().success().get_output().stdout.clone();
        let e = parse(&String::from_utf8(out).unwrap());
        assert_eq!(samples(&e, "backwave_dead_lettered_jobs"), 6);
        assert_eq!(value(&e, "backwave_dead_lettered_jobs", &[("wire_name", "job-29"), ("cause", "boom")]), Some(30.0));
        // 1 + 2 + … + 25: the groups past the largest five.
        assert_eq!(
            value(&e, "backwave_dead_lettered_jobs", &[("wire_name", "(other)"), ("cause", "(other)")]),
            Some(325.0)
        );
    }
}

both_backends! {
    fn bw_metrics_refuses_json_output() {
        let fx = Fx::new();
        fx.bw()
            .args(["--format", "json", "metrics"])
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains("Prometheus text format"));
    }
}

/// `bw metrics --listen` on a free loopback port over `db`: the child, its stderr after the line
/// that announced the URL, and the URL to scrape.
fn listen(db: &std::ffi::OsStr) -> (std::process::Child, BufReader<std::process::ChildStderr>, String) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw"))
        .env("BW_DB", db)
        .env("BW_NOW", NOW_TEXT)
        .args(["metrics", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://127.0.0.1:")).unwrap_or_else(|| panic!("{line}"));
    (child, stderr, url.to_string())
}

both_backends! {
    fn bw_metrics_listen_serves_scrapes_over_loopback_and_sigterm_ends_it_with_status_0() {
        let fx = Fx::new();
        fx.worker("w1", &["high"], &["send-email"], NOW);
        let job = fx.scheduled("high", NOW - MINUTE);
        let (mut child, mut stderr, url) = listen(fx.db.as_ref());
        assert!(url.ends_with("/metrics"), "{url}");

        let agent = ureq::Agent::new_with_defaults();
        let scrape = || {
            let mut response = agent.get(&url).call().unwrap();
            assert_eq!(response.status(), 200);
            let kind = response.headers().get("content-type").unwrap().to_str().unwrap().to_string();
            assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
            parse(&response.body_mut().read_to_string().unwrap())
        };
        let e = scrape();
        assert_eq!(value(&e, "backwave_queue_due_jobs", &[("queue", "high")]), Some(1.0));
        assert!(value(&e, "backwave_scrape_duration_seconds", &[]).is_some());
        assert_eq!(value(&e, "backwave_transitions_total", &[("to_state", "running")]), Some(0.0));

        // A transition appended between scrapes is counted by the next one.
        fx.store
            .raw_execute(
                &format!("INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ('{job}', {NOW}, 'running', 1)"),
                &[],
            )
            .unwrap();
        let e = scrape();
        assert_eq!(value(&e, "backwave_transitions_total", &[("to_state", "running")]), Some(1.0));
        assert_eq!(value(&e, "backwave_log_entries_total", &[]), Some(1.0));

        let base = url.trim_end_matches("/metrics");
        match agent.get(&format!("{base}/admin")).call() {
            Err(ureq::Error::StatusCode(404)) => {}
            other => panic!("{other:?}"),
        }

        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "bw metrics --listen ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
        let mut rest = String::new();
        stderr.read_line(&mut rest).unwrap();
        assert_eq!(rest.trim(), "bw metrics: stopped");
    }
}

/// A store file at `path` with `due` Scheduled jobs of queue `high`, closed (its WAL folded in):
/// a file as a backup leaves it.
fn store_file(path: &std::path::Path, due: usize) {
    let store = backwave::Store::create(path).unwrap();
    for n in 0..due {
        store
            .raw_execute(
                &format!(
                    "INSERT INTO jobs (id, wire_name, queue, state, due_at, created_at, updated_at)
                     VALUES ('00000000-0000-7000-8000-{n:012x}', 'send-email', 'high', 'scheduled', {t}, {t}, {t})",
                    t = NOW - MINUTE
                ),
                &[],
            )
            .unwrap();
    }
}

/// SQLite only: a file is what can be removed, or replaced by a rename, under a running exporter
/// (a PostgreSQL store's connection is replaced on a break; see tests/faults for restarts).
#[test]
fn bw_metrics_listen_answers_503_for_a_removed_store_and_reads_the_file_renamed_into_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    store_file(&db, 1);
    let (mut child, mut stderr, url) = listen(db.as_ref());
    let url = url.as_str();
    let agent = ureq::Agent::new_with_defaults();
    // The due count of a scrape answered 200, or the status and body of any other answer.
    let scrape = || -> Result<f64, (u16, String)> {
        match agent.get(url).config().http_status_as_error(false).build().call() {
            Ok(mut r) if r.status() == 200 => {
                let e = parse(&r.body_mut().read_to_string().unwrap());
                Ok(value(&e, "backwave_queue_due_jobs", &[("queue", "high")]).unwrap_or(0.0))
            }
            Ok(mut r) => Err((r.status().as_u16(), r.body_mut().read_to_string().unwrap())),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(scrape(), Ok(1.0));

    // Regression: removed, the file went on answering 200 with its last figures.
    std::fs::remove_file(&db).unwrap();
    let (status, body) = scrape().unwrap_err();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("live.db"), "{body}");
    assert_eq!(scrape().unwrap_err().0, 503, "still gone, still 503");

    // A backup renamed into the place: the next scrape reads it.
    let backup = dir.path().join("backup.db");
    store_file(&backup, 3);
    std::fs::rename(&backup, &db).unwrap();
    assert_eq!(scrape(), Ok(3.0));

    // Replaced by a rename while the exporter has it open: the figures follow the new file.
    store_file(&backup, 2);
    std::fs::rename(&backup, &db).unwrap();
    assert_eq!(scrape(), Ok(2.0));
    assert_eq!(scrape(), Ok(2.0));

    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("live.db' was removed; reopening it"), "{rest}");
    assert!(rest.contains("live.db' was replaced by another file"), "{rest}");
}
