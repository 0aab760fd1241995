//! Bulk loading a new store: millions of rows written in one transaction, in seconds, for the
//! large-store generator behind `bw generate` (benchmarks, demos). It lives here because only
//! `store/` knows the schema: the caller hands over rows through [`Loader`], the same on either
//! backend, and each backend knows its columns, the indexes and triggers it may set aside for
//! the load, and how to put them back. This file owns the row types and the `Loader`; the
//! backends' sides are `sqlite/load.rs` (prepared inserts) and `postgres/load.rs` (`COPY`).

use std::borrow::Cow;
use std::rc::Rc;

use crate::error::Result;
use crate::model::{JobState, Millis};

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
    pub(crate) fn new(rows: &'c mut (dyn LoadRows + 'c)) -> Self {
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
pub(crate) trait LoadRows {
    fn job(&mut self, row: JobRow) -> Result<()>;
    fn transition(&mut self, row: TransitionRow) -> Result<()>;
    fn worker(&mut self, w: &WorkerRow<'_>) -> Result<()>;
}
