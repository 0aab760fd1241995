//! Incident actions beyond requeue and cancel: run now (a Scheduled job due at once, attempt
//! and budget untouched), bulk cancel of a filtered set, and payload repair of a terminal job.
//! Each is one library call that the CLI and the dashboard share, planned first (exact counts),
//! then done in [`BULK_BATCH`]-sized transactions that check `operate` and leave every job whole
//! and audited if the run is killed between two of them.

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::Serialize;

use super::operator::{cancel_one, requeue_one, BulkProgress, CancelResult, RequeueResult, BULK_BATCH};
use super::query::JobFilter;
use super::row::{parse_id, parse_state};
use super::{unique, SqliteStore};
use crate::error::{Error, Result};
use crate::model::{JobId, JobState, Millis, Permission};

/// The result of making one job due now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum RunNowResult {
    /// Scheduled and due now; `was_due_at` is when it would have run (already past when it
    /// was due anyway, in which case nothing changed).
    Due {
        was_due_at: Millis,
    },
    /// Not Scheduled (Running, or terminal: requeue is the verb for those): nothing changed.
    NotScheduled {
        state: JobState,
    },
    NotFound,
}

/// What a bulk run-now would do, counted at the moment it was planned.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunNowPlan {
    /// The store's time when the plan counted.
    #[serde(skip)]
    pub as_of: Millis,
    /// Exactly the jobs counted: what [`crate::Store::run_now_planned`] acts on.
    #[serde(skip)]
    pub scope: JobFilter,
    /// Scheduled jobs that match.
    pub matching: u64,
    /// Of those, jobs due later that would be due now.
    pub would_run_now: u64,
    /// Of those, jobs already due: left as they are.
    pub already_due: u64,
}

/// What a bulk cancel would do, counted at the moment it was planned.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CancelPlan {
    /// The store's time when the plan counted.
    #[serde(skip)]
    pub as_of: Millis,
    /// Exactly the jobs counted: what [`crate::Store::cancel_planned`] acts on.
    #[serde(skip)]
    pub scope: JobFilter,
    /// Scheduled and Running jobs that match.
    pub matching: u64,
    /// Scheduled jobs that would end Cancelled at once.
    pub would_cancel: u64,
    /// Running jobs whose handler would be asked to stop (they end Cancelled when it does, or
    /// when their lease lapses).
    pub would_ask_to_stop: u64,
    /// Running jobs someone already asked to stop: left as they are.
    pub already_asked: u64,
}

/// What a bulk cancel did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CancelDone {
    pub cancelled: u64,
    pub asked_to_stop: u64,
    /// Jobs that came to match after the plan counted (enqueued since): left alone, since the
    /// operator confirmed the plan's set.
    pub arrived_after_plan: u64,
}

/// What a payload repair did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PayloadEdit {
    /// The state the job was in (Dead-Lettered or Quarantined).
    pub from: JobState,
    pub old_bytes: usize,
    pub new_bytes: usize,
    /// Also requeued, in the same transaction.
    pub requeued: bool,
    /// Asked to requeue, but the job with this id holds the repaired job's unique key: the
    /// payload is repaired, the job stays where it was.
    pub conflict: Option<JobId>,
}

impl SqliteStore {
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let now = self.now();
        self.write(|tx| {
            super::admin::require(tx, actor, Permission::Operate)?;
            ids.iter().map(|id| run_now_one(tx, now, actor, *id)).collect()
        })
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.read(|c| {
            ids.iter()
                .map(|id| {
                    Ok(match state_and_due(c, *id)? {
                        None => RunNowResult::NotFound,
                        Some((JobState::Scheduled, due_at)) => RunNowResult::Due { was_due_at: due_at },
                        Some((state, _)) => RunNowResult::NotScheduled { state },
                    })
                })
                .collect()
        })
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        self.read(|c| {
            ids.iter()
                .map(|id| {
                    Ok(match state_and_due(c, *id)? {
                        None => CancelResult::NotFound,
                        Some((JobState::Scheduled, _)) => CancelResult::Cancelled,
                        Some((JobState::Running, _)) => CancelResult::CancelRequested,
                        Some((state, _)) => CancelResult::NotCancellable { state },
                    })
                })
                .collect()
        })
    }

    pub fn plan_run_now(&self, filter: &JobFilter) -> Result<RunNowPlan> {
        let scope = run_now_scope(filter);
        let now = self.now();
        self.read(|c| {
            let matching = count_where(c, &scope, "created_at <= ?", &[now])?;
            let would_run_now = count_where(c, &scope, "created_at <= ? AND due_at > ?", &[now, now])?;
            Ok(RunNowPlan {
                matching,
                would_run_now,
                already_due: matching - would_run_now,
                as_of: now,
                scope: JobFilter::default(),
            })
        })
    }

    pub fn run_now_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let scope = run_now_scope(filter);
        let started = self.now();
        self.write(|tx| super::admin::require(tx, actor, Permission::Operate))?;
        let total = self.read(|c| count_where(c, &scope, "created_at <= ? AND due_at > ?", &[started, started]))?;
        self.in_batches(
            actor,
            total,
            |tx, _| {
                // Every job of the run gets the run's start as its due time, so a batch never
                // finds the jobs of an earlier one again.
                let mut n = 0;
                for id in ids_where(tx, &scope, "created_at <= ? AND due_at > ?", &[started, started])? {
                    if matches!(run_now_one(tx, started, actor, id)?, RunNowResult::Due { .. }) {
                        n += 1;
                    }
                }
                Ok(n)
            },
            progress,
        )
    }

    pub fn plan_cancel(&self, filter: &JobFilter) -> Result<CancelPlan> {
        let scope = cancel_scope(filter);
        let now = self.now();
        self.read(|c| {
            let matching = count_where(c, &scope, "created_at <= ?", &[now])?;
            let would_cancel = count_where(c, &scope, "created_at <= ? AND state = 'scheduled'", &[now])?;
            let would_ask_to_stop = count_where(
                c,
                &scope,
                "created_at <= ? AND state = 'running' AND cancel_requested_by IS NULL",
                &[now],
            )?;
            Ok(CancelPlan {
                matching,
                would_cancel,
                would_ask_to_stop,
                already_asked: matching - would_cancel - would_ask_to_stop,
                as_of: now,
                scope: JobFilter::default(),
            })
        })
    }

    pub fn cancel_matching(
        &self,
        actor: &str,
        filter: &JobFilter,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        let scope = cancel_scope(filter);
        let started = self.now();
        self.write(|tx| super::admin::require(tx, actor, Permission::Operate))?;
        let pending = "created_at <= ? AND (state = 'scheduled' OR cancel_requested_by IS NULL)";
        let total = self.read(|c| count_where(c, &scope, pending, &[started]))?;
        let mut done = CancelDone::default();
        self.in_batches(
            actor,
            total,
            |tx, now| {
                let mut n = 0;
                for id in ids_where(tx, &scope, pending, &[started])? {
                    match cancel_one(tx, now, actor, id)? {
                        CancelResult::Cancelled => done.cancelled += 1,
                        CancelResult::CancelRequested => done.asked_to_stop += 1,
                        CancelResult::NotCancellable { .. } | CancelResult::NotFound => continue,
                    }
                    n += 1;
                }
                Ok(n)
            },
            progress,
        )?;
        Ok(done)
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        check_new_payload(payload)?;
        let now = self.now();
        self.write(|tx| {
            super::admin::require(tx, actor, Permission::Operate)?;
            super::admin::check_payload_size(payload.len(), super::admin::payload_limit(tx)?, None)?;
            let found = tx
                .prepare_cached("SELECT state, payload, wire_name, unique_key FROM jobs WHERE id = ?1")?
                .query_row([id.to_string()], |r| {
                    Ok((parse_state(r, 0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, String>(2)?, r.get::<_, Option<String>>(3)?))
                })
                .optional()?;
            let Some((state, old, wire_name, key)) = found else { return Err(Error::JobNotFound(id.to_string())) };
            check_editable(id, state)?;
            let new_key = key.and_then(|k| unique::edited_key(&k, &wire_name, &old, payload));
            let edited = tx
                .prepare_cached("UPDATE jobs SET payload = ?2, unique_key = coalesce(?4, unique_key), updated_at = ?3 WHERE id = ?1")?
                .execute(params![id.to_string(), payload, now, new_key]);
            if let Err(rusqlite::Error::SqliteFailure(e, _)) = &edited {
                if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE {
                    return Err(unique::edit_collides(id));
                }
            }
            edited?;
            super::admin::audit(tx, now, actor, "edit-payload", Some(id), &payload_edit_detail(&old, payload))?;
            let (requeued, conflict) = match requeue.then(|| requeue_one(tx, now, actor, id)).transpose()? {
                Some(RequeueResult::Requeued { .. }) => (true, None),
                Some(RequeueResult::Conflict { existing }) => (false, Some(existing)),
                _ => (false, None),
            };
            Ok(PayloadEdit { from: state, old_bytes: old.len(), new_bytes: payload.len(), requeued, conflict })
        })
    }
}

fn state_and_due(c: &Connection, id: JobId) -> Result<Option<(JobState, Millis)>> {
    Ok(c.prepare_cached("SELECT state, due_at FROM jobs WHERE id = ?1")?
        .query_row([id.to_string()], |r| Ok((parse_state(r, 0)?, r.get::<_, Millis>(1)?)))
        .optional()?)
}

fn run_now_one(tx: &Connection, now: Millis, actor: &str, id: JobId) -> Result<RunNowResult> {
    let Some((state, due_at)) = state_and_due(tx, id)? else { return Ok(RunNowResult::NotFound) };
    if state != JobState::Scheduled {
        return Ok(RunNowResult::NotScheduled { state });
    }
    if due_at > now {
        tx.prepare_cached("UPDATE jobs SET due_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'scheduled'")?
            .execute(params![id.to_string(), now])?;
        super::admin::audit(tx, now, actor, "run-now", Some(id), &run_now_detail(due_at))?;
    }
    Ok(RunNowResult::Due { was_due_at: due_at })
}

/// `count(*)` of the filter's jobs that also meet `extra` (its `?`s bound to `extra_args`).
/// The scheduled jobs `filter` matches: what run-now acts on.
pub(crate) fn run_now_scope(filter: &JobFilter) -> JobFilter {
    JobFilter { states: vec![JobState::Scheduled], finished_before: None, ..filter.clone() }
}

/// The scheduled and running jobs `filter` matches (both when it names neither): what a bulk
/// cancel acts on.
pub(crate) fn cancel_scope(filter: &JobFilter) -> JobFilter {
    let mut f = JobFilter { finished_before: None, ..filter.clone() };
    f.states.retain(|s| matches!(s, JobState::Scheduled | JobState::Running));
    if f.states.is_empty() {
        f.states = vec![JobState::Scheduled, JobState::Running];
    }
    f
}

fn count_where(c: &Connection, filter: &JobFilter, extra: &str, extra_args: &[Millis]) -> Result<u64> {
    let (clause, mut args) = filter.where_clause();
    args.extend(extra_args.iter().map(|v| Value::Integer(*v)));
    Ok(c.prepare_cached(&format!("SELECT count(*) FROM jobs WHERE {clause} AND {extra}"))?
        .query_row(params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
}

/// Ids of up to [`BULK_BATCH`] of the filter's jobs that also meet `extra`.
fn ids_where(c: &Connection, filter: &JobFilter, extra: &str, extra_args: &[Millis]) -> Result<Vec<JobId>> {
    let (clause, mut args) = filter.where_clause();
    args.extend(extra_args.iter().map(|v| Value::Integer(*v)));
    Ok(c.prepare_cached(&format!("SELECT id FROM jobs WHERE {clause} AND {extra} LIMIT {BULK_BATCH}"))?
        .query_map(params_from_iter(args), |r| parse_id(r, 0))?
        .collect::<Result<_, _>>()?)
}

/// The audit detail of a run-now: when the job would have run.
pub(crate) fn run_now_detail(was_due_at: Millis) -> String {
    format!("due_at was {was_due_at}")
}

/// Refuse a new payload that is not JSON, quoting its start.
pub(crate) fn check_new_payload(payload: &[u8]) -> Result<()> {
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(payload) {
        let text = String::from_utf8_lossy(payload);
        let shown: String = text.chars().take(60).collect();
        let more = if text.chars().count() > 60 { "…" } else { "" };
        return Err(Error::InvalidInput(format!("the new payload '{shown}{more}' is not valid JSON: {e}")));
    }
    Ok(())
}

/// Only a Dead-Lettered or Quarantined job's payload may be repaired.
pub(crate) fn check_editable(id: JobId, state: JobState) -> Result<()> {
    if !state.is_requeueable() {
        return Err(Error::WrongState { id: id.to_string(), state, wanted: "dead-lettered or quarantined" });
    }
    Ok(())
}

/// The audit detail of a payload repair: the old payload (as text, or hex when it is not
/// UTF-8), so that the edit can be undone, and the new payload's size.
pub(crate) fn payload_edit_detail(old: &[u8], new: &[u8]) -> String {
    let detail = match std::str::from_utf8(old) {
        Ok(text) => serde_json::json!({ "old_payload": text, "new_bytes": new.len() }),
        Err(_) => serde_json::json!({ "old_payload_hex": hex(old), "new_bytes": new.len() }),
    };
    detail.to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
