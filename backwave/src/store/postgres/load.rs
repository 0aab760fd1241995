//! The bulk loader on PostgreSQL (`bw generate --db postgres://…`): a new store's schema and
//! every row in ONE transaction, so that a failed or killed load leaves the database as it was.
//!
//! This file owns how the rows travel and what is set aside while they do. Rows go through
//! `COPY … FROM STDIN (FORMAT binary)`, a few thousand per statement, a job batch always before
//! a log batch so that every entry finds its job. The secondary indexes are set aside for the
//! load and put back from the very definitions `schema-postgres.sql` gave them, and the log's
//! check that each entry's job exists (migration 12's statement trigger) is switched off and run
//! once over the whole log at the end: building an index once beats inserting into it row by row
//! (measured at 300,000 jobs on a busy 2-core machine, when the check was a foreign key: about
//! 17 s with both in place, 10 s without the key, 6 to 9 s without the indexes too). The count triggers stay: they fire once per `COPY`, which
//! cost nothing measurable against disabling them and counting with one `GROUP BY`, and the
//! deltas they append are folded into `job_counts` at the end, as any writer folds them. The
//! log's `seq` follows the order the rows were handed over (its identity default, row by row)
//! and its `xid` is the loading transaction's.

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use super::jobs::fold_counts;
use super::{empty_or_version, Conn, PgStore, Tx, SCHEMA_POSTGRES_SQL};
use crate::error::{Error, Result};
use crate::model::cause_fingerprint;
use crate::store::load::{JobRow, LoadRows, Loader, TransitionRow, WorkerRow};
use crate::store::PostgresUrl;

/// Jobs per `COPY` statement; a log batch holds about five entries per job.
const JOB_BATCH: usize = 4096;
const LOG_BATCH: usize = 4 * JOB_BATCH;

const JOB_COPY: &str = "COPY jobs (id, wire_name, queue, labels, payload, state, attempt, max_attempts, due_at,
    lease_owner, lease_expires_at, worker_group, delay_table, cancel_requested_by, terminal_cause, cause_fingerprint,
    quarantine_reason, created_at, updated_at, finished_at) FROM STDIN (FORMAT binary)";
const JOB_TYPES: [Type; 20] = [
    Type::UUID,
    Type::TEXT,
    Type::TEXT,
    Type::JSONB,
    Type::BYTEA,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::JSONB,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
];

const LOG_COPY: &str = "COPY transitions (job_id, at, from_state, to_state, attempt, worker_id, actor, reason,
    failure_detail, detail_status) FROM STDIN (FORMAT binary)";
const LOG_TYPES: [Type; 10] = [
    Type::UUID,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::JSON,
    Type::TEXT,
];

impl PgStore {
    /// Create a store in the schema of `url`'s search path, which must hold no BackWave store,
    /// and fill it through `fill`, all in one transaction: on any error nothing is committed.
    pub(crate) fn create_loaded<R>(
        url: &PostgresUrl,
        fill: impl FnOnce(&mut Loader<'_>) -> Result<R>,
    ) -> Result<(PgStore, R)> {
        let mut store = Self::connect(url)?;
        if store.read_only {
            return Err(Error::ReadOnly { why: format!("'{url}' cannot be written by this role or server") });
        }
        let out = {
            let mut slot = store.conn.borrow_mut();
            let Conn { client, statements } = slot.as_mut().expect("connect leaves a connection");
            let out = (|| {
                let tx = client.transaction()?;
                let mut tx = Tx {
                    tx: super::Session::Own(tx),
                    statements,
                    custom_plans: store.custom_plans,
                    clock: &store.clock,
                    now: None,
                };
                // As `create`: two creators of one store apply the schema once.
                tx.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':schema'))", &[])?;
                if empty_or_version(&mut tx, url)? != 0 {
                    return Err(Error::InvalidInput(format!(
                        "'{url}' already holds a BackWave store: `Store::create_loaded` makes only a new store"
                    )));
                }
                tx.batch(SCHEMA_POSTGRES_SQL)?;
                let aside = SetAside::take(&mut tx)?;
                let mut rows = PgLoader { tx, jobs: Vec::with_capacity(JOB_BATCH), log: Vec::with_capacity(LOG_BATCH) };
                let out = fill(&mut Loader::new(&mut rows))?;
                let mut tx = rows.finish()?;
                aside.restore(&mut tx)?;
                tx.tx.commit()?;
                Ok(out)
            })();
            if out.as_ref().is_err_and(super::is_broken) || client.is_closed() {
                *slot = None;
            }
            out?
        };
        store.version = store.read_version()?;
        Ok((store, out))
    }
}

/// What a load sets aside and puts back: the definitions, as the server prints them (names
/// quoted), of the secondary indexes of `jobs` and `transitions`, and the log's check that each
/// entry's job exists. One index build and one join at the end cost less than keeping them up
/// row by row.
struct SetAside {
    indexes: Vec<String>,
}

/// The statement trigger of `schema-postgres.sql` (migration 12) that checks each new log
/// entry's job.
const LOG_JOB_CHECK: &str = "transitions_job_insert";

impl SetAside {
    fn take(tx: &mut Tx<'_>) -> Result<SetAside> {
        let indexes = tx.query(
            "SELECT format('%I.%I', n.nspname, c.relname), pg_get_indexdef(i.indexrelid)
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE i.indrelid IN ('jobs'::regclass, 'transitions'::regclass) AND NOT i.indisprimary
             ORDER BY c.oid",
            &[],
        )?;
        let aside = SetAside { indexes: indexes.iter().map(|r| r.get(1)).collect() };
        for r in &indexes {
            tx.batch(&format!("DROP INDEX {}", r.get::<_, String>(0)))?;
        }
        tx.batch(&format!("ALTER TABLE transitions DISABLE TRIGGER {LOG_JOB_CHECK}"))?;
        Ok(aside)
    }

    fn restore(self, tx: &mut Tx<'_>) -> Result<()> {
        for sql in &self.indexes {
            tx.batch(sql)?;
        }
        tx.batch(&format!("ALTER TABLE transitions ENABLE TRIGGER {LOG_JOB_CHECK}"))?;
        // The trigger's rule over every entry loaded, in one join.
        if let Some(r) = tx.query_opt(
            "SELECT t.job_id::text FROM transitions t WHERE NOT EXISTS (SELECT FROM jobs j WHERE j.id = t.job_id) LIMIT 1",
            &[],
        )? {
            return Err(Error::InvalidInput(format!(
                "a log entry names job {}, which was not loaded; nothing was written",
                r.get::<_, String>(0)
            )));
        }
        fold_counts(tx)?;
        // Statistics now, not at autovacuum's next look: the first reads of a new store of a
        // million rows would otherwise be planned blind.
        tx.batch("ANALYZE jobs; ANALYZE transitions")
    }
}

/// The PostgreSQL batcher: rows wait in memory until a batch is full, then go in one `COPY`.
struct PgLoader<'c> {
    tx: Tx<'c>,
    jobs: Vec<(uuid::Uuid, JobRow)>,
    log: Vec<(uuid::Uuid, TransitionRow)>,
}

impl LoadRows for PgLoader<'_> {
    fn job(&mut self, row: JobRow) -> Result<()> {
        self.jobs.push((job_id(&row.id)?, row));
        if self.jobs.len() == JOB_BATCH {
            self.copy_jobs()?;
        }
        Ok(())
    }

    fn transition(&mut self, row: TransitionRow) -> Result<()> {
        self.log.push((job_id(&row.job_id)?, row));
        if self.log.len() == LOG_BATCH {
            // Every entry's job was handed over before it: copied now, if it is still waiting.
            self.copy_jobs()?;
            self.copy_log()?;
        }
        Ok(())
    }

    fn worker(&mut self, w: &WorkerRow<'_>) -> Result<()> {
        let wire_names = serde_json::to_value(w.wire_names).map_err(Error::Encode)?;
        let queues = serde_json::to_value(w.queues).map_err(Error::Encode)?;
        self.tx.execute(
            "INSERT INTO workers (id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at,
                                  stale_after_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &w.id,
                &w.worker_group,
                &w.host,
                &i64::from(w.pid),
                &wire_names,
                &queues,
                &w.started_at,
                &w.last_heartbeat_at,
                &w.stale_after_ms,
            ],
        )?;
        Ok(())
    }
}

impl<'c> PgLoader<'c> {
    /// The rows still waiting, copied; the transaction back, to finish the load in.
    fn finish(mut self) -> Result<Tx<'c>> {
        self.copy_jobs()?;
        self.copy_log()?;
        Ok(self.tx)
    }

    fn copy_jobs(&mut self) -> Result<()> {
        if self.jobs.is_empty() {
            return Ok(());
        }
        let mut copy = BinaryCopyInWriter::new(self.tx.tx.copy_in(JOB_COPY)?, &JOB_TYPES);
        for (id, j) in self.jobs.drain(..) {
            let fingerprint = j.terminal_cause.as_deref().map(cause_fingerprint);
            copy.write(&[
                &id,
                &j.wire_name,
                &j.queue,
                &JsonText(&j.labels),
                &j.payload,
                &j.state.as_str(),
                &i64::from(j.attempt),
                &j.max_attempts.map(i64::from),
                &j.due_at,
                &j.lease_owner.as_deref(),
                &j.lease_expires_at,
                &j.worker_group,
                &j.delay_table.as_deref().map(JsonText),
                &j.cancel_requested_by,
                &j.terminal_cause,
                &fingerprint,
                &j.quarantine_reason,
                &j.created_at,
                &j.updated_at,
                &j.finished_at,
            ])?;
        }
        copy.finish()?;
        Ok(())
    }

    fn copy_log(&mut self) -> Result<()> {
        if self.log.is_empty() {
            return Ok(());
        }
        let mut copy = BinaryCopyInWriter::new(self.tx.tx.copy_in(LOG_COPY)?, &LOG_TYPES);
        for (job_id, e) in self.log.drain(..) {
            copy.write(&[
                &job_id,
                &e.at,
                &e.from.map(|s| s.as_str()),
                &e.to.as_str(),
                &i64::from(e.attempt),
                &e.worker_id.as_deref(),
                &e.actor,
                &e.reason.as_deref(),
                &e.failure_detail.as_deref().map(JsonText),
                &e.detail_status,
            ])?;
        }
        copy.finish()?;
        Ok(())
    }
}

/// A job id as the uuid its column holds; text that is not one is refused, quoted.
fn job_id(id: &str) -> Result<uuid::Uuid> {
    uuid::Uuid::parse_str(id).map_err(|_| Error::InvalidInput(format!("'{id}' is not a job id (a UUID)")))
}

/// JSON text sent as it is: `json` keeps it byte for byte (a failure detail is shown as the
/// worker wrote it), `jsonb` parses it on the server. A `serde_json::Value` would be parsed here
/// and printed again, with its keys reordered.
#[derive(Debug)]
struct JsonText<'a>(&'a str);

impl ToSql for JsonText<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        if *ty == Type::JSONB {
            // The binary format of jsonb: a version byte, then the text.
            out.extend_from_slice(&[1]);
        }
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || *ty == Type::JSONB
    }

    to_sql_checked!();
}
