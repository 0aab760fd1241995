//! Bulk actions as the operator confirmed them, written once above both backends: the actor's
//! permission is checked before anything is counted; a plan fixes the exact set it counted (its
//! filter cut at the plan's instant), and the action works through that set and no other, then
//! counts what arrived after the plan and was left. The CLI and the dashboard call only these.

use serde::Serialize;

use super::ops::bulk::{BulkAction, BulkStore, BulkTx};
use super::*;
use crate::error::Result;
use crate::model::{Millis, Permission};

/// What a bulk requeue or run-now did to the set its plan counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BulkDone {
    /// Jobs changed. Fewer than planned when some changed meanwhile (a worker ran them, another
    /// operator acted first): those are left as they are.
    pub done: u64,
    /// Jobs that came to match after the plan counted: left alone, since the operator confirmed
    /// the plan's set. Running the command again plans and acts on them.
    pub arrived_after_plan: u64,
}

/// `filter` cut at the plan's instant: only jobs whose reference time (created for active
/// jobs, finished for terminal ones) is at or before `as_of`.
fn cut(mut scope: JobFilter, as_of: Millis) -> JobFilter {
    let end = as_of.saturating_add(1);
    scope.before = Some(scope.before.map_or(end, |b| b.min(end)));
    scope
}

/// The jobs of a plan's `scope` whose reference time is after `as_of`: what arrived after the
/// plan. The cut [`cut`] (or `requeue_scope`) made is lifted; a `before` of the operator's own
/// that ends before the plan stays, and then nothing can have arrived.
fn after(mut scope: JobFilter, as_of: Millis) -> JobFilter {
    let start = as_of.saturating_add(1);
    scope.since = Some(scope.since.map_or(start, |s| s.max(start)));
    scope.finished_before = None;
    if scope.before == Some(start) {
        scope.before = None;
    }
    scope
}

impl Store {
    /// Refuse with [`PermissionDenied`](crate::Error::PermissionDenied) unless `actor` holds `permission` (admin holds
    /// all three). Every bulk plan calls it first, so that nobody waits for a count and a
    /// question only to be told at the end that they may not act.
    /// On PostgreSQL the name checked (and refused) is the one the server vouches for: the
    /// session's role unless that role owns the store.
    pub fn require(&self, actor: &str, permission: Permission) -> Result<()> {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.require(actor, permission),
            Backend::Sqlite(_) => ops::access::allowed(&self.permissions(actor)?, actor, permission),
        }
    }

    /// Requeue every Dead-Lettered or Quarantined job that matches `filter` and had finished
    /// when the run started (so a job that fails again during the run is not requeued twice),
    /// in batches of [`BULK_BATCH`]. Needs `operate`, checked before anything is counted and
    /// again in each batch. Returns how many were requeued.
    pub fn requeue_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        Ok(ops::bulk::run(self, actor, BulkAction::Requeue, filter, progress)?.changed)
    }

    /// Make every matching Scheduled job that is due later due now, in batches of
    /// [`BULK_BATCH`], each audited job by job in its own transaction. The set is fixed when
    /// the run starts (jobs enqueued during it are left alone). Needs `operate`. Returns how
    /// many changed.
    /// [`Store::run_now_planned`] is the same on the set a plan counted.
    pub fn run_now_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        Ok(ops::bulk::run(self, actor, BulkAction::RunNow, filter, progress)?.changed)
    }

    /// Cancel every matching Scheduled job and ask every matching Running one to stop, in
    /// batches of [`BULK_BATCH`] (each job exactly as [`Store::cancel`] does it, logged with
    /// the actor). The set is fixed when the run starts. Needs `operate`.
    pub fn cancel_matching(
        &self,
        actor: &str,
        filter: &JobFilter,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        Ok(ops::bulk::run(self, actor, BulkAction::Cancel, filter, progress)?.cancel_done())
    }

    /// Count, exactly, what a bulk requeue of `filter` by `actor` would do now. Needs `operate`,
    /// checked before counting.
    pub fn plan_requeue(&self, actor: &str, filter: &JobFilter) -> Result<RequeuePlan> {
        self.require(actor, Permission::Operate)?;
        let mut plan = match &self.backend {
            Backend::Sqlite(s) => s.plan_requeue(filter)?,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.plan_requeue(filter)?,
        };
        plan.scope = ops::preview::requeue_scope(filter, plan.as_of);
        Ok(plan)
    }

    /// Requeue what `plan` counted: every job of its set when `force`, else only those whose
    /// wire name a live worker handled when it was planned (one run per such wire name,
    /// progress counted across them). Jobs that failed after the plan are left, and counted.
    /// Batched and resumable like [`Store::requeue_matching`].
    pub fn requeue_planned(
        &self,
        actor: &str,
        plan: &RequeuePlan,
        force: bool,
        mut progress: impl FnMut(BulkProgress),
    ) -> Result<BulkDone> {
        let done = if force || plan.unhandled.is_empty() {
            self.requeue_matching(actor, &plan.scope, &mut progress)?
        } else {
            let total = plan.would_requeue;
            let mut done_before = 0;
            for w in &plan.handled {
                let f = JobFilter { wire_name: Some(w.wire_name.clone()), ..plan.scope.clone() };
                done_before +=
                    self.requeue_matching(actor, &f, |p| progress(BulkProgress { done: done_before + p.done, total }))?;
            }
            done_before
        };
        let mut arrived = after(plan.scope.clone(), plan.as_of);
        if !force {
            // Of the arrivals, only those a live worker handles would have been requeued.
            let handled: Vec<&str> = plan.handled.iter().map(|w| w.wire_name.as_str()).collect();
            if arrived.wire_name.as_deref().is_some_and(|w| !handled.contains(&w)) {
                return Ok(BulkDone { done, arrived_after_plan: 0 });
            }
            let mut n = 0;
            for w in &handled {
                arrived.wire_name = Some(w.to_string());
                n += self.count_jobs(&arrived)?;
            }
            return Ok(BulkDone { done, arrived_after_plan: n });
        }
        Ok(BulkDone { done, arrived_after_plan: self.count_jobs(&arrived)? })
    }

    /// Count, exactly, what a bulk cancel of `filter` by `actor` would do now. Needs `operate`,
    /// checked before counting.
    pub fn plan_cancel(&self, actor: &str, filter: &JobFilter) -> Result<CancelPlan> {
        self.require(actor, Permission::Operate)?;
        let mut plan = self.bulk_read(&mut |tx| ops::bulk::plan_cancel(tx, filter))?;
        plan.scope = cut(ops::jobs::cancel_scope(filter), plan.as_of);
        Ok(plan)
    }

    /// Cancel what `plan` counted (each job as [`Store::cancel`] does it), and count the jobs
    /// enqueued after the plan that match its filter: left alone.
    pub fn cancel_planned(
        &self,
        actor: &str,
        plan: &CancelPlan,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        let mut done = self.cancel_matching(actor, &plan.scope, progress)?;
        let arrived = after(plan.scope.clone(), plan.as_of);
        done.arrived_after_plan = self.count_jobs(&arrived)?;
        Ok(done)
    }

    /// Count, exactly, what a bulk run-now of `filter` by `actor` would do now. Needs `operate`,
    /// checked before counting.
    pub fn plan_run_now(&self, actor: &str, filter: &JobFilter) -> Result<RunNowPlan> {
        self.require(actor, Permission::Operate)?;
        let mut plan = self.bulk_read(&mut |tx| ops::bulk::plan_run_now(tx, filter))?;
        plan.scope = cut(ops::jobs::run_now_scope(filter), plan.as_of);
        Ok(plan)
    }

    /// Make due now what `plan` counted, and count the Scheduled jobs enqueued after the plan
    /// that match its filter: left alone.
    pub fn run_now_planned(
        &self,
        actor: &str,
        plan: &RunNowPlan,
        progress: impl FnMut(BulkProgress),
    ) -> Result<BulkDone> {
        let done = self.run_now_matching(actor, &plan.scope, progress)?;
        let arrived = after(plan.scope.clone(), plan.as_of);
        Ok(BulkDone { done, arrived_after_plan: self.count_jobs(&arrived)? })
    }
}

/// A bulk run's transactions on the store's backend.
impl BulkStore for Store {
    fn bulk_write<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.bulk_write(f),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.bulk_write(f),
        }
    }

    fn bulk_read<T>(&self, f: &mut dyn FnMut(&mut dyn BulkTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.bulk_read(f),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.bulk_read(f),
        }
    }
}
