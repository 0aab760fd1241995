//! The transition log's sequence and the counter of transitions by state that `bw metrics
//! --listen` exports: each count reads only the entries appended since the last, by cursor.
//! Read-only.

use std::collections::BTreeMap;

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::model::{JobState, LogCursor};
use crate::store::log::{first_seq_after, log_end};
use crate::store::SqliteStore;
/// Transitions by the state they moved a job into, counted from the log as it grows. A
/// reader keeps one and passes it to [`Store::count_transitions`](crate::Store::count_transitions)
/// each time; each call reads only the entries after the last one counted, up to the log's end
/// ([`Store::log_end`](crate::Store::log_end)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransitionCounter {
    /// The cursor counted up to; `None` until the first call, which sets the baseline.
    pub last: Option<LogCursor>,
    /// Transitions into each state since the baseline (a state none moved into is absent).
    pub by_state: BTreeMap<JobState, u64>,
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

/// The log's sequence: AUTOINCREMENT keeps the highest ever used in sqlite_sequence, so it holds
/// after the retention sweep deleted every entry; max(seq) covers a store whose sequence row
/// another program removed.
pub(super) fn log_seq(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'transitions'), 0),
                    coalesce((SELECT max(seq) FROM transitions), 0))",
        )?
        .query_row([], |r| r.get(0))?)
}
