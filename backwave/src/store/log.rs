//! Reading the transition log: the last entries, the entries after a cursor (what `bw log tail
//! --follow` and the dashboard's Log view poll), the cursor of the newest entry, and the cursor
//! at an instant. Every read walks the log's own index backwards or forwards from a point. On
//! SQLite every entry's xid is 0, so a cursor is a position in `seq` (see [`LogCursor`]).

use std::cmp::Ordering;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, OptionalExtension};

use super::row::{transition_from_row, TRANSITION_COLUMNS};
use super::SqliteStore;
use crate::error::Result;
use crate::model::{JobId, JobState, LogCursor, Millis, Transition};

/// A cursor before every SQLite entry, whatever its seq: another program may have written
/// `i64::MIN`, which no `(0, seq)` precedes.
const BEFORE_EVERY_ENTRY: LogCursor = LogCursor { xid: -1, seq: 0 };

/// The least seq an SQLite entry strictly after `after` can have (every entry's xid is 0), or
/// `None` when none can be: so reads stay a range of the log's primary key.
pub(super) fn first_seq_after(after: LogCursor) -> Option<i64> {
    match after.xid.cmp(&0) {
        Ordering::Less => Some(i64::MIN),
        Ordering::Equal => after.seq.checked_add(1),
        Ordering::Greater => None,
    }
}

/// The cursor of the newest entry: on SQLite every committed entry is visible to a reader, so
/// past it everything is new. (0, 0) on an empty log.
pub(super) fn log_end(conn: &Connection) -> Result<LogCursor> {
    let seq = conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM transitions")?.query_row([], |r| r.get(0))?;
    Ok(LogCursor { xid: 0, seq })
}

/// The least seq in the log and one past the greatest ((1, 1) when it is empty), where
/// [`first_seq_at`] searches. Two subqueries, not min and max in one SELECT: SQLite answers a lone
/// min() or max() from the key's ends, but both together scan the whole log (1 s at 4.6M).
pub(crate) const SEQ_BOUNDS_SQL: &str =
    "SELECT coalesce((SELECT min(seq) FROM transitions), 1), coalesce((SELECT max(seq) FROM transitions), 0) + 1";

/// The seq where the log splits at `at`, by binary search over its primary key between `lo` and
/// `hi` ([`SEQ_BOUNDS_SQL`]): the entries before it are older than `at` and the first one from it
/// is not; `hi` when no entry is that recent.
/// `probe(seq)` reads the first entry at or after `seq`: its seq and time. Entries are appended in
/// time order (on PostgreSQL nearly: an entry's time is its transaction's start, and seqs are
/// handed out as transactions write, so entries of transactions running side by side at `at`
/// may fall on either side), so no index on time is needed. Both backends search with this.
pub(crate) fn first_seq_at(
    mut lo: i64,
    mut hi: i64,
    at: Millis,
    mut probe: impl FnMut(i64) -> Result<Option<(i64, Millis)>>,
) -> Result<i64> {
    while lo < hi {
        // In i128: another program may have written a negative seq, and `hi - lo` across the
        // whole i64 range overflows.
        let mid = lo + ((hi as i128 - lo as i128) / 2) as i64;
        match probe(mid)? {
            Some((seq, t)) if t < at => lo = seq + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// Which log entries a tail shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFilter {
    /// Only this job's entries.
    pub job: Option<JobId>,
    /// Entries that moved a job into one of these states.
    pub to_states: Vec<JobState>,
}

impl LogFilter {
    fn where_clause(&self) -> (String, Vec<Value>) {
        let mut sql = vec!["1".to_string()];
        let mut args = Vec::new();
        if let Some(j) = self.job {
            sql.push("job_id = ?".into());
            args.push(Value::Text(j.to_string()));
        }
        if !self.to_states.is_empty() {
            sql.push(format!("to_state IN ({})", self.to_states.iter().map(|_| "?").collect::<Vec<_>>().join(", ")));
            args.extend(self.to_states.iter().map(|s| Value::Text(s.as_str().into())));
        }
        (sql.join(" AND "), args)
    }
}

impl SqliteStore {
    pub fn log_tail(&self, filter: &LogFilter, n: usize) -> Result<Vec<Transition>> {
        let (clause, mut args) = filter.where_clause();
        args.push(Value::Integer(n as i64));
        let mut rows: Vec<Transition> = self
            .conn
            .prepare_cached(&format!(
                "SELECT {TRANSITION_COLUMNS} FROM transitions WHERE {clause} ORDER BY seq DESC LIMIT ?"
            ))?
            .query_map(params_from_iter(args), transition_from_row)?
            .collect::<Result<_, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    pub fn log_after(&self, filter: &LogFilter, after: LogCursor, limit: usize) -> Result<Vec<Transition>> {
        let Some(from) = first_seq_after(after) else { return Ok(Vec::new()) };
        let (clause, mut args) = filter.where_clause();
        args.insert(0, Value::Integer(from));
        args.push(Value::Integer(limit as i64));
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT {TRANSITION_COLUMNS} FROM transitions WHERE seq >= ? AND {clause} ORDER BY seq LIMIT ?"
            ))?
            .query_map(params_from_iter(args), transition_from_row)?
            .collect::<Result<_, _>>()?)
    }

    pub fn log_end(&self) -> Result<LogCursor> {
        log_end(&self.conn)
    }

    pub fn log_cursor_at(&self, at: Millis) -> Result<LogCursor> {
        let (lo, hi) = self.conn.query_row(SEQ_BOUNDS_SQL, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut probe =
            self.conn.prepare_cached("SELECT seq, at FROM transitions WHERE seq >= ?1 ORDER BY seq LIMIT 1")?;
        let lo = first_seq_at(lo, hi, at, |seq| {
            Ok(probe.query_row([seq], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Millis>(1)?))).optional()?)
        })?;
        // `lo` is the first seq whose entry is at or after `at` (one past the newest when none
        // is): the cursor just before it.
        Ok(lo.checked_sub(1).map_or(BEFORE_EVERY_ENTRY, |seq| LogCursor { xid: 0, seq }))
    }
}

#[cfg(test)]
mod tests {
    use super::first_seq_at;

    /// The search over a log with gaps in its seqs (rolled-back writers, the retention sweep):
    /// `entries` as (seq, time), the probe answering as the `seq >= ?` query does.
    fn split(entries: &[(i64, i64)], at: i64) -> i64 {
        let (lo, hi) = (entries[0].0, entries[entries.len() - 1].0 + 1);
        first_seq_at(lo, hi, at, |seq| Ok(entries.iter().find(|(s, _)| *s >= seq).copied())).unwrap()
    }

    #[test]
    fn the_split_falls_just_after_the_last_older_entry_across_gaps_in_the_seqs() {
        let log = [(5, 10), (9, 20), (20, 30), (21, 40)];
        assert_eq!(split(&log, 10), 5, "every entry is that recent: from the first");
        // Any seq in 10..=20 splits the log at 25; the search stops just after the older entry.
        assert_eq!(split(&log, 25), 10);
        assert_eq!(split(&log, 30), 10);
        assert_eq!(split(&log, 31), 21);
        assert_eq!(split(&log, 41), 22, "none that recent: one past the newest");
    }
}
