//! What both backends read stored rows by: the columns of a job, in order, and the rules for
//! values another program may have written (a transition's failure detail, label values that
//! are not strings). Each backend's readers (`sqlite/row.rs`, `postgres/row.rs`) take its types.

use std::collections::BTreeMap;

use crate::model::DetailStatus;

/// The columns a job is read by on both backends, in order. A macro so that `concat!` can build the
/// public claim statement from it; given an expression, it reads that in place of the payload
/// (and given a second, that in place of the delay table; a third, in place of the trace context;
/// a fourth, in place of the output and the progress, three columns).
macro_rules! job_columns {
    () => {
        $crate::store::ops::columns::job_columns!("payload")
    };
    ($payload:literal) => {
        $crate::store::ops::columns::job_columns!($payload, "delay_table")
    };
    ($payload:literal, $delay_table:literal) => {
        $crate::store::ops::columns::job_columns!($payload, $delay_table, "traceparent")
    };
    ($payload:literal, $delay_table:literal, $traceparent:literal) => {
        $crate::store::ops::columns::job_columns!(
            $payload,
            $delay_table,
            $traceparent,
            "output, progress, progress_message"
        )
    };
    ($payload:literal, $delay_table:literal, $traceparent:literal, $output_progress:literal) => {
        concat!(
            "id, wire_name, queue, labels, ",
            $payload,
            ", state, attempt, max_attempts, due_at, lease_owner, \
             lease_expires_at, worker_group, ",
            $delay_table,
            ", cancel_requested_by, terminal_cause, cause_fingerprint, \
             quarantine_reason, created_at, updated_at, finished_at, ",
            $traceparent,
            ", ",
            $output_progress,
            ", priority"
        )
    };
}
pub(crate) use job_columns;

/// The columns a job is read by on both backends, in order.
pub(crate) const JOB_COLUMNS: &str = job_columns!();

/// Whether a list by `filter` reads the progress columns: only a list of Running jobs (few, and
/// the ones that report it). Every other list reads NULL in their place, so that a list of
/// failed jobs stays covered by `jobs_failed_list` and never walks a payload's overflow pages
/// to reach the columns stored after it.
pub(crate) fn lists_progress(filter: &crate::store::JobFilter) -> bool {
    filter.states == [crate::model::JobState::Running]
}

/// What a transition says of its failure detail, from its `detail_status` column and, only for
/// captured detail, the detail's type and size (`shape`, never the detail itself): the rule both
/// backends read the log by.
pub(crate) fn detail_status<E>(
    status: Option<&str>,
    shape: impl FnOnce() -> Result<(Option<String>, Option<i64>), E>,
) -> Result<DetailStatus, E> {
    Ok(match status {
        Some("captured") => {
            let (kind, bytes) = shape()?;
            DetailStatus::Hidden { kind: kind.unwrap_or_default(), bytes: bytes.unwrap_or(0).max(0) as usize }
        }
        Some(_) => DetailStatus::NotCaptured,
        None => DetailStatus::None,
    })
}

/// A stored priority: the schema's CHECK holds it to 0-9; anything else (a store whose CHECK was
/// edited away) is read as the nearest end rather than failing the row.
pub(crate) fn priority(stored: i64) -> u8 {
    stored.clamp(0, i64::from(crate::model::PRIORITY_LAST)) as u8
}

/// Labels from a JSON object; any value that is not a string is kept as its JSON text.
pub(crate) fn labels_from_json(value: serde_json::Value) -> BTreeMap<String, String> {
    let serde_json::Value::Object(map) = value else {
        return BTreeMap::new();
    };
    map.into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, v)
        })
        .collect()
}
