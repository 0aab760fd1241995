//! Reading the store: one job and its history, filtered pages of jobs, counts, the transition
//! log, and the groups of dead-letter causes and quarantines. Every query here is meant to run
//! against millions of rows: it pages through an index, never loads every row.

use std::collections::{BTreeMap, HashMap};

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::Serialize;

use super::row::{job_from_row, parse_id, transition_from_row, JOB_COLUMNS, TRANSITION_COLUMNS};
use super::Store;
use crate::error::{Error, Result};
use crate::model::{Job, JobId, JobState, Millis, QuarantineReason, Transition};

/// Which jobs a list, a count or a bulk action covers. Empty fields match everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobFilter {
    pub states: Vec<JobState>,
    pub queue: Option<String>,
    pub wire_name: Option<String>,
    /// Every pair must match.
    pub labels: Vec<(String, String)>,
    /// Case-insensitive substring of the terminal cause.
    pub cause: Option<String>,
    /// Case-insensitive substring of any of: id, wire name, queue, labels, terminal cause.
    pub text: Option<String>,
    /// Exact cause fingerprint (a dead-letter group).
    pub fingerprint: Option<String>,
    pub quarantine_reason: Option<QuarantineReason>,
    /// Jobs whose reference time (finished for terminal jobs, created otherwise) is at or after.
    pub since: Option<Millis>,
    /// … and strictly before.
    pub before: Option<Millis>,
    /// Terminal jobs that finished strictly before this (bulk actions fix their set this way).
    pub finished_before: Option<Millis>,
}

impl JobFilter {
    pub fn state(state: JobState) -> Self {
        JobFilter { states: vec![state], ..Default::default() }
    }

    /// The order a listing of this filter follows.
    pub fn order(&self) -> SortOrder {
        if !self.states.is_empty() && self.states.iter().all(|s| s.is_terminal()) {
            SortOrder::FinishedDesc
        } else if !self.states.is_empty() && self.states.iter().all(|s| !s.is_terminal()) {
            SortOrder::DueAsc
        } else {
            SortOrder::UpdatedDesc
        }
    }

    fn where_clause(&self) -> (String, Vec<Value>) {
        let mut sql = vec!["1".to_string()];
        let mut args: Vec<Value> = Vec::new();
        if !self.states.is_empty() {
            // States are written as literals (they are our own fixed spellings, never user
            // text): SQLite picks a partial index only when it can see the value at prepare
            // time, and a bound `state = ?` made every listing scan the whole table.
            let names = self.states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
            sql.push(format!("state IN ({names})"));
            if self.order() == SortOrder::FinishedDesc {
                // Implied by a terminal state; spelled out so jobs_finished (a partial index on
                // finished_at IS NOT NULL) is usable.
                sql.push("finished_at IS NOT NULL".into());
            } else if self.order() == SortOrder::DueAsc {
                // Implied by an active state; spelled out so jobs_active (a partial index on
                // state IN ('scheduled', 'running')) is usable: without it the Running and
                // Scheduled listings scanned every job (500 ms at 1M jobs).
                sql.push("state IN ('scheduled', 'running')".into());
            }
        }
        let eq = |sql: &mut Vec<String>, args: &mut Vec<Value>, col: &str, v: &Option<String>| {
            if let Some(v) = v {
                sql.push(format!("{col} = ?"));
                args.push(Value::Text(v.clone()));
            }
        };
        eq(&mut sql, &mut args, "queue", &self.queue);
        eq(&mut sql, &mut args, "wire_name", &self.wire_name);
        eq(&mut sql, &mut args, "cause_fingerprint", &self.fingerprint);
        eq(&mut sql, &mut args, "quarantine_reason", &self.quarantine_reason.map(|q| q.as_str().to_string()));
        for (k, v) in &self.labels {
            sql.push("json_extract(labels, ?) = ?".into());
            args.push(Value::Text(format!("$.\"{}\"", k.replace('"', "\\\""))));
            args.push(Value::Text(v.clone()));
        }
        if let Some(c) = &self.cause {
            sql.push("instr(lower(terminal_cause), lower(?)) > 0".into());
            args.push(Value::Text(c.clone()));
        }
        if let Some(t) = &self.text {
            sql.push(
                "instr(lower(id || ' ' || wire_name || ' ' || queue || ' ' || labels || ' ' || \
                 coalesce(terminal_cause, '')), lower(?)) > 0"
                    .into(),
            );
            args.push(Value::Text(t.clone()));
        }
        let time = match self.order() {
            SortOrder::FinishedDesc => "finished_at",
            _ => "created_at",
        };
        if let Some(t) = self.since {
            sql.push(format!("{time} >= ?"));
            args.push(Value::Integer(t));
        }
        if let Some(t) = self.before {
            sql.push(format!("{time} < ?"));
            args.push(Value::Integer(t));
        }
        if let Some(t) = self.finished_before {
            sql.push("finished_at < ?".into());
            args.push(Value::Integer(t));
        }
        (sql.join(" AND "), args)
    }
}

/// How a listing is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortOrder {
    /// Terminal jobs: the most recently finished first.
    FinishedDesc,
    /// Scheduled and running jobs: the next due first.
    DueAsc,
    /// Mixed states: the most recently changed first.
    UpdatedDesc,
}

impl SortOrder {
    fn column(self) -> &'static str {
        match self {
            SortOrder::FinishedDesc => "finished_at",
            SortOrder::DueAsc => "due_at",
            SortOrder::UpdatedDesc => "updated_at",
        }
    }

    fn descending(self) -> bool {
        !matches!(self, SortOrder::DueAsc)
    }
}

/// Where the next page starts: the sort key and id of the last row shown. Printed as
/// `<key>.<id>`, it survives new jobs arriving between pages (unlike an offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub key: Millis,
    pub id: JobId,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.key, self.id)
    }
}

impl std::str::FromStr for Cursor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad =
            || Error::InvalidInput(format!("'{s}' is not a page cursor (copy it from the footer of a previous page)"));
        let (key, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(Cursor { key: key.parse().map_err(|_| bad())?, id: id.parse().map_err(|_| bad())? })
    }
}

/// One page of jobs and where it stands in the whole list.
#[derive(Clone, Debug, Serialize)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Rows matching the filter in all.
    pub total: u64,
    /// 0-based position of the first row of this page, when paging by offset.
    pub offset: Option<u64>,
    /// Pass to [`Store::list_jobs_after`] for the next page; `None` on the last page.
    #[serde(skip)]
    pub next: Option<Cursor>,
}

/// Counts of jobs by queue and state, kept exact by the schema's triggers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StateCounts {
    pub by_queue: BTreeMap<String, BTreeMap<JobState, u64>>,
}

impl StateCounts {
    pub fn total(&self, state: JobState) -> u64 {
        self.by_queue.values().filter_map(|m| m.get(&state)).sum()
    }

    pub fn queue_total(&self, queue: &str) -> u64 {
        self.by_queue.get(queue).map(|m| m.values().sum()).unwrap_or(0)
    }
}

/// Which log entries a tail shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFilter {
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

/// Dead-Lettered jobs that share a wire name and a cause fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CauseGroup {
    pub wire_name: String,
    pub fingerprint: String,
    /// One real cause of the group, the most recent.
    pub example: String,
    pub count: u64,
    pub first_seen: Millis,
    pub last_seen: Millis,
}

/// Quarantined jobs that share a wire name and a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuarantineGroup {
    pub wire_name: String,
    pub reason: QuarantineReason,
    pub example: String,
    pub count: u64,
    pub first_seen: Millis,
    pub last_seen: Millis,
    /// Live workers that handle this wire name now.
    pub live_handlers: u64,
}

impl Store {
    /// One job by id.
    pub fn job(&self, id: JobId) -> Result<Option<Job>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?
            .query_row([id.to_string()], job_from_row)
            .optional()?)
    }

    /// Resolve a full id, any unique prefix of one (`0192f3a1`, with or without hyphens), or
    /// the short id tables show ([`JobId::short`]: the last hex digits of the id, up to 12).
    ///
    /// Ids are time-ordered, so a prefix names the minute a job was made and a short prefix is
    /// shared by every job of that minute; the tail is random and tells them apart. A prefix is
    /// found through the primary-key index; a tail needs a scan of that index (about 0.1 s per
    /// million jobs), which is why it is only tried for inputs of 12 hex digits or fewer.
    pub fn resolve_id(&self, text: &str) -> Result<JobId> {
        let prefix = normalize_prefix(text)?;
        let upper = format!("{prefix}\u{10FFFF}");
        let mut found: Vec<String> = self
            .conn
            .prepare_cached("SELECT id FROM jobs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT 6")?
            .query_map(params![prefix, upper], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let hex: String = prefix.chars().filter(|c| *c != '-').collect();
        if hex.len() <= 12 {
            let tails: Vec<String> = self
                .conn
                .prepare_cached("SELECT id FROM jobs WHERE id LIKE '%' || ?1 ORDER BY id LIMIT 6")?
                .query_map([&hex], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for id in tails {
                if !found.contains(&id) {
                    found.push(id);
                }
            }
            found.sort();
        }
        match found.len() {
            0 => Err(Error::JobNotFound(text.to_string())),
            1 => found[0].parse(),
            n => {
                let mut candidates = found;
                if n > 5 {
                    candidates.truncate(5);
                    candidates.push("…".into());
                }
                Err(Error::AmbiguousId { prefix: text.to_string(), candidates })
            }
        }
    }

    /// Every transition of one job, oldest first.
    pub fn history(&self, id: JobId) -> Result<Vec<Transition>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {TRANSITION_COLUMNS} FROM transitions WHERE job_id = ?1 ORDER BY seq"))?
            .query_map([id.to_string()], transition_from_row)?
            .collect::<Result<_, _>>()?)
    }

    /// One page of jobs matching `filter`, skipping `offset` rows. Ordered by [`JobFilter::order`].
    pub fn list_jobs(&self, filter: &JobFilter, limit: usize, offset: u64) -> Result<JobPage> {
        self.page(filter, limit, Some(offset), None)
    }

    /// The page after `cursor`.
    pub fn list_jobs_after(&self, filter: &JobFilter, limit: usize, cursor: &Cursor) -> Result<JobPage> {
        self.page(filter, limit, None, Some(cursor))
    }

    fn page(&self, filter: &JobFilter, limit: usize, offset: Option<u64>, after: Option<&Cursor>) -> Result<JobPage> {
        let order = filter.order();
        let col = order.column();
        let (mut clause, mut args) = filter.where_clause();
        if let Some(c) = after {
            let cmp = if order.descending() { "<" } else { ">" };
            clause.push_str(&format!(" AND ({col}, id) {cmp} (?, ?)"));
            args.push(Value::Integer(c.key));
            args.push(Value::Text(c.id.to_string()));
        }
        let dir = if order.descending() { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE {clause} ORDER BY {col} {dir}, id {dir} LIMIT {} OFFSET {}",
            // Clamped: `usize::MAX` means "all", and SQLite reads no integer past i64::MAX.
            limit.saturating_add(1).min(i64::MAX as usize),
            offset.unwrap_or(0).min(i64::MAX as u64)
        );
        self.read(|conn| {
            let mut jobs: Vec<Job> = conn
                .prepare_cached(&sql)?
                .query_map(params_from_iter(args), job_from_row)?
                .collect::<Result<_, _>>()?;
            let more = jobs.len() > limit;
            jobs.truncate(limit);
            let next = match (more, jobs.last()) {
                (true, Some(last)) => Some(Cursor { key: sort_key(last, order), id: last.id }),
                _ => None,
            };
            let total = count_with(conn, filter)?;
            Ok(JobPage { jobs, total, offset, next })
        })
    }

    /// How many jobs match `filter`.
    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        count_with(&self.conn, filter)
    }

    /// Counts of jobs by queue and state, from the trigger-kept table: O(queues), not O(jobs).
    pub fn counts(&self) -> Result<StateCounts> {
        let mut counts = StateCounts::default();
        let mut stmt = self.conn.prepare_cached("SELECT queue, state, n FROM job_counts WHERE n != 0")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
        for row in rows {
            let (queue, state, n) = row?;
            if let Ok(state) = state.parse::<JobState>() {
                counts.by_queue.entry(queue).or_default().insert(state, n.max(0) as u64);
            }
        }
        Ok(counts)
    }

    /// The last `n` log entries matching `filter`, oldest first.
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

    /// Up to `limit` entries after sequence number `seq`, oldest first. Sequence numbers are
    /// assigned in commit order (SQLite has one writer at a time), so polling with the last seq
    /// seen never misses or repeats an entry.
    pub fn log_after(&self, filter: &LogFilter, seq: i64, limit: usize) -> Result<Vec<Transition>> {
        let (clause, mut args) = filter.where_clause();
        args.insert(0, Value::Integer(seq));
        args.push(Value::Integer(limit as i64));
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT {TRANSITION_COLUMNS} FROM transitions WHERE seq > ? AND {clause} ORDER BY seq LIMIT ?"
            ))?
            .query_map(params_from_iter(args), transition_from_row)?
            .collect::<Result<_, _>>()?)
    }

    /// The highest sequence number in the log (0 when empty).
    pub fn last_seq(&self) -> Result<i64> {
        Ok(self.conn.query_row("SELECT coalesce(max(seq), 0) FROM transitions", [], |r| r.get(0))?)
    }

    /// The first sequence number whose entry is at or after `at`, found by binary search over
    /// the log's primary key (entries are appended in time order), so no index on time is needed.
    pub fn seq_at(&self, at: Millis) -> Result<i64> {
        let (mut lo, mut hi): (i64, i64) = self.conn.query_row(
            // Two subqueries, not min and max in one SELECT: SQLite answers a lone min() or
            // max() from the key's ends, but both together scan the whole log (1 s at 4.6M).
            "SELECT coalesce((SELECT min(seq) FROM transitions), 1), coalesce((SELECT max(seq) FROM transitions), 0) + 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut probe =
            self.conn.prepare_cached("SELECT seq, at FROM transitions WHERE seq >= ?1 ORDER BY seq LIMIT 1")?;
        while lo < hi {
            // In i128: another program may have written a negative seq, and `hi - lo` across
            // the whole i64 range overflows.
            let mid = lo + ((hi as i128 - lo as i128) / 2) as i64;
            match probe.query_row([mid], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Millis>(1)?))).optional()? {
                Some((seq, t)) if t < at => lo = seq + 1,
                Some(_) => hi = mid,
                None => hi = mid,
            }
        }
        Ok(lo)
    }

    /// The top dead-letter causes: Dead-Lettered jobs grouped by wire name and cause
    /// fingerprint, the largest groups first.
    pub fn cause_groups(&self, limit: usize) -> Result<Vec<CauseGroup>> {
        Ok(self
            .conn
            .prepare_cached(
                // Group on the covering index first and fetch an example only for the groups
                // kept: a correlated example per group read thousands of rows (1.3 s at 1M jobs).
                "WITH g AS MATERIALIZED (
                     SELECT wire_name, cause_fingerprint AS fp, count(*) AS n, min(finished_at) AS first_seen,
                            max(finished_at) AS last_seen
                     FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint
                     ORDER BY n DESC, last_seen DESC LIMIT ?1)
                 SELECT wire_name, coalesce(fp, ex, ''), n, first_seen, last_seen, ex
                 FROM (SELECT g.*, (SELECT terminal_cause FROM jobs j2 WHERE j2.state = 'dead-lettered'
                                      AND j2.wire_name = g.wire_name AND j2.cause_fingerprint IS g.fp
                                      ORDER BY finished_at DESC LIMIT 1) AS ex FROM g)
                 ORDER BY n DESC, last_seen DESC",
            )?
            .query_map([limit as i64], |r| {
                Ok(CauseGroup {
                    wire_name: r.get(0)?,
                    fingerprint: r.get(1)?,
                    count: r.get::<_, i64>(2)? as u64,
                    first_seen: r.get(3)?,
                    last_seen: r.get(4)?,
                    example: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                })
            })?
            .collect::<Result<_, _>>()?)
    }

    /// Quarantined jobs grouped by wire name and reason, each marked with how many live
    /// workers handle that wire name now.
    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>> {
        let handlers = self.live_handlers()?;
        let rows: Vec<(String, String, u64, Millis, Millis, Option<String>)> = self
            .conn
            .prepare_cached(
                // Grouping reads only the covering `jobs_quarantine` index; the example cause is
                // one indexed lookup per group, not a read of every quarantined row.
                "SELECT wire_name, quarantine_reason, count(*), min(finished_at), max(finished_at),
                        (SELECT terminal_cause FROM jobs j2 WHERE j2.state = 'quarantined'
                           AND j2.wire_name = j.wire_name AND j2.quarantine_reason = j.quarantine_reason
                         ORDER BY finished_at DESC LIMIT 1)
                 FROM jobs j WHERE state = 'quarantined'
                 GROUP BY wire_name, quarantine_reason ORDER BY count(*) DESC",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get(3)?, r.get(4)?, r.get(5)?)))?
            .collect::<Result<_, _>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(wire_name, reason, count, first_seen, last_seen, example)| {
                Some(QuarantineGroup {
                    live_handlers: handlers.get(&wire_name).copied().unwrap_or(0),
                    reason: reason.parse().ok()?,
                    wire_name,
                    example: example.unwrap_or_default(),
                    count,
                    first_seen,
                    last_seen,
                })
            })
            .collect())
    }

    /// For each wire name, how many live workers handle it now.
    pub fn live_handlers(&self) -> Result<HashMap<String, u64>> {
        let now = self.now();
        let mut out: HashMap<String, u64> = HashMap::new();
        for w in self.workers()? {
            if w.is_live(now) {
                for name in w.wire_names {
                    *out.entry(name).or_default() += 1;
                }
            }
        }
        Ok(out)
    }
}

fn count_with(conn: &Connection, filter: &JobFilter) -> Result<u64> {
    let (clause, args) = filter.where_clause();
    Ok(conn
        .prepare_cached(&format!("SELECT count(*) FROM jobs WHERE {clause}"))?
        .query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

/// Ids of up to `limit` jobs matching `filter`, for a bulk batch.
pub(crate) fn matching_ids(conn: &Connection, filter: &JobFilter, limit: usize) -> Result<Vec<JobId>> {
    let (clause, mut args) = filter.where_clause();
    args.push(Value::Integer(limit as i64));
    Ok(conn
        .prepare_cached(&format!("SELECT id FROM jobs WHERE {clause} LIMIT ?"))?
        .query_map(params_from_iter(args), |r| parse_id(r, 0))?
        .collect::<Result<_, _>>()?)
}

fn sort_key(job: &Job, order: SortOrder) -> Millis {
    match order {
        SortOrder::FinishedDesc => job.finished_at.unwrap_or(0),
        SortOrder::DueAsc => job.due_at,
        SortOrder::UpdatedDesc => job.updated_at,
    }
}

/// Lower-case, hyphens where a UUID has them, hex only.
fn normalize_prefix(text: &str) -> Result<String> {
    let t = text.trim();
    let hex: String = t.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    if hex.is_empty() || hex.len() > 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::InvalidInput(format!(
            "'{text}' is not a job id or id prefix (expected hex digits, e.g. 0192f3a1 or a full UUID)"
        )));
    }
    let mut out = String::with_capacity(36);
    for (i, c) in hex.chars().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_normalise_to_uuid_layout() {
        assert_eq!(normalize_prefix("0192F3A1").unwrap(), "0192f3a1");
        assert_eq!(normalize_prefix("0192f3a17c2e").unwrap(), "0192f3a1-7c2e");
        assert_eq!(normalize_prefix("0192f3a1-7c2e-7b").unwrap(), "0192f3a1-7c2e-7b");
        let err = normalize_prefix("zz;drop").unwrap_err().to_string();
        assert!(err.contains("'zz;drop'"), "{err}");
        assert!(normalize_prefix("").is_err());
    }
}
