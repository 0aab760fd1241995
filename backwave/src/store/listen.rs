//! How an idle worker hears that work may be due, without polling the job table: a process-wide
//! bell that this process's enqueues ring (no store round trip), and a [`Listener`] on a
//! connection of its own for other processes' commits: PostgreSQL's `LISTEN backwave` (the
//! jobs table's count trigger sends one notification per queue per transaction, see
//! `schema-postgres.sql` migration 14), SQLite's `PRAGMA data_version` (it changes when another
//! connection commits; reading it takes no lock and writes nothing). What is heard is a hint,
//! never a decision: the claim decides, and the engine's poll stays the safety net for a
//! notification that never came.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

#[cfg(feature = "postgres")]
use super::postgres::PgListener;
use super::sqlite::SqliteListener;
use super::StoreTarget;
use crate::error::Result;

/// How often an SQLite listener looks for another connection's commit: the most a job enqueued
/// by another process waits before an idle worker looks (half of it on average). A look reads
/// the WAL index's header without a lock, and `PRAGMA data_version` (a read transaction: a lock
/// and an unlock of the `-shm` file) only when the header moved, or every 25th look. 250 looks a
/// second cost an idle worker process 0.7 % of a core (release; 0.8 % in a debug build), where
/// reading `data_version` at every look cost 1.0 % (1.1-1.3 %): `BW_BENCH_ONLY=idle cargo bench
/// --bench engine`.
pub const DATA_VERSION_EVERY: Duration = Duration::from_millis(4);

/// The PostgreSQL channel every store's notifications go to; the payload names the store's
/// schema and the queue (a JSON array `[schema, queue]`, or `[schema]` for any queue).
pub const CHANNEL: &str = "backwave";

/// What a listener heard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Jobs of this queue may be due now.
    Queue(String),
    /// Something changed that may have made jobs of any queue due (an SQLite commit, a
    /// reconnection after which nothing is known of what was missed).
    Anything,
}

/// Waits for news of due work from other processes and connections (see the module's docs):
/// open one per process with [`Listener::open`] (or [`Store::listen`](super::Store::listen)).
pub struct Listener {
    inner: Inner,
}

enum Inner {
    Sqlite(SqliteListener),
    #[cfg(feature = "postgres")]
    Postgres(Box<PgListener>),
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Sqlite(_) => f.write_str("Listener(sqlite)"),
            #[cfg(feature = "postgres")]
            Inner::Postgres(_) => f.write_str("Listener(postgres)"),
        }
    }
}

impl Listener {
    /// Listen to the store at `target` on a connection of its own.
    pub fn open(target: impl Into<StoreTarget>) -> Result<Listener> {
        let inner = match target.into() {
            StoreTarget::File(path) => Inner::Sqlite(SqliteListener::open(&path)?),
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => Inner::Postgres(Box::new(PgListener::open(&url)?)),
            #[cfg(not(feature = "postgres"))]
            target @ StoreTarget::Postgres(_) => return Err(target.file().unwrap_err()),
        };
        Ok(Listener { inner })
    }

    /// Wait up to `timeout` for news; empty when nothing was heard in that time. An error means
    /// the listening connection broke: the next call connects again and answers
    /// [`Heard::Anything`] at once, since whatever was sent meanwhile is lost.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<Heard>> {
        match &mut self.inner {
            Inner::Sqlite(l) => l.wait(timeout),
            #[cfg(feature = "postgres")]
            Inner::Postgres(l) => l.wait(timeout),
        }
    }
}

/// Something in this process that wants to hear of this process's enqueues into one store: an
/// engine's groups. Called with the queues of each committed enqueue.
pub(crate) type Ear = dyn Fn(&[&str]) + Send + Sync;

/// The process's ears, by store (see [`Store::bell_key`](super::Store)). Rung after each
/// enqueue commits; a store without ears costs one atomic load.
static EARS: Mutex<Vec<(Arc<str>, Weak<Ear>)>> = Mutex::new(Vec::new());
static EAR_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Hear this process's enqueues into the store `key` until `ear` is dropped.
pub(crate) fn add_ear(key: Arc<str>, ear: &Arc<Ear>) {
    let mut ears = EARS.lock().unwrap_or_else(|p| p.into_inner());
    ears.retain(|(_, e)| e.strong_count() > 0);
    ears.push((key, Arc::downgrade(ear)));
    EAR_COUNT.store(ears.len(), Ordering::SeqCst);
}

/// Tell this process's ears on store `key` that jobs of `queues` were just committed.
pub(crate) fn ring<'a>(key: &str, queues: impl Iterator<Item = &'a str>) {
    if EAR_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let ears: Vec<Arc<Ear>> = {
        let mut ears = EARS.lock().unwrap_or_else(|p| p.into_inner());
        ears.retain(|(_, e)| e.strong_count() > 0);
        EAR_COUNT.store(ears.len(), Ordering::SeqCst);
        ears.iter().filter(|(k, _)| &**k == key).filter_map(|(_, e)| e.upgrade()).collect()
    };
    if ears.is_empty() {
        return;
    }
    let mut distinct: Vec<&str> = queues.collect();
    distinct.sort_unstable();
    distinct.dedup();
    for ear in ears {
        ear(&distinct);
    }
}
