//! Schema migrations of existing stores. Each step is one `BEGIN IMMEDIATE` transaction that
//! re-reads the version under the write lock (two processes opening one old store at once
//! migrate it once) and runs the statements `schema.sql` marks for that version: the contract
//! file stays the only place the schema is written. Steps are additive: an older `bw` refuses
//! the migrated store by its version rather than misreading it.

use super::{SqliteStore, SCHEMA_SQL, SCHEMA_VERSION};
use crate::error::{Error, Result};

/// The statements of `schema.sql` between `-- migration N begin` and `-- migration N end`.
fn step_sql(to: i64) -> &'static str {
    let begin = format!("-- migration {to} begin");
    let end = format!("-- migration {to} end");
    let start = SCHEMA_SQL.find(&begin).map(|i| i + begin.len());
    let stop = SCHEMA_SQL.find(&end);
    match (start, stop) {
        (Some(a), Some(b)) if a <= b => &SCHEMA_SQL[a..b],
        // A build whose schema.sql lost its markers must not compile into a silent no-op:
        // the test `every_migration_step_is_marked_in_schema_sql` guards this.
        _ => "",
    }
}

/// Bring the store up to [`SCHEMA_VERSION`]; returns the version it is at afterwards.
pub(super) fn migrate(store: &SqliteStore) -> Result<i64> {
    loop {
        let version = store.write(|tx| {
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version >= SCHEMA_VERSION {
                return Ok(version);
            }
            let to = version + 1;
            let sql = step_sql(to);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_step_is_marked_in_schema_sql() {
        for to in 2..=SCHEMA_VERSION {
            assert!(!step_sql(to).trim().is_empty(), "schema.sql has no section marked for migration {to}");
        }
    }
}
