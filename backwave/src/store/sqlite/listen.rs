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
    /// Where supported, the first bytes of the WAL index (`-shm`), read before `data_version`:
    /// see [`Index`].
    index: Option<Index>,
    /// Looks since `data_version` was last read.
    skipped: u32,
}

/// Reading `data_version` begins and ends a read transaction: two locks of the `-shm` file, most
/// of an idle look's cost. The WAL index's header (the first 48 bytes of `-shm`, sqlite.org's
/// "WAL-mode file format") changes with every commit (its change counter and last frame), so a
/// look first reads those bytes without a lock and reads `data_version` only when they moved. A
/// read torn by a commit under way differs from the last one too; the header of a commit not yet
/// visible is read again at the next look. Every [`CONFIRM_EVERY`]th look reads `data_version`
/// whatever the header says, so a `-shm` file made anew (every connection closed, then one
/// opened again) is noticed within that many looks, not missed for good.
struct Index {
    file: std::fs::File,
    header: [u8; 48],
}

/// A look that found the WAL index unchanged still reads `data_version` this often (in looks).
const CONFIRM_EVERY: u32 = 25;

impl Index {
    #[cfg(unix)]
    fn open(db: &Path) -> Option<Index> {
        let mut path = db.as_os_str().to_owned();
        path.push("-shm");
        let file = std::fs::File::open(path).ok()?;
        let mut index = Index { file, header: [0; 48] };
        index.moved();
        Some(index)
    }

    #[cfg(not(unix))]
    fn open(_db: &Path) -> Option<Index> {
        None
    }

    /// Whether the header differs from the last read (a read that fails counts as moved).
    #[cfg(unix)]
    fn moved(&mut self) -> bool {
        use std::os::unix::fs::FileExt;
        let mut now = [0; 48];
        match self.file.read_exact_at(&mut now, 0) {
            Ok(()) if now == self.header => false,
            Ok(()) => {
                self.header = now;
                true
            }
            Err(_) => true,
        }
    }

    #[cfg(not(unix))]
    fn moved(&mut self) -> bool {
        true
    }
}

impl SqliteListener {
    pub(crate) fn open(path: &Path) -> Result<SqliteListener> {
        // Read-write flags although it never writes: a read-only connection to a WAL file can
        // be refused when it cannot open the shared-memory index as it wants.
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut l = SqliteListener { conn, seen: 0, index: None, skipped: 0 };
        // The first read opens the WAL index; its header is read next, then `data_version`
        // again, so that a commit between the two is in both and none is in neither.
        l.data_version()?;
        l.index = Index::open(path);
        l.seen = l.data_version()?;
        Ok(l)
    }

    fn data_version(&self) -> Result<i64> {
        Ok(self.conn.prepare_cached("PRAGMA data_version")?.query_row([], |r| r.get(0))?)
    }

    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<Vec<Heard>> {
        let until = Instant::now() + timeout;
        loop {
            let moved = self.index.as_mut().is_none_or(Index::moved);
            self.skipped += 1;
            if moved || self.skipped >= CONFIRM_EVERY {
                self.skipped = 0;
                let now = self.data_version()?;
                if now != self.seen {
                    self.seen = now;
                    return Ok(vec![Heard::Anything]);
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            std::thread::sleep(left.min(DATA_VERSION_EVERY));
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The unlocked look: the WAL index's header moves with each commit of another connection
    /// (a checkpoint that restarts the WAL included), and stays put otherwise.
    #[test]
    fn the_wal_index_header_moves_with_each_commit_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER);").unwrap();
        let mut l = SqliteListener::open(&path).unwrap();
        let index = l.index.as_mut().expect("a WAL file has its index");
        assert!(!index.moved(), "nothing committed since the listener opened");
        for i in 0..5 {
            writer.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
            assert!(index.moved(), "commit {i} moved the header");
            assert!(!index.moved(), "and nothing since");
        }
        writer.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        index.moved();
        writer.execute("INSERT INTO t VALUES (9)", []).unwrap();
        assert!(index.moved(), "a commit after the WAL restarted");
        // And the listener hears it, as before.
        assert_eq!(l.wait(Duration::from_secs(1)).unwrap(), [Heard::Anything]);
    }
}
