//! PostgreSQL's errors mapped onto the library's `Error`: a lock wait past `lock_timeout` is
//! `Error::Busy`, a read-only transaction `Error::ReadOnly`, a full disk `Error::DiskFull`,
//! anything else `Error::Database` quoting the server's message and SQLSTATE, marked
//! [`ConnectionLost`] when the connection to the server is gone, so that
//! [`Error::is_transient`] knows without asking the driver. The only place outside SQL where
//! the driver's error type is named (SQLite's is `sqlite/driver_error.rs`).

use crate::error::{ConnectionLost, Error};

/// A PostgreSQL error as `Error::Database` shows it: the server's own message and its SQLSTATE
/// (`canceling statement due to statement timeout (SQLSTATE 57014)`), or for an error of the
/// connection the client's message with its causes. The `postgres` crate's own `Display` is
/// only "db error" for every server error.
#[derive(Debug)]
pub(crate) struct PgError(pub(crate) postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(db) = self.0.as_db_error() {
            write!(f, "the server said: {} (SQLSTATE {})", one_line(db.message()), db.code().code())?;
            if let Some(detail) = db.detail() {
                write!(f, "; {}", one_line(detail))?;
            }
            if let Some(hint) = db.hint() {
                write!(f, "; hint: {}", one_line(hint))?;
            }
            return Ok(());
        }
        if self.0.is_closed() {
            // The server ended the session. Its reason (a FATAL message such as 57P01) is lost
            // when it arrives together with the end of the connection: the `postgres` crate's
            // blocking client then returns the end before the query that holds the reason
            // (`Connection::poll_block_on` in postgres 0.19), as it does on a loaded machine.
            return f.write_str(
                "the server closed the connection (an administrator, a restart or a failover: the server's log says which)",
            );
        }
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(&self.0);
        while let Some(s) = source {
            write!(f, ": {}", one_line(&s.to_string()))?;
            source = s.source();
        }
        Ok(())
    }
}

// No `source`: the message above already holds the driver's, which would only repeat it.
impl std::error::Error for PgError {}

/// The PostgreSQL driver's errors, mapped the same way: a lock wait past `lock_timeout` is
/// `Error::Busy`; a read-only transaction, a replica or a missing privilege `Error::ReadOnly`;
/// a full disk `Error::DiskFull`; a connection that cannot be made `Error::Unreachable` (in
/// `postgres/mod.rs`, which knows the target); anything else `Error::Database` quoting the
/// server.
impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        use postgres::error::SqlState;
        match e.code() {
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => Error::Busy,
            Some(c) if *c == SqlState::READ_ONLY_SQL_TRANSACTION || *c == SqlState::INSUFFICIENT_PRIVILEGE => {
                Error::ReadOnly { why: e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string()) }
            }
            Some(c) if *c == SqlState::DISK_FULL => Error::DiskFull { why: PgError(e).to_string() },
            _ if is_connection_lost(&e) => Error::Database(Box::new(ConnectionLost(Box::new(PgError(e))))),
            _ => Error::Database(Box::new(PgError(e))),
        }
    }
}

/// The connection to the server is gone (a restart, a failover, `pg_terminate_backend`, the
/// network): the next call connects again, so asking again later may succeed.
fn is_connection_lost(e: &postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"))
        // An I/O error on the socket (reset by the server going away).
        || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// The PostgreSQL driver's error behind one of ours, if any.
pub(crate) fn pg_error(e: &Error) -> Option<&postgres::Error> {
    match e {
        Error::Database(b) => {
            let driver: &(dyn std::error::Error + 'static) = match b.downcast_ref::<ConnectionLost>() {
                Some(lost) => &*lost.0,
                None => &**b,
            };
            driver.downcast_ref::<PgError>().map(|p| &p.0)
        }
        _ => None,
    }
}
