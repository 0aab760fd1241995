//! Starting a demo store over on PostgreSQL (`bw demo --reset` on a URL): the same promise as
//! `sqlite/demo.rs`, for a database `bw` cannot delete. One transaction reads the demo mark and
//! truncates every BackWave table but the schema version together. `TRUNCATE` takes each
//! table's exclusive lock: it waits for the transactions of workers still running on the store
//! (up to the lock timeout, then `Error::Busy`, nothing emptied), and theirs wait for it, so
//! nothing lands in a half-emptied store. It fires no row triggers: the count deltas are
//! emptied with the counts, which stay exact (zero).

use super::PgStore;
use crate::error::Result;
use crate::store::ops::demo::{not_a_demo_store, TABLES};
use crate::store::StoreTarget;

/// The tables of `schema-postgres.sql` beside those both schemas have (`backwave_schema`, the
/// version, stays).
const PG_TABLES: [&str; 1] = ["job_count_deltas"];

impl PgStore {
    pub fn reset_demo(&self) -> Result<()> {
        self.write(|tx| {
            if tx.query_opt("SELECT 1 FROM settings WHERE key = 'store_kind' AND value = 'demo'", &[])?.is_none() {
                return Err(not_a_demo_store(&StoreTarget::Postgres(self.url().clone())));
            }
            let tables: Vec<&str> = TABLES.iter().chain(&PG_TABLES).copied().collect();
            tx.batch(&format!("TRUNCATE {}", tables.join(", ")))?;
            tx.execute("INSERT INTO settings (key, value) VALUES ('store_kind', 'demo')", &[])?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ops::demo::created_tables;
    use crate::store::postgres::SCHEMA_POSTGRES_SQL;

    #[test]
    fn the_reset_empties_every_table_of_the_schema_but_its_version() {
        let mut tables = created_tables(SCHEMA_POSTGRES_SQL);
        tables.retain(|t| t != "backwave_schema");
        let mut emptied: Vec<String> = TABLES.iter().chain(&PG_TABLES).map(|t| t.to_string()).collect();
        tables.sort();
        emptied.sort();
        assert!(!tables.is_empty());
        assert_eq!(emptied, tables, "schema-postgres.sql's tables and the ones a demo reset empties");
    }
}
