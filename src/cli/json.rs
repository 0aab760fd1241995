//! The JSON contract of `bw --format json`, in one place so that every command spells a job,
//! a log entry and a per-id result the same way. Times are RFC 3339 in UTC; states use the
//! command-line spelling (`dead-lettered`). Documented in docs/reference.md; tests parse it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::output::rfc3339;
use backwave::{DetailStatus, FailureDetail, Job, Transition};

/// A job as scripts see it.
#[derive(Clone, Debug, Serialize)]
pub struct JobJson {
    pub id: String,
    pub state: &'static str,
    pub wire_name: String,
    pub queue: String,
    pub labels: BTreeMap<String, String>,
    pub attempt: u32,
    pub max_attempts: Option<u32>,
    pub created_at: String,
    pub due_at: String,
    pub finished_at: Option<String>,
    pub terminal_cause: Option<String>,
    pub quarantine_reason: Option<&'static str>,
    /// 0 (claimed first within its queue) to 9.
    pub priority: u8,
}

impl From<&Job> for JobJson {
    fn from(j: &Job) -> Self {
        JobJson {
            id: j.id.to_string(),
            state: j.state.as_str(),
            wire_name: j.wire_name.clone(),
            queue: j.queue.clone(),
            labels: j.labels.clone(),
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            created_at: rfc3339(j.created_at),
            due_at: rfc3339(j.due_at),
            finished_at: j.finished_at.map(rfc3339),
            terminal_cause: j.terminal_cause.clone(),
            quarantine_reason: j.quarantine_reason.map(|q| q.as_str()),
            priority: j.priority,
        }
    }
}

/// One transition log entry. `failure_detail` is present only when it was revealed; otherwise
/// `detail_status` says whether detail exists (`hidden`, with its type and size), was not
/// captured, or does not apply (`none`).
#[derive(Clone, Debug, Serialize)]
pub struct LogEntryJson {
    pub seq: i64,
    pub job_id: String,
    pub at: String,
    pub from: Option<&'static str>,
    pub to: &'static str,
    pub attempt: u32,
    pub worker_id: Option<String>,
    pub actor: Option<String>,
    pub reason: Option<String>,
    pub detail_status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_detail: Option<FailureDetail>,
}

impl LogEntryJson {
    /// `revealed` is the entry's detail when the actor asked for it and may see it.
    pub fn new(t: &Transition, revealed: Option<&FailureDetail>) -> Self {
        let (status, kind, bytes) = match (&t.detail, revealed) {
            (_, Some(_)) => ("revealed", None, None),
            (DetailStatus::None, _) => ("none", None, None),
            (DetailStatus::NotCaptured, _) => ("not-captured", None, None),
            (DetailStatus::Hidden { kind, bytes }, _) => ("hidden", Some(kind.clone()), Some(*bytes)),
            (DetailStatus::Revealed(_), _) => ("revealed", None, None),
        };
        let detail = match (&t.detail, revealed) {
            (_, Some(d)) => Some(d.clone()),
            (DetailStatus::Revealed(d), _) => Some(d.clone()),
            _ => None,
        };
        LogEntryJson {
            seq: t.seq,
            job_id: t.job_id.to_string(),
            at: rfc3339(t.at),
            from: t.from.map(|s| s.as_str()),
            to: t.to.as_str(),
            attempt: t.attempt,
            worker_id: t.worker_id.clone(),
            actor: t.actor.clone(),
            reason: t.reason.clone(),
            detail_status: status,
            detail_type: kind,
            detail_bytes: bytes,
            failure_detail: detail,
        }
    }
}

/// The outcome for one id given to `bw requeue`, `cancel`, `run-now` or `purge`, serialised as
/// its name (`"Requeued"`); the `Would…` ones answer `--dry-run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Outcome {
    Requeued,
    NotRequeueable,
    /// Another job holds its unique key (`warning` names it).
    Conflict,
    NotFound,
    Cancelled,
    CancelRequested,
    NotCancellable,
    Due,
    NotScheduled,
    Deleted,
    NotTerminal,
    WouldRequeue,
    WouldConflict,
    WouldCancel,
    WouldRequestCancel,
    WouldRunNow,
    WouldDelete,
}

impl Outcome {
    /// Whether the id was acted on (or, with `--dry-run`, would be): the others make the
    /// command exit 1.
    pub fn done(self) -> bool {
        !matches!(
            self,
            Outcome::NotRequeueable
                | Outcome::Conflict
                | Outcome::WouldConflict
                | Outcome::NotFound
                | Outcome::NotCancellable
                | Outcome::NotScheduled
                | Outcome::NotTerminal
        )
    }

    /// Refused for the job's state, which the table shows beside it.
    pub fn refused_for_state(self) -> bool {
        !self.done() && self != Outcome::NotFound
    }

    /// What the table says beside an outcome with no warning.
    pub fn note(self) -> &'static str {
        match self {
            Outcome::Requeued => "budget reset, due now",
            Outcome::WouldRequeue => "would get a fresh budget, due now",
            Outcome::Due => "due now; attempt and budget unchanged",
            Outcome::WouldRunNow => "would be due now; attempt and budget unchanged",
            Outcome::WouldCancel => "scheduled: would end Cancelled at once",
            Outcome::WouldRequestCancel => "running: its handler would be asked to stop",
            Outcome::Deleted => "deleted with its log; the audit trail keeps what it was",
            Outcome::WouldDelete => "would be deleted with its log",
            Outcome::NotTerminal => "not finished: cancel it first, then purge it",
            Outcome::CancelRequested => {
                "running: its handler is asked to stop; Cancelled when it does or its lease lapses"
            }
            _ => "",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The outcome for one id given to `bw requeue`, `cancel`, `run-now` or `purge`.
#[derive(Clone, Debug, Serialize)]
pub struct IdResult {
    /// The full id when it resolved, else the text given.
    pub id: String,
    pub result: Outcome,
    /// The job's state after the action (`null` when not found).
    pub state: Option<&'static str>,
    /// Something the operator should know, e.g. that no live worker handles the wire name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl IdResult {
    pub fn ok(&self) -> bool {
        self.result.done()
    }
}
