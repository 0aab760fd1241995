//! `bw demo` at work: the seed's two worker groups and a crashing node running in this process,
//! and a steady mix of jobs enqueued at a rate, including jobs no handler can take, until told
//! to stop. The store must already exist (a file or a PostgreSQL database: anything `Engine::new`
//! takes); the command line decides which and prints. A store that stops answering (a server
//! restart, a full disk) is retried with backoff, each job exactly once; the demo says so as it
//! happens ([`Demo::take_events`]) and reports an enqueuer that never recovered.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use super::handlers::{self, ChargeCard, ChargeLedger, ExportReport, ResizeImage, SendEmail, SyncInventory, Wedge};
use super::rng::Rng;
use backwave::engine::{Engine, EngineHandle, Enqueue, GroupStats, Registry};
use backwave::error::{Error, Result};
use backwave::model::{JobId, NewJob};
use backwave::store::{JobFilter, Store, StoreTarget};

/// The label that numbers the demo's jobs from 0 in enqueue order: after a store error that
/// leaves it unknown whether an enqueue committed (the connection dropped during COMMIT), the
/// enqueuer looks for the number before enqueuing again, so no job is made twice.
pub const SEQ_LABEL: &str = "demo-seq";
/// The first wait after a store error, doubled on each failed try up to the last.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The demo store: a file, or a PostgreSQL URL.
    pub db: StoreTarget,
    /// Jobs enqueued per second, after a first round of one job of each kind.
    pub rate: f64,
    /// The operator the demo's own cancel is recorded under.
    pub actor: String,
    /// Seed of the mix.
    pub seed: u64,
}

/// What the demo did, for its summary.
#[derive(Debug, Default)]
pub struct DemoReport {
    pub enqueued: u64,
    /// Handlers that stopped when the shutdown asked them to: nothing recorded for them, their
    /// leases ended at once, so their jobs are retried now (one attempt spent).
    pub stopped: u64,
    /// Handlers still running when the workers stopped: their leases are left to lapse, as a
    /// host shutdown does.
    pub abandoned: u64,
    /// charge-card's idempotency ledger: keys charged, and keys charged more than once.
    pub charges: usize,
    pub double_charges: usize,
    pub groups: Vec<GroupStats>,
    /// Errors of the enqueuer or the crashing node (the engine's own are in `groups`).
    pub errors: Vec<String>,
    /// Why the enqueuer stopped enqueuing before the end: an error retrying cannot mend (a
    /// read-only store), or the store still failing when the demo stopped.
    pub enqueue_failure: Option<Error>,
}

/// The kinds of job the demo enqueues: one for each path through BackWave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// Quick successes.
    SendEmail,
    SyncInventory,
    /// Succeeds on attempt 3, charged once.
    ChargeCard,
    ResizeImage,
    /// Panics on every attempt: Dead-Lettered by panic.
    ResizeImageZeroWidth,
    /// Several seconds, lease renewed by heartbeat.
    ExportReport,
    /// Always fails: Dead-Lettered by error.
    Flaky,
    /// Due in ten minutes: stays Scheduled.
    Reminder,
    /// A wire name no worker handles: Quarantined (no-handler).
    LegacyReport,
    /// A charge-card payload of an older shape: Quarantined (undecodable-payload).
    ChargeCardDrifted,
    /// A charge-card payload that is not even UTF-8: Quarantined (undecodable-payload).
    ChargeCardGarbage,
    /// Wedges on the crashing node: Dead-Lettered by lapsed lease.
    Wedge,
}

impl Sample {
    /// The mix, by weight: mostly work that succeeds, as in a healthy system.
    pub const MIX: [(Sample, u32); 12] = [
        (Sample::SendEmail, 24),
        (Sample::SyncInventory, 10),
        (Sample::ChargeCard, 12),
        (Sample::ResizeImage, 12),
        (Sample::ResizeImageZeroWidth, 3),
        (Sample::ExportReport, 2),
        (Sample::Flaky, 5),
        (Sample::Reminder, 4),
        (Sample::LegacyReport, 3),
        (Sample::ChargeCardDrifted, 2),
        (Sample::ChargeCardGarbage, 1),
        (Sample::Wedge, 1),
    ];
}

/// A running demo. [`Demo::stop`] stops everything cleanly.
pub struct Demo {
    engine: EngineHandle,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    ledger: Arc<ChargeLedger>,
    enqueued: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<Vec<String>>>,
    failure: Arc<Mutex<Option<Error>>>,
}

/// What the demo's own threads share to say what went wrong: `events` as it happens (taken by
/// the command line), `errors` for the summary.
#[derive(Clone, Default)]
struct Trouble {
    errors: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<Vec<String>>>,
}

impl Trouble {
    fn event(&self, e: String) {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    }
}

impl Demo {
    /// Start the workers, the crashing node and the enqueuer on the store `opts.db` names.
    pub fn start(opts: &DemoOptions) -> Result<Demo> {
        // Seed 000's Program.cs: two groups, one registry of handlers.
        let ledger = Arc::new(ChargeLedger::default());
        let mut backwave = Engine::new(&opts.db, handlers::registry(Arc::clone(&ledger)));
        backwave.add_worker_group(handlers::strict_priority()?);
        backwave.add_worker_group(handlers::weighted_fair()?);
        for s in handlers::schedules() {
            backwave.add_schedule(s);
        }
        let engine = backwave.start()?;

        let stop = Arc::new(AtomicBool::new(false));
        let enqueued = Arc::new(AtomicU64::new(0));
        let trouble = Trouble::default();
        let failure = Arc::new(Mutex::new(None));
        let mut threads = Vec::new();
        {
            let (db, stop, trouble) = (opts.db.clone(), Arc::clone(&stop), trouble.clone());
            threads.push(spawn("bw-demo-node", move || {
                if let Err(e) = crashing_node(&db, &stop, &trouble) {
                    note(&trouble.errors, format!("crashing node: {e}"));
                }
            }));
        }
        {
            let (opts, stop, enqueued, trouble, failure) =
                (opts.clone(), Arc::clone(&stop), Arc::clone(&enqueued), trouble.clone(), Arc::clone(&failure));
            let registry = handlers::registry(Arc::clone(&ledger));
            threads.push(spawn("bw-demo-enqueue", move || {
                let retry = Retry { stop: &stop, trouble: &trouble, what: "enqueue" };
                if let Err(e) = enqueue_loop(&opts, &registry, &retry, &enqueued) {
                    note(&trouble.errors, format!("enqueue: {e}"));
                    trouble.event(format!("enqueuing stopped: {e}"));
                    *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            }));
        }
        Ok(Demo { engine, stop, threads, ledger, enqueued, errors: trouble.errors, events: trouble.events, failure })
    }

    /// What went wrong (or came right again) since the last call, one line each: a store error
    /// the enqueuer or the crashing node met and is retrying, the store answering again.
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Each group's counters so far.
    pub fn stats(&self) -> Vec<GroupStats> {
        self.engine.stats()
    }

    pub fn enqueued(&self) -> u64 {
        self.enqueued.load(Ordering::Relaxed)
    }

    /// Stop enqueuing, kill the crashing node, and shut the workers down with `grace` for the
    /// handlers still running (the rest are left to lapse, as on a real host shutdown).
    pub fn stop(self, grace: Duration) -> DemoReport {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        let groups = self.engine.stats();
        let shutdown = self.engine.shutdown(grace);
        let (charges, double_charges) = self.ledger.totals();
        let errors = std::mem::take(&mut *self.errors.lock().unwrap_or_else(|p| p.into_inner()));
        let enqueue_failure = self.failure.lock().unwrap_or_else(|p| p.into_inner()).take();
        DemoReport {
            enqueued: self.enqueued.load(Ordering::Relaxed),
            stopped: shutdown.stopped,
            abandoned: shutdown.abandoned,
            charges,
            double_charges,
            groups,
            errors,
            enqueue_failure,
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new().name(name.into()).spawn(f).expect("spawn a demo thread")
}

fn note(errors: &Mutex<Vec<String>>, e: String) {
    errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
}

/// Sleep up to `d`, waking early when asked to stop. Returns false when stopping.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
    false
}

/// A worker process that keeps dying mid-job: start it, let it claim, drop it without grace.
/// Its handlers' results are never reported, so their leases lapse and the seed groups reap
/// them as failed attempts.
fn crashing_node(db: &StoreTarget, stop: &AtomicBool, trouble: &Trouble) -> Result<()> {
    let retry = Retry { stop, trouble, what: "crashing node" };
    while !stop.load(Ordering::SeqCst) {
        let group = handlers::crashing_node()?;
        // A store that does not answer (a server restarting) is waited for, as a restarted
        // host would.
        let running = retry.call(|| {
            let mut node = Engine::new(db, handlers::crashing_node_registry());
            node.add_worker_group(group.clone());
            node.start()
        })?;
        let born = Instant::now();
        while running.stats().iter().all(|g| g.claimed == 0) && born.elapsed() < Duration::from_secs(2) {
            if !nap(stop, Duration::from_millis(50)) {
                break;
            }
        }
        nap(stop, Duration::from_millis(200));
        // The node dies: dropped, with no grace and nothing reported for the wedged handlers
        // (a shutdown would ask them to stop, and end at once the leases of those that do).
        drop(running);
    }
    Ok(())
}

/// Calls into the store on the demo's behalf, again and again while the store cannot answer,
/// with a wait that doubles from [`RETRY_FIRST`] to [`RETRY_MAX`]; said as events when it
/// starts failing and when it answers again.
struct Retry<'a> {
    stop: &'a AtomicBool,
    trouble: &'a Trouble,
    what: &'static str,
}

impl Retry<'_> {
    /// `f`'s value; the last error when the demo stopped while the store was still failing;
    /// an error that waiting cannot mend (read-only, a permission, bad input) at once.
    fn call<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let mut failing: Option<(Instant, Duration)> = None;
        loop {
            match f() {
                Ok(v) => {
                    if let Some((since, _)) = failing {
                        self.trouble.event(format!(
                            "{}: the store answers again after {:.1}s; carrying on",
                            self.what,
                            since.elapsed().as_secs_f64()
                        ));
                    }
                    return Ok(v);
                }
                Err(e) if retryable(&e) => {
                    let wait = match failing {
                        None => {
                            note(&self.trouble.errors, format!("{}: {e}", self.what));
                            self.trouble.event(format!("{}: {e}; retrying until the store answers", self.what));
                            RETRY_FIRST
                        }
                        Some((_, wait)) => (wait * 2).min(RETRY_MAX),
                    };
                    failing = Some((failing.map_or_else(Instant::now, |(since, _)| since), wait));
                    if !nap(self.stop, wait) {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A store error that may pass with time: the store locked, unreachable or restarting, a full
/// disk, a server error. Not: a read-only store, a missing permission, bad input.
fn retryable(e: &Error) -> bool {
    e.is_transient() || matches!(e, Error::DiskFull { .. } | Error::Database(_))
}

/// A first round of one job of each kind (so every path shows within seconds), then the mix
/// at `rate` per second. A few seconds in, the demo's operator cancels a reminder. Each job is
/// enqueued once: a failed enqueue is retried until it is in the store (or the demo stops).
fn enqueue_loop(opts: &DemoOptions, registry: &Registry, retry: &Retry<'_>, count: &AtomicU64) -> Result<()> {
    let stop = retry.stop;
    let store = retry.call(|| Store::open(&opts.db))?;
    let mut rng = Rng(opts.seed);
    let mut n = 0u64;
    let mut reminder: Option<JobId> = None;
    // Enqueue job number `n`, retried until it is in the store.
    let enqueue_once = |sample: Sample, n: u64, rng: &mut Rng| -> Result<JobId> {
        let mut tried = false;
        // The mix draws from `rng` while building the job: draw once, whatever the retries.
        let job = build(registry, sample, n, rng, store.now())?;
        retry.call(|| {
            // A retry after an error that may have come after the commit: look before writing.
            if std::mem::replace(&mut tried, true) {
                let filter = JobFilter { labels: vec![(SEQ_LABEL.into(), n.to_string())], ..Default::default() };
                if let Some(found) = store.list_jobs(&filter, 1, 0)?.jobs.first() {
                    return Ok(found.id);
                }
            }
            store.enqueue(&job)
        })
    };
    for (sample, _) in Sample::MIX {
        let id = enqueue_once(sample, n, &mut rng)?;
        if sample == Sample::Reminder {
            reminder = Some(id);
        }
        n += 1;
        count.store(n, Ordering::Relaxed);
    }
    let total: u32 = Sample::MIX.iter().map(|(_, w)| w).sum();
    let started = Instant::now();
    let rate = opts.rate.max(0.0);
    let mut sent = 0u64;
    while nap(stop, Duration::from_millis(50)) {
        let elapsed = started.elapsed();
        if let Some(id) = reminder.filter(|_| elapsed > Duration::from_secs(2)) {
            // An operator changes their mind: Cancelled, with the actor in the log. (Run again
            // after an error, it finds the job cancelled already and changes nothing.)
            retry.call(|| store.cancel(&opts.actor, &[id]))?;
            reminder = None;
        }
        let due = (elapsed.as_secs_f64() * rate) as u64;
        while sent < due {
            let mut pick = rng.below(u64::from(total)) as u32;
            let sample = Sample::MIX
                .iter()
                .find(|(_, w)| {
                    let hit = pick < *w;
                    pick = pick.saturating_sub(*w);
                    hit
                })
                .map_or(Sample::SendEmail, |(s, _)| *s);
            enqueue_once(sample, n, &mut rng)?;
            sent += 1;
            n += 1;
            count.store(n, Ordering::Relaxed);
        }
    }
    Ok(())
}

const TENANTS: [&str; 4] = ["acme", "globex", "initech", "umbrella"];

/// Job number `n`, of `sample`, labelled with its number ([`SEQ_LABEL`]), due times resolved
/// against `now`. Jobs of registered wire names go through the registry (their queue and
/// payload type come from the registration); the broken ones are written the way a stale
/// client or an older deploy would write them.
fn build(registry: &Registry, sample: Sample, n: u64, rng: &mut Rng, now: backwave::model::Millis) -> Result<NewJob> {
    let tenant = rng.pick(&TENANTS);
    let job = match sample {
        Sample::SendEmail => registry
            .job("send-email", &SendEmail { to: format!("user{n}@example.com"), subject: "your receipt".into() })?
            .label("tenant", tenant),
        Sample::Reminder => registry
            .job("send-email", &SendEmail { to: format!("user{n}@example.com"), subject: "still there?".into() })?
            .label("tenant", tenant)
            .label("kind", "reminder")
            .due_in(Duration::from_secs(600)),
        Sample::SyncInventory => {
            registry.job("sync-inventory", &SyncInventory { warehouse: format!("wh-{}", rng.below(9) + 1) })?
        }
        Sample::ChargeCard => registry
            .job(
                "charge-card",
                &ChargeCard {
                    card_token: format!("tok_{:08x}", rng.next() as u32),
                    amount_cents: 100 + rng.below(9900),
                },
            )?
            .label("tenant", tenant),
        Sample::ResizeImage => registry.job(
            "resize-image",
            &ResizeImage { image: format!("img-{n}.png"), width: 640 + rng.below(1280) as u32, height: 480 },
        )?,
        Sample::ResizeImageZeroWidth => {
            registry.job("resize-image", &ResizeImage { image: format!("broken-{n}.png"), width: 0, height: 480 })?
        }
        Sample::ExportReport => registry
            .job("export-report", &ExportReport { report: format!("report-{n}"), steps: 3 + rng.below(4) as u32 })?
            .label("tenant", tenant),
        Sample::Flaky => registry.job("flaky", rng.pick(&["nightly", "hourly", "daily"]))?,
        Sample::LegacyReport => Enqueue::new("legacy-report", "low", &json!({ "report": format!("archive-{n}") }))?,
        Sample::ChargeCardDrifted => Enqueue::new(
            "charge-card",
            "critical",
            // The old shape: a decimal string amount where the handler now takes cents.
            &json!({ "card_token": format!("tok_{:08x}", rng.next() as u32), "amount": "12.50" }),
        )?
        .label("tenant", tenant),
        Sample::ChargeCardGarbage => {
            let job = NewJob::new("charge-card", "critical", vec![0xff, 0xfe, 0x00, 0xc3, 0x28, 0x9f, 0x92, 0x96]);
            return Ok(job.label(SEQ_LABEL, n.to_string()));
        }
        Sample::Wedge => Enqueue::new("wedge", "fragile", &Wedge { note: format!("wedge-{n}") })?,
    };
    Ok(job.label(SEQ_LABEL, &n.to_string()).into_new_job(now))
}
