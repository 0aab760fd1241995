//! What the library tells `tracing`: a producer span per enqueue, a consumer span per attempt,
//! named and attributed by the OpenTelemetry messaging conventions, and events for the engine's
//! changes of state. It never installs a subscriber and never formats anything a subscriber has
//! not asked for: with none installed, each span or event is one relaxed load and a branch.
//!
//! The names below are the contract a dashboard or a test reads; see docs/embedding.md
//! ("Tracing and OpenTelemetry") for what each event means to an application. The engine's
//! events come from the same decisions as the [`Event`]s its hooks hear
//! ([`Engine::on_event`](crate::engine::Engine::on_event)): an attempt's verdict is rendered here
//! from its `Event`.

use tracing::field::Empty;
use tracing::Span;

use crate::engine::{Event, JobContext};
use crate::model::{Enqueued, Job, Millis, NewJob};

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
        backwave.schedule = Empty,
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
            // DEBUG, not WARN: the caller has the error too, and logs it as it sees fit (a
            // refusal logged here as well was said twice in an application's log).
            tracing::debug!(parent: span, error = %e, "enqueue failed");
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

/// The store's word on an attempt ([`Event`], made by the engine from the store's answer),
/// recorded on the attempt span with one event at the level an operator would care about. `now`
/// is the store's clock at the answer.
pub(crate) fn verdict(span: &Span, event: &Event, now: Millis) {
    if span.is_disabled() {
        return;
    }
    match event {
        Event::Succeeded { .. } => {
            span.record("backwave.verdict", verdict::SUCCEEDED);
            tracing::debug!(parent: span, "job succeeded");
        }
        Event::Failed { retry_at, cause, .. } => {
            let wait = retry_at.map(|at| at.saturating_sub(now).max(0) as u64);
            span.record("backwave.verdict", verdict::RETRY);
            error_status(span, cause);
            if let (Some(ms), Some(at)) = (wait, retry_at) {
                span.record("backwave.retry_in_ms", ms);
                span.record("backwave.retry_at", at);
            }
            tracing::warn!(parent: span, error = cause.as_str(), retry_in_ms = wait, "attempt failed; the job will be retried");
        }
        Event::DeadLettered { cause, .. } => {
            span.record("backwave.verdict", verdict::DEAD_LETTERED);
            error_status(span, cause);
            tracing::error!(parent: span, error = cause.as_str(), "attempt failed on its last attempt; the job is dead-lettered");
        }
        Event::Quarantined { why, cause, .. } => {
            span.record("backwave.verdict", verdict::QUARANTINED);
            span.record("backwave.quarantine_reason", why.as_str());
            error_status(span, cause);
            tracing::warn!(parent: span, reason = why.as_str(), cause = cause.as_str(), "job quarantined: no handler can take it");
        }
        Event::Cancelled { .. } => {
            span.record("backwave.verdict", verdict::CANCELLED);
            tracing::info!(parent: span, "job cancelled by an operator");
        }
        Event::Discarded { why, .. } => {
            span.record("backwave.verdict", verdict::FENCED_OUT);
            error_status(span, "the lease was lost");
            tracing::warn!(parent: span, why = why.as_str(), "attempt result discarded: its lease was lost before the outcome was recorded");
        }
        // No other event is an attempt's verdict.
        _ => {}
    }
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
