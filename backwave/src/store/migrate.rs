//! Schema migrations of existing stores (SQLite here; PostgreSQL's loop is `PgStore::migrate`,
//! over the same markers in `schema-postgres.sql`). Each step is one `BEGIN IMMEDIATE` transaction that
//! re-reads the version under the write lock (two processes opening one old store at once
//! migrate it once) and runs the statements `schema.sql` marks for that version: the contract
//! file stays the only place the schema is written. Steps are additive: an older `bw` refuses
//! the migrated store by its version rather than misreading it.

use super::{SqliteStore, SCHEMA_SQL, SCHEMA_VERSION};
use crate::error::{Error, Result};

/// The statements of a contract file (`schema.sql`, `schema-postgres.sql`) between
/// `-- migration N begin` and `-- migration N end`.
pub(super) fn step_sql(schema: &'static str, to: i64) -> &'static str {
    let begin = format!("-- migration {to} begin");
    let end = format!("-- migration {to} end");
    let start = schema.find(&begin).map(|i| i + begin.len());
    let stop = schema.find(&end);
    match (start, stop) {
        (Some(a), Some(b)) if a <= b => &schema[a..b],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_step_is_marked_in_schema_sql() {
        for to in 2..=SCHEMA_VERSION {
            // A step for PostgreSQL alone says so in SQLite's file, where it only moves the version.
            let sql = step_sql(SCHEMA_SQL, to);
            assert!(
                sql.contains("CREATE") || sql.contains("ALTER") || sql.contains("-- nothing on SQLite"),
                "schema.sql has no statements marked for migration {to}"
            );
        }
    }

    /// PostgreSQL's blocks start after its base version (2) and each sets the version row, so a
    /// migration and the whole file applied by psql end at the same version.
    #[cfg(feature = "postgres")]
    #[test]
    fn every_postgres_migration_step_is_marked_and_sets_its_version() {
        use crate::store::postgres::SCHEMA_POSTGRES_SQL;
        for to in 3..=SCHEMA_VERSION {
            let sql = step_sql(SCHEMA_POSTGRES_SQL, to);
            // A step for SQLite alone says so here, and only sets the version row.
            assert!(
                sql.contains("CREATE")
                    || sql.contains("ALTER")
                    || sql.contains("DROP")
                    || sql.contains("-- nothing on PostgreSQL"),
                "schema-postgres.sql has no statements marked for migration {to}"
            );
            assert!(
                sql.contains(&format!("UPDATE backwave_schema SET version = {to};")),
                "migration {to} of schema-postgres.sql does not set the version row to {to}"
            );
        }
        for to in [SCHEMA_VERSION + 1, 2] {
            assert_eq!(
                step_sql(SCHEMA_POSTGRES_SQL, to),
                "",
                "schema-postgres.sql marks a migration {to} this build does not know"
            );
        }
    }
}
