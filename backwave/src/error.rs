//! Typed errors of the library: every fallible function returns [`Result`], whose error is one
//! [`Error`]. Match on the variant to decide what to do ([`Error::is_transient`] says whether
//! trying again may help); its `Display` is a one-line message for a person, naming the call
//! that mends it where there is one. Nothing here knows about a terminal.

use std::path::PathBuf;

use crate::states::{JobState, Permission};

/// The library's result type: `Ok(T)` or one [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the library, by kind. Variants carry what an application
/// needs to react (the path, the state found, the permission missing); `Display` is the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// [`Store::open`](crate::Store::open) found no store at an SQLite path (it never creates
    /// one: [`Store::create`](crate::Store::create) does); nothing was written.
    #[error("no BackWave store at '{}': create one with `Store::create`", path.display())]
    StoreMissing {
        /// The path that holds no store.
        path: PathBuf,
    },

    /// A `postgres://` target given to a build without a PostgreSQL backend; nothing was opened.
    #[error("'{target}' is a PostgreSQL URL, but this build of BackWave supports SQLite files only (it was built without the cargo feature `postgres`): turn the feature on, or give `Store::open` a file path")]
    PostgresNotBuilt {
        /// The URL, as given (its password redacted).
        target: String,
    },

    /// The PostgreSQL server named by a URL could not be reached or refused the login.
    #[error("cannot connect to the store at '{target}': {why}")]
    Unreachable {
        /// The store's URL (its password redacted).
        target: String,
        /// The driver's reason.
        why: String,
    },

    /// The database exists but is not a BackWave store (another program's database, a file that
    /// is not SQLite at all); nothing was written to it.
    #[error("'{}' is not a BackWave store: {why}", path.display())]
    NotAStore {
        /// The file or URL opened.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },

    /// The store was written by a newer BackWave, whose schema this build does not know;
    /// nothing was written. Upgrade the library (older builds never read newer stores).

    #[error(
        "'{}' has schema version {found}, but this build of BackWave knows versions up to {supported}: upgrade the backwave library",
        path.display()
    )]
    SchemaTooNew {
        /// The store's file or URL.
        path: PathBuf,
        /// The store's schema version.
        found: i64,
        /// The newest version this build knows ([`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION)).
        supported: i64,
    },

    /// The store's SQLite file is damaged (truncated, or SQLite reports corruption); restore it
    /// from a backup.
    #[error("'{}' is damaged: {why}", path.display())]
    Corrupt {
        /// The store's file or URL.
        path: PathBuf,
        /// What is wrong, as the database reported it.
        why: String,
    },

    /// Another process held SQLite's write lock past [`BUSY_TIMEOUT`](crate::store::BUSY_TIMEOUT);
    /// nothing was written. Transient: try again.
    #[error("the store is locked: another process held the database write lock past the busy timeout; try again, or find the process holding it")]
    Busy,

    /// A write to a store this process may only read: a file or folder without write
    /// permission, a read-only PostgreSQL role, or a standby server. Reads still work.
    #[error("the store is read-only here: {why}")]
    ReadOnly {
        /// Why the store is read-only here.
        why: String,
    },

    /// The disk (or the server's) holding the store has no room left: nothing was written.
    #[error("the disk holding the store is full: {why}")]
    DiskFull {
        /// The driver's message.
        why: String,
    },

    /// A connection setting did not take (an SQLite pragma, PostgreSQL's `lock_timeout`): the
    /// store refuses to run without it rather than run unsafely.
    #[error("pragma {name} is {actual:?} after setting it to {wanted:?}")]
    Pragma {
        /// The setting.
        name: &'static str,
        /// The value set.
        wanted: String,
        /// The value read back.
        actual: String,
    },

    /// A [`RetryPolicy`](crate::RetryPolicy) or [`Backoff`](crate::Backoff) that cannot be used
    /// (no attempts or too many, a jitter out of range, a backoff function that panics, two
    /// different budgets); the message says which value.
    #[error("invalid retry policy: {0}")]
    InvalidPolicy(String),

    /// An argument the library refuses, with a message naming it: an empty or overlong name, a
    /// payload that does not decode as the handler's type, an unknown wire name, a worker group
    /// without queues, an invalid cron expression, a mismatched filter.
    #[error("{0}")]
    InvalidInput(String),

    /// A payload over the store's `payload_limit` setting; nothing was written.
    #[error(
        "{}the payload is {} ({bytes} bytes), over the store's payload_limit of {} ({limit} bytes): store the data elsewhere and enqueue a reference to it, or an admin raises the store's `payload_limit` setting (`Store::set_setting`)",
        job.map(|i| format!("job {} of the batch: ", i + 1)).unwrap_or_default(),
        size(*bytes),
        size(*limit)
    )]
    PayloadTooLarge {
        /// The payload's size.
        bytes: u64,
        /// The store's limit.
        limit: u64,
        /// Which job of a batch (0-based), `None` for a single enqueue.
        job: Option<usize>,
    },

    /// No job has this id (or id prefix); it may have been deleted by the retention sweep.
    #[error("no job matches '{0}'")]
    JobNotFound(String),

    /// A short id matches the start or the end of more than one job id: give more of it.
    #[error("job id '{prefix}' is ambiguous: it matches the start or the end of {}", candidates.join(", "))]
    AmbiguousId {
        /// The id text given.
        prefix: String,
        /// The first few ids it matches.
        candidates: Vec<String>,
    },

    /// The job is not in a state the operation applies to (editing the payload of a job that is
    /// not Dead-Lettered or Quarantined); nothing changed.
    #[error("job {id} is {state}, not {wanted}")]
    WrongState {
        /// The job's id.
        id: String,
        /// The state it is in.
        state: JobState,
        /// The states the operation needs, in words.
        wanted: &'static str,
    },

    /// The actor named in an operator call lacks the permission it needs; nothing changed. An
    /// admin gives it with [`Store::grant`](crate::Store::grant).
    #[error("{actor} lacks the '{permission}' permission (an admin grants it with `Store::grant`)")]
    PermissionDenied {
        /// Who asked.
        actor: String,
        /// What they lack.
        permission: Permission,
    },

    /// Failure detail was asked for while the store's `failure_detail` setting is off: none is
    /// shown, not even detail captured before it was switched off.
    #[error(
        "failure detail is switched off for this store: none is shown while it is off, not even detail captured before (an admin switches the setting `failure_detail` on with `Store::set_setting`)"
    )]
    FailureDetailOff,

    /// A payload `serde_json` could not encode (a map with non-string keys, a failing
    /// `Serialize`); nothing was written.
    #[error("could not encode the payload: {0}")]
    Encode(#[source] serde_json::Error),

    /// Any other failure of the database driver, with the driver's own message. The driver's type
    /// stays inside `store/` (its conversion lives there, beside the busy and read-only mapping),
    /// so a second backend can come without changing this enum's callers.
    #[error(transparent)]
    Database(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Whether asking again later may succeed without anyone changing the store: it was locked,
    /// unreachable, or its server connection was lost (a restart, a failover). A follower (of the
    /// log, say) waits and retries these; anything else is the caller's to report.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Busy | Error::Unreachable { .. } => true,
            e => e.is_connection_lost(),
        }
    }

    /// Whether the connection to the database server is gone (a restart, a failover,
    /// `pg_terminate_backend`, the network), as the backend found when it converted its driver's
    /// error: the next call connects again.
    pub(crate) fn is_connection_lost(&self) -> bool {
        matches!(self, Error::Database(b) if b.is::<ConnectionLost>())
    }
}

/// Inside [`Error::Database`]: a driver's error whose connection to the server was lost, marked
/// so by the backend that converted it (`store/postgres/driver_error.rs`), which makes the
/// error [transient](Error::is_transient). It shows, and debug-prints, as the driver's error.
pub(crate) struct ConnectionLost(pub(crate) Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for ConnectionLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for ConnectionLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConnectionLost {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A byte count as people read it in an error: `1.0 MiB`, `900 B`.
fn size(n: u64) -> String {
    match n {
        n if n < 1 << 10 => format!("{n} B"),
        n if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        n if n < 1 << 30 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
    }
}

/// The message of a caught panic (`panic!("...")` carries a `&str` or a `String`): a handler's
/// for its failure detail, a backoff function's for the policy error that refuses it.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panicked with a non-string payload".to_string()
    }
}
