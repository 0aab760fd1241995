//! The job store: one database that every worker, every application process and every operator
//! shares, an SQLite file on one host or (feature `postgres`) a PostgreSQL database across
//! several. [`Store`] is its face: enqueueing, reading jobs, the transition log and the store's
//! health, and the operator's actions; the types here are what those calls take and return.
//! The schema is a public contract ([`SCHEMA_SQL`]): another program may enqueue by inserting
//! rows as it describes.

// Every operation is listed once in `api.rs` and forwarded to the backend the target named:
// `sqlite/` or `postgres/`, each a folder of the same files, one per group of operations
// (`jobs.rs`, `operator.rs`, `pause.rs`, …, `health/`), holding that dialect's statements. Its
// `mod.rs` owns the connection and the transaction the others run in; its `driver_error.rs` maps
// the driver's errors onto `Error`, and `raw.rs` the hidden hooks through which tests and benches
// run SQL text and get plain values back. Up here stay what both share: the public types those
// operations take and return (in the file of the same name), the job filter, the health report
// and its verdicts (`health/`), and `ops/`, the policy written once above the dialects'
// primitives. The compiler keeps the two in lockstep: an operation one backend lacks does not
// build.

mod api;
#[cfg(feature = "tokio")]
mod async_store;
mod bulk;
mod filter;
mod health;
mod id_prefix;
mod incident;
mod jobs;
mod listen;
mod load;
mod log;
mod migrate;
mod operator;
mod ops;
mod pause;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
mod raw;
mod show;
mod snapshot;
mod sqlite;
mod target;
mod unique;
mod worker_state;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "postgres")]
use postgres::PgStore;
#[cfg(feature = "postgres")]
pub use postgres::{enqueue_in_postgres, enqueue_in_tokio_postgres};
/// PostgreSQL's statements on the engine's path, for tests and tools to run and EXPLAIN as an
/// engine's sessions run them; each one's doc comment (`store/postgres/jobs.rs`) names its
/// parameters.
#[cfg(feature = "postgres")]
#[doc(hidden)]
pub use postgres::{
    CLAIM_SQL as POSTGRES_CLAIM_SQL, HAND_BACK_SQL as POSTGRES_HAND_BACK_SQL, HEARTBEAT_SQL as POSTGRES_HEARTBEAT_SQL,
    HEARTBEAT_WITH_PROGRESS_SQL as POSTGRES_HEARTBEAT_WITH_PROGRESS_SQL, LAPSED_LOOK_SQL as POSTGRES_LAPSED_LOOK_SQL,
    SUCCEED_SQL as POSTGRES_SUCCEED_SQL, SUCCEED_WITH_OUTPUT_SQL as POSTGRES_SUCCEED_WITH_OUTPUT_SQL,
};
pub(crate) use sqlite::SqliteStore;
pub use sqlite::{
    enqueue_in_sqlite, CLAIM_NEXT_WIRE_NAME_SQL, CLAIM_SQL, CLAIM_WIRE_NAME_SQL, DEAD_SINCE_SQL, DUE_SQL,
    DUE_WIRE_NAME_SQL, REQUEUE_LOG_SQL, REQUEUE_MOVE_SQL,
};
#[doc(hidden)]
pub use sqlite::{RawConnection, RawStatements, StatementStats};
/// SQLite's statements for a batch of successes, for tests and tools to EXPLAIN (`?1` the ids as
/// an `rarray`, `?2` now).
#[doc(hidden)]
pub use sqlite::{SUCCEED_FENCE_SQL, SUCCEED_LOG_SQL, SUCCEED_MOVE_SQL};

#[cfg(feature = "tokio")]
pub use async_store::{AsyncStore, DEFAULT_CONNECTIONS};
pub use bulk::BulkDone;
pub use health::{
    Check, CheckName, Health, QueueHealth, QueueLatency, Status, Thresholds, TransitionCounter, WorkerHealth,
    CAUSE_GROUPS,
};
pub use id_prefix::check_id_text;
pub use incident::{CancelDone, CancelPlan, PayloadEdit, PriorityChange, RunNowPlan, RunNowResult};
pub(crate) use jobs::heartbeat_every;
pub use jobs::{renewal_threshold, ClaimRequest, Completion, Fenced, LeaseStatus, Outcome};
pub(crate) use listen::{add_ear, Ear};
pub use listen::{Heard, Listener, CHANNEL, DATA_VERSION_EVERY};
pub use load::{JobRow, Loader, TransitionRow, WorkerRow};
pub use log::LogFilter;
pub use operator::{BulkProgress, CancelResult, PurgeResult, RequeueResult, BULK_BATCH};
pub(crate) use ops::access::check_grantee;
pub use ops::access::current_actor;
pub use ops::groups::{CauseGroup, QuarantineGroup};
pub use ops::limits::{Limit, LimitDefault, LimitResult, LimitSource, LimitSpec, LimitStatus, Rate};
pub use ops::outcome::{Confirmed, Lapse, Reap, Reaped, HANDED_BACK, HELD_UP, LEASE_EXPIRED, UNREQUESTED_CANCEL};
pub use ops::preview::{RequeueCheck, RequeuePlan, WireNameCount};
pub(crate) use ops::schedules::validate_all as validate_schedules;
pub use ops::schedules::{
    Declared, ScheduleInfo, SchedulePauseResult, ScheduleResumeResult, ScheduleRow, TickFire, Trigger,
};
pub use ops::settings::{SettingKey, DEFAULT_OUTPUT_LIMIT, DEFAULT_PAYLOAD_LIMIT, MAX_PAYLOAD_LIMIT};
pub use ops::AuditEntry;
pub use pause::{Pause, PauseKind, PausePlan, PauseResult, ResumeResult};
pub use query::{Cursor, JobFilter, JobPage, SortOrder, StateCounts};
#[doc(hidden)]
pub use raw::RawValue;
pub use show::JobView;
pub use target::{PostgresUrl, StoreTarget};
pub use unique::validate as validate_unique_rule;
pub use worker_state::{WorkerSelector, WorkerState, QUIET_BY_PROCESS};

use crate::error::{Error, Result};
pub use crate::model::system_now;
use crate::model::Millis;

/// The schema this build reads and writes (`PRAGMA user_version`). Version 1 stores are
/// migrated when opened for writing (see `migrate.rs`) and read as they are otherwise.
pub const SCHEMA_VERSION: i64 = 21;
/// The store contract on SQLite, embedded verbatim: every table, index and trigger a store holds,
/// with its migration steps. Another program that writes jobs into a store (from any language,
/// or a person at the `sqlite3` shell) follows this text; it is the repository's top-level
/// `schema.sql`, of which this crate carries a byte-for-byte copy so that it builds on its own.
pub const SCHEMA_SQL: &str = include_str!("../../schema.sql");
/// How long a statement waits for another writer's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait [`Store::set_busy_timeout`] takes: 2^31 - 1 milliseconds (24.8 days), what
/// SQLite's busy timeout and PostgreSQL's `lock_timeout` hold.
pub const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// [`Error::InvalidInput`] for a busy timeout over [`MAX_BUSY_TIMEOUT`].
pub(crate) fn check_busy_timeout(timeout: Duration) -> Result<()> {
    match timeout <= MAX_BUSY_TIMEOUT {
        true => Ok(()),
        false => Err(Error::InvalidInput(format!(
            "a busy timeout of {} ms is too long: at most {} ms (24.8 days)",
            timeout.as_millis(),
            MAX_BUSY_TIMEOUT.as_millis()
        ))),
    }
}

/// Where the store's time comes from: every due time, lease and log entry is written by it.
/// Applications use the system clock (the default); tests pin a manual one and move it, so that
/// retries, leases and schedules happen without waiting.
///
/// ```
/// use std::time::Duration;
/// use backwave::Clock;
///
/// let clock = Clock::manual(1_000);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), 3_000);
/// ```
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system's wall clock.
    #[default]
    System,
    /// A time that moves only when told ([`Clock::advance`], [`Clock::set`]); clones share it.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock standing at `start` (milliseconds since the Unix epoch).
    pub fn manual(start: Millis) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start)))
    }

    /// The time now, in milliseconds since the Unix epoch.
    pub fn now(&self) -> Millis {
        match self {
            Clock::System => system_now(),
            Clock::Manual(t) => t.load(Ordering::SeqCst),
        }
    }

    /// Move a manual clock forward; a no-op on the system clock.
    pub fn advance(&self, by: Duration) {
        if let Clock::Manual(t) = self {
            // Saturating: `as i64` made Duration::MAX -1 ms, a clock going back in time.
            let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
            let _ = t.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(v.saturating_add(ms)));
        }
    }

    /// Put a manual clock at `at` (also backwards); a no-op on the system clock.
    pub fn set(&self, at: Millis) {
        if let Clock::Manual(t) = self {
            t.store(at, Ordering::SeqCst);
        }
    }
}

/// An open store: one SQLite file, or one PostgreSQL database (feature `postgres`), that every
/// worker and every operator of an application shares. Enqueue jobs with it (directly, or
/// through a [`Registry`](crate::Registry) that checks payloads against handler types), read
/// jobs, their transition log and the store's health, and act as an operator (requeue, cancel,
/// pause, limits), each operator call naming its actor and checked against its
/// [`Permission`](crate::Permission). The [`Engine`](crate::Engine) opens its own stores.
///
/// Not `Sync`: give each thread its own (they are cheap to open); from async code use
/// `AsyncStore` (feature `tokio`). Every method may fail with [`Busy`](crate::Error::Busy)
/// when another writer held the lock too long, or [`Unreachable`](crate::Error::Unreachable)
/// when a PostgreSQL server is gone; both are [transient](crate::Error::is_transient).
///
/// ```
/// use backwave::store::JobFilter;
/// use backwave::{JobState, NewJob, Store};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("jobs.db");
/// let store = Store::create(&path)?; // Store::open(&path) once it exists
/// let id = store.enqueue(&NewJob::new("send-email", "default", br#"{"to":"a@example.com"}"#.to_vec()))?;
///
/// let job = store.job(id)?.expect("just enqueued");
/// assert_eq!(job.state, JobState::Scheduled);
/// assert_eq!(store.count_jobs(&JobFilter::default())?, 1);
/// assert_eq!(store.history(id)?.len(), 1); // the enqueue's log entry
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store {
    backend: Backend,
    /// Who in this process hears this store's enqueues (see `listen.rs`): the canonical path
    /// of an SQLite file, a PostgreSQL URL as given.
    bell: Arc<str>,
}

enum Backend {
    Sqlite(SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(Box<PgStore>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::Sqlite(s) => s.fmt(f),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.fmt(f),
        }
    }
}

impl Store {
    /// Open an existing store for reading and operating. Never creates anything; refuses a
    /// database that is not a BackWave store, is damaged, or has a schema version this build
    /// does not know, and writes nothing to it in that case. A store this process may not write
    /// (a file or folder without write permission, a read-only role or a replica) is opened
    /// read-only: reads work, writes fail with [`ReadOnly`](crate::Error::ReadOnly). An older
    /// store opened for writing is migrated to [`SCHEMA_VERSION`] in one transaction (additive:
    /// every row stays as it was); opened read-only, it is read as it is.
    ///
    /// `target` is an SQLite path or, with the `postgres` feature, a `postgres://` URL. Errors:
    /// [`StoreMissing`](crate::Error::StoreMissing) (use [`Store::create`]),
    /// [`NotAStore`](crate::Error::NotAStore), [`Corrupt`](crate::Error::Corrupt),
    /// [`SchemaTooNew`](crate::Error::SchemaTooNew), [`Unreachable`](crate::Error::Unreachable)
    /// for a server that cannot be reached or refuses the login, and
    /// [`PostgresNotBuilt`](crate::Error::PostgresNotBuilt) for a URL without the feature.
    pub fn open(target: impl Into<StoreTarget>) -> Result<Store> {
        let backend = match target.into() {
            StoreTarget::File(path) => Backend::Sqlite(SqliteStore::open(&path)?),
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => Backend::Postgres(Box::new(PgStore::open(&url)?)),
            #[cfg(not(feature = "postgres"))]
            target @ StoreTarget::Postgres(_) => return Err(target.file().unwrap_err()),
        };
        Ok(Store::wrap(backend))
    }

    /// Create a store, or open and migrate the one there (the engine does this when it starts).
    /// A new file is readable by its owner and group only; on PostgreSQL the schema is created
    /// in the URL's database (and its `search_path` schema). Fails as [`Store::open`] does,
    /// besides [`StoreMissing`](crate::Error::StoreMissing).
    pub fn create(target: impl Into<StoreTarget>) -> Result<Store> {
        let backend = match target.into() {
            StoreTarget::File(path) => Backend::Sqlite(SqliteStore::create(&path)?),
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => Backend::Postgres(Box::new(PgStore::create(&url)?)),
            #[cfg(not(feature = "postgres"))]
            target @ StoreTarget::Postgres(_) => return Err(target.file().unwrap_err()),
        };
        Ok(Store::wrap(backend))
    }

    /// Create a store at `target` and fill it through `fill` in one transaction: on any error
    /// nothing is committed. An SQLite file must not exist yet, and `expected_jobs` sizes its
    /// page cache; a PostgreSQL database (the schema of its `search_path`) must hold no BackWave
    /// store yet. The store left behind follows its schema file exactly (every index, trigger,
    /// constraint and the exact per-queue counts; WAL on SQLite).
    pub fn create_loaded<R>(
        target: impl Into<StoreTarget>,
        expected_jobs: u64,
        fill: impl FnOnce(&mut Loader<'_>) -> Result<R>,
    ) -> Result<(Store, R)> {
        let (backend, out) = match target.into() {
            StoreTarget::File(path) => {
                let (store, out) = SqliteStore::create_loaded(&path, expected_jobs, fill)?;
                (Backend::Sqlite(store), out)
            }
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => {
                let (store, out) = PgStore::create_loaded(&url, fill)?;
                (Backend::Postgres(Box::new(store)), out)
            }
            #[cfg(not(feature = "postgres"))]
            target @ StoreTarget::Postgres(_) => return Err(target.file().unwrap_err()),
        };
        Ok((Store::wrap(backend), out))
    }

    /// The same store, keeping time by `clock` (tests pin a [`Clock::manual`]).
    pub fn with_clock(self, clock: Clock) -> Self {
        let backend = match self.backend {
            Backend::Sqlite(s) => Backend::Sqlite(s.with_clock(clock)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => Backend::Postgres(Box::new(p.with_clock(clock))),
        };
        Store { backend, bell: self.bell }
    }

    /// The same store, for an engine's claiming work: on PostgreSQL its sessions plan every
    /// prepared statement for the values it runs with, so that the claim and the other batch
    /// statements run prepared, parsed once a session (SQLite's statements always are). The
    /// engine opens its dispatchers' and ticker's stores so; public for the tests.
    #[doc(hidden)]
    pub fn for_engine(self) -> Result<Self> {
        let backend = match self.backend {
            Backend::Sqlite(s) => Backend::Sqlite(s),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => Backend::Postgres(Box::new(p.with_custom_plans()?)),
        };
        Ok(Store { backend, bell: self.bell })
    }

    fn wrap(backend: Backend) -> Store {
        let bell = match &backend {
            Backend::Sqlite(s) => {
                std::fs::canonicalize(s.path()).unwrap_or_else(|_| s.path().to_path_buf()).to_string_lossy().into()
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.url().to_string().into(),
        };
        Store { backend, bell }
    }

    /// This store's key among the process's ears (see `listen.rs`).
    pub(crate) fn bell_key(&self) -> Arc<str> {
        Arc::clone(&self.bell)
    }

    /// A [`Listener`] on a connection of its own, to hear of work other processes and
    /// connections make due: PostgreSQL's notifications, or SQLite's `PRAGMA data_version`.
    pub fn listen(&self) -> Result<Listener> {
        Listener::open(self.target())
    }

    /// Whether two connections to this store write at the same time: PostgreSQL's writers wait
    /// only for the rows they share, SQLite's take turns on the file's one write lock. The
    /// engine then writes a group's outcomes on a second connection while it claims on the first.
    pub fn writes_side_by_side(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(_) => false,
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => true,
        }
    }

    /// The clock this store keeps time by.
    pub fn clock(&self) -> &Clock {
        match &self.backend {
            Backend::Sqlite(s) => s.clock(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.clock(),
        }
    }

    /// Where this store lives, as it was opened (a URL's password redacted when shown).
    pub fn target(&self) -> StoreTarget {
        match &self.backend {
            Backend::Sqlite(s) => StoreTarget::File(s.path().to_path_buf()),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => StoreTarget::Postgres(p.url().clone()),
        }
    }

    /// Why this store no longer reads what its target names, if it does not: its SQLite file was
    /// removed, or another file renamed into its place (a restore from a backup), since it was
    /// opened. The open connection would go on reading the old file unseen; a long-running
    /// reader (a metrics endpoint) asks before each read and opens the target afresh. Always
    /// `None` on PostgreSQL, whose broken connections are replaced by themselves.
    pub fn replaced(&self) -> Option<String> {
        match &self.backend {
            Backend::Sqlite(s) => s.replaced(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => None,
        }
    }

    /// Prepared statements of SQL text, for the tests and benches (SQLite stores only).
    #[doc(hidden)]
    pub fn raw_statements<T>(
        &self,
        sqls: &[&str],
        f: impl FnOnce(&mut RawStatements<'_>) -> T,
    ) -> Result<(T, Vec<StatementStats>)> {
        match &self.backend {
            Backend::Sqlite(s) => s.raw_statements(sqls, f),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => Err(Error::InvalidInput("raw_statements is a hook for SQLite stores only".into())),
        }
    }
}

#[cfg(test)]
mod busy_timeout {
    use std::time::Duration;

    use super::{Store, MAX_BUSY_TIMEOUT};
    use crate::Error;

    /// SQLite's busy timeout and PostgreSQL's `lock_timeout` hold 2^31 - 1 ms: a longer wait is
    /// refused, not a panic in the driver (found through `bw --busy-timeout 30d`).
    #[test]
    fn a_busy_timeout_past_what_the_store_holds_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("jobs.db")).unwrap();
        store.set_busy_timeout(MAX_BUSY_TIMEOUT).unwrap();
        let e = store.set_busy_timeout(Duration::from_secs(30 * 86_400)).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert_eq!(e.to_string(), "a busy timeout of 2592000000 ms is too long: at most 2147483647 ms (24.8 days)");
    }
}

/// The library as an application gets it by default, without the `postgres` feature: a
/// PostgreSQL URL is refused before anything is opened, the feature named and the password
/// redacted. (The workspace's `cargo test` builds the library with `bw`'s features; `./test`
/// runs these unit tests again on the library alone, which is where this one runs.)
#[cfg(all(test, not(feature = "postgres")))]
mod without_postgres {
    use crate::engine::{Engine, Registry, WorkerGroup};
    use crate::{Error, Store};

    #[test]
    fn a_postgres_url_is_refused_naming_the_feature_with_its_password_redacted() {
        let url = "postgres://u:secret@h/db";
        let mut engine = Engine::new(url, Registry::new());
        engine.add_worker_group(WorkerGroup::default());
        for e in [Store::open(url).unwrap_err(), Store::create(url).unwrap_err(), engine.start().unwrap_err()] {
            assert!(matches!(e, Error::PostgresNotBuilt { .. }), "{e}");
            assert_eq!(
                e.to_string(),
                "'postgres://u:***@h/db' is a PostgreSQL URL, but this build of BackWave supports SQLite files \
                 only (it was built without the cargo feature `postgres`): turn the feature on, or give \
                 `Store::open` a file path"
            );
        }
    }
}

/// The crate carries copies of the repository's two contract files, so that it builds from its
/// own folder once published; the top-level files are the ones people read and tests load.
#[cfg(test)]
mod schema_copies {
    use std::path::Path;

    #[test]
    fn the_crates_schema_files_equal_the_repositorys_byte_for_byte() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        for name in ["schema.sql", "schema-postgres.sql"] {
            let top = here.join("..").join(name);
            // A packaged crate has no repository around it: nothing to compare with.
            let Ok(original) = std::fs::read(&top) else { continue };
            let copy = std::fs::read(here.join(name)).unwrap_or_default();
            assert!(
                copy == original,
                "backwave/{name} differs from the repository's {name}, which is the contract: copy it \
                 with `cp schema.sql schema-postgres.sql backwave/` at the repository's top"
            );
        }
    }
}
