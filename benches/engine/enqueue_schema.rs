//! `BW_BENCH_ONLY=enqueue-schema`: SQLite `enqueue_many` on schema 11 against the same store put
//! back to schema 10's insert path (its two row triggers and its id CHECK), in one run of one
//! binary, alternating, best of 3 (issue 23): the only way to compare the two on this machine.

use std::path::Path;

use backwave::store::SCHEMA_SQL;
use backwave::Store;

/// Migration 11's id pattern, as it stands in the table's text.
const NEW_ID_CHECK: &str = "AND id GLOB '[0-9a-f-]";
const OLD_ID_CHECK: &str = "AND NOT id GLOB '*[^0-9a-f-]*'";

/// The statement of `schema.sql` that starts with `start` and ends at its `END;`.
fn trigger_sql(start: &str) -> &'static str {
    let at = SCHEMA_SQL.find(start).expect("the trigger in schema.sql");
    let end = at + SCHEMA_SQL[at..].find("END;").expect("its END") + "END;".len();
    &SCHEMA_SQL[at..end]
}

/// Put a schema-11 store's insert path back to schema 10's.
fn to_schema_10(path: &Path) {
    let conn = backwave::rusqlite::Connection::open(path).expect("open the store");
    let table: String = conn
        .query_row("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'jobs'", [], |r| r.get(0))
        .expect("the jobs table");
    let from = table.find(NEW_ID_CHECK).expect("schema 11's id CHECK");
    let to = from + NEW_ID_CHECK.len() + table[from + NEW_ID_CHECK.len()..].find('\'').expect("its end") + 1;
    let old_table = format!("{}{OLD_ID_CHECK}{}", &table[..from], &table[to..]);
    conn.execute_batch(&format!(
        "BEGIN;
         DROP TRIGGER jobs_insert;
         {}
         {}
         PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET sql = '{}' WHERE type = 'table' AND name = 'jobs';
         PRAGMA writable_schema = RESET;
         COMMIT;",
        trigger_sql("CREATE TRIGGER jobs_count_insert"),
        trigger_sql("CREATE TRIGGER jobs_payload_limit_insert"),
        old_table.replace('\'', "''")
    ))
    .expect("back to schema 10's insert path");
}

/// Both schemas keep the counts exact: the triggers' count against a recount.
fn counts_exact(path: &Path, n: usize) {
    let conn = backwave::rusqlite::Connection::open(path).expect("open the store");
    let (kept, counted, logged): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT sum(n) FROM job_counts WHERE state = 'scheduled'),
                    (SELECT count(*) FROM jobs WHERE state = 'scheduled'),
                    (SELECT count(*) FROM transitions WHERE from_state IS NULL)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the counts");
    assert_eq!((kept, counted, logged), (n as i64, n as i64, n as i64), "counts, rows and creation entries");
}

pub fn rows(dir: &Path, n: usize, row: &mut impl FnMut(String, String, String)) {
    let mut best = [0.0f64; 2];
    for run in 0..3 {
        for (i, old) in [true, false].into_iter().enumerate() {
            let path = dir.join(format!("enqueue-schema-{i}-{run}.db"));
            drop(Store::create(&path).expect("create store"));
            if old {
                to_schema_10(&path);
            }
            let store = Store::open(&path).expect("open store");
            best[i] = best[i].max(super::enqueue(&store, n, 0));
            counts_exact(&path, n);
        }
    }
    row(
        "enqueue, schema 10's insert triggers and id CHECK (best of 3)".into(),
        format!("{:.0}", best[0]),
        String::new(),
    );
    row(
        "enqueue, schema 11: one insert trigger, one-pass id CHECK (best of 3)".into(),
        format!("{:.0}", best[1]),
        format!("{:.2}x schema 10", best[1] / best[0]),
    );
}
