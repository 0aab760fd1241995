//! What every insert path checks of a new job and derives for it, on both backends and for
//! `enqueue_in_*` in an application's transaction: names, uniqueness rules, the jitter seed kept
//! with the job and the delay table a claim carries.

use crate::error::{Error, Result};
use crate::model::{validate_name, Enqueued, JobId, NewJob};
use crate::retry::{BackoffFn, RetryPolicy};
use crate::store::unique;

/// What every insert path checks of new jobs before it writes, on both backends: their names
/// and their uniqueness rules (the payload limit is read in the writing transaction).
pub(crate) fn validate_new_jobs(jobs: &[NewJob]) -> Result<()> {
    for job in jobs {
        validate_name("wire name", &job.wire_name)?;
        validate_name("queue", &job.queue)?;
        if let Some(tp) = &job.traceparent {
            if !crate::model::is_traceparent(tp) {
                return Err(Error::InvalidInput(format!(
                    "the traceparent {tp:?} is not a W3C traceparent (version-trace id-parent id-flags, lower-case hex)"
                )));
            }
        }
        crate::model::check_priority("the priority", job.priority)?;
    }
    unique::validate_all(jobs)
}

/// A per-job jitter seed, taken from the random bits of its id.
pub(crate) fn jitter_seed(id: &JobId) -> i64 {
    let b = id.0.as_bytes();
    i64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

/// The seed a claim draws jitter from: the one kept with the job, or, for a job written by
/// another program that left the default 0, one derived from its id (still the same at every
/// claim, and different between jobs so that they do not retry in lockstep).
pub(crate) fn effective_seed(stored: i64, id: &JobId) -> u64 {
    if stored != 0 {
        stored as u64
    } else {
        jitter_seed(id) as u64
    }
}

pub(crate) fn seed_independent(policy: &RetryPolicy) -> bool {
    match policy.backoff() {
        BackoffFn::Curve(b) => b.jitter_value() == 0.0,
        BackoffFn::Func(_) => true,
    }
}

/// A delay table as the job row holds it (JSON) and as the claimed [`Job`](crate::Job) carries it.
pub(crate) struct DelayTable {
    pub(crate) ms: Vec<u64>,
    pub(crate) json: String,
}

impl DelayTable {
    pub(crate) fn new(policy: &RetryPolicy, seed: u64) -> Self {
        let ms = policy.delay_table_ms(seed);
        let json = serde_json::to_string(&ms).unwrap_or_else(|_| "[]".into());
        DelayTable { ms, json }
    }
}

/// What an `enqueue_in_*` answered, told on its span.
pub(crate) fn answered(span: &tracing::Span, done: Result<Enqueued>) -> Result<Enqueued> {
    crate::telemetry::enqueued(span, done.as_ref().map(std::slice::from_ref));
    done
}
