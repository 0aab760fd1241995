//! Hearing other connections' commits on SQLite: `PRAGMA data_version` on a connection of its
//! own (see `store/listen.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::error::Result;
use crate::store::{Heard, BUSY_TIMEOUT, DATA_VERSION_EVERY};

/// `PRAGMA data_version` on a connection of its own: its value changes when any other
/// connection, in this process or another, commits a change to the file.
pub(crate) struct SqliteListener {
    conn: Connection,
    seen: i64,
}

impl SqliteListener {
    pub(crate) fn open(path: &Path) -> Result<SqliteListener> {
        // Read-write flags although it never writes: a read-only connection to a WAL file can
        // be refused when it cannot open the shared-memory index as it wants.
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut l = SqliteListener { conn, seen: 0 };
        l.seen = l.data_version()?;
        Ok(l)
    }

    fn data_version(&self) -> Result<i64> {
        Ok(self.conn.prepare_cached("PRAGMA data_version")?.query_row([], |r| r.get(0))?)
    }

    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<Vec<Heard>> {
        let until = Instant::now() + timeout;
        loop {
            let now = self.data_version()?;
            if now != self.seen {
                self.seen = now;
                return Ok(vec![Heard::Anything]);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            std::thread::sleep(left.min(DATA_VERSION_EVERY));
        }
    }
}
