//! Schema migrations of existing SQLite stores (PostgreSQL's loop is `PgStore::migrate`, over
//! the same markers in `schema-postgres.sql`). Each step is one `BEGIN IMMEDIATE` transaction
//! that re-reads the version under the write lock (two processes opening one old store at once
//! migrate it once) and runs the statements `schema.sql` marks for that version.

use super::SqliteStore;
use crate::error::{Error, Result};
use crate::store::migrate::step_sql;
use crate::store::{SCHEMA_SQL, SCHEMA_VERSION};

/// Bring the store up to [`SCHEMA_VERSION`]; returns the version it is at afterwards.
pub(super) fn migrate(store: &SqliteStore) -> Result<i64> {
    loop {
        let version = store.write(|tx| {
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version >= SCHEMA_VERSION {
                return Ok(version);
            }
            let to = version + 1;
            let sql = step_sql(SCHEMA_SQL, to);
            if sql.trim().is_empty() {
                return Err(Error::NotAStore {
                    path: store.path.clone(),
                    why: format!("this build has no migration from schema version {version} to {to}"),
                });
            }
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version = {to}"))?;
            Ok(to)
        })?;
        if version >= SCHEMA_VERSION {
            return Ok(version);
        }
    }
}
