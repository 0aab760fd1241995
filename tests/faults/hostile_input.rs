//! Hostile input to every parser an operator or a stored row can reach: id prefixes, durations,
//! instants, states, the dashboard's `/` filter, retry curves. None may panic; a refusal is an
//! error that quotes what it refused. (The same parsers are fuzzed without limits by the
//! cargo-fuzz targets in `fuzz/`.)

use std::time::Duration;

use backwave::{Backoff, Error, JobState, NewJob, RetryPolicy, Store};
use bw::cli::{parse_duration, parse_instant, parse_when};
use bw::tui::filter::Filter;
use proptest::prelude::*;

use crate::backend::{both_backends, TestDb};

const NOW: i64 = 1_800_000_000_000;

/// Text an operator might type or paste: arbitrary Unicode, and near-misses of each grammar.
fn typed() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9a-fA-F-]{0,40}",
        "[ \t]*[0-9]{1,25}[ ]?(ns|us|ms|s|m|h|d|w|y|months|years|)[ \t]*",
        "[0-9]{1,4}-[0-9]{1,2}-[0-9]{1,2}[T ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2})?",
        "-?[0-9]{1,30}",
        "(wire|queue|cause|since|colour|WIRE):[\"a-z0-9 ]{0,12}( [a-z]{0,6}){0,3}",
        "since:[0-9]{1,22}(y|d|ms|s)",
        "(dead|Dead|DEAD)[-_ ]?(lettered|Lettered)?|scheduled|running|\u{0}|succeeded\u{202e}",
    ]
}

fn quotes(err: &str, input: &str) -> bool {
    err.contains(input) || err.contains(input.trim())
}

proptest! {
    #[test]
    fn duration_parser_never_panics_and_quotes_what_it_refuses(s in typed()) {
        if let Err(e) = parse_duration(&s) {
            prop_assert!(quotes(&e, &s), "{e:?} does not quote {s:?}");
        }
    }

    #[test]
    fn instant_parser_never_panics_and_quotes_what_it_refuses(s in typed()) {
        if let Err(e) = parse_instant(&s) {
            prop_assert!(quotes(&e, &s), "{e:?} does not quote {s:?}");
        }
        if let Ok(when) = parse_when(&s) {
            let _ = when.resolve(NOW);
        }
    }

    #[test]
    fn state_parser_accepts_the_six_spellings_only(s in typed()) {
        match s.parse::<JobState>() {
            Ok(state) => {
                let norm = s.trim().to_ascii_lowercase().replace(['_', ' '], "-");
                prop_assert!(norm == state.as_str() || norm == "deadlettered", "{s:?} parsed as {state}");
            }
            Err(e) => prop_assert!(quotes(&e.to_string(), &s) && e.to_string().contains("dead-lettered")),
        }
    }

    #[test]
    fn dashboard_filter_never_panics(s in typed()) {
        match Filter::parse(&s, NOW) {
            Ok(f) => {
                // Whatever parsed can be turned into a store filter and a log match.
                let _ = f.job_filter(JobState::DeadLettered);
                let _ = f.check_log();
            }
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn retry_curves_never_panic(
        secs in prop_oneof![0..10u64, any::<u64>()],
        nanos in 0..1_000_000_000u32,
        n in any::<u32>(),
        seed in any::<u64>(),
        jitter in prop_oneof![0.0..=1.0f64, any::<f64>()],
        cap in proptest::option::of(any::<u64>()),
        shape in 0..3u8,
    ) {
        let interval = Duration::new(secs, nanos);
        let mut b = match shape {
            0 => Backoff::fixed(interval),
            1 => Backoff::linear(interval),
            _ => Backoff::exponential(interval),
        }
        .jitter(jitter);
        if let Some(c) = cap {
            b = b.cap(Duration::from_millis(c));
        }
        let _ = b.delay(n);
        if b.validate().is_ok() {
            let d = b.delay_with_seed(n, seed);
            if let Some(c) = cap {
                prop_assert!(d <= Duration::from_millis(c));
            }
            if let Ok(p) = RetryPolicy::new(n % 40 + 1, b) {
                prop_assert_eq!(p.delay_table(seed).len() as u32, n % 40);
            }
        } else {
            prop_assert!(!(0.0..=1.0).contains(&jitter));
        }
    }
}

/// One store for the resolver cases (opening one per case would dominate the run).
/// Twenty jobs on the test's backend. Bound in this order, the store is dropped before its
/// schema, and the schema before the folder.
fn resolver_store() -> (tempfile::TempDir, TestDb, Store, Vec<backwave::JobId>) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::named(dir.path(), "ids.db");
    let store = Store::create(&db).unwrap();
    let ids = store.enqueue_many(&(0..20).map(|_| NewJob::new("w", "q", "{}")).collect::<Vec<_>>()).unwrap();
    (dir, db, store, ids)
}

both_backends! {
    fn id_resolver_never_panics_and_quotes_what_it_refuses() {
        let (_dir, _db, store, ids) = resolver_store();
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&typed(), |s| {
                match store.resolve_id(&s) {
                    Ok(id) => {
                        let hex: String = s.trim().chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
                        // A prefix of the id, or (short ids, up to 12 hex digits) its random tail.
                        let simple = id.0.simple().to_string();
                        prop_assert!(
                            simple.starts_with(&hex) || (hex.len() <= 12 && simple.ends_with(&hex)),
                            "{s:?} resolved to {id}"
                        );
                        prop_assert!(ids.contains(&id));
                    }
                    Err(e @ (Error::InvalidInput(_) | Error::JobNotFound(_) | Error::AmbiguousId { .. })) => {
                        prop_assert!(quotes(&e.to_string(), &s), "{e} does not quote {s:?}");
                    }
                    Err(e) => prop_assert!(false, "unexpected error kind for {s:?}: {e:?}"),
                }
                Ok(())
            })
            .unwrap();
        // Every full id, and every id with its hyphens dropped or upper-cased, resolves to itself.
        for id in &ids {
            assert_eq!(store.resolve_id(&id.to_string()).unwrap(), *id);
            assert_eq!(store.resolve_id(&id.0.simple().to_string().to_uppercase()).unwrap(), *id);
        }
    }
}

/// Found by these tests: `since:` (the dashboard) and `--before` (the CLI) with a duration longer
/// than the epoch is old (a typo such as `since:300000000y`) cast the milliseconds to i64, which
/// wraps negative, so "since 300 million years ago" became an instant far in the future and the
/// filter silently matched nothing.
#[test]
fn filter_since_with_an_enormous_duration_is_refused_or_clamped_not_a_panic() {
    match parse_when("300000000y") {
        Ok(when) => {
            assert!(when.resolve(NOW) <= NOW, "--before 300000000y resolved to {}, after now", when.resolve(NOW))
        }
        Err(e) => assert!(e.contains("'300000000y'"), "{e}"),
    }
    for s in ["since:300000000y", "since:18446744073709551615s", "since:99999999999999999d"] {
        let r = std::panic::catch_unwind(|| Filter::parse(s, NOW));
        assert!(r.is_ok(), "Filter::parse({s:?}) panicked");
        if let Ok(Ok(f)) = r {
            let (_, at) = f.since.unwrap();
            assert!(at <= NOW, "{s} resolved to {at}, after now");
        }
    }
}

both_backends! {
    /// Tables print `JobId::short()` (`0192f3a1`) and `bw requeue 0192f3a1` takes it back. Ids are
    /// UUID v7: their first 8 hex digits are the top of a millisecond timestamp, shared by every job
    /// created in the same ~65 seconds, so the short id of a job shown in a table must still name
    /// that one job when it has neighbours.
    fn short_id_shown_in_tables_resolves_to_its_job() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::named(dir.path(), "short.db");
        let store = Store::create(&db).unwrap();
        let a = store.enqueue(&NewJob::new("w", "q", "{}")).unwrap();
        let b = store.enqueue(&NewJob::new("w", "q", "{}")).unwrap();
        for id in [a, b] {
            match store.resolve_id(&id.short()) {
                Ok(found) => assert_eq!(found, id),
                Err(e) => panic!("the short id {} shown for {id} does not resolve: {e}", id.short()),
            }
        }
    }
}
