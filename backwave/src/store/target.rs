//! Where a store lives: an SQLite file, or a PostgreSQL server named by a `postgres://` or
//! `postgresql://` URL (issue #12). This module owns telling the two apart, checking a URL's
//! shape, and showing a target in messages with its password replaced by `***`: nothing else
//! prints a target's raw text. A build without the `postgres` feature has no PostgreSQL
//! backend: opening or creating a URL target there is [`Error::PostgresNotBuilt`], and nothing
//! touches the filesystem for it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};

/// Where a store lives: what a program passes to [`Store::open`](crate::Store::open),
/// [`Store::create`](crate::Store::create) or [`Engine::new`](crate::Engine::new). Anything
/// path-like or a `&str`/`String` converts into it, so those take `"jobs.db"`, a `&Path` or
/// `"postgres://app@db/jobs"` alike.
///
/// A string is a URL when it starts with `postgres://` or `postgresql://` (scheme in any case),
/// and a path otherwise: a file literally named `postgres://x` is `./postgres://x`. A string that
/// starts with another scheme (`mysql://…`), or a URL with spaces around it, is refused rather
/// than taken for a file's name, its password redacted. A `Path` or `PathBuf` is always a path.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// An SQLite file.
    File(PathBuf),
    /// A PostgreSQL database (opened only with the `postgres` feature).
    Postgres(PostgresUrl),
}

/// A PostgreSQL connection URL. Its `Display` and `Debug` redact the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    raw: String,
    /// Why the URL does not parse (already redacted), when it was converted infallibly (`From`)
    /// rather than parsed: opening it reports this instead of a connection attempt.
    problem: Option<String>,
}

const SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

impl StoreTarget {
    /// The file of an SQLite target; a URL target is [`Error::PostgresNotBuilt`] (or the reason
    /// its URL does not parse).
    pub fn file(&self) -> Result<&Path> {
        match self {
            StoreTarget::File(path) => Ok(path),
            StoreTarget::Postgres(url) => Err(url.unsupported()),
        }
    }

    fn classify(s: &str) -> Option<usize> {
        SCHEMES
            .iter()
            .find(|scheme| s.len() >= scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme))
            .map(|s| s.len())
    }
}

impl PostgresUrl {
    /// The URL as given, password included: only for the driver (or a child process that must
    /// open the same store, through its environment), never for a message. A URL that does not
    /// parse is the one-line reason, quoted with its password redacted.
    pub fn secret(&self) -> Result<&str> {
        match &self.problem {
            Some(why) => Err(Error::InvalidInput(why.clone())),
            None => Ok(&self.raw),
        }
    }

    fn unsupported(&self) -> Error {
        match &self.problem {
            Some(why) => Error::InvalidInput(why.clone()),
            None => Error::PostgresNotBuilt { target: self.to_string() },
        }
    }

    /// Check the shape `scheme://[user[:password]@][host][:port][/dbname][?key=value&…]`.
    fn check(raw: &str, scheme_len: usize) -> Result<(), String> {
        let shown = redact(raw);
        let bad = |why: &str| Err(format!("'{shown}' is not a PostgreSQL URL: {why}"));
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad("it contains spaces or control characters (percent-encode them)");
        }
        if let Some(i) = raw.find('%') {
            let ok = raw[i..]
                .split('%')
                .skip(1)
                .all(|s| s.len() >= 2 && s.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit));
            if !ok {
                return bad("a '%' is not followed by two hex digits");
            }
        }
        let rest = &raw[scheme_len..];
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        // An '@' after the '?' with a ':' before it: a password holding a '?', which the server's
        // parser would cut there (and whose head it would then quote as a port).
        if before_query.contains(':') && !before_query.contains('@') && query.contains('@') {
            return bad("the user info holds a '?' (percent-encode it in a password as %3F)");
        }
        let host_part = match before_query.rfind('@') {
            Some(at) => &before_query[at + 1..],
            None => before_query,
        };
        let authority = host_part.split('/').next().unwrap_or("");
        // Several hosts are comma-separated, each with an optional port; IPv6 in brackets.
        for host in authority.split(',') {
            let port = if let Some(v6) = host.strip_prefix('[') {
                match v6.split_once(']') {
                    Some((_, after)) => after.strip_prefix(':'),
                    None => return bad("an IPv6 host is missing its ']'"),
                }
            } else {
                host.split_once(':').map(|(_, p)| p)
            };
            if let Some(port) = port {
                if port.parse::<u16>().map_or(true, |p| p == 0) {
                    return bad(&format!("the port '{port}' is not a number from 1 to 65535"));
                }
            }
        }
        Ok(())
    }
}

/// A PostgreSQL scheme without its `//` (`postgresql:app`): the scheme as written and the rest.
fn without_slashes(s: &str) -> Option<(&str, &str)> {
    ["postgresql:", "postgres:"]
        .iter()
        .find(|scheme| s.len() > scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme))
        .map(|scheme| s.split_at(scheme.len()))
}

/// What is not a URL but was meant for a server (see [`not_a_url_by_mistake`]), its password
/// replaced by `***` too: a URL missing its `//`, a libpq keyword string.
fn redact_mistaken(raw: &str) -> String {
    if let Some((head, rest)) = without_slashes(raw) {
        return redact(&format!("{head}//{rest}")).replacen("//", "", 1);
    }
    if !raw.to_ascii_lowercase().contains("password=") {
        return raw.to_string();
    }
    let tokens: Vec<String> = raw
        .split_whitespace()
        .map(|t| match t.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => t.to_string(),
        })
        .collect();
    tokens.join(" ")
}

/// The length of the scheme and `://` that `s` starts with, whatever the scheme (`mysql://`,
/// `sqlite://`): RFC 3986's, a letter then letters, digits, `+`, `-` or `.`.
fn any_scheme(s: &str) -> Option<usize> {
    let end = s.find("://")?;
    let mut scheme = s[..end].chars();
    let valid = scheme.next()?.is_ascii_alphabetic() && scheme.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some(end + 3)
}

/// `raw` with the password of its user info and any `password=` parameter replaced by `***`,
/// whatever its scheme, and with spaces before it.
fn redact(raw: &str) -> String {
    let (space, url) = raw.split_at(raw.len() - raw.trim_start().len());
    let Some(scheme_len) = StoreTarget::classify(url).or_else(|| any_scheme(url)) else { return redact_mistaken(raw) };
    let (head, rest) = url.split_at(scheme_len);
    let mut out = format!("{space}{head}");
    // The user info ends at the last '@': a password may hold an unencoded '@', '/' or '?', and
    // over-redacting beats printing part of a password. A user name holds none of those, so an
    // '@' after them is a query's, not the end of the user info.
    let userinfo = rest.rfind('@').map(|at| rest.split_at(at)).filter(|(info, _)| {
        let user = info.split_once(':').map_or(*info, |(user, _)| user);
        !user.contains(['/', '?'])
    });
    let rest = match userinfo {
        Some((info, after)) => {
            match info.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***")),
                None => out.push_str(info),
            }
            after
        }
        None => rest,
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    out.push_str(before_query);
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

impl FromStr for StoreTarget {
    type Err = Error;

    /// A URL that does not parse is [`Error::InvalidInput`], one line quoting it with its
    /// password redacted.
    fn from_str(s: &str) -> Result<Self> {
        // An empty one (an unset variable in a deploy script) names no store: it once read as a
        // file '' that did not exist.
        if s.trim().is_empty() {
            return Err(Error::InvalidInput(format!(
                "'{s}' names no store: give an SQLite file's path or a postgresql:// URL"
            )));
        }
        match StoreTarget::classify(s) {
            Some(scheme_len) => {
                PostgresUrl::check(s, scheme_len).map_err(Error::InvalidInput)?;
                Ok(StoreTarget::Postgres(PostgresUrl { raw: s.to_string(), problem: None }))
            }
            None => {
                not_a_url_by_mistake(s).map_err(Error::InvalidInput)?;
                Ok(StoreTarget::File(PathBuf::from(s)))
            }
        }
    }
}

/// The keywords of libpq's `key=value` connection strings.
const LIBPQ_KEYWORDS: [&str; 14] = [
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "sslmode",
    "sslrootcert",
    "service",
    "options",
    "application_name",
    "connect_timeout",
    "target_session_attrs",
];

/// Refuse, rather than take for a file name, what was meant for a PostgreSQL server: libpq's
/// keyword form (`dbname=app user=bw password=…`) and a URL missing its `//` (`postgresql:app`).
/// Found at 3 a.m.: both became SQLite file names, and the "no store" message printed the
/// password; `bw init` then created a file named after it.
fn not_a_url_by_mistake(s: &str) -> Result<(), String> {
    let trimmed = s.trim();
    if trimmed != s && (StoreTarget::classify(trimmed).is_some() || any_scheme(trimmed).is_some()) {
        return Err(format!("'{}' has spaces around it: give the URL without them", redact(s)));
    }
    if any_scheme(s).is_some() {
        let shown = redact(s);
        let file = if shown == s { format!("; a file of that name is ./{s}") } else { String::new() };
        return Err(format!(
            "'{shown}' is neither an SQLite file's path nor a postgresql:// URL (postgresql://HOST/DBNAME){file}"
        ));
    }
    let is_keyword =
        |t: &str| t.split_once('=').is_some_and(|(k, _)| LIBPQ_KEYWORDS.iter().any(|kw| kw.eq_ignore_ascii_case(k)));
    if !s.trim().is_empty() && s.split_whitespace().all(is_keyword) {
        return Err(format!(
            "'{}' is a libpq keyword string: give a postgresql:// URL (postgresql://USER@HOST:PORT/DBNAME, or \
             postgresql:///DBNAME?host=/run/postgresql for a local socket) or the path of an SQLite file",
            redact(s)
        ));
    }
    if let Some((head, _)) = without_slashes(s) {
        let shown = redact(s);
        let file = if shown == s { format!("; a file of that name is ./{s}") } else { String::new() };
        return Err(format!(
            "'{shown}' is not a PostgreSQL URL: '{head}' must be followed by '//' (postgresql://HOST/DBNAME, \
             or postgresql:///DBNAME for a local socket){file}"
        ));
    }
    Ok(())
}

impl fmt::Display for StoreTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreTarget::File(path) => write!(f, "{}", path.display()),
            StoreTarget::Postgres(url) => url.fmt(f),
        }
    }
}

impl fmt::Debug for StoreTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreTarget::File(path) => f.debug_tuple("File").field(path).finish(),
            StoreTarget::Postgres(url) => f.debug_tuple("Postgres").field(url).finish(),
        }
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.raw))
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", redact(&self.raw))
    }
}

/// Strings follow the URL-or-path rule; a URL that does not parse still converts, and opening it
/// reports why (with its password redacted).
impl From<&str> for StoreTarget {
    fn from(s: &str) -> Self {
        s.parse().unwrap_or_else(|e: Error| {
            StoreTarget::Postgres(PostgresUrl { raw: s.to_string(), problem: Some(e.to_string()) })
        })
    }
}

impl From<String> for StoreTarget {
    fn from(s: String) -> Self {
        StoreTarget::from(s.as_str())
    }
}

impl From<&String> for StoreTarget {
    fn from(s: &String) -> Self {
        StoreTarget::from(s.as_str())
    }
}

impl From<&Path> for StoreTarget {
    fn from(p: &Path) -> Self {
        StoreTarget::File(p.to_path_buf())
    }
}

impl From<PathBuf> for StoreTarget {
    fn from(p: PathBuf) -> Self {
        StoreTarget::File(p)
    }
}

impl From<&PathBuf> for StoreTarget {
    fn from(p: &PathBuf) -> Self {
        StoreTarget::File(p.clone())
    }
}

impl From<&StoreTarget> for StoreTarget {
    fn from(t: &StoreTarget) -> Self {
        t.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_urls_only_with_a_postgres_scheme_in_any_case() {
        let table: &[(&str, Option<&str>)] = &[
            // (input, Some(shown) for a URL, None for a path)
            ("postgres://u:secret@host/db", Some("postgres://u:***@host/db")),
            ("postgresql://u:secret@host:5432/db", Some("postgresql://u:***@host:5432/db")),
            ("POSTGRES://u:secret@host/db", Some("POSTGRES://u:***@host/db")),
            ("PostgreSQL://host/db", Some("PostgreSQL://host/db")),
            ("postgres://u@host/db", Some("postgres://u@host/db")),
            ("postgresql:///db?host=/run/postgresql", Some("postgresql:///db?host=/run/postgresql")),
            (
                "postgres://h/db?user=u&password=secret&sslmode=require",
                Some("postgres://h/db?user=u&password=***&sslmode=require"),
            ),
            ("postgres://u:p@ss/w@rd@[::1]:5433,h2:5434/db", Some("postgres://u:***@[::1]:5433,h2:5434/db")),
            ("./postgres://x", None),
            ("postgres", None),
            ("backwave.db", None),
            ("../stores/backwave.db", None),
            ("/var/lib/backwave/postgresql://x", None),
            ("./mysql://u:secret@h/db", None),
        ];
        for (input, shown) in table {
            let target: StoreTarget = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            match (shown, &target) {
                (Some(shown), StoreTarget::Postgres(_)) => {
                    assert_eq!(target.to_string(), *shown, "{input}");
                    assert!(!format!("{target:?}").contains("secret"), "{input}: {target:?}");
                    assert!(matches!(target.file(), Err(Error::PostgresNotBuilt { .. })), "{input}");
                }
                (None, StoreTarget::File(path)) => {
                    assert_eq!(path, Path::new(input));
                    assert_eq!(target.file().unwrap(), Path::new(input));
                    assert_eq!(target.to_string(), *input);
                }
                _ => panic!("{input} parsed as {target:?}"),
            }
            assert_eq!(StoreTarget::from(*input), target, "From<&str> and FromStr agree on {input}");
        }
    }

    #[test]
    fn a_libpq_keyword_string_or_a_url_without_slashes_is_refused_not_taken_for_a_file() {
        for (given, shown) in [
            (
                "dbname=walk3 user=postgres password=S3cretPW",
                "'dbname=walk3 user=postgres password=***' is a libpq keyword string",
            ),
            ("host=/run/postgresql dbname=app", "'host=/run/postgresql dbname=app' is a libpq keyword string"),
            ("postgresql:walk3", "'postgresql:walk3' is not a PostgreSQL URL: 'postgresql:' must be followed by '//'"),
            ("POSTGRES:u:S3cretPW@h/db", "'POSTGRES:u:***@h/db' is not a PostgreSQL URL"),
            ("postgres:/x", "'postgres:/x' is not a PostgreSQL URL"),
            // Another scheme, or a URL with a space before it: not a file name either, and the
            // password is not printed (found by an on-call's typo: "no store at" quoted it).
            ("mysql://alice:S3cretPW@host/db", "'mysql://alice:***@host/db' is neither an SQLite file's path"),
            ("sqlite://x.db", "'sqlite://x.db' is neither an SQLite file's path nor a postgresql:// URL"),
            ("pg://u:S3cretPW@h/db", "'pg://u:***@h/db' is neither"),
            (" postgres://u:S3cretPW@h/db", "' postgres://u:***@h/db' has spaces around it"),
        ] {
            let e = given.parse::<StoreTarget>().unwrap_err().to_string();
            assert!(e.contains(shown), "{given}: {e}");
            assert!(!e.contains("S3cretPW"), "{e}");
            // The library's infallible conversion opens nothing and says the same.
            let t = StoreTarget::from(given);
            assert!(!t.to_string().contains("S3cretPW") || matches!(t, StoreTarget::File(_)), "{t}");
            assert!(t.file().is_err(), "{given} became a file");
        }
        // An empty target names no store (an unset variable), rather than a file named ''.
        for empty in ["", "  "] {
            let e = empty.parse::<StoreTarget>().unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)) && e.to_string().contains("names no store"), "{e}");
            assert!(StoreTarget::from(empty).file().is_err());
        }
        // Files that only look a little like one stay files.
        for file in ["store.db", "data/host.db", "a=b.db", "./postgresql:walk3", "dbname"] {
            assert!(matches!(file.parse::<StoreTarget>(), Ok(StoreTarget::File(_))), "{file}");
        }
    }

    #[test]
    fn a_url_that_does_not_parse_is_one_line_quoting_it_with_the_password_redacted() {
        let table = [
            ("postgres://u:secret@h:99x/db", "'postgres://u:***@h:99x/db' is not a PostgreSQL URL: the port '99x'"),
            ("postgres://u:secret@h:0/db", "the port '0' is not a number"),
            ("postgres://u:secret@h:70000/db", "the port '70000' is not a number"),
            ("postgres://u:secret@[::1/db", "'postgres://u:***@[::1/db' is not a PostgreSQL URL: an IPv6 host"),
            ("postgres://u:sec ret@h/db", "'postgres://u:***@h/db' is not a PostgreSQL URL: it contains spaces"),
            ("postgres://u:secret@h/db%zz", "a '%' is not followed by two hex digits"),
            ("postgres://h/db?password=secret&x=%4", "'postgres://h/db?password=***&x=%4'"),
            ("POSTGRESQL://u:secret@h:x/db", "'POSTGRESQL://u:***@h:x/db'"),
            // A password with an unencoded '?' (the query seemed to start inside it).
            (
                "postgres://u:hun?secret@h/db",
                "'postgres://u:***@h/db' is not a PostgreSQL URL: the user info holds a '?'",
            ),
        ];
        for (input, wanted) in table {
            let e = input.parse::<StoreTarget>().expect_err(input);
            let msg = e.to_string();
            assert!(matches!(e, Error::InvalidInput(_)), "{input}: {e:?}");
            assert!(msg.contains(wanted), "{input}: {msg}");
            assert!(!msg.contains("secret") && !msg.contains('\n'), "{input}: {msg}");
            // Converted infallibly, the same message comes back when the target is opened.
            let from = StoreTarget::from(input);
            assert!(!format!("{from} {from:?}").contains("secret"), "{input}");
            assert_eq!(from.file().unwrap_err().to_string(), msg, "{input}");
        }
    }

    #[test]
    fn paths_always_convert_to_files_even_when_they_look_like_urls() {
        let p = Path::new("postgres://u:secret@h/db");
        assert_eq!(StoreTarget::from(p), StoreTarget::File(p.to_path_buf()));
        assert_eq!(StoreTarget::from(p.to_path_buf()), StoreTarget::File(p.to_path_buf()));
    }

    #[test]
    fn opening_creating_or_starting_an_engine_on_a_url_is_refused_before_anything_is_touched() {
        // No server behind that socket folder: a build with PostgreSQL fails to connect at once.
        let url = "postgresql://u:secret@/db?host=/nonexistent";
        let shown = "postgresql://u:***@/db?host=/nonexistent";
        let refused = |e: Error| {
            #[cfg(not(feature = "postgres"))]
            assert!(matches!(&e, Error::PostgresNotBuilt { target } if target == shown), "{e:?}");
            #[cfg(feature = "postgres")]
            assert!(matches!(&e, Error::Unreachable { target, .. } if target == shown), "{e:?}");
            assert!(!e.to_string().contains("secret"), "{e}");
        };
        refused(crate::Store::open(url).unwrap_err());
        refused(crate::Store::create(url).unwrap_err());
        refused(crate::Store::create(url.to_string()).unwrap_err());
        let mut engine = crate::Engine::new(url, crate::Registry::new());
        engine.add_worker_group(crate::WorkerGroup::new("g"));
        refused(engine.start().unwrap_err());
        // A relative URL-shaped path would have made a folder `postgresql:` here.
        assert!(!Path::new("postgresql:").exists());
    }
}
