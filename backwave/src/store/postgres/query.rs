//! Reading the store on PostgreSQL: one job and its history, filtered pages of jobs, and counts,
//! with the same answers as `store/query.rs` (which owns the types, the id matching rules and
//! the sort keys). Every read is one REPEATABLE READ snapshot, so a page and its total agree.

use postgres::types::ToSql;
use uuid::Uuid;

use super::filter::where_clause;
use super::row::{self, JOB_COLUMNS, LISTED_JOB_COLUMNS};
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{Job, JobId, Transition};
use crate::store::query::{id_tail, normalize_prefix, one_id, sort_key};
use crate::store::{Cursor, JobFilter, JobPage, StateCounts};

impl PgStore {
    pub fn job(&self, id: JobId) -> Result<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        self.read(|tx| tx.query_opt(&sql, &[&id.0])?.as_ref().map(row::job).transpose())
    }

    pub fn resolve_id(&self, text: &str) -> Result<JobId> {
        let prefix = normalize_prefix(text)?;
        // The ids a prefix names are one range of the primary key (uuids compare as their
        // bytes, so as their hex text).
        let hex: String = prefix.chars().filter(|c| *c != '-').collect();
        let bound = |pad: char| {
            let digits: String = hex.chars().chain(std::iter::repeat(pad)).take(32).collect();
            Uuid::from_u128(u128::from_str_radix(&digits, 16).expect("normalize_prefix keeps 1 to 32 hex digits"))
        };
        let (lo, hi) = (bound('0'), bound('f'));
        let tail = id_tail(&prefix);
        let found = self.read(|tx| {
            let mut found: Vec<String> = tx
                .query("SELECT id FROM jobs WHERE id BETWEEN $1 AND $2 ORDER BY id LIMIT 6", &[&lo, &hi])?
                .iter()
                .map(|r| r.try_get::<_, Uuid>(0).map(|u| u.to_string()))
                .collect::<Result<_, _>>()?;
            if let Some(tail) = &tail {
                // The last group of a uuid's text has no hyphen, so a tail of up to 12 hex
                // digits matches the text's end as it is; hex needs no LIKE escaping. An
                // index-only scan of the primary key: 0.3 s at a million jobs.
                for r in tx.query("SELECT id FROM jobs WHERE id::text LIKE '%' || $1 ORDER BY id LIMIT 6", &[tail])? {
                    let id = r.try_get::<_, Uuid>(0)?.to_string();
                    if !found.contains(&id) {
                        found.push(id);
                    }
                }
                found.sort();
            }
            Ok(found)
        })?;
        one_id(text, found)
    }

    pub fn history(&self, id: JobId) -> Result<Vec<Transition>> {
        // One job's entries are in `seq` order: each writer logs under the job's row lock, so
        // a later change takes its seq after the earlier one committed.
        let sql = format!("SELECT {} FROM transitions WHERE job_id = $1 ORDER BY seq", self.transition_columns());
        self.read(|tx| tx.query(&sql, &[&id.0])?.iter().map(row::transition).collect())
    }

    pub fn list_jobs(&self, filter: &JobFilter, limit: usize, offset: u64) -> Result<JobPage> {
        self.page(filter, limit, Some(offset), None)
    }

    pub fn list_jobs_after(&self, filter: &JobFilter, limit: usize, cursor: &Cursor) -> Result<JobPage> {
        self.page(filter, limit, None, Some(cursor))
    }

    fn page(&self, filter: &JobFilter, limit: usize, offset: Option<u64>, after: Option<&Cursor>) -> Result<JobPage> {
        let order = filter.order();
        let (col, dir) = (order.column(), if order.descending() { "DESC" } else { "ASC" });
        let clause = where_clause(filter, 1);
        let mut sql = format!("SELECT {LISTED_JOB_COLUMNS} FROM jobs WHERE {}", clause.sql);
        // The page's own parameters, numbered after the filter's.
        let mut own: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        let mut bind = |value: Box<dyn ToSql + Sync>| {
            own.push(value);
            format!("${}", clause.params.len() + own.len())
        };
        if let Some(c) = after {
            let cmp = if order.descending() { "<" } else { ">" };
            let (key, id) = (bind(Box::new(c.key)), bind(Box::new(c.id.0)));
            sql.push_str(&format!(" AND ({col}, id) {cmp} ({key}, {id})"));
        }
        // Clamped: `usize::MAX` means "all", and PostgreSQL takes no LIMIT past i64::MAX.
        let fetch = bind(Box::new(limit.saturating_add(1).min(i64::MAX as usize) as i64));
        let skip = bind(Box::new(offset.unwrap_or(0).min(i64::MAX as u64) as i64));
        sql.push_str(&format!(" ORDER BY {col} {dir}, id {dir} LIMIT {fetch} OFFSET {skip}"));
        self.read(|tx| {
            let mut params = clause.params(&[]);
            params.extend(own.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)));
            let mut jobs: Vec<Job> = tx.query(&sql, &params)?.iter().map(row::job).collect::<Result<_>>()?;
            let more = jobs.len() > limit;
            jobs.truncate(limit);
            let next = match (more, jobs.last()) {
                (true, Some(last)) => Some(Cursor { key: sort_key(last, order), id: last.id }),
                _ => None,
            };
            let total = count_with(tx, filter)?;
            Ok(JobPage { jobs, total, offset, next })
        })
    }

    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.read(|tx| count_with(tx, filter))
    }

    pub fn counts(&self) -> Result<StateCounts> {
        self.read(super::health::counts)
    }

    pub fn wire_names(&self) -> Result<Vec<String>> {
        self.read(|tx| {
            tx.query("SELECT DISTINCT wire_name FROM jobs ORDER BY wire_name", &[])?
                .iter()
                .map(|r| Ok(r.try_get(0)?))
                .collect()
        })
    }
}

fn count_with(tx: &mut Tx<'_>, filter: &JobFilter) -> Result<u64> {
    let clause = where_clause(filter, 1);
    let n: i64 =
        tx.query_one(&format!("SELECT count(*) FROM jobs WHERE {}", clause.sql), &clause.params(&[]))?.try_get(0)?;
    Ok(n as u64)
}
