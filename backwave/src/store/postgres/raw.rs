//! The hidden test hooks on PostgreSQL: SQL text run on the store's own connection, rows handed
//! back as plain values (integers, text, bytes; everything else as its text). Parameters bind as
//! their Rust types: cast in the SQL (`$1::uuid`) where a column wants another.

use postgres::types::{ToSql, Type};
use postgres::Row;

use super::PgStore;
use crate::error::{Error, Result};
use crate::store::raw::RawValue;

fn params(values: &[RawValue]) -> Vec<Box<dyn ToSql + Sync>> {
    values
        .iter()
        .map(|v| -> Box<dyn ToSql + Sync> {
            match v {
                RawValue::Null => Box::new(None::<String>),
                RawValue::Integer(i) => Box::new(*i),
                RawValue::Real(f) => Box::new(*f),
                RawValue::Text(s) => Box::new(s.clone()),
                RawValue::Blob(b) => Box::new(b.clone()),
            }
        })
        .collect()
}

fn value(r: &Row, i: usize) -> Result<RawValue> {
    let t = r.columns()[i].type_();
    Ok(if *t == Type::INT8 {
        r.try_get::<_, Option<i64>>(i)?.map_or(RawValue::Null, RawValue::Integer)
    } else if *t == Type::INT4 {
        r.try_get::<_, Option<i32>>(i)?.map_or(RawValue::Null, |v| RawValue::Integer(v.into()))
    } else if *t == Type::INT2 {
        r.try_get::<_, Option<i16>>(i)?.map_or(RawValue::Null, |v| RawValue::Integer(v.into()))
    } else if *t == Type::BOOL {
        r.try_get::<_, Option<bool>>(i)?.map_or(RawValue::Null, |v| RawValue::Integer(v.into()))
    } else if *t == Type::FLOAT8 {
        r.try_get::<_, Option<f64>>(i)?.map_or(RawValue::Null, RawValue::Real)
    } else if *t == Type::BYTEA {
        r.try_get::<_, Option<Vec<u8>>>(i)?.map_or(RawValue::Null, RawValue::Blob)
    } else if *t == Type::UUID {
        r.try_get::<_, Option<uuid::Uuid>>(i)?.map_or(RawValue::Null, |u| RawValue::Text(u.to_string()))
    } else if *t == Type::JSON || *t == Type::JSONB {
        r.try_get::<_, Option<serde_json::Value>>(i)?.map_or(RawValue::Null, |j| RawValue::Text(j.to_string()))
    } else if *t == Type::TEXT || *t == Type::VARCHAR || *t == Type::NAME || *t == Type::BPCHAR {
        r.try_get::<_, Option<String>>(i)?.map_or(RawValue::Null, RawValue::Text)
    } else {
        r.try_get::<_, Option<Other>>(i)?.map_or(RawValue::Null, |o| o.0)
    })
}

/// A value of any other type, from its binary form: the 8-byte integers PostgreSQL has no Rust
/// type for (`xid8`) as integers, anything else as its bytes read as text.
struct Other(RawValue);

impl<'a> postgres::types::FromSql<'a> for Other {
    fn from_sql(t: &Type, raw: &'a [u8]) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        if *t == Type::XID8 {
            let bytes: [u8; 8] = raw.try_into()?;
            return Ok(Other(RawValue::Integer(u64::from_be_bytes(bytes) as i64)));
        }
        Ok(Other(RawValue::Text(String::from_utf8_lossy(raw).into_owned())))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

fn rows(rows: Vec<Row>) -> Result<Vec<Vec<RawValue>>> {
    rows.iter().map(|r| (0..r.len()).map(|i| value(r, i)).collect()).collect()
}

fn sqlite_only(what: &str) -> Error {
    Error::InvalidInput(format!("{what} is a test hook for SQLite stores only"))
}

#[doc(hidden)]
impl PgStore {
    pub fn raw_execute(&self, sql: &str, values: &[RawValue]) -> Result<usize> {
        let p = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = p.iter().map(|b| b.as_ref()).collect();
        self.with_client(|c| Ok(c.execute(sql, &refs)? as usize))
    }

    pub fn raw_batch(&self, sql: &str) -> Result<()> {
        self.with_client(|c| Ok(c.batch_execute(sql)?))
    }

    pub fn raw_query(&self, sql: &str, values: &[RawValue]) -> Result<Vec<Vec<RawValue>>> {
        let p = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = p.iter().map(|b| b.as_ref()).collect();
        self.with_client(|c| rows(c.query(sql, &refs)?))
    }

    pub fn raw_scalar(&self, sql: &str, values: &[RawValue]) -> Result<RawValue> {
        let rows = self.raw_query(sql, values)?;
        Ok(rows.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(RawValue::Null))
    }

    pub fn pragma(&self, _name: &str) -> Result<RawValue> {
        Err(sqlite_only("pragma"))
    }

    pub fn explain(&self, sql: &str, values: &[RawValue]) -> Result<Vec<String>> {
        let rows = self.raw_query(&format!("EXPLAIN {sql}"), values)?;
        Ok(rows.into_iter().map(|r| r[0].as_str().to_string()).collect())
    }
}
