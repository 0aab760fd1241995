//! The engine's path through the store on SQLite: enqueue, claim under a lease, heartbeat,
//! record an outcome behind the fence, reap lapsed leases, hand back unstarted jobs, and the
//! live worker registry. Outcomes count only if the job is still Running under the same
//! `(worker_id, attempt)`: a stale worker's word changes nothing.
//!
//! Why one file of some 580 lines: the fence is the contract. Claim, completion, heartbeat and
//! reap share the SQL that decides who may write a job, and are reviewed together.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::limit::is_quiet;
use super::row::{job_from_row, parse_budget, parse_id};
use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, Enqueued, Job, JobId, JobState, Millis, NewJob, Progress, WorkerInfo};
use crate::store::ops::claim::{self, ClaimTx, Holds, Lease, OwnPolicy, Taken};
use crate::store::ops::columns::job_columns;
use crate::store::ops::enqueue::{jitter_seed, validate_new_jobs};
use crate::store::ops::limits::ClaimLimits;
use crate::store::ops::outcome::{self, AttemptEnd, AttemptTx, HANDED_BACK};
pub(crate) use crate::store::ops::outcome::{Entry, RunningAttempt};
use crate::store::ops::settings;
use crate::store::unique;
use crate::store::{renewal_threshold, ClaimRequest, Completion, Confirmed, Fenced, LeaseStatus, Reap, HELD_UP};

impl SqliteStore {
    /// Each job stored, or answered as the duplicate of the job holding its unique key. Under
    /// the write lock the one insert decides: the `jobs_unique` index turns it into nothing
    /// (`ON CONFLICT DO NOTHING`), and only then is the holder read.
    pub fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        validate_new_jobs(jobs)?;
        let now = self.now();
        self.write(|tx| insert_jobs(tx, jobs, now))
    }

    pub fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<Job>> {
        let shared = req.shared_table();
        self.write(|c| {
            // Read under the write lock, not before waiting for it: claims then see time in the
            // order they commit, which a rate limit's windows count by.
            let now = self.now();
            claim::claim(&mut SqliteClaim { c, now }, req, shared.as_ref())
        })
    }

    pub fn heartbeat(&self, worker_id: &str, jobs: &[(JobId, u32)], lease: Duration) -> Result<Vec<LeaseStatus>> {
        self.heartbeat_with_progress(worker_id, jobs, &[], lease)
    }

    pub fn heartbeat_with_progress(
        &self,
        worker_id: &str,
        jobs: &[(JobId, u32)],
        progress: &[Option<Progress>],
        lease: Duration,
    ) -> Result<Vec<LeaseStatus>> {
        self.write(|tx| {
            // Read the clock once the write lock is ours: a heartbeat that waited for it must
            // not write a lease that lapsed while it waited.
            let now = self.now();
            let until = now.saturating_add(lease.as_millis().min(i64::MAX as u128) as Millis);
            let due_before = now.saturating_add(renewal_threshold(lease));
            // Each lease read, and renewed only when due (or when its progress is written).
            let mut read = tx.prepare_cached(
                "SELECT lease_expires_at, cancel_requested_by IS NOT NULL FROM jobs
                 WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 AND attempt = ?3",
            )?;
            let mut renew = tx.prepare_cached("UPDATE jobs SET lease_expires_at = ?2 WHERE id = ?1")?;
            // The same renewal, with the progress reported since the last heartbeat.
            let mut renew_reporting = None;
            jobs.iter()
                .enumerate()
                .map(|(i, (id, attempt))| {
                    let id = id.to_string();
                    let held: Option<(Millis, bool)> =
                        read.query_row(params![id, worker_id, attempt], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
                    let Some((expires_at, cancel_requested)) = held else {
                        return Ok(LeaseStatus::Lost);
                    };
                    match progress.get(i).and_then(Option::as_ref) {
                        // Not due, and no longer than the lease asked for (a lease of 0 ends it now).
                        None if (due_before..=until).contains(&expires_at) => {}
                        None => {
                            renew.execute(params![id, until])?;
                        }
                        Some(p) => {
                            let stmt = match &mut renew_reporting {
                                Some(s) => s,
                                None => renew_reporting.insert(tx.prepare_cached(
                                    "UPDATE jobs SET lease_expires_at = ?2, progress = ?3, progress_message = ?4
                                     WHERE id = ?1",
                                )?),
                            };
                            stmt.execute(params![id, until, p.fraction, p.message])?;
                        }
                    }
                    Ok(LeaseStatus::Held { cancel_requested })
                })
                .collect()
        })
    }

    pub fn complete(&self, completion: &Completion) -> Result<Fenced> {
        Ok(self.complete_many(std::slice::from_ref(completion))?[0])
    }

    pub fn complete_many(&self, completions: &[Completion]) -> Result<Vec<Fenced>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.write(|tx| outcome::complete_many(&mut { tx }, now, completions))
    }

    pub fn next_due(&self, queues: &[String]) -> Result<Option<Millis>> {
        self.read(|tx| {
            // One probe of `jobs_claim_priority` per queue and priority: the first entry of each
            // priority is its earliest.
            let mut first = tx.prepare_cached(
                "SELECT min((SELECT due_at FROM jobs INDEXED BY jobs_claim_priority
                             WHERE state = 'scheduled' AND queue = ?1 AND priority = p.column1
                             ORDER BY due_at LIMIT 1))
                 FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)) AS p",
            )?;
            let mut earliest: Option<Millis> = None;
            for q in queues {
                let due: Option<Millis> = first.query_row(params![q], |r| r.get(0))?;
                earliest = earliest.into_iter().chain(due).min();
            }
            Ok(earliest)
        })
    }

    pub fn reap_lapsed(&self, limit: usize, confirmed: Confirmed<'_>) -> Result<Option<Reap>> {
        self.write(|tx| {
            if matches!(confirmed, Confirmed::Seen(_)) && self.lock_wait.get() >= HELD_UP {
                return Ok(None);
            }
            // The clock is read once the write lock is ours, as the heartbeat's is.
            let now = self.now();
            let found = tx
                .prepare_cached(LAPSED_SQL)?
                .query_map(params![now], |r| Ok((attempt_from_row(r)?, r.get::<_, Millis>(6)?)))?
                .filter(|r| !unreadable(r))
                .take(limit)
                .collect::<Result<Vec<_>, _>>()?;
            outcome::reap_found(&mut { tx }, now, found, confirmed).map(Some)
        })
    }
}

/// Handing back, and the live worker registry: what only the engine calls. Every state change
/// still goes through the fence: nothing here touches a job that is not Running under the
/// caller's lease.
impl SqliteStore {
    pub fn has_lapsed_leases(&self) -> Result<bool> {
        let sql = "SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_lease
                   WHERE state = 'running' AND lease_expires_at < ?1)";
        Ok(self.conn.prepare_cached(sql)?.query_row([self.now()], |r| r.get(0))?)
    }

    pub fn leases_held(&self, worker_id: &str) -> Result<Vec<(JobId, u32)>> {
        let sql = "SELECT id, attempt FROM jobs INDEXED BY jobs_lease
                   WHERE state = 'running' AND lease_owner = ?1 ORDER BY id";
        Ok(self
            .conn
            .prepare_cached(sql)?
            .query_map([worker_id], |r| Ok((parse_id(r, 0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    pub fn hand_back(&self, worker_id: &str, jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.write(|tx| {
            let mut undo = tx.prepare_cached(
                "UPDATE jobs SET state = 'scheduled', attempt = attempt - 1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = ?4
                 WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 AND attempt = ?3
                       AND attempt > 0 AND cancel_requested_by IS NULL",
            )?;
            let capture = settings::detail_enabled(&mut { tx })?;
            jobs.iter()
                .map(|&(id, attempt)| {
                    if undo.execute(params![id.to_string(), worker_id, attempt, now])? == 1 {
                        let mut e = Entry::new(id, now, Some(JobState::Running), JobState::Scheduled, attempt - 1);
                        e.worker_id = Some(worker_id);
                        e.reason = Some(HANDED_BACK);
                        log(tx, &e)?;
                        return Ok(Fenced::Accepted(JobState::Scheduled));
                    }
                    outcome::complete(&mut { tx }, now, capture, &Completion::not_handed_back(id, worker_id, attempt))
                })
                .collect()
        })
    }

    pub fn register_worker(&self, w: &WorkerInfo) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO workers (id, worker_group, host, pid, wire_names, queues, started_at,
                                                 last_heartbeat_at, stale_after_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    w.id,
                    w.group,
                    w.host,
                    w.pid,
                    serde_json::to_string(&w.wire_names).map_err(Error::Encode)?,
                    serde_json::to_string(&w.queues).map_err(Error::Encode)?,
                    w.started_at,
                    w.last_heartbeat_at,
                    w.stale_after_ms
                ],
            )?;
            Ok(())
        })
    }

    pub fn worker_heartbeat(&self, id: &str) -> Result<bool> {
        let now = self.now();
        self.write(
            |tx| Ok(tx.execute("UPDATE workers SET last_heartbeat_at = ?2 WHERE id = ?1", params![id, now])? > 0),
        )
    }

    pub fn unregister_worker(&self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM workers WHERE id = ?1", [id])?;
            Ok(())
        })
    }

    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at, stale_after_ms
                 FROM workers ORDER BY last_heartbeat_at DESC, id",
            )?
            .query_map([], |r| {
                Ok(WorkerInfo {
                    id: r.get(0)?,
                    group: r.get(1)?,
                    host: r.get(2)?,
                    pid: r.get(3)?,
                    wire_names: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                    queues: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
                    started_at: r.get(6)?,
                    last_heartbeat_at: r.get(7)?,
                    stale_after_ms: r.get(8)?,
                })
            })?
            .collect::<Result<_, _>>()?)
    }
}

/// The statement a claim runs per queue: the due scheduled jobs of queue `?1` at time `?2`,
/// priority 0 first, then by due time, then insertion order (rowid: the order of ids for the
/// library's time-ordered ids); the caller stops stepping at its batch size.
/// `INDEXED BY` pins the `(queue, priority, due_at)` partial index over scheduled jobs, and
/// `priority IN (0, …, 9)` makes SQLite read it one priority at a time, in that order: ten short
/// ranges, each from the priority's earliest due job to its first job due in the future, so
/// neither a backlog of future retries is walked nor anything sorted (a range over every
/// priority at once would step over each priority's future jobs). There is deliberately no
/// `LIMIT ?`: a new value bound to it makes SQLite re-prepare the statement. A job whose attempt
/// counter is already at the top of what an attempt (`u32`) counts, which another program may
/// write, is passed over: its attempt cannot rise at a claim. Public so that tests and tools
/// can EXPLAIN it.
pub const CLAIM_SQL: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", jitter_seed FROM jobs INDEXED BY jobs_claim_priority
     WHERE state = 'scheduled' AND queue = ?1 AND priority IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9) AND due_at <= ?2
           AND attempt < 4294967295
     ORDER BY priority, due_at, rowid"
);

/// The first wire name after `?2` among the scheduled jobs of queue `?1`: one index probe on
/// `jobs_claim_wire`, so that a claim around a paused wire name visits each wire name waiting in
/// the queue once, however many jobs each has. Public so that tests and tools can EXPLAIN it.
pub const CLAIM_NEXT_WIRE_NAME_SQL: &str = "SELECT wire_name FROM jobs INDEXED BY jobs_claim_wire
     WHERE state = 'scheduled' AND queue = ?1 AND wire_name > ?2 ORDER BY wire_name LIMIT 1";

/// [`CLAIM_SQL`] for one wire name `?2` of queue `?1`: its due jobs at `?3`, oldest due first.
pub const CLAIM_WIRE_NAME_SQL: &str = concat!(
    "SELECT ",
    job_columns!(),
    ", jitter_seed FROM jobs INDEXED BY jobs_claim_wire
     WHERE state = 'scheduled' AND queue = ?1 AND wire_name = ?2 AND due_at <= ?3 AND attempt < 4294967295
     ORDER BY due_at"
);

/// Whether any of the paused (or limited) wire names has a due job in `queue`: one index probe
/// per name, so a pause of a wire name that is not waiting in this queue leaves its claim as it was.
fn paused_due(tx: &Connection, queue: &str, now: Millis, paused: &[String]) -> Result<bool> {
    let mut probe = tx.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_claim_wire
                        WHERE state = 'scheduled' AND queue = ?1 AND wire_name = ?2 AND due_at <= ?3)",
    )?;
    for name in paused {
        if probe.query_row(params![queue, name, now], |r| r.get::<_, bool>(0))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The claim of a queue whose head holds jobs of a paused wire name. Walking `jobs_claim_priority`
/// would step over every one of them on every claim (a backlog of 100,000 paused jobs is
/// 100,000 rows read per poll, under the write lock). Instead it skips from one wire name to
/// the next on `jobs_claim_wire` (one probe per distinct wire name waiting in the queue), takes
/// up to `want` due jobs of each unpaused one, and keeps the `want` due first: the cost is
/// bounded by the number of wire names in the queue, never by the paused backlog.
fn claim_around_paused(
    tx: &Connection,
    queue: &str,
    now: Millis,
    want: usize,
    paused: &[String],
) -> Result<Vec<(Job, i64)>> {
    let mut next_name = tx.prepare_cached(CLAIM_NEXT_WIRE_NAME_SQL)?;
    let mut due_of = tx.prepare_cached(CLAIM_WIRE_NAME_SQL)?;
    let mut rows: Vec<(Job, i64)> = Vec::new();
    let mut after = String::new();
    while let Some(name) = next_name.query_row(params![queue, after], |r| r.get::<_, String>(0)).optional()? {
        if !paused.contains(&name) {
            let due = due_of
                .query_map(params![queue, name, now], |r| Ok((job_from_row(r)?, r.get::<_, i64>(25)?)))?
                .filter(|r| !unreadable(r))
                .take(want)
                .collect::<Result<Vec<_>, _>>()?;
            rows.extend(due);
        }
        after = name;
    }
    // Each wire name's jobs came by due time alone (`jobs_claim_wire`); the set kept is put in
    // the claim's order.
    rows.sort_by_key(|(j, _)| (j.priority, j.due_at, j.id));
    rows.truncate(want);
    Ok(rows)
}

/// What the fence and a failed attempt need of a Running job: never the payload or labels.
macro_rules! attempt_columns {
    () => {
        "id, attempt, max_attempts, delay_table, cancel_requested_by, lease_owner"
    };
}

/// One Running attempt, behind the fence: `(id, worker, attempt)` must all still hold.
const FENCED_ATTEMPT_SQL: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM jobs WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 AND attempt = ?3"
);

/// Running attempts whose lease lapsed before `?1`, the oldest lapse first.
const LAPSED_SQL: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    ", lease_expires_at FROM jobs WHERE state = 'running' AND lease_expires_at < ?1 ORDER BY lease_expires_at"
);

/// Whether a row failed to read because of what is in it (a value the schema's CHECKs allow
/// but the library cannot hold: an id that is not a UUID, an attempt beyond `u32`, text in an
/// integer column). Claim and reap pass such a row over, leaving it as it is: failing on it
/// would stop every claim of its queue, or every reap in the store, for as long as it stays.
/// Any other error (I/O, a damaged file) still fails the operation.
fn unreadable<T>(r: &rusqlite::Result<T>) -> bool {
    use rusqlite::Error as E;
    matches!(r, Err(E::FromSqlConversionFailure(..) | E::InvalidColumnType(..) | E::IntegralValueOutOfRange(..)))
}

fn attempt_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunningAttempt> {
    Ok(RunningAttempt {
        id: parse_id(r, 0)?,
        attempt: r.get(1)?,
        max_attempts: parse_budget(r, 2)?,
        delay_table: r.get(3)?,
        cancel_requested_by: r.get(4)?,
        lease_owner: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
    })
}

/// Move the rows a claim picked (`[id, own delay table or null, new attempt]`, in claim order)
/// to Running under the lease and log each, in two statements for the set (issue 23): a
/// statement per job spent as much in starting and journalling it as in its row. The lease's
/// shared delay table is that of every row without its own.
fn claim_rows(tx: &Connection, batch: &[(String, Option<&str>)], lease: &Lease<'_>) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let ids = id_array(batch.iter().map(|(id, _)| id.clone()));
    let moved = tx
        .prepare_cached(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, max_attempts = ?2, delay_table = ?3,
                    lease_owner = ?4, lease_expires_at = ?5, worker_group = ?6, updated_at = ?7,
                    progress = NULL, progress_message = NULL
             WHERE id IN rarray(?1) AND state = 'scheduled'",
        )?
        .execute(params![
            ids,
            lease.max_attempts,
            lease.shared_table,
            lease.worker_id,
            lease.until,
            lease.group,
            lease.now
        ])?;
    if moved != batch.len() {
        // Cannot happen under the write lock, which the rows were picked under; refuse rather
        // than log claims that were not made.
        return Err(Error::InvalidInput(format!(
            "{} jobs were picked but {moved} claimed; nothing was claimed",
            batch.len()
        )));
    }
    // The jobs that drew a delay table of their own (a jittered policy): one JSON array for
    // them all, as the handlers' own policies are written.
    let own: Vec<(&str, &str)> = batch.iter().filter_map(|(id, table)| table.map(|t| (id.as_str(), t))).collect();
    if !own.is_empty() {
        tx.prepare_cached(
            "UPDATE jobs SET delay_table = c.tab
             FROM (SELECT value ->> 0 AS cid, value ->> 1 AS tab FROM json_each(?1)) AS c
             WHERE jobs.id = c.cid",
        )?
        .execute(params![serde_json::to_string(&own).map_err(Error::Encode)?])?;
    }
    tx.prepare_cached(
        "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
         SELECT j.id, ?2, 'scheduled', 'running', j.attempt, ?3 FROM rarray(?1) AS c JOIN jobs AS j ON j.id = c.value
         ORDER BY c.rowid",
    )?
    .execute(params![ids, lease.now, lease.worker_id])?;
    Ok(())
}

/// A batch's job ids as one value that `rarray(?)` (rusqlite's array table, loaded on every
/// connection of a store) reads back as rows, in order (its `rowid` is the position). A claim
/// or a batch of successes passes its ids to a statement that takes them all this way: no
/// statement per job, and nothing to parse (the JSON arrays the set statements took before
/// spent a tenth of a drain's instructions in SQLite's JSON functions).
fn id_array(ids: impl Iterator<Item = String>) -> rusqlite::vtab::array::Array {
    std::rc::Rc::new(ids.map(rusqlite::types::Value::Text).collect())
}

/// SQLite's statements for a claim (`ops/claim.rs`), under the one writer: what a take reads
/// stays so until the transaction ends, so the takes only read (stepping no further than they
/// need, see [`CLAIM_SQL`]) and [`claim_rows`] writes the move of each queue's set after them.
struct SqliteClaim<'c> {
    c: &'c Connection,
    /// The store's clock, read under the write lock.
    now: Millis,
}

impl SqliteClaim<'_> {
    /// Up to `n` rows of a claim statement run with `args`, as claimed under `lease`; a row that
    /// does not read is passed over ([`unreadable`]).
    fn take(&self, sql: &str, args: impl rusqlite::Params, lease: &Lease<'_>, n: usize) -> Result<Vec<Taken>> {
        let mut rows = self
            .c
            .prepare_cached(sql)?
            .query_map(args, |r| Ok((job_from_row(r)?, r.get::<_, i64>(25)?)))?
            .filter(|r| !unreadable(r))
            .take(n)
            .collect::<Result<Vec<_>, _>>()?;
        for (job, _) in &mut rows {
            lease.claimed(job);
        }
        Ok(rows)
    }
}

impl ClaimTx for SqliteClaim<'_> {
    /// The quiet flag first: a quiet worker's claim reads nothing else.
    fn holds(&mut self, worker_id: &str) -> Result<Holds> {
        if is_quiet(self.c, worker_id)? {
            return Ok(Holds { now: self.now, quiet: true, ..Holds::default() });
        }
        let pauses = super::pause::active(self.c, self.now)?;
        // With no limit in force, reading the limits is one read of an empty table.
        Ok(Holds {
            now: self.now,
            quiet: false,
            paused_queues: pauses.queues,
            paused_names: pauses.wire_names,
            limited: true,
        })
    }

    fn limits(&mut self, now: Millis, queues: &[String]) -> Result<ClaimLimits> {
        super::limit::for_claim(self.c, now, queues)
    }

    fn take_name(&mut self, lease: &Lease<'_>, queue: &str, name: &str, n: usize) -> Result<Vec<Taken>> {
        self.take(CLAIM_WIRE_NAME_SQL, params![queue, name, lease.now], lease, n)
    }

    fn names_due(&mut self, queue: &str, now: Millis, names: &[String]) -> Result<bool> {
        paused_due(self.c, queue, now, names)
    }

    /// `skipping` is not read: under the write lock none of those names has become due since.
    /// `take` rather than `LIMIT ?`: SQLite re-plans (re-parses) a statement on every new value
    /// bound to a LIMIT, and the index order makes stopping early free.
    fn take_due(&mut self, lease: &Lease<'_>, queue: &str, n: usize, _skipping: &[String]) -> Result<Vec<Taken>> {
        self.take(CLAIM_SQL, params![queue, lease.now], lease, n)
    }

    fn take_around(&mut self, lease: &Lease<'_>, queue: &str, n: usize, skipping: &[String]) -> Result<Vec<Taken>> {
        let mut rows = claim_around_paused(self.c, queue, lease.now, n, skipping)?;
        for (job, _) in &mut rows {
            lease.claimed(job);
        }
        Ok(rows)
    }

    fn write_claimed(&mut self, lease: &Lease<'_>, jobs: &[Job], tables: &[Option<String>]) -> Result<()> {
        let batch: Vec<(String, Option<&str>)> =
            jobs.iter().zip(tables).map(|(job, table)| (job.id.to_string(), table.as_deref())).collect();
        claim_rows(self.c, &batch, lease)
    }

    fn write_handler_policies(&mut self, own: &[OwnPolicy]) -> Result<()> {
        let rows = serde_json::to_string(own).map_err(Error::Encode)?;
        self.c
            .prepare_cached(
                "UPDATE jobs SET max_attempts = c.max, delay_table = c.tab
                 FROM (SELECT value ->> 0 AS cid, value ->> 1 AS max, value ->> 2 AS tab FROM json_each(?1)) AS c
                 WHERE jobs.id = c.cid",
            )?
            .execute(params![rows])?;
        Ok(())
    }

    fn charge_windows(&mut self, limits: &ClaimLimits, now: Millis) -> Result<()> {
        super::limit::charge_windows(self.c, limits, now)
    }
}

pub(crate) fn log(tx: &Connection, e: &Entry<'_>) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, actor, reason,
                                  failure_detail, detail_status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        e.job_id.to_string(),
        e.at,
        e.from.map(JobState::as_str),
        e.to.as_str(),
        e.attempt,
        e.worker_id,
        e.actor,
        e.reason,
        e.failure_detail,
        e.detail_status
    ])?;
    Ok(())
}

/// The fence of a batch of successes (`?1` their ids, an `rarray`): the attempts that still hold
/// their jobs. Each of the three statements of a batch finds its jobs by primary key, one probe
/// per id, whatever else runs (`store::plan::a_batch_of_successes_finds_its_jobs_by_id`): the
/// cost of a batch is its own, not that of the jobs running elsewhere. Public for that test.
pub const SUCCEED_FENCE_SQL: &str =
    "SELECT id, lease_owner, attempt FROM jobs WHERE id IN rarray(?1) AND state = 'running'";

/// The log entries of a batch of successes that passed the fence (`?1` ids, `?2` now), in the
/// batch's order, naming the worker and attempt the rows still hold.
pub const SUCCEED_LOG_SQL: &str = "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
     SELECT j.id, ?2, 'running', 'succeeded', j.attempt, j.lease_owner
     FROM rarray(?1) AS c JOIN jobs AS j ON j.id = c.value ORDER BY c.rowid";

/// The move of a batch of successes that passed the fence (`?1` ids, `?2` now) to Succeeded.
pub const SUCCEED_MOVE_SQL: &str = "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
            finished_at = ?2, updated_at = ?2
     WHERE id IN rarray(?1) AND state = 'running'";

/// SQLite's statements for the end of an attempt: under the one writer, the row the fenced read
/// found is the row written.
impl AttemptTx for &Connection {
    fn fenced_attempt(&mut self, c: &Completion) -> Result<Option<RunningAttempt>> {
        Ok(self
            .prepare_cached(FENCED_ATTEMPT_SQL)?
            .query_row(params![c.job_id.to_string(), c.worker_id, c.attempt], attempt_from_row)
            .optional()?)
    }

    fn end_attempt(&mut self, id: JobId, now: Millis, end: AttemptEnd<'_>) -> Result<()> {
        let id = id.to_string();
        match end {
            AttemptEnd::Succeeded { output } => self
                .prepare_cached(
                    "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
                            finished_at = ?2, updated_at = ?2, output = ?3 WHERE id = ?1",
                )?
                .execute(params![id, now, output])?,
            AttemptEnd::Retry { due } => self
                .prepare_cached(
                    "UPDATE jobs SET state = 'scheduled', lease_owner = NULL, lease_expires_at = NULL,
                            due_at = ?2, updated_at = ?3 WHERE id = ?1",
                )?
                .execute(params![id, due, now])?,
            AttemptEnd::DeadLettered { cause } | AttemptEnd::Cancelled { cause } => {
                let state = if matches!(end, AttemptEnd::Cancelled { .. }) { "cancelled" } else { "dead-lettered" };
                self.prepare_cached(
                    "UPDATE jobs SET state = ?5, lease_owner = NULL, lease_expires_at = NULL,
                            terminal_cause = ?2, cause_fingerprint = ?3, finished_at = ?4, updated_at = ?4 WHERE id = ?1",
                )?
                .execute(params![id, cause, cause_fingerprint(cause), now, state])?
            }
            AttemptEnd::Quarantined { reason, cause } => self
                .prepare_cached(
                    "UPDATE jobs SET state = 'quarantined', lease_owner = NULL, lease_expires_at = NULL,
                            quarantine_reason = ?2, terminal_cause = ?3, cause_fingerprint = ?4,
                            finished_at = ?5, updated_at = ?5 WHERE id = ?1",
                )?
                .execute(params![id, reason.as_str(), cause, cause_fingerprint(cause), now])?,
        };
        Ok(())
    }

    fn log(&mut self, e: &Entry<'_>) -> Result<()> {
        log(self, e)
    }

    /// Two statements for the whole set (issue 23): a statement per job spent as much in
    /// starting, journalling and finishing each statement as in its row. The UPDATE walks the
    /// batch and finds each job by its key.
    fn succeed_all(&mut self, now: Millis, successes: &[&Completion]) -> Result<HashSet<JobId>> {
        // The fence, read under the write lock (so what it reads is what the writes below find):
        // the attempts that still hold their job.
        let ids = id_array(successes.iter().map(|c| c.job_id.to_string()));
        let holders: HashMap<JobId, (String, u32)> = self
            .prepare_cached(SUCCEED_FENCE_SQL)?
            .query_map(params![ids], |r| Ok((parse_id(r, 0)?, (r.get(1)?, r.get(2)?))))?
            .collect::<Result<_, _>>()?;
        let holds = |c: &Completion| {
            holders.get(&c.job_id).is_some_and(|(worker, attempt)| *worker == c.worker_id && *attempt == c.attempt)
        };
        let accepted: Vec<&Completion> = successes.iter().copied().filter(|c| holds(c)).collect();
        if accepted.is_empty() {
            return Ok(HashSet::new());
        }
        let ids = id_array(accepted.iter().map(|c| c.job_id.to_string()));
        // The entries first, in the batch's order, naming the worker and attempt the rows still hold.
        self.prepare_cached(SUCCEED_LOG_SQL)?.execute(params![ids, now])?;
        let moved = self.prepare_cached(SUCCEED_MOVE_SQL)?.execute(params![ids, now])?;
        if moved != accepted.len() {
            // Cannot happen under the write lock; refuse rather than commit a half-written batch.
            return Err(Error::InvalidInput(format!(
                "{} successes passed the fence but {moved} were written; none was recorded",
                accepted.len()
            )));
        }
        // The outputs of the accepted ones, in the same transaction (a statement is no round
        // trip here: the store is in this process).
        let mut keep = None;
        for c in &accepted {
            if let Some(output) = outcome::output_of(c) {
                let keep = match &mut keep {
                    Some(k) => k,
                    None => keep.insert(self.prepare_cached("UPDATE jobs SET output = ?2 WHERE id = ?1")?),
                };
                keep.execute(params![c.job_id.to_string(), output])?;
            }
        }
        Ok(accepted.iter().map(|c| c.job_id).collect())
    }

    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64> {
        cancel_dependents(self, now, parents)
    }
}

/// Insert `jobs` (already validated) as Scheduled, in the caller's transaction: each stored, or
/// answered as the duplicate of the job holding its unique key. Under the write lock the one
/// insert decides: the `jobs_unique` index turns it into nothing (`ON CONFLICT DO NOTHING`), and
/// only then is the holder read. Every insert path (enqueue, a schedule's ticks and triggers)
/// comes through here, so the payload limit and uniqueness hold on each.
///
/// Why it is shaped for speed (issue 23): the rows go in [`INSERT_ROWS`] at a time through
/// cached multi-row statements, ids are bound from a stack buffer, and the creation entries of
/// the whole batch are one `INSERT … SELECT` over the rows just written (by rowid) rather than a
/// statement per job. The count and payload-limit triggers still run per row: they are the
/// store's contract for every program.
pub(crate) fn insert_jobs(tx: &Connection, jobs: &[NewJob], now: Millis) -> Result<Vec<Enqueued>> {
    // Read in the transaction that writes, so a limit lowered meanwhile holds.
    super::admin::check_new_payloads(jobs, super::admin::payload_limit(tx)?)?;
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<JobId> = jobs.iter().map(|_| JobId::new()).collect();
    let keys: Vec<Option<unique::UniqueColumns>> = jobs.iter().map(|j| unique::columns(j, now)).collect();
    // A rowid table hands each new row max(rowid) + 1 until the top of the range: the rows of
    // this batch are then exactly those above `before`, in the order they were inserted.
    let before: i64 = tx.prepare_cached("SELECT coalesce(max(rowid), 0) FROM jobs")?.query_row([], |r| r.get(0))?;
    let mut stored = vec![true; jobs.len()];
    let mut done = 0;
    for &rows in &INSERT_ROWS {
        while jobs.len() - done >= rows {
            let range = done..done + rows;
            let changed = insert_rows(tx, now, &jobs[range.clone()], &ids[range.clone()], &keys[range.clone()])?;
            if changed < rows {
                // Only the unique index refuses a row (ids are fresh v7 UUIDs): find which.
                let mut exists = tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?1)")?;
                for i in range {
                    if !exists.query_row([IdText::new(&ids[i]).as_str()], |r| r.get::<_, bool>(0))? {
                        if keys[i].is_none() {
                            return Err(Error::InvalidInput(format!("job id {} is already taken", ids[i])));
                        }
                        stored[i] = false;
                    }
                }
            }
            done += rows;
        }
    }
    let created = stored.iter().filter(|s| **s).count();
    let logged = if before < i64::MAX - jobs.len() as i64 {
        tx.prepare_cached(
            "INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
             SELECT id, ?1, NULL, 'scheduled', 0 FROM jobs WHERE rowid > ?2 ORDER BY rowid",
        )?
        .execute(params![now, before])?
    } else {
        // Rowids at the top of their range are handed out at random: one entry per job instead.
        for (id, _) in ids.iter().zip(&stored).filter(|(_, s)| **s) {
            log(tx, &Entry::new(*id, now, None, JobState::Scheduled, 0))?;
        }
        created
    };
    if logged != created {
        // Cannot happen under the write lock; refuse rather than commit jobs without their entry.
        return Err(Error::InvalidInput(format!(
            "{created} jobs were stored but {logged} creation entries written; nothing was enqueued"
        )));
    }
    let mut out = Vec::with_capacity(jobs.len());
    for (i, id) in ids.iter().enumerate() {
        if stored[i] {
            out.push(Enqueued::Created(*id));
            continue;
        }
        let uq = keys[i].as_ref().expect("only a unique job is refused");
        let holder = tx
            .prepare_cached(&unique::holder_sql("?1", "?2"))?
            .query_row(params![uq.key, uq.window], |r| parse_id(r, 0))
            .optional()?;
        out.push(Enqueued::Duplicate(holder.ok_or_else(|| unique::holder_missing(&format!("'{}'", uq.key)))?));
    }
    Ok(out)
}

/// The row counts of the multi-row INSERTs a batch is cut into, largest first: a few cached
/// statements cover any batch size with at most 7 + 7 small ones after the large ones.
const INSERT_ROWS: [usize; 3] = [64, 8, 1];

/// The parameters of one row of [`insert_sql`]; `?1` is the time, shared by every row.
const ROW_PARAMS: usize = 12;

/// `INSERT INTO jobs … VALUES (…), (…) ON CONFLICT DO NOTHING` for `rows` rows, made once per size.
fn insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        INSERT_ROWS
            .iter()
            .map(|&n| {
                let values: Vec<String> = (0..n)
                    .map(|r| {
                        let p = |k: usize| 2 + r * ROW_PARAMS + k;
                        format!(
                            "(?{}, ?{}, ?{}, ?{}, ?{}, 'scheduled', ?{}, ?{}, ?1, ?1, ?{}, ?{}, ?{}, ?{}, ?{})",
                            p(0),
                            p(1),
                            p(2),
                            p(3),
                            p(4),
                            p(5),
                            p(6),
                            p(7),
                            p(8),
                            p(9),
                            p(10),
                            p(11)
                        )
                    })
                    .collect();
                format!(
                    "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at,
                                       updated_at, unique_key, unique_states, unique_window, traceparent, priority)
                     VALUES {} ON CONFLICT DO NOTHING",
                    values.join(", ")
                )
            })
            .collect()
    });
    &all[INSERT_ROWS.iter().position(|&n| n == rows).expect("a size of INSERT_ROWS")]
}

/// Insert one slice of a batch with the statement of its size; returns how many rows went in.
fn insert_rows(
    tx: &Connection,
    now: Millis,
    jobs: &[NewJob],
    ids: &[JobId],
    keys: &[Option<unique::UniqueColumns>],
) -> Result<usize> {
    let mut insert = tx.prepare_cached(insert_sql(jobs.len()))?;
    insert.raw_bind_parameter(1, now)?;
    for (r, ((job, id), uq)) in jobs.iter().zip(ids).zip(keys).enumerate() {
        let p = 2 + r * ROW_PARAMS;
        // Bound as borrowed text: SQLite copies it at once, so one stack buffer serves.
        insert.raw_bind_parameter(p, IdText::new(id).as_str())?;
        insert.raw_bind_parameter(p + 1, job.wire_name.as_str())?;
        insert.raw_bind_parameter(p + 2, job.queue.as_str())?;
        if job.labels.is_empty() {
            insert.raw_bind_parameter(p + 3, "{}")?;
        } else {
            insert.raw_bind_parameter(p + 3, serde_json::to_string(&job.labels).map_err(Error::Encode)?)?;
        }
        insert.raw_bind_parameter(p + 4, job.payload.as_slice())?;
        insert.raw_bind_parameter(p + 5, job.due_at.unwrap_or(now))?;
        insert.raw_bind_parameter(p + 6, jitter_seed(id))?;
        insert.raw_bind_parameter(p + 7, uq.as_ref().map(|u| u.key.as_str()))?;
        insert.raw_bind_parameter(p + 8, uq.as_ref().map(|u| u.states))?;
        insert.raw_bind_parameter(p + 9, uq.as_ref().map(|u| u.window))?;
        insert.raw_bind_parameter(p + 10, job.traceparent.as_deref())?;
        insert.raw_bind_parameter(p + 11, job.priority)?;
    }
    Ok(insert.raw_execute()?)
}

/// A job id as the store writes it (lower-case hyphenated), without a heap allocation.
struct IdText([u8; uuid::fmt::Hyphenated::LENGTH]);

impl IdText {
    fn new(id: &JobId) -> Self {
        let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
        id.0.hyphenated().encode_lower(&mut buf);
        IdText(buf)
    }

    fn as_str(&self) -> &str {
        // encode_lower writes ASCII only.
        std::str::from_utf8(&self.0).expect("a hyphenated uuid is ASCII")
    }
}

/// The waiting jobs that need one of `parents` to succeed, in workflows whose `on_failure` is
/// `cancel`, and the waiting jobs that need those, and so on down the graph, each with the
/// parent it descends from (the smallest id when several) and that parent's state.
const DEPENDENTS_SQL: &str = "WITH RECURSIVE doomed(id, root) AS (
         SELECT e.child, e.parent FROM job_edges e
             JOIN jobs p ON p.id = e.parent AND p.state IN ('dead-lettered', 'quarantined', 'cancelled')
             JOIN jobs c ON c.id = e.child AND c.state = 'waiting'
             JOIN workflows w ON w.id = c.workflow_id AND w.on_failure = 'cancel'
         WHERE e.parent IN (SELECT value FROM json_each(?1)) AND e.needs = 'succeeded' AND e.met = 0
         UNION
         SELECT e.child, d.root FROM doomed d
             JOIN job_edges e ON e.parent = d.id AND e.needs = 'succeeded' AND e.met = 0
             JOIN jobs c ON c.id = e.child AND c.state = 'waiting'
     )
     SELECT o.id, j.attempt, o.root, p.state
     FROM (SELECT id, min(root) AS root FROM doomed GROUP BY id) o
         JOIN jobs j ON j.id = o.id JOIN jobs p ON p.id = o.root
     ORDER BY o.id";

/// Cancel, at `now`, what depends on the jobs `parents` that just ended Dead-Lettered,
/// Quarantined or Cancelled, where their workflow says so
/// ([`OnFailure::Cancel`](crate::OnFailure::Cancel)); each logged `waiting -> cancelled` with a
/// cause naming the job that ended (PostgreSQL's `bw_cancel_dependents` words it the same).
/// Returns how many.
pub(crate) fn cancel_dependents(tx: &Connection, now: Millis, parents: &[JobId]) -> Result<u64> {
    if parents.is_empty() {
        return Ok(0);
    }
    let list =
        serde_json::to_string(&parents.iter().map(|id| id.to_string()).collect::<Vec<_>>()).map_err(Error::Encode)?;
    let doomed: Vec<(JobId, u32, String, String)> = tx
        .prepare_cached(DEPENDENTS_SQL)?
        .query_map([&list], |r| Ok((parse_id(r, 0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut cancelled = 0;
    for (id, attempt, root, root_state) in doomed {
        let cause =
            format!("a job it needs, {root}, ended {root_state}; its workflow cancels what depends on a failed job");
        let n = tx
            .prepare_cached(
                "UPDATE jobs SET state = 'cancelled', terminal_cause = ?2, finished_at = ?3, updated_at = ?3
                 WHERE id = ?1 AND state = 'waiting'",
            )?
            .execute(params![id.to_string(), cause, now])?;
        if n == 1 {
            let mut e = Entry::new(id, now, Some(JobState::Waiting), JobState::Cancelled, attempt);
            e.reason = Some(&cause);
            log(tx, &e)?;
            cancelled += 1;
        }
    }
    Ok(cancelled)
}
