//! Reading PostgreSQL rows into model values: the same columns, in the same order, as the
//! SQLite readers in `sqlite/row.rs` (both from `ops/columns.rs`), with PostgreSQL's types
//! (uuid ids, jsonb labels and delay tables, bigint numbers).

use postgres::Row;

use crate::error::{Error, Result};
use crate::model::{Job, JobId, JobState, Progress, QuarantineReason, Transition};
use crate::store::ops::claim::Lease;
use crate::store::ops::columns::{detail_status, labels_from_json, priority};

/// The columns [`job`] reads, in order (the same list as SQLite's).
pub(crate) const JOB_COLUMNS: &str = crate::store::ops::columns::JOB_COLUMNS;
/// The same with an empty payload in place of the stored one, for lists (see SQLite's).
pub(crate) const LISTED_JOB_COLUMNS: &str = crate::store::ops::columns::job_columns!(
    "''::bytea",
    "delay_table",
    "NULL::text",
    "NULL::bytea, NULL::float8, NULL::text"
);
/// [`LISTED_JOB_COLUMNS`] with the progress, for a list of Running jobs (see SQLite's).
pub(crate) const LISTED_RUNNING_JOB_COLUMNS: &str = crate::store::ops::columns::job_columns!(
    "''::bytea",
    "delay_table",
    "NULL::text",
    "NULL::bytea, progress, progress_message"
);

/// The columns a list by `filter` reads.
pub(crate) fn listed_columns(filter: &crate::store::JobFilter) -> &'static str {
    if crate::store::ops::columns::lists_progress(filter) {
        LISTED_RUNNING_JOB_COLUMNS
    } else {
        LISTED_JOB_COLUMNS
    }
}

pub(crate) fn job(r: &Row) -> Result<Job> {
    Ok(Job {
        id: JobId(r.try_get(0)?),
        wire_name: r.try_get(1)?,
        queue: r.try_get(2)?,
        labels: labels_from_json(r.try_get(3)?),
        payload: r.try_get(4)?,
        state: state(r, 5)?,
        attempt: count(r.try_get(6)?),
        max_attempts: r.try_get::<_, Option<i64>>(7)?.map(count),
        due_at: r.try_get(8)?,
        lease_owner: r.try_get(9)?,
        lease_expires_at: r.try_get(10)?,
        worker_group: r.try_get(11)?,
        delay_table: r.try_get::<_, Option<serde_json::Value>>(12)?.and_then(|t| serde_json::from_value(t).ok()),
        cancel_requested_by: r.try_get(13)?,
        terminal_cause: r.try_get(14)?,
        cause_fingerprint: r.try_get(15)?,
        quarantine_reason: r.try_get::<_, Option<String>>(16)?.and_then(|q| q.parse::<QuarantineReason>().ok()),
        created_at: r.try_get(17)?,
        updated_at: r.try_get(18)?,
        finished_at: r.try_get(19)?,
        traceparent: r.try_get(20)?,
        output: r.try_get(21)?,
        progress: match r.try_get::<_, Option<f64>>(22)? {
            Some(fraction) => {
                Some(Progress { fraction, message: r.try_get::<_, Option<String>>(23)?.unwrap_or_default() })
            }
            None => None,
        },
        priority: priority(r.try_get(24)?),
    })
}

/// What a claim returns of each job it moved to Running ([`claimed`] reads them, in this
/// order): the columns the claim did not write, then the job's jitter seed. What the claim wrote
/// (the state, the lease, the group, the budget, the time) the claimer knows already, and the
/// queue is the one it claimed from: returned, those cost the server ten columns a job to send
/// and the worker as many to decode. Labels come back NULL when empty (most jobs'),
/// saving a jsonb-to-text conversion on the server and a JSON parse in the worker.
macro_rules! claimed_columns {
    () => {
        "id, wire_name, nullif(labels, '{}'::jsonb), payload, attempt, due_at, cancel_requested_by, \
         terminal_cause, cause_fingerprint, quarantine_reason, created_at, finished_at, traceparent, output, \
         priority, jitter_seed"
    };
}
pub(crate) use claimed_columns;

/// A job as a claim of queue `queue` under `lease` returns it ([`claimed_columns!`]), with its
/// jitter seed: what the claim wrote filled in as [`Lease::running`] says it leaves every job.
pub(crate) fn claimed(r: &Row, queue: &str, lease: &Lease<'_>) -> Result<(Job, i64)> {
    let mut job = Job {
        id: JobId(r.try_get(0)?),
        wire_name: r.try_get(1)?,
        queue: queue.to_owned(),
        labels: r.try_get::<_, Option<serde_json::Value>>(2)?.map(labels_from_json).unwrap_or_default(),
        payload: r.try_get(3)?,
        state: JobState::Running,
        attempt: count(r.try_get(4)?),
        max_attempts: None,
        due_at: r.try_get(5)?,
        lease_owner: None,
        lease_expires_at: None,
        worker_group: None,
        delay_table: None,
        cancel_requested_by: r.try_get(6)?,
        terminal_cause: r.try_get(7)?,
        cause_fingerprint: r.try_get(8)?,
        quarantine_reason: r.try_get::<_, Option<String>>(9)?.and_then(|q| q.parse::<QuarantineReason>().ok()),
        created_at: r.try_get(10)?,
        updated_at: lease.now,
        finished_at: r.try_get(11)?,
        traceparent: r.try_get(12)?,
        output: r.try_get(13)?,
        progress: None,
        priority: priority(r.try_get(14)?),
    };
    lease.running(&mut job);
    Ok((job, r.try_get(15)?))
}

/// The columns [`transition`] reads, in order, for a role that may read the failure detail
/// column. As on SQLite, the failure detail itself is not read: only its type and size. The
/// writing transaction's id comes last, as a bigint.
const TRANSITION_COLUMNS: &str = "seq, job_id, at, from_state, to_state, attempt, worker_id, actor, \
     reason, detail_status, failure_detail ->> 'type', octet_length(failure_detail::text), xid::text::bigint";

/// The same for a role that may not (docs/postgres.md, "Roles on PostgreSQL"): the type and size from the
/// view that shows only those, looked up for the entries that have detail.
const TRANSITION_COLUMNS_WITHOUT_DETAIL: &str = "seq, job_id, at, from_state, to_state, attempt, worker_id, actor, \
     reason, detail_status, \
     (SELECT s.kind FROM bw_failure_detail_shapes s WHERE s.seq = transitions.seq AND transitions.detail_status = 'captured'), \
     (SELECT s.bytes FROM bw_failure_detail_shapes s WHERE s.seq = transitions.seq AND transitions.detail_status = 'captured'), \
     xid::text::bigint";

/// The columns [`transition`] reads, as a role that may (`detail_readable`) or may not read the
/// failure detail column reads them.
pub(crate) fn transition_columns(detail_readable: bool) -> &'static str {
    if detail_readable {
        TRANSITION_COLUMNS
    } else {
        TRANSITION_COLUMNS_WITHOUT_DETAIL
    }
}

pub(crate) fn transition(r: &Row) -> Result<Transition> {
    let status: Option<String> = r.try_get(9)?;
    let detail = detail_status(status.as_deref(), || -> Result<_> {
        Ok((r.try_get(10)?, r.try_get::<_, Option<i32>>(11)?.map(i64::from)))
    })?;
    Ok(Transition {
        seq: r.try_get(0)?,
        job_id: JobId(r.try_get(1)?),
        at: r.try_get(2)?,
        from: match r.try_get::<_, Option<String>>(3)? {
            Some(_) => Some(state(r, 3)?),
            None => None,
        },
        to: state(r, 4)?,
        attempt: count(r.try_get(5)?),
        worker_id: r.try_get(6)?,
        actor: r.try_get(7)?,
        reason: r.try_get(8)?,
        detail,
        xid: r.try_get(12)?,
    })
}

pub(crate) fn state(r: &Row, i: usize) -> Result<JobState> {
    let s: String = r.try_get(i)?;
    s.parse::<JobState>().map_err(|e| Error::InvalidInput(format!("a job has the unknown state '{s}': {e}")))
}

/// A bigint count as the model's `u32`, clamped: another program's "unlimited" budget reads as
/// the most a `u32` counts rather than failing every read of the row.
pub(crate) fn count(n: i64) -> u32 {
    n.clamp(0, u32::MAX as i64) as u32
}
