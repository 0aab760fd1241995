//! The transition log read by cursor, as `bw log tail --follow`, the dashboard and `bw metrics`
//! read it: every entry once, in cursor order, from any point. On SQLite every xid is 0.

use std::time::Duration;

use backwave::store::{LogFilter, TransitionCounter};
use backwave::{JobId, JobState, LogCursor, Transition};

use super::{Fixture, T0};
use crate::backend::both_backends;

/// Everything after `from`, polled `limit` at a time the way a follower does.
fn follow(fx: &Fixture, from: LogCursor, limit: usize) -> Vec<Transition> {
    let mut seen = Vec::new();
    let mut cursor = from;
    loop {
        let batch = fx.store.log_after(&LogFilter::default(), cursor, limit).unwrap();
        let Some(last) = batch.last() else { return seen };
        cursor = last.cursor();
        seen.extend(batch);
    }
}

both_backends! {
    fn an_empty_log_ends_and_starts_at_the_zero_cursor() {
        let fx = Fixture::new();
        assert_eq!(fx.store.log_end().unwrap(), LogCursor::default());
        assert_eq!(fx.store.log_cursor_at(T0).unwrap(), LogCursor::default());
        assert!(fx.store.log_after(&LogFilter::default(), LogCursor::default(), 10).unwrap().is_empty());
    }
}

#[test]
fn following_by_cursor_delivers_every_entry_once_in_cursor_order() {
    let fx = Fixture::new();
    let ids: Vec<_> = (0..7).map(|_| fx.enqueue("send-email", "high")).collect();
    let all = fx.store.log_tail(&LogFilter::default(), 100).unwrap();
    assert_eq!(all.len(), ids.len());
    assert!(all.iter().all(|t| t.xid == 0), "SQLite has one writer: its xid is always 0");

    let seen = follow(&fx, LogCursor::default(), 3);
    assert_eq!(seen, all, "batches of 3 deliver the 7 entries once each");
    assert!(seen.windows(2).all(|w| w[0].cursor() < w[1].cursor()), "in cursor order");
    assert_eq!(fx.store.log_end().unwrap(), seen.last().unwrap().cursor(), "the end is the newest entry");

    // A follower that started at the end sees only what commits after it.
    let end = fx.store.log_end().unwrap();
    let late = fx.enqueue("send-email", "high");
    let new = follow(&fx, end, 3);
    assert_eq!(new.iter().map(|t| t.job_id).collect::<Vec<_>>(), [late]);
}

#[test]
fn a_cursor_compares_its_xid_before_its_seq() {
    let fx = Fixture::new();
    for _ in 0..3 {
        fx.enqueue("send-email", "high");
    }
    let seqs = |after: LogCursor| -> Vec<i64> {
        fx.store.log_after(&LogFilter::default(), after, 10).unwrap().iter().map(|t| t.seq).collect()
    };
    // Every SQLite entry is at xid 0: a cursor at a lower xid is before all of them, at a
    // higher one after all of them, whatever its seq.
    assert_eq!(seqs(LogCursor { xid: -1, seq: i64::MAX }), [1, 2, 3]);
    assert_eq!(seqs(LogCursor { xid: 1, seq: i64::MIN }), Vec::<i64>::new());
    assert_eq!(seqs(LogCursor { xid: 0, seq: 1 }), [2, 3]);
    assert_eq!(seqs(LogCursor { xid: 0, seq: i64::MAX }), Vec::<i64>::new(), "no seq after the largest");
    assert!(LogCursor { xid: 1, seq: 0 } > LogCursor { xid: 0, seq: 9 });
}

both_backends! {
    /// Found by binary search over the log's key on both backends (PostgreSQL has no index on
    /// time since schema 13).
    fn the_cursor_at_an_instant_is_just_before_its_first_entry() {
        let fx = Fixture::new();
        let early = fx.enqueue("send-email", "high");
        fx.clock.advance(Duration::from_secs(60));
        let later = fx.enqueue("send-email", "high");
        let third = fx.enqueue("send-email", "high");
        let jobs_from = |at| -> Vec<_> {
            let cursor = fx.store.log_cursor_at(at).unwrap();
            fx.store.log_after(&LogFilter::default(), cursor, 10).unwrap().iter().map(|t| t.job_id).collect()
        };
        assert_eq!(jobs_from(T0), [early, later, third]);
        assert_eq!(jobs_from(T0 + 1), [later, third], "the entries at or after the instant, from the first");
        assert_eq!(jobs_from(T0 + 60_000), [later, third]);
        assert_eq!(fx.store.log_cursor_at(T0 + 60_001).unwrap(), fx.store.log_end().unwrap(), "nothing since: the end");
    }
}

#[test]
fn transitions_are_counted_after_the_cursor_once_each() {
    let fx = Fixture::new();
    fx.enqueue("send-email", "high");
    let mut counter = TransitionCounter::default();
    fx.store.count_transitions(&mut counter).unwrap();
    assert_eq!(counter.last, Some(fx.store.log_end().unwrap()), "the first count is the baseline");
    assert!(counter.by_state.is_empty());
    fx.enqueue("send-email", "high");
    fx.enqueue("send-email", "high");
    fx.store.count_transitions(&mut counter).unwrap();
    fx.store.count_transitions(&mut counter).unwrap();
    assert_eq!(counter.by_state.get(&JobState::Scheduled), Some(&2), "each new entry once");
    assert_eq!(counter.last, Some(fx.store.log_end().unwrap()));
}

both_backends! {
    /// `bw log tail` and the dashboard's log read the wire names of a page of entries in one
    /// statement: each id still in the store once, a job that is not there left out.
    fn the_wire_names_of_many_jobs_are_read_at_once() {
        let fx = Fixture::new();
        let jobs: Vec<backwave::NewJob> = (0..1500)
            .map(|i| backwave::NewJob::new(if i % 2 == 0 { "send-email" } else { "charge-card" }, "q", vec![]))
            .collect();
        let ids = fx.store.enqueue_many(&jobs).unwrap();
        let gone = JobId::new();
        let mut asked = ids.clone();
        asked.push(gone);
        asked.push(ids[0]);
        let names = fx.store.wire_names_of(&asked).unwrap();
        assert_eq!(names.len(), 1500, "each stored job once; the unknown id left out");
        assert!(!names.contains_key(&gone));
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(names[id], if i % 2 == 0 { "send-email" } else { "charge-card" });
        }
        assert!(fx.store.wire_names_of(&[]).unwrap().is_empty());
    }
}
