//! Bulk loading a new store: millions of rows written in one transaction, in seconds, for the
//! large-store generator behind `bw generate` (benchmarks, demos). It lives here because only
//! `store/` knows the schema: the caller hands over rows through [`Loader`], the same on either
//! backend, and each backend knows its columns, the indexes and triggers it may set aside for
//! the load, and how to put them back. This file owns the row types, the `Loader` and the
//! SQLite side; the PostgreSQL side (`COPY`) is `postgres/load.rs`.

use std::borrow::Cow;
use std::path::Path;
use std::rc::Rc;

use rusqlite::{params, Connection, Statement};

use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, JobState, Millis};

/// One job row to load. Shared text (a job's id, which its log repeats; a worker's id; a delay
/// table) is an `Rc<str>`, so a million rows do not copy it a million times.
#[derive(Clone, Debug)]
///
/// Each field is the `jobs` column of the same name in the store contract (`schema.sql`); see
/// [`Job`](crate::Job) for what each means. The loader writes them as given: the rows must
/// already be consistent (a Running job with a lease, a terminal one with `finished_at`).
pub struct JobRow {
    /// The job's id, hyphenated UUID text.
    pub id: Rc<str>,
    /// Its wire name.
    pub wire_name: Cow<'static, str>,
    /// Its queue.
    pub queue: Cow<'static, str>,
    /// The labels as a JSON object.
    pub labels: Cow<'static, str>,
    /// The payload's bytes.
    pub payload: Vec<u8>,
    /// Its state.
    pub state: JobState,
    /// Attempts begun.
    pub attempt: u32,
    /// The attempt budget, once claimed.
    pub max_attempts: Option<u32>,
    /// When it is (or was) due.
    pub due_at: Millis,
    /// The worker holding a Running job.
    pub lease_owner: Option<Rc<str>>,
    /// When a Running job's lease lapses.
    pub lease_expires_at: Option<Millis>,
    /// The group that claimed it.
    pub worker_group: Option<Cow<'static, str>>,
    /// The delay table as a JSON array of milliseconds.
    pub delay_table: Option<Rc<str>>,
    /// The operator who asked a Running job to stop.
    pub cancel_requested_by: Option<Cow<'static, str>>,
    /// Its fingerprint is computed here, as every other writer of the store does.
    pub terminal_cause: Option<String>,
    /// Spelled as schema.sql spells it (`no-handler`).
    pub quarantine_reason: Option<&'static str>,
    /// When it was enqueued.
    pub created_at: Millis,
    /// When its row last changed.
    pub updated_at: Millis,
    /// When it became terminal.
    pub finished_at: Option<Millis>,
}

/// One transition-log row to load. Rows must arrive in commit order (by `at`). Each field is
/// the `transitions` column of the same name; see [`Transition`](crate::Transition).
#[derive(Clone, Debug)]
pub struct TransitionRow {
    /// The job that moved (its id as text).
    pub job_id: Rc<str>,
    /// When.
    pub at: Millis,
    /// The state it left (`None` for its enqueue).
    pub from: Option<JobState>,
    /// The state it entered.
    pub to: JobState,
    /// Its attempt at the time.
    pub attempt: u32,
    /// The worker that moved it.
    pub worker_id: Option<Rc<str>>,
    /// The operator that moved it.
    pub actor: Option<Cow<'static, str>>,
    /// Why, in one line.
    pub reason: Option<Rc<str>>,
    /// The failure detail as JSON ([`FailureDetail`](crate::FailureDetail)).
    pub failure_detail: Option<String>,
    /// Spelled as schema.sql spells it (`captured`).
    pub detail_status: Option<&'static str>,
}

/// One registered worker to load; the fields are those of [`WorkerInfo`](crate::WorkerInfo).
#[derive(Clone, Debug)]
pub struct WorkerRow<'a> {
    /// The worker's id.
    pub id: &'a str,
    /// Its group's name.
    pub worker_group: &'a str,
    /// Its host.
    pub host: &'a str,
    /// Its process id.
    pub pid: u32,
    /// The wire names it handles.
    pub wire_names: &'a [&'a str],
    /// The queues it claims from.
    pub queues: &'a [&'a str],
    /// When it started.
    pub started_at: Millis,
    /// Its last heartbeat.
    pub last_heartbeat_at: Millis,
    /// How long after its last heartbeat it counts as gone.
    pub stale_after_ms: i64,
}

/// The rows of a load, handed to the closure of [`Store::create_loaded`](super::Store::create_loaded):
/// the same calls on either backend, each batching the rows its own way (SQLite's prepared
/// inserts, PostgreSQL's `COPY`).
pub struct Loader<'c> {
    rows: &'c mut (dyn LoadRows + 'c),
}

impl<'c> Loader<'c> {
    pub(super) fn new(rows: &'c mut (dyn LoadRows + 'c)) -> Self {
        Loader { rows }
    }

    /// Add one job (before any entry of its log). The row is written when its batch is; an
    /// error ends the load and nothing is committed.
    pub fn job(&mut self, row: JobRow) -> Result<()> {
        self.rows.job(row)
    }

    /// Log entries are numbered in the order they are handed over.
    pub fn transition(&mut self, row: TransitionRow) -> Result<()> {
        self.rows.transition(row)
    }

    /// Add one registered worker.
    pub fn worker(&mut self, w: &WorkerRow<'_>) -> Result<()> {
        self.rows.worker(w)
    }
}

/// What each backend's batcher does with the rows (the backend finishes the load itself). A
/// job comes before any entry of its log.
pub(super) trait LoadRows {
    fn job(&mut self, row: JobRow) -> Result<()>;
    fn transition(&mut self, row: TransitionRow) -> Result<()>;
    fn worker(&mut self, w: &WorkerRow<'_>) -> Result<()>;
}

/// The SQLite side: multi-row INSERTs on the new file's connection.
struct SqliteLoader<'c> {
    jobs: Batch<'c, JobRow>,
    log: Batch<'c, TransitionRow>,
    worker: Statement<'c>,
}

impl LoadRows for SqliteLoader<'_> {
    fn job(&mut self, row: JobRow) -> Result<()> {
        Ok(self.jobs.push(row, bind_job)?)
    }

    fn transition(&mut self, row: TransitionRow) -> Result<()> {
        Ok(self.log.push(row, bind_log)?)
    }

    fn worker(&mut self, w: &WorkerRow<'_>) -> Result<()> {
        self.worker.execute(params![
            w.id,
            w.worker_group,
            w.host,
            w.pid,
            serde_json::to_string(w.wire_names).map_err(Error::Encode)?,
            serde_json::to_string(w.queues).map_err(Error::Encode)?,
            w.started_at,
            w.last_heartbeat_at,
            w.stale_after_ms,
        ])?;
        Ok(())
    }
}

impl SqliteLoader<'_> {
    fn finish(mut self) -> Result<()> {
        self.jobs.finish(bind_job)?;
        self.log.finish(bind_log)?;
        Ok(())
    }
}

impl SqliteStore {
    /// Create a store at `path`, which must not exist, and fill it through `fill` in one
    /// transaction: on any error nothing is committed. `expected_jobs` sizes the page cache.
    /// The file left behind follows `schema.sql` exactly (WAL, every index, trigger and the
    /// exact per-queue counts).
    pub fn create_loaded<R>(
        path: &Path,
        expected_jobs: u64,
        fill: impl FnOnce(&mut Loader<'_>) -> Result<R>,
    ) -> Result<(SqliteStore, R)> {
        if path.exists() {
            return Err(Error::InvalidInput(format!(
                "'{}' already exists: generate refuses to touch it",
                path.display()
            )));
        }
        let store = SqliteStore::create(path)?;
        let conn = &store.conn;
        // One writer, a new file: a rollback journal writes each page once where WAL would write
        // it twice (log, then checkpoint); the store goes back to WAL before it is handed over.
        conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))?;
        // The foreign key and CHECK constraints cost a lookup or a GLOB per row: the loader's
        // callers keep them by construction, and tests/demo.rs runs integrity and foreign-key
        // checks on the generator's output. A page cache that holds the whole new file (about
        // 1.3 KB a job) means each page is written once, at commit.
        let cache_kib = (expected_jobs.saturating_mul(3) / 2).clamp(64 * 1024, 2 * 1024 * 1024);
        conn.execute_batch(&format!(
            "PRAGMA synchronous = OFF; PRAGMA cache_size = -{cache_kib}; PRAGMA temp_store = MEMORY;
             PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;"
        ))?;

        conn.execute_batch("BEGIN IMMEDIATE")?;
        let out = match load(conn, fill) {
            Ok(r) => {
                conn.execute_batch("COMMIT")?;
                r
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        };
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA ignore_check_constraints = OFF;
             PRAGMA cache_size = -2000;",
        )?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Pragma { name: "journal_mode", wanted: "wal".into(), actual: mode });
        }
        Ok((store, out))
    }
}

/// The whole load, inside the caller's transaction.
fn load<R>(conn: &Connection, fill: impl FnOnce(&mut Loader<'_>) -> Result<R>) -> Result<R> {
    // Secondary indexes and the job_counts triggers cost more than the rows themselves during a
    // bulk load: drop them, and recreate them from the very SQL schema.sql gave them.
    let derived: Vec<(String, String, String)> = conn
        .prepare(
            "SELECT type, name, sql FROM sqlite_schema
             WHERE type IN ('index', 'trigger') AND sql IS NOT NULL AND tbl_name IN ('jobs', 'transitions')",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (kind, name, _) in &derived {
        conn.execute_batch(&format!("DROP {} \"{name}\"", kind.to_uppercase()))?;
    }

    let mut loader = SqliteLoader {
        jobs: Batch::new(conn, JOB_INSERT, 20, 32)?,
        log: Batch::new(conn, LOG_INSERT, 10, 64)?,
        worker: conn.prepare(
            "INSERT INTO workers (id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at,
                                  stale_after_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?,
    };
    let out = fill(&mut Loader::new(&mut loader))?;
    loader.finish()?;

    // Indexes before triggers (the order schema.sql has them in), then the counts the triggers
    // would have kept, from one scan.
    for (kind, _, sql) in &derived {
        if kind == "index" {
            conn.execute_batch(sql)?;
        }
    }
    for (kind, _, sql) in &derived {
        if kind == "trigger" {
            conn.execute_batch(sql)?;
        }
    }
    conn.execute_batch(
        "DELETE FROM job_counts;
         INSERT INTO job_counts (queue, state, n) SELECT queue, state, count(*) FROM jobs GROUP BY queue, state;",
    )?;
    Ok(out)
}

const JOB_INSERT: &str = "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, attempt, max_attempts,
    due_at, lease_owner, lease_expires_at, worker_group, delay_table, cancel_requested_by, terminal_cause,
    cause_fingerprint, quarantine_reason, created_at, updated_at, finished_at) VALUES ";
const LOG_INSERT: &str = "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, actor,
    reason, failure_detail, detail_status) VALUES ";

fn bind_job(st: &mut Statement<'_>, base: usize, job: &JobRow) -> rusqlite::Result<()> {
    let fingerprint = job.terminal_cause.as_deref().map(cause_fingerprint);
    st.raw_bind_parameter(base + 1, &*job.id)?;
    st.raw_bind_parameter(base + 2, &*job.wire_name)?;
    st.raw_bind_parameter(base + 3, &*job.queue)?;
    st.raw_bind_parameter(base + 4, &*job.labels)?;
    st.raw_bind_parameter(base + 5, &job.payload[..])?;
    st.raw_bind_parameter(base + 6, job.state.as_str())?;
    st.raw_bind_parameter(base + 7, job.attempt)?;
    st.raw_bind_parameter(base + 8, job.max_attempts)?;
    st.raw_bind_parameter(base + 9, job.due_at)?;
    st.raw_bind_parameter(base + 10, job.lease_owner.as_deref())?;
    st.raw_bind_parameter(base + 11, job.lease_expires_at)?;
    st.raw_bind_parameter(base + 12, job.worker_group.as_deref())?;
    st.raw_bind_parameter(base + 13, job.delay_table.as_deref())?;
    st.raw_bind_parameter(base + 14, job.cancel_requested_by.as_deref())?;
    st.raw_bind_parameter(base + 15, job.terminal_cause.as_deref())?;
    st.raw_bind_parameter(base + 16, fingerprint)?;
    st.raw_bind_parameter(base + 17, job.quarantine_reason)?;
    st.raw_bind_parameter(base + 18, job.created_at)?;
    st.raw_bind_parameter(base + 19, job.updated_at)?;
    st.raw_bind_parameter(base + 20, job.finished_at)
}

fn bind_log(st: &mut Statement<'_>, base: usize, e: &TransitionRow) -> rusqlite::Result<()> {
    st.raw_bind_parameter(base + 1, &*e.job_id)?;
    st.raw_bind_parameter(base + 2, e.at)?;
    st.raw_bind_parameter(base + 3, e.from.map(JobState::as_str))?;
    st.raw_bind_parameter(base + 4, e.to.as_str())?;
    st.raw_bind_parameter(base + 5, e.attempt)?;
    st.raw_bind_parameter(base + 6, e.worker_id.as_deref())?;
    st.raw_bind_parameter(base + 7, e.actor.as_deref())?;
    st.raw_bind_parameter(base + 8, e.reason.as_deref())?;
    st.raw_bind_parameter(base + 9, e.failure_detail.as_deref())?;
    st.raw_bind_parameter(base + 10, e.detail_status)
}

/// Rows inserted `size` at a time through one multi-row INSERT: a statement per row costs
/// more than the row itself (and the log's AUTOINCREMENT touches sqlite_sequence once per
/// statement). The remainder goes through the one-row statement.
struct Batch<'c, T> {
    many: Statement<'c>,
    one: Statement<'c>,
    columns: usize,
    size: usize,
    rows: Vec<T>,
}

type Bind<T> = for<'a, 'b, 'c> fn(&'a mut Statement<'b>, usize, &'c T) -> rusqlite::Result<()>;

impl<'c, T> Batch<'c, T> {
    fn new(conn: &'c Connection, insert: &str, columns: usize, size: usize) -> rusqlite::Result<Self> {
        let tuple = |row: usize| {
            let marks: Vec<String> = (1..=columns).map(|c| format!("?{}", row * columns + c)).collect();
            format!("({})", marks.join(", "))
        };
        let many = (0..size).map(tuple).collect::<Vec<_>>().join(", ");
        Ok(Batch {
            many: conn.prepare(&format!("{insert}{many}"))?,
            one: conn.prepare(&format!("{insert}{}", tuple(0)))?,
            columns,
            size,
            rows: Vec::with_capacity(size),
        })
    }

    fn push(&mut self, row: T, bind: Bind<T>) -> rusqlite::Result<()> {
        self.rows.push(row);
        if self.rows.len() == self.size {
            for (i, r) in self.rows.iter().enumerate() {
                bind(&mut self.many, i * self.columns, r)?;
            }
            self.many.raw_execute()?;
            self.rows.clear();
        }
        Ok(())
    }

    fn finish(&mut self, bind: Bind<T>) -> rusqlite::Result<()> {
        for r in self.rows.drain(..) {
            bind(&mut self.one, 0, &r)?;
            self.one.raw_execute()?;
        }
        Ok(())
    }
}
