//! The large-store generator behind the hidden `bw generate`: N jobs with a realistic mix and
//! about five transition entries each, deterministic for a seed and an instant. What the jobs
//! are is [`catalogue`], how each one lives is [`life`]; the rows go to the store's bulk loader
//! ([`Store::create_loaded`]), the one place that knows the schema.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use backwave::error::Result;
use backwave::model::{JobState, Millis};
use backwave::store::{JobRow, Loader, Store, StoreTarget, TransitionRow, WorkerRow};

mod catalogue;
mod life;

use catalogue::{Group, GROUPS, KINDS};
use life::{Entry, GenJob, Generator};

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub jobs: u64,
    /// Same seed and same `now`: the same store, row for row.
    pub seed: u64,
    /// The instant the store is generated "at": the newest job is about 2 minutes old, the oldest
    /// about 7 days, running leases lapse around it and delayed jobs are due after it.
    pub now: Millis,
}

/// What was generated, for the summary line.
#[derive(Clone, Debug, Default)]
pub struct GenerateReport {
    pub jobs: u64,
    pub transitions: u64,
    /// Jobs per state, in [`JobState::ALL`] order.
    pub by_state: [u64; 6],
    pub elapsed: Duration,
}

/// Progress is reported every this many jobs.
pub const PROGRESS_EVERY: u64 = 100_000;

/// Generate a store at `target`: a file that does not exist, or a PostgreSQL database (schema)
/// without a BackWave store. `progress` gets 0 once the new store exists and its rows start (a
/// store that cannot be created never calls it), then the number of jobs handed to the loader.
pub fn generate(
    target: impl Into<StoreTarget>,
    opts: &GenerateOptions,
    mut progress: impl FnMut(u64),
) -> Result<GenerateReport> {
    let started = Instant::now();
    let (_store, mut report) = Store::create_loaded(target, opts.jobs, |loader| fill(loader, opts, &mut progress))?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Every row, handed to the loader inside its transaction.
fn fill(loader: &mut Loader<'_>, opts: &GenerateOptions, progress: &mut dyn FnMut(u64)) -> Result<GenerateReport> {
    let mut gen = Generator::new(opts);
    let rows = Rows {
        worker_ids: gen.workers.iter().map(|w| Rc::from(w.id.as_str())).collect(),
        tables: GROUPS.iter().map(|g| Rc::from(g.table_json())).collect(),
    };
    let mut report = GenerateReport { jobs: opts.jobs, ..Default::default() };
    progress(0);
    // The log is appended in time order, as commits would have appended it: entries wait in a
    // heap until no later job can produce an earlier one (jobs are created in strictly
    // increasing time, and every entry of a job comes at or after its creation).
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut order = 0u64;
    for i in 0..opts.jobs {
        let mut job = gen.job(i);
        report.by_state[JobState::ALL.iter().position(|s| *s == job.state).unwrap_or(0)] += 1;
        let created = job.created_at;
        for entry in std::mem::take(&mut job.log) {
            order += 1;
            pending.push(Reverse(Pending { at: entry.at, order, entry }));
        }
        loader.job(rows.job(job))?;
        while pending.peek().is_some_and(|p| p.0.at <= created) {
            let Reverse(p) = pending.pop().expect("peeked");
            debug_assert!(p.at <= opts.now, "a log entry after the generation instant");
            report.transitions += 1;
            loader.transition(rows.transition(p))?;
        }
        if (i + 1) % PROGRESS_EVERY == 0 {
            progress(i + 1);
        }
    }
    while let Some(Reverse(p)) = pending.pop() {
        report.transitions += 1;
        loader.transition(rows.transition(p))?;
    }
    for w in gen.workers.iter() {
        let group: &Group = &GROUPS[w.group];
        let wires: Vec<&str> = KINDS.iter().filter(|k| group.queues.contains(&k.queue)).map(|k| k.wire).collect();
        loader.worker(&WorkerRow {
            id: &w.id,
            worker_group: group.name,
            host: w.host,
            pid: w.pid,
            wire_names: &wires,
            queues: group.queues,
            started_at: opts.now - 86_400_000,
            last_heartbeat_at: w.last_heartbeat,
            stale_after_ms: 30_000,
        })?;
    }
    Ok(report)
}

/// Turns the generator's jobs and entries (which name workers and groups by index) into the
/// store's rows, sharing each worker id and delay table rather than copying it.
struct Rows {
    worker_ids: Vec<Rc<str>>,
    tables: Vec<Rc<str>>,
}

impl Rows {
    fn job(&self, job: GenJob) -> JobRow {
        JobRow {
            id: job.id,
            wire_name: Cow::Borrowed(job.wire_name),
            queue: Cow::Borrowed(job.queue),
            labels: Cow::Borrowed(job.labels),
            payload: job.payload.into_bytes(),
            state: job.state,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            due_at: job.due_at,
            lease_owner: job.lease_owner.map(|w| self.worker_ids[w].clone()),
            lease_expires_at: job.lease_expires_at,
            worker_group: job.group.map(|g| Cow::Borrowed(GROUPS[g].name)),
            delay_table: job.group.map(|g| self.tables[g].clone()),
            cancel_requested_by: job.cancel_requested_by.map(Cow::Borrowed),
            terminal_cause: job.terminal_cause,
            quarantine_reason: job.quarantine_reason,
            created_at: job.created_at,
            updated_at: job.updated_at,
            finished_at: job.finished_at,
        }
    }

    fn transition(&self, p: Pending) -> TransitionRow {
        let e = p.entry;
        TransitionRow {
            job_id: e.job_id,
            at: p.at,
            from: e.from,
            to: e.to,
            attempt: e.attempt,
            worker_id: e.worker.map(|w| self.worker_ids[w].clone()),
            actor: e.actor.map(Cow::Borrowed),
            reason: e.reason,
            failure_detail: e.detail,
            detail_status: e.detail_status,
        }
    }
}

/// A log entry waiting for its turn in commit order.
struct Pending {
    at: Millis,
    order: u64,
    entry: Entry,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}
