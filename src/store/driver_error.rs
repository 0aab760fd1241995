//! The drivers' errors mapped onto the library's `Error`: a busy or locked database is
//! `Error::Busy` (exit 3), a read-only one `Error::ReadOnly`, anything else `Error::Database` with
//! the driver's message. The only place outside SQL where the driver's error type is named.

use crate::error::Error;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        if let rusqlite::Error::SqliteFailure(f, msg) = &e {
            match f.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => return Error::Busy,
                ErrorCode::ReadOnly => return Error::ReadOnly { why: msg.clone().unwrap_or_else(|| f.to_string()) },
                _ => {}
            }
        }
        Error::Database(Box::new(e))
    }
}

/// The PostgreSQL driver's errors, mapped the same way: a lock wait past `lock_timeout` is
/// `Error::Busy`; a read-only transaction, a replica or a missing privilege `Error::ReadOnly`;
/// a connection that cannot be made `Error::Unreachable` (in `postgres/mod.rs`, which knows the
/// target); anything else `Error::Database` with the server's message.
#[cfg(feature = "postgres")]
impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        use postgres::error::SqlState;
        match e.code() {
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => Error::Busy,
            Some(c) if *c == SqlState::READ_ONLY_SQL_TRANSACTION || *c == SqlState::INSUFFICIENT_PRIVILEGE => {
                Error::ReadOnly { why: e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string()) }
            }
            _ => Error::Database(Box::new(e)),
        }
    }
}
