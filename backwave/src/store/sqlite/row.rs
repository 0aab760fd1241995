//! Reading SQLite rows into model values, by the columns and rules of `ops/columns.rs`. Text
//! written by other programs is taken as it comes: a payload may be TEXT or BLOB, label values
//! may be any JSON.

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;
use rusqlite::Row;

use crate::model::{Job, JobId, JobState, Progress, QuarantineReason, Transition};
use crate::store::ops::columns::{detail_status, job_columns, labels_from_json, priority};

/// The job columns with an empty payload in place of the stored one, for lists: a page of 50
/// jobs must not read 50 payloads it never shows (five of 50 MiB made a list take 420 MB).
/// Nor the trace context, the output or the progress: `jobs_failed_list` covers a list of
/// failed jobs without them.
pub(crate) const LISTED_JOB_COLUMNS: &str = job_columns!("X''", "delay_table", "NULL", "NULL, NULL, NULL");
/// [`LISTED_JOB_COLUMNS`] with the progress, for a list of Running jobs
/// ([`lists_progress`](crate::store::ops::columns::lists_progress)).
pub(crate) const LISTED_RUNNING_JOB_COLUMNS: &str =
    job_columns!("X''", "delay_table", "NULL", "NULL, progress, progress_message");

/// The columns a list by `filter` reads.
pub(crate) fn listed_columns(filter: &crate::store::JobFilter) -> &'static str {
    if crate::store::ops::columns::lists_progress(filter) {
        LISTED_RUNNING_JOB_COLUMNS
    } else {
        LISTED_JOB_COLUMNS
    }
}

/// A job read by [`JOB_COLUMNS`](crate::store::ops::columns::JOB_COLUMNS) or [`LISTED_JOB_COLUMNS`].
pub(crate) fn job_from_row(r: &Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: parse_id(r, 0)?,
        wire_name: r.get(1)?,
        queue: r.get(2)?,
        labels: parse_labels(&r.get::<_, String>(3)?),
        payload: bytes(r.get_ref(4)?),
        state: parse_state(r, 5)?,
        attempt: r.get(6)?,
        max_attempts: parse_budget(r, 7)?,
        due_at: r.get(8)?,
        lease_owner: r.get(9)?,
        lease_expires_at: r.get(10)?,
        worker_group: r.get(11)?,
        delay_table: r.get::<_, Option<String>>(12)?.and_then(|t| serde_json::from_str(&t).ok()),
        cancel_requested_by: r.get(13)?,
        terminal_cause: r.get(14)?,
        cause_fingerprint: r.get(15)?,
        quarantine_reason: r.get::<_, Option<String>>(16)?.and_then(|q| q.parse::<QuarantineReason>().ok()),
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
        finished_at: r.get(19)?,
        traceparent: r.get(20)?,
        output: match r.get_ref(21)? {
            ValueRef::Null => None,
            v => Some(bytes(v)),
        },
        progress: match r.get::<_, Option<f64>>(22)? {
            Some(fraction) => Some(Progress { fraction, message: r.get::<_, Option<String>>(23)?.unwrap_or_default() }),
            None => None,
        },
        priority: priority(r.get(24)?),
    })
}

/// The columns [`transition_from_row`] reads, in order. The failure detail itself is not
/// read here: only its type and size, so that hidden detail never leaves the database.
pub(crate) const TRANSITION_COLUMNS: &str = "seq, job_id, at, from_state, to_state, attempt, worker_id, actor, \
     reason, detail_status, json_extract(failure_detail, '$.type'), length(failure_detail)";

pub(crate) fn transition_from_row(r: &Row<'_>) -> rusqlite::Result<Transition> {
    let status: Option<String> = r.get(9)?;
    let detail = detail_status(status.as_deref(), || -> rusqlite::Result<_> { Ok((r.get(10)?, r.get(11)?)) })?;
    Ok(Transition {
        seq: r.get(0)?,
        // One writer at a time: SQLite's seq is commit order on its own (see LogCursor).
        xid: 0,
        job_id: parse_id(r, 1)?,
        at: r.get(2)?,
        from: match r.get_ref(3)? {
            ValueRef::Null => None,
            _ => Some(parse_state(r, 3)?),
        },
        to: parse_state(r, 4)?,
        attempt: r.get(5)?,
        worker_id: r.get(6)?,
        actor: r.get(7)?,
        reason: r.get(8)?,
        detail,
    })
}

pub(crate) fn parse_id(r: &Row<'_>, i: usize) -> rusqlite::Result<JobId> {
    with_text(r, i, |s| s.parse::<JobId>())?
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

/// `f` of column `i`'s text, read in place (ids and states of every listed row and log entry);
/// a value that is not UTF-8 text fails as reading it into a `String` does.
fn with_text<T>(r: &Row<'_>, i: usize, f: impl FnOnce(&str) -> T) -> rusqlite::Result<T> {
    if let ValueRef::Text(t) = r.get_ref(i)? {
        if let Ok(s) = std::str::from_utf8(t) {
            return Ok(f(s));
        }
    }
    r.get::<_, String>(i).map(|s| f(&s))
}

/// `max_attempts`, which the schema bounds only below: another program's "unlimited" (say
/// 10^10) reads as the most a `u32` counts, rather than failing every read of the row (and
/// with it every reap, which reads lapsed leases oldest first). Text, which the CHECK also
/// lets through, is no budget: the default policy's, as for a NULL.
pub(crate) fn parse_budget(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<u32>> {
    let clamp = |m: i64| m.clamp(1, u32::MAX as i64) as u32;
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(m) => Some(clamp(m)),
        // `as` saturates from f64 (NaN is 0, then 1).
        ValueRef::Real(m) => Some(clamp(m as i64)),
        ValueRef::Null | ValueRef::Text(_) | ValueRef::Blob(_) => None,
    })
}

pub(crate) fn parse_state(r: &Row<'_>, i: usize) -> rusqlite::Result<JobState> {
    with_text(r, i, |s| s.parse::<JobState>())?
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

pub(crate) fn bytes(v: ValueRef<'_>) -> Vec<u8> {
    match v {
        ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(f) => f.to_string().into_bytes(),
    }
}

pub(crate) fn parse_labels(text: &str) -> BTreeMap<String, String> {
    labels_from_json(serde_json::from_str::<serde_json::Value>(text).unwrap_or_default())
}
