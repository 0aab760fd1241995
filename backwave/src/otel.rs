//! One trace from the request to the job (feature `opentelemetry`): an enqueue writes the W3C
//! `traceparent` of its own span's OpenTelemetry context into each job it stores, and an
//! attempt's span takes the stored one as its remote parent. Without the feature both are
//! no-ops and nothing of OpenTelemetry is compiled; a job can still carry a `traceparent` the
//! application set itself ([`NewJob::traceparent`](crate::NewJob::traceparent)), which
//! `bw jobs show` prints.

use std::borrow::Cow;

use tracing::Span;

use crate::model::NewJob;

/// `jobs` with the trace of `span` (the enqueue's span) in each job that names none; as they are
/// when the span is in no OpenTelemetry trace (no `tracing-opentelemetry` layer, or disabled).
pub(crate) fn stamp<'a>(jobs: &'a [NewJob], span: &Span) -> Cow<'a, [NewJob]> {
    if span.is_disabled() || jobs.iter().all(|j| j.traceparent.is_some()) {
        return Cow::Borrowed(jobs);
    }
    match traceparent_of(span) {
        Some(tp) => Cow::Owned(
            jobs.iter()
                .map(|j| {
                    let mut j = j.clone();
                    j.traceparent.get_or_insert_with(|| tp.clone());
                    j
                })
                .collect(),
        ),
        None => Cow::Borrowed(jobs),
    }
}

/// The W3C `traceparent` of `span`'s OpenTelemetry context, if it is in a valid one.
#[cfg(feature = "opentelemetry")]
pub fn traceparent_of(span: &Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let cx = span.context();
    let otel = cx.span();
    let sc = otel.span_context();
    sc.is_valid().then(|| format!("00-{:032x}-{:016x}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// Without the feature there is no OpenTelemetry context to read.
#[cfg(not(feature = "opentelemetry"))]
pub fn traceparent_of(_span: &Span) -> Option<String> {
    None
}

/// Make the stored `traceparent` the OpenTelemetry parent of `span` (an attempt's span, not yet
/// entered). A malformed one (written by another program) is ignored: the span starts a trace.
#[cfg(feature = "opentelemetry")]
pub(crate) fn continue_trace(span: &Span, traceparent: Option<&str>) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let Some(tp) = traceparent.filter(|tp| crate::model::is_traceparent(tp)) else { return };
    let (Ok(trace), Ok(parent), Ok(flags)) =
        (TraceId::from_hex(&tp[3..35]), SpanId::from_hex(&tp[36..52]), u8::from_str_radix(&tp[53..55], 16))
    else {
        return;
    };
    let remote = SpanContext::new(trace, parent, TraceFlags::new(flags), true, TraceState::default());
    if remote.is_valid() {
        // Fails only without the OpenTelemetry layer, where there is nothing to continue.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

#[cfg(not(feature = "opentelemetry"))]
pub(crate) fn continue_trace(_span: &Span, _traceparent: Option<&str>) {}
