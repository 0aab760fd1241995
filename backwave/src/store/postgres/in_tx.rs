//! Enqueue inside the application's own PostgreSQL transaction: the job exists if and only if
//! the application's transaction commits, through the schema's `backwave_enqueue_bytes`
//! function (migration 9), the same SQL any other driver or language calls.

use crate::error::{Error, Result};
use crate::model::{Enqueued, NewJob, UniqueBy};
use crate::store::ops::enqueue::{answered, validate_new_jobs};

/// The statement both PostgreSQL forms run: one call of the schema's function, found through the
/// connection's `search_path` (the store's schema must be on it, as it is for the store's URL).
const ENQUEUE_SQL: &str =
    "SELECT job_id, created FROM backwave_enqueue_bytes($1, $2, $3, $4, $5::text::jsonb, $6, $7, $8, $9, $10, $11)";

/// The arguments of [`ENQUEUE_SQL`] for `job`, validated as the store validates them so that a
/// library caller gets the library's errors.
struct Args {
    labels: String,
    unique_key: Option<String>,
    by_payload: bool,
    states: Option<Vec<String>>,
    period_ms: Option<i64>,
    priority: i64,
}

impl Args {
    fn of(job: &NewJob) -> Result<Args> {
        validate_new_jobs(std::slice::from_ref(job))?;
        let labels = serde_json::to_string(&job.labels).map_err(Error::Encode)?;
        let rule = job.unique.as_ref();
        Ok(Args {
            labels,
            unique_key: rule.and_then(|r| match &r.by {
                UniqueBy::Key(k) => Some(k.clone()),
                UniqueBy::Payload => None,
            }),
            by_payload: rule.is_some_and(|r| r.by == UniqueBy::Payload),
            states: rule.map(|r| r.states.iter().map(|s| s.as_str().to_string()).collect()),
            // As `unique::columns`: a period under 1 ms was refused above.
            period_ms: rule.and_then(|r| r.period).map(|p| i64::try_from(p.as_millis()).unwrap_or(i64::MAX)),
            priority: i64::from(job.priority),
        })
    }

    fn params<'a>(&'a self, job: &'a NewJob) -> [&'a (dyn postgres::types::ToSql + Sync); 11] {
        [
            &job.wire_name,
            &job.payload,
            &job.queue,
            &job.due_at,
            &self.labels,
            &self.unique_key,
            &self.by_payload,
            &self.states,
            &self.period_ms,
            &job.traceparent,
            &self.priority,
        ]
    }
}

fn answer(row: &postgres::Row) -> Result<Enqueued> {
    let id = crate::model::JobId(row.try_get(0)?);
    Ok(if row.try_get(1)? { Enqueued::Created(id) } else { Enqueued::Duplicate(id) })
}

/// The function's payload refusal as the library words it (`Error::PayloadTooLarge`), from its
/// message `backwave: a payload of N bytes is over the store's payload_limit of L bytes`.
fn map_error(e: postgres::Error) -> Error {
    let too_large =
        e.as_db_error().filter(|d| d.code() == &postgres::error::SqlState::PROGRAM_LIMIT_EXCEEDED).and_then(|d| {
            let numbers: Vec<u64> = d.message().split(' ').filter_map(|w| w.parse().ok()).collect();
            match numbers[..] {
                [bytes, limit] if d.message().starts_with("backwave: a payload of") => {
                    Some(Error::PayloadTooLarge { bytes, limit, job: None })
                }
                _ => None,
            }
        });
    too_large.unwrap_or_else(|| e.into())
}

/// Enqueue `job` in the application's own PostgreSQL transaction (the blocking `postgres`
/// client), through the schema's `backwave_enqueue_bytes` function: the store's validation,
/// payload limit, unique rule, counts and log entry, and nothing of it if `tx` rolls back.
/// Times are the database clock's. The store's schema must be on the connection's `search_path`.
pub fn enqueue_in_postgres(tx: &mut postgres::Transaction<'_>, job: &NewJob) -> Result<Enqueued> {
    let span = crate::telemetry::enqueue_span(std::slice::from_ref(job));
    let traced = crate::otel::stamp(std::slice::from_ref(job), &span);
    let job = &traced[0];
    let done = span.in_scope(|| {
        let args = Args::of(job)?;
        let row = tx.query_one(ENQUEUE_SQL, &args.params(job)).map_err(map_error)?;
        answer(&row)
    });
    answered(&span, done)
}

/// [`enqueue_in_postgres`] for an application on `tokio-postgres` (a `Transaction`, or any
/// `GenericClient` already inside one).
pub async fn enqueue_in_tokio_postgres(tx: &impl tokio_postgres::GenericClient, job: &NewJob) -> Result<Enqueued> {
    use tracing::Instrument;
    let span = crate::telemetry::enqueue_span(std::slice::from_ref(job));
    let traced = crate::otel::stamp(std::slice::from_ref(job), &span);
    let job = &traced[0];
    let done = async {
        let args = Args::of(job)?;
        let row = tx.query_one(ENQUEUE_SQL, &args.params(job)).await.map_err(map_error)?;
        answer(&row)
    }
    .instrument(span.clone())
    .await;
    answered(&span, done)
}
