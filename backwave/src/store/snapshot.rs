//! Several reads that see one state of the store: [`Store::snapshot`] (the dashboard's refresh).
//! This file owns the SQLite side (one `BEGIN DEFERRED` that every read joins) and the public
//! entry; PostgreSQL's REPEATABLE READ READ ONLY transaction is `postgres/snapshot.rs`.

use super::{Backend, SqliteStore, Store};
use crate::error::Result;

impl Store {
    /// Run `f` with every read it makes through the store (`store` is this store) inside one
    /// read-only snapshot, so that figures read one after the other agree: the counts, a page
    /// and its total, the log, as of one instant. Writers go on meanwhile; what they commit
    /// after the snapshot's first read is not seen by it. A write inside is refused with
    /// [`Error::ReadOnly`](crate::Error::ReadOnly); a snapshot inside a snapshot is the same one.
    ///
    /// SQLite: one deferred read transaction (its snapshot begins at the first read) holding the
    /// WAL where it was: keep it short, a checkpoint cannot pass it. PostgreSQL: one REPEATABLE
    /// READ READ ONLY transaction (the log's horizon read just before it).
    pub fn snapshot<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.snapshot(|| f(self)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.snapshot(|| f(self)),
        }
    }
}

impl SqliteStore {
    fn snapshot<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if self.snapshot.get() {
            return f();
        }
        // `read` joins a transaction already open on the connection: every read inside `f`
        // (those through `read` and the single statements alike) runs in this one.
        self.read(|_| {
            self.snapshot.set(true);
            let _open = Open(&self.snapshot);
            f()
        })
    }
}

/// Clears the store's snapshot mark however `f` ends (an error, a panic).
struct Open<'a>(&'a std::cell::Cell<bool>);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}
