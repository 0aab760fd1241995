//! How `bw` ends: the exit statuses (documented in docs/reference.md), the error a command returns, and
//! the one function that maps one to the other. Nothing else in `bw` picks an exit status for an
//! error.

use backwave::Error;

/// Done.
pub const OK: u8 = 0;
/// Some ids were refused or not found, nothing was there to undo, or the actor lacks a
/// permission.
pub const REFUSED: u8 = 1;
/// A usage error: bad flags, an unknown state, a malformed id, duration or payload.
pub const USAGE: u8 = 2;
/// The store is unavailable: missing, locked past the busy timeout, corrupt, read-only for a
/// write, out of disk space, or of an unknown schema version.
pub const STORE: u8 = 3;
/// `bw`'s own input or output failed: writing stdout (other than a closed pipe, which is a quiet
/// success), the terminal of `bw top`, `$EDITOR`'s file. The store is not to blame, so this is not
/// 3: a monitor or a script reading 3 as "the store is down" must not be told so by a full disk
/// under a redirected stdout.
pub const OUTPUT: u8 = 4;

/// Why a command did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The library's error, said with the `bw` command in place of each call its hint names.
    #[error("{}", crate::text::error_text(.0))]
    Store(#[from] Error),
    /// Bad input that clap could not catch: quoted, with what is accepted.
    #[error("{0}")]
    Usage(String),
    /// The command ran but refused some of what it was asked (the message is this text).
    #[error("{0}")]
    Refused(String),
    /// The command ran to its end but did not do all it was asked: some ids were refused or not
    /// found, an operator declined the confirmation, or there was nothing to undo (a resume of
    /// what is not paused, a `--clear` of no limit, a revoke of a permission not held). Its
    /// document on stdout says what it did and found; the note, when there is one, is said on
    /// stderr after it as `bw: NOTE` (not as an error).
    #[error("{}", .0.as_deref().unwrap_or("not everything asked was done"))]
    NotAllDone(Option<String>),
    #[error("bw's own input or output failed: {0}")]
    Io(#[from] std::io::Error),
    /// No store at `--db`, said with the store it probably meant (exit 3, as a missing store).
    #[error("{0}")]
    NoStore(String),
}

/// The one place that maps errors to exit statuses.
pub fn exit_code(e: &CliError) -> u8 {
    match e {
        CliError::Usage(_) => USAGE,
        CliError::Refused(_) | CliError::NotAllDone(_) => REFUSED,
        CliError::NoStore(_) => STORE,
        CliError::Io(_) => OUTPUT,
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

/// The end of a command that did not do all it was asked, with the line stderr says.
pub fn not_all_done(note: impl Into<String>) -> CliError {
    CliError::NotAllDone(Some(note.into()))
}

/// A closed pipe (`bw jobs list | head`) is a quiet success.
pub fn is_broken_pipe(e: &CliError) -> bool {
    matches!(e, CliError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}
