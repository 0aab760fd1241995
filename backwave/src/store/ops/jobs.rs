//! The operator actions on jobs by id, written once: requeue, cancel and run-now (and what the
//! last two would answer, for `--dry-run` and the dashboard's confirmation), purge and payload
//! repair. The permission is checked first, then each id is decided on the job as this
//! transaction sees it (locked on PostgreSQL), an id named twice on what the first did; the
//! changes are written as sets ([`OperatorTx`]), each with its log entry or audit row.

use std::collections::{HashMap, HashSet};

use super::settings::check_payload_size;
use super::{AuditAction, StoreTx};
use crate::error::{Error, Result};
use crate::model::{JobId, JobState, Millis, Permission};
use crate::store::unique;
use crate::store::{
    BulkProgress, CancelResult, JobFilter, PayloadEdit, PriorityChange, PurgeResult, RequeueResult, RunNowResult,
};

/// A job as the transaction that acts on it sees it: what the operator actions decide on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub state: JobState,
    pub attempt: u32,
    pub cancel_requested: bool,
    pub due_at: Millis,
}

/// What the operator actions on jobs ask of a backend in one transaction: statements, no
/// decisions. Each write acts on jobs this transaction found (and on PostgreSQL locked) in the
/// state it needs, so it finds them by id alone.
pub(crate) trait OperatorTx: StoreTx {
    /// The jobs `ids` names that exist. `lock`: held until the transaction ends (PostgreSQL
    /// locks them `FOR UPDATE`, in id order, so that two operators lock in the same order).
    fn jobs(&mut self, ids: &[JobId], lock: bool) -> Result<HashMap<JobId, Found>>;
    /// Cancel the Scheduled or Waiting jobs `jobs` (id, attempt, the state it leaves; each once)
    /// with `cause`, each logged `state -> Cancelled` with `actor` as actor and `cause` as
    /// reason, in the order given. Returns how many.
    fn cancel_scheduled(
        &mut self,
        now: Millis,
        actor: &str,
        cause: &str,
        jobs: &[(JobId, u32, JobState)],
    ) -> Result<u64>;
    /// Record on the Running jobs `jobs` that `actor` asked them to stop, each audited as
    /// `action` with its detail, in the order given. Returns how many.
    fn ask_to_stop(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64>;
    /// Make the Scheduled jobs `jobs` due at `now`, each audited as `action` with its detail,
    /// in the order given. Returns how many.
    fn make_due(&mut self, now: Millis, actor: &str, action: AuditAction, jobs: &[(JobId, String)]) -> Result<u64>;
    /// Which of the jobs `ids` carry a unique key.
    fn keyed(&mut self, ids: &[JobId]) -> Result<HashSet<JobId>>;
    /// Requeue the Dead-Lettered or Quarantined jobs `jobs` (id, the state it leaves; each once,
    /// none with a unique key): back to Scheduled, due now, budget reset, each logged with
    /// `actor` and [`REQUEUE_REASON`] in the order given. Returns how many.
    fn requeue_jobs(&mut self, now: Millis, actor: &str, jobs: &[(JobId, JobState)]) -> Result<u64>;
    /// Requeue one such job that has a unique key, alone: `Some(holder)` when another job holds
    /// the key (the unique index refuses the move), and then nothing changed.
    fn requeue_keyed(&mut self, now: Millis, actor: &str, id: JobId, from: JobState) -> Result<Option<JobId>>;
    /// Cancel what depends on the jobs `parents`, just cancelled, where their workflow cancels
    /// dependents ([`OnFailure::Cancel`](crate::workflow::OnFailure)); each logged. Returns how many.
    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64>;
}

/// The terminal cause of a job an operator cancelled.
pub(crate) fn cancel_cause(actor: &str) -> String {
    format!("cancelled by {actor}")
}

/// The audit detail of a request to stop a Running job.
pub(crate) fn ask_detail(attempt: u32) -> String {
    format!("attempt {attempt}")
}

/// The audit detail of a run-now: when the job would have run.
pub(crate) fn run_now_detail(was_due_at: Millis) -> String {
    format!("due_at was {was_due_at}")
}

/// What cancelling a job found in `job` answers: a Scheduled job is cancelled, a Running one
/// asked to stop, a terminal one left alone.
pub(crate) fn cancel_answer(job: Option<&Found>) -> CancelResult {
    match job.map(|j| j.state) {
        None => CancelResult::NotFound,
        Some(JobState::Scheduled | JobState::Waiting) => CancelResult::Cancelled,
        Some(JobState::Running) => CancelResult::CancelRequested,
        Some(state) => CancelResult::NotCancellable { state },
    }
}

/// What making a job found in `job` due now answers: only a Scheduled job is made due.
pub(crate) fn run_now_answer(job: Option<&Found>) -> RunNowResult {
    match job {
        None => RunNowResult::NotFound,
        Some(j) if j.state == JobState::Scheduled => RunNowResult::Due { was_due_at: j.due_at },
        Some(j) => RunNowResult::NotScheduled { state: j.state },
    }
}

/// What a cancel did to a set of jobs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cancelled {
    /// Named jobs that ended Cancelled.
    pub cancelled: u64,
    /// Waiting jobs cancelled with them, their workflows cancelling dependents of a job that
    /// does not succeed (not named, so counted apart).
    pub dependents: u64,
    pub asked_to_stop: u64,
}

/// Cancel the jobs `ids` names, in that order, deciding each on `jobs` (what the transaction
/// found): Scheduled ends Cancelled now; Running is asked to stop, once (asking twice changes
/// nothing: the first operator to ask is the one audited). `jobs` is updated as it goes, so an
/// id named twice is decided on what the first did.
pub(crate) fn cancel_found(
    tx: &mut (impl OperatorTx + ?Sized),
    now: Millis,
    actor: &str,
    ids: &[JobId],
    jobs: &mut HashMap<JobId, Found>,
) -> Result<(Vec<CancelResult>, Cancelled)> {
    let mut cancel = Vec::new();
    let mut ask = Vec::new();
    let results = ids
        .iter()
        .map(|id| {
            let job = jobs.get_mut(id);
            let answer = cancel_answer(job.as_deref());
            if let Some(job) = job {
                match answer {
                    CancelResult::Cancelled => {
                        cancel.push((*id, job.attempt, job.state));
                        job.state = JobState::Cancelled;
                    }
                    CancelResult::CancelRequested if !job.cancel_requested => {
                        job.cancel_requested = true;
                        ask.push((*id, ask_detail(job.attempt)));
                    }
                    _ => {}
                }
            }
            answer
        })
        .collect();
    let ended: Vec<JobId> = cancel.iter().map(|(id, ..)| *id).collect();
    let done = Cancelled {
        cancelled: tx.cancel_scheduled(now, actor, &cancel_cause(actor), &cancel)?,
        // What depends on a cancelled job is cancelled with it where its workflow says so.
        dependents: tx.cancel_dependents(now, &ended)?,
        asked_to_stop: tx.ask_to_stop(now, actor, AuditAction::CancelRequested, &ask)?,
    };
    Ok((results, done))
}

/// Make the jobs `ids` names due at `now`, in that order, deciding each on `jobs`: a Scheduled
/// job due later is made due now and audited with when it would have run; one already due is
/// answered `Due` and left as it is. Returns the answers and how many were moved.
pub(crate) fn run_now_found(
    tx: &mut (impl OperatorTx + ?Sized),
    now: Millis,
    actor: &str,
    ids: &[JobId],
    jobs: &mut HashMap<JobId, Found>,
) -> Result<(Vec<RunNowResult>, u64)> {
    let mut moved = Vec::new();
    let results = ids
        .iter()
        .map(|id| {
            let job = jobs.get_mut(id);
            let answer = run_now_answer(job.as_deref());
            if let (Some(job), RunNowResult::Due { was_due_at }) = (job, answer) {
                if was_due_at > now {
                    job.due_at = now;
                    moved.push((*id, run_now_detail(was_due_at)));
                }
            }
            answer
        })
        .collect();
    let n = tx.make_due(now, actor, AuditAction::RunNow, &moved)?;
    Ok((results, n))
}

/// Requeue the jobs `ids` names, in that order, deciding each on `jobs` (what the transaction
/// found): a Dead-Lettered or Quarantined job goes back to Scheduled, due now, its budget reset;
/// one whose unique key another job holds stays and names the holder; any other is not
/// requeueable. `jobs` is updated as it goes, so an id named twice is found Scheduled the second
/// time. Jobs with a key are written one by one as they are decided, so that a refused one
/// changes nothing else; the others as one set at the end.
pub(crate) fn requeue_found(
    tx: &mut (impl OperatorTx + ?Sized),
    now: Millis,
    actor: &str,
    ids: &[JobId],
    jobs: &mut HashMap<JobId, Found>,
) -> Result<Vec<RequeueResult>> {
    let keyed = tx.keyed(&jobs.keys().copied().collect::<Vec<_>>())?;
    let mut plain = Vec::new();
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(job) = jobs.get_mut(id) else {
            results.push(RequeueResult::NotFound);
            continue;
        };
        let from = job.state;
        if !from.is_requeueable() {
            results.push(RequeueResult::NotRequeueable { state: from });
            continue;
        }
        if keyed.contains(id) {
            if let Some(existing) = tx.requeue_keyed(now, actor, *id, from)? {
                results.push(RequeueResult::Conflict { existing });
                continue;
            }
        } else {
            plain.push((*id, from));
        }
        job.state = JobState::Scheduled;
        results.push(RequeueResult::Requeued { from });
    }
    tx.requeue_jobs(now, actor, &plain)?;
    Ok(results)
}

/// `bw requeue ID…`: needs `operate`, checked before any job is looked at.
pub(crate) fn requeue(tx: &mut (impl OperatorTx + ?Sized), actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
    tx.require(actor, Permission::Operate)?;
    let now = tx.now()?;
    let mut jobs = tx.jobs(ids, true)?;
    requeue_found(tx, now, actor, ids, &mut jobs)
}

/// `bw cancel ID…`: needs `operate`, checked before any job is looked at.
pub(crate) fn cancel(tx: &mut (impl OperatorTx + ?Sized), actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>> {
    tx.require(actor, Permission::Operate)?;
    let now = tx.now()?;
    let mut jobs = tx.jobs(ids, true)?;
    Ok(cancel_found(tx, now, actor, ids, &mut jobs)?.0)
}

/// `bw run-now ID…`: needs `operate`, checked before any job is looked at.
pub(crate) fn run_now(tx: &mut (impl OperatorTx + ?Sized), actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
    tx.require(actor, Permission::Operate)?;
    let now = tx.now()?;
    let mut jobs = tx.jobs(ids, true)?;
    Ok(run_now_found(tx, now, actor, ids, &mut jobs)?.0)
}

/// What [`cancel`] would answer for each of `ids` now, changing nothing.
pub(crate) fn check_cancel(tx: &mut (impl OperatorTx + ?Sized), ids: &[JobId]) -> Result<Vec<CancelResult>> {
    let jobs = tx.jobs(ids, false)?;
    Ok(ids.iter().map(|id| cancel_answer(jobs.get(id))).collect())
}

/// What [`run_now`] would answer for each of `ids` now, changing nothing.
pub(crate) fn check_run_now(tx: &mut (impl OperatorTx + ?Sized), ids: &[JobId]) -> Result<Vec<RunNowResult>> {
    let jobs = tx.jobs(ids, false)?;
    Ok(ids.iter().map(|id| run_now_answer(jobs.get(id))).collect())
}

/// The reason logged on every operator requeue.
pub(crate) const REQUEUE_REASON: &str = "requeued by operator: attempt budget reset";

/// What one transaction of a purge by age asks of a backend, beside [`OperatorTx`].
pub(crate) trait PurgeTx: OperatorTx {
    /// Delete one batch of terminal jobs that finished before `cutoff`, with their log
    /// entries; returns how many.
    fn purge_batch(&mut self, cutoff: Millis) -> Result<u64>;
}

/// One write transaction of a backend, handed a [`PurgeTx`].
pub(crate) type PurgeWrite<'a> = dyn FnMut(&mut dyn FnMut(&mut dyn PurgeTx) -> Result<u64>) -> Result<u64> + 'a;

/// `bw purge --older-than`: needs `operate` (checked before anything is counted, and again in
/// each batch). Each batch is audited in the transaction that deletes it, so a run that dies
/// between batches has left a record of every job it removed; a purge that found nothing is
/// audited too. `total` counts what matched when the run started.
pub(crate) fn purge(
    write: &mut PurgeWrite<'_>,
    total: impl FnOnce() -> Result<u64>,
    actor: &str,
    cutoff: Millis,
    mut progress: impl FnMut(BulkProgress),
) -> Result<u64> {
    write(&mut |tx| tx.require(actor, Permission::Operate).map(|()| 0))?;
    let total = total()?;
    let mut done = 0;
    loop {
        let n = write(&mut |tx| {
            tx.require(actor, Permission::Operate)?;
            let now = tx.now()?;
            let n = tx.purge_batch(cutoff)?;
            if n > 0 {
                tx.audit(now, actor, AuditAction::Purge, None, &purge_detail(n, cutoff))?;
            }
            Ok(n)
        })?;
        if n == 0 {
            break;
        }
        done += n;
        progress(BulkProgress { done, total });
    }
    if done == 0 {
        write(&mut |tx| {
            let now = tx.now()?;
            tx.audit(now, actor, AuditAction::Purge, None, &purge_detail(0, cutoff)).map(|()| 0)
        })?;
    }
    Ok(done)
}

/// The audit detail of one purge batch (or of a purge that found nothing).
pub(crate) fn purge_detail(n: u64, cutoff: Millis) -> String {
    format!("{n} jobs finished before {cutoff}")
}

/// A job as a payload repair finds it.
pub(crate) struct Editable {
    pub state: JobState,
    pub payload: Vec<u8>,
    pub wire_name: String,
    pub unique_key: Option<String>,
}

/// A job as a purge by id finds it: what its audit row keeps of it.
pub(crate) struct Purgeable {
    pub state: JobState,
    pub wire_name: String,
    pub queue: String,
}

/// What the actions on one job by id beyond cancel and run-now ask of a backend, beside
/// [`OperatorTx`]. Each read finds the job as this transaction will act on it (on PostgreSQL
/// locked `FOR UPDATE` until the transaction ends).
pub(crate) trait RepairTx: OperatorTx {
    fn editable(&mut self, id: JobId) -> Result<Option<Editable>>;
    /// Store `payload` on the job at `now`, and `key` as its unique key when one is given; a
    /// key another job holds is refused with [`unique::edit_collides`] and changes nothing.
    fn set_payload(&mut self, id: JobId, payload: &[u8], key: Option<&str>, now: Millis) -> Result<()>;
    fn purgeable(&mut self, id: JobId) -> Result<Option<Purgeable>>;
    /// The job's state and priority, as this transaction will change it.
    fn priority_of(&mut self, id: JobId) -> Result<Option<(JobState, u8)>>;
    /// Store `priority` on the job at `now`.
    fn set_priority(&mut self, id: JobId, priority: u8, now: Millis) -> Result<()>;
    /// Delete the job; its log entries go with it (SQLite's `ON DELETE CASCADE`, PostgreSQL's
    /// `jobs_delete_log` trigger).
    fn delete_job(&mut self, id: JobId) -> Result<()>;
}

/// `bw edit-payload ID`: needs `operate`, checked first; then the payload's size against the
/// store's limit, the job's state, and a unique key that follows the payload (one another job
/// holds refuses the edit). The old payload goes into the audit row, so the edit can be undone.
/// With `requeue`, the job is requeued in the same transaction; a key another job holds then
/// leaves it where it was, repaired, and names the holder. The caller has checked that the
/// new payload is JSON ([`check_new_payload`]) before the transaction began.
pub(crate) fn edit_payload(
    tx: &mut (impl RepairTx + ?Sized),
    actor: &str,
    id: JobId,
    payload: &[u8],
    requeue: bool,
) -> Result<PayloadEdit> {
    tx.require(actor, Permission::Operate)?;
    check_payload_size(payload.len(), tx.payload_limit()?, None)?;
    let now = tx.now()?;
    let Some(job) = tx.editable(id)? else { return Err(Error::JobNotFound(id.to_string())) };
    check_editable(id, job.state)?;
    let key = job.unique_key.and_then(|k| unique::edited_key(&k, &job.wire_name, &job.payload, payload));
    tx.set_payload(id, payload, key.as_deref(), now)?;
    tx.audit(now, actor, AuditAction::EditPayload, Some(id), &payload_edit_detail(&job.payload, payload))?;
    let requeued = if requeue {
        let mut jobs = tx.jobs(&[id], true)?;
        requeue_found(tx, now, actor, &[id], &mut jobs)?.pop()
    } else {
        None
    };
    let (requeued, conflict) = match requeued {
        Some(RequeueResult::Requeued { .. }) => (true, None),
        Some(RequeueResult::Conflict { existing }) => (false, Some(existing)),
        _ => (false, None),
    };
    Ok(PayloadEdit { from: job.state, old_bytes: job.payload.len(), new_bytes: payload.len(), requeued, conflict })
}

/// `bw jobs set-priority ID N` (and the dashboard's): needs `operate`, checked first; then the
/// priority's range, then the job. Any state: a Scheduled job is claimed by its new priority
/// from the next claim, a Running or terminal one keeps it for its retry or requeue. Audited as
/// `set-priority` with the old and new values; setting the priority it has changes nothing and
/// audits nothing.
pub(crate) fn set_priority(
    tx: &mut (impl RepairTx + ?Sized),
    actor: &str,
    id: JobId,
    priority: u8,
) -> Result<PriorityChange> {
    tx.require(actor, Permission::Operate)?;
    let to = crate::model::check_priority("the priority", priority)?;
    let now = tx.now()?;
    let Some((state, from)) = tx.priority_of(id)? else { return Err(Error::JobNotFound(id.to_string())) };
    if from != to {
        tx.set_priority(id, to, now)?;
        tx.audit(now, actor, AuditAction::SetPriority, Some(id), &format!("priority {from} -> {to}"))?;
    }
    Ok(PriorityChange { state, from, to })
}

/// `bw purge ID…`: needs `operate`, checked before any job is looked at; then each id in
/// order: a terminal job is deleted with its log and audited with what it was, any other is
/// left alone ([`decide_purge`]).
pub(crate) fn purge_jobs(tx: &mut (impl RepairTx + ?Sized), actor: &str, ids: &[JobId]) -> Result<Vec<PurgeResult>> {
    tx.require(actor, Permission::Operate)?;
    let now = tx.now()?;
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(job) = tx.purgeable(*id)? else {
            results.push(PurgeResult::NotFound);
            continue;
        };
        let result = decide_purge(job.state);
        if let PurgeResult::Deleted { .. } = result {
            tx.delete_job(*id)?;
            let detail = purge_job_detail(job.state, &job.wire_name, &job.queue);
            tx.audit(now, actor, AuditAction::Purge, Some(*id), &detail)?;
        }
        results.push(result);
    }
    Ok(results)
}

/// Whether a job found in `state` may be purged by id: only a terminal one, so that a purge
/// never pulls a job from under a worker or loses one that is still to run.
pub(crate) fn decide_purge(state: JobState) -> PurgeResult {
    if state.is_terminal() {
        PurgeResult::Deleted { state }
    } else {
        PurgeResult::NotTerminal { state }
    }
}

/// The audit detail of one job purged by id: what it was, since its row and log are gone.
pub(crate) fn purge_job_detail(state: JobState, wire_name: &str, queue: &str) -> String {
    serde_json::json!({ "state": state.as_str(), "wire_name": wire_name, "queue": queue }).to_string()
}

/// The scheduled jobs `filter` matches: what run-now acts on.
pub(crate) fn run_now_scope(filter: &JobFilter) -> JobFilter {
    JobFilter { states: vec![JobState::Scheduled], finished_before: None, ..filter.clone() }
}

/// The scheduled, running and waiting jobs `filter` matches (all three when it names none):
/// what a bulk cancel acts on.
pub(crate) fn cancel_scope(filter: &JobFilter) -> JobFilter {
    let mut f = JobFilter { finished_before: None, ..filter.clone() };
    f.states.retain(|s| matches!(s, JobState::Scheduled | JobState::Running | JobState::Waiting));
    if f.states.is_empty() {
        f.states = vec![JobState::Scheduled, JobState::Running, JobState::Waiting];
    }
    f
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
