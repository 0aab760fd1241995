//! How `bw` ends: the exit statuses (documented in the README), the error a command returns, and
//! the one function that maps one to the other. Nothing else in `bw` picks an exit status for an
//! error.

use crate::Error;

/// Done.
pub const OK: u8 = 0;
/// Some ids were refused or not found, or the actor lacks a permission.
pub const REFUSED: u8 = 1;
/// A usage error: bad flags, an unknown state, a malformed id, duration or payload.
pub const USAGE: u8 = 2;
/// The store is unavailable: missing, locked past the busy timeout, corrupt, read-only for a
/// write, out of disk space, or of an unknown schema version.
pub const STORE: u8 = 3;

/// Why a command did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Store(#[from] Error),
    /// Bad input that clap could not catch: quoted, with what is accepted.
    #[error("{0}")]
    Usage(String),
    /// The command ran but refused some of what it was asked (the message is already printed
    /// or is this text).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// No store at `--db`, said with the store it probably meant (exit 3, as a missing store).
    #[error("{0}")]
    NoStore(String),
}

/// The one place that maps errors to exit statuses.
pub fn exit_code(e: &CliError) -> u8 {
    match e {
        CliError::Usage(_) => USAGE,
        CliError::Refused(_) => REFUSED,
        CliError::Io(_) | CliError::NoStore(_) => STORE,
        CliError::Store(e) => match e {
            Error::StoreMissing { .. }
            | Error::NotAStore { .. }
            | Error::SchemaTooNew { .. }
            | Error::Corrupt { .. }
            | Error::Busy
            | Error::Unreachable { .. }
            | Error::ReadOnly { .. }
            | Error::DiskFull { .. }
            | Error::Pragma { .. }
            | Error::Database(_) => STORE,
            Error::PostgresNotBuilt { .. }
            | Error::InvalidPolicy(_)
            | Error::InvalidInput(_)
            | Error::PayloadTooLarge { .. }
            | Error::AmbiguousId { .. }
            | Error::Encode(_) => USAGE,
            Error::JobNotFound(_)
            | Error::WrongState { .. }
            | Error::PermissionDenied { .. }
            | Error::FailureDetailOff => REFUSED,
        },
    }
}

/// A closed pipe (`bw jobs list | head`) is a quiet success.
pub fn is_broken_pipe(e: &CliError) -> bool {
    matches!(e, CliError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}
