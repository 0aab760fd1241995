//! The test and benchmark hooks on SQLite (see `store/raw.rs`): SQL text run on the store's own
//! connection, a statement's step counters, and a plain connection that stands in for another
//! program. Their SQL is SQLite's.

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{StatementStatus, ToSql};

use super::SqliteStore;
use crate::error::Result;
use crate::store::RawValue;

impl ToSql for RawValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            RawValue::Null => ValueRef::Null,
            RawValue::Integer(i) => ValueRef::Integer(*i),
            RawValue::Real(f) => ValueRef::Real(*f),
            RawValue::Text(s) => ValueRef::Text(s.as_bytes()),
            RawValue::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl From<Value> for RawValue {
    fn from(v: Value) -> Self {
        match v {
            Value::Null => RawValue::Null,
            Value::Integer(i) => RawValue::Integer(i),
            Value::Real(f) => RawValue::Real(f),
            Value::Text(s) => RawValue::Text(s),
            Value::Blob(b) => RawValue::Blob(b),
        }
    }
}

/// A statement's counters after it ran: SQLite's `sqlite3_stmt_status`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatementStats {
    pub vm_steps: i32,
    pub fullscan_steps: i32,
    pub sorts: i32,
    pub reprepares: i32,
}

/// Prepared statements handed to the closure of [`Store::raw_statements`].
#[doc(hidden)]
pub struct RawStatements<'c> {
    stmts: Vec<rusqlite::Statement<'c>>,
}

impl RawStatements<'_> {
    /// Run statement `i` with `params` and read at most `max_rows` rows of it.
    pub fn query(&mut self, i: usize, params: &[RawValue], max_rows: usize) -> Result<Vec<Vec<RawValue>>> {
        let stmt = &mut self.stmts[i];
        let n = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while out.len() < max_rows {
            let Some(row) = rows.next()? else { break };
            out.push((0..n).map(|c| row.get::<_, Value>(c).map(RawValue::from)).collect::<Result<_, _>>()?);
        }
        Ok(out)
    }
}

#[doc(hidden)]
impl SqliteStore {
    pub fn raw_execute(&self, sql: &str, params: &[RawValue]) -> Result<usize> {
        Ok(self.conn.execute(sql, rusqlite::params_from_iter(params))?)
    }

    pub fn raw_batch(&self, sql: &str) -> Result<()> {
        Ok(self.conn.execute_batch(sql)?)
    }

    pub fn raw_query(&self, sql: &str, params: &[RawValue]) -> Result<Vec<Vec<RawValue>>> {
        let (rows, _) = self.raw_statements(&[sql], |s| s.query(0, params, usize::MAX))?;
        rows
    }

    pub fn raw_scalar(&self, sql: &str, params: &[RawValue]) -> Result<RawValue> {
        let mut rows = self.raw_statements(&[sql], |s| s.query(0, params, 1))?.0?;
        Ok(rows.pop().and_then(|r| r.into_iter().next()).unwrap_or(RawValue::Null))
    }

    pub fn pragma(&self, name: &str) -> Result<RawValue> {
        self.raw_scalar(&format!("PRAGMA {name}"), &[])
    }

    pub fn explain(&self, sql: &str, params: &[RawValue]) -> Result<Vec<String>> {
        let rows = self.raw_query(&format!("EXPLAIN QUERY PLAN {sql}"), params)?;
        Ok(rows.into_iter().map(|r| r[3].as_str().to_string()).collect())
    }

    /// Prepare each of `sqls` once, let `f` run them as often as it likes, and return what it
    /// returned with each statement's counters afterwards (in the order of `sqls`).
    pub fn raw_statements<T>(
        &self,
        sqls: &[&str],
        f: impl FnOnce(&mut RawStatements<'_>) -> T,
    ) -> Result<(T, Vec<StatementStats>)> {
        let stmts = sqls.iter().map(|sql| self.conn.prepare(sql)).collect::<Result<Vec<_>, _>>()?;
        let mut raw = RawStatements { stmts };
        let value = f(&mut raw);
        let stats = raw
            .stmts
            .iter()
            .map(|s| StatementStats {
                vm_steps: s.get_status(StatementStatus::VmStep),
                fullscan_steps: s.get_status(StatementStatus::FullscanStep),
                sorts: s.get_status(StatementStatus::Sort),
                reprepares: s.get_status(StatementStatus::RePrepare),
            })
            .collect();
        Ok((value, stats))
    }
}

/// A plain SQLite connection to a file, opened without any of `Store`'s checks, pragmas or
/// migration: for tests that stand in for another program (craft a legacy or foreign file,
/// hold the write lock as another writer would, read a store "not through the code under
/// test").
#[doc(hidden)]
pub struct RawConnection(rusqlite::Connection);

impl RawConnection {
    /// Open (or create) the file at `path`.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<RawConnection> {
        Ok(RawConnection(rusqlite::Connection::open(path)?))
    }

    /// Run several `;`-separated statements, without parameters.
    pub fn batch(&self, sql: &str) -> Result<()> {
        Ok(self.0.execute_batch(sql)?)
    }

    /// Every row of one query, each a `Vec` of its columns in order.
    pub fn query(&self, sql: &str, params: &[RawValue]) -> Result<Vec<Vec<RawValue>>> {
        let mut raw = RawStatements { stmts: vec![self.0.prepare(sql)?] };
        raw.query(0, params, usize::MAX)
    }
}
