//! What a requeue would do, written once: the plan's and the per-id answer's types, which jobs
//! a bulk requeue acts on, and how counts by wire name add up against the live handlers. Each
//! backend only counts, in its own statements.

use std::collections::HashMap;

use serde::Serialize;

use crate::model::{Job, JobId, JobState, QuarantineReason};
use crate::store::JobFilter;

/// The exact effect of a bulk requeue at the moment it was planned.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RequeuePlan {
    /// The store's time when the plan counted.
    #[serde(skip)]
    pub as_of: crate::model::Millis,
    /// Exactly the jobs counted: what [`crate::Store::requeue_planned`] acts on (set by
    /// [`crate::Store::plan_requeue`]).
    #[serde(skip)]
    pub scope: JobFilter,
    /// Dead-Lettered or Quarantined jobs that match.
    pub matching: u64,
    /// Of those, jobs whose wire name a live worker handles now: requeued with a fresh budget.
    pub would_requeue: u64,
    /// Jobs whose wire name no live worker handles now: a requeue would quarantine them again.
    pub would_requarantine: u64,
    /// The wire names behind `would_requarantine`, with their counts, largest first.
    pub unhandled: Vec<WireNameCount>,
    /// The wire names behind `would_requeue`, with their counts and live handlers.
    pub handled: Vec<WireNameCount>,
    /// Of `would_requeue`, Quarantined jobs whose payload did not decode: a live handler is no
    /// sign they will run; they quarantine again unless the handler now accepts the payload.
    pub undecodable: u64,
    /// Of `matching`, jobs a requeue leaves as they are because of their unique key: another
    /// job holds it, or another matching job with the same key is requeued first.
    pub would_conflict: u64,
    /// No live worker at all now (a service stopped, or between deploys): the jobs requeued wait,
    /// Scheduled, until one starts; none is quarantined again for want of a handler, since
    /// nobody claims them meanwhile (found by an on-call: a requeue's plan said they would
    /// quarantine again, and they ran once the service came back).
    pub no_live_worker: bool,
}

/// What requeueing one job by id would do now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum RequeueCheck {
    /// Dead-Lettered or Quarantined: it would be requeued.
    WouldRequeue {
        /// The state it is in.
        state: JobState,
        /// Its wire name.
        wire_name: String,
        /// Live workers run, but none handles its wire name: it would quarantine again.
        requarantine: bool,
        /// No live worker at all now: it would wait, Scheduled, until one starts.
        no_live_worker: bool,
        /// Quarantined because its payload did not decode (and a worker handles it).
        undecodable: bool,
    },
    /// Not Dead-Lettered or Quarantined: a requeue would change nothing.
    NotRequeueable {
        /// The state it is in.
        state: JobState,
    },
    /// Dead-Lettered or Quarantined, but the job `existing` holds its unique key now: a
    /// requeue would be refused.
    Conflict {
        /// The state it is in.
        state: JobState,
        /// The job holding the key.
        existing: JobId,
    },
    /// No job has this id.
    NotFound,
}

/// How many jobs of a plan have one wire name, and whether anyone would run them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WireNameCount {
    /// The wire name.
    pub wire_name: String,
    /// How many of the plan's jobs have it.
    pub count: u64,
    /// Live workers that handle this wire name now.
    pub live_handlers: u64,
}

impl RequeuePlan {
    /// Count `count` jobs of `wire_name` in: to be requeued if a live worker handles the wire
    /// name now, else to be quarantined again. Returns whether one does.
    pub(crate) fn add(&mut self, wire_name: String, count: u64, handlers: &HashMap<String, u64>) -> bool {
        if count == 0 {
            return false;
        }
        // Every live worker handles at least one wire name: none at all means no worker runs.
        self.no_live_worker = handlers.is_empty();
        let live = handlers.get(&wire_name).copied().unwrap_or(0);
        let entry = WireNameCount { wire_name, count, live_handlers: live };
        if live == 0 && !self.no_live_worker {
            self.would_requarantine += count;
            self.unhandled.push(entry);
            false
        } else {
            self.would_requeue += count;
            self.handled.push(entry);
            true
        }
    }

    /// Largest groups first, then by wire name.
    pub(crate) fn sort(&mut self) {
        for list in [&mut self.unhandled, &mut self.handled] {
            list.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.wire_name.cmp(&b.wire_name)));
        }
    }
}

/// What requeueing one job found by id would do, given the live handlers now.
/// `holder` is the job other than this one that holds its unique key now, if any.
pub(crate) fn check_one(job: Option<Job>, holder: Option<JobId>, handlers: &HashMap<String, u64>) -> RequeueCheck {
    match job {
        None => RequeueCheck::NotFound,
        Some(j) if !j.state.is_requeueable() => RequeueCheck::NotRequeueable { state: j.state },
        Some(j) if holder.is_some() => RequeueCheck::Conflict { state: j.state, existing: holder.unwrap_or(j.id) },
        Some(j) => {
            let no_live_worker = handlers.is_empty();
            let requarantine = !no_live_worker && handlers.get(&j.wire_name).copied().unwrap_or(0) == 0;
            RequeueCheck::WouldRequeue {
                state: j.state,
                requarantine,
                no_live_worker,
                undecodable: !requarantine && j.quarantine_reason == Some(QuarantineReason::UndecodablePayload),
                wire_name: j.wire_name,
            }
        }
    }
}

/// Whether the scope can hold Quarantined jobs whose payload did not decode.
pub(crate) fn undecodable_in_scope(scope: &JobFilter) -> bool {
    scope.states.contains(&JobState::Quarantined)
        && matches!(scope.quarantine_reason, None | Some(QuarantineReason::UndecodablePayload))
}

/// The requeueable jobs `filter` matches (dead-lettered and quarantined when it names neither),
/// finished before `now`: what a bulk requeue acts on.
pub(crate) fn requeue_scope(filter: &JobFilter, now: crate::model::Millis) -> JobFilter {
    let mut f = filter.clone();
    f.states.retain(|s| s.is_requeueable());
    if f.states.is_empty() {
        f.states = vec![JobState::DeadLettered, JobState::Quarantined];
    }
    let started = now.saturating_add(1);
    f.finished_before = Some(f.finished_before.map_or(started, |b| b.min(started)));
    f
}
