//! The running engine: per worker group, one dispatcher thread that alone talks to the store
//! (batched claims, batched fenced completions, heartbeats, reaping, the retention sweep, the
//! worker registry) and `concurrency` handler threads that decode and run jobs. Handlers never
//! touch the store, so a slow or stuck handler can delay nothing but its own job.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::group::{Planner, WorkerGroup};
use super::handler::{CancelReason, CancelSignal, HandlerError, JobContext};
use super::registry::Registry;
use crate::error::{Error, Result};
use crate::model::{Job, JobId, JobState, QuarantineReason, WorkerInfo};
use crate::store::{
    ClaimRequest, Clock, Completion, Fenced, LeaseStatus, Outcome, SettingKey, Store, UNREQUESTED_CANCEL,
};

/// How often a worker says it is alive in the registry, and after how long without that it
/// counts as gone.
const WORKER_HEARTBEAT: Duration = Duration::from_secs(10);
const WORKER_STALE_AFTER: Duration = Duration::from_secs(30);
/// Lapsed leases reaped per store transaction.
const REAP_BATCH: usize = 200;
/// Terminal jobs deleted per retention-sweep transaction, and batches per sweep.
const SWEEP_BATCH: usize = 500;
const SWEEP_MAX_BATCHES: usize = 20;
/// The longest gap between lease heartbeats, whatever the lease: the heartbeat is also how an
/// operator's cancel reaches a running handler, so it should arrive within seconds.
const MAX_HEARTBEAT_GAP: Duration = Duration::from_secs(2);
/// After a store error, wait this long before the dispatcher tries again.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// The embedded engine: a store, a registry of handlers, and worker groups.
///
/// ```no_run
/// # use std::time::Duration;
/// # use backwave::{RetryPolicy, engine::{DispatchPolicy, Engine, Registry, WorkerGroup}};
/// # fn main() -> backwave::Result<()> {
/// let mut backwave = Engine::new("backwave.db", Registry::new());
/// backwave.add_worker_group(WorkerGroup {
///     name: "strict-priority".into(),
///     policy: DispatchPolicy::strict(["critical", "bulk", "limited"]),
///     poll_interval: Duration::from_millis(250),
///     retry_policy: RetryPolicy::new(5, |_| Duration::from_millis(500))?,
///     ..WorkerGroup::default()
/// });
/// let running = backwave.start()?;
/// // ... until the process should stop:
/// running.shutdown(Duration::from_secs(10));
/// # Ok(()) }
/// ```
pub struct Engine {
    db: PathBuf,
    registry: Arc<Registry>,
    groups: Vec<WorkerGroup>,
    clock: Clock,
    sweep_interval: Duration,
    capture_failure_detail: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("db", &self.db).field("groups", &self.groups).finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over the store at `db` (created on start if missing).
    pub fn new(db: impl AsRef<Path>, registry: Registry) -> Self {
        Engine {
            db: db.as_ref().to_path_buf(),
            registry: Arc::new(registry),
            groups: Vec::new(),
            clock: Clock::System,
            sweep_interval: Duration::from_secs(60),
            capture_failure_detail: true,
        }
    }

    /// Seed 000's `backwave.AddWorkerGroup(...)`.
    pub fn add_worker_group(&mut self, group: WorkerGroup) -> &mut Self {
        self.groups.push(group);
        self
    }

    /// The host switch for failure detail: `false` turns capture off for every group of this
    /// process (PII-sensitive hosts), whatever each group says.
    pub fn capture_failure_detail(&mut self, on: bool) -> &mut Self {
        self.capture_failure_detail = on;
        self
    }

    /// How often the retention sweep deletes terminal jobs older than the store's `retention`
    /// setting (default every 60 s).
    pub fn sweep_interval(&mut self, every: Duration) -> &mut Self {
        self.sweep_interval = every;
        self
    }

    /// The store clock (tests pin it; the default is the system clock).
    pub fn clock(&mut self, clock: Clock) -> &mut Self {
        self.clock = clock;
        self
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Register each group as a worker and start its threads. Nothing is claimed if any group
    /// is invalid or the store cannot be opened.
    pub fn start(self) -> Result<EngineHandle> {
        if self.groups.is_empty() {
            return Err(Error::InvalidInput("the engine has no worker groups: add one with add_worker_group".into()));
        }
        for (i, g) in self.groups.iter().enumerate() {
            g.validate()?;
            if self.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(Error::InvalidInput(format!("two worker groups are named '{}'", g.name)));
            }
        }
        drop(Store::create(&self.db)?);
        install_panic_hook();
        // Built as we go: if a later group fails to start, dropping the handle stops the
        // groups already running.
        let mut handle = EngineHandle { groups: Vec::new(), wakers: Vec::new(), registry: Arc::clone(&self.registry) };
        for (i, cfg) in self.groups.into_iter().enumerate() {
            let store = Store::open(&self.db)?.with_clock(self.clock.clone());
            // Readable in every log line and still unique: a restarted container may reuse a pid,
            // so a random tail tells this incarnation from the last.
            let worker_id: Arc<str> =
                Arc::from(format!("{}/{}/{}#{}", hostname(), std::process::id(), cfg.name, &JobId::new().short()[4..]));
            let now = store.now();
            let info = WorkerInfo {
                id: worker_id.to_string(),
                group: cfg.name.clone(),
                host: hostname(),
                pid: std::process::id(),
                wire_names: self.registry.wire_names(),
                queues: cfg.policy.queues(),
                started_at: now,
                last_heartbeat_at: now,
                stale_after_ms: WORKER_STALE_AFTER.as_millis() as i64,
            };
            store.register_worker(&info)?;
            let capture = cfg.capture_failure_detail && self.capture_failure_detail;
            let stats = Arc::new(Counters::default());
            let stop = Arc::new(StopFlag::default());
            let (work_tx, work_rx) = mpsc::channel::<Work>();
            let (done_tx, done_rx) = mpsc::channel::<Done>();
            let work_rx = Arc::new(Mutex::new(work_rx));
            for n in 0..cfg.concurrency {
                let (rx, tx, registry) = (Arc::clone(&work_rx), done_tx.clone(), Arc::clone(&self.registry));
                std::thread::Builder::new()
                    .name(format!("bw-{}-{n}", cfg.name))
                    .spawn(move || handler_loop(&rx, &tx, &registry, capture))
                    .map_err(|e| Error::InvalidInput(format!("cannot start a handler thread: {e}")))?;
            }
            let dispatcher = Dispatcher {
                store,
                planner: Planner::new(cfg.policy.clone()),
                group: Arc::from(cfg.name.as_str()),
                cfg: cfg.clone(),
                info,
                worker_id: Arc::clone(&worker_id),
                inflight: HashMap::new(),
                next_run: 0,
                pending: Vec::new(),
                work_tx,
                done_rx,
                stats: Arc::clone(&stats),
                stop: Arc::clone(&stop),
                sweep_interval: (i == 0).then_some(self.sweep_interval),
            };
            let thread = std::thread::Builder::new()
                .name(format!("bw-{}-dispatch", cfg.name))
                .spawn({
                    let stats = Arc::clone(&stats);
                    move || {
                        // A bug here must not vanish silently: the group stops, and says why
                        // in its stats (its registry row goes stale, its leases lapse).
                        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| dispatcher.run())) {
                            stats.failed(&format!("the dispatcher stopped: {}", panic_message(&*panic)));
                        }
                    }
                })
                .map_err(|e| Error::InvalidInput(format!("cannot start the dispatcher thread: {e}")))?;
            handle.wakers.push(done_tx);
            handle.groups.push(GroupHandle {
                name: cfg.name,
                worker_id: worker_id.to_string(),
                stats,
                stop,
                thread: Some(thread),
            });
        }
        Ok(handle)
    }
}

/// Counts of what one group did since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub group: String,
    pub worker_id: String,
    pub claimed: u64,
    pub succeeded: u64,
    /// Failed attempts that were scheduled again.
    pub retried: u64,
    pub dead_lettered: u64,
    pub quarantined: u64,
    pub cancelled: u64,
    /// Outcomes the fence discarded (the lease had been lost).
    pub fenced_out: u64,
    /// Lapsed leases of any worker that this group reaped.
    pub reaped: u64,
    /// Running handlers when the group stopped, left to lapse.
    pub abandoned: u64,
    /// Store errors the dispatcher retried through, or its own stop on a bug.
    pub errors: u64,
    pub last_error: Option<String>,
}

#[derive(Default)]
struct Counters {
    claimed: AtomicU64,
    succeeded: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    quarantined: AtomicU64,
    cancelled: AtomicU64,
    fenced_out: AtomicU64,
    reaped: AtomicU64,
    abandoned: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    fn error(&self, e: &Error) {
        self.failed(&e.to_string());
    }

    fn failed(&self, why: &str) {
        Self::add(&self.errors, 1);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
    }
}

#[derive(Default)]
struct StopFlag {
    requested: AtomicBool,
    grace: Mutex<Option<Instant>>,
}

struct GroupHandle {
    name: String,
    worker_id: String,
    stats: Arc<Counters>,
    stop: Arc<StopFlag>,
    thread: Option<JoinHandle<()>>,
}

/// A running engine. [`shutdown`](EngineHandle::shutdown) stops it gracefully; dropping it
/// stops it with no grace (running handlers are left to lapse).
pub struct EngineHandle {
    groups: Vec<GroupHandle>,
    wakers: Vec<Sender<Done>>,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.groups.iter().map(|g| (&g.name, &g.worker_id))).finish()
    }
}

/// What a shutdown left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Handlers still running when the grace period ended: nothing was reported for them, so
    /// their leases lapse and another worker inherits the jobs.
    pub abandoned: u64,
}

impl EngineHandle {
    /// The handlers this engine runs: enqueue typed jobs with it while the engine serves.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Each group's worker id (as in the store's worker registry and transition log).
    pub fn worker_ids(&self) -> Vec<(String, String)> {
        self.groups.iter().map(|g| (g.name.clone(), g.worker_id.clone())).collect()
    }

    pub fn stats(&self) -> Vec<GroupStats> {
        self.groups
            .iter()
            .map(|g| {
                let s = &g.stats;
                let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
                GroupStats {
                    group: g.name.clone(),
                    worker_id: g.worker_id.clone(),
                    claimed: get(&s.claimed),
                    succeeded: get(&s.succeeded),
                    retried: get(&s.retried),
                    dead_lettered: get(&s.dead_lettered),
                    quarantined: get(&s.quarantined),
                    cancelled: get(&s.cancelled),
                    fenced_out: get(&s.fenced_out),
                    reaped: get(&s.reaped),
                    abandoned: get(&s.abandoned),
                    errors: get(&s.errors),
                    last_error: s.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                }
            })
            .collect()
    }

    /// Stop claiming, give running handlers up to `grace` to finish (their outcomes are
    /// recorded), then signal the rest to stop and report nothing for them: their leases lapse
    /// and another worker inherits the jobs. Each worker leaves the registry.
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.stop_all(grace)
    }

    fn stop_all(&mut self, grace: Duration) -> ShutdownReport {
        let deadline = later(Instant::now(), grace);
        for g in &self.groups {
            *g.stop.grace.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline);
            g.stop.requested.store(true, Ordering::SeqCst);
        }
        for w in &self.wakers {
            let _ = w.send(Done::Wake);
        }
        let mut report = ShutdownReport::default();
        for g in &mut self.groups {
            if let Some(t) = g.thread.take() {
                let _ = t.join();
                report.abandoned += g.stats.abandoned.load(Ordering::Relaxed);
            }
        }
        report
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.stop_all(Duration::ZERO);
    }
}

/// A claimed, not yet finished job handed to a handler thread.
struct Work {
    job: Job,
    ctx: JobContext,
    /// The dispatcher's token for this claim: its outcome comes back under it.
    run: u64,
}

enum Done {
    Finished {
        run: u64,
        outcome: Outcome,
    },
    /// Nothing to record; the dispatcher should look at its stop flag.
    Wake,
}

/// One handler run of this dispatcher, by the token of its claim. Not keyed by job: this same
/// worker may claim a job again (its lease was reaped, the job retried or requeued) while an
/// earlier run of it still hangs, and a requeue even repeats the `(worker, attempt)` pair the
/// store's fence checks. Only the newest run of a job is `current`: a stale one's outcome is
/// dropped, and its end leaves the newer run's lease alone.
struct Inflight {
    job_id: JobId,
    attempt: u32,
    cancel: CancelSignal,
    current: bool,
}

/// How long `collect` waits for the next finished handler once one has finished.
const COLLECT_LINGER: Duration = Duration::from_micros(200);

struct Dispatcher {
    store: Store,
    planner: Planner,
    group: Arc<str>,
    cfg: WorkerGroup,
    info: WorkerInfo,
    worker_id: Arc<str>,
    inflight: HashMap<u64, Inflight>,
    next_run: u64,
    pending: Vec<Completion>,
    work_tx: Sender<Work>,
    done_rx: Receiver<Done>,
    stats: Arc<Counters>,
    stop: Arc<StopFlag>,
    sweep_interval: Option<Duration>,
}

impl Dispatcher {
    fn run(mut self) {
        let heartbeat_every = (self.cfg.lease / 3).min(MAX_HEARTBEAT_GAP);
        let start = Instant::now();
        let mut next_claim = start;
        let mut next_reap = start;
        let mut next_heartbeat = later(start, heartbeat_every);
        let mut next_worker_heartbeat = start + WORKER_HEARTBEAT;
        let mut next_sweep = self.sweep_interval.map(|_| later(start, self.cfg.poll_interval));
        loop {
            let stopping = self.stop.requested.load(Ordering::SeqCst);
            let grace_end = *self.stop.grace.lock().unwrap_or_else(|p| p.into_inner());
            let free = self.cfg.concurrency.saturating_sub(self.inflight.len());
            let now = Instant::now();
            let can_claim = !stopping && free > 0;
            let mut wake = [next_heartbeat, next_worker_heartbeat, next_reap].into_iter().min().unwrap_or(now);
            if can_claim {
                wake = wake.min(next_claim);
            }
            if let Some(s) = next_sweep {
                wake = wake.min(s);
            }
            if let (true, Some(g)) = (stopping, grace_end) {
                wake = wake.min(g);
            }
            let wait =
                if stopping && self.inflight.is_empty() { Duration::ZERO } else { wake.saturating_duration_since(now) };
            self.collect(wait);
            self.flush();

            let now = Instant::now();
            if stopping && (self.inflight.is_empty() || grace_end.is_none_or(|g| now >= g)) {
                break;
            }
            if now >= next_heartbeat {
                self.heartbeat();
                next_heartbeat = later(now, heartbeat_every);
            }
            if now >= next_worker_heartbeat {
                self.worker_heartbeat();
                next_worker_heartbeat = now + WORKER_HEARTBEAT;
            }
            if let (Some(at), Some(every)) = (next_sweep, self.sweep_interval) {
                if now >= at {
                    self.sweep();
                    next_sweep = Some(later(now, every));
                }
            }
            if now >= next_reap {
                if self.reap() > 0 {
                    // A reaped job may be due again at once.
                    next_claim = now;
                }
                next_reap = later(now, self.cfg.poll_interval);
            }
            let free = self.cfg.concurrency.saturating_sub(self.inflight.len());
            if !stopping && free > 0 && now >= next_claim {
                match self.claim(free) {
                    // Every slot filled: there may be more due, claim again as slots free.
                    Ok(n) if n == free => next_claim = now,
                    Ok(_) => next_claim = later(now, self.cfg.poll_interval),
                    Err(e) => {
                        self.stats.error(&e);
                        next_claim = now + ERROR_BACKOFF.min(self.cfg.poll_interval);
                    }
                }
            }
        }
        self.finish();
    }

    /// Wait up to `wait` for the first finished job, then take every other one already done,
    /// so that one store transaction records them all.
    fn collect(&mut self, wait: Duration) {
        let first = if wait.is_zero() {
            self.done_rx.try_recv().ok()
        } else {
            match self.done_rx.recv_timeout(wait) {
                Ok(d) => Some(d),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
            }
        };
        let mut next = first;
        while let Some(done) = next {
            if let Done::Finished { run, outcome } = done {
                match self.inflight.remove(&run) {
                    Some(f) if f.current => self.pending.push(Completion {
                        job_id: f.job_id,
                        worker_id: self.worker_id.to_string(),
                        attempt: f.attempt,
                        outcome,
                    }),
                    // A stale run: the job was claimed again since, so its word is discarded.
                    Some(_) => Counters::add(&self.stats.fenced_out, 1),
                    None => {}
                }
            }
            // Quick handlers finish within microseconds of each other: linger a moment for the
            // rest of the batch so that one transaction records them all (at most COLLECT_LINGER
            // per round, and never once every running handler has reported).
            next = match self.done_rx.try_recv() {
                Ok(d) => Some(d),
                Err(_) if self.inflight.values().any(|f| f.current) => self.done_rx.recv_timeout(COLLECT_LINGER).ok(),
                Err(_) => None,
            };
        }
    }

    /// Record the finished jobs behind the fence, in one transaction. On a store error they
    /// stay pending and are retried: the leases are still ours until they lapse.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.store.complete_many(&self.pending) {
            Ok(fenced) => {
                let s = &self.stats;
                for f in fenced {
                    let counter = match f {
                        Fenced::Accepted(JobState::Succeeded) => &s.succeeded,
                        Fenced::Accepted(JobState::Scheduled) => &s.retried,
                        Fenced::Accepted(JobState::DeadLettered) => &s.dead_lettered,
                        Fenced::Accepted(JobState::Quarantined) => &s.quarantined,
                        Fenced::Accepted(JobState::Cancelled) => &s.cancelled,
                        Fenced::Accepted(JobState::Running) | Fenced::Rejected => &s.fenced_out,
                    };
                    Counters::add(counter, 1);
                }
                self.pending.clear();
            }
            Err(e) => {
                self.stats.error(&e);
                std::thread::sleep(ERROR_BACKOFF);
            }
        }
    }

    fn claim(&mut self, free: usize) -> Result<usize> {
        let mut total = 0;
        for (queues, limit) in self.planner.plan(free) {
            let limit = limit.min(free - total);
            if limit == 0 {
                break;
            }
            let jobs = self.store.claim(&ClaimRequest {
                worker_id: &self.worker_id,
                group: &self.group,
                queues: &queues,
                limit,
                lease: self.cfg.lease,
                policy: &self.cfg.retry_policy,
            })?;
            total += jobs.len();
            Counters::add(&self.stats.claimed, jobs.len() as u64);
            for job in jobs {
                let cancel = CancelSignal::new();
                let ctx = JobContext {
                    job_id: job.id,
                    attempt: job.attempt,
                    max_attempts: job.max_attempts.unwrap_or(self.cfg.retry_policy.max_attempts()),
                    wire_name: job.wire_name.clone(),
                    queue: job.queue.clone(),
                    labels: job.labels.clone(),
                    group: Arc::clone(&self.group),
                    worker_id: Arc::clone(&self.worker_id),
                    cancel: cancel.clone(),
                };
                // The store let us claim this job, so any earlier run of it here has lost its
                // lease: make it stale, and drop an outcome of it not yet written.
                for f in self.inflight.values_mut().filter(|f| f.job_id == job.id && f.current) {
                    f.current = false;
                    f.cancel.cancel(CancelReason::LeaseLost);
                }
                let before = self.pending.len();
                self.pending.retain(|c| c.job_id != job.id);
                Counters::add(&self.stats.fenced_out, (before - self.pending.len()) as u64);
                let run = self.next_run;
                self.next_run += 1;
                self.inflight.insert(run, Inflight { job_id: job.id, attempt: job.attempt, cancel, current: true });
                // The handler threads live as long as this sender: sending cannot fail.
                let _ = self.work_tx.send(Work { job, ctx, run });
            }
        }
        Ok(total)
    }

    /// Renew the leases of every running handler; pass an operator's cancel or a lost lease
    /// to the handler through its signal.
    fn heartbeat(&mut self) {
        // Finished jobs whose outcome is not written yet (the store was busy) keep their
        // leases too, or they would lapse and run again.
        let runs: Vec<u64> = self.inflight.iter().filter(|(_, f)| f.current).map(|(run, _)| *run).collect();
        let held: Vec<(JobId, u32)> = runs
            .iter()
            .map(|run| (self.inflight[run].job_id, self.inflight[run].attempt))
            .chain(self.pending.iter().map(|c| (c.job_id, c.attempt)))
            .collect();
        if held.is_empty() {
            return;
        }
        match self.store.heartbeat(&self.worker_id, &held, self.cfg.lease) {
            Ok(statuses) => {
                // Statuses past `runs` are the pending outcomes': no handler to tell.
                for (run, status) in runs.iter().zip(statuses) {
                    let Some(f) = self.inflight.get(run) else { continue };
                    match status {
                        LeaseStatus::Held { cancel_requested: true } => f.cancel.cancel(CancelReason::Operator),
                        LeaseStatus::Held { cancel_requested: false } => {}
                        LeaseStatus::Lost => f.cancel.cancel(CancelReason::LeaseLost),
                    }
                }
            }
            Err(e) => self.stats.error(&e),
        }
    }

    fn reap(&mut self) -> usize {
        match self.store.has_lapsed_leases() {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(e) => {
                self.stats.error(&e);
                return 0;
            }
        }
        let mut total = 0;
        loop {
            match self.store.reap_expired(REAP_BATCH) {
                Ok(n) => {
                    total += n;
                    if n < REAP_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    self.stats.error(&e);
                    break;
                }
            }
        }
        Counters::add(&self.stats.reaped, total as u64);
        total
    }

    fn worker_heartbeat(&mut self) {
        match self.store.worker_heartbeat(&self.worker_id) {
            Ok(true) => {}
            // Someone removed our row (e.g. a cleanup of stale workers): put it back.
            Ok(false) => {
                self.info.last_heartbeat_at = self.store.now();
                if let Err(e) = self.store.register_worker(&self.info) {
                    self.stats.error(&e);
                }
            }
            Err(e) => self.stats.error(&e),
        }
    }

    fn sweep(&mut self) {
        let retention = match self.store.setting(SettingKey::Retention) {
            Ok(v) => v,
            Err(e) => return self.stats.error(&e),
        };
        let Ok(keep) = humantime::parse_duration(&retention) else { return };
        // try_from, not `as`: a huge retention written by another program must mean "keep",
        // never wrap negative and put the cutoff in the future (which deletes everything).
        let cutoff = self.store.now().saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        for _ in 0..SWEEP_MAX_BATCHES {
            match self.store.sweep(cutoff, SWEEP_BATCH) {
                Ok(n) if n as usize == SWEEP_BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    self.stats.error(&e);
                    break;
                }
            }
        }
    }

    /// Leave: handlers still running after the grace period are told to stop and reported
    /// on never (their leases lapse); the worker leaves the registry.
    fn finish(mut self) {
        // Anything that finished during the last wait still counts.
        self.collect(Duration::ZERO);
        self.flush();
        for f in self.inflight.values() {
            f.cancel.cancel(CancelReason::Shutdown);
        }
        Counters::add(&self.stats.abandoned, self.inflight.len() as u64);
        if let Err(e) = self.store.unregister_worker(&self.worker_id) {
            self.stats.error(&e);
        }
        // Dropping the work sender ends idle handler threads; busy ones end after their job.
    }
}

/// `t + d` for a duration the application chose: one too long for an `Instant` (a
/// `Duration::MAX` poll interval, sweep interval or grace period) means "not for a century",
/// never a panic.
fn later(t: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    t.checked_add(d).or_else(|| t.checked_add(CENTURY)).unwrap_or(t)
}

thread_local! {
    /// Set while this thread runs a handler, so the panic hook can keep quiet and keep a
    /// backtrace for the failure detail instead of printing to a terminal that may be a TUI.
    static IN_HANDLER: Cell<Option<bool>> = const { Cell::new(None) };
    static PANIC_TRACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match IN_HANDLER.with(Cell::get) {
            Some(capture) => {
                if capture {
                    let at = info.location().map(|l| format!("panicked at {l}\n")).unwrap_or_default();
                    let trace = format!("{at}{}", std::backtrace::Backtrace::force_capture());
                    PANIC_TRACE.with(|t| *t.borrow_mut() = Some(trace));
                }
            }
            None => previous(info),
        }));
    });
}

fn handler_loop(rx: &Mutex<Receiver<Work>>, tx: &Sender<Done>, registry: &Registry, capture: bool) {
    loop {
        let work = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(w) => w,
            Err(_) => return,
        };
        let run = work.run;
        let outcome = run_one(work, registry, capture);
        if tx.send(Done::Finished { run, outcome }).is_err() {
            // The dispatcher is gone (shutdown past its grace): nothing is reported.
            return;
        }
    }
}

/// Route, decode and run one job. Quarantine happens here, before any handler code runs.
fn run_one(work: Work, registry: &Registry, capture: bool) -> Outcome {
    let Work { job, ctx, .. } = work;
    let Some(entry) = registry.entry(&job.wire_name) else {
        return Outcome::Quarantined {
            reason: QuarantineReason::NoHandler,
            cause: format!("no handler is registered for wire name '{}'", job.wire_name),
        };
    };
    let ready = match entry.route.decode(&job.payload) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Quarantined {
                reason: QuarantineReason::UndecodablePayload,
                cause: format!(
                    "the payload of '{}' does not decode as {}: {e}",
                    job.wire_name,
                    entry.route.type_name()
                ),
            }
        }
    };
    IN_HANDLER.with(|h| h.set(Some(capture)));
    let result = catch_unwind(AssertUnwindSafe(|| ready(&ctx)));
    IN_HANDLER.with(|h| h.set(None));
    let error = match result {
        Ok(Ok(())) => return Outcome::Succeeded,
        Ok(Err(e)) => e,
        Err(panic) => {
            let message = panic_message(&*panic);
            let trace = PANIC_TRACE.with(|t| t.borrow_mut().take());
            HandlerError::panic(message, trace)
        }
    };
    // A handler that stopped on an operator's cancel says so: the store ends the job Cancelled.
    // One that stopped on a cancellation nobody requested (its own deadline) failed a plain
    // attempt, and its entry keeps the detail like any failure's (an Outcome::Cancelled
    // would be logged as detail "not captured", as if the switch were off). Any other error
    // after an operator's request also ends Cancelled in the store, its message kept.
    if error.is_cancelled() && ctx.cancel.reason() == Some(CancelReason::Operator) {
        return Outcome::Cancelled;
    }
    let message = if error.is_cancelled() { UNREQUESTED_CANCEL.to_string() } else { error.message().to_string() };
    Outcome::Failed { message, detail: capture.then(|| error.into_detail()) }
}

/// The message of a panic payload (`panic!("...")` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panicked with a non-string payload".to_string()
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
