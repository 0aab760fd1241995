//! Reading the store on SQLite: one job and its history, filtered pages of jobs, and counts (the
//! transition log is `log.rs`, the groups of causes and quarantines `health/groups.rs`), and the SQLite
//! spelling of the job filter (`filter.rs` describes it once for both backends). Every query
//! here is meant to run against millions of rows: it pages through an index, never loads every row.

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::row::{job_from_row, listed_columns, parse_id, transition_from_row, TRANSITION_COLUMNS};
use super::SqliteStore;
use crate::error::Result;
use crate::model::{Job, JobId, JobState, Transition};
use crate::store::filter::{page_of, page_statement, render, Arg, Dialect, Haystack, Index, Predicate};
use crate::store::id_prefix::{id_tail, normalize_prefix, one_id};
use crate::store::ops::columns::JOB_COLUMNS;
use crate::store::{Cursor, JobFilter, JobPage, RawValue, StateCounts};

/// SQLite's spelling of the job filter.
pub(crate) struct Sqlite;

impl Dialect for Sqlite {
    const ALWAYS: &'static str = "1";

    /// Plain `?`, numbered by where they stand: callers append their own values after the
    /// filter's and write their `?` after its clause.
    fn placeholder(_: usize) -> String {
        "?".into()
    }

    fn label(key: &str, value: &str, bind: &mut dyn FnMut(Arg) -> String) -> String {
        // A quoted path key is read as a JSON string, so the key is written as one: a `"` or
        // a `\` in it is escaped, not taken as the key's end or an escape of its own.
        let path = bind(Arg::Text(format!("$.{}", serde_json::Value::String(key.to_string()))));
        format!("json_extract(labels, {path}) = {}", bind(Arg::Text(value.to_string())))
    }

    fn haystack(h: Haystack) -> &'static str {
        match h {
            Haystack::Cause => "terminal_cause",
            Haystack::Text => {
                "id || ' ' || wire_name || ' ' || queue || ' ' || labels || ' ' || coalesce(terminal_cause, '')"
            }
        }
    }

    fn contains(haystack: &str, needle: &str) -> String {
        format!("instr(lower({haystack}), lower({needle})) > 0")
    }

    fn has(index: Index) -> bool {
        match index {
            Index::FailedList => true,
        }
    }
}

/// A rendered clause's values as rusqlite binds them.
fn values(args: Vec<Arg>) -> Vec<Value> {
    args.into_iter()
        .map(|a| match a {
            Arg::Text(t) => Value::Text(t),
            Arg::Int(i) => Value::Integer(i),
            Arg::Id(id) => Value::Text(id.to_string()),
        })
        .collect()
}

/// `predicates` as an SQLite condition and its values, in the order of their `?`.
fn sqlite_where(predicates: &[Predicate]) -> (String, Vec<Value>) {
    let w = render::<Sqlite>(predicates, 1);
    (w.sql, values(w.args))
}

impl JobFilter {
    /// The filter as an SQLite condition and its values, in the order of their `?`.
    pub(crate) fn where_clause(&self) -> (String, Vec<Value>) {
        sqlite_where(&self.predicates())
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

    pub fn output(&self, id: JobId) -> Result<Option<Vec<u8>>> {
        let row = self
            .conn
            .prepare_cached("SELECT output FROM jobs WHERE id = ?1")?
            .query_row([id.to_string()], |r| {
                Ok(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Null => None,
                    v => Some(super::row::bytes(v)),
                })
            })
            .optional()?;
        row.ok_or_else(|| crate::error::Error::JobNotFound(id.to_string()))
    }

    pub fn outputs(&self, ids: &[JobId]) -> Result<HashMap<JobId, Vec<u8>>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let list = serde_json::to_string(&ids.iter().map(JobId::to_string).collect::<Vec<_>>())
            .map_err(crate::error::Error::Encode)?;
        let mut read = self.conn.prepare_cached(
            "SELECT id, output FROM jobs WHERE id IN (SELECT value FROM json_each(?1)) AND output IS NOT NULL",
        )?;
        let rows = read.query_map([list], |r| Ok((parse_id(r, 0)?, super::row::bytes(r.get_ref(1)?))))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn wire_names_of(&self, ids: &[JobId]) -> Result<HashMap<JobId, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let list = serde_json::to_string(&ids.iter().map(JobId::to_string).collect::<Vec<_>>())
            .map_err(crate::error::Error::Encode)?;
        Ok(self
            .conn
            .prepare_cached("SELECT id, wire_name FROM jobs WHERE id IN (SELECT value FROM json_each(?1))")?
            .query_map([list], |r| Ok((parse_id(r, 0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?)
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
        let page = page_statement::<Sqlite>(filter, listed_columns(filter), limit, offset, after);
        self.read(|conn| {
            let jobs: Vec<Job> = conn
                .prepare_cached(&page.sql)?
                .query_map(params_from_iter(values(page.args.clone())), job_from_row)?
                .collect::<Result<_, _>>()?;
            let (jobs, next) = page_of(jobs, limit, filter.order());
            let total = count_with(conn, filter)?;
            Ok(JobPage { jobs, total, offset, next })
        })
    }

    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        count_with(&self.conn, filter)
    }

    pub fn explain_list_jobs(&self, filter: &JobFilter, limit: usize) -> Result<Vec<String>> {
        let page = page_statement::<Sqlite>(filter, listed_columns(filter), limit, Some(0), None);
        self.explain(&page.sql, &values(page.args).into_iter().map(RawValue::from).collect::<Vec<_>>())
    }

    pub fn explain_count_jobs(&self, filter: &JobFilter) -> Result<Vec<String>> {
        let (clause, args) = filter.where_clause();
        self.explain(&count_sql(&clause), &args.into_iter().map(RawValue::from).collect::<Vec<_>>())
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
    Ok(conn.prepare_cached(&count_sql(&clause))?.query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

fn count_sql(clause: &str) -> String {
    format!("SELECT count(*) FROM jobs WHERE {clause}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_key_with_quotes_and_backslashes_is_one_key_of_the_json_path() {
        let c = Connection::open_in_memory().unwrap();
        for key in ["odd\"key\\", "\\", "\"", "a.b", "tab\there", "Ünï"] {
            let labels = serde_json::json!({ key: "v", "other": "w" }).to_string();
            let f = JobFilter { labels: vec![(key.to_string(), "v".to_string())], ..Default::default() };
            let (clause, mut args) = f.where_clause();
            args.insert(0, Value::Text(labels));
            let sql = format!("SELECT count(*) FROM (SELECT ? AS labels) WHERE {clause}");
            let n: i64 = c.query_row(&sql, params_from_iter(args), |r| r.get(0)).unwrap();
            assert_eq!(n, 1, "{key:?}");
        }
    }
}
