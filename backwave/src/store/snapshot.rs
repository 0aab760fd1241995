//! Several reads that see one state of the store: [`Store::snapshot`] (the dashboard's refresh).
//! This file owns the public entry; SQLite's one `BEGIN DEFERRED` that every read joins is
//! `sqlite/snapshot.rs`, PostgreSQL's REPEATABLE READ READ ONLY transaction `postgres/snapshot.rs`.

use super::{Backend, Store};
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
