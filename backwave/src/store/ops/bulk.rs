//! Bulk requeue, cancel and run-now of a filtered set, written once for both backends: the
//! permission checked before anything is counted and again in every batch, the set fixed when
//! the run starts, each batch one short transaction that commits whole and is counted only once
//! it has, and what the plans count. A backend supplies how it finds the set and each batch,
//! and a requeue's statements ([`BulkTx`]); each job is decided by `ops/jobs.rs`.

use std::collections::HashMap;

use super::jobs::{cancel_found, cancel_scope, run_now_found, run_now_scope, Cancelled, Found, OperatorTx};
use super::preview::requeue_scope;
use crate::error::Result;
use crate::model::{JobId, Millis, Permission};
use crate::store::{BulkProgress, CancelDone, CancelPlan, JobFilter, RunNowPlan, BULK_BATCH};

/// A bulk action on the jobs a filter matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BulkAction {
    Requeue,
    Cancel,
    RunNow,
}

/// One bulk run: its action, and the jobs it acts on, fixed when it started.
#[derive(Clone, Debug)]
pub(crate) struct BulkRun {
    pub action: BulkAction,
    /// The jobs of the filter the action applies to (see [`requeue_scope`], [`cancel_scope`],
    /// [`run_now_scope`]).
    pub scope: JobFilter,
    /// The store's time when the run started.
    pub started: Millis,
}

impl BulkRun {
    pub(crate) fn new(action: BulkAction, filter: &JobFilter, started: Millis) -> BulkRun {
        let scope = match action {
            BulkAction::Requeue => requeue_scope(filter, started),
            BulkAction::Cancel => cancel_scope(filter),
            BulkAction::RunNow => run_now_scope(filter),
        };
        BulkRun { action, scope, started }
    }

    /// What a job of the scope meets while the run still has to act on it, as SQL over `jobs`
    /// (the same text on both backends; `started` is our own integer, never input). A job made
    /// after the run started is not in its set. Run-now gives every job the run's start as its
    /// due time, so no batch finds an earlier batch's jobs again; a cancel leaves a Running job
    /// that someone already asked to stop. A requeue's scope already ends at its start.
    pub(crate) fn pending(&self) -> String {
        let started = self.started;
        match self.action {
            BulkAction::Requeue => "true".into(),
            BulkAction::Cancel => {
                format!(
                    "{} AND (state = 'scheduled' OR state = 'waiting' OR cancel_requested_by IS NULL)",
                    made_by(started)
                )
            }
            BulkAction::RunNow => format!("{} AND due_at > {started}", made_by(started)),
        }
    }
}

/// The jobs made at or before `at` (our own integer), as SQL.
fn made_by(at: Millis) -> String {
    format!("created_at <= {at}")
}

/// How a backend works through a run's set.
#[derive(Debug)]
pub(crate) enum BulkSet {
    /// Picked again by every batch, up to [`BULK_BATCH`] of the jobs still to do, until a batch
    /// changes nothing; `total` counted when the run started. SQLite: under the one writer a
    /// pick is exact, and its indexes find the first of the jobs left at once.
    Picked { total: u64 },
    /// Listed once when the run started, in id order, then taken [`BULK_BATCH`] at a time, each
    /// chunk locked and matched again. PostgreSQL: it keeps the row versions a batch replaced
    /// until a vacuum, and planning on statistics from before the run, a later batch picking
    /// afresh may scan past every one of them (100,000 jobs run now after a requeue: 41 s
    /// instead of 2.4). The list costs 16 bytes a job (a million jobs: 16 MB).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Listed(Vec<JobId>),
}

/// One batch's jobs still to do, as the transaction that acts on them holds them (locked on
/// PostgreSQL), in the order to act on them.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub ids: Vec<JobId>,
    /// What each was found as, for the actions decided job by job (cancel, run-now). A
    /// requeue's own statements decide on the rows they touch, so a backend may leave it empty
    /// for one.
    pub found: HashMap<JobId, Found>,
}

/// What a bulk run asks of a backend's transaction, beside the per-job statements of
/// [`OperatorTx`].
pub(crate) trait BulkTx: OperatorTx {
    /// How many jobs of `scope` meet `base`, then how many of those meet each of `each` (SQL
    /// over `jobs`, as [`BulkRun::pending`]), in this transaction's snapshot.
    fn count_each(&mut self, scope: &JobFilter, base: &str, each: &[String]) -> Result<Vec<u64>>;
    /// The run's set, read in a snapshot when the run starts.
    fn bulk_set(&mut self, run: &BulkRun) -> Result<BulkSet>;
    /// The next batch: up to [`BULK_BATCH`] of the jobs still to do, from `listed` (the next
    /// chunk of [`BulkSet::Listed`]) or picked afresh.
    fn take_batch(&mut self, run: &BulkRun, listed: Option<&[JobId]>) -> Result<Batch>;
    /// Requeue the batch's jobs (those with a unique key one by one, so that one whose key
    /// another job holds is left alone); how many were requeued.
    fn requeue_batch(&mut self, now: Millis, actor: &str, batch: Batch) -> Result<u64>;
}

/// The transactions a bulk run opens on one backend.
pub(crate) trait BulkStore {
    /// `f` in one write transaction, committed whole (PostgreSQL runs it again after losing a
    /// race, so `f` keeps no count of its own).
    fn bulk_write<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T>;
    /// `f` in one read transaction: a snapshot, which on SQLite holds no writer up.
    fn bulk_read<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T>;
}

/// What a bulk run changed, added up batch by batch once each committed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Jobs of the set changed: requeued, made due, or cancelled and asked to stop (what the
    /// progress counts against the set's total).
    pub changed: u64,
    pub cancelled: u64,
    pub asked_to_stop: u64,
    /// Jobs outside the set cancelled with it: the waiting dependents of a cancelled job whose
    /// workflow cancels them.
    pub dependents: u64,
}

impl Tally {
    pub(crate) fn cancel_done(self) -> CancelDone {
        CancelDone {
            cancelled: self.cancelled,
            asked_to_stop: self.asked_to_stop,
            dependents_cancelled: self.dependents,
            arrived_after_plan: 0,
        }
    }
}

/// Run `action` on the jobs `filter` matches, by `actor`: refused before anything is counted
/// unless `operate` is held; the set fixed when the run starts (counted in a snapshot, never
/// under SQLite's write lock); then batches of [`BULK_BATCH`], each checking `operate` again
/// and committing whole, so that a run killed part-way leaves every job either changed with its
/// log entry or untouched, and running it again finishes the rest. `progress` hears after each
/// batch that changed something.
pub(crate) fn run(
    store: &impl BulkStore,
    actor: &str,
    action: BulkAction,
    filter: &JobFilter,
    mut progress: impl FnMut(BulkProgress),
) -> Result<Tally> {
    let started = store.bulk_write(&mut |tx| {
        tx.require(actor, Permission::Operate)?;
        tx.now()
    })?;
    let run = BulkRun::new(action, filter, started);
    let set = store.bulk_read(&mut |tx| tx.bulk_set(&run))?;
    let (total, mut chunks) = match &set {
        BulkSet::Picked { total } => (*total, None),
        BulkSet::Listed(ids) => (ids.len() as u64, Some(ids.chunks(BULK_BATCH))),
    };
    let mut tally = Tally::default();
    loop {
        let listed = match &mut chunks {
            Some(chunks) => match chunks.next() {
                Some(chunk) => Some(chunk),
                None => break,
            },
            None => None,
        };
        let batch = store.bulk_write(&mut |tx| {
            tx.require(actor, Permission::Operate)?;
            // Every job of a run-now is made due at the run's start (see `BulkRun::pending`).
            let now = if action == BulkAction::RunNow { started } else { tx.now()? };
            act(tx, &run, now, actor, listed)
        })?;
        if batch.changed == 0 {
            // A picked batch that changed nothing has nothing left behind it; a listed chunk
            // whose jobs all changed meanwhile (a worker, another operator) is followed by more.
            if listed.is_none() {
                break;
            }
            continue;
        }
        tally.changed += batch.changed;
        tally.cancelled += batch.cancelled;
        tally.asked_to_stop += batch.asked_to_stop;
        tally.dependents += batch.dependents;
        progress(BulkProgress { done: tally.changed, total });
    }
    Ok(tally)
}

/// One batch of `run`, at `now`.
fn act(tx: &mut dyn BulkTx, run: &BulkRun, now: Millis, actor: &str, listed: Option<&[JobId]>) -> Result<Tally> {
    let mut batch = tx.take_batch(run, listed)?;
    Ok(match run.action {
        BulkAction::Requeue => Tally { changed: tx.requeue_batch(now, actor, batch)?, ..Tally::default() },
        BulkAction::Cancel => {
            let Cancelled { cancelled, dependents, asked_to_stop } =
                cancel_found(tx, now, actor, &batch.ids, &mut batch.found)?.1;
            Tally { changed: cancelled + asked_to_stop, cancelled, asked_to_stop, dependents }
        }
        BulkAction::RunNow => {
            let changed = run_now_found(tx, now, actor, &batch.ids, &mut batch.found)?.1;
            Tally { changed, ..Tally::default() }
        }
    })
}

/// What a bulk run-now of `filter` would do now, counted in one snapshot.
pub(crate) fn plan_run_now(tx: &mut (impl BulkTx + ?Sized), filter: &JobFilter) -> Result<RunNowPlan> {
    let now = tx.now()?;
    let counts = tx.count_each(&run_now_scope(filter), &made_by(now), &[format!("due_at > {now}")])?;
    let (matching, would_run_now) = (counts[0], counts[1]);
    Ok(RunNowPlan {
        matching,
        would_run_now,
        already_due: matching - would_run_now,
        as_of: now,
        scope: JobFilter::default(),
    })
}

/// What a bulk cancel of `filter` would do now, counted in one snapshot.
pub(crate) fn plan_cancel(tx: &mut (impl BulkTx + ?Sized), filter: &JobFilter) -> Result<CancelPlan> {
    let now = tx.now()?;
    // A Waiting job is cancelled at once, as a Scheduled one is.
    let each = [
        "(state = 'scheduled' OR state = 'waiting')".to_string(),
        "state = 'running' AND cancel_requested_by IS NULL".to_string(),
    ];
    let counts = tx.count_each(&cancel_scope(filter), &made_by(now), &each)?;
    Ok(CancelPlan::counted(counts[0], counts[1], counts[2], now))
}
