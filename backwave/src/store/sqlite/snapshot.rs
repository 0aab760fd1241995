//! Several reads that see one state of the store on SQLite: one deferred read transaction (its
//! snapshot begins at the first read) that every read inside [`Store::snapshot`](crate::Store::snapshot) joins.

use super::SqliteStore;
use crate::error::Result;

impl SqliteStore {
    pub(crate) fn snapshot<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
