//! Reading the transition log on SQLite: the last entries, the entries after a cursor (what `bw
//! log tail --follow` and the dashboard's Log view poll), the cursor of the newest entry, the
//! cursor at an instant, and the counter of transitions by state. Every read walks the log's own
//! index backwards or forwards from a point. On SQLite every entry's xid is 0, so a cursor is a
//! position in `seq` (see [`LogCursor`]).

use std::cmp::Ordering;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::row::{transition_from_row, TRANSITION_COLUMNS};
use super::SqliteStore;
use crate::error::Result;
use crate::model::{JobState, LogCursor, Millis, Transition};
use crate::store::log::{first_seq_at, SEQ_BOUNDS_SQL};
use crate::store::{LogFilter, TransitionCounter};

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

impl SqliteStore {
    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()> {
        self.read(|conn| {
            let end = log_end(conn)?;
            let Some(last) = counter.last else {
                counter.last = Some(end);
                return Ok(());
            };
            if let Some(from) = first_seq_after(last) {
                let mut stmt = conn.prepare_cached(
                    "SELECT to_state, count(*) FROM transitions WHERE seq >= ?1 AND seq <= ?2 GROUP BY to_state",
                )?;
                let rows =
                    stmt.query_map(params![from, end.seq], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
                for row in rows {
                    let (state, n) = row?;
                    if let Ok(state) = state.parse::<JobState>() {
                        *counter.by_state.entry(state).or_default() += n as u64;
                    }
                }
            }
            // Never back: the retention sweep may have emptied the log since the last count.
            counter.last = Some(end.max(last));
            Ok(())
        })
    }
}
