//! What the library tells `tracing`: a producer span per enqueue, a consumer span per attempt,
//! named and attributed by the OpenTelemetry messaging conventions, and events for the engine's
//! changes of state. It never installs a subscriber and never formats anything a subscriber has
//! not asked for: with none installed, each span or event is one relaxed load and a branch.
//!
//! The names below are the contract a dashboard or a test reads; see docs/embedding.md
//! ("Tracing and OpenTelemetry") for what each event means to an application.

use tracing::field::Empty;
use tracing::Span;

use crate::engine::JobContext;
use crate::model::{Enqueued, Job, JobState, Millis, NewJob};
use crate::store::{Fenced, Outcome};

pub use crate::otel::traceparent_of;

/// The span of one enqueue call ([`Store::insert_many`](crate::Store::insert_many) and every
/// call that ends in it, and the `enqueue_in_*` functions): OpenTelemetry kind `producer`.
pub const ENQUEUE_SPAN: &str = "backwave.enqueue";
/// The span of one attempt of one job, from its start on a handler thread (or slot task) until
/// the store has taken its outcome: OpenTelemetry kind `consumer`. The handler's own spans and
/// events nest inside it.
pub const RUN_SPAN: &str = "backwave.run";
/// `messaging.system` of every span.
pub const MESSAGING_SYSTEM: &str = "backwave";

/// The attempt span's `backwave.verdict`, once the store has taken the outcome (or the fence
/// refused it).
pub mod verdict {
    /// The handler succeeded and the store recorded it.
    pub const SUCCEEDED: &str = "succeeded";
    /// The attempt failed and the job is Scheduled again (`backwave.retry_at`).
    pub const RETRY: &str = "retry";
    /// The attempt failed on the job's last attempt.
    pub const DEAD_LETTERED: &str = "dead-lettered";
    /// The job could not be routed (`backwave.quarantine_reason`).
    pub const QUARANTINED: &str = "quarantined";
    /// An operator's cancel ended the job.
    pub const CANCELLED: &str = "cancelled";
    /// The lease was lost before the outcome was recorded: the fence discarded it.
    pub const FENCED_OUT: &str = "fenced-out";
    /// The shutdown's grace period ended and the handler stopped when asked: nothing recorded,
    /// the lease ended so that another worker inherits the job.
    pub const STOPPED: &str = "stopped";
}

/// The producer span of an enqueue of `jobs`, a child of the caller's current span. Its
/// destination and wire name are set when every job shares them; a batch carries its size.
pub(crate) fn enqueue_span(jobs: &[NewJob]) -> Span {
    let span = tracing::info_span!(
        ENQUEUE_SPAN,
        otel.kind = "producer",
        messaging.system = MESSAGING_SYSTEM,
        messaging.operation.name = "enqueue",
        messaging.operation.type = "send",
        messaging.destination.name = Empty,
        messaging.message.id = Empty,
        messaging.batch.message_count = Empty,
        backwave.wire_name = Empty,
        backwave.duplicate = Empty,
        otel.status_code = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(first) = jobs.first() {
        if jobs.iter().all(|j| j.queue == first.queue) {
            span.record("messaging.destination.name", first.queue.as_str());
        }
        if jobs.iter().all(|j| j.wire_name == first.wire_name) {
            span.record("backwave.wire_name", first.wire_name.as_str());
        }
    }
    if jobs.len() != 1 {
        span.record("messaging.batch.message_count", jobs.len());
    }
    span
}

/// Record what an enqueue answered on its span: the job's id (one job), whether a unique job
/// was a duplicate, or the error.
pub(crate) fn enqueued<E: std::fmt::Display>(span: &Span, done: Result<&[Enqueued], &E>) {
    if span.is_disabled() {
        return;
    }
    match done {
        Ok(answers) => {
            if let [one] = answers {
                span.record("messaging.message.id", tracing::field::display(one.id()));
                span.record("backwave.duplicate", matches!(one, Enqueued::Duplicate(_)));
            }
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", "backwave::Error");
            tracing::warn!(parent: span, error = %e, "enqueue failed");
        }
    }
}

/// The consumer span of one attempt, a root in this process (its OpenTelemetry parent is the
/// trace the job was enqueued in, when it carries one). `claimed_at` is when the job went into
/// the group's ready buffer, where it waited for a handler.
pub(crate) fn run_span(job: &Job, ctx: &JobContext, claimed_at: std::time::Instant) -> Span {
    let span = tracing::info_span!(
        parent: None,
        RUN_SPAN,
        otel.kind = "consumer",
        messaging.system = MESSAGING_SYSTEM,
        messaging.operation.name = "process",
        messaging.operation.type = "process",
        messaging.destination.name = %job.queue,
        messaging.message.id = %job.id,
        messaging.consumer.group.name = %ctx.group,
        backwave.wire_name = %job.wire_name,
        backwave.attempt = job.attempt,
        backwave.max_attempts = ctx.max_attempts,
        backwave.worker_group = %ctx.group,
        backwave.worker_id = %ctx.worker_id,
        backwave.queue_wait_ms = Empty,
        backwave.verdict = Empty,
        backwave.retry_in_ms = Empty,
        backwave.retry_at = Empty,
        backwave.quarantine_reason = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    // Since the job became due (its claim wrote the store's now into `updated_at`), plus its
    // time in the ready buffer.
    let buffered = claimed_at.elapsed().as_millis() as u64;
    let waited = job.updated_at.saturating_sub(job.due_at).max(0) as u64 + buffered;
    span.record("backwave.queue_wait_ms", waited);
    crate::otel::continue_trace(&span, job.traceparent.as_deref());
    span
}

/// What the store's answer on an attempt's outcome means, recorded on the attempt span with
/// one event at the level an operator would care about. `retry_ms` is the wait a retry takes
/// (the handler's own, else the job's delay table); `now` the store's clock at the answer.
pub(crate) fn verdict(span: &Span, fenced: Fenced, outcome: &Outcome, retry_ms: Option<u64>, now: Millis) {
    if span.is_disabled() {
        return;
    }
    let failure = match outcome {
        Outcome::Failed { message, .. } => Some(message.as_str()),
        Outcome::Quarantined { cause, .. } => Some(cause.as_str()),
        // A success the store turned into a failure: only the output limit does that.
        Outcome::SucceededWith { .. } => Some("the handler's output is over the store's output_limit"),
        _ => None,
    };
    match fenced {
        Fenced::Accepted(JobState::Succeeded) => {
            span.record("backwave.verdict", verdict::SUCCEEDED);
            tracing::debug!(parent: span, "job succeeded");
        }
        Fenced::Accepted(JobState::Scheduled) => {
            let wait = match outcome {
                Outcome::Failed { retry_in: Some(d), .. } => Some(crate::retry::duration_ms(*d)),
                _ => retry_ms,
            };
            span.record("backwave.verdict", verdict::RETRY);
            error_status(span, failure.unwrap_or("failed"));
            if let Some(ms) = wait {
                span.record("backwave.retry_in_ms", ms);
                span.record("backwave.retry_at", now.saturating_add(ms.min(i64::MAX as u64) as Millis));
            }
            tracing::warn!(parent: span, error = failure.unwrap_or("failed"), retry_in_ms = wait, "attempt failed; the job will be retried");
        }
        Fenced::Accepted(JobState::DeadLettered) => {
            span.record("backwave.verdict", verdict::DEAD_LETTERED);
            error_status(span, failure.unwrap_or("failed"));
            tracing::error!(parent: span, error = failure.unwrap_or("failed"), "attempt failed on its last attempt; the job is dead-lettered");
        }
        Fenced::Accepted(JobState::Quarantined) => {
            let reason = match outcome {
                Outcome::Quarantined { reason, .. } => reason.as_str(),
                _ => "",
            };
            span.record("backwave.verdict", verdict::QUARANTINED);
            span.record("backwave.quarantine_reason", reason);
            error_status(span, failure.unwrap_or(reason));
            tracing::warn!(parent: span, reason, cause = failure.unwrap_or(""), "job quarantined: no handler can take it");
        }
        Fenced::Accepted(JobState::Cancelled) => {
            span.record("backwave.verdict", verdict::CANCELLED);
            tracing::info!(parent: span, "job cancelled by an operator");
        }
        Fenced::Accepted(JobState::Running | JobState::Waiting) | Fenced::Rejected => fenced_out(span),
    }
}

/// The attempt's result was discarded: its lease had lapsed and the job was reaped (and maybe
/// claimed again) before the outcome reached the store.
pub(crate) fn fenced_out(span: &Span) {
    if span.is_disabled() {
        return;
    }
    span.record("backwave.verdict", verdict::FENCED_OUT);
    error_status(span, "the lease was lost");
    tracing::warn!(parent: span, "attempt result discarded: its lease was lost before the outcome was recorded");
}

/// The handler stopped at the end of a shutdown's grace period: nothing is recorded.
pub(crate) fn stopped(span: &Span) {
    if span.is_disabled() {
        return;
    }
    span.record("backwave.verdict", verdict::STOPPED);
    tracing::info!(parent: span, "handler stopped at shutdown; the job's lease is ended for another worker");
}

fn error_status(span: &Span, description: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", description);
    span.record("error.type", "backwave.attempt_failed");
}
