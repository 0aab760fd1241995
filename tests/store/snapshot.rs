//! `Store::snapshot`: several reads that see one state of the store while writers go on (the
//! dashboard's refresh reads through it), on both backends; on PostgreSQL, one read-only
//! REPEATABLE READ transaction that takes no xid.

use backwave::store::{JobFilter, RawValue};
use backwave::{Error, JobState, NewJob, Store};

use super::backend::{both_backends, use_backend, Backend};
use super::Fixture;

/// Another connection to the fixture's store: a writer beside the snapshot's reader.
fn writer(fx: &Fixture) -> Store {
    Store::open(&fx.db).unwrap().with_clock(fx.clock.clone())
}

fn scheduled(store: &Store) -> u64 {
    store.counts().unwrap().total(JobState::Scheduled)
}

both_backends! {
    fn a_snapshot_does_not_see_what_a_writer_commits_after_its_first_read() {
        let fx = Fixture::new();
        fx.enqueue("send-email", "high");
        let other = writer(&fx);
        let mut late = None;
        let (counted, listed, found, end_before, end_after) = fx
            .store
            .snapshot(|s| {
                let counted = scheduled(s);
                let end_before = s.log_end()?;
                // Committed by another connection between two reads of the snapshot.
                late = Some(other.enqueue(&NewJob::new("send-email", "high", b"{}".to_vec())).unwrap());
                other.enqueue(&NewJob::new("send-email", "low", b"{}".to_vec())).unwrap();
                let listed = s.list_jobs(&JobFilter::state(JobState::Scheduled), 10, 0)?;
                let found = s.job(late.unwrap())?;
                Ok((counted, listed, found, end_before, s.log_end()?))
            })
            .unwrap();
        assert_eq!(counted, 1);
        assert_eq!((listed.total, listed.jobs.len()), (1, 1), "the page agrees with the counts");
        assert_eq!(found, None, "a job committed after the snapshot began is not in it");
        assert_eq!(end_after, end_before, "nor its log entry");
        // Outside the snapshot, every read sees the writes again.
        assert_eq!(scheduled(&fx.store), 3);
        assert!(fx.store.job(late.unwrap()).unwrap().is_some());
        assert!(fx.store.log_end().unwrap() > end_before);
    }

    fn a_write_inside_a_snapshot_is_refused_and_the_store_writes_again_after_it() {
        let fx = Fixture::new();
        let err = fx
            .store
            .snapshot(|s| {
                assert_eq!(scheduled(s), 0);
                s.enqueue(&NewJob::new("send-email", "high", b"{}".to_vec()))
            })
            .unwrap_err();
        assert!(matches!(&err, Error::ReadOnly { why } if why.contains("inside a read snapshot")), "{err}");
        assert_eq!(scheduled(&fx.store), 0, "nothing was written");
        fx.enqueue("send-email", "high");
        assert_eq!(scheduled(&fx.store), 1);
    }

    fn an_error_inside_a_snapshot_ends_it_and_a_snapshot_inside_one_is_the_same() {
        let fx = Fixture::new();
        let other = writer(&fx);
        let err = fx.store.snapshot(|s| -> backwave::Result<()> {
            scheduled(s);
            Err(Error::InvalidInput("stop here".into()))
        });
        assert!(matches!(err, Err(Error::InvalidInput(_))));
        other.enqueue(&NewJob::new("send-email", "high", b"{}".to_vec())).unwrap();
        assert_eq!(scheduled(&fx.store), 1, "the failed snapshot was ended: reads are fresh again");
        let inner = fx
            .store
            .snapshot(|s| {
                let first = scheduled(s);
                other.enqueue(&NewJob::new("send-email", "high", b"{}".to_vec())).unwrap();
                s.snapshot(|inner| Ok((first, scheduled(inner))))
            })
            .unwrap();
        assert_eq!(inner, (1, 1), "the inner snapshot reads the outer one's state");
        assert_eq!(scheduled(&fx.store), 2);
    }
}

#[test]
fn a_postgres_snapshot_is_one_read_only_repeatable_read_transaction_without_an_xid() {
    let _pg = use_backend(Backend::Postgres);
    let fx = Fixture::new();
    let other = writer(&fx);
    let text = |s: &Store, sql: &str| match s.raw_scalar(sql, &[]).unwrap() {
        RawValue::Null => "NULL".to_string(),
        v => v.as_str().to_string(),
    };
    let (settings, before, after, xid) = fx
        .store
        .snapshot(|s| {
            let settings = (
                text(s, "SELECT current_setting('transaction_isolation')"),
                text(s, "SELECT current_setting('transaction_read_only')"),
            );
            let before = text(s, "SELECT pg_current_snapshot()::text");
            scheduled(s);
            other.enqueue(&NewJob::new("send-email", "high", b"{}".to_vec())).unwrap();
            scheduled(s);
            let after = text(s, "SELECT pg_current_snapshot()::text");
            Ok((settings, before, after, text(s, "SELECT txid_current_if_assigned()::text")))
        })
        .unwrap();
    assert_eq!(settings, ("repeatable read".to_string(), "on".to_string()));
    assert_eq!(before, after, "every read of the snapshot saw one snapshot");
    assert_eq!(xid, "NULL", "a snapshot takes no xid, so it holds back no log reader's horizon");
    assert_eq!(text(&fx.store, "SELECT current_setting('transaction_isolation')"), "read committed", "it ended");
}
