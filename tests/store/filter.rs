//! The job filter on both backends: one table of filters (each field alone, combinations, odd
//! input) over one set of jobs, each row asserting which jobs match and in what order, whole and
//! walked page by page by cursor and by offset. Every row runs on SQLite and on PostgreSQL, so
//! the two compile the filter to the same answers.

use std::time::Duration;

use backwave::store::{JobFilter, Outcome};
use backwave::{JobId, JobState, NewJob, QuarantineReason};

use super::{failed, policy, Fixture, ADMIN, T0};
use crate::backend::both_backends;

/// The jobs of the table by name.
struct Jobs {
    fx: Fixture,
    named: Vec<(&'static str, JobId)>,
}

impl Jobs {
    fn id(&self, name: &str) -> JobId {
        self.named.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no job {name}")).1
    }

    fn names(&self, ids: impl IntoIterator<Item = JobId>) -> Vec<&'static str> {
        ids.into_iter()
            .map(|id| self.named.iter().find(|(_, i)| *i == id).unwrap_or_else(|| panic!("unknown job {id}")).0)
            .collect()
    }

    /// Every listing of `filter`: one page, and walked by cursor and by offset in pages of
    /// 1, 2 and 3 jobs. They must agree with each other, with the count and with `expected`.
    fn assert_lists(&self, case: &str, filter: &JobFilter, expected: &[&str]) {
        let store = &self.fx.store;
        let whole = store.list_jobs(filter, usize::MAX, 0).unwrap();
        assert_eq!(self.names(whole.jobs.iter().map(|j| j.id)), expected, "{case}: {filter:?}");
        assert_eq!(whole.total, expected.len() as u64, "{case}: total");
        assert_eq!(whole.next, None, "{case}: one page holds all");
        assert_eq!(store.count_jobs(filter).unwrap(), expected.len() as u64, "{case}: count");
        for size in 1..=3 {
            let mut walked = Vec::new();
            let mut page = store.list_jobs(filter, size, 0).unwrap();
            loop {
                assert!(page.jobs.len() <= size, "{case}: page of {size}");
                assert_eq!(page.total, expected.len() as u64, "{case}: total of a page of {size}");
                walked.extend(page.jobs.iter().map(|j| j.id));
                let Some(next) = page.next.take() else { break };
                // A cursor goes through its printed form, as `bw list --after` takes it.
                page = store.list_jobs_after(filter, size, &next.to_string().parse().unwrap()).unwrap();
            }
            assert_eq!(self.names(walked), expected, "{case}: by cursor, pages of {size}");
            let mut by_offset = Vec::new();
            for offset in (0..expected.len() as u64 + 1).step_by(size) {
                let page = store.list_jobs(filter, size, offset).unwrap();
                assert_eq!(page.offset, Some(offset));
                by_offset.extend(page.jobs.iter().map(|j| j.id));
            }
            assert_eq!(self.names(by_offset), expected, "{case}: by offset, pages of {size}");
        }
    }
}

/// `T0` plus `s` seconds.
fn at(s: i64) -> i64 {
    T0 + s * 1000
}

/// A job to make: name, wire name, queue, labels, due time.
type Made = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static str)], Option<i64>);

/// Ten jobs in every state. The clock moves one second before each step: the jobs are created
/// at seconds 1 to 10 in the order below, and move on at 11 to 18, so no two times tie.
/// Finished: cancelled 11, ok 12, dead-smtp 13, dead-SMTP 14, dead-odd 15, quar-body 16,
/// quar-nohandler 17; running claimed at 18; the two scheduled ones are due in an hour and two.
fn jobs() -> Jobs {
    let fx = Fixture::new();
    let mut named = Vec::new();
    let later = |h: i64| Some(T0 + h * 3_600_000);
    let made: [Made; 10] = [
        ("sched-mail", "send-email", "mail", &[("tenant", "acme")], later(1)),
        ("sched-media", "resize", "media", &[("tenant", "Ünïcode"), ("size", "50%")], later(2)),
        ("ok", "resize", "media", &[("tenant", "acme")], None),
        ("dead-smtp", "send-email", "mail", &[("tenant", "acme")], None),
        ("dead-SMTP", "send-email", "mail", &[("odd\"key\\", "v_1")], None),
        ("dead-odd", "resize", "media", &[], None),
        ("quar-body", "resize", "media", &[], None),
        ("quar-nohandler", "lost", "media", &[], None),
        ("running", "send-email", "mail", &[], None),
        ("cancelled", "send-email", "mail", &[], None),
    ];
    for (name, wire, queue, labels, due) in made {
        fx.clock.advance(Duration::from_secs(1));
        let mut job = NewJob::new(wire, queue, br#"{"n":1}"#.to_vec());
        for (k, v) in labels {
            job = job.label(*k, *v);
        }
        if let Some(due) = due {
            job = job.due_at(due);
        }
        named.push((name, fx.store.enqueue(&job).unwrap()));
    }
    let jobs = Jobs { fx, named };
    let fx = &jobs.fx;
    fx.clock.advance(Duration::from_secs(1));
    fx.store.cancel(ADMIN, &[jobs.id("cancelled")]).unwrap();
    // A claim takes its queue's earliest due job: the jobs move in the order they were made.
    let once = policy(1, Duration::from_secs(1));
    let moves: [(&str, &str, Option<Outcome>); 7] = [
        ("media", "ok", Some(Outcome::Succeeded)),
        ("mail", "dead-smtp", Some(failed("SMTP 50% refused (attempt 1)"))),
        ("mail", "dead-SMTP", Some(failed("smtp 50% REFUSED (attempt 1)"))),
        ("media", "dead-odd", Some(failed("Ünïcode façade 'quoted' under_score"))),
        (
            "media",
            "quar-body",
            Some(Outcome::Quarantined { reason: QuarantineReason::UndecodablePayload, cause: "bad json".into() }),
        ),
        (
            "media",
            "quar-nohandler",
            Some(Outcome::Quarantined { reason: QuarantineReason::NoHandler, cause: "nobody handles lost".into() }),
        ),
        ("mail", "running", None),
    ];
    for (queue, name, outcome) in moves {
        fx.clock.advance(Duration::from_secs(1));
        let job = fx.claim_one(queue, &once);
        assert_eq!(job.id, jobs.id(name), "claimed {name}");
        if let Some(outcome) = outcome {
            fx.report(&job, outcome);
        }
    }
    let state = |name| fx.job(jobs.id(name)).state;
    assert_eq!(state("cancelled"), JobState::Cancelled);
    assert_eq!(state("dead-odd"), JobState::DeadLettered);
    assert_eq!(state("running"), JobState::Running);
    jobs
}

fn states(states: &[JobState]) -> JobFilter {
    JobFilter { states: states.to_vec(), ..Default::default() }
}

fn labels(pairs: &[(&str, &str)]) -> JobFilter {
    JobFilter { labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..Default::default() }
}

fn cause(c: &str) -> JobFilter {
    JobFilter { cause: Some(c.into()), ..Default::default() }
}

fn text(t: &str) -> JobFilter {
    JobFilter { text: Some(t.into()), ..Default::default() }
}

/// Every job, the most recently changed first.
const BY_UPDATE: [&str; 10] = [
    "running",
    "quar-nohandler",
    "quar-body",
    "dead-odd",
    "dead-SMTP",
    "dead-smtp",
    "ok",
    "cancelled",
    "sched-media",
    "sched-mail",
];

both_backends! {
    fn each_filter_lists_the_same_jobs_in_the_same_order_whole_and_by_page() {
        use JobState::*;
        let jobs = jobs();
        let fingerprint = jobs.fx.job(jobs.id("dead-odd")).cause_fingerprint.expect("a dead-lettered job has one");
        let ok_id = jobs.id("ok").to_string();
        let table: Vec<(&str, JobFilter, Vec<&str>)> = vec![
            ("everything", JobFilter::default(), BY_UPDATE.to_vec()),
            // States, and the order each set of states lists in.
            ("scheduled: next due first", states(&[Scheduled]), vec!["sched-mail", "sched-media"]),
            ("running", states(&[Running]), vec!["running"]),
            ("active: next due first", states(&[Scheduled, Running]), vec!["running", "sched-mail", "sched-media"]),
            ("succeeded", states(&[Succeeded]), vec!["ok"]),
            ("cancelled", states(&[Cancelled]), vec!["cancelled"]),
            (
                "failed: last finished first",
                states(&[DeadLettered, Quarantined]),
                vec!["quar-nohandler", "quar-body", "dead-odd", "dead-SMTP", "dead-smtp"],
            ),
            (
                "terminal",
                states(&[Succeeded, Cancelled, DeadLettered]),
                vec!["dead-odd", "dead-SMTP", "dead-smtp", "ok", "cancelled"],
            ),
            ("mixed: last changed first", states(&[Scheduled, Succeeded]), vec!["ok", "sched-media", "sched-mail"]),
            // Exact matches: no pattern characters, no case folding.
            (
                "queue",
                JobFilter { queue: Some("mail".into()), ..Default::default() },
                vec!["running", "dead-SMTP", "dead-smtp", "cancelled", "sched-mail"],
            ),
            ("queue in capitals", JobFilter { queue: Some("MAIL".into()), ..Default::default() }, vec![]),
            ("queue %", JobFilter { queue: Some("%".into()), ..Default::default() }, vec![]),
            ("queue with _", JobFilter { queue: Some("mai_".into()), ..Default::default() }, vec![]),
            (
                "wire name",
                JobFilter { wire_name: Some("resize".into()), ..Default::default() },
                vec!["quar-body", "dead-odd", "ok", "sched-media"],
            ),
            ("fingerprint", JobFilter { fingerprint: Some(fingerprint), ..Default::default() }, vec!["dead-odd"]),
            (
                "quarantine reason",
                JobFilter { quarantine_reason: Some(QuarantineReason::UndecodablePayload), ..Default::default() },
                vec!["quar-body"],
            ),
            (
                "quarantine reason and state",
                JobFilter { quarantine_reason: Some(QuarantineReason::NoHandler), ..states(&[Quarantined]) },
                vec!["quar-nohandler"],
            ),
            // Labels.
            ("label", labels(&[("tenant", "acme")]), vec!["dead-smtp", "ok", "sched-mail"]),
            ("label in unicode", labels(&[("tenant", "Ünïcode")]), vec!["sched-media"]),
            ("label value in another case", labels(&[("tenant", "ünïcode")]), vec![]),
            ("label key with a quote and a backslash", labels(&[("odd\"key\\", "v_1")]), vec!["dead-SMTP"]),
            ("two labels", labels(&[("tenant", "Ünïcode"), ("size", "50%")]), vec!["sched-media"]),
            ("two labels, one missing", labels(&[("tenant", "acme"), ("size", "50%")]), vec![]),
            ("label value %", labels(&[("tenant", "acm%")]), vec![]),
            ("label value with _", labels(&[("size", "50_")]), vec![]),
            ("label key with _", labels(&[("tenan_", "acme")]), vec![]),
            // The terminal cause: a substring, ASCII letters in either case.
            ("cause", cause("refused"), vec!["dead-SMTP", "dead-smtp"]),
            ("cause in capitals", cause("REFUSED"), vec!["dead-SMTP", "dead-smtp"]),
            ("cause %", cause("50%"), vec!["dead-SMTP", "dead-smtp"]),
            ("cause %, not a pattern", cause("5%"), vec![]),
            ("cause _, not a pattern", cause("d_r"), vec![]),
            ("cause _", cause("under_score"), vec!["dead-odd"]),
            ("cause quotes", cause("'quoted'"), vec!["dead-odd"]),
            ("cause unicode", cause("Ünïcode"), vec!["dead-odd"]),
            ("cause unicode: only ASCII letters fold", cause("ünïcode"), vec![]),
            ("cause unicode, ASCII letters in capitals", cause("FAçADE"), vec!["dead-odd"]),
            // The text search: id, wire name, queue, labels, cause.
            ("text in labels", text("acme"), vec!["dead-smtp", "ok", "sched-mail"]),
            ("text in queue and wire name", text("MAIL"), vec!["running", "dead-SMTP", "dead-smtp", "cancelled", "sched-mail"]),
            ("text id", text(&ok_id), vec!["ok"]),
            ("text id in capitals", text(&ok_id.to_uppercase()), vec!["ok"]),
            ("text %", text("%"), vec!["dead-SMTP", "dead-smtp", "sched-media"]),
            ("text _", text("v_1"), vec!["dead-SMTP"]),
            ("text _, not a pattern", text("v_2"), vec![]),
            ("text double quote", text("\""), vec!["dead-SMTP", "dead-smtp", "ok", "sched-media", "sched-mail"]),
            ("text single quote", text("'"), vec!["dead-odd"]),
            ("text backslash", text("key\\"), vec!["dead-SMTP"]),
            ("text unicode in a label and a cause", text("ÜNïCODE"), vec!["dead-odd", "sched-media"]),
            ("text cause", text("nobody"), vec!["quar-nohandler"]),
            // Times: created for a listing by change or due time, finished for terminal jobs.
            ("since: created", JobFilter { since: Some(at(9)), ..Default::default() }, vec!["running", "cancelled"]),
            ("before: created", JobFilter { before: Some(at(3)), ..Default::default() }, vec!["sched-media", "sched-mail"]),
            (
                "since and before: created",
                JobFilter { since: Some(at(3)), before: Some(at(5)), ..Default::default() },
                vec!["dead-smtp", "ok"],
            ),
            (
                "since: finished",
                JobFilter { since: Some(at(14)), ..states(&[DeadLettered]) },
                vec!["dead-odd", "dead-SMTP"],
            ),
            (
                "before: finished",
                JobFilter { before: Some(at(13)), ..states(&[Succeeded, Cancelled, DeadLettered]) },
                vec!["ok", "cancelled"],
            ),
            (
                "finished before",
                JobFilter { finished_before: Some(at(13)), ..Default::default() },
                vec!["ok", "cancelled"],
            ),
            // Combinations.
            (
                "state, queue, cause and time",
                JobFilter {
                    queue: Some("mail".into()),
                    cause: Some("refused".into()),
                    since: Some(at(14)),
                    ..states(&[DeadLettered])
                },
                vec!["dead-SMTP"],
            ),
            (
                "active in one queue",
                JobFilter { queue: Some("mail".into()), ..states(&[Scheduled, Running]) },
                vec!["running", "sched-mail"],
            ),
            (
                "text and wire name",
                JobFilter { text: Some("acme".into()), wire_name: Some("resize".into()), ..Default::default() },
                vec!["ok"],
            ),
            (
                "label and text",
                JobFilter { text: Some("refused".into()), ..labels(&[("tenant", "acme")]) },
                vec!["dead-smtp"],
            ),
            (
                "failed, one reason",
                JobFilter { quarantine_reason: Some(QuarantineReason::NoHandler), ..states(&[DeadLettered, Quarantined]) },
                vec!["quar-nohandler"],
            ),
        ];
        for (case, filter, expected) in &table {
            jobs.assert_lists(case, filter, expected);
        }
    }

    fn a_cursor_past_the_last_job_lists_nothing() {
        let jobs = jobs();
        let all = JobFilter::default();
        let last = jobs.fx.job(jobs.id("sched-mail"));
        let after = backwave::store::Cursor { key: last.updated_at, id: last.id };
        let page = jobs.fx.store.list_jobs_after(&all, 5, &after).unwrap();
        assert!(page.jobs.is_empty(), "{:?}", page.jobs.iter().map(|j| j.id).collect::<Vec<_>>());
        assert_eq!((page.total, page.next), (10, None));
    }
}
