//! Bulk loading a new store on SQLite: multi-row prepared INSERTs on the new file's
//! connection, in one transaction, the file's indexes and triggers as `schema.sql` writes them.
//! The row types and the `Loader` are `store/load.rs`.

use std::path::Path;

use rusqlite::{params, Connection, Statement};

use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, JobState};
use crate::store::load::{JobRow, LoadRows, Loader, TransitionRow, WorkerRow};

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
                "'{}' already exists: `Store::create_loaded` makes only a new store",
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
