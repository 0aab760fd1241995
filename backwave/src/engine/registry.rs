//! The registry of handlers: wire name -> typed handler, with the queue and labels its jobs are
//! enqueued with. It also builds typed jobs to enqueue. Decoding happens here, so a payload that
//! does not decode never reaches a handler.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::handler::{HandlerResult, JobContext};
use crate::error::{Error, Result};
use crate::model::{Enqueued, JobId, Millis, NewJob, UniqueRule};
use crate::retry::RetryPolicy;
use crate::store::Store;

/// The queue a wire name's jobs go to when its registration names none.
pub const DEFAULT_QUEUE: &str = "default";

/// A decoded job, ready to run: the payload is already inside.
pub(crate) enum Ready {
    /// A plain handler, run on a handler thread.
    Sync(Box<dyn FnOnce(&JobContext) -> HandlerResult + Send>),
    /// An async handler: called with the context it then owns, its future spawned on the
    /// engine's runtime.
    #[cfg(feature = "tokio")]
    Async(Box<dyn FnOnce(JobContext) -> HandlerFuture + Send>),
}

/// An async handler's future, boxed so that every wire name's futures share one type.
#[cfg(feature = "tokio")]
pub(crate) type HandlerFuture = std::pin::Pin<Box<dyn std::future::Future<Output = HandlerResult> + Send>>;

/// A type-erased handler: decode the stored bytes into the handler's type, then run.
pub(crate) trait Route: Send + Sync {
    fn decode(&self, payload: &[u8]) -> std::result::Result<Ready, String>;
    fn type_name(&self) -> &'static str;
    fn is_async(&self) -> bool {
        false
    }
}

struct Typed<T, F> {
    handler: Arc<F>,
    _payload: std::marker::PhantomData<fn() -> T>,
}

impl<T, F> Route for Typed<T, F>
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T, &JobContext) -> HandlerResult + Send + Sync + 'static,
{
    fn decode(&self, payload: &[u8]) -> std::result::Result<Ready, String> {
        let value: T = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let handler = Arc::clone(&self.handler);
        Ok(Ready::Sync(Box::new(move |ctx: &JobContext| handler(value, ctx))))
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<T>()
    }
}

/// An async handler's route: the same decoding, a future instead of a call.
#[cfg(feature = "tokio")]
struct TypedAsync<T, F> {
    handler: Arc<F>,
    _payload: std::marker::PhantomData<fn() -> T>,
}

#[cfg(feature = "tokio")]
impl<T, F, Fut> Route for TypedAsync<T, F>
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T, JobContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = HandlerResult> + Send + 'static,
{
    fn decode(&self, payload: &[u8]) -> std::result::Result<Ready, String> {
        let value: T = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let handler = Arc::clone(&self.handler);
        Ok(Ready::Async(Box::new(move |ctx: JobContext| -> HandlerFuture { Box::pin(handler(value, ctx)) })))
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<T>()
    }

    fn is_async(&self) -> bool {
        true
    }
}

pub(crate) struct Entry {
    pub(crate) route: Box<dyn Route>,
    pub(crate) queue: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// The handler's own retry policy, in place of the claiming group's.
    pub(crate) retry: Option<RetryPolicy>,
    /// The priority its jobs are enqueued with through the registry.
    pub(crate) priority: u8,
}

/// Handlers by wire name. Build it once, then hand it to an [`Engine`](super::Engine).
///
/// A wire name is the stable name a job is stored under (`send-invoice`), independent of Rust
/// type names, so jobs survive refactors and other processes (or programs) can enqueue them. Each
/// handler decodes its payload from JSON into its own type `T`; a job whose payload does not
/// decode is Quarantined without running, as is a job whose wire name no process handles. The
/// registry also enqueues: [`Registry::job`] and [`Registry::enqueue`] check a payload against
/// the handler's type before anything is stored, and put the job on the queue (with the labels)
/// the registration names.
///
/// ```
/// use std::time::Duration;
/// use backwave::engine::{HandlerError, Registry};
/// use backwave::{Backoff, RetryPolicy, Store};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct ChargeCard { card_token: String, amount: u64 }
///
/// let mut registry = Registry::new();
/// registry
///     .handle::<ChargeCard>("charge-card", |job, ctx| {
///         if job.amount == 0 {
///             return Err(HandlerError::msg(format!("nothing to charge (attempt {})", ctx.attempt())));
///         }
///         Ok(()) // charge job.amount to job.card_token, keyed by ctx.job_id()
///     })
///     .queue("payments")
///     .retry(RetryPolicy::new(2, Backoff::fixed(Duration::from_secs(30)))?);
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::create(dir.path().join("jobs.db"))?;
/// let id = registry
///     .job("charge-card", &ChargeCard { card_token: "tok_1".into(), amount: 4200 })?
///     .label("tenant", "acme")
///     .due_in(Duration::from_secs(5))
///     .enqueue(&store)?;
/// assert_eq!(store.job(id)?.unwrap().queue, "payments");
///
/// // A payload the handler could not decode is refused before anything is stored.
/// assert!(registry.enqueue(&store, "charge-card", "not a ChargeCard").is_err());
/// // So is a wire name nobody registered here (use `Enqueue::new` for another process's).
/// assert!(registry.enqueue(&store, "charge-crad", &42).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct Registry {
    entries: HashMap<String, Entry>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.wire_names()).finish()
    }
}

impl Registry {
    /// An empty registry. Register handlers with [`Registry::handle`] (and, with the `tokio`
    /// feature, `Registry::handle_async`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `handler` for `wire_name`, its payload decoded from JSON into `T`. Chain
    /// `.queue("low")` and `.label(k, v)` to say where its jobs are enqueued (default queue
    /// [`DEFAULT_QUEUE`]). Registering a wire name again replaces the earlier handler.
    ///
    /// ```
    /// # use backwave::engine::{Registry, HandlerError};
    /// let mut registry = Registry::new();
    /// registry
    ///     .handle::<String>("flaky", |label, ctx| {
    ///         Err(HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt())))
    ///     })
    ///     .queue("low");
    /// ```
    pub fn handle<T>(
        &mut self,
        wire_name: &str,
        handler: impl Fn(T, &JobContext) -> HandlerResult + Send + Sync + 'static,
    ) -> Registration<'_>
    where
        T: DeserializeOwned + Send + 'static,
    {
        let route = Typed { handler: Arc::new(handler), _payload: std::marker::PhantomData::<fn() -> T> };
        self.register(wire_name, Box::new(route))
    }

    /// Register an async `handler` for `wire_name` (feature `tokio`): called with the decoded
    /// payload and a [`JobContext`] it owns, it returns a `Send` future that the engine spawns
    /// on its runtime ([`Engine::runtime`](super::Engine::runtime), or one the engine owns).
    /// Everything else is as for [`Registry::handle`]: the payload is decoded before the handler
    /// runs (one that does not decode is quarantined), `.queue()` and `.label()` chain, and
    /// registering a wire name again (sync or async) replaces the earlier handler.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use backwave::engine::{Registry, HandlerError};
    /// let mut registry = Registry::new();
    /// registry
    ///     .handle_async::<String, _, _>("fetch", |url, ctx| async move {
    ///         if ctx.attempt() < 2 {
    ///             return Err(HandlerError::msg(format!("{url}: timed out")));
    ///         }
    ///         Ok(())
    ///     })
    ///     .queue("io");
    /// ```
    ///
    /// The future runs on a multi-thread runtime, so it must be `Send`; one that holds a
    /// non-`Send` value across an await does not compile:
    ///
    /// ```compile_fail
    /// # use backwave::engine::Registry;
    /// let mut registry = Registry::new();
    /// registry.handle_async::<u32, _, _>("counts", |n, _ctx| async move {
    ///     let shared = std::rc::Rc::new(n);
    ///     std::future::ready(()).await;
    ///     let _ = shared;
    ///     Ok(())
    /// });
    /// ```
    #[cfg(feature = "tokio")]
    pub fn handle_async<T, F, Fut>(&mut self, wire_name: &str, handler: F) -> Registration<'_>
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T, JobContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = HandlerResult> + Send + 'static,
    {
        let route = TypedAsync { handler: Arc::new(handler), _payload: std::marker::PhantomData::<fn() -> T> };
        self.register(wire_name, Box::new(route))
    }

    fn register(&mut self, wire_name: &str, route: Box<dyn Route>) -> Registration<'_> {
        let entry = Entry {
            route,
            queue: DEFAULT_QUEUE.into(),
            labels: BTreeMap::new(),
            retry: None,
            priority: crate::model::PRIORITY_FIRST,
        };
        self.entries.insert(wire_name.to_string(), entry);
        Registration { entry: self.entries.get_mut(wire_name).expect("just inserted") }
    }

    /// Whether any registered handler is async: the engine then runs every group's jobs on a
    /// runtime.
    pub fn has_async(&self) -> bool {
        self.entries.values().any(|e| e.route.is_async())
    }

    /// The wire names this registry handles, sorted.
    pub fn wire_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.entries.keys().cloned().collect();
        names.sort();
        names
    }

    /// Whether a handler is registered for `wire_name`.
    pub fn contains(&self, wire_name: &str) -> bool {
        self.entries.contains_key(wire_name)
    }

    /// The queue a registered wire name's jobs are enqueued to.
    pub fn queue_of(&self, wire_name: &str) -> Option<&str> {
        self.entries.get(wire_name).map(|e| e.queue.as_str())
    }

    /// The priority a registered wire name's jobs are enqueued with (see
    /// [`Registration::priority`]).
    pub fn priority_of(&self, wire_name: &str) -> Option<u8> {
        self.entries.get(wire_name).map(|e| e.priority)
    }

    /// A job of a registered wire name, with its registered queue and labels. The payload is
    /// checked now against the handler's type, so a job this registry's handler could not
    /// decode is refused here rather than quarantined later.
    ///
    /// Errors: [`Error::InvalidInput`] for a wire name not registered here (listing those that
    /// are) or a payload that does not decode as the handler's type; [`Error::Encode`] for a
    /// payload `serde_json` cannot encode.
    pub fn job<P: Serialize + ?Sized>(&self, wire_name: &str, payload: &P) -> Result<Enqueue> {
        let entry = self.entries.get(wire_name).ok_or_else(|| {
            Error::InvalidInput(format!(
                "no handler is registered for wire name '{wire_name}' (registered: {})",
                self.wire_names().join(", ")
            ))
        })?;
        let bytes = serde_json::to_vec(payload).map_err(Error::Encode)?;
        if let Err(e) = entry.route.decode(&bytes) {
            return Err(Error::InvalidInput(format!(
                "the payload for '{wire_name}' does not decode as {}: {e}",
                entry.route.type_name()
            )));
        }
        let mut job = NewJob::new(wire_name, entry.queue.clone(), bytes).priority(entry.priority);
        job.labels = entry.labels.clone();
        Ok(Enqueue { job, due_in: None })
    }

    /// Enqueue a job of a registered wire name now, on its registered queue and with its
    /// registered labels; returns its id. [`Registry::job`]'s errors, then the store's
    /// ([`Error::PayloadTooLarge`], [`Error::ReadOnly`], [`Error::Busy`], …).
    pub fn enqueue<P: Serialize + ?Sized>(&self, store: &Store, wire_name: &str, payload: &P) -> Result<JobId> {
        self.job(wire_name, payload)?.enqueue(store)
    }

    /// The wire names whose handlers have their own retry policy, with it.
    pub(crate) fn handler_policies(&self) -> Vec<(String, RetryPolicy)> {
        let mut own: Vec<_> =
            self.entries.iter().filter_map(|(name, e)| Some((name.clone(), e.retry.clone()?))).collect();
        own.sort_by(|a, b| a.0.cmp(&b.0));
        own
    }

    /// [`Registry::enqueue`] from async code, on an [`AsyncStore`](crate::AsyncStore).
    #[cfg(feature = "tokio")]
    pub async fn enqueue_async<P: Serialize + ?Sized>(
        &self,
        store: &crate::AsyncStore,
        wire_name: &str,
        payload: &P,
    ) -> Result<JobId> {
        self.job(wire_name, payload)?.enqueue_async(store).await
    }

    pub(crate) fn entry(&self, wire_name: &str) -> Option<&Entry> {
        self.entries.get(wire_name)
    }
}

/// Typed enqueue for the application's request handlers: a cheap, cloneable handle on the
/// engine's registry ([`Engine::enqueuer`](super::Engine::enqueuer),
/// [`EngineHandle::enqueuer`](super::EngineHandle::enqueuer)) that each handler can hold for the
/// service's lifetime, sync or async, on either backend. Every job gets its wire name's
/// registered queue and labels and is checked against the handler's payload type, as
/// [`Registry::job`] does; the handler's own retry policy applies when a worker claims it.
///
/// ```no_run
/// # use backwave::engine::{Engine, Registry};
/// # fn main() -> backwave::Result<()> {
/// let mut registry = Registry::new();
/// registry.handle::<u64>("ship-order", |_order, _ctx| Ok(())).queue("orders");
/// let engine = Engine::new("backwave.db", registry);
/// let jobs = engine.enqueuer(); // clone it into every request handler
/// let store = backwave::Store::open("backwave.db")?;
/// jobs.enqueue(&store, "ship-order", &42u64)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Enqueuer {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Enqueuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Enqueuer").field(&self.registry).finish()
    }
}

impl Enqueuer {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        Enqueuer { registry }
    }

    /// [`Registry::job`]: a typed job on its registered queue, to adjust (labels, due time,
    /// unique rule) and then enqueue on a store, an `AsyncStore` (feature `tokio`), or inside
    /// the application's own transaction ([`Enqueue::enqueue_in_sqlite`] and the PostgreSQL
    /// forms).
    pub fn job<P: Serialize + ?Sized>(&self, wire_name: &str, payload: &P) -> Result<Enqueue> {
        self.registry.job(wire_name, payload)
    }

    /// [`Registry::enqueue`]: enqueue a typed job now, on its registered queue.
    pub fn enqueue<P: Serialize + ?Sized>(&self, store: &Store, wire_name: &str, payload: &P) -> Result<JobId> {
        self.registry.enqueue(store, wire_name, payload)
    }

    /// [`Registry::enqueue_async`]: the same from async code.
    #[cfg(feature = "tokio")]
    pub async fn enqueue_async<P: Serialize + ?Sized>(
        &self,
        store: &crate::AsyncStore,
        wire_name: &str,
        payload: &P,
    ) -> Result<JobId> {
        self.registry.enqueue_async(store, wire_name, payload).await
    }

    /// The registry it enqueues by.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Returned by [`Registry::handle`]: say where the wire name's jobs are enqueued.
pub struct Registration<'r> {
    entry: &'r mut Entry,
}

impl Registration<'_> {
    /// The queue this wire name's jobs are enqueued to through the registry (default
    /// [`DEFAULT_QUEUE`]). A worker group claims them only if its dispatch policy names it.
    pub fn queue(self, queue: &str) -> Self {
        self.entry.queue = queue.to_string();
        self
    }

    /// A label every job of this wire name enqueued through the registry carries.
    pub fn label(self, key: &str, value: &str) -> Self {
        self.entry.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// The priority this wire name's jobs are enqueued with through the registry, 0 (claimed
    /// first within a queue, the default) to 9 (claimed last); [`Enqueue::priority`] overrides
    /// it for one job. See [`NewJob::priority`] for the order and its starvation. A value above
    /// 9 is refused when a job is enqueued, as every out-of-range priority is.
    pub fn priority(self, priority: u8) -> Self {
        self.entry.priority = priority;
        self
    }

    /// This handler's own retry policy: its jobs get these attempts and this backoff whichever
    /// worker group claims them (written into each job at claim, as a group's policy is), where
    /// other handlers' jobs get the claiming group's. E.g. a payment capture that may try
    /// twice beside report jobs that may try ten times.
    pub fn retry(self, policy: RetryPolicy) -> Self {
        self.entry.retry = Some(policy);
        self
    }
}

/// A typed job about to be enqueued: adjust its queue, labels or due time, then
/// [`enqueue`](Enqueue::enqueue) it.
#[derive(Clone, Debug)]
pub struct Enqueue {
    job: NewJob,
    due_in: Option<Duration>,
}

impl Enqueue {
    /// A job for any wire name (also one this process does not handle), payload as JSON. Nothing
    /// checks the payload against a handler: the handling process quarantines one it cannot
    /// decode. Fails with [`Error::Encode`] when `serde_json` cannot encode `payload`.
    pub fn new<P: Serialize + ?Sized>(wire_name: &str, queue: &str, payload: &P) -> Result<Self> {
        let bytes = serde_json::to_vec(payload).map_err(Error::Encode)?;
        Ok(Enqueue { job: NewJob::new(wire_name, queue, bytes), due_in: None })
    }

    /// Put this job on another queue than the registered one.
    pub fn queue(mut self, queue: &str) -> Self {
        self.job.queue = queue.to_string();
        self
    }

    /// Add a label (a later value for the same key replaces an earlier one).
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.job.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// First claimable at this instant (milliseconds since the Unix epoch).
    pub fn due_at(mut self, at: Millis) -> Self {
        self.job.due_at = Some(at);
        self.due_in = None;
        self
    }

    /// This job's priority within its queue, in place of its wire name's registered one
    /// ([`Registration::priority`]): 0 (claimed first) to 9 (claimed last), see
    /// [`NewJob::priority`].
    pub fn priority(mut self, priority: u8) -> Self {
        self.job.priority = priority;
        self
    }

    /// First claimable this long after it is enqueued (by the store's clock).
    pub fn due_in(mut self, delay: Duration) -> Self {
        self.due_in = Some(delay);
        self.job.due_at = None;
        self
    }

    /// The row to insert, with a relative due time resolved against `now`.
    pub fn into_new_job(self, now: Millis) -> NewJob {
        let mut job = self.job;
        if let Some(d) = self.due_in {
            // Saturating: `Duration::MAX` means "never", not a wrapped time in the past.
            job.due_at = Some(now.saturating_add(crate::retry::duration_ms(d) as Millis));
        }
        job
    }

    /// At most one such job at a time under `rule` (see [`UniqueRule`]).
    pub fn unique(mut self, rule: UniqueRule) -> Self {
        self.job.unique = Some(rule);
        self
    }

    /// Store the job; returns its id (for a [`unique`](Enqueue::unique) job's duplicate, the id
    /// of the job holding the key: [`Enqueue::insert`] tells the two apart). Fails as
    /// [`Store::insert`] does.
    pub fn enqueue(self, store: &Store) -> Result<JobId> {
        Ok(self.insert(store)?.id())
    }

    /// Enqueue, telling a new job from a duplicate of one that holds the same unique key.
    pub fn insert(self, store: &Store) -> Result<Enqueued> {
        let now = store.now();
        store.insert(&self.into_new_job(now))
    }

    /// [`Enqueue::enqueue`] from async code, on an [`AsyncStore`](crate::AsyncStore).
    #[cfg(feature = "tokio")]
    pub async fn enqueue_async(self, store: &crate::AsyncStore) -> Result<JobId> {
        Ok(self.insert_async(store).await?.id())
    }

    /// [`Enqueue::insert`] from async code, on an [`AsyncStore`](crate::AsyncStore).
    #[cfg(feature = "tokio")]
    pub async fn insert_async(self, store: &crate::AsyncStore) -> Result<Enqueued> {
        store.call(move |s| self.insert(s)).await
    }

    /// Enqueue inside the application's own SQLite transaction on the store's file
    /// ([`enqueue_in_sqlite`](crate::enqueue_in_sqlite)): the job exists if and only if `tx`
    /// commits. A relative due time counts from the system clock's now.
    pub fn enqueue_in_sqlite(self, tx: &rusqlite::Transaction<'_>) -> Result<Enqueued> {
        crate::store::enqueue_in_sqlite(tx, &self.into_new_job(crate::store::system_now()))
    }

    /// Enqueue inside the application's own PostgreSQL transaction
    /// ([`enqueue_in_postgres`](crate::enqueue_in_postgres)). A relative due time counts from
    /// this host's clock.
    #[cfg(feature = "postgres")]
    pub fn enqueue_in_postgres(self, tx: &mut postgres::Transaction<'_>) -> Result<Enqueued> {
        crate::store::enqueue_in_postgres(tx, &self.into_new_job(crate::store::system_now()))
    }

    /// Enqueue inside the application's own `tokio-postgres` transaction
    /// ([`enqueue_in_tokio_postgres`](crate::enqueue_in_tokio_postgres)).
    #[cfg(feature = "postgres")]
    pub async fn enqueue_in_tokio_postgres(self, tx: &impl tokio_postgres::GenericClient) -> Result<Enqueued> {
        crate::store::enqueue_in_tokio_postgres(tx, &self.into_new_job(crate::store::system_now())).await
    }
}
