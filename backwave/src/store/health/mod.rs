//! The store's health in one read: queue latency (jobs due now and the age of the oldest due one,
//! per queue, over what workers may claim: a pause's jobs are counted apart as held), the pauses
//! in force, recent dead letters and new failure causes, quarantines nobody handles, workers,
//! and the checks `bw check` exits on, `bw metrics` exports and `bw top` shows. Read-only, one
//! snapshot, every figure answered from an index or the trigger-kept counts: never a table scan.
//!
//! This file owns the report's types, [`HealthRead`] (what a health read asks of a backend, in
//! its snapshot) and `gather`, which puts the report together from the answers for both
//! backends; the arithmetic of latency and cause groups is `latency.rs` and `causes.rs`, the
//! verdicts `checks.rs`. The reads are the dialects' (`sqlite/health/`, `postgres/health/`).

mod causes;
mod checks;
mod latency;
mod transitions;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::ops::groups::{CauseGroup, QuarantineGroup};
use super::pause::{Pause, PauseKind};
use super::query::StateCounts;
use crate::error::Result;
use crate::model::Millis;

pub use checks::{Check, CheckName, Status, Thresholds};
pub use latency::QueueLatency;
pub use transitions::TransitionCounter;

pub(crate) use causes::{with_examples, Group};
pub(crate) use latency::{latency, DueProbe, InForce};

use super::ops::groups::{live_handlers_from, quarantine_groups_from, QuarantineRow};
use crate::model::WorkerInfo;
use crate::store::{LimitStatus, WorkerState};
use checks::judge;

/// How many cause groups a health read carries with their examples, largest first (and as many
/// of the new ones): more than any screen or label set shows.
pub const CAUSE_GROUPS: usize = 100;

/// One queue's latency and who serves it: a [`QueueLatency`] (its fields mean what they mean
/// there) and the two facts only a health read knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueHealth {
    /// The queue's name.
    pub queue: String,
    /// Due jobs waiting for a worker now ([`QueueLatency::due_now`]).
    pub due_now: u64,
    /// The earliest due time among them ([`QueueLatency::oldest_due_at`]).
    pub oldest_due_at: Option<Millis>,
    /// How long that job has waited, in milliseconds ([`QueueLatency::oldest_due_age_ms`]).
    pub oldest_due_age_ms: u64,
    /// Due jobs a pause in force holds back ([`QueueLatency::held_by_pause`]).
    pub held_by_pause: u64,
    /// The queue's own pause: a paused queue is reported, not judged by `latency` or
    /// `unworked-queue` (it is paused on purpose; `forgotten-pause` watches how long).
    pub paused: Option<Pause>,
    /// Live workers whose groups claim from this queue, quiet and stopping ones left out.
    pub live_workers: u64,
    /// Left out of the latency checks (`Thresholds::exclude_queues`).
    pub excluded: bool,
}

// Flat rather than holding a `QueueLatency`, because readers use `q.due_now` and friends; the
// one place that builds it, `QueueHealth::served`, destructures the latency field by field, so a
// field added to one and not the other fails to compile instead of going missing.
impl QueueHealth {
    /// `latency` with who serves the queue and whether the checks leave it out.
    fn served(latency: QueueLatency, live_workers: u64, excluded: bool) -> Self {
        let QueueLatency { queue, due_now, oldest_due_at, oldest_due_age_ms, held_by_pause, paused } = latency;
        QueueHealth { queue, due_now, oldest_due_at, oldest_due_age_ms, held_by_pause, paused, live_workers, excluded }
    }
}

/// Workers in the registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerHealth {
    /// Registered workers that heartbeat in time.
    pub live: u64,
    /// Registered workers whose heartbeat is overdue (gone without unregistering).
    pub stale: u64,
    /// Ids of the workers whose last heartbeat fell inside the window and are stale now: they
    /// stopped recently (killed, hung, host lost). Older stale rows are history.
    pub recently_stale: Vec<String>,
}

/// Everything [`Store::health`](crate::Store::health) reads, and the verdicts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Health {
    /// The instant it was read at.
    pub at: Millis,
    /// `at` minus the window: "recent" means at or after this.
    pub window_start: Millis,
    /// The worst check.
    pub status: Status,
    /// One per [`CheckName`], in that order.
    pub checks: Vec<Check>,
    /// Jobs by queue and state.
    pub counts: StateCounts,
    /// Every queue that has jobs or a registered worker, by name.
    pub queues: Vec<QueueHealth>,
    /// The pauses in force at `at`, queues first, then by name.
    pub pauses: Vec<Pause>,
    /// Due jobs held back by each wire-name pause in force, by wire name, summed over the queues
    /// not paused themselves (a paused queue's due jobs are all in its
    /// [`QueueHealth::held_by_pause`], whatever their wire name).
    pub held_by_wire_name: BTreeMap<String, u64>,
    /// Jobs Dead-Lettered at or after `window_start`.
    pub dead_lettered_in_window: u64,
    /// The largest dead-letter cause groups (wire name and fingerprint), largest first: at most
    /// [`CAUSE_GROUPS`], so a flood of distinct causes costs neither memory nor example lookups.
    pub causes: Vec<CauseGroup>,
    /// How many cause groups there are in all.
    pub cause_groups_total: u64,
    /// The groups first seen at or after `window_start` (new failures), largest first: at most
    /// [`CAUSE_GROUPS`] of them.
    pub new_causes: Vec<CauseGroup>,
    /// How many groups were first seen at or after `window_start`.
    pub new_causes_total: u64,
    /// Quarantined jobs by wire name and reason, with their live handlers.
    pub quarantines: Vec<QuarantineGroup>,
    /// The worker registry's live and stale workers.
    pub workers: WorkerHealth,
    /// The limits in force ([`Store::limits`](crate::Store::limits)), with what each holds
    /// back now.
    pub limits: Vec<LimitStatus>,
    /// Registered workers that are quiet or stopping, by id, with what each still runs.
    pub worker_states: Vec<WorkerState>,
    /// The transition log's sequence: every transition ever appended (it never goes back, even
    /// when the retention sweep deletes old entries). A Prometheus counter.
    pub log_seq: i64,
    /// Every schedule, as [`Store::schedules`](crate::Store::schedules) reports it (the
    /// `overdue-schedule` check judges them).
    #[serde(skip)]
    pub schedules: Vec<super::ScheduleInfo>,
    /// The store's `payload_limit`: a schedule whose payload is over it fails every tick.
    #[serde(skip)]
    pub payload_limit: u64,
    /// Workflows with jobs waiting behind a parent that ended without succeeding, the most
    /// such jobs first (at most 20).
    pub stuck_workflows: Vec<StuckWorkflow>,
}

/// A workflow some of whose jobs wait behind a parent that ended Dead-Lettered, Quarantined or
/// Cancelled: they run only once that parent is requeued and succeeds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StuckWorkflow {
    /// The workflow.
    pub id: crate::WorkflowId,
    /// Its name.
    pub name: String,
    /// How many of its jobs wait behind such a parent.
    pub stuck: u64,
}

/// The stuck workflows' query, the same text on both backends (`met` is 0/1 on SQLite, a
/// boolean on PostgreSQL: `NOT met` reads both).
pub(crate) const STUCK_WORKFLOWS_SQL: &str = "SELECT w.id, w.name, count(DISTINCT c.id) AS n
     FROM jobs c
     JOIN job_edges e ON e.child = c.id AND NOT e.met
     JOIN jobs p ON p.id = e.parent AND p.state IN ('dead-lettered', 'quarantined', 'cancelled')
     JOIN workflows w ON w.id = c.workflow_id
     WHERE c.state = 'waiting'
     GROUP BY w.id, w.name ORDER BY n DESC, w.id LIMIT 20";

impl Health {
    /// The verdict of one check.
    pub fn check(&self, name: CheckName) -> &Check {
        // Every Health holds one check per name, in CheckName::ALL order.
        &self.checks[CheckName::ALL.iter().position(|n| *n == name).unwrap_or(0)]
    }

    /// The due jobs the pause `p` holds back now: all of its queue's, or its wire name's summed
    /// over the queues not paused themselves ([`Health::held_by_wire_name`]).
    pub fn held_by(&self, p: &Pause) -> u64 {
        match p.kind {
            PauseKind::Queue => self.queues.iter().find(|q| q.queue == p.name).map_or(0, |q| q.held_by_pause),
            PauseKind::WireName => self.held_by_wire_name.get(&p.name).copied().unwrap_or(0),
        }
    }
}

/// What a health read asks of its backend, all inside one read snapshot; the report is put
/// together from the answers, and judged, by [`gather`], the same for both.
pub(crate) trait HealthRead: DueProbe {
    /// The pauses in force, queues first, then by name.
    fn pauses(&mut self) -> Result<Vec<Pause>>;
    /// Jobs by queue and state, from the trigger-kept counts.
    fn counts(&mut self) -> Result<StateCounts>;
    /// Every registered worker.
    fn workers(&mut self) -> Result<Vec<WorkerInfo>>;
    /// Every dead-letter cause group, largest first, then the latest seen, then by wire name and
    /// fingerprint (byte order), without examples.
    fn cause_groups(&mut self) -> Result<Vec<Group>>;
    /// The latest cause of a group (one indexed lookup).
    fn example(&mut self, wire_name: &str, fingerprint: Option<&str>) -> Result<Option<String>>;
    /// Quarantined jobs by wire name and reason, largest first.
    fn quarantine_rows(&mut self) -> Result<Vec<QuarantineRow>>;
    /// Jobs Dead-Lettered at or after `since`.
    fn dead_since(&mut self, since: Millis) -> Result<u64>;
    /// The transition log's sequence ([`Health::log_seq`]).
    fn log_seq(&mut self) -> Result<i64>;
    /// The limits in force at `now`, with their counts.
    fn limits(&mut self, now: Millis) -> Result<Vec<LimitStatus>>;
    /// Every registered worker's quiet and stopping state at `now`.
    fn worker_states(&mut self, now: Millis) -> Result<Vec<WorkerState>>;
    /// Every stored schedule (none before schema version 7).
    fn schedule_rows(&mut self) -> Result<Vec<super::ScheduleRow>>;
    /// The store's `payload_limit` setting.
    fn payload_limit(&mut self) -> Result<u64>;
    /// Workflows with jobs stuck behind a failed parent (none before schema version 18).
    fn stuck_workflows(&mut self) -> Result<Vec<StuckWorkflow>>;
}

/// The store's health at `now` against `thresholds`, from what `r` reads in its snapshot: the
/// report's arithmetic and the verdicts, written once for both backends.
pub(crate) fn gather(r: &mut impl HealthRead, now: Millis, thresholds: &Thresholds) -> Result<Health> {
    let window_ms = i64::try_from(thresholds.window.as_millis()).unwrap_or(i64::MAX);
    let window_start = now.saturating_sub(window_ms);
    let pauses = r.pauses()?;
    let in_force = InForce::new(&pauses);
    let counts = r.counts()?;
    let workers = r.workers()?;
    let groups = r.cause_groups()?;
    let quarantines = quarantine_groups_from(r.quarantine_rows()?, &live_handlers_from(&workers, now));
    let dead_lettered_in_window = r.dead_since(window_start)?;
    let log_seq = r.log_seq()?;
    let limits = r.limits(now)?;
    let worker_states: Vec<WorkerState> =
        r.worker_states(now)?.into_iter().filter(|s| s.quiet_at.is_some() || s.stopping_at.is_some()).collect();
    let schedules = r.schedule_rows()?.into_iter().map(|row| super::ops::schedules::schedule_info(row, now)).collect();
    let payload_limit = r.payload_limit()?;
    let stuck_workflows = r.stuck_workflows()?;

    // A quiet or stopping worker claims nothing: it does not serve its queues (found at 3 a.m.:
    // with every worker of a queue quiet, `unworked-queue` said ok while its jobs waited).
    let not_claiming: BTreeSet<&str> = worker_states.iter().map(|s| s.id.as_str()).collect();
    let mut serving: BTreeMap<&str, u64> = BTreeMap::new();
    let mut worker_health = WorkerHealth::default();
    for w in &workers {
        if w.is_live(now) {
            worker_health.live += 1;
            if not_claiming.contains(w.id.as_str()) {
                continue;
            }
            for q in &w.queues {
                *serving.entry(q.as_str()).or_default() += 1;
            }
        } else {
            worker_health.stale += 1;
            if w.last_heartbeat_at >= window_start {
                worker_health.recently_stale.push(w.id.clone());
            }
        }
    }
    let names: BTreeSet<&str> = counts
        .by_queue
        .keys()
        .map(String::as_str)
        .chain(workers.iter().flat_map(|w| w.queues.iter().map(String::as_str)))
        .collect();
    let mut queues = Vec::with_capacity(names.len());
    let mut held_by_wire_name: BTreeMap<String, u64> = in_force.wire_names.iter().map(|n| (n.to_string(), 0)).collect();
    for queue in names {
        let latency = latency(r, &counts, queue, now, &in_force, &mut held_by_wire_name)?;
        let live_workers = serving.get(queue).copied().unwrap_or(0);
        queues.push(QueueHealth::served(latency, live_workers, thresholds.exclude_queues.contains(queue)));
    }
    let cause_groups_total = groups.len() as u64;
    let new: Vec<&Group> = groups.iter().filter(|g| g.first_seen >= window_start).collect();
    let new_causes_total = new.len() as u64;
    let causes = with_examples(|w, f| r.example(w, f), groups.iter().take(CAUSE_GROUPS))?;
    let new_causes = with_examples(|w, f| r.example(w, f), new.into_iter().take(CAUSE_GROUPS))?;

    let mut health = Health {
        at: now,
        window_start,
        status: Status::Ok,
        checks: Vec::new(),
        counts,
        queues,
        pauses,
        held_by_wire_name,
        dead_lettered_in_window,
        causes,
        cause_groups_total,
        new_causes,
        new_causes_total,
        quarantines,
        workers: worker_health,
        limits,
        worker_states,
        log_seq,
        schedules,
        payload_limit,
        stuck_workflows,
    };
    health.checks = CheckName::ALL.iter().map(|n| judge(*n, &health, thresholds)).collect();
    health.status = health.checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    Ok(health)
}
