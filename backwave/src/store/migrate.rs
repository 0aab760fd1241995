//! Schema migrations of existing stores, as the contract files mark them: the statements of
//! each step stand in `schema.sql` and `schema-postgres.sql` between markers, so the contract
//! files stay the only place the schema is written. The loops that run them are
//! `sqlite/migrate.rs` and `PgStore::migrate`. Steps are additive: an older `bw` refuses the
//! migrated store by its version rather than misreading it.

/// The statements of a contract file (`schema.sql`, `schema-postgres.sql`) between
/// `-- migration N begin` and `-- migration N end`.
pub(crate) fn step_sql(schema: &'static str, to: i64) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SCHEMA_SQL, SCHEMA_VERSION};

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

    /// The whole file, as `sqlite3 my.db < schema.sql` applies it, makes a store of the version
    /// this build writes (schema.sql's versions 20 and 21 once left it labelled 19, so such a
    /// store read as older than it was and was migrated again on its first writable open).
    #[test]
    fn the_whole_schema_sql_labels_its_store_with_this_builds_version() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA_SQL).unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION, "schema.sql's PRAGMA user_version");
        let header = format!("-- BackWave store contract, schema version {SCHEMA_VERSION}.");
        assert!(SCHEMA_SQL.starts_with(&header), "schema.sql's first line is not {header:?}");
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
