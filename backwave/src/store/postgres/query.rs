//! Reading the store on PostgreSQL: one job and its history, filtered pages of jobs, and counts,
//! with the same answers as `sqlite/query.rs` (the filter and its order are `store/filter.rs`,
//! the id matching rules `store/id_prefix.rs`). Every read is one REPEATABLE READ snapshot, so
//! a page and its total agree.

use std::collections::HashMap;

use uuid::Uuid;

use super::filter::{where_clause, Postgres, Where};
use super::row::{self, listed_columns, JOB_COLUMNS};
use super::{PgStore, Tx};
use crate::error::Result;
use crate::model::{Job, JobId, Transition};
use crate::store::filter::{page_of, page_statement};
use crate::store::id_prefix::{id_tail, normalize_prefix, one_id};
use crate::store::{Cursor, JobFilter, JobPage, StateCounts};

impl PgStore {
    pub fn job(&self, id: JobId) -> Result<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        self.read(|tx| tx.query_opt(&sql, &[&id.0])?.as_ref().map(row::job).transpose())
    }

    pub fn output(&self, id: JobId) -> Result<Option<Vec<u8>>> {
        let row = self.read(|tx| tx.query_opt("SELECT output FROM jobs WHERE id = $1", &[&id.0]))?;
        match row {
            Some(r) => Ok(r.try_get(0)?),
            None => Err(crate::error::Error::JobNotFound(id.to_string())),
        }
    }

    pub fn outputs(&self, ids: &[JobId]) -> Result<HashMap<JobId, Vec<u8>>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let uuids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        self.read(|tx| {
            tx.query("SELECT id, output FROM jobs WHERE id = ANY($1) AND output IS NOT NULL", &[&uuids])?
                .iter()
                .map(|r| Ok((JobId(r.try_get(0)?), r.try_get(1)?)))
                .collect()
        })
    }

    pub fn wire_names_of(&self, ids: &[JobId]) -> Result<HashMap<JobId, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let uuids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        self.read(|tx| {
            tx.query("SELECT id, wire_name FROM jobs WHERE id = ANY($1)", &[&uuids])?
                .iter()
                .map(|r| Ok((JobId(r.try_get(0)?), r.try_get(1)?)))
                .collect()
        })
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
        let page: Where = page_statement::<Postgres>(filter, listed_columns(filter), limit, offset, after).into();
        self.read(|tx| {
            let jobs: Vec<Job> =
                tx.query_planned(&page.sql, &page.params(&[]))?.iter().map(row::job).collect::<Result<_>>()?;
            let (jobs, next) = page_of(jobs, limit, filter.order());
            let total = count_with(tx, filter)?;
            Ok(JobPage { jobs, total, offset, next })
        })
    }

    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.read(|tx| count_with(tx, filter))
    }

    pub fn explain_list_jobs(&self, filter: &JobFilter, limit: usize) -> Result<Vec<String>> {
        let page: Where = page_statement::<Postgres>(filter, listed_columns(filter), limit, Some(0), None).into();
        self.read(|tx| {
            tx.query(&format!("EXPLAIN {}", page.sql), &page.params(&[]))?.iter().map(|r| Ok(r.try_get(0)?)).collect()
        })
    }

    pub fn explain_count_jobs(&self, filter: &JobFilter) -> Result<Vec<String>> {
        let clause = where_clause(filter, 1);
        self.read(|tx| {
            tx.query(&format!("EXPLAIN {}", count_sql(&clause.sql)), &clause.params(&[]))?
                .iter()
                .map(|r| Ok(r.try_get(0)?))
                .collect()
        })
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
    let n: i64 = tx.query_planned_one(&count_sql(&clause.sql), &clause.params(&[]))?.try_get(0)?;
    Ok(n as u64)
}

fn count_sql(clause: &str) -> String {
    format!("SELECT count(*) FROM jobs WHERE {clause}")
}
