//! Enqueue inside the application's own SQLite transaction: the job exists if and only if the
//! application's transaction commits, written by the store's own insert code on the
//! application's `rusqlite` transaction.

use super::jobs::insert_jobs;
use crate::error::{Error, Result};
use crate::model::{system_now, Enqueued, NewJob};
use crate::store::ops::enqueue::{answered, validate_new_jobs};
use crate::store::SCHEMA_VERSION;

/// Enqueue `job` in the application's own transaction on the store's SQLite file: the same
/// validation, payload limit, unique rule, counts and log entry as [`Store::insert`](crate::Store::insert),
/// written by the same code, and nothing of it stays if `tx` rolls back. Committed, the job is
/// claimable at once (its due time is the system clock's now, or `job.due_at`).
///
/// Start `tx` with [`TransactionBehavior::Immediate`](rusqlite::TransactionBehavior::Immediate)
/// as the store does, so it never fails half-way on a lock upgrade. The file must be a store at
/// this build's schema version: create it with `Store::create` first (it migrates an older one),
/// then add the application's tables to it.
pub fn enqueue_in_sqlite(tx: &rusqlite::Transaction<'_>, job: &NewJob) -> Result<Enqueued> {
    let span = crate::telemetry::enqueue_span(std::slice::from_ref(job));
    let traced = crate::otel::stamp(std::slice::from_ref(job), &span);
    let done = span.in_scope(|| sqlite_insert(tx, &traced[0]));
    answered(&span, done)
}

fn sqlite_insert(tx: &rusqlite::Transaction<'_>, job: &NewJob) -> Result<Enqueued> {
    let jobs = std::slice::from_ref(job);
    validate_new_jobs(jobs)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version != SCHEMA_VERSION {
        let path = tx.path().unwrap_or("an in-memory database").into();
        return Err(if version > SCHEMA_VERSION {
            Error::SchemaTooNew { path, found: version, supported: SCHEMA_VERSION }
        } else {
            Error::NotAStore {
                path,
                why: format!(
                    "its schema version is {version}, not {SCHEMA_VERSION}: create or migrate it with Store::create first"
                ),
            }
        });
    }
    Ok(insert_jobs(tx, jobs, system_now())?[0])
}
