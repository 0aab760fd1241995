//! Typed errors of the library. The `bw` binary maps each kind to an exit code in one place
//! (`cli::exit_code`); nothing here knows about a terminal.

use std::path::PathBuf;

use crate::model::{JobState, Permission};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no BackWave store at '{}': create one with `bw init --db {}`", path.display(), path.display())]
    StoreMissing { path: PathBuf },

    /// A `postgres://` target given to a build without a PostgreSQL backend; nothing was opened.
    #[error("'{target}' is a PostgreSQL URL, but this build of BackWave supports SQLite files only (it was built without the cargo feature `postgres`); give --db or BW_DB a file path")]
    PostgresNotBuilt { target: String },

    /// The PostgreSQL server named by a URL could not be reached or refused the login.
    #[error("cannot connect to the store at '{target}': {why}")]
    Unreachable { target: String, why: String },

    #[error("'{}' is not a BackWave store: {why}", path.display())]
    NotAStore { path: PathBuf, why: String },

    #[error(
        "'{}' has schema version {found}, but this build of BackWave knows versions up to {supported}: upgrade bw",
        path.display()
    )]
    SchemaTooNew { path: PathBuf, found: i64, supported: i64 },

    #[error("'{}' is damaged: {why}", path.display())]
    Corrupt { path: PathBuf, why: String },

    #[error("the store is locked: another process held the database write lock past the busy timeout; try again, or find the process holding it")]
    Busy,

    #[error("the store is read-only here: {why}")]
    ReadOnly { why: String },

    /// The disk (or the server's) holding the store has no room left: nothing was written.
    #[error("the disk holding the store is full: {why}")]
    DiskFull { why: String },

    #[error("pragma {name} is {actual:?} after setting it to {wanted:?}")]
    Pragma { name: &'static str, wanted: String, actual: String },

    #[error("invalid retry policy: {0}")]
    InvalidPolicy(String),

    #[error("{0}")]
    InvalidInput(String),

    /// A payload over the store's `payload_limit` setting; nothing was written.
    #[error(
        "{}the payload is {} ({bytes} bytes), over the store's payload_limit of {} ({limit} bytes): store the data elsewhere and enqueue a reference to it, or an admin raises the limit (`bw config set payload_limit SIZE`)",
        job.map(|i| format!("job {} of the batch: ", i + 1)).unwrap_or_default(),
        size(*bytes),
        size(*limit)
    )]
    PayloadTooLarge { bytes: u64, limit: u64, job: Option<usize> },

    #[error("no job matches '{0}'")]
    JobNotFound(String),

    #[error("job id '{prefix}' is ambiguous: it matches the start or the end of {}", candidates.join(", "))]
    AmbiguousId { prefix: String, candidates: Vec<String> },

    #[error("job {id} is {state}, not {wanted}")]
    WrongState { id: String, state: JobState, wanted: &'static str },

    #[error("{actor} lacks the '{permission}' permission (an admin can run `bw grant {actor} {permission}`)")]
    PermissionDenied { actor: String, permission: Permission },

    #[error(
        "failure detail is switched off for this store: none is shown while it is off, not even detail captured before (an admin can run `bw config set failure_detail on`)"
    )]
    FailureDetailOff,

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
    /// unreachable, or its server connection was lost (a restart, a failover). Followers (`bw log
    /// tail --follow`, `bw demo`) wait and retry these; anything else is the caller's to report.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Busy | Error::Unreachable { .. } => true,
            e @ Error::Database(_) => crate::store::is_connection_lost(e),
            _ => false,
        }
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
