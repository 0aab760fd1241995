//! What an application hears from the engine (issue 41), through its `tracing` subscriber and
//! through its hooks (`Engine::on_event`), told at the same points: a span per attempt that ends
//! with the store's verdict and holds the handler's own events, one event per change (a failed
//! attempt, a dead-letter, a quarantine, a cancel, a lease lost and its late result discarded, a
//! lapse reaped) and one of each per store outage, not one per poll. The subscriber is a small
//! capturing layer installed once for the whole test binary; each test keeps only the records
//! that name its own jobs or its own store. The hooks of each test's engine are its own.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, Event as Told, HandlerError, Registry, WorkerGroup};
use backwave::store::CancelResult;
use backwave::store::ClaimRequest;
use backwave::telemetry::{verdict, ENQUEUE_SPAN, RUN_SPAN};
use backwave::{Clock, JobId, JobState, NewJob, QuarantineReason, RetryPolicy, Store};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::support::*;
use crate::backend::{both_backends, TestDb};

/// One event as the subscriber saw it: its own fields and those of every span it is in
/// (innermost first), with the span names.
#[derive(Clone, Debug)]
pub struct Seen {
    pub level: Level,
    pub message: String,
    pub fields: BTreeMap<String, String>,
    pub spans: Vec<(String, BTreeMap<String, String>)>,
}

impl Seen {
    /// A field of the event or, failing that, of the innermost span that has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).or_else(|| self.spans.iter().find_map(|(_, f)| f.get(key))).map(String::as_str)
    }

    fn mentions(&self, keys: &HashSet<String>) -> bool {
        let values = self.fields.values().chain(self.spans.iter().flat_map(|(_, f)| f.values()));
        values.into_iter().any(|v| keys.contains(v))
    }
}

/// A span as it closed, with every field recorded on it.
#[derive(Clone, Debug)]
pub struct Closed {
    pub name: String,
    pub fields: BTreeMap<String, String>,
}

#[derive(Default)]
struct Log {
    /// The values a running test looks for: records naming none of them are not kept.
    keys: HashSet<String>,
    events: Vec<Seen>,
    closed: Vec<Closed>,
}

fn log() -> &'static Mutex<Log> {
    static LOG: OnceLock<Mutex<Log>> = OnceLock::new();
    LOG.get_or_init(|| {
        let subscriber = tracing_subscriber::registry().with(Capture);
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber in the tests");
        Mutex::default()
    })
}

fn locked() -> std::sync::MutexGuard<'static, Log> {
    log().lock().unwrap_or_else(|p| p.into_inner())
}

/// A test's window on the captured records: everything that names one of its keys (a job id,
/// its store's target) from when the key was added.
pub struct Captured {
    keys: Vec<String>,
}

impl Captured {
    pub fn new() -> Captured {
        drop(locked());
        Captured { keys: Vec::new() }
    }

    pub fn watch(&mut self, key: impl ToString) {
        let key = key.to_string();
        locked().keys.insert(key.clone());
        self.keys.push(key);
    }

    fn mine<'a>(&self, mut values: impl Iterator<Item = &'a String>) -> bool {
        values.any(|v| self.keys.contains(v))
    }

    pub fn events(&self) -> Vec<Seen> {
        let keys: HashSet<String> = self.keys.iter().cloned().collect();
        locked().events.iter().filter(|e| e.mentions(&keys)).cloned().collect()
    }

    pub fn closed(&self, name: &str) -> Vec<Closed> {
        locked().closed.iter().filter(|c| c.name == name && self.mine(c.fields.values())).cloned().collect()
    }

    /// The events whose message starts with `prefix`.
    pub fn said(&self, prefix: &str) -> Vec<Seen> {
        self.events().into_iter().filter(|e| e.message.starts_with(prefix)).collect()
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        let mut log = locked();
        for k in &self.keys {
            log.keys.remove(k);
        }
        let keys: HashSet<String> = self.keys.iter().cloned().collect();
        log.events.retain(|e| !e.mentions(&keys));
        log.closed.retain(|c| !c.fields.values().any(|v| keys.contains(v)));
    }
}

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Capture;

/// Whether any test watches now: while none does (the rest of the suite, once the subscriber is
/// installed), spans are not formatted at all.
fn watching() -> bool {
    !locked().keys.is_empty()
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !watching() {
            return;
        }
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<Fields>() {
                values.record(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !watching() {
            return;
        }
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|s| {
                        let f = s.extensions().get::<Fields>().map(|f| f.0.clone()).unwrap_or_default();
                        (s.name().to_string(), f)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let seen = Seen { level: *event.metadata().level(), message, fields: fields.0, spans };
        let mut log = locked();
        if seen.mentions(&log.keys) {
            log.events.push(seen);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(fields) = span.extensions().get::<Fields>().map(|f| f.0.clone()) else { return };
        let mut log = locked();
        if fields.values().any(|v| log.keys.contains(v)) {
            log.closed.push(Closed { name: span.name().to_string(), fields });
        }
    }
}

/// What an engine's hook heard, in order.
#[derive(Clone, Default)]
pub struct Heard(Arc<Mutex<Vec<Told>>>);

impl Heard {
    /// Add a hook to `engine` that keeps every event here.
    pub fn listen(&self, engine: &mut Engine) {
        let heard = self.clone();
        engine.on_event(move |e| heard.0.lock().unwrap().push(e.clone()));
    }

    pub fn all(&self) -> Vec<Told> {
        self.0.lock().unwrap().clone()
    }

    /// The events of one kind (`Told::kind`).
    pub fn of(&self, kind: &str) -> Vec<Told> {
        self.all().into_iter().filter(|e| e.kind() == kind).collect()
    }

    /// The events about `job`.
    pub fn about(&self, job: JobId) -> Vec<Told> {
        self.all().into_iter().filter(|e| e.job() == Some(job)).collect()
    }
}

/// An engine of one group over the test's store, its events told to `heard`.
fn engine(t: &TestStore, registry: Registry, group: WorkerGroup, heard: &Heard) -> backwave::engine::EngineHandle {
    let mut engine = Engine::new(&t.db, registry);
    engine.add_worker_group(group);
    heard.listen(&mut engine);
    engine.start().unwrap()
}

both_flavors! {
    /// A job that fails twice on two attempts: each attempt is a span in which the handler's
    /// own event sits; the first ends `retry` with one warning, the second `dead-lettered` with
    /// one error; the enqueue was a producer span of its own.
    fn a_failed_attempt_warns_and_a_dead_letter_errs_each_in_its_attempt_span() {
        let mut cap = Captured::new();
        let t = test_store();
        // A queue of this test's own: the enqueue span names it before the job has an id.
        let queue = format!("q-{}", JobId::new().short());
        cap.watch(&queue);
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "flaky", |label, ctx| {
            tracing::info!(label = %label, "charging the card");
            Err(HandlerError::msg(format!("gateway timeout (attempt {})", ctx.attempt())))
        })
        .queue(&queue);
        let id = {
            let _request = tracing::info_span!("request", route = "/checkout").entered();
            registry.job("flaky", &"nightly".to_string()).unwrap().enqueue(&t.store).unwrap()
        };
        cap.watch(id);
        let heard = Heard::default();
        let running = engine(&t, registry, group("g", DispatchPolicy::strict([queue.as_str()]), 2), &heard);
        let j = wait_terminal(&t.store, id);
        assert_eq!((j.state, j.attempt), (JobState::DeadLettered, 2));
        wait_for("both verdicts", Duration::from_secs(5), || (cap.closed(RUN_SPAN).len() == 2).then_some(()));
        running.shutdown(Duration::from_secs(1));

        let enqueue = cap.closed(ENQUEUE_SPAN);
        assert_eq!(enqueue.len(), 1, "{enqueue:?}");
        let e = &enqueue[0].fields;
        assert_eq!(e["messaging.system"], "backwave");
        assert_eq!(e["messaging.destination.name"], queue);
        assert_eq!(e["messaging.message.id"], id.to_string());
        assert_eq!(e["backwave.wire_name"], "flaky");
        assert_eq!(e["otel.kind"], "producer");

        let mut runs = cap.closed(RUN_SPAN);
        runs.sort_by_key(|r| r.fields["backwave.attempt"].clone());
        let got: Vec<(&str, &str, &str)> = runs
            .iter()
            .map(|r| {
                (r.fields["backwave.attempt"].as_str(), r.fields["backwave.verdict"].as_str(), r.fields["backwave.max_attempts"].as_str())
            })
            .collect();
        assert_eq!(got, [("1", verdict::RETRY, "2"), ("2", verdict::DEAD_LETTERED, "2")]);
        for r in &runs {
            let f = &r.fields;
            assert_eq!(
                (f["messaging.system"].as_str(), f["messaging.operation.name"].as_str(), f["otel.kind"].as_str()),
                ("backwave", "process", "consumer")
            );
            assert_eq!((f["messaging.destination.name"].as_str(), f["backwave.worker_group"].as_str()), (queue.as_str(), "g"));
            assert_eq!(f["messaging.message.id"], id.to_string());
            assert!(f["backwave.queue_wait_ms"].parse::<u64>().is_ok(), "{f:?}");
            assert_eq!(f["otel.status_code"], "ERROR");
        }
        assert_eq!(runs[0].fields["backwave.retry_in_ms"], "10");

        let events = cap.events();
        let handler: Vec<&Seen> = events.iter().filter(|e| e.message == "charging the card").collect();
        assert_eq!(handler.len(), 2, "{events:#?}");
        for e in &handler {
            assert_eq!(e.spans[0].0, RUN_SPAN, "the handler's event is inside the attempt span: {e:?}");
            assert_eq!(e.get("label"), Some("nightly"));
        }
        let failed = cap.said("attempt failed; the job will be retried");
        assert_eq!(failed.len(), 1, "{events:#?}");
        assert_eq!((failed[0].level, failed[0].get("backwave.attempt")), (Level::WARN, Some("1")));
        assert_eq!(failed[0].get("error"), Some("gateway timeout (attempt 1)"));
        let dead = cap.said("attempt failed on its last attempt");
        assert_eq!(dead.len(), 1, "{events:#?}");
        assert_eq!((dead[0].level, dead[0].get("backwave.attempt")), (Level::ERROR, Some("2")));
        assert_eq!(dead[0].spans[0].0, RUN_SPAN);

        // The hook heard the same two verdicts, with what an application acts on.
        let told = heard.about(id);
        assert_eq!(told.len(), 2, "{told:#?}");
        let Told::Failed { wire_name, queue: q, attempt: 1, max_attempts: 2, retry_at: Some(at), cause, .. } = &told[0] else {
            panic!("{told:#?}")
        };
        assert_eq!((wire_name.as_str(), q, cause.as_str()), ("flaky", &queue, "gateway timeout (attempt 1)"));
        assert_eq!(at.to_string(), runs[0].fields["backwave.retry_at"], "the span and the hook say one retry time");
        let Told::DeadLettered { attempt: 2, max_attempts: 2, cause, .. } = &told[1] else { panic!("{told:#?}") };
        assert_eq!(cause, "gateway timeout (attempt 2)");
    }
}

const LEASE: Duration = Duration::from_millis(300);

both_flavors! {
    /// Attempt 1's lease lapses while its handler still runs (another reaper ended it); the
    /// worker claims attempt 2. Attempt 1's handler hears `ctx.cancelled()`, finishes anyway,
    /// and its late result is discarded: one warning that the lease was lost, one that the
    /// result was discarded, and its span ends `fenced-out`; attempt 2 succeeds.
    fn a_lapsed_lease_cancels_its_handler_and_the_late_result_is_discarded_with_a_warning() {
        let mut cap = Captured::new();
        let t = test_store();
        let clock = Clock::manual(1_767_225_600_000);
        let store = Store::open(&t.db).unwrap().with_clock(clock.clone());
        let runs = Arc::new(AtomicU32::new(0));
        let heard_cancel = Arc::new(AtomicBool::new(false));
        let mut registry = Registry::new();
        let (r, heard) = (Arc::clone(&runs), Arc::clone(&heard_cancel));
        handle::<u32>(&mut registry, "slow", move |_, ctx| {
            if r.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first run waits for its cancellation, then finishes its work anyway.
                if ctx.cancellation().wait_timeout(Duration::from_secs(10)).is_some() {
                    heard.store(true, Ordering::SeqCst);
                }
            }
            Ok(())
        })
        .queue("q");
        let id = store.enqueue(&NewJob::new("slow", "q", b"1".to_vec())).unwrap();
        cap.watch(id);
        let mut engine = Engine::new(&t.db, registry);
        engine.clock(clock.clone());
        engine.add_worker_group(WorkerGroup {
            name: "g".into(),
            policy: DispatchPolicy::strict(["q"]),
            poll_interval: Duration::from_millis(10),
            retry_policy: RetryPolicy::new(3, Duration::ZERO).unwrap(),
            concurrency: 2,
            lease: LEASE,
            ..WorkerGroup::default()
        });
        let heard = Heard::default();
        heard.listen(&mut engine);
        let running = engine.start().unwrap();
        wait_for("run 1 to start", Duration::from_secs(10), || (runs.load(Ordering::SeqCst) >= 1).then_some(()));

        // Another process reaps attempt 1 (the clock just past its lease, as often as the
        // engine's heartbeat renews it).
        wait_for("attempt 1 to lapse", Duration::from_secs(10), || {
            let j = job(&store, id);
            if j.state != JobState::Running || j.attempt != 1 {
                return Some(());
            }
            clock.set(clock.now().max(j.lease_expires_at.unwrap() + 1));
            store.reap_expired(10).unwrap();
            None
        });
        let j = wait_terminal(&store, id);
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        wait_for("attempt 1's result to be discarded", Duration::from_secs(10), || {
            (running.stats()[0].fenced_out >= 1).then_some(())
        });
        wait_for("both verdicts", Duration::from_secs(5), || (cap.closed(RUN_SPAN).len() == 2).then_some(()));
        running.shutdown(Duration::from_secs(1));
        assert!(heard_cancel.load(Ordering::SeqCst), "attempt 1's handler never heard ctx.cancelled()");

        let mut spans = cap.closed(RUN_SPAN);
        spans.sort_by_key(|r| r.fields["backwave.attempt"].clone());
        let verdicts: Vec<&str> = spans.iter().map(|s| s.fields["backwave.verdict"].as_str()).collect();
        assert_eq!(verdicts, [verdict::FENCED_OUT, verdict::SUCCEEDED]);
        let events = cap.events();
        let lost = cap.said("lease lost while the handler runs");
        assert_eq!(lost.len(), 1, "{events:#?}");
        assert_eq!((lost[0].level, lost[0].get("backwave.attempt")), (Level::WARN, Some("1")));
        let discarded = cap.said("attempt result discarded");
        assert_eq!(discarded.len(), 1, "{events:#?}");
        assert_eq!(discarded[0].level, Level::WARN);
        assert_eq!(discarded[0].spans[0].0, RUN_SPAN);
        assert_eq!(discarded[0].get("backwave.attempt"), Some("1"));

        // The hook: the lease lost (before the result), the result discarded, attempt 2's success.
        let told = heard.about(id);
        let kinds: Vec<(&str, u32)> = told
            .iter()
            .map(|e| match e {
                Told::LeaseLost { attempt, .. } | Told::Discarded { attempt, .. } | Told::Succeeded { attempt, .. } => {
                    (e.kind(), *attempt)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds.len(), 3, "{told:#?}");
        assert_eq!(kinds[0], ("lease-lost", 1), "{told:#?}");
        assert!(kinds.contains(&("discarded", 1)) && kinds.contains(&("succeeded", 2)), "{told:#?}");
    }
}

both_backends! {
    /// A worker that died holding a lease (a claim nobody renews): the engine's reaper ends the
    /// attempt once the lapse is confirmed, with one warning naming the job and the lost worker.
    fn a_lapse_the_engine_reaps_is_one_warning_naming_the_worker_that_lost_it() {
        let mut cap = Captured::new();
        let t = test_store();
        let id = t.store.enqueue(&NewJob::new("ghostly", "q", b"1".to_vec())).unwrap();
        cap.watch(id);
        let claimed = t
            .store
            .claim(&ClaimRequest {
                worker_id: "ghost/1/g#dead",
                group: "g",
                queues: &["q".to_string()],
                limit: 1,
                lease: Duration::from_millis(100),
                policy: &RetryPolicy::new(3, Duration::from_secs(60)).unwrap(),
                handler_policies: &[],
            })
            .unwrap();
        assert_eq!(claimed.len(), 1);
        let heard = Heard::default();
        let running = engine(&t, Registry::new(), group("reaper", DispatchPolicy::strict(["other"]), 1), &heard);
        wait_for("the lapse to be reaped", Duration::from_secs(10), || {
            (job(&t.store, id).state == JobState::Scheduled).then_some(())
        });
        running.shutdown(Duration::from_secs(1));
        let told = heard.about(id);
        assert!(
            matches!(&told[..], [Told::LapseReaped { attempt: 1, owner, state: JobState::Scheduled, .. }] if owner == "ghost/1/g#dead"),
            "{told:#?}"
        );
        let reaped = cap.said("lease lapsed");
        assert_eq!(reaped.len(), 1, "{:#?}", cap.events());
        let r = &reaped[0];
        assert_eq!(r.level, Level::WARN);
        assert_eq!(
            (r.get("backwave.lease_owner"), r.get("backwave.attempt"), r.get("backwave.state")),
            (Some("ghost/1/g#dead"), Some("1"), Some("scheduled"))
        );
    }
}

both_backends! {
    /// Handlers registered on a queue no group of the engine claims from: one warning at start
    /// naming the queue and its wire names (their jobs would otherwise wait with nothing said),
    /// and none for a queue a group claims.
    fn a_queue_no_group_claims_is_one_warning_at_start_naming_its_wire_names() {
        let mut cap = Captured::new();
        let t = test_store();
        let (lost, served) = (format!("nobody-claims-{}", JobId::new()), format!("claimed-{}", JobId::new()));
        cap.watch(&lost);
        cap.watch(&served);
        let mut registry = Registry::new();
        registry.handle::<u32>("greet", |_, _| Ok(())).queue(&lost);
        registry.handle::<u32>("wave", |_, _| Ok(())).queue(&lost);
        registry.handle::<u32>("served", |_, _| Ok(())).queue(&served);
        let heard = Heard::default();
        let running = engine(&t, registry, group("g", DispatchPolicy::strict([served.as_str()]), 1), &heard);
        running.shutdown(Duration::from_secs(1));
        let warned = cap.said("no worker group of this engine claims from this queue");
        assert_eq!(warned.len(), 1, "{:#?}", cap.events());
        let w = &warned[0];
        assert_eq!(w.level, Level::WARN);
        assert_eq!(w.get("backwave.queue"), Some(lost.as_str()));
        assert_eq!(w.get("backwave.wire_names"), Some(r#"["greet", "wave"]"#));
    }
}

/// How long an outage lasts in the test: on SQLite more than two of the store's 5 s lock waits,
/// so that the group fails at least twice (one warning all the same).
const OUTAGE_SQLITE: Duration = Duration::from_millis(11_500);
const OUTAGE_POSTGRES: Duration = Duration::from_millis(1_500);

/// Make the store fail for the engine at `engine_db` for at least `hold`, and on until `seen`
/// (the engine said it is down): on SQLite another connection holds the write lock (every claim
/// and heartbeat waits out the busy timeout and fails); on PostgreSQL the engine's role may no
/// longer log in and its connections are cut. A fixed hold alone can end, on a loaded host,
/// before any of the engine's threads has failed for the second it takes to count an outage
/// (the likeliest reading of one CI failure of this test).
fn outage(t: &TestStore, role: Option<&str>, hold: Duration, seen: impl FnMut() -> Option<()>) {
    let held = || {
        std::thread::sleep(hold);
        wait_for("the engine to say the store is unavailable", Duration::from_secs(30), seen);
    };
    match role {
        None => {
            let conn = backwave::rusqlite::Connection::open(t.db.file()).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            held();
            conn.execute_batch("COMMIT").unwrap();
        }
        Some(role) => {
            let mut admin = backwave::postgres::Client::connect(t.db.arg(), backwave::postgres::NoTls).unwrap();
            admin
                .batch_execute(&format!(
                    "ALTER ROLE {role} NOLOGIN;
                     SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
                ))
                .unwrap();
            held();
            admin.batch_execute(&format!("ALTER ROLE {role} LOGIN")).unwrap();
        }
    }
}

/// A login role of the test's own for the engine's connections (PostgreSQL), dropped with it.
struct Role {
    name: String,
    url: String,
    admin: String,
}

impl Role {
    fn new(db: &TestDb) -> Role {
        let name = format!("bwtrace_{}_{}", std::process::id(), JobId::new().short());
        let admin = db.arg().to_string();
        let mut c = backwave::postgres::Client::connect(&admin, backwave::postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE ROLE {name} LOGIN SUPERUSER")).unwrap();
        assert!(admin.contains("user=postgres"), "{admin}");
        let url = admin.replacen("user=postgres", &format!("user={name}"), 1);
        Role { name, url, admin }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        if let Ok(mut c) = backwave::postgres::Client::connect(&self.admin, backwave::postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{0}';
                 DROP ROLE IF EXISTS {0}",
                self.name
            ));
        }
    }
}

both_backends! {
    /// The store fails for a while under a running engine: one warning when the outage starts,
    /// one event when it ends, however many claims, heartbeats and reconnects failed in between;
    /// the job enqueued meanwhile runs once the store is back.
    fn a_store_outage_is_one_warning_when_it_starts_and_one_event_when_it_ends() {
        let mut cap = Captured::new();
        let t = test_store();
        let role = (t.db.schema().is_some()).then(|| Role::new(&t.db));
        let target: backwave::StoreTarget = match &role {
            Some(r) => r.url.as_str().into(),
            None => t.db.target(),
        };
        cap.watch(target.to_string());
        let mut registry = Registry::new();
        registry.handle::<u32>("work", |_, _| Ok(())).queue("q");
        let mut engine = Engine::new(target.clone(), registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 1));
        let heard = Heard::default();
        heard.listen(&mut engine);
        let running = engine.start().unwrap();
        let hold = if role.is_some() { OUTAGE_POSTGRES } else { OUTAGE_SQLITE };
        outage(&t, role.as_ref().map(|r| r.name.as_str()), hold, || {
            (!cap.said("store unavailable").is_empty()).then_some(())
        });
        let id = t.store.enqueue(&NewJob::new("work", "q", b"1".to_vec())).unwrap();
        assert_eq!(wait_terminal(&t.store, id).state, JobState::Succeeded);
        wait_for("the store to be seen working again", Duration::from_secs(10), || {
            (!cap.said("store available again").is_empty()).then_some(())
        });
        let errors = running.stats()[0].errors;
        running.shutdown(Duration::from_secs(1));

        let events = cap.events();
        let down = cap.said("store unavailable");
        let up = cap.said("store available again");
        assert_eq!((down.len(), up.len()), (1, 1), "{events:#?}");
        assert!(errors >= 2, "the outage failed only {errors} store calls: not a test of once per outage");
        assert_eq!(down[0].level, Level::WARN);
        assert!(down[0].get("error").is_some_and(|e| !e.is_empty()), "{:?}", down[0]);
        assert_eq!(up[0].level, Level::INFO);
        let down_ms: u64 = up[0].get("down_ms").unwrap().parse().unwrap();
        assert!(down_ms >= 500, "down for {down_ms} ms");

        // The hook heard the same two changes, once each.
        let (down, up) = (heard.of("store-unavailable"), heard.of("store-available"));
        assert_eq!((down.len(), up.len()), (1, 1), "{:#?}", heard.all());
        let Told::StoreUnavailable { store, error, since, .. } = &down[0] else { unreachable!() };
        assert_eq!(store, &target.to_string());
        assert!(!error.is_empty() && *since <= std::time::SystemTime::now());
        let Told::StoreAvailable { outage, .. } = &up[0] else { unreachable!() };
        assert_eq!(outage.as_millis() as u64, down_ms, "the hook and the event say one outage");
        let order: Vec<&str> = heard.all().iter().map(Told::kind).filter(|k| k.starts_with("store-")).collect();
        assert_eq!(order, ["store-unavailable", "store-available"]);
    }
}

/// `bw jobs show ID` (and its JSON) against `db`: the printed table and the parsed document.
fn bw_show(db: &TestDb, id: &str) -> (String, serde_json::Value) {
    let run = |json: bool| {
        let mut args = vec!["--db", db.arg()];
        if json {
            args.extend(["--format", "json"]);
        }
        args.extend(["jobs", "show", id]);
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("bw")).args(&args).output().unwrap();
        assert!(out.status.success(), "bw {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    (run(false), serde_json::from_str(&run(true)).unwrap())
}

both_backends! {
    /// A job enqueued with a trace the application carries itself keeps it, and `bw jobs show`
    /// prints its trace id; a job enqueued outside any trace has none (JSON null, no line).
    fn a_job_keeps_the_traceparent_it_was_enqueued_with_and_bw_shows_its_trace_id() {
        let t = test_store();
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let traced = t.store.enqueue(&NewJob::new("w", "q", b"1".to_vec()).traceparent(tp)).unwrap();
        let plain = t.store.enqueue(&NewJob::new("w", "q", b"2".to_vec())).unwrap();
        assert_eq!(job(&t.store, traced).traceparent.as_deref(), Some(tp));
        assert_eq!(job(&t.store, traced).trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(job(&t.store, plain).traceparent, None);
        let bad = t.store.enqueue(&NewJob::new("w", "q", b"3".to_vec()).traceparent("00-xyz"));
        assert!(matches!(bad, Err(backwave::Error::InvalidInput(ref m)) if m.contains("not a W3C traceparent")), "{bad:?}");

        let (table, json) = bw_show(&t.db, &traced.to_string());
        assert!(table.lines().any(|l| l.split_whitespace().eq(["Trace", "4bf92f3577b34da6a3ce929d0e0e4736"])), "{table}");
        assert_eq!(json["job"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        let (table, json) = bw_show(&t.db, &plain.to_string());
        assert!(!table.contains("Trace"), "{table}");
        assert!(json["job"]["trace_id"].is_null(), "{json}");
    }
}

/// One span `examples/traced.rs` printed: `(name, trace id, span id, parent id)` and its
/// attributes.
type Exported = ((String, String, String, String), BTreeMap<String, String>);

/// The spans `examples/traced.rs` printed, in its order.
fn exported(stdout: &str) -> Vec<Exported> {
    let mut spans: Vec<Exported> = Vec::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("span ") {
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap().to_string();
            let mut field = |k: &str| words.next().and_then(|w| w.strip_prefix(k)).unwrap().to_string();
            let head = (name, field("trace="), field("id="), field("parent="));
            spans.push((head, BTreeMap::new()));
        } else if let Some((k, v)) = line.strip_prefix("  ").and_then(|l| l.split_once(" = ")) {
            spans.last_mut().expect("an attribute after its span").1.insert(k.to_string(), v.to_string());
        }
    }
    spans
}

both_backends! {
    /// `cargo run --example traced -- DB`: the request span, the enqueue's producer span, the
    /// attempt's consumer span and the handler's own span are one trace (32 hex digits), each the
    /// child of the one before, for a job enqueued from sync code and one through `AsyncStore`
    /// (its call run on tokio's blocking pool); the attempt span says `messaging.system =
    /// backwave`, and `bw jobs show` prints the same trace id.
    fn the_traced_example_exports_one_trace_from_the_request_to_the_handler() {
        let t = test_store();
        let out = std::process::Command::new(crate::programs::example("traced")).arg(t.db.arg()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "traced failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let spans = exported(&stdout);
        let named = |name: &str, n: usize| {
            let found: Vec<Exported> = spans.iter().filter(|((s, ..), _)| s == name).cloned().collect();
            assert_eq!(found.len(), n, "{n} {name} spans in {stdout}");
            found
        };
        let ((_, trace, request_id, _), _) = named("request", 1).remove(0);
        assert!(trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()) && trace != "0".repeat(32), "{trace}");
        // Two jobs, one enqueued from sync code and one through AsyncStore: each its own
        // enqueue, attempt and handler span, all in the request's trace.
        let (enqueues, runs, handlers) = (named(ENQUEUE_SPAN, 2), named(RUN_SPAN, 2), named("render-greeting", 2));
        for ((_, enqueue_trace, enqueue_id, enqueue_parent), enqueue) in &enqueues {
            assert_eq!((enqueue_trace, enqueue_parent), (&trace, &request_id), "{stdout}");
            assert_eq!(enqueue["messaging.system"], "backwave");
            let id = &enqueue["messaging.message.id"];
            let ((_, run_trace, run_id, run_parent), run) =
                runs.iter().find(|(_, r)| &r["messaging.message.id"] == id).expect("the job's attempt span").clone();
            assert_eq!((&run_trace, &run_parent), (&trace, enqueue_id), "{stdout}");
            assert_eq!(run["messaging.system"], "backwave");
            assert_eq!(run["messaging.operation.name"], "process");
            assert_eq!(run["messaging.destination.name"], "traced");
            assert_eq!(run["backwave.verdict"], verdict::SUCCEEDED);
            assert!(
                handlers.iter().any(|((_, t, _, parent), _)| t == &trace && parent == &run_id),
                "no handler span inside {run_id}: {stdout}"
            );
            assert!(stdout.contains(&format!("job {id} Succeeded trace={trace}")), "{stdout}");
            let (table, json) = bw_show(&t.db, id);
            assert!(table.lines().any(|l| l.split_whitespace().eq(["Trace", trace.as_str()])), "{table}");
            assert_eq!(json["job"]["trace_id"], trace.as_str());
        }
    }
}

both_backends! {
    /// A paused queue holds its due job back while the group has room: one event when that
    /// starts (once the job has waited a second), one when it ends, and the job then runs.
    fn due_work_held_back_by_a_pause_is_said_once_when_it_starts_and_once_when_it_ends() {
        let mut cap = Captured::new();
        let t = test_store();
        let group_name = format!("g-{}", JobId::new().short());
        cap.watch(&group_name);
        let id = t.store.enqueue(&NewJob::new("work", "q", b"1".to_vec())).unwrap();
        t.store.pause(ACTOR, backwave::store::PauseKind::Queue, "q", None, false).unwrap();
        let mut registry = Registry::new();
        registry.handle::<u32>("work", |_, _| Ok(())).queue("q");
        let heard = Heard::default();
        let running = engine(&t, registry, group(&group_name, DispatchPolicy::strict(["q"]), 1), &heard);
        wait_for("the held-back event", Duration::from_secs(10), || {
            (!cap.said("due work held back").is_empty()).then_some(())
        });
        // Many polls (20 ms each) while it stays paused: still one event.
        std::thread::sleep(Duration::from_millis(300));
        t.store.resume(ACTOR, backwave::store::PauseKind::Queue, "q").unwrap();
        assert_eq!(wait_terminal(&t.store, id).state, JobState::Succeeded);
        wait_for("the released event", Duration::from_secs(10), || {
            (!cap.said("due work no longer held back").is_empty()).then_some(())
        });
        running.shutdown(Duration::from_secs(1));
        let (held, released) = (cap.said("due work held back"), cap.said("due work no longer held back"));
        assert_eq!((held.len(), released.len()), (1, 1), "{:#?}", cap.events());
        assert_eq!(held[0].level, Level::INFO);
        let told: Vec<Told> = heard.all().into_iter().filter(|e| e.kind().starts_with("held-back")).collect();
        assert!(
            matches!(&told[..], [Told::HeldBack { group: g, queues, .. }, Told::HeldBackEnded { group: h, .. }]
                if *g == group_name && *h == group_name && queues == &["q"]),
            "{told:#?}"
        );
    }
}

both_flavors! {
    /// Two jobs no handler can take: one whose wire name has no handler here, one whose payload
    /// does not decode. Each ends Quarantined with one warning in its attempt span (verdict
    /// `quarantined`, and why) and one `Quarantined` event for the hook, saying why.
    fn a_job_without_a_handler_and_one_that_does_not_decode_are_each_one_quarantine() {
        let mut cap = Captured::new();
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "typed", |_, _| Ok(())).queue("q");
        let nobody = t.store.enqueue(&NewJob::new("nobody", "q", b"1".to_vec())).unwrap();
        let garbled = t.store.enqueue(&NewJob::new("typed", "q", b"\"not a number\"".to_vec())).unwrap();
        cap.watch(nobody);
        cap.watch(garbled);
        let heard = Heard::default();
        let running = engine(&t, registry, group("g", DispatchPolicy::strict(["q"]), 3), &heard);
        for id in [nobody, garbled] {
            assert_eq!(wait_terminal(&t.store, id).state, JobState::Quarantined);
        }
        wait_for("both verdicts", Duration::from_secs(5), || (cap.closed(RUN_SPAN).len() == 2).then_some(()));
        running.shutdown(Duration::from_secs(1));

        for (id, why) in [(nobody, QuarantineReason::NoHandler), (garbled, QuarantineReason::UndecodablePayload)] {
            let said: Vec<Seen> = cap
                .said("job quarantined")
                .into_iter()
                .filter(|e| e.get("messaging.message.id") == Some(&id.to_string()))
                .collect();
            assert_eq!(said.len(), 1, "{:#?}", cap.events());
            assert_eq!((said[0].level, said[0].get("reason")), (Level::WARN, Some(why.as_str())));
            assert_eq!(said[0].spans[0].0, RUN_SPAN);
            let span = cap.closed(RUN_SPAN).into_iter().find(|s| s.fields["messaging.message.id"] == id.to_string()).unwrap();
            assert_eq!(span.fields["backwave.verdict"], verdict::QUARANTINED);
            assert_eq!(span.fields["backwave.quarantine_reason"], why.as_str());

            let told = heard.about(id);
            let [Told::Quarantined { why: heard_why, cause, queue, .. }] = &told[..] else { panic!("{told:#?}") };
            assert_eq!((*heard_why, queue.as_str()), (why, "q"));
            assert_eq!(Some(cause.as_str()), said[0].get("cause"));
        }
    }
}

both_flavors! {
    /// An operator cancels a running job whose handler stops when asked: its span ends
    /// `cancelled` with one event, and the hook hears one `Cancelled`.
    fn a_cancelled_job_is_one_cancelled_verdict_on_its_span_and_for_the_hook() {
        let mut cap = Captured::new();
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "patient", |_, ctx| {
            ctx.cancellation().wait_timeout(Duration::from_secs(10));
            ctx.check_cancelled()?;
            Ok(())
        })
        .queue("q");
        let id = t.store.enqueue(&NewJob::new("patient", "q", b"1".to_vec())).unwrap();
        cap.watch(id);
        let heard = Heard::default();
        let running = engine(&t, registry, group("g", DispatchPolicy::strict(["q"]), 3), &heard);
        wait_for("the job to run", Duration::from_secs(10), || (job(&t.store, id).state == JobState::Running).then_some(()));
        assert_eq!(t.store.cancel(ACTOR, &[id]).unwrap(), [CancelResult::CancelRequested]);
        assert_eq!(wait_terminal(&t.store, id).state, JobState::Cancelled);
        wait_for("the verdict", Duration::from_secs(5), || (cap.closed(RUN_SPAN).len() == 1).then_some(()));
        running.shutdown(Duration::from_secs(1));

        assert_eq!(cap.closed(RUN_SPAN)[0].fields["backwave.verdict"], verdict::CANCELLED);
        let said = cap.said("job cancelled by an operator");
        assert_eq!(said.len(), 1, "{:#?}", cap.events());
        assert_eq!((said[0].level, said[0].spans[0].0.as_str()), (Level::INFO, RUN_SPAN));
        let told = heard.about(id);
        assert!(matches!(&told[..], [Told::Cancelled { attempt: 1, wire_name, .. }] if wire_name == "patient"), "{told:#?}");
    }
}

both_backends! {
    /// A hook that panics on every event: each panic is one `tracing` error naming the event,
    /// the hook added after it still hears everything, and the engine goes on running jobs.
    fn a_panicking_hook_is_logged_and_neither_the_engine_nor_the_next_hook_misses_anything() {
        let mut cap = Captured::new();
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<u32>("work", |_, _| Ok(())).queue("q");
        let ids: Vec<JobId> = (0..3u32).map(|i| registry.enqueue(&t.store, "work", &i).unwrap()).collect();
        for id in &ids {
            cap.watch(id);
        }
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 1));
        engine.on_event(|e| panic!("this hook cannot take {}", e.kind()));
        let heard = Heard::default();
        heard.listen(&mut engine);
        let running = engine.start().unwrap();
        for id in &ids {
            assert_eq!(wait_terminal(&t.store, *id).state, JobState::Succeeded);
        }
        wait_for("every success heard", Duration::from_secs(5), || (heard.of("succeeded").len() == 3).then_some(()));
        assert_eq!(running.stats()[0].errors, 0, "{:?}", running.stats());
        running.shutdown(Duration::from_secs(1));
        let panics = cap.said("an event hook panicked");
        assert_eq!(panics.len(), 3, "{:#?}", cap.events());
        for p in &panics {
            assert_eq!((p.level, p.get("backwave.event"), p.get("backwave.hook")), (Level::ERROR, Some("succeeded"), Some("0")));
            assert_eq!(p.get("panic"), Some("this hook cannot take succeeded"));
        }
    }
}

both_backends! {
    /// A unique every-second schedule whose job nobody runs: the first tick fires a job, the next
    /// is skipped because that job still holds the key. One event per tick each way, for the
    /// subscriber and for the hook, naming the same job.
    fn a_schedule_tick_fired_and_one_skipped_are_each_one_event() {
        let mut cap = Captured::new();
        let t = test_store();
        let name = format!("every-second-{}", JobId::new().short());
        cap.watch(&name);
        // Half a second past a second: a tick is never a matter of a millisecond.
        let clock = Clock::manual(1_767_225_600_500);
        let mut engine = Engine::new(&t.db, Registry::new());
        engine.clock(clock.clone());
        engine.schedule_poll(Duration::from_millis(20));
        engine.add_schedule(backwave::Schedule::new(&name, "* * * * * *", "tick", "unserved", "{}").unique());
        engine.add_worker_group(group("g", DispatchPolicy::strict(["other"]), 1));
        let heard = Heard::default();
        heard.listen(&mut engine);
        let running = engine.start().unwrap();
        clock.set(clock.now() + 1_000);
        wait_for("the first tick", Duration::from_secs(10), || (!heard.of("schedule-fired").is_empty()).then_some(()));
        clock.set(clock.now() + 1_000);
        wait_for("the second tick", Duration::from_secs(10), || (!heard.of("schedule-skipped").is_empty()).then_some(()));
        running.shutdown(Duration::from_secs(1));

        let told: Vec<Told> = heard.all().into_iter().filter(|e| e.kind().starts_with("schedule-")).collect();
        let [Told::ScheduleFired { schedule, tick: first, job, .. }, Told::ScheduleSkipped { tick: second, held_by, .. }] = &told[..]
        else {
            panic!("{told:#?}")
        };
        assert_eq!((schedule, held_by, second - first), (&name, job, 1_000));
        assert_eq!(self::job(&t.store, *job).state, JobState::Scheduled);
        let (fired, skipped) = (cap.said("schedule tick fired"), cap.said("schedule tick skipped"));
        assert_eq!((fired.len(), skipped.len()), (1, 1), "{:#?}", cap.events());
        assert_eq!(fired[0].get("messaging.message.id"), Some(job.to_string().as_str()));
        assert_eq!(skipped[0].get("backwave.held_by"), Some(job.to_string().as_str()));
    }
}
