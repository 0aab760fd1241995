//! Reading the transition log on PostgreSQL: the last entries, the entries after a cursor, the
//! cursor of the newest entry, the cursor at an instant, and the counter of transitions.
//!
//! A `seq` comes from a sequence before commit, so it is not commit order: an entry may become
//! visible after entries with a higher `seq` were read. Readers therefore go in `(xid, seq)`
//! order and deliver only entries whose transaction is below the horizon ([`HORIZON`]): the
//! oldest transaction still writing to this store's tables, or the next xid to be handed out
//! when none is. Every transaction that has not ended has an xid at or above it, or takes one
//! later, above every xid handed out so far, so an entry not yet delivered always sorts after
//! every cursor already handed out (docs/postgres.md §3c, §4.8). The horizon is read in a
//! transaction of its own, before the snapshot that reads the entries, so that every
//! transaction below it has ended by then. Readers take no xid and never hold it back. The
//! cost: delivery waits for the oldest transaction writing to this store (not to the rest of
//! the cluster: a long transaction elsewhere, or another store's, does not hold it back).

use std::collections::BTreeMap;

use postgres::types::ToSql;

use super::row;
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{JobState, LogCursor, Millis, Transition};
use crate::store::log::{first_seq_at, SEQ_BOUNDS_SQL};
use crate::store::{LogFilter, TransitionCounter};

/// The log's horizon as an xid8 in a bigint: the lowest xid of a transaction that holds (or
/// waits for) a lock other than a plain read on any table of this store's schema — every
/// BackWave write, and any program that follows the contract, writes one of them first, so
/// that lock comes before its xid — else the next xid to be handed out (the snapshot's xmax).
/// pg_locks shows each transaction's own 32-bit xid: its full xid is the one nearest the xmax
/// with those low 32 bits (a running xid is always within 2^31 of it, as PostgreSQL's own xid
/// comparisons assume). Never below 0: an xid8 read from '-1' is 2^64 - 1, every entry.
const HORIZON: &str = "
    WITH snap AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax),
    writers AS (
        SELECT DISTINCT x.transactionid::text::bigint AS xid32
        FROM pg_locks l
        JOIN pg_locks x ON x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock'
                        AND x.virtualtransaction = l.virtualtransaction
        WHERE l.locktype = 'relation' AND l.mode <> 'AccessShareLock'
          AND l.relation IN (SELECT c.oid FROM pg_class c
                             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'))
    SELECT greatest(0, least(snap.xmax, min(
               snap.xmax + ((w.xid32 - (snap.xmax & 4294967295) + 2147483648) % 4294967296 + 4294967296)
                           % 4294967296 - 2147483648)))
    FROM snap LEFT JOIN writers w ON true
    GROUP BY snap.xmax";

/// Entries a reader may deliver: those of transactions below the horizon bound as parameter
/// `$n`, a range bound of the `transitions_xid` index.
fn deliverable(n: usize) -> String {
    format!("xid < (${n}::bigint)::text::xid8")
}

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

/// [`LogFilter`] and the horizon as a `WHERE` clause, its parameters numbered from `first`.
fn filter_clause(f: &LogFilter, horizon: i64, first: usize) -> (String, Vec<Box<dyn ToSql + Sync>>) {
    let mut sql = vec![deliverable(first)];
    let mut params: Vec<Box<dyn ToSql + Sync>> = vec![Box::new(horizon)];
    if let Some(job) = f.job {
        params.push(Box::new(job.0));
        sql.push(format!("job_id = ${}", first + 1));
    }
    if !f.to_states.is_empty() {
        // Our own fixed spellings, as literals, like the jobs filter's states.
        let names = f.to_states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
        sql.push(format!("to_state IN ({names})"));
    }
    (sql.join(" AND "), params)
}

/// The cursor of the newest entry below `horizon`; (0, 0) when there is none.
fn log_end(tx: &mut Tx<'_>, horizon: i64) -> Result<LogCursor> {
    let end = tx.query_opt(
        &format!(
            "SELECT xid::text::bigint, seq FROM transitions WHERE {} ORDER BY {NEWEST_FIRST} LIMIT 1",
            deliverable(1)
        ),
        &[&horizon],
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
    /// The horizon, read in a transaction of its own: every transaction below it has ended
    /// before the next snapshot is taken. Inside [`PgStore::snapshot`], the one it read before
    /// its transaction began (read within it, pg_locks would no longer show a writer that
    /// committed after the snapshot was taken, and its entries would be skipped for good).
    pub(super) fn horizon(&self) -> Result<i64> {
        if let Some(horizon) = self.snapshot.get() {
            return Ok(horizon);
        }
        self.read(|tx| Ok(tx.query_one(HORIZON, &[])?.try_get(0)?))
    }

    pub fn log_tail(&self, filter: &LogFilter, n: usize) -> Result<Vec<Transition>> {
        let (clause, params) = filter_clause(filter, self.horizon()?, 1);
        let sql = format!(
            "SELECT {} FROM transitions WHERE {clause} ORDER BY {NEWEST_FIRST} LIMIT ${}",
            self.transition_columns(),
            params.len() + 1
        );
        let n = limit(n);
        let mut rows = self.read(|tx| {
            let mut p: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
            p.push(&n);
            tx.query_planned(&sql, &p)?.iter().map(row::transition).collect::<Result<Vec<_>>>()
        })?;
        rows.reverse();
        Ok(rows)
    }

    pub fn log_after(&self, filter: &LogFilter, after: LogCursor, limit: usize) -> Result<Vec<Transition>> {
        let (clause, params) = filter_clause(filter, self.horizon()?, 3);
        let sql = format!(
            "SELECT {} FROM transitions WHERE {AFTER} AND {clause} ORDER BY {OLDEST_FIRST} LIMIT ${}",
            self.transition_columns(),
            params.len() + 3
        );
        let (xid, seq, n) = (xid_bound(after), after.seq, self::limit(limit));
        self.read(|tx| {
            let mut p: Vec<&(dyn ToSql + Sync)> = vec![&xid, &seq];
            p.extend(params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)));
            p.push(&n);
            tx.query_planned(&sql, &p)?.iter().map(row::transition).collect()
        })
    }

    pub fn log_end(&self) -> Result<LogCursor> {
        let horizon = self.horizon()?;
        self.read(|tx| log_end(tx, horizon))
    }

    /// The cursor just before the first entry at or after `at`, found by the binary search
    /// SQLite uses ([`first_seq_at`]: schema 13 dropped the index on time); the log's end when no
    /// entry is that recent. Times are the writing transactions' start (the database clock), and
    /// seqs and xids are taken as they write, so the orders agree but for transactions running
    /// side by side: a count from here is off by at most the entries of those.
    pub fn log_cursor_at(&self, at: Millis) -> Result<LogCursor> {
        let horizon = self.horizon()?;
        self.read(|tx| {
            let bounds = tx.query_one(SEQ_BOUNDS_SQL, &[])?;
            let first = first_seq_at(bounds.try_get(0)?, bounds.try_get(1)?, at, |seq| {
                tx.query_opt("SELECT seq, at FROM transitions WHERE seq >= $1 ORDER BY seq LIMIT 1", &[&seq])?
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .transpose()
            })?;
            let entry = tx.query_opt(
                "SELECT xid::text::bigint, seq FROM transitions WHERE seq >= $1 ORDER BY seq LIMIT 1",
                &[&first],
            )?;
            match entry {
                Some(r) => Ok(just_before(LogCursor { xid: r.try_get(0)?, seq: r.try_get(1)? })),
                None => log_end(tx, horizon),
            }
        })
    }

    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()> {
        let horizon = self.horizon()?;
        let counted = self.read(|tx| {
            let end = log_end(tx, horizon)?;
            let Some(last) = counter.last else { return Ok((end, BTreeMap::new())) };
            let mut by_state: BTreeMap<JobState, u64> = BTreeMap::new();
            let (xid, seq) = (xid_bound(last), last.seq);
            for r in tx.query(
                &format!(
                    "SELECT to_state, count(*) FROM transitions WHERE {AFTER} AND {} GROUP BY to_state",
                    deliverable(3)
                ),
                &[&xid, &seq, &horizon],
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
    use super::*;

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
