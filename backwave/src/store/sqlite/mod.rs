//! The SQLite backend: one file that every worker and every `bw` process on one host shares.
//!
//! This file opens and creates stores (pragmas set and read back, the schema version checked
//! before anything is written, an older store migrated when opened for writing: `migrate.rs`)
//! and owns the transaction helpers and [`SqliteOps`], the write transaction the shared policy
//! (`store/ops/`) runs its statements in; the file checks before SQLite reads anything are
//! `file.rs`. Every state change is one short `BEGIN IMMEDIATE` transaction that appends its
//! transition entries, so a crash leaves each job either changed with its log or untouched. The
//! operation groups live one per file, named as their PostgreSQL counterparts in `postgres/`;
//! the types they take and answer are in `store/`, shared by both backends.

mod admin;
mod demo;
mod driver_error;
mod file;
mod health;
mod in_tx;
mod incident;
mod jobs;
mod limit;
mod listen;
mod load;
mod log;
mod migrate;
mod operator;
mod pause;
mod preview;
mod query;
mod raw;
mod row;
mod schedules;
mod snapshot;
mod workflow;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use self::file::{check_file, create_private_file, is_writable, open_error, open_read_only, InUse};
pub use self::health::{DEAD_SINCE_SQL, DUE_SQL, DUE_WIRE_NAME_SQL};
pub use self::in_tx::enqueue_in_sqlite;
pub use self::jobs::{
    CLAIM_NEXT_WIRE_NAME_SQL, CLAIM_SQL, CLAIM_WIRE_NAME_SQL, SUCCEED_FENCE_SQL, SUCCEED_LOG_SQL, SUCCEED_MOVE_SQL,
};
pub(crate) use self::listen::SqliteListener;
pub use self::operator::{REQUEUE_LOG_SQL, REQUEUE_MOVE_SQL};
pub use self::raw::{RawConnection, RawStatements, StatementStats};
use crate::error::{Error, Result};
use crate::model::Millis;
use crate::store::{Clock, BUSY_TIMEOUT, SCHEMA_SQL, SCHEMA_VERSION};

/// An open store. Not `Sync`: give each thread its own (they are cheap to open).
pub struct SqliteStore {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) clock: Clock,
    pub(super) read_only: bool,
    /// The schema version of the file: [`SCHEMA_VERSION`], or 1 for a store opened read-only
    /// that this build could not migrate.
    pub(super) version: i64,
    /// How long the last write transaction waited for the write lock (`BEGIN IMMEDIATE`).
    pub(super) lock_wait: std::cell::Cell<std::time::Duration>,
    /// Set while [`SqliteStore::snapshot`] runs (see `snapshot.rs`).
    pub(super) snapshot: std::cell::Cell<bool>,
    /// Declared after `conn`, so the connection closes before the count drops.
    _in_use: InUse,
}

/// Below this much room left for this user, a write that failed with SQLite's generic "disk I/O
/// error" is taken to have failed for want of space.
const NEARLY_FULL: u64 = 64 * 1024;

/// `e`, or [`Error::DiskFull`] when it is SQLite's "disk I/O error" and the filesystem holding
/// `path` has (nearly) no room left. SQLite reports ENOSPC as `SQLITE_FULL` only while writing
/// the database's pages; a write that fails elsewhere (sizing a new `-shm` file on the first
/// open of a store without one, the WAL's first frame) is `SQLITE_IOERR`, whose errno rusqlite
/// does not expose: the free space tells the two apart.
fn disk_full(path: &Path, e: Error) -> Error {
    if !driver_error::is_sqlite_io_error(&e) {
        return e;
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Both are u64 on 64-bit Linux, narrower on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let free = nix::sys::statvfs::statvfs(dir).map(|fs| fs.blocks_available().saturating_mul(fs.fragment_size()));
    match free {
        Ok(free) if free < NEARLY_FULL => Error::DiskFull {
            why: format!(
                "'{}' could not be written ({e}): its filesystem has {free} bytes left; free some space and try again",
                path.display()
            ),
        },
        _ => e,
    }
}

/// SQLite's statements for the operator actions of `ops/jobs.rs`; `now` is the store's clock.
/// Under the one writer what a read finds stays so until the transaction ends, so `lock`
/// changes nothing here.
pub(crate) struct SqliteOps<'c> {
    pub(crate) c: &'c Connection,
    pub(crate) now: Millis,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).field("read_only", &self.read_only).finish()
    }
}

impl SqliteStore {
    /// Open an existing store for reading and operating. Never creates a file; refuses a file
    /// that is not a BackWave store, is damaged, or has a schema version this build does not
    /// know, and writes nothing to it in that case. A file or folder this process may not
    /// write is opened read-only: reads work, writes fail with [`Error::ReadOnly`]. A
    /// version-1 store opened for writing is migrated to [`SCHEMA_VERSION`] in one transaction
    /// (additive: every row stays as it was); opened read-only, it is read as it is.
    ///
    /// A PostgreSQL URL is refused with [`Error::PostgresNotBuilt`] before anything is touched.
    pub(crate) fn open(path: &Path) -> Result<SqliteStore> {
        Self::open_inner(path).map_err(|e| disk_full(path, e))
    }

    fn open_inner(path: &Path) -> Result<SqliteStore> {
        let path = path.to_path_buf();
        let in_use = check_file(&path)?;
        let writable = is_writable(&path);
        let conn = if writable {
            Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| open_error(&path, e))?
        } else {
            open_read_only(&path)?
        };
        let mut store = SqliteStore {
            conn,
            path,
            clock: Clock::System,
            read_only: !writable,
            version: 0,
            lock_wait: Default::default(),
            snapshot: Default::default(),
            _in_use: in_use,
        };
        store.conn.busy_timeout(BUSY_TIMEOUT)?;
        store.version = store.check_schema()?;
        store.set_pragmas()?;
        if store.version < SCHEMA_VERSION && !store.read_only {
            store.version = migrate::migrate(&store)?;
        }
        Ok(store)
    }

    /// Create a store at `path`, or open and migrate the one there (`bw init`, and the
    /// engine's create-if-missing). A new file is readable by its owner and group only.
    /// A PostgreSQL URL is refused with [`Error::PostgresNotBuilt`] before anything is touched.
    pub(crate) fn create(path: &Path) -> Result<SqliteStore> {
        Self::create_inner(path).map_err(|e| disk_full(path, e))
    }

    fn create_inner(path: &Path) -> Result<SqliteStore> {
        let path = path.to_path_buf();
        let in_use = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_private_file(&path)?;
                InUse::count(&path)
            }
            // An empty file (`touch`, a temp file) is an empty database to SQLite: make it a store.
            Ok(m) if m.is_file() && m.len() == 0 => InUse::count(&path),
            _ => check_file(&path)?,
        };
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(&path, e))?;
        let mut store = SqliteStore {
            conn,
            path,
            clock: Clock::System,
            read_only: false,
            version: 0,
            lock_wait: Default::default(),
            snapshot: Default::default(),
            _in_use: in_use,
        };
        store.conn.busy_timeout(BUSY_TIMEOUT)?;
        let version = store.check_schema_allow_empty()?;
        store.set_pragmas()?;
        if version == 0 {
            store.write(|tx| {
                // Another process may have created the schema since we looked: look again under
                // the write lock, so that two `create`s racing on one new file both succeed.
                let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
                if version == 0 {
                    tx.execute_batch(SCHEMA_SQL)?;
                }
                Ok(())
            })?;
        }
        store.version = store.check_schema()?;
        if store.version < SCHEMA_VERSION {
            store.version = migrate::migrate(&store)?;
        }
        Ok(store)
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        crate::store::check_busy_timeout(timeout)?;
        self.conn.busy_timeout(timeout)?;
        Ok(())
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Why the file at the store's path is no longer the one open here, if it is not.
    pub fn replaced(&self) -> Option<String> {
        self._in_use.moved(&self.path)
    }

    /// `PRAGMA integrity_check` and `foreign_key_check`: the problems found, none when clean.
    pub fn check_integrity(&self) -> Result<Vec<String>> {
        let mut problems: Vec<String> = self
            .conn
            .prepare("PRAGMA integrity_check")?
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        problems.retain(|p| p != "ok");
        let mut fk = self.conn.prepare("PRAGMA foreign_key_check")?;
        let rows = fk.query_map([], |r| Ok(format!("foreign key violation in {}", r.get::<_, String>(0)?)))?;
        for row in rows {
            problems.push(row?);
        }
        Ok(problems)
    }

    /// Run `f` in one `BEGIN IMMEDIATE` transaction: it takes the write lock up front (waiting
    /// up to the busy timeout) so it never fails half-way on a lock upgrade, and it commits
    /// everything or nothing.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if self.snapshot.get() {
            return Err(Error::ReadOnly { why: "a write was asked for inside a read snapshot".into() });
        }
        if self.read_only {
            return Err(Error::ReadOnly {
                why: format!("'{}' or its folder is not writable by this user", self.path.display()),
            });
        }
        let out = (|| {
            // Cached statements: the engine runs thousands of these small transactions a second.
            let asked = std::time::Instant::now();
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            self.lock_wait.set(asked.elapsed());
            let guard = RollbackOnDrop(&self.conn);
            let value = f(&self.conn)?;
            self.conn.prepare_cached("COMMIT")?.execute([])?;
            std::mem::forget(guard);
            Ok(value)
        })();
        out.map_err(|e| disk_full(&self.path, e))
    }

    /// Run `f` in one read transaction, so that several queries see one snapshot. Inside
    /// [`SqliteStore::snapshot`] (a transaction already open), `f` joins it.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            return f(&self.conn);
        }
        self.conn.prepare_cached("BEGIN DEFERRED")?.execute([])?;
        let guard = RollbackOnDrop(&self.conn);
        let value = f(&self.conn);
        drop(guard);
        value
    }

    /// The schema version of a BackWave store; an empty database is refused.
    fn check_schema(&self) -> Result<i64> {
        match self.check_schema_allow_empty()? {
            0 => Err(Error::NotAStore {
                path: self.path.clone(),
                why: "it is an SQLite database without the BackWave schema (create a store with `Store::create`)"
                    .into(),
            }),
            v => Ok(v),
        }
    }

    /// The schema version of the open file (a read-only open of a version-1 store stays at 1).
    pub fn schema_version(&self) -> i64 {
        self.version
    }

    /// Read the schema version without writing anything. 0 is an empty database.
    fn check_schema_allow_empty(&self) -> Result<i64> {
        // One statement, so one snapshot: read separately, a store being created by another
        // process at this moment could show its tables but not yet its version.
        let (version, tables, has_jobs): (i64, i64, bool) = self
            .conn
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version),
                        (SELECT count(*) FROM sqlite_schema WHERE type = 'table'),
                        EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'jobs')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| open_error(&self.path, e))?;
        if version < 0 {
            return Err(Error::NotAStore {
                path: self.path.clone(),
                why: format!("its user_version is {version}, which no BackWave store has"),
            });
        }
        if version > SCHEMA_VERSION {
            return Err(Error::SchemaTooNew { path: self.path.clone(), found: version, supported: SCHEMA_VERSION });
        }
        if version == 0 && tables > 0 {
            return Err(Error::NotAStore {
                path: self.path.clone(),
                why: format!("it is an SQLite database with {tables} other table(s) and no BackWave schema"),
            });
        }
        if version > 0 && !has_jobs {
            return Err(Error::NotAStore {
                path: self.path.clone(),
                why: format!("user_version is {version} but there is no jobs table"),
            });
        }
        Ok(version)
    }

    fn set_pragmas(&self) -> Result<()> {
        if !self.read_only {
            // Switching a new file to WAL needs an exclusive lock. Two processes switching at
            // once deadlock on the upgrade, and SQLite then fails one at once instead of calling
            // the busy handler: retry it here, within the busy timeout.
            let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
            loop {
                match set_pragma(&self.conn, "journal_mode", "WAL", "wal") {
                    Err(Error::Busy) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    other => break other?,
                }
            }
        }
        set_pragma(&self.conn, "synchronous", "NORMAL", "1")?;
        // Without it the retention sweep would leave the deleted jobs' log behind.
        set_pragma(&self.conn, "foreign_keys", "ON", "1")?;
        // Statement journals (the page images a statement inside a larger transaction keeps so
        // that it alone can be undone: every multi-row insert of an enqueue) in memory: on a
        // file they spill past 64 KiB and an enqueue of 1,000 jobs spent 8 % of its time in
        // write(2) of pages it then threw away.
        set_pragma(&self.conn, "temp_store", "MEMORY", "2")?;
        let busy = BUSY_TIMEOUT.as_millis().to_string();
        set_pragma(&self.conn, "busy_timeout", &busy, &busy)?;
        // Room for every fixed statement plus the filters of a dashboard session.
        self.conn.set_prepared_statement_cache_capacity(128);
        // `rarray(?)`: how a claim and a batch of successes hand a statement their ids.
        rusqlite::vtab::array::load_module(&self.conn)?;
        Ok(())
    }
}

/// Set a pragma and read it back: SQLite ignores a misspelt pragma without a word.
fn set_pragma(conn: &Connection, name: &'static str, value: &str, expect: &str) -> Result<()> {
    // Some pragmas answer the assignment with the new value (journal_mode), most with no row.
    // Any other error (a lock while switching to WAL, say) is reported as itself.
    let set: Option<String> =
        match conn.query_row(&format!("PRAGMA {name} = {value}"), [], |r| r.get::<_, rusqlite::types::Value>(0)) {
            Ok(v) => Some(value_text(v)),
            Err(rusqlite::Error::QueryReturnedNoRows) => None,
            Err(e) => return Err(e.into()),
        };
    let actual = match set {
        Some(v) => v,
        None => {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, rusqlite::types::Value>(0)).map(value_text)?
        }
    };
    if !actual.eq_ignore_ascii_case(expect) {
        return Err(Error::Pragma { name, wanted: expect.to_string(), actual });
    }
    Ok(())
}

fn value_text(v: rusqlite::types::Value) -> String {
    match v {
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Text(t) => t,
        other => format!("{other:?}"),
    }
}

struct RollbackOnDrop<'a>(&'a Connection);

impl Drop for RollbackOnDrop<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}
