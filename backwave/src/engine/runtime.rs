//! The engine's face: the [`Engine`] builder that validates the worker groups and starts each
//! one (its dispatcher thread, see `dispatcher.rs`, and its handler pool, see `pool.rs`), and the
//! [`EngineHandle`] that reports their stats and shuts them down. Handlers never touch the
//! store, so a slow or stuck handler can delay nothing but its own job.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::deadlines::later;
use super::dispatcher::{Dispatcher, Setup};
use super::events::{Event, Hook, Hooks};
use super::group::WorkerGroup;
use super::maintenance::WORKER_STALE_AFTER;
use super::outage::{StoreHealth, Watch};
use super::pool::{handler_loop, install_panic_hook, ReadyBuffer};
use super::recorder::Recorder;
use super::registry::Registry;
use super::shared::{Counters, Done, ProcessQuiet, StopFlag};
#[cfg(feature = "tokio")]
use super::tasks::{AsyncRuntime, Tasks};
use super::ticker::{Ticker, TickerStats};
use super::wake::{self, Doorbell};
use crate::error::{panic_message, Error, Result};
use crate::model::{JobId, WorkerInfo};
use crate::schedule::Schedule;
use crate::store::{Clock, LimitDefault, LimitSpec, PauseKind, Store, StoreTarget};

/// The embedded engine: a store, a registry of handlers, and worker groups. Build it with
/// [`Engine::new`], add at least one [`WorkerGroup`] (and optionally schedules and limits), then
/// [`start`](Engine::start) it: each group gets a dispatcher thread that claims due jobs under
/// leases, heartbeats them and records their outcomes, and a pool of handler threads (or tasks,
/// for async handlers) that run your code. The returned [`EngineHandle`] reports
/// [`stats`](EngineHandle::stats) and stops the engine.
///
/// Jobs run at least once: a process that dies mid-job leaves the job to be reaped when its
/// lease lapses and retried elsewhere, so handlers should be idempotent (the job id and attempt
/// make a natural idempotency key).
///
/// ```
/// use std::time::{Duration, Instant};
/// use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
/// use backwave::{HandlerError, Store};
///
/// let dir = tempfile::tempdir()?;
/// let db = dir.path().join("jobs.db");
///
/// let mut registry = Registry::new();
/// registry
///     .handle::<String>("greet", |name, _ctx| match name.is_empty() {
///         true => Err(HandlerError::msg("nobody to greet")),
///         false => Ok(()),
///     })
///     .queue("mail");
///
/// let mut engine = Engine::new(&db, registry);
/// engine.add_worker_group(WorkerGroup {
///     name: "mail".into(),
///     policy: DispatchPolicy::strict(["mail"]),
///     poll_interval: Duration::from_millis(20),
///     ..WorkerGroup::default()
/// });
/// let running = engine.start()?; // creates the store if it is missing
///
/// // Any process may enqueue into the same store; here, this one.
/// let store = Store::open(&db)?;
/// running.registry().enqueue(&store, "greet", "Ada")?;
///
/// let started = Instant::now();
/// while running.stats()[0].succeeded < 1 && started.elapsed() < Duration::from_secs(10) {
///     std::thread::sleep(Duration::from_millis(10));
/// }
/// assert_eq!(running.stats()[0].succeeded, 1);
/// let report = running.shutdown(Duration::from_secs(5));
/// assert_eq!(report.abandoned, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A worker process's `main` usually ends by serving until SIGTERM:
///
/// ```no_run
/// # use std::time::Duration;
/// # use backwave::engine::{Engine, Registry, StopSignals, WorkerGroup};
/// # fn main() -> backwave::Result<()> {
/// let stop = StopSignals::install()?; // before start: no signal is lost while it starts
/// let mut engine = Engine::new("backwave.db", Registry::new());
/// engine.add_worker_group(WorkerGroup::new("default"));
/// let report = engine.start()?.serve_until(stop, Duration::from_secs(30))?;
/// eprintln!("stopped; {} jobs handed back", report.handed_back);
/// # Ok(()) }
/// ```
pub struct Engine {
    db: StoreTarget,
    registry: Arc<Registry>,
    groups: Vec<WorkerGroup>,
    clock: Clock,
    sweep_interval: Duration,
    capture_failure_detail: bool,
    schedules: Vec<Schedule>,
    schedule_poll: Duration,
    limits: Vec<LimitDefault>,
    poll_only: bool,
    admin: Option<String>,
    /// The application's hooks ([`Engine::on_event`]), in the order added.
    hooks: Vec<Hook>,
    /// Where async handlers' futures run; `None`: a runtime of the engine's own.
    #[cfg(feature = "tokio")]
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("db", &self.db).field("groups", &self.groups).finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over the store at `db` (created on start if missing), running the handlers of
    /// `registry`. `db` is an SQLite path or a PostgreSQL URL ([`StoreTarget`]); without the
    /// `postgres` feature a URL makes `start` fail with [`crate::Error::PostgresNotBuilt`].
    pub fn new(db: impl Into<StoreTarget>, registry: Registry) -> Self {
        Engine {
            db: db.into(),
            registry: Arc::new(registry),
            groups: Vec::new(),
            clock: Clock::System,
            sweep_interval: Duration::from_secs(60),
            capture_failure_detail: true,
            schedules: Vec::new(),
            schedule_poll: Duration::from_secs(1),
            limits: Vec::new(),
            poll_only: false,
            admin: None,
            hooks: Vec::new(),
            #[cfg(feature = "tokio")]
            runtime: None,
        }
    }

    /// Who becomes the store's admin when the engine starts on a store that has none (a store
    /// it just created, or one nobody initialised): that user may then requeue, reveal failure
    /// detail and grant others their permissions. A name as the store knows its actors: an OS
    /// user name, as [`current_actor`](crate::store::current_actor) gives it (on PostgreSQL, the
    /// server role). Audited like any grant; a store that already has an admin is left as it is.
    /// Without it, a store the application created has no admin until someone calls
    /// [`Store::bootstrap_admin`] on it.
    pub fn admin(&mut self, who: impl Into<String>) -> &mut Self {
        self.admin = Some(who.into());
        self
    }

    /// Find work by polling alone (default `false`). Normally an idle group starts a job the
    /// moment it is enqueued: this process's enqueues ring its groups directly, and one
    /// connection per engine listens for other processes' (PostgreSQL's `LISTEN`, SQLite's
    /// `PRAGMA data_version` every 4 ms); each group's `poll_interval` is only the safety net.
    /// Poll-only keeps the first and drops the listening connection, so that jobs enqueued
    /// elsewhere start within a poll interval: for a PostgreSQL connection through a pooler in
    /// transaction mode (PgBouncer's `pool_mode = transaction`), where `LISTEN` cannot work; for
    /// the same pooler, the engine's batch statements are then sent whole on every run rather
    /// than kept prepared with a session setting the pooler would not keep.
    pub fn poll_only(&mut self, on: bool) -> &mut Self {
        self.poll_only = on;
        self
    }

    /// Run async handlers ([`Registry::handle_async`]) on the application's runtime (feature
    /// `tokio`). Without it, an engine whose registry has an async handler builds a small
    /// multi-thread runtime of its own at `start`. Either way only handler code runs there:
    /// claims, heartbeats, lease renewal and completions stay on the engine's threads, so a
    /// handler that blocks a runtime thread delays its own job, never another job's lease.
    #[cfg(feature = "tokio")]
    pub fn runtime(&mut self, handle: tokio::runtime::Handle) -> &mut Self {
        self.runtime = Some(handle);
        self
    }

    /// Declare a recurring schedule: stored (or updated, audited) when the engine starts, and
    /// fired by this engine's ticker alongside every other engine that declares it, each tick
    /// exactly once. An invalid schedule makes `start` fail before anything is stored.
    pub fn add_schedule(&mut self, schedule: Schedule) -> &mut Self {
        self.schedules.push(schedule);
        self
    }

    /// The longest the schedule ticker sleeps between looks at the store (default 1 s): how soon
    /// a pause or a redeclaration by another process is seen. It wakes for each tick anyway.
    pub fn schedule_poll(&mut self, every: Duration) -> &mut Self {
        self.schedule_poll = every;
        self
    }

    /// Declare the application's default limit on a queue or a wire name: at most
    /// `spec.concurrency` Running at once across every host, at most `spec.rate` claimed per
    /// window. Written to the store when the engine starts; an operator's limit on the same
    /// name ([`Store::set_limit`]) wins over it, and [`Store::limits`] shows both.
    pub fn limit(&mut self, kind: PauseKind, name: &str, spec: LimitSpec) -> &mut Self {
        self.limits.retain(|l| !(l.kind == kind && l.name == name));
        self.limits.push(LimitDefault { kind, name: name.to_string(), spec });
        self
    }

    /// Add a worker group; at least one is needed. Groups are checked at [`Engine::start`]:
    /// each must be valid (see [`WorkerGroup`]) and their names distinct.
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

    /// Call `hook` with every [`Event`] of this engine as it happens: each attempt's verdict
    /// once the store recorded it (succeeded, failed and retried, dead-lettered, quarantined,
    /// cancelled, or discarded by the fence), a lease lost under a running handler, a lapse
    /// this engine reaped, the store becoming unavailable and available again (once per
    /// outage), a schedule's tick fired or skipped, due work held back. For an application that
    /// acts on outcomes (pages someone on a dead-letter, counts quarantines, alerts on an
    /// outage) without polling [`EngineHandle::stats`] or reading `tracing`. Several hooks may
    /// be added; each event goes to them in the order they were added.
    ///
    /// A hook runs on the engine's own threads (a group's dispatcher, the schedule ticker),
    /// after the store has recorded what it tells of, so it can change nothing that happened.
    /// It must be quick: while it runs, that thread claims, heartbeats and records nothing. Send
    /// anything slow (an HTTP call, a page) to a channel or a task of your own, as below. A hook
    /// that panics is logged (a `tracing` error) and the engine goes on; it is called again for
    /// the next event.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use backwave::engine::{DispatchPolicy, Engine, Event, HandlerError, Registry, WorkerGroup};
    /// use backwave::{RetryPolicy, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = dir.path().join("jobs.db");
    /// let mut registry = Registry::new();
    /// registry.handle::<String>("charge", |_, _| Err(HandlerError::msg("card declined"))).queue("billing");
    ///
    /// let mut engine = Engine::new(&db, registry);
    /// engine.add_worker_group(WorkerGroup {
    ///     name: "billing".into(),
    ///     policy: DispatchPolicy::strict(["billing"]),
    ///     poll_interval: Duration::from_millis(20),
    ///     retry_policy: RetryPolicy::new(1, Duration::ZERO)?,
    ///     ..WorkerGroup::default()
    /// });
    /// // The hook only forwards: whoever reads the channel may take its time.
    /// let (tx, rx) = mpsc::channel::<Event>();
    /// engine.on_event(move |event| {
    ///     if matches!(event, Event::DeadLettered { .. } | Event::StoreUnavailable { .. }) {
    ///         let _ = tx.send(event.clone());
    ///     }
    /// });
    /// let running = engine.start()?;
    /// let id = running.registry().enqueue(&Store::open(&db)?, "charge", "order-17")?;
    ///
    /// match rx.recv_timeout(Duration::from_secs(10))? {
    ///     Event::DeadLettered { job, cause, .. } => {
    ///         assert_eq!((job, cause.as_str()), (id, "card declined")); // page someone here
    ///     }
    ///     other => panic!("unexpected {other:?}"),
    /// }
    /// running.shutdown(Duration::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_event(&mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> &mut Self {
        self.hooks.push(Box::new(hook));
        self
    }

    /// The handlers this engine will run.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Typed enqueue by this engine's registry, for the application's request handlers: a
    /// cheap clone each holds for the service's lifetime, before and after `start`.
    pub fn enqueuer(&self) -> super::Enqueuer {
        super::Enqueuer::new(Arc::clone(&self.registry))
    }

    /// Create the store if it is missing, store the declared limits and schedules, register each
    /// group as a worker and start its threads; returns the handle that stops them.
    ///
    /// Nothing is claimed when it fails: [`Error::InvalidInput`] for no worker group, an
    /// invalid or duplicate group, an invalid schedule, or a schedule whose payload its
    /// registered handler cannot decode; the store's errors when it cannot be created or opened
    /// ([`Error::Unreachable`], [`Error::ReadOnly`], [`Error::PostgresNotBuilt`], …). Groups
    /// already started when a later one fails are stopped again.
    pub fn start(mut self) -> Result<EngineHandle> {
        self.check()?;
        let first = self.declare()?;
        install_panic_hook();
        let hooks = Arc::new(Hooks::new(std::mem::take(&mut self.hooks)));
        let common = Common {
            health: StoreHealth::new(&self.db, Arc::clone(&hooks)),
            hooks,
            reader: Arc::new(super::handler::Reader::new(self.db.clone())),
        };
        // Built as we go: if a later group fails to start, dropping the handle stops the
        // groups already running.
        let mut handle = self.handle()?;
        let mut doorbell = Doorbell::default();
        for (i, cfg) in self.groups.iter().enumerate() {
            let group = self.start_group(i, cfg, &mut handle, &mut doorbell, &common)?;
            handle.groups.push(group);
        }
        // Every group is in: from now on an enqueue (here or elsewhere) rings them.
        let doorbell = Arc::new(doorbell);
        handle.ear = Some(doorbell.ear(&first));
        drop(first);
        if !self.poll_only {
            self.start_listener(&handle, doorbell, &common)?;
        }
        if !self.schedules.is_empty() {
            handle.ticker = Some(self.start_ticker(&common)?);
        }
        tracing::info!(
            backwave.store = %self.db,
            backwave.worker_ids = ?handle.groups.iter().map(|g| g.worker_id.as_str()).collect::<Vec<_>>(),
            "engine started"
        );
        self.warn_unclaimed_queues();
        Ok(handle)
    }

    /// Warn once at start, per queue, when registered wire names enqueue onto a queue that no
    /// group of this engine claims from. Their jobs wait for another process's engine (a
    /// deployment that splits queues across services does this on purpose), or forever: found
    /// by an application developer whose handler's `.queue("app")` met the default group's
    /// `default` queue, and whose first job stayed Scheduled with nothing said.
    fn warn_unclaimed_queues(&self) {
        let claimed: std::collections::BTreeSet<String> = self.groups.iter().flat_map(|g| g.policy.queues()).collect();
        let mut unclaimed: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for wire_name in self.registry.wire_names() {
            match self.registry.queue_of(&wire_name) {
                Some(queue) if !claimed.contains(queue) => unclaimed.entry(queue).or_default().push(wire_name),
                _ => {}
            }
        }
        for (queue, wire_names) in unclaimed {
            tracing::warn!(
                backwave.store = %self.db,
                backwave.queue = %queue,
                backwave.wire_names = ?wire_names,
                backwave.claimed_queues = ?claimed,
                "no worker group of this engine claims from this queue, which registered wire names \
                 enqueue onto: their jobs wait for an engine that does (add the queue to a group's \
                 DispatchPolicy, or register the handlers on a queue a group claims)"
            );
        }
    }

    /// What `start` refuses before it touches the store: no group, an invalid or duplicate one,
    /// an invalid schedule or admin name, a schedule whose payload its handler cannot decode.
    fn check(&self) -> Result<()> {
        if self.groups.is_empty() {
            return Err(Error::InvalidInput("the engine has no worker groups: add one with add_worker_group".into()));
        }
        for (i, g) in self.groups.iter().enumerate() {
            g.validate()?;
            if self.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(Error::InvalidInput(format!("two worker groups are named '{}'", g.name)));
            }
        }
        crate::store::validate_schedules(&self.schedules)?;
        if let Some(who) = &self.admin {
            crate::store::check_grantee(who)?;
        }
        // A schedule whose wire name this registry handles must give the handler a payload it
        // decodes, or every tick would be quarantined (`registry.job` checks an enqueue the same
        // way). One another process handles is not this registry's to judge.
        for s in &self.schedules {
            if let Some(entry) = self.registry.entry(&s.wire_name) {
                if let Err(e) = entry.route.decode(&s.payload) {
                    return Err(Error::InvalidInput(format!(
                        "schedule '{}': its payload for '{}' does not decode as {}: {e}",
                        s.name,
                        s.wire_name,
                        entry.route.type_name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Create the store if it is missing and write what this engine declares into it: its
    /// admin (on a store with none), its limits, its schedules. The store stays open for the
    /// doorbell.
    fn declare(&self) -> Result<Store> {
        let first = Store::create(&self.db)?.with_clock(self.clock.clone());
        if let Some(who) = &self.admin {
            first.bootstrap_admin(who)?;
        }
        let actor = format!("{}/{}", hostname(), std::process::id());
        first.declare_limits(&actor, &self.limits)?;
        if !self.schedules.is_empty() {
            first.declare_schedules(&actor, &self.schedules)?;
        }
        Ok(first)
    }

    /// The handle, before any group runs (and the async runtime, when a handler needs one).
    fn handle(&self) -> Result<EngineHandle> {
        Ok(EngineHandle {
            groups: Vec::new(),
            wakers: Vec::new(),
            ear: None,
            stop_listening: Arc::new(AtomicBool::new(false)),
            registry: Arc::clone(&self.registry),
            quiet: Arc::new(ProcessQuiet::default()),
            signals: Mutex::default(),
            ticker: None,
            #[cfg(feature = "tokio")]
            async_rt: match self.registry.has_async() {
                true => Some(AsyncRuntime::new(self.runtime.clone())?),
                false => None,
            },
        })
    }

    /// A store for the engine's claiming work (a group's dispatcher, the ticker): on PostgreSQL
    /// its sessions run the batch statements prepared, each planned for its values
    /// ([`Store::for_engine`]), except in poll-only mode, meant for a pooler in transaction mode,
    /// which does not keep a session's settings from one transaction to the next. A group's
    /// recorder keeps a plain session: each failure it records is a few single-row statements
    /// whose cached plans that setting would throw away.
    fn engine_store(&self) -> Result<Store> {
        let store = Store::open(&self.db)?.with_clock(self.clock.clone());
        match self.poll_only {
            true => Ok(store),
            false => store.for_engine(),
        }
    }

    /// Register group `i` as a worker and start it: its handlers (threads, or slot tasks on the
    /// async runtime), its outcome recorder and its dispatcher thread. The group rings through
    /// `doorbell` and wakes through `handle`'s wakers.
    fn start_group(
        &self,
        i: usize,
        cfg: &WorkerGroup,
        handle: &mut EngineHandle,
        doorbell: &mut Doorbell,
        common: &Common,
    ) -> Result<GroupHandle> {
        let store = self.engine_store()?;
        let (worker_id, info) = self.register_worker(&store, cfg)?;
        let capture = cfg.capture_failure_detail && self.capture_failure_detail;
        let stats = Arc::new(Counters::default());
        let stop = Arc::new(StopFlag::default());
        let ready = Arc::new(ReadyBuffer::default());
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let open = || Ok(Store::open(&self.db)?.with_clock(self.clock.clone()));
        let recorder = Recorder::start(&store, open, &cfg.name, done_tx.clone())?;
        #[cfg(feature = "tokio")]
        let tasks = self.start_handlers(cfg, &ready, &done_tx, capture, handle)?;
        #[cfg(not(feature = "tokio"))]
        self.start_handlers(cfg, &ready, &done_tx, capture)?;
        let dispatcher = Dispatcher::new(Setup {
            store,
            cfg: cfg.clone(),
            info,
            worker_id: Arc::clone(&worker_id),
            ready,
            done_rx,
            recorder,
            stats: Arc::clone(&stats),
            stop: Arc::clone(&stop),
            quiet: Arc::clone(&handle.quiet),
            sweep_interval: (i == 0).then_some(self.sweep_interval),
            handler_policies: self.registry.handler_policies(),
            rung: doorbell.add(cfg.policy.queues(), done_tx.clone()),
            watch: Watch::new(&common.health, format!("group {}", cfg.name)),
            reader: Arc::clone(&common.reader),
            hooks: Arc::clone(&common.hooks),
        });
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
        Ok(GroupHandle {
            name: cfg.name.clone(),
            worker_id: worker_id.to_string(),
            stats,
            stop,
            thread: Some(thread),
            #[cfg(feature = "tokio")]
            tasks,
        })
    }

    /// A worker id for the group, and its row in the store's worker registry.
    fn register_worker(&self, store: &Store, cfg: &WorkerGroup) -> Result<(Arc<str>, WorkerInfo)> {
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
        Ok((worker_id, info))
    }

    /// The group's handlers, taking jobs from `ready` and reporting to `done`: with an async
    /// handler in the registry, `concurrency` slot tasks on the runtime run every job of the
    /// group (returned); otherwise a thread per handler.
    // Without the `tokio` feature `HandlerTasks` is `()`.
    #[cfg_attr(not(feature = "tokio"), allow(clippy::unit_arg))]
    fn start_handlers(
        &self,
        cfg: &WorkerGroup,
        ready: &Arc<ReadyBuffer>,
        done: &Sender<Done>,
        capture: bool,
        #[cfg(feature = "tokio")] handle: &EngineHandle,
    ) -> Result<HandlerTasks> {
        #[cfg(feature = "tokio")]
        if let Some(rt) = handle.async_rt.as_ref() {
            let slots =
                rt.start_slots(cfg.concurrency, Arc::clone(ready), done.clone(), Arc::clone(&self.registry), capture);
            return Ok(Some(slots));
        }
        for n in 0..cfg.concurrency {
            let (ready, tx, registry) = (Arc::clone(ready), done.clone(), Arc::clone(&self.registry));
            std::thread::Builder::new()
                .name(format!("bw-{}-{n}", cfg.name))
                .spawn(move || handler_loop(&ready, &tx, &registry, capture))
                .map_err(|e| Error::InvalidInput(format!("cannot start a handler thread: {e}")))?;
        }
        Ok(HandlerTasks::default())
    }

    /// The thread that hears other processes' enqueues and rings the groups (`wake.rs`); its
    /// store errors are counted in the first group's stats.
    fn start_listener(&self, handle: &EngineHandle, doorbell: Arc<Doorbell>, common: &Common) -> Result<()> {
        let (stop, stats) = (Arc::clone(&handle.stop_listening), Arc::clone(&handle.groups[0].stats));
        let target = self.db.clone();
        let watch = Watch::new(&common.health, "listener");
        std::thread::Builder::new()
            .name("bw-listen".into())
            .spawn(move || wake::listen(target, doorbell, stop, stats, watch))
            .map(drop)
            .map_err(|e| Error::InvalidInput(format!("cannot start the listener thread: {e}")))
    }

    /// The thread that fires this engine's schedules (`ticker.rs`).
    fn start_ticker(&self, common: &Common) -> Result<TickerHandle> {
        let (stop_tx, stop_rx) = mpsc::channel();
        let stats = Arc::new(TickerStats::default());
        let ticker = Ticker {
            store: self.engine_store()?,
            names: self.schedules.iter().map(|s| s.name.clone()).collect(),
            max_sleep: self.schedule_poll,
            stats: Arc::clone(&stats),
            stop: stop_rx,
            watch: Watch::new(&common.health, "schedule ticker"),
            hooks: Arc::clone(&common.hooks),
        };
        let thread = std::thread::Builder::new()
            .name("bw-schedules".into())
            .spawn(move || ticker.run())
            .map_err(|e| Error::InvalidInput(format!("cannot start the schedule ticker: {e}")))?;
        Ok(TickerHandle { stop: stop_tx, stats, thread: Some(thread) })
    }
}

/// What every thread of one engine is started with beside its own part.
struct Common {
    /// The engine's one view of its store, for the once-per-outage events (`outage.rs`).
    health: Arc<StoreHealth>,
    /// The read handle handlers get ([`JobContext::parents`](super::JobContext::parents)).
    reader: Arc<super::handler::Reader>,
    /// The application's hooks.
    hooks: Arc<Hooks>,
}

/// A group's async slot tasks, when its registry has async handlers (feature `tokio`).
#[cfg(feature = "tokio")]
type HandlerTasks = Option<Arc<Tasks>>;
#[cfg(not(feature = "tokio"))]
type HandlerTasks = ();

struct TickerHandle {
    stop: Sender<()>,
    stats: Arc<TickerStats>,
    thread: Option<JoinHandle<()>>,
}

/// What the schedule ticker of an engine did since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickerReport {
    /// Jobs this engine enqueued for ticks (each tick's job is made by exactly one engine).
    pub fired: u64,
    /// Ticks of unique schedules it consumed without a job: the previous tick's job was pending.
    pub skipped: u64,
    /// Store errors it retried through.
    pub errors: u64,
    /// The message of the latest of those errors.
    pub last_error: Option<String>,
}

/// Counts of what one worker group did since the engine started: a snapshot taken by
/// [`EngineHandle::stats`]. Every count only grows; poll and compare two snapshots for rates.
/// They are this process's view (what its dispatcher did), not the store's: for counts across
/// every process read the store ([`Store::counts`], [`Store::health`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// The group's name.
    pub group: String,
    /// The group's worker id (`host/pid/group#tail`), as the store's worker registry and the
    /// transition log name it.
    pub worker_id: String,
    /// Jobs this group claimed, each one attempt (also those then quarantined, for a job no
    /// handler here can run).
    pub claimed: u64,
    /// Attempts whose handler returned `Ok(())`: the job is Succeeded.
    pub succeeded: u64,
    /// Failed attempts that were scheduled again.
    pub retried: u64,
    /// Failed attempts that spent the job's budget: the job is Dead-Lettered.
    pub dead_lettered: u64,
    /// Claimed jobs that could not run here (no handler for the wire name, or a payload that
    /// does not decode): the job is Quarantined.
    pub quarantined: u64,
    /// Claimed jobs that ended Cancelled: an operator's cancel reached them (the handler stopped
    /// with an error, or had not started).
    pub cancelled: u64,
    /// Outcomes the fence discarded (the lease had been lost).
    pub fenced_out: u64,
    /// Lapsed leases of any worker that this group reaped.
    pub reaped: u64,
    /// Jobs claimed ahead that no handler started, given back to the store as Scheduled
    /// without consuming an attempt: at shutdown, or held too long behind stalled handlers.
    pub handed_back: u64,
    /// Handlers that stopped when the shutdown asked them to: nothing recorded for them, their
    /// leases ended at once so that any worker's reaper inherits the jobs as lapses.
    pub stopped: u64,
    /// Running handlers when the group stopped, left to lapse.
    pub abandoned: u64,
    /// Store errors the dispatcher retried through, or its own stop on a bug.
    pub errors: u64,
    /// The message of the latest error counted in `errors` (a dispatcher that stopped on a bug
    /// says so here).
    pub last_error: Option<String>,
}

struct GroupHandle {
    name: String,
    worker_id: String,
    stats: Arc<Counters>,
    stop: Arc<StopFlag>,
    thread: Option<JoinHandle<()>>,
    /// The group's async tasks, when its registry has async handlers.
    #[cfg(feature = "tokio")]
    tasks: Option<Arc<Tasks>>,
}

/// A running engine. [`shutdown`](EngineHandle::shutdown) stops it gracefully; dropping it
/// stops it with no grace (running handlers are left to lapse).
pub struct EngineHandle {
    groups: Vec<GroupHandle>,
    wakers: Vec<Sender<Done>>,
    /// This process's enqueues ring the groups while this lives (`wake.rs`).
    ear: Option<Arc<crate::store::Ear>>,
    /// Set when the engine stops: the listener thread ends (within 100 ms; nobody waits).
    stop_listening: Arc<AtomicBool>,
    registry: Arc<Registry>,
    ticker: Option<TickerHandle>,
    /// This process's own quiet (SIGTSTP, or [`EngineHandle::quiet`]), beside the store's.
    quiet: Arc<ProcessQuiet>,
    /// The signal waits [`EngineHandle::quiet_on_sigtstp`] started: closed when the engine stops.
    signals: Mutex<Vec<signal_hook::iterator::Handle>>,
    #[cfg(feature = "tokio")]
    async_rt: Option<AsyncRuntime>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.groups.iter().map(|g| (&g.name, &g.worker_id))).finish()
    }
}

/// What a shutdown left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Claimed jobs no handler had started: given back to the store as Scheduled, due as
    /// before, without consuming an attempt, so any worker may run them at once.
    pub handed_back: u64,
    /// Handlers still running when the grace period ended that stopped when asked (returned the
    /// cancellation within half a second). A host shutdown reports nothing for them (SPEC): their
    /// leases were ended at once instead, so the next reaper of any worker inherits each job as
    /// a lapse (a failed attempt, reason `lease expired`, retried by its delay table) without
    /// waiting out its lease. A handler that finished (`Ok`, or an error of its own) had its
    /// outcome recorded as usual.
    pub stopped: u64,
    /// Handlers still running when the grace period ended that did not stop when asked: nothing
    /// was reported for them, so their leases lapse in their time and another worker inherits
    /// the jobs then. Also counts stopped ones whose leases the store could not end.
    pub abandoned: u64,
}

impl EngineHandle {
    /// The handlers this engine runs: enqueue typed jobs with it while the engine serves.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// [`Engine::enqueuer`]: typed enqueue that outlives this handle's borrow (and its
    /// shutdown), for request handlers to hold.
    pub fn enqueuer(&self) -> super::Enqueuer {
        super::Enqueuer::new(Arc::clone(&self.registry))
    }

    /// Each group's worker id (as in the store's worker registry and transition log).
    pub fn worker_ids(&self) -> Vec<(String, String)> {
        self.groups.iter().map(|g| (g.name.clone(), g.worker_id.clone())).collect()
    }

    /// A snapshot of each group's counters, in the order the groups were added: what it
    /// claimed, how those attempts ended (succeeded, retried, dead-lettered, quarantined,
    /// cancelled), leases it lost or reaped, jobs it handed back, and the store errors it
    /// retried through (see [`GroupStats`] for each count). Cheap (atomic loads, no store
    /// access): poll it for a health endpoint or a metrics exporter, and compare two snapshots
    /// for rates; the counts never go down. To act on each outcome as it happens instead (a
    /// dead-letter, a quarantine, a discarded result, the store becoming unavailable), add a
    /// hook with [`Engine::on_event`] (docs/embedding.md, "Acting on outcomes"); the same
    /// changes are `tracing` events (see [`crate::telemetry`]).
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
                    handed_back: get(&s.handed_back),
                    stopped: get(&s.stopped),
                    abandoned: get(&s.abandoned),
                    errors: get(&s.errors),
                    last_error: s.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                }
            })
            .collect()
    }

    /// The schedule ticker's counts; `None` when the engine declares no schedule.
    pub fn ticker(&self) -> Option<TickerReport> {
        self.ticker.as_ref().map(|t| TickerReport {
            fired: t.stats.fired.load(Ordering::Relaxed),
            skipped: t.stats.skipped.load(Ordering::Relaxed),
            errors: t.stats.errors.load(Ordering::Relaxed),
            last_error: t.stats.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        })
    }

    /// Quiet this process: every group claims nothing from its next poll on and finishes what
    /// it runs, as [`Store::quiet_workers`] does from the store. Each group writes it into its
    /// registry row ([`QUIET_BY_PROCESS`]), where [`Store::worker_states`] and the store's health
    /// report see it and [`Store::resume_workers`] lifts it. Lifted by [`EngineHandle::resume`];
    /// after an operator lifted it, calling this (or SIGTSTP) again quiets the process again.
    ///
    /// [`Store::quiet_workers`]: crate::Store::quiet_workers
    /// [`Store::worker_states`]: crate::Store::worker_states
    /// [`Store::resume_workers`]: crate::Store::resume_workers
    /// [`QUIET_BY_PROCESS`]: crate::store::QUIET_BY_PROCESS
    pub fn quiet(&self) {
        self.quiet.ask();
        wake(&self.wakers);
    }

    /// Lift this process's own quiet (one an operator set through the store stays until
    /// [`Store::resume_workers`] lifts it).
    ///
    /// [`Store::resume_workers`]: crate::Store::resume_workers
    pub fn resume(&self) {
        self.quiet.lift();
        wake(&self.wakers);
    }

    /// Quiet this process when it receives SIGTSTP, as Sidekiq and asynq do: a deploy script
    /// signals the old process, which stops claiming at its next poll and finishes what it runs
    /// (then stop it with [`EngineHandle::shutdown`]). Replaces the terminal's default stop.
    /// Each SIGTSTP quiets it, also one after an operator's `Store::resume_workers`; the groups see
    /// it at once. A thread of its own waits for the signal until the engine stops.
    ///
    /// Fails with [`Error::InvalidInput`] when the signal handler cannot be installed.
    pub fn quiet_on_sigtstp(&self) -> Result<()> {
        let cannot = |e: std::io::Error| Error::InvalidInput(format!("cannot install the SIGTSTP handler: {e}"));
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTSTP]).map_err(cannot)?;
        self.signals.lock().unwrap_or_else(|p| p.into_inner()).push(signals.handle());
        let (quiet, wakers) = (Arc::clone(&self.quiet), self.wakers.clone());
        std::thread::Builder::new()
            .name("bw-sigtstp".into())
            .spawn(move || {
                for _ in signals.forever() {
                    quiet.ask();
                    wake(&wakers);
                }
            })
            .map(drop)
            .map_err(cannot)
    }

    /// Whether this process was quieted locally (by [`EngineHandle::quiet`] or SIGTSTP).
    pub fn is_quiet(&self) -> bool {
        self.quiet.is_on()
    }

    /// Stop claiming in every group at once, under one deadline `grace` from now: hand back
    /// at once every claimed job no handler started (no attempt spent), give running handlers
    /// until the deadline to finish (their outcomes are recorded), then ask the rest to stop: for
    /// those that do within half a second nothing is recorded but their leases end at once (any
    /// worker's next reap inherits the jobs as lapses); the others are reported on never (their
    /// leases lapse in their time). Each worker is marked stopping, then leaves the registry.
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.stop_all(grace, true)
    }

    /// Serve until the process receives SIGTERM or SIGINT (Ctrl-C), caught by `stop` since it
    /// was installed, then shut down as [`EngineHandle::shutdown`] does under `grace`; a second
    /// signal during that shutdown ends the grace period at once (running handlers are asked to
    /// stop), and a third ends the process as the signal would without a handler (a store that
    /// cannot be reached may hold the stop). What a worker process's `main` ends with. It blocks
    /// the calling thread (in async code use `tokio::signal` and `shutdown` in `spawn_blocking`,
    /// as the shop example does). Once it returns, SIGTERM and SIGINT end the process again as
    /// they would without a handler.
    pub fn serve_until(mut self, mut stop: StopSignals, grace: Duration) -> Result<ShutdownReport> {
        let Some(mut signals) = stop.signals.take() else {
            return Ok(self.stop_all(grace, true));
        };
        let _first = signals.forever().next();
        let stops: Vec<Arc<StopFlag>> = self.groups.iter().map(|g| Arc::clone(&g.stop)).collect();
        let (wakers, waiting, hurried) = (self.wakers.clone(), signals.handle(), Arc::clone(&stop.default_again));
        let hurry = std::thread::Builder::new().name("bw-stop-signal".into()).spawn(move || {
            if signals.forever().next().is_some() {
                let now = Instant::now();
                for s in &stops {
                    *s.grace.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
                }
                wake(&wakers);
                hurried.store(true, Ordering::SeqCst);
            }
        });
        // Should the thread not start, the stop still takes its grace period (without the hurry).
        let report = self.stop_all(grace, true);
        waiting.close();
        if let Ok(thread) = hurry {
            let _ = thread.join();
        }
        Ok(report)
    }

    fn stop_all(&mut self, grace: Duration, wait_for_stopped: bool) -> ShutdownReport {
        for s in self.signals.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            s.close();
        }
        self.stop_listening.store(true, Ordering::SeqCst);
        self.ear = None;
        // The ticker first: no tick fires into an engine that is going away.
        if let Some(t) = self.ticker.as_mut() {
            let _ = t.stop.send(());
            if let Some(thread) = t.thread.take() {
                let _ = thread.join();
            }
        }
        let deadline = later(Instant::now(), grace);
        // Hand-backs before the stop (of jobs held behind stalled handlers) are not this report's.
        let handed_back_before: Vec<u64> =
            self.groups.iter().map(|g| g.stats.handed_back.load(Ordering::Relaxed)).collect();
        for g in &self.groups {
            // An earlier end stands (a second stop signal may already have set one).
            let mut end = g.stop.grace.lock().unwrap_or_else(|p| p.into_inner());
            *end = Some(end.map_or(deadline, |e| e.min(deadline)));
            drop(end);
            g.stop.wait_for_stopped.store(wait_for_stopped, Ordering::SeqCst);
            g.stop.requested.store(true, Ordering::SeqCst);
        }
        wake(&self.wakers);
        let mut report = ShutdownReport::default();
        let mut stopped_now = false;
        for (g, before) in self.groups.iter_mut().zip(handed_back_before) {
            if let Some(t) = g.thread.take() {
                stopped_now = true;
                let _ = t.join();
                report.handed_back += g.stats.handed_back.load(Ordering::Relaxed) - before;
                report.stopped += g.stats.stopped.load(Ordering::Relaxed);
                report.abandoned += g.stats.abandoned.load(Ordering::Relaxed);
            }
            // The dispatcher has recorded what it will: futures still running are dropped.
            #[cfg(feature = "tokio")]
            if let Some(tasks) = &g.tasks {
                tasks.abort_all();
            }
        }
        #[cfg(feature = "tokio")]
        if let Some(rt) = self.async_rt.as_mut() {
            rt.shutdown();
        }
        // Once: a second stop (the drop after a shutdown) finds no group thread left.
        if stopped_now {
            tracing::info!(
                backwave.worker_ids = ?self.groups.iter().map(|g| g.worker_id.as_str()).collect::<Vec<_>>(),
                handed_back = report.handed_back,
                stopped = report.stopped,
                abandoned = report.abandoned,
                "engine stopped"
            );
        }
        report
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.stop_all(Duration::ZERO, false);
    }
}

/// SIGTERM and SIGINT (Ctrl-C), caught from the moment this is installed until
/// [`EngineHandle::serve_until`] has stopped the engine: install it before
/// [`Engine::start`](super::Engine::start), so that a signal that comes while the engine starts
/// is a stop like any other, not the signal's default end of the process (with the jobs just
/// claimed left to their leases). Dropped, the signals end the process as without a handler.
pub struct StopSignals {
    signals: Option<signal_hook::iterator::Signals>,
    /// Set by the second signal and when the stop is over: a further signal then ends the
    /// process as it would without a handler.
    default_again: Arc<AtomicBool>,
}

impl StopSignals {
    /// Catch SIGTERM and SIGINT from now on, for [`EngineHandle::serve_until`]. Call it first
    /// in `main`, before [`Engine::start`]. Fails with [`Error::InvalidInput`] when the
    /// handlers cannot be installed.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use backwave::engine::{Engine, Registry, StopSignals, WorkerGroup};
    /// # fn main() -> backwave::Result<()> {
    /// let stop = StopSignals::install()?;
    /// let mut engine = Engine::new("backwave.db", Registry::new());
    /// engine.add_worker_group(WorkerGroup::new("default"));
    /// let running = engine.start()?;
    /// running.serve_until(stop, Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn install() -> Result<StopSignals> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let cannot = |e: std::io::Error| Error::InvalidInput(format!("cannot install the SIGTERM/SIGINT handler: {e}"));
        let default_again = Arc::new(AtomicBool::new(false));
        for sig in [SIGTERM, SIGINT] {
            signal_hook::flag::register_conditional_default(sig, Arc::clone(&default_again)).map_err(cannot)?;
        }
        let signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).map_err(cannot)?;
        Ok(StopSignals { signals: Some(signals), default_again })
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        self.default_again.store(true, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals(SIGTERM, SIGINT)")
    }
}

/// Wake every group's dispatcher at once (a quiet, a resume, a stop), rather than at its next poll.
fn wake(wakers: &[Sender<Done>]) {
    for w in wakers {
        let _ = w.send(Done::Wake);
    }
}

fn hostname() -> String {
    nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "unknown".into())
}
