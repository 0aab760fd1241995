//! What a demo reset empties and when it refuses, written once: the tables both schemas have
//! (a backend adds its own), and the refusal of a store the demo did not make.

use crate::error::Error;
use crate::store::StoreTarget;

/// Every table both schemas have (SQLite keeps the version in `PRAGMA user_version`,
/// PostgreSQL adds its own tables), the log before the jobs it refers to: SQLite deletes from
/// them in this order.
pub(crate) const TABLES: [&str; 13] = [
    "transitions",
    "job_edges",
    "workflows",
    "jobs",
    "job_counts",
    "workers",
    "pauses",
    "limits",
    "limit_windows",
    "schedules",
    "grants",
    "audit",
    "settings",
];

/// The refusal of a reset on a store the demo did not make.
pub(crate) fn not_a_demo_store(target: &StoreTarget) -> Error {
    Error::InvalidInput(format!(
        "'{target}' is not a demo store: only a store marked as a demo store (`Store::mark_demo`) is ever emptied"
    ))
}

/// The names of the tables `sql` creates, in order.
#[cfg(test)]
pub(crate) fn created_tables(sql: &str) -> Vec<String> {
    sql.lines()
        .filter_map(|l| l.trim_start().strip_prefix("CREATE TABLE "))
        .filter_map(|rest| rest.split(|c: char| c.is_whitespace() || c == '(').next())
        .map(str::to_string)
        .collect()
}
