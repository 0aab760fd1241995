//! SQLite's errors mapped onto the library's `Error`: a busy or locked database is
//! `Error::Busy` (exit 3), a read-only one `Error::ReadOnly`, a full disk `Error::DiskFull`,
//! anything else `Error::Database` with the driver's message. The only place outside SQL where
//! the driver's error type is named (PostgreSQL's is `postgres/driver_error.rs`).

use crate::error::Error;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        if let rusqlite::Error::SqliteFailure(f, msg) = &e {
            match f.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => return Error::Busy,
                ErrorCode::ReadOnly => return Error::ReadOnly { why: msg.clone().unwrap_or_else(|| f.to_string()) },
                ErrorCode::DiskFull => return Error::DiskFull { why: e.to_string() },
                _ => {}
            }
        }
        Error::Database(Box::new(e))
    }
}

/// SQLite's generic "disk I/O error" (`SQLITE_IOERR`, any extended code): what it reports when
/// a write fails with ENOSPC outside the main file's pages, e.g. while sizing a new `-shm` file.
/// The caller, who knows the file, decides whether the disk is full (see `mod.rs`).
pub(crate) fn is_sqlite_io_error(e: &Error) -> bool {
    matches!(e, Error::Database(b) if b.downcast_ref::<rusqlite::Error>().is_some_and(|e| {
        matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::SystemIoFailure)
    }))
}
