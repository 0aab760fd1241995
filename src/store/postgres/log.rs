//! Reading the transition log on PostgreSQL: the last entries, the entries after a cursor, the
//! cursor of the newest entry, the cursor at an instant, and the counter of transitions.
//!
//! A `seq` comes from a sequence before commit, so it is not commit order: an entry may become
//! visible after entries with a higher `seq` were read. Readers therefore go in `(xid, seq)`
//! order and deliver only entries whose transaction is below the horizon, the oldest
//! transaction still running (`pg_snapshot_xmin`): every transaction that has not ended has an
//! xid at or above it, or takes one later, above every xid handed out so far, so an entry not
//! yet delivered always sorts after every cursor already handed out (docs/postgres.md §3c,
//! §4.8). Each read is one read-only snapshot, which takes no xid and so never holds the horizon
//! back itself. The cost: delivery waits for the oldest writing transaction of the whole
//! cluster; it is late then, never lost.

use std::collections::BTreeMap;

use postgres::types::ToSql;

use super::row::{self, TRANSITION_COLUMNS};
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{JobState, LogCursor, Millis, Transition};
use crate::store::{LogFilter, TransitionCounter};

/// Entries a reader may deliver: those of transactions below the snapshot's horizon. Stable
/// within a statement, so the planner uses it as a bound of the `transitions_xid` index.
const DELIVERABLE: &str = "xid < pg_snapshot_xmin(pg_current_snapshot())";

/// Strictly after the cursor bound as `$1` (its xid, a bigint) and `$2` (its seq), as a range
/// of the `transitions_xid (xid, seq)` index.
const AFTER: &str = "(xid, seq) > (($1::bigint)::text::xid8, $2)";

/// Cursor order, along the `transitions_xid` index. The table's name is spelt out: the readers
/// select `xid::text::bigint`, an output column also named `xid`, and a bare `ORDER BY xid`
/// sorts by that instead, which no index has (a scan of the whole log).
const OLDEST_FIRST: &str = "transitions.xid, transitions.seq";
const NEWEST_FIRST: &str = "transitions.xid DESC, transitions.seq DESC";

/// A cursor's xid as a bound: real xids are at least 3, so every cursor whose xid is 0 or
/// below (an empty log's end, a cursor made before any entry) precedes every entry alike, and
/// an `xid8` has no negative values to compare with.
fn xid_bound(c: LogCursor) -> i64 {
    c.xid.max(0)
}

/// [`LogFilter`] as a `WHERE` clause, its parameters numbered from `first`.
fn filter_clause(f: &LogFilter, first: usize) -> (String, Vec<Box<dyn ToSql + Sync>>) {
    let mut sql = vec![DELIVERABLE.to_string()];
    let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    if let Some(job) = f.job {
        params.push(Box::new(job.0));
        sql.push(format!("job_id = ${first}"));
    }
    if !f.to_states.is_empty() {
        // Our own fixed spellings, as literals, like the jobs filter's states.
        let names = f.to_states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
        sql.push(format!("to_state IN ({names})"));
    }
    (sql.join(" AND "), params)
}

/// The cursor of the newest deliverable entry in this snapshot; (0, 0) when there is none.
fn log_end(tx: &mut Tx<'_>) -> Result<LogCursor> {
    let end = tx.query_opt(
        &format!("SELECT xid::text::bigint, seq FROM transitions WHERE {DELIVERABLE} ORDER BY {NEWEST_FIRST} LIMIT 1"),
        &[],
    )?;
    Ok(match end {
        Some(r) => LogCursor { xid: r.try_get(0)?, seq: r.try_get(1)? },
        None => LogCursor::default(),
    })
}

/// The cursor just before `c`: strictly after it comes `c` itself.
fn just_before(c: LogCursor) -> LogCursor {
    match c.seq.checked_sub(1) {
        Some(seq) => LogCursor { xid: c.xid, seq },
        None => LogCursor { xid: c.xid - 1, seq: i64::MAX },
    }
}

/// A row count as PostgreSQL's LIMIT takes it: `usize::MAX` means "all".
fn limit(n: usize) -> i64 {
    n.min(i64::MAX as usize) as i64
}

impl PgStore {
    pub fn log_tail(&self, filter: &LogFilter, n: usize) -> Result<Vec<Transition>> {
        let (clause, params) = filter_clause(filter, 1);
        let sql = format!(
            "SELECT {TRANSITION_COLUMNS} FROM transitions WHERE {clause} ORDER BY {NEWEST_FIRST} LIMIT ${}",
            params.len() + 1
        );
        let n = limit(n);
        let mut rows = self.read(|tx| {
            let mut p: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
            p.push(&n);
            tx.query(&sql, &p)?.iter().map(row::transition).collect::<Result<Vec<_>>>()
        })?;
        rows.reverse();
        Ok(rows)
    }

    pub fn log_after(&self, filter: &LogFilter, after: LogCursor, limit: usize) -> Result<Vec<Transition>> {
        let (clause, params) = filter_clause(filter, 3);
        let sql = format!(
            "SELECT {TRANSITION_COLUMNS} FROM transitions WHERE {AFTER} AND {clause} ORDER BY {OLDEST_FIRST} LIMIT ${}",
            params.len() + 3
        );
        let (xid, seq, n) = (xid_bound(after), after.seq, self::limit(limit));
        self.read(|tx| {
            let mut p: Vec<&(dyn ToSql + Sync)> = vec![&xid, &seq];
            p.extend(params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)));
            p.push(&n);
            tx.query(&sql, &p)?.iter().map(row::transition).collect()
        })
    }

    pub fn log_end(&self) -> Result<LogCursor> {
        self.read(log_end)
    }

    /// The first entry at or after `at` by the `transitions_at` index, and the cursor just
    /// before it; the log's end when no entry is that recent. Times are the writing
    /// transactions' start (the database clock), and xids are taken at their first write, so
    /// the two orders agree but for transactions running side by side: a count from here is
    /// off by at most the entries of those.
    pub fn log_cursor_at(&self, at: Millis) -> Result<LogCursor> {
        self.read(|tx| {
            let first = tx.query_opt(
                "SELECT xid::text::bigint, seq FROM transitions WHERE at >= $1 ORDER BY at, transitions.xid, seq LIMIT 1",
                &[&at],
            )?;
            match first {
                Some(r) => Ok(just_before(LogCursor { xid: r.try_get(0)?, seq: r.try_get(1)? })),
                None => log_end(tx),
            }
        })
    }

    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()> {
        let counted = self.read(|tx| {
            let end = log_end(tx)?;
            let Some(last) = counter.last else { return Ok((end, BTreeMap::new())) };
            let mut by_state: BTreeMap<JobState, u64> = BTreeMap::new();
            let (xid, seq) = (xid_bound(last), last.seq);
            for r in tx.query(
                &format!(
                    "SELECT to_state, count(*) FROM transitions WHERE {AFTER} AND {DELIVERABLE} GROUP BY to_state"
                ),
                &[&xid, &seq],
            )? {
                let (state, n): (String, i64) = (r.try_get(0)?, r.try_get(1)?);
                if let Ok(state) = state.parse::<JobState>() {
                    *by_state.entry(state).or_default() += n as u64;
                }
            }
            Ok((end, by_state))
        })?;
        let (end, by_state) = counted;
        match counter.last {
            // The first call only sets the baseline.
            None => counter.last = Some(end),
            Some(last) => {
                for (state, n) in by_state {
                    *counter.by_state.entry(state).or_default() += n;
                }
                // Never back: the retention sweep may have emptied the log since the last count.
                counter.last = Some(end.max(last));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    use postgres::{Client, NoTls};
    use uuid::Uuid;

    use super::*;
    use crate::model::JobId;
    use crate::store::Store;

    /// A fresh schema on the server `BW_TEST_PG` names, dropped when this is.
    struct Schema {
        base: String,
        name: String,
    }

    impl Schema {
        fn new(tag: &str) -> Schema {
            let base =
                std::env::var("BW_TEST_PG").expect("this check needs a PostgreSQL server: set BW_TEST_PG=postgres://…");
            let name = format!("bw_{}_{tag}", Uuid::now_v7().simple());
            Client::connect(&base, NoTls).unwrap().batch_execute(&format!("CREATE SCHEMA {name}")).unwrap();
            Schema { base, name }
        }

        /// The server's URL with every connection in this schema.
        fn url(&self) -> String {
            let sep = if self.base.contains('?') { '&' } else { '?' };
            format!("{}{sep}options=-csearch_path%3D{}", self.base, self.name)
        }
    }

    impl Drop for Schema {
        fn drop(&mut self) {
            if let Ok(mut c) = Client::connect(&self.base, NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
            }
        }
    }

    /// xorshift64: the writers' pauses and transaction sizes, without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Writers take their xid (the job row), pause, then take their seq (the log entry), in
    /// transactions of 1 to 4 jobs, one in ten rolled back; a reader follows with `log_after`
    /// in small batches. Every committed entry must be delivered exactly once, in strictly
    /// increasing cursor order, and no rolled-back one ever; a reader by `seq` alone would skip
    /// the entries that commit after a higher seq was read (docs/postgres.md §3c).
    #[test]
    #[ignore = "needs a PostgreSQL server: BW_TEST_PG=postgres://… cargo test --lib -- --ignored log_after_under_concurrent_writers"]
    fn log_after_under_concurrent_writers_delivers_every_committed_entry_once() {
        const WRITERS: u64 = 4;
        const RUN: Duration = Duration::from_secs(10);
        let schema = Schema::new("logorder");
        let url = schema.url();
        let store = Store::create(url.as_str()).unwrap();
        let committed = Arc::new(Mutex::new(HashSet::<i64>::new()));
        let writing = Arc::new(AtomicBool::new(true));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (url, committed, writing) = (url.clone(), Arc::clone(&committed), Arc::clone(&writing));
                thread::spawn(move || {
                    let mut client = Client::connect(&url, NoTls).unwrap();
                    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (w + 1);
                    let mut rolled_back = 0;
                    while writing.load(Ordering::Relaxed) {
                        let mut tx = client.transaction().unwrap();
                        let mut seqs = Vec::new();
                        for _ in 0..1 + next(&mut rng) % 4 {
                            let id = Uuid::now_v7();
                            tx.execute(
                                "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
                                 VALUES ($1, 'log.check', 'default', 0, 0, 0)",
                                &[&id],
                            )
                            .unwrap();
                            thread::sleep(Duration::from_millis(next(&mut rng) % 10));
                            let seq: i64 = tx
                                .query_one(
                                    "INSERT INTO transitions (job_id, at, to_state, attempt)
                                     VALUES ($1, 0, 'scheduled', 0) RETURNING seq",
                                    &[&id],
                                )
                                .unwrap()
                                .get(0);
                            seqs.push(seq);
                            thread::sleep(Duration::from_millis(next(&mut rng) % 10));
                        }
                        if next(&mut rng) % 10 == 0 {
                            tx.rollback().unwrap();
                            rolled_back += seqs.len();
                        } else {
                            tx.commit().unwrap();
                            committed.lock().unwrap().extend(seqs);
                        }
                    }
                    rolled_back
                })
            })
            .collect();

        // The reader, and beside it a reader by seq alone on the same polls, for comparison.
        let mut naive = Client::connect(&url, NoTls).unwrap();
        let (mut naive_last, mut naive_seen) = (0i64, HashSet::new());
        let mut last = LogCursor::default();
        let mut delivered: Vec<i64> = Vec::new();
        let (mut polls, mut out_of_seq_order) = (0, 0);
        let started = Instant::now();
        let mut writers = Some(writers);
        let mut rolled_back = 0;
        loop {
            if started.elapsed() >= RUN {
                if let Some(ws) = writers.take() {
                    writing.store(false, Ordering::Relaxed);
                    rolled_back = ws.into_iter().map(|w| w.join().unwrap()).sum::<usize>();
                }
            }
            let batch = store.log_after(&LogFilter::default(), last, 50).unwrap();
            polls += 1;
            for t in &batch {
                assert!(t.cursor() > last, "{:?} delivered after {last:?}", t.cursor());
                if delivered.last().is_some_and(|&s| s > t.seq) {
                    out_of_seq_order += 1;
                }
                last = t.cursor();
                delivered.push(t.seq);
            }
            for r in
                naive.query("SELECT seq FROM transitions WHERE seq > $1 ORDER BY seq LIMIT 50", &[&naive_last]).unwrap()
            {
                naive_last = r.get(0);
                naive_seen.insert(naive_last);
            }
            if writers.is_none() && delivered.len() >= committed.lock().unwrap().len() {
                break;
            }
            assert!(
                started.elapsed() < RUN * 6,
                "{} of {} committed entries delivered after {:?}: lost, or the horizon held back",
                delivered.len(),
                committed.lock().unwrap().len(),
                started.elapsed()
            );
            thread::sleep(Duration::from_millis(2));
        }

        loop {
            let rows = naive
                .query("SELECT seq FROM transitions WHERE seq > $1 ORDER BY seq LIMIT 50", &[&naive_last])
                .unwrap();
            let Some(r) = rows.last() else { break };
            naive_last = r.get(0);
            naive_seen.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
        }
        let committed = committed.lock().unwrap();
        let unique: HashSet<i64> = delivered.iter().copied().collect();
        assert_eq!(unique.len(), delivered.len(), "an entry was delivered twice");
        assert_eq!(unique, *committed, "delivered entries differ from committed ones");
        assert!(out_of_seq_order > 0, "no entry committed out of seq order: the run proved nothing");
        assert_eq!(store.log_end().unwrap(), last);
        assert_eq!(store.log_tail(&LogFilter::default(), 1).unwrap()[0].cursor(), last);
        let mut counter = TransitionCounter { last: Some(LogCursor::default()), ..Default::default() };
        store.count_transitions(&mut counter).unwrap();
        assert_eq!(counter.by_state.get(&JobState::Scheduled), Some(&(committed.len() as u64)));
        let naive_missed = committed.iter().filter(|s| !naive_seen.contains(s)).count();
        eprintln!(
            "{} entries committed, {rolled_back} rolled back, {} delivered in {polls} polls, {out_of_seq_order} of them \
             after a higher seq; a reader by seq alone missed {naive_missed}",
            committed.len(),
            delivered.len()
        );
    }

    /// docs/postgres.md §3c case 2, step by step: A takes its xid first and logs last, B takes
    /// a later xid, logs first and commits first. While A runs, B's entry is held back (so no
    /// cursor passes A's place); once A commits both come, A's first. A reader by seq below
    /// the horizon would deliver A's entry (the higher seq) and then skip B's.
    #[test]
    #[ignore = "needs a PostgreSQL server: BW_TEST_PG=postgres://… cargo test --lib -- --ignored an_entry_committed_late"]
    fn an_entry_committed_late_is_delivered_in_its_place_not_skipped() {
        let schema = Schema::new("logorder_late");
        let url = schema.url();
        let store = Store::create(url.as_str()).unwrap();
        let (mut a, mut b) = (Client::connect(&url, NoTls).unwrap(), Client::connect(&url, NoTls).unwrap());
        let job = "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
                   VALUES ($1, 'log.check', 'default', 0, 0, 0)";
        let entry =
            "INSERT INTO transitions (job_id, at, to_state, attempt) VALUES ($1, 0, 'scheduled', 0) RETURNING seq";
        let (ja, jb) = (Uuid::now_v7(), Uuid::now_v7());
        let mut ta = a.transaction().unwrap();
        ta.execute(job, &[&ja]).unwrap();
        let mut tb = b.transaction().unwrap();
        tb.execute(job, &[&jb]).unwrap();
        let seq_b: i64 = tb.query_one(entry, &[&jb]).unwrap().get(0);
        tb.commit().unwrap();
        let seq_a: i64 = ta.query_one(entry, &[&ja]).unwrap().get(0);
        assert!(seq_a > seq_b);

        assert_eq!(store.log_after(&LogFilter::default(), LogCursor::default(), 10).unwrap(), vec![]);
        assert_eq!(store.log_tail(&LogFilter::default(), 10).unwrap(), vec![]);
        assert_eq!(store.log_end().unwrap(), LogCursor::default());
        ta.commit().unwrap();
        // Another transaction of the cluster (a parallel test) may hold the horizon a while.
        let started = Instant::now();
        let entries = loop {
            let entries = store.log_after(&LogFilter::default(), LogCursor::default(), 10).unwrap();
            if entries.len() == 2 || started.elapsed() > Duration::from_secs(60) {
                break entries;
            }
            thread::sleep(Duration::from_millis(10));
        };
        let got: Vec<(JobId, i64)> = entries.iter().map(|t| (t.job_id, t.seq)).collect();
        assert_eq!(got, vec![(JobId(ja), seq_a), (JobId(jb), seq_b)]);
        assert!(entries[0].xid < entries[1].xid);
        assert_eq!(store.log_end().unwrap(), entries[1].cursor());
    }

    #[test]
    fn the_cursor_just_before_an_entry_is_passed_by_it_alone() {
        assert_eq!(just_before(LogCursor { xid: 7, seq: 5 }), LogCursor { xid: 7, seq: 4 });
        let first = LogCursor { xid: 7, seq: i64::MIN };
        let before = just_before(first);
        assert!(before < first);
        assert_eq!(before, LogCursor { xid: 6, seq: i64::MAX });
    }

    #[test]
    fn cursors_before_every_entry_bind_as_xid_zero() {
        assert_eq!(xid_bound(LogCursor { xid: -1, seq: 0 }), 0);
        assert_eq!(xid_bound(LogCursor::default()), 0);
        assert_eq!(xid_bound(LogCursor { xid: 724_640, seq: 9 }), 724_640);
    }
}
