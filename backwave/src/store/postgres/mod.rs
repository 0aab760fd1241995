//! The PostgreSQL backend: one database that workers on several hosts share.
//!
//! This file owns the connection (settings set and read back, a broken connection replaced on
//! the next call), creating and checking the schema (`schema-postgres.sql`, under an advisory
//! lock), and the transaction helpers every operation goes through: [`PgStore::write`] (READ
//! COMMITTED, retried whole on a serialization failure or deadlock) and [`PgStore::read`] (one
//! REPEATABLE READ snapshot; inside [`PgStore::snapshot`], `snapshot.rs`, the one it holds open). Where SQLite's one writer made every decision alone, here each
//! operation locks exactly the rows it decides on (`FOR UPDATE`, `SKIP LOCKED` for claims and
//! reaps), so that two hosts never act twice on one job. Times come from the database clock
//! ([`Tx::now`]) unless a test pinned a manual clock. The operation groups live one per file,
//! named as their SQLite counterparts in `sqlite/`; the types they take and answer are in
//! `store/`, shared by both backends.

mod admin;
mod demo;
mod driver_error;
mod filter;
mod health;
mod in_tx;
mod incident;
mod jobs;
mod limit;
mod listen;
mod load;
mod log;
mod operator;
mod pause;
mod preview;
mod query;
mod raw;
mod row;
pub(crate) mod schedules;
mod snapshot;
mod tls;
mod workflow;

use std::cell::RefCell;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use postgres::types::{ToSql, Type};
use postgres::{Client, Config, IsolationLevel, NoTls, Row, Statement};

use self::driver_error::pg_error;
pub use self::in_tx::{enqueue_in_postgres, enqueue_in_tokio_postgres};
#[doc(hidden)]
pub use self::jobs::{
    CLAIM_SQL, HAND_BACK_SQL, HEARTBEAT_SQL, HEARTBEAT_WITH_PROGRESS_SQL, LAPSED_LOOK_SQL, SUCCEED_SQL,
    SUCCEED_WITH_OUTPUT_SQL,
};
pub(crate) use self::listen::PgListener;
use self::tls::{Connector, TlsSettings};
use super::{Clock, PostgresUrl, BUSY_TIMEOUT, SCHEMA_VERSION};
use crate::error::{Error, Result};
use crate::model::Millis;

/// The PostgreSQL contract, embedded verbatim: the top-level `schema-postgres.sql` (this crate
/// carries a byte-for-byte copy, see `SCHEMA_SQL`).
pub const SCHEMA_POSTGRES_SQL: &str = include_str!("../../../schema-postgres.sql");

/// How often a transaction that lost a serialization race or a deadlock is run again.
const RETRIES: usize = 8;
/// Statements kept prepared per connection; past this the cache starts over (filters built from
/// a dashboard session's input are the only unbounded source).
const STATEMENT_CACHE: usize = 256;

pub(crate) struct PgStore {
    url: PostgresUrl,
    config: Config,
    tls: TlsSettings,
    connector: Connector,
    /// `None` after the connection broke: the next call connects again.
    conn: RefCell<Option<Conn>>,
    clock: Clock,
    read_only: bool,
    /// Whether this role may read `transitions.failure_detail` (docs/postgres.md: only the store's
    /// owner may); when not, its type and size come from `bw_failure_detail_shapes`.
    detail_readable: bool,
    version: i64,
    lock_timeout: std::cell::Cell<Duration>,
    /// While [`PgStore::snapshot`] runs: the log's horizon read before its transaction began.
    /// Every read then joins that transaction (see `snapshot.rs`).
    snapshot: std::cell::Cell<Option<i64>>,
    /// Whether each session this store opens plans every prepared statement for its values
    /// (`plan_cache_mode = force_custom_plan`), so that [`Tx::query_planned`] can run its
    /// statements prepared: set by [`PgStore::with_custom_plans`] for the connections an engine
    /// claims on.
    custom_plans: bool,
}

struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.url).field("read_only", &self.read_only).finish()
    }
}

/// One transaction, with the connection's statement cache and the store's clock.
pub(crate) struct Tx<'a> {
    tx: Session<'a>,
    statements: &'a mut HashMap<String, Statement>,
    /// The session plans every prepared statement for its values (see
    /// [`PgStore::with_custom_plans`]).
    custom_plans: bool,
    clock: &'a Clock,
    now: Option<Millis>,
}

/// What a [`Tx`] runs its statements on: a transaction of its own, or the read snapshot that
/// [`PgStore::snapshot`] holds open on the connection (which it begins and ends itself).
pub(crate) enum Session<'a> {
    Own(postgres::Transaction<'a>),
    Joined(&'a mut Client),
}

impl Session<'_> {
    fn prepare(&mut self, sql: &str) -> std::result::Result<Statement, postgres::Error> {
        match self {
            Session::Own(t) => t.prepare(sql),
            Session::Joined(c) => c.prepare(sql),
        }
    }

    fn query(&mut self, s: &Statement, p: &[&(dyn ToSql + Sync)]) -> std::result::Result<Vec<Row>, postgres::Error> {
        match self {
            Session::Own(t) => t.query(s, p),
            Session::Joined(c) => c.query(s, p),
        }
    }

    /// `sql` as the unnamed statement, parameters of the types given: parsed, planned for these
    /// values and run in one round trip, the session's plan cache never consulted.
    fn query_typed(
        &mut self,
        sql: &str,
        p: &[(&(dyn ToSql + Sync), Type)],
    ) -> std::result::Result<Vec<Row>, postgres::Error> {
        match self {
            Session::Own(t) => t.query_typed(sql, p),
            Session::Joined(c) => c.query_typed(sql, p),
        }
    }

    fn query_typed_one(
        &mut self,
        sql: &str,
        p: &[(&(dyn ToSql + Sync), Type)],
    ) -> std::result::Result<Row, postgres::Error> {
        match self {
            Session::Own(t) => t.query_typed_one(sql, p),
            Session::Joined(c) => c.query_typed_one(sql, p),
        }
    }

    fn query_one(&mut self, s: &Statement, p: &[&(dyn ToSql + Sync)]) -> std::result::Result<Row, postgres::Error> {
        match self {
            Session::Own(t) => t.query_one(s, p),
            Session::Joined(c) => c.query_one(s, p),
        }
    }

    fn query_opt(
        &mut self,
        s: &Statement,
        p: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Option<Row>, postgres::Error> {
        match self {
            Session::Own(t) => t.query_opt(s, p),
            Session::Joined(c) => c.query_opt(s, p),
        }
    }

    fn execute(&mut self, s: &Statement, p: &[&(dyn ToSql + Sync)]) -> std::result::Result<u64, postgres::Error> {
        match self {
            Session::Own(t) => t.execute(s, p),
            Session::Joined(c) => c.execute(s, p),
        }
    }

    fn batch_execute(&mut self, sql: &str) -> std::result::Result<(), postgres::Error> {
        match self {
            Session::Own(t) => t.batch_execute(sql),
            Session::Joined(c) => c.batch_execute(sql),
        }
    }

    pub(crate) fn copy_in(&mut self, sql: &str) -> std::result::Result<postgres::CopyInWriter<'_>, postgres::Error> {
        match self {
            Session::Own(t) => t.copy_in(sql),
            Session::Joined(c) => c.copy_in(sql),
        }
    }

    /// Commit a transaction of its own; a joined one is ended by the snapshot that began it.
    pub(crate) fn commit(self) -> std::result::Result<(), postgres::Error> {
        match self {
            Session::Own(t) => t.commit(),
            Session::Joined(_) => Ok(()),
        }
    }
}

impl Tx<'_> {
    /// The transaction's time: the manual clock of a test, else the database's clock (the same
    /// for every call within one transaction), so that no host's clock decides a lease.
    pub(crate) fn now(&mut self) -> Result<Millis> {
        if let Some(now) = self.now {
            return Ok(now);
        }
        let now = match self.clock {
            Clock::Manual(_) => self.clock.now(),
            Clock::System => self.query_one("SELECT bw_now_ms()", &[])?.get(0),
        };
        self.now = Some(now);
        Ok(now)
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        if self.statements.len() >= STATEMENT_CACHE {
            self.statements.clear();
        }
        let s = self.tx.prepare(sql)?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub(crate) fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let s = self.statement(sql)?;
        Ok(self.tx.query(&s, params)?)
    }

    /// [`Tx::query`] for a statement whose plan must fit the values it runs with and the table as
    /// it is now, which a long-lived session runs again and again: the engine's batch statements
    /// over `jobs` (the claim, the completion, the heartbeat, the reap), and the pages, counts
    /// and log reads a dashboard or a follow repeats. A statement the session keeps prepared
    /// may, after five runs, be given a generic plan, made without its values and priced on the
    /// table as it was then: a worker that started on a near-empty queue kept, for its claim, a
    /// plan that reads and sorts every job, and once a burst of 300,000 arrived each claim of
    /// 1,000 took 1.3 s instead of 11 ms until an ANALYZE happened to replace it. So the
    /// statement is planned afresh on every run, one of two ways:
    /// - on the sessions an engine claims on ([`PgStore::with_custom_plans`]), which plan every
    ///   prepared statement for its values, it runs prepared: parsed once per session, planned
    ///   per run. Parsing the claim cost 0.15-0.2 ms a run, as much as its planning, on the path
    ///   from an enqueue to its job's start;
    /// - on any other session, whose single-row statements keep their cached plans (`enqueue`,
    ///   an attempt's end: a primary key lookup has one good plan), it runs as the unnamed
    ///   statement, parsed, bound and run in one round trip; the cached one only lends its
    ///   parameter types.
    pub(crate) fn query_planned(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        if self.custom_plans {
            return self.query(sql, params);
        }
        let typed = self.typed(sql, params)?;
        Ok(self.tx.query_typed(sql, &typed)?)
    }

    /// [`Tx::query_planned`] for a statement that returns exactly one row.
    pub(crate) fn query_planned_one(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        if self.custom_plans {
            let s = self.statement(sql)?;
            return Ok(self.tx.query_one(&s, params)?);
        }
        let typed = self.typed(sql, params)?;
        Ok(self.tx.query_typed_one(sql, &typed)?)
    }

    /// `params` with the types the server gave them when the session prepared `sql`.
    fn typed<'p>(
        &mut self,
        sql: &str,
        params: &[&'p (dyn ToSql + Sync)],
    ) -> Result<Vec<(&'p (dyn ToSql + Sync), Type)>> {
        let s = self.statement(sql)?;
        Ok(params.iter().zip(s.params()).map(|(p, t)| (*p, t.clone())).collect())
    }

    pub(crate) fn query_one(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        let s = self.statement(sql)?;
        Ok(self.tx.query_one(&s, params)?)
    }

    pub(crate) fn query_opt(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>> {
        let s = self.statement(sql)?;
        Ok(self.tx.query_opt(&s, params)?)
    }

    pub(crate) fn execute(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let s = self.statement(sql)?;
        Ok(self.tx.execute(&s, params)?)
    }

    /// Several statements of SQL text, without parameters.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.tx.batch_execute(sql)?)
    }

    /// Whether this transaction got the advisory lock `key` (released at its end): the way one
    /// host at a time runs a sweep or the counts fold, with nothing left behind if it dies.
    pub(crate) fn try_lock(&mut self, key: &str) -> Result<bool> {
        Ok(self.query_one("SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || $1))", &[&key])?.get(0))
    }
}

impl PgStore {
    /// Open an existing store: connect, read the schema version, refuse what is not a store.
    pub(crate) fn open(url: &PostgresUrl) -> Result<PgStore> {
        let mut store = Self::connect(url)?;
        store.version = match store.read_version()? {
            0 => {
                return Err(Error::NotAStore {
                    path: url.to_string().into(),
                    why: "the database has no BackWave schema (create a store with `Store::create`)".into(),
                })
            }
            v if v < SCHEMA_VERSION && !store.read_only => store.migrate()?,
            v => v,
        };
        Ok(store)
    }

    /// Create the schema in an empty database (or schema of the search path), or open the
    /// store there. Two processes creating one store at once apply it once: the version is
    /// read again under an advisory lock before anything is written.
    pub(crate) fn create(url: &PostgresUrl) -> Result<PgStore> {
        let mut store = Self::connect(url)?;
        if store.read_version()? == 0 {
            if store.read_only {
                return Err(Error::ReadOnly { why: format!("'{url}' cannot be written by this role") });
            }
            store.write(|tx| {
                tx.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':schema'))", &[])?;
                if empty_or_version(tx, url)? == 0 {
                    tx.batch(SCHEMA_POSTGRES_SQL)?;
                }
                Ok(())
            })?;
        }
        store.version = match store.read_version()? {
            v if v < SCHEMA_VERSION && !store.read_only => store.migrate()?,
            v => v,
        };
        Ok(store)
    }

    /// Bring an older store up to [`SCHEMA_VERSION`], one step a transaction, each running the
    /// statements `schema-postgres.sql` marks for it (`-- migration N begin/end`; the step sets
    /// the version row itself, so the file applied whole by psql is the newest schema too).
    /// The version is read again under the schema's advisory lock: processes opening one old
    /// store at once migrate it once. Returns the version afterwards.
    fn migrate(&self) -> Result<i64> {
        loop {
            let version = self
                .write(|tx| {
                    tx.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':schema'))", &[])?;
                    let version = empty_or_version(tx, &self.url)?;
                    if version >= SCHEMA_VERSION {
                        return Ok(version);
                    }
                    let to = version + 1;
                    let sql = crate::store::migrate::step_sql(SCHEMA_POSTGRES_SQL, to);
                    if sql.trim().is_empty() {
                        return Err(Error::NotAStore {
                            path: self.url.to_string().into(),
                            why: format!("this build has no migration from schema version {version} to {to}"),
                        });
                    }
                    tx.batch(sql)?;
                    match empty_or_version(tx, &self.url)? {
                        now if now == to => Ok(to),
                        now => Err(Error::NotAStore {
                            path: self.url.to_string().into(),
                            why: format!("migration {to} left the schema at version {now}"),
                        }),
                    }
                })
                .map_err(|e| match pg_error(&e).and_then(|d| d.code()) {
                    Some(c) if *c == postgres::error::SqlState::INSUFFICIENT_PRIVILEGE => Error::ReadOnly {
                        why: format!(
                            "'{}' is at an older schema version and this role may not migrate it: open it once as \
                             the schema's owner (`Store::open` with the owner's URL)",
                            self.url
                        ),
                    },
                    _ => e,
                })?;
            if version >= SCHEMA_VERSION {
                return Ok(version);
            }
        }
    }

    fn connect(url: &PostgresUrl) -> Result<PgStore> {
        let shown = url.to_string();
        let (raw, tls) = TlsSettings::from_url(url.secret()?, &shown)?;
        let mut config =
            Config::from_str(&raw).map_err(|e| Error::InvalidInput(format!("'{url}' is not a PostgreSQL URL: {e}")))?;
        if config.get_application_name().is_none() {
            config.application_name("backwave");
        }
        config.connect_timeout(Duration::from_secs(10));
        let connector = tls.connector(&config, &shown)?;
        let store = PgStore {
            url: url.clone(),
            config,
            tls,
            connector,
            conn: RefCell::new(None),
            clock: Clock::System,
            read_only: false,
            detail_readable: true,
            version: 0,
            lock_timeout: std::cell::Cell::new(BUSY_TIMEOUT),
            snapshot: std::cell::Cell::new(None),
            custom_plans: false,
        };
        blocking(|| store.ensure_connected())?;
        // A worker role may update some columns of `jobs` only (docs/postgres.md): any is enough to write.
        let (read_only, detail_readable): (bool, bool) = store.with_client(|c| {
            let r = c.query_one(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'
                        OR (to_regclass('jobs') IS NOT NULL AND NOT has_any_column_privilege('jobs', 'UPDATE')),
                        to_regclass('transitions') IS NULL
                        OR has_column_privilege('transitions', 'failure_detail', 'SELECT')",
                &[],
            )?;
            Ok((r.get(0), r.get(1)))
        })?;
        let mut store = store;
        (store.read_only, store.detail_readable) = (read_only, detail_readable);
        Ok(store)
    }

    /// The connection, opened (and its session settings applied and read back) if it is not.
    fn ensure_connected(&self) -> Result<()> {
        let mut slot = self.conn.borrow_mut();
        if slot.is_some() {
            return Ok(());
        }
        let connected = match &self.connector {
            Connector::Plain => self.config.connect(NoTls),
            Connector::Tls(tls) => self.config.connect(tls.clone()),
        };
        let mut client = connected.map_err(|e| Error::Unreachable {
            target: self.url.to_string(),
            why: self.tls.explain(connect_error(&e)),
        })?;
        let lock_ms = self.lock_timeout.get().as_millis();
        // A crashed or stopped `bw` must not pin row locks or the log's horizon: the server ends
        // a session idle inside a transaction after a minute.
        client.batch_execute(&format!(
            "SET lock_timeout = '{lock_ms}ms'; SET idle_in_transaction_session_timeout = '60s';
             SET client_min_messages = warning{}",
            if self.custom_plans { "; SET plan_cache_mode = force_custom_plan" } else { "" }
        ))?;
        let got: String = client.query_one("SHOW lock_timeout", &[])?.get(0);
        let expected = format_pg_ms(lock_ms);
        if got != expected {
            return Err(Error::Pragma { name: "lock_timeout", wanted: expected, actual: got });
        }
        *slot = Some(Conn { client, statements: HashMap::new() });
        Ok(())
    }

    /// Run `f` on the client outside a transaction (session settings, the schema check).
    fn with_client<T>(&self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        blocking(|| self.with_client_here(f))
    }

    fn with_client_here<T>(&self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        self.ensure_connected()?;
        let mut slot = self.conn.borrow_mut();
        let conn = slot.as_mut().expect("connected above");
        let out = f(&mut conn.client);
        if out.as_ref().is_err_and(is_broken) || conn.client.is_closed() {
            *slot = None;
        }
        out
    }

    /// The schema version, 0 for an empty database; refuses a database that holds other
    /// tables, or a version this build does not know.
    fn read_version(&self) -> Result<i64> {
        self.read(|tx| empty_or_version(tx, &self.url))
    }

    /// Run `f` in one READ COMMITTED transaction, committing everything or nothing. `f` locks
    /// the rows it decides on. A serialization failure or deadlock runs it again from the start
    /// (so `f` may run more than once: it must not have effects outside the transaction).
    pub(crate) fn write<T>(&self, f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        if self.read_only {
            return Err(Error::ReadOnly { why: format!("'{}' cannot be written by this role or server", self.url) });
        }
        self.write_anyway(f)
    }

    /// [`PgStore::write`] for a role that may not update jobs: a reveal, whose one write is the
    /// audit row a SECURITY DEFINER function makes for it. A replica still refuses it.
    pub(crate) fn write_anyway<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.transaction(IsolationLevel::ReadCommitted, false, &mut f) {
                Err(e) if tries < RETRIES && is_retryable(&e) => continue,
                other => return other,
            }
        }
    }

    /// Run `f`, which issues exactly one statement, outside any explicit transaction: the server
    /// commits it by itself, one round trip where `BEGIN`, the statement and `COMMIT` take three.
    /// A single statement is atomic on its own; only for such. A statement the server rolled
    /// back as a serialization failure or deadlock runs again, as [`PgStore::write`] runs a
    /// transaction again (so `f` must not have effects outside it).
    pub(crate) fn autocommit<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        if self.read_only {
            return Err(Error::ReadOnly { why: format!("'{}' cannot be written by this role or server", self.url) });
        }
        if self.snapshot.get().is_some() {
            return Err(Error::ReadOnly { why: "a write was asked for inside a read snapshot".into() });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match self.alone(&mut f) {
                Err(e) if tries < RETRIES && is_retryable(&e) => continue,
                other => return other,
            }
        }
    }

    /// [`PgStore::autocommit`] for one statement that only reads: a single statement sees one
    /// snapshot by itself, so it needs no transaction of its own (inside [`PgStore::snapshot`] it
    /// joins that one).
    pub(crate) fn read_one<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        if self.snapshot.get().is_some() {
            return self.joined(true, &mut f);
        }
        self.alone(&mut f)
    }

    fn alone<T>(&self, f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        blocking(|| {
            self.ensure_connected()?;
            self.on_session(&mut self.conn.borrow_mut(), f)
        })
    }

    /// `f` on the open connection in `slot`, in no transaction of its own (one statement, or the
    /// read snapshot's transaction); a connection found broken afterwards is dropped, so that the
    /// next call connects again.
    fn on_session<T>(&self, slot: &mut Option<Conn>, f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let Conn { client, statements } = slot.as_mut().expect("a connection is open");
        let out = f(&mut Tx {
            tx: Session::Joined(client),
            statements,
            custom_plans: self.custom_plans,
            clock: &self.clock,
            now: None,
        });
        if out.as_ref().is_err_and(is_broken) || slot.as_ref().is_some_and(|c| c.client.is_closed()) {
            *slot = None;
        }
        out
    }

    /// Whether [`PgStore::snapshot`] holds a read snapshot open on the connection now.
    pub(crate) fn in_snapshot(&self) -> bool {
        self.snapshot.get().is_some()
    }

    /// Run `f` in one read-only REPEATABLE READ transaction: several queries, one snapshot.
    pub(crate) fn read<T>(&self, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.transaction(IsolationLevel::RepeatableRead, true, &mut f)
    }

    fn transaction<T>(
        &self,
        level: IsolationLevel,
        read_only: bool,
        f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        blocking(|| self.transaction_here(level, read_only, f))
    }

    fn transaction_here<T>(
        &self,
        level: IsolationLevel,
        read_only: bool,
        f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        if self.snapshot.get().is_some() {
            return self.joined(read_only, f);
        }
        self.ensure_connected()?;
        let mut slot = self.conn.borrow_mut();
        let Conn { client, statements } = slot.as_mut().expect("connected above");
        let out = (|| {
            let tx = client.build_transaction().isolation_level(level).read_only(read_only).start()?;
            let mut tx =
                Tx { tx: Session::Own(tx), statements, custom_plans: self.custom_plans, clock: &self.clock, now: None };
            let value = f(&mut tx)?;
            tx.tx.commit()?;
            Ok(value)
        })();
        if out.as_ref().is_err_and(is_broken) || slot.as_ref().is_some_and(|c| c.client.is_closed()) {
            *slot = None;
        }
        out
    }

    pub(crate) fn url(&self) -> &PostgresUrl {
        &self.url
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The same store, for an engine's claiming work: its sessions plan every prepared statement
    /// for its values (`plan_cache_mode = force_custom_plan`), so the batch statements run prepared
    /// (see [`Tx::query_planned`]): the session open now, and any opened later.
    pub fn with_custom_plans(mut self) -> Result<Self> {
        self.custom_plans = true;
        // A session opened from now on is set as it connects; only one open already needs it.
        if self.conn.borrow().is_some() {
            self.with_client(|c| Ok(c.batch_execute("SET plan_cache_mode = force_custom_plan")?))?;
        }
        Ok(self)
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// The columns `row::transition` reads, as this role may read them.
    pub(crate) fn transition_columns(&self) -> &'static str {
        row::transition_columns(self.detail_readable)
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn schema_version(&self) -> i64 {
        self.version
    }

    /// How long a statement waits for another transaction's row lock: `lock_timeout`, set on
    /// this session now and on every reconnect.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        crate::store::check_busy_timeout(timeout)?;
        self.lock_timeout.set(timeout);
        let ms = timeout.as_millis();
        self.with_client(|c| Ok(c.batch_execute(&format!("SET lock_timeout = '{ms}ms'"))?))
    }

    /// BackWave's own invariants (the server keeps its storage): the counts equal a count of
    /// the jobs, every log entry names a job (the rule migration 12's triggers keep), and the
    /// schema's version row is there.
    pub fn check_integrity(&self) -> Result<Vec<String>> {
        self.read(|tx| {
            let mut problems = Vec::new();
            for r in tx.query(
                "WITH counted AS (SELECT queue, state, count(*) AS n FROM jobs GROUP BY queue, state),
                      kept AS (SELECT queue, state, sum(n) AS n FROM (
                                   SELECT queue, state, n FROM job_counts
                                   UNION ALL SELECT queue, state, d FROM job_count_deltas) c
                               GROUP BY queue, state)
                 SELECT coalesce(c.queue, k.queue), coalesce(c.state, k.state),
                        coalesce(c.n, 0)::bigint, coalesce(k.n, 0)::bigint
                 FROM counted c FULL JOIN kept k ON c.queue = k.queue AND c.state = k.state
                 WHERE coalesce(c.n, 0) <> coalesce(k.n, 0)
                 ORDER BY 1, 2",
                &[],
            )? {
                let (queue, state, jobs, kept): (String, String, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3));
                problems.push(format!("job_counts says {kept} {state} job(s) in queue {queue}, but there are {jobs}"));
            }
            let orphans: i64 = tx
                .query_one(
                    "SELECT count(*) FROM transitions t WHERE NOT EXISTS (SELECT FROM jobs j WHERE j.id = t.job_id)",
                    &[],
                )?
                .get(0);
            if orphans > 0 {
                problems.push(format!("{orphans} log entries name a job that is not in jobs"));
            }
            let rows: i64 = tx.query_one("SELECT count(*) FROM backwave_schema", &[])?.get(0);
            if rows != 1 {
                problems.push(format!("backwave_schema has {rows} rows instead of one"));
            }
            Ok(problems)
        })
    }
}

/// 0 when the schema of the search path is empty, else the store's version; refuses anything
/// else there, and versions this build does not know.
fn empty_or_version(tx: &mut Tx<'_>, url: &PostgresUrl) -> Result<i64> {
    let not_a_store = |why: String| Error::NotAStore { path: url.to_string().into(), why };
    let r = tx.query_one(
        "SELECT to_regclass('backwave_schema') IS NOT NULL,
                (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')),
                current_schema()",
        &[],
    )?;
    let (has_version, tables, schema): (bool, i64, Option<String>) = (r.get(0), r.get(1), r.get(2));
    let Some(schema) = schema else {
        return Err(not_a_store("its search_path names no schema that exists".into()));
    };
    if !has_version {
        if tables > 0 {
            return Err(not_a_store(format!("schema '{schema}' holds {tables} other table(s) and no BackWave schema")));
        }
        return Ok(0);
    }
    let version: i64 = tx
        .query_opt("SELECT version FROM backwave_schema", &[])?
        .map(|r| r.get(0))
        .ok_or_else(|| not_a_store("its backwave_schema table is empty".into()))?;
    if version > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew { path: url.to_string().into(), found: version, supported: SCHEMA_VERSION });
    }
    Ok(version)
}

/// Run `f`, which blocks on the `postgres` crate's own runtime, so that it may: on a worker
/// thread of a multi-threaded tokio runtime (an application calling the sync `Store` from
/// `async fn main`) through `block_in_place`, which hands the thread's other tasks to the rest
/// of the pool; anywhere else as it is (the engine's threads, `spawn_blocking`, no runtime).
/// Without it the driver panicked ("Cannot start a runtime from within a runtime") where the
/// same code on SQLite worked. A current-thread runtime cannot lend its only thread: there, use
/// `AsyncStore`.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(feature = "tokio")]
    if tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
    {
        return tokio::task::block_in_place(f);
    }
    f()
}

impl Drop for PgStore {
    /// Closing the connection blocks on the driver's runtime too (see [`blocking`]).
    fn drop(&mut self) {
        let conn = self.conn.get_mut().take();
        blocking(move || drop(conn));
    }
}

/// How PostgreSQL shows a `lock_timeout` of `ms` milliseconds.
fn format_pg_ms(ms: u128) -> String {
    match ms {
        0 => "0".into(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}min", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// Why a connection failed, in one line: the server's message (a failed login, a database that
/// does not exist), else the client's (no server at that socket or address).
fn connect_error(e: &postgres::Error) -> String {
    let why = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    };
    why.lines().next().unwrap_or_default().to_string()
}

/// A serialization failure or deadlock: the transaction lost a race and may simply run again.
fn is_retryable(e: &Error) -> bool {
    use postgres::error::SqlState;
    pg_error(e)
        .and_then(|e| e.code())
        .is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

/// The `jobs_unique` index refused a row: another job holds its unique key.
pub(crate) fn is_unique_violation(e: &Error) -> bool {
    pg_error(e).and_then(|e| e.as_db_error()).is_some_and(|db| {
        *db.code() == postgres::error::SqlState::UNIQUE_VIOLATION && db.constraint() == Some("jobs_unique")
    })
}

/// `text` as an SQL string constant, for the rare statement that names a value in its text
/// rather than as a parameter (one whose plan should be kept: see `jobs::time_and_pauses`). An
/// escape string (`E'…'`), so that its backslashes mean the same whatever the server's
/// `standard_conforming_strings`; the text's quotes and backslashes are doubled.
pub(crate) fn text_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    out.push_str("E'");
    for c in text.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// The connection is gone (server restart, network, `pg_terminate_backend`).
fn is_broken(e: &Error) -> bool {
    matches!(e, Error::Unreachable { .. }) || e.is_connection_lost()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_timeouts_are_spelled_as_postgres_shows_them() {
        assert_eq!(format_pg_ms(5000), "5s");
        assert_eq!(format_pg_ms(1500), "1500ms");
        assert_eq!(format_pg_ms(120_000), "2min");
        assert_eq!(format_pg_ms(0), "0");
    }

    #[test]
    fn a_text_literal_doubles_its_quotes_and_backslashes() {
        assert_eq!(text_literal("web-1"), "E'web-1'");
        assert_eq!(text_literal(r"o'brien\'; --"), r"E'o''brien\\''; --'");
        assert_eq!(text_literal(""), "E''");
    }
}
