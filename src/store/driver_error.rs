//! rusqlite's errors mapped onto the library's `Error`: a busy or locked database is
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
