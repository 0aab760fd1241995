//! Which backend a test runs on, and the PostgreSQL server the `::postgres` arms share (issue #12,
//! docs/postgres.md §4.12). `both_backends!` turns one test body into `name::sqlite` and
//! `name::postgres`; every fixture asks [`TestDb::new`] for its store instead of naming a file, so
//! a body runs unchanged on either. This module owns the test server's whole life: it never
//! touches a server it did not start except to create and drop its own `bw_…` schemas.
//!
//! The server: `BW_TEST_PG=<url>` when set (`.ci/run` starts one for the whole run). Otherwise
//! the first PostgreSQL test of a binary starts a throwaway cluster (`initdb` + `pg_ctl` on a
//! unix socket in `/tmp/bwpg…`, no TCP, `fsync=off`), as the `postgres` user when the tests run
//! as root (initdb refuses root). It is stopped by a reaper: a small `sh` started beside it that
//! blocks reading a pipe whose only writer is this test process, held open in a static. The
//! kernel closes that pipe however the process ends (a normal exit, a failed test's `exit(101)`,
//! Ctrl-C, SIGKILL), and the reaper then stops the cluster and removes its folder. Neither a
//! `Drop` of a static (never run) nor `atexit` (skipped by signals) covers all of those. The
//! reaper has its own process group, so the Ctrl-C that killed the tests does not kill it too.
//! Neither a URL nor binaries: every `::postgres` test fails with [`NO_SERVER`], never skips.
//!
//! Per test: a fresh schema `bw_<random>_<test name>` and a URL whose `options=-csearch_path=…`
//! puts every connection in it, so tests run in parallel and worker or `bw` child processes
//! share the test's store through `--db` / `BW_DB`. The schema is dropped with the [`TestDb`];
//! when the test failed it is kept, and its URL printed, for a look with `psql`.

use std::cell::Cell;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use backwave::store::{RawConnection, RawValue};
use backwave::StoreTarget;

/// What a PostgreSQL test says when there is no server to run on (one line, the fix in it).
/// The skip it suggests is the honest one: skipped tests are not counted as passed. (`cargo test
/// sqlite` would also filter out every test that runs on SQLite only.)
pub const NO_SERVER: &str = "no PostgreSQL for the tests: set BW_TEST_PG=postgres://… or install postgresql \
     (Debian: apt-get install postgresql); run everything else with `cargo test -- --skip ::postgres`";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

thread_local! {
    static CURRENT: Cell<Backend> = const { Cell::new(Backend::Sqlite) };
}

/// The backend this thread's test runs on: SQLite unless a `both_backends!` arm said otherwise.
pub fn current() -> Backend {
    CURRENT.with(Cell::get)
}

/// Puts this thread on a backend until dropped. libtest runs every test on a thread of its own,
/// except with `--test-threads=1`, where they share one: the guard keeps one test's backend from
/// leaking into the next.
#[must_use]
pub struct BackendGuard(Backend);

pub fn use_backend(backend: Backend) -> BackendGuard {
    BackendGuard(CURRENT.with(|c| c.replace(backend)))
}

impl Drop for BackendGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// `both_backends! { #[attrs] fn name() { body } … }` is `mod name { fn sqlite() fn postgres() }`,
/// each a `#[test]` running `body` with [`current`] set; attributes (`#[should_panic]`,
/// `#[ignore]`, doc comments) go to both arms.
///
/// Both arms share one snapshot file: insta would name an automatic snapshot after the arm
/// (`sqlite`) inside the module `name`, so a converted test names its snapshot as the file is
/// named, `insta::assert_snapshot!("cli__name", …)`, and the arms turn insta's module prefix
/// off ([`shared_snapshots`]).
#[allow(unused_macros)]
macro_rules! both_backends {
    ($($(#[$attr:meta])* fn $name:ident() $(-> $ret:ty)? $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$attr])*
            #[test]
            fn sqlite() $(-> $ret)? {
                let _backend = $crate::backend::use_backend($crate::backend::Backend::Sqlite);
                let _snapshots = $crate::backend::shared_snapshots();
                $body
            }

            $(#[$attr])*
            #[test]
            fn postgres() $(-> $ret)? {
                let _backend = $crate::backend::use_backend($crate::backend::Backend::Postgres);
                let _snapshots = $crate::backend::shared_snapshots();
                $body
            }
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use both_backends;

/// insta without its module prefix until dropped: a snapshot named `"cli__name"` in either arm
/// of `both_backends!` is the one file `tests/snapshots/cli__name.snap`.
pub fn shared_snapshots() -> insta::internals::SettingsBindDropGuard {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.bind_to_scope()
}

/// A test's store: `<dir>/backwave.db` on SQLite, a fresh schema on PostgreSQL. Pass it (or
/// [`TestDb::target`]) wherever a store target goes, and [`TestDb::arg`] to `--db` / `BW_DB`.
pub struct TestDb {
    target: StoreTarget,
    /// The target as `--db` takes it: unlike `StoreTarget`'s `Display`, not redacted.
    arg: String,
    schema: Option<Schema>,
}

impl TestDb {
    /// A store target on [`current`]'s backend; nothing is created yet on SQLite, an empty
    /// schema on PostgreSQL.
    pub fn new(dir: &Path) -> TestDb {
        Self::named(dir, "backwave.db")
    }

    /// As [`TestDb::new`], the SQLite file named `file` (snapshots show its name).
    pub fn named(dir: &Path, file: &str) -> TestDb {
        match current() {
            Backend::Sqlite => Self::sqlite(dir.join(file)),
            Backend::Postgres => Self::postgres(),
        }
    }

    /// An SQLite file, whatever the thread's backend (tests about files).
    pub fn sqlite(path: PathBuf) -> TestDb {
        let arg = path.to_str().expect("test paths are UTF-8").to_string();
        TestDb { target: StoreTarget::File(path), arg, schema: None }
    }

    /// A fresh schema on the test server, whatever the thread's backend.
    pub fn postgres() -> TestDb {
        let schema = Schema::create(server());
        let arg = schema.url.clone();
        TestDb { target: StoreTarget::from(arg.as_str()), arg, schema: Some(schema) }
    }

    pub fn backend(&self) -> Backend {
        match self.schema {
            None => Backend::Sqlite,
            Some(_) => Backend::Postgres,
        }
    }

    pub fn target(&self) -> StoreTarget {
        self.target.clone()
    }

    /// What `--db` and `BW_DB` take for this store.
    pub fn arg(&self) -> &str {
        &self.arg
    }

    /// The SQLite file; panics on PostgreSQL (a test about files that ran on the wrong backend).
    pub fn file(&self) -> &Path {
        self.target.file().expect("an SQLite-only test asked for the file of a PostgreSQL store")
    }

    /// The PostgreSQL schema's name (`None` on SQLite).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_ref().map(|s| s.name.as_str())
    }
}

/// Every row of `sql` read with the database's own client, not through the store under test:
/// `RawConnection` (plain rusqlite) on SQLite, a `backwave::postgres::Client` on PostgreSQL. Columns come
/// back as SQLite would type them: ids and JSON as text, booleans as 0/1.
pub fn plain_query(db: &TestDb, sql: &str) -> Vec<Vec<RawValue>> {
    if db.schema.is_none() {
        let conn = RawConnection::open(db.file()).unwrap_or_else(|e| panic!("open {}: {e}", db.arg));
        return conn.query(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    use backwave::postgres::types::Type;
    let mut client = backwave::postgres::Client::connect(&db.arg, backwave::postgres::NoTls)
        .unwrap_or_else(|e| panic!("connect {}: {e}", db.target));
    let rows = client.query(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|i| {
                    let ty = row.columns()[i].type_().clone();
                    let get = |v: Option<RawValue>| v.unwrap_or(RawValue::Null);
                    match ty {
                        Type::INT2 => get(row.get::<_, Option<i16>>(i).map(|v| RawValue::Integer(v.into()))),
                        Type::INT4 => get(row.get::<_, Option<i32>>(i).map(|v| RawValue::Integer(v.into()))),
                        Type::INT8 => get(row.get::<_, Option<i64>>(i).map(RawValue::Integer)),
                        Type::BOOL => get(row.get::<_, Option<bool>>(i).map(|v| RawValue::Integer(v.into()))),
                        Type::FLOAT4 => get(row.get::<_, Option<f32>>(i).map(|v| RawValue::Real(v.into()))),
                        Type::FLOAT8 => get(row.get::<_, Option<f64>>(i).map(RawValue::Real)),
                        Type::BYTEA => get(row.get::<_, Option<Vec<u8>>>(i).map(RawValue::Blob)),
                        Type::UUID => get(row.get::<_, Option<uuid::Uuid>>(i).map(|v| RawValue::Text(v.to_string()))),
                        Type::JSON | Type::JSONB => {
                            get(row.get::<_, Option<serde_json::Value>>(i).map(|v| RawValue::Text(v.to_string())))
                        }
                        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                            get(row.get::<_, Option<String>>(i).map(RawValue::Text))
                        }
                        other => panic!("{sql}: column {i} is of type {other}, which plain_query does not read"),
                    }
                })
                .collect()
        })
        .collect()
}

/// Load an SQLite fixture (`fixtures/hostile.sql`: SQLite's SQL, written against `schema.sql`)
/// into the new store `db`. On PostgreSQL the fixture is built in a scratch SQLite store and its
/// rows copied across, table by table and column by column (the two schemas share table and
/// column names), each value cast from text by the column's own type; `job_counts` is left to
/// the store to keep, rows the new store already holds (default settings) are kept, and
/// generated sequences (the log's `seq`) are moved past the copied values.
pub fn load_sqlite_fixture(db: &TestDb, sql: &str) {
    let Some(schema) = &db.schema else {
        return backwave::Store::open(db).unwrap().raw_batch(sql).unwrap();
    };
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("fixture.db");
    backwave::Store::create(&file).unwrap().raw_batch(sql).unwrap();
    let source = RawConnection::open(&file).unwrap();
    let tables = source
        .query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'job_counts'
             ORDER BY name != 'jobs', name",
            &[],
        )
        .unwrap();
    let mut pg = backwave::postgres::Client::connect(&db.arg, backwave::postgres::NoTls).unwrap();
    let mut tx = pg.transaction().unwrap();
    for table in tables.iter().map(|r| r[0].as_str().to_string()) {
        let rows = source.query(&format!("SELECT * FROM {table}"), &[]).unwrap();
        if rows.is_empty() {
            continue;
        }
        let columns: Vec<String> = source
            .query(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"), &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().to_string())
            .collect();
        let types: std::collections::HashMap<String, String> = tx
            .query(
                "SELECT column_name, format_type(a.atttypid, a.atttypmod)
                 FROM information_schema.columns c
                 JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass
                                    AND a.attname = c.column_name
                 WHERE c.table_schema = $1 AND c.table_name = $2",
                &[&schema.name, &table],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        for row in &rows {
            let mut params: Vec<Box<dyn backwave::postgres::types::ToSql + Sync>> = Vec::new();
            let mut values = Vec::new();
            for (column, value) in columns.iter().zip(row) {
                let ty = types
                    .get(column)
                    .unwrap_or_else(|| panic!("the fixture's {table}.{column} has no column in the PostgreSQL schema"));
                let n = params.len() + 1;
                let (param, expr): (Box<dyn backwave::postgres::types::ToSql + Sync>, String) = match value {
                    RawValue::Null => (Box::new(None::<String>), format!("${n}::text::{ty}")),
                    RawValue::Integer(i) => (Box::new(i.to_string()), format!("${n}::text::{ty}")),
                    RawValue::Real(f) => (Box::new(f.to_string()), format!("${n}::text::{ty}")),
                    RawValue::Blob(b) if ty == "bytea" => (Box::new(b.clone()), format!("${n}::bytea")),
                    RawValue::Blob(b) => (Box::new(String::from_utf8(b.clone()).unwrap()), format!("${n}::text::{ty}")),
                    RawValue::Text(t) if ty == "bytea" => {
                        (Box::new(t.clone()), format!("convert_to(${n}::text, 'UTF8')"))
                    }
                    RawValue::Text(t) => (Box::new(t.clone()), format!("${n}::text::{ty}")),
                };
                params.push(param);
                values.push(expr);
            }
            let insert = format!(
                "INSERT INTO {table} ({}) OVERRIDING SYSTEM VALUE VALUES ({}) ON CONFLICT DO NOTHING",
                columns.join(", "),
                values.join(", ")
            );
            let refs: Vec<&(dyn backwave::postgres::types::ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
            tx.execute(&insert, &refs).unwrap_or_else(|e| panic!("copying a fixture row into {table}: {e:?}"));
        }
    }
    let generated = tx
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
             WHERE table_schema = $1 AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')",
            &[&schema.name],
        )
        .unwrap();
    for row in generated {
        let (table, column): (String, String) = (row.get(0), row.get(1));
        tx.execute(
            &format!("SELECT setval(pg_get_serial_sequence($1, $2), max({column})) FROM {table} HAVING count(*) > 0"),
            &[&table, &column],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

impl From<&TestDb> for StoreTarget {
    fn from(db: &TestDb) -> StoreTarget {
        db.target()
    }
}

impl AsRef<OsStr> for TestDb {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(&self.arg)
    }
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestDb({})", self.target)
    }
}

/// One test's schema on the test server, dropped with it (kept when the test failed).
struct Schema {
    name: String,
    /// The server's URL with the schema as `search_path`.
    url: String,
    server: &'static Server,
}

impl Schema {
    fn create(server: &'static Server) -> Schema {
        let name = schema_name(std::thread::current().name().unwrap_or("test"));
        let mut admin = server.connect();
        admin
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .unwrap_or_else(|e| panic!("creating schema {name} on {}: {}", server.shown(), why(&e)));
        let sep = if server.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}options=-csearch_path%3D{name}", server.url);
        Schema { name, url, server }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept the failed test's schema {} for a look: psql '{}'", self.name, self.url);
            return;
        }
        // A connection of the test still open (a worker thread winding down) would make DROP
        // wait for its locks: bounded, and a schema left behind is only litter in a test server.
        let dropped = backwave::postgres::Client::connect(&self.server.url, backwave::postgres::NoTls)
            .and_then(|mut c| c.batch_execute(&format!("SET lock_timeout = '10s'; DROP SCHEMA {} CASCADE", self.name)));
        if let Err(e) = dropped {
            eprintln!("could not drop the test schema {} on {}: {}", self.name, self.server.shown(), why(&e));
        }
    }
}

/// `bw_<10 random hex>_<the test's name>`, a lower-case identifier within PostgreSQL's 63 bytes.
/// The name (the end of the test path, `module__test__postgres`) says whose a kept schema is.
fn schema_name(test: &str) -> String {
    let random = uuid::Uuid::now_v7().simple().to_string();
    let mut name = format!("bw_{}_", &random[random.len() - 10..]);
    let test: String =
        test.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let room = 63 - name.len();
    name.push_str(&test[test.len().saturating_sub(room)..]);
    name
}

/// A driver error on one line with its causes (`backwave::postgres::Error`'s own text is often just
/// "db error" or "error connecting to server").
fn why(e: &backwave::postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

/// The test server: a URL of a database in which the tests may create schemas.
struct Server {
    url: String,
    /// Held, never written: its closing when this process ends tells the reaper to stop the
    /// cluster (`None` for a server given by `BW_TEST_PG`, which outlives the tests).
    _reaper: Option<ChildStdin>,
}

impl Server {
    fn connect(&self) -> backwave::postgres::Client {
        backwave::postgres::Client::connect(&self.url, backwave::postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to the test server {}: {}", self.shown(), why(&e)))
    }

    /// The URL with any password redacted.
    fn shown(&self) -> String {
        StoreTarget::from(self.url.as_str()).to_string()
    }
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The URL of the test server (for the benches, which make their own schemas).
#[allow(dead_code)] // the tests ask for schemas (`TestDb`); only benches/engine.rs calls this
pub fn server_url() -> &'static str {
    &server().url
}

/// The test server, started on first use; a test fails here with one line when there is none.
fn server() -> &'static Server {
    match SERVER.get_or_init(find_or_start) {
        Ok(server) => server,
        Err(why) => panic!("{why}"),
    }
}

fn find_or_start() -> Result<Server, String> {
    if let Some(url) = std::env::var_os("BW_TEST_PG") {
        let url = url.into_string().map_err(|u| format!("BW_TEST_PG is not UTF-8: {u:?}"))?;
        if url.trim().is_empty() {
            return Err(format!("BW_TEST_PG is empty; {NO_SERVER}"));
        }
        if url.contains("options=") {
            return Err(format!(
                "BW_TEST_PG={} sets `options`: the tests set options=-csearch_path themselves; drop it",
                StoreTarget::from(url.as_str())
            ));
        }
        return Ok(Server { url, _reaper: None });
    }
    let bin = postgres_bindir().ok_or_else(|| NO_SERVER.to_string())?;
    start_cluster(&bin)
}

/// The newest `/usr/lib/postgresql/<version>/bin` (Debian's layout), else `pg_config --bindir`.
pub fn postgres_bindir() -> Option<PathBuf> {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: Vec<u32> =
                e.file_name().to_str()?.split('.').map(str::parse).collect::<Result<_, _>>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .max()
        .map(|(_, bin)| bin);
    newest.or_else(|| {
        let out = Command::new("pg_config").arg("--bindir").stderr(Stdio::null()).output().ok()?;
        let bin = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some(bin)
    })
}

/// `initdb` + `pg_ctl start` of a cluster in a new `/tmp/bwpg…` folder, its reaper first.
fn start_cluster(bin: &Path) -> Result<Server, String> {
    // /tmp, not $TMPDIR: the `postgres` user must reach the folder, and a socket path must fit
    // in 107 bytes.
    let dir = tempfile::Builder::new()
        .prefix("bwpg")
        .tempdir_in("/tmp")
        .map_err(|e| format!("making a folder for the test cluster in /tmp: {e}"))?
        .keep();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let as_postgres = unsafe { libc::geteuid() } == 0;
    if as_postgres {
        let user = nix::unistd::User::from_name("postgres").ok().flatten().ok_or_else(|| {
            format!("the tests run as root and initdb refuses root, but there is no `postgres` user; {NO_SERVER}")
        })?;
        std::os::unix::fs::chown(&dir, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| format!("chown postgres {}: {e}", dir.display()))?;
    }
    let tool = |name: &str| {
        let mut cmd = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(name));
            c
        } else {
            Command::new(bin.join(name))
        };
        cmd.stdin(Stdio::null());
        cmd
    };
    let data = dir.join("data");

    // The reaper, before anything it would have to clean up exists.
    let mut stop = tool("pg_ctl");
    stop.arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]);
    let mut reaper = Command::new("sh");
    reaper
        .args(["-c", r#"dir=$1; shift; read -r _; "$@" >/dev/null 2>&1; rm -rf "$dir""#, "bw-test-pg-reaper"])
        .arg(&dir)
        .arg(stop.get_program())
        .args(stop.get_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut reaper, 0);
    let reaper = reaper.spawn().map_err(|e| format!("starting the test cluster's reaper (sh): {e}"))?.stdin;

    let run = |mut cmd: Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        // The folder goes with the reaper when this returns: quote the last words of each.
        let last = |text: &str| text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        let stderr = last(&String::from_utf8_lossy(&out.stderr));
        Err(format!("{what} failed ({}): {stderr} {}", out.status, last(&log)))
    };
    let mut initdb = tool("initdb");
    initdb.arg("-D").arg(&data).args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync"]);
    run(initdb, "initdb of the test cluster")?;
    let mut start = tool("pg_ctl");
    start.arg("-D").arg(&data).arg("-l").arg(dir.join("log")).args([
        "-w",
        "-o",
        &format!("-k {} -h '' -c fsync=off -c max_connections=300", dir.display()),
        "start",
    ]);
    run(start, "starting the test cluster (pg_ctl start)")?;

    let server =
        Server { url: format!("postgresql:///postgres?host={}&user=postgres", dir.display()), _reaper: reaper };
    backwave::postgres::Client::connect(&server.url, backwave::postgres::NoTls)
        .map_err(|e| format!("the test cluster in {} started but refuses connections: {}", dir.display(), why(&e)))?;
    Ok(server)
}
