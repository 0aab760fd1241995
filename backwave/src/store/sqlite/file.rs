//! The store's file on disk, before SQLite reads it: refusing what is not a BackWave store
//! byte-for-byte unchanged (text, empty, truncated, too new), telling a read-only file or folder
//! from a writable one, creating a new file readable by its owner and group only, and counting
//! this process's openers of each file. Nothing here runs SQL on a store's contents.

use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Stores this process has open, per file (device, inode): a file with any is never read
/// directly (see check_file).
static IN_USE: std::sync::Mutex<Vec<((u64, u64), usize)>> = std::sync::Mutex::new(Vec::new());

/// One open Store's share of [`IN_USE`], released when the Store drops.
pub(super) struct InUse(Option<(u64, u64)>);

impl InUse {
    pub(super) fn count(path: &Path) -> InUse {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(path) else { return InUse(None) };
        let mut in_use = IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        InUse::add(&mut in_use, (meta.dev(), meta.ino()))
    }

    /// Why the file at `path` is no longer the one counted here: removed, or another file
    /// renamed into its place (a new device and inode). `None` while it is the same file.
    pub(super) fn moved(&self, path: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let shown = path.display();
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!("'{shown}' was removed")),
            Err(e) => Some(format!("'{shown}' cannot be looked at: {e}")),
            Ok(m) if Some((m.dev(), m.ino())) != self.0 => {
                Some(format!("'{shown}' was replaced by another file (a new device and inode)"))
            }
            Ok(_) => None,
        }
    }

    fn add(in_use: &mut Vec<((u64, u64), usize)>, key: (u64, u64)) -> InUse {
        match in_use.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => in_use.push((key, 1)),
        }
        InUse(Some(key))
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let Some(key) = self.0 else { return };
        let mut in_use = IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = in_use.iter().position(|(k, _)| *k == key) {
            in_use[i].1 -= 1;
            if in_use[i].1 == 0 {
                in_use.swap_remove(i);
            }
        }
    }
}

/// Look at the file before SQLite does, so that a missing path is never created and a file
/// that is not a database is refused without a byte written to it.
pub(super) fn check_file(path: &Path) -> Result<InUse> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::StoreMissing { path: path.into() }),
        Err(e) => return Err(Error::NotAStore { path: path.into(), why: e.to_string() }),
    };
    if meta.is_dir() {
        return Err(Error::NotAStore { path: path.into(), why: "it is a directory".into() });
    }
    if meta.len() == 0 {
        return Err(Error::NotAStore { path: path.into(), why: "the file is empty (0 bytes)".into() });
    }
    // Closing any descriptor of a file drops every POSIX lock this process holds on it, the
    // locks of SQLite's own connections included: a second Store opened on a file that this
    // process already uses must not read it directly, or another process may checkpoint and
    // shrink the file under our connections (SQLITE_IOERR_SHORT_READ, or worse). So the header
    // is read only while this process has no Store open on the file, under the lock that
    // counts them (the file was checked when the first of them opened).
    use std::os::unix::fs::MetadataExt;
    let key = (meta.dev(), meta.ino());
    let mut in_use = IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    if in_use.iter().any(|(k, _)| *k == key) {
        return Ok(InUse::add(&mut in_use, key));
    }
    let mut header = [0u8; 100];
    let mut file = std::fs::File::open(path).map_err(|e| Error::NotAStore { path: path.into(), why: e.to_string() })?;
    let n =
        read_up_to(&mut file, &mut header).map_err(|e| Error::NotAStore { path: path.into(), why: e.to_string() })?;
    if n < 16 || &header[..16] != SQLITE_MAGIC {
        return Err(Error::NotAStore { path: path.into(), why: "it is not an SQLite database".into() });
    }
    if n < 100 {
        return Err(Error::Corrupt { path: path.into(), why: format!("truncated: the file is only {n} bytes") });
    }
    // The page count in the header is valid when its "version-valid-for" matches the change
    // counter; a file shorter than that many pages was cut off.
    let be32 = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536u64,
        p => p as u64,
    };
    let pages = be32(28) as u64;
    // A checkpoint writes page 1 first: cut off mid-way, the file is short but its WAL still
    // holds the missing pages and SQLite finishes the job. Only a file with no WAL is truncated.
    let wal_len = std::fs::metadata(sidecar(path, "-wal")).map(|m| m.len()).unwrap_or(0);
    if be32(92) == be32(24) && pages > 0 && meta.len() < pages * page_size && wal_len == 0 {
        return Err(Error::Corrupt {
            path: path.into(),
            why: format!("truncated: {} bytes where the header promises {}", meta.len(), pages * page_size),
        });
    }
    drop(file);
    Ok(InUse::add(&mut in_use, key))
}

/// `store.db` -> `store.db-wal`.
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

pub(super) fn is_writable(path: &Path) -> bool {
    // access(2), never open(2): closing a descriptor of the file would drop this process's
    // SQLite locks on it (see check_file).
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    // WAL needs to create `-wal` and `-shm` beside the file.
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    writable(path) && writable(dir)
}

pub(super) fn open_read_only(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
    // A WAL database in a folder we cannot write has no `-shm` to share: read it as immutable.
    if conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).is_err() {
        let uri = format!("file:{}?immutable=1", uri_path(path));
        return Connection::open_with_flags(uri, flags).map_err(|e| open_error(path, e));
    }
    Ok(conn)
}

/// A path as the path part of an SQLite `file:` URI: `?`, `#` and `%` would otherwise end or
/// escape it.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'?' | b'#' | b'%' => out.push_str(&format!("%{b:02X}")),
            b if b.is_ascii() && !b.is_ascii_control() => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub(super) fn create_private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match OpenOptions::new().write(true).create_new(true).mode(0o640).open(path) {
        Ok(_) => Ok(()),
        // Another process is creating the same store right now: join it (the schema is applied
        // under the write lock, once).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::NotAStore { path: path.into(), why: format!("cannot create it: {e}") }),
    }
}

/// Errors while opening, phrased for the file rather than the statement.
pub(super) fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        match f.code {
            ErrorCode::NotADatabase => {
                return Error::NotAStore { path: path.into(), why: "it is not an SQLite database".into() }
            }
            ErrorCode::DatabaseCorrupt => return Error::Corrupt { path: path.into(), why: e.to_string() },
            ErrorCode::CannotOpen => {
                return Error::NotAStore { path: path.into(), why: format!("cannot open it: {e}") }
            }
            _ => {}
        }
    }
    Error::from(e)
}
