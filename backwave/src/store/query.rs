//! Reading the store: one job and its history, filtered pages of jobs, and counts (the
//! transition log is `log.rs`, the groups of causes and quarantines `groups.rs`). Every query
//! here is meant to run against millions of rows: it pages through an index, never loads every
//! row.

use std::collections::BTreeMap;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::Serialize;

use super::row::{job_from_row, transition_from_row, JOB_COLUMNS, LISTED_JOB_COLUMNS, TRANSITION_COLUMNS};
use super::SqliteStore;
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

    pub(crate) fn where_clause(&self) -> (String, Vec<Value>) {
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
                if self.states.iter().all(|s| matches!(s, JobState::DeadLettered | JobState::Quarantined)) {
                    // Spelled out for jobs_failed_list, which holds every listed column of these
                    // jobs: a page is read from it alone, never walking a large payload's
                    // overflow pages to reach the columns stored after it.
                    sql.push("state IN ('dead-lettered', 'quarantined')".into());
                }
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
    pub(crate) fn column(self) -> &'static str {
        match self {
            SortOrder::FinishedDesc => "finished_at",
            SortOrder::DueAsc => "due_at",
            SortOrder::UpdatedDesc => "updated_at",
        }
    }

    pub(crate) fn descending(self) -> bool {
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
    /// The jobs, each with an empty `payload`: a list never reads payloads, which may be large
    /// and are not shown; [`Store::job`](crate::Store::job) reads one job whole.
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

impl SqliteStore {
    pub fn job(&self, id: JobId) -> Result<Option<Job>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?
            .query_row([id.to_string()], job_from_row)
            .optional()?)
    }

    pub fn resolve_id(&self, text: &str) -> Result<JobId> {
        let prefix = normalize_prefix(text)?;
        let upper = format!("{prefix}\u{10FFFF}");
        let mut found: Vec<String> = self
            .conn
            .prepare_cached("SELECT id FROM jobs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT 6")?
            .query_map(params![prefix, upper], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if let Some(tail) = id_tail(&prefix) {
            let tails: Vec<String> = self
                .conn
                .prepare_cached("SELECT id FROM jobs WHERE id LIKE '%' || ?1 ORDER BY id LIMIT 6")?
                .query_map([&tail], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for id in tails {
                if !found.contains(&id) {
                    found.push(id);
                }
            }
            found.sort();
        }
        one_id(text, found)
    }

    pub fn history(&self, id: JobId) -> Result<Vec<Transition>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {TRANSITION_COLUMNS} FROM transitions WHERE job_id = ?1 ORDER BY seq"))?
            .query_map([id.to_string()], transition_from_row)?
            .collect::<Result<_, _>>()?)
    }

    pub fn list_jobs(&self, filter: &JobFilter, limit: usize, offset: u64) -> Result<JobPage> {
        self.page(filter, limit, Some(offset), None)
    }

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
            "SELECT {LISTED_JOB_COLUMNS} FROM jobs WHERE {clause} ORDER BY {col} {dir}, id {dir} LIMIT {} OFFSET {}",
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

    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        count_with(&self.conn, filter)
    }

    pub fn wire_names(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare_cached("SELECT DISTINCT wire_name FROM jobs ORDER BY wire_name")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<_>>()?;
        Ok(names)
    }

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
}

fn count_with(conn: &Connection, filter: &JobFilter) -> Result<u64> {
    let (clause, args) = filter.where_clause();
    Ok(conn
        .prepare_cached(&format!("SELECT count(*) FROM jobs WHERE {clause}"))?
        .query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

/// The sort key of `job` in a listing ordered by `order`: what a [`Cursor`] holds.
pub(crate) fn sort_key(job: &Job, order: SortOrder) -> Millis {
    match order {
        SortOrder::FinishedDesc => job.finished_at.unwrap_or(0),
        SortOrder::DueAsc => job.due_at,
        SortOrder::UpdatedDesc => job.updated_at,
    }
}

/// The id that `text` names, from the ids its prefix and tail matched (sorted, at most six):
/// none is [`Error::JobNotFound`], several [`Error::AmbiguousId`] listing the first five.
pub(crate) fn one_id(text: &str, found: Vec<String>) -> Result<JobId> {
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

/// The hex digits of a normalised prefix when they are few enough to be tried as the tail of
/// an id too (the short id tables show): a tail match scans the whole primary key.
pub(crate) fn id_tail(prefix: &str) -> Option<String> {
    let hex: String = prefix.chars().filter(|c| *c != '-').collect();
    (hex.len() <= 12).then_some(hex)
}

/// Lower-case, hyphens where a UUID has them, hex only.
pub(crate) fn normalize_prefix(text: &str) -> Result<String> {
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
