//! [`Store::snapshot`](crate::Store::snapshot) on PostgreSQL: one REPEATABLE READ READ ONLY
//! transaction held open on the connection while the caller reads, which every read of the
//! store joins (`PgStore::transaction` runs it on that transaction instead of starting one).

use super::{is_broken, PgStore, Tx};
use crate::error::{Error, Result};

impl PgStore {
    /// Run `f` with every read of this store inside one read-only snapshot. A snapshot inside
    /// a snapshot is the same one.
    pub(crate) fn snapshot<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        super::blocking(|| self.snapshot_here(f))
    }

    fn snapshot_here<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if self.snapshot.get().is_some() {
            return f();
        }
        // The log's horizon first, in a transaction of its own, as every log read takes it
        // (see log.rs): every transaction below it has ended before this snapshot is taken.
        let horizon = self.horizon()?;
        self.with_client(|c| Ok(c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?))?;
        let open = Open(self);
        self.snapshot.set(Some(horizon));
        let value = f()?;
        open.end("COMMIT")?;
        Ok(value)
    }

    /// A read inside the open snapshot: `f` on its transaction. A write is refused: the snapshot
    /// is read-only, and a write has to decide on rows as they are now, not as of the snapshot.
    pub(super) fn joined<T>(&self, read_only: bool, f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        if !read_only {
            return Err(Error::ReadOnly { why: "a write was asked for inside a read snapshot".into() });
        }
        let mut slot = self.conn.borrow_mut();
        // The connection broke during the snapshot: a new one would read outside it.
        if slot.is_none() {
            return Err(self.lost());
        }
        self.on_session(&mut slot, f)
    }

    fn lost(&self) -> Error {
        Error::Unreachable {
            target: self.url.to_string(),
            why: "the connection was lost during a read snapshot".into(),
        }
    }
}

/// The open snapshot: ended by [`Open::end`], or rolled back when dropped (an error or a panic
/// inside it), so that the connection is never left inside a transaction.
struct Open<'a>(&'a PgStore);

impl Open<'_> {
    fn end(self, how: &str) -> Result<()> {
        let store = self.0;
        std::mem::forget(self);
        store.snapshot.set(None);
        let mut slot = store.conn.borrow_mut();
        let Some(conn) = slot.as_mut() else { return Err(store.lost()) };
        let out = conn.client.batch_execute(how).map_err(Error::from);
        if out.as_ref().is_err_and(is_broken) || conn.client.is_closed() {
            *slot = None;
        }
        out
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let store = self.0;
        store.snapshot.set(None);
        if let Ok(mut slot) = store.conn.try_borrow_mut() {
            // A connection that cannot roll back is dropped: the server ends its transaction.
            if slot.as_mut().is_some_and(|c| c.client.batch_execute("ROLLBACK").is_err()) {
                *slot = None;
            }
        }
    }
}
