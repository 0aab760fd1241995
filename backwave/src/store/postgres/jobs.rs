//! The engine's path on PostgreSQL: enqueue, claim under a lease, heartbeat, record outcomes
//! behind the `(worker_id, attempt)` fence, reap lapsed leases, hand back unstarted jobs, the
//! live worker registry, and folding the count deltas. Same semantics as `sqlite/jobs.rs`
//! (whose non-SQL logic, delay tables, seeds and the narrow view of a running attempt, this
//! file calls rather than copies); what differs is how two hosts stay out of each other's way:
//!
//! * a claim is one statement per queue: `FOR UPDATE SKIP LOCKED` picks due rows no other claim
//!   holds, an `UPDATE` of exactly those ids moves them to running and a data-modifying CTE logs them;
//! * an outcome is a guarded `UPDATE … WHERE state = 'running' AND lease_owner = … AND attempt =
//!   …` (or `SELECT … FOR UPDATE` behind the same fence): whichever of a reap and a completion
//!   commits first changes the row, and the other's re-checked `WHERE` no longer matches;
//! * a reap locks its lapsed rows `FOR UPDATE SKIP LOCKED`, so two reapers take disjoint rows;
//! * every time comes from [`Tx::now`] (the database clock), never from the host.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use postgres::types::ToSql;

use super::row::{self, count};
use super::{text_literal, PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, Enqueued, Job, JobId, JobState, Millis, NewJob, Progress, WorkerInfo};
use crate::store::ops::claim::{self, ClaimTx, Holds, Lease, OwnPolicy, Taken};
use crate::store::ops::enqueue::{jitter_seed, validate_new_jobs};
use crate::store::ops::limits::ClaimLimits;
use crate::store::ops::outcome::{
    self, AttemptEnd, AttemptTx, Confirmed, Entry, Reap, RunningAttempt, HANDED_BACK, HELD_UP,
};
use crate::store::ops::settings;
use crate::store::ops::settings::check_new_payloads;
use crate::store::unique::{self, UniqueColumns};
use crate::store::{renewal_threshold, ClaimRequest, Clock, Completion, Fenced, LeaseStatus};

/// The rows a batch statement names by id (`$ids`: a query of their ids) that are still Running,
/// as a condition PostgreSQL meets by probing the primary key once per id, whatever its
/// statistics and the batch's size; the batch's fence (worker, attempt) is joined after.
///
/// Written as a join with the batch (`jobs.id = c.cid AND jobs.state = 'running'`), the plan was
/// the planner's to choose, and both of its other choices read far more than the batch:
/// - `jobs.state = 'running'` is a condition of `jobs_active (state, due_at)`. On statistics taken
///   before a burst was claimed (the planner then believes a few hundred jobs run) PostgreSQL read
///   every Running job through that index, each claim's dead entry included, and hash-joined
///   them with the batch: in the engine bench's drain with four worker processes a batch of
///   1,400 successes read 71,000 index entries and 2,900 pages of the table (20 ms of its 70),
///   and a heartbeat of 417 leases took 142 ms, of which 133 comparing each Running job of the
///   worker with each lease it named. The cost grew with the jobs running everywhere, not with
///   the batch. As an `IS TRUE` test (the state is never NULL, so it means the same) the
///   comparison is no index's condition and proves no partial index's predicate.
/// - With the state out of the indexes' reach, a batch of a few hundred against a table of a few
///   thousand pages was priced cheaper as one pass over the whole table (the planner prices each
///   probe as a read from disk): 25 ms to read 100,000 rows for 456 successes.
///
/// So the ids are given as an array the planner cannot count (`ARRAY(…)` of a subquery, known
/// only when the statement runs, as the claim names its rows): it plans for a few, which only a
/// probe of the primary key per id serves, and that is what runs for any number.
macro_rules! running_by_ids {
    ($ids:literal) => {
        concat!("jobs.id = ANY(ARRAY(", $ids, ")) AND (jobs.state = 'running') IS TRUE")
    };
}

/// [`AttemptTx::succeed_all`]'s statement (see [`SUCCEED_SQL`]): `$batch` the successes as `c`
/// (`cid`, `cworker`, `cattempt`, and whatever else is written), `$write` what a success writes
/// besides its state, lease and times.
macro_rules! succeed {
    ($batch:literal, $write:literal) => {
        concat!(
            "WITH t AS (SELECT coalesce($4::bigint, bw_now_ms()) AS now), done AS (
                 UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
                        finished_at = (SELECT now FROM t), updated_at = (SELECT now FROM t)",
            $write,
            "
                 FROM ",
            $batch,
            "
                 WHERE ",
            running_by_ids!("SELECT unnest($1::uuid[])"),
            " AND jobs.id = c.cid AND jobs.lease_owner = c.cworker
                       AND jobs.attempt = c.cattempt
                 RETURNING jobs.id, c.cworker, c.cattempt
             ), logged AS (
                 INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
                 SELECT id, (SELECT now FROM t), 'running', 'succeeded', cattempt, cworker FROM done ORDER BY id
             )
             SELECT id FROM done"
        )
    };
}

/// The part of a claim after `picked`: move the picked rows to running under the lease, log
/// each, and return them oldest due first. The rows are named as `ctid = ANY(ARRAY(…))`, not
/// joined (`UPDATE … FROM picked`): the planner priced that join as a hash over a scan of every
/// job, up to some 200,000 rows, so each claim read the whole table, retained history included
/// (50,000 jobs: 60 ms a claim of 1,000 against 35-45 ms). By the row versions `picked` locked
/// (a TID scan) rather than by id (a probe of the primary key per job: 2.4 ms of a 1,000-job
/// claim; engine bench +3 % / +4 % / +5 % with 1 / 2 / 4 worker processes). A version that another
/// transaction replaced after this statement's snapshot but before `picked` locked it is not
/// visible to the UPDATE, so that job stays Scheduled, unlocked at commit, for the next claim:
/// never claimed twice, never lost, and `claimed` (not `picked`) is what is logged and returned.
/// Only what the claim did not write comes back ([`row::claimed_columns!`]): the delay table,
/// for one, the claim wrote (`$9`, or each job's own right after) and so knows; returned, it cost
/// the server a jsonb-to-text conversion and the worker a JSON parse per job (engine bench:
/// drains +6 % with 1 and 4 worker processes). The claimed rows are
/// returned and logged by priority and due time, two integer keys: with the uuid as a third the
/// two sorts took 1.6 ms of a 1,000-job claim's 22 ms against 0.6 ms with `due_at` alone.
///
/// The claim's transaction commits without waiting for its WAL to reach the disk
/// (`synchronous_commit` off for this transaction alone, set by the statement itself so that a
/// claim outside a transaction block costs no extra round trip; the one-time filter on the final
/// `SELECT` calls it once, before any row is returned). A claim is the one write whose loss
/// BackWave's promises absorb: a server crash in the few hundred milliseconds before the WAL
/// writer flushes it puts the jobs back as they were (Scheduled, the attempt not spent, no log
/// entry: the claim never happened), they are claimed again, and the first worker, finding its
/// leases Lost at its next heartbeat, is fenced out of recording anything (at-least-once: the
/// body may have run twice). Nothing after a claim can outlive it: every completion, retry,
/// enqueue and operator action still waits for its flush, which writes the WAL before it, the
/// claim's included. What it saves is an fsync on the path from an enqueue to its job's start
/// (the server's default durability; SQLite's `synchronous = NORMAL` claims never waited for one).
macro_rules! claim_tail {
    () => {
        concat!(
            " claimed AS (
                 UPDATE jobs SET state = 'running', attempt = attempt + 1, max_attempts = $8,
                        delay_table = $9::text::jsonb, lease_owner = $5, lease_expires_at = $7,
                        worker_group = $6, updated_at = $2, progress = NULL, progress_message = NULL
                 WHERE jobs.ctid = ANY(ARRAY(SELECT pick FROM picked))
                 RETURNING ",
            row::claimed_columns!(),
            "
             ), logged AS (
                 INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
                 SELECT id, $2, 'scheduled', 'running', attempt, $5 FROM claimed ORDER BY priority, due_at
             )
             SELECT * FROM claimed
             WHERE (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) = 'off'
             ORDER BY priority, due_at"
        )
    };
}

/// Claim the due jobs of one queue: `$1` queue, `$2` now, `$3` how many, `$4` paused wire
/// names, `$5` worker, `$6` group, `$7` lease end, `$8` max attempts, `$9` the shared delay
/// table (NULL when each job draws its own: the caller writes those next). One round trip: the
/// due rows no other claim holds are locked (`SKIP LOCKED`), moved to running, and logged.
/// Priority 0 first, then by due time: for each priority in turn (a nested loop over
/// `generate_series(0, 9)`), one range of `jobs_claim_priority (queue, priority, due_at)`
/// from the priority's earliest due job to its first one due in the future, locked as read; the
/// loop stops as soon as `$3` rows are picked, so a claim of a queue whose jobs are all at the
/// default priority reads the one range, and nothing sorts. One range over every priority
/// (`ORDER BY priority, due_at` with `due_at <= $2` as a filter) would step over each
/// priority's future retries; `priority = ANY(…)` yields no order on PostgreSQL before 17; ten
/// branches of a `UNION ALL` (one subquery each: PostgreSQL takes no `FOR UPDATE` in an arm of
/// a `UNION`) read the same ranges but cost 1.8 ms of planning a claim against 0.2 ms (the
/// PostgreSQL drain fell from 30,100 to 21,600 jobs/s with them). Equal due times are taken in
/// the index's order, that of their rows (in practice the order they were inserted).
/// Public (as `POSTGRES_CLAIM_SQL`) so that tests and tools can EXPLAIN it.
pub const CLAIM_SQL: &str = concat!(
    "WITH picked AS (
         SELECT pick FROM generate_series(0, 9) AS pr(p) CROSS JOIN LATERAL (
             SELECT ctid AS pick FROM jobs
             WHERE state = 'scheduled' AND queue = $1 AND priority = pr.p AND due_at <= $2
                   AND attempt < 4294967295 AND wire_name <> ALL($4::text[])
             ORDER BY due_at LIMIT $3
             FOR UPDATE SKIP LOCKED
         ) by_priority LIMIT $3
     ),",
    claim_tail!()
);

/// Record a batch of successes that produced no output, behind the fence: `$1` the job ids (in
/// id order, the order the rows are locked in), `$2` each one's worker, `$3` each one's attempt,
/// `$4` a test's manual clock (else NULL: the database clock). A job no longer Running under that
/// worker and attempt is not touched. Returns the ids it moved to Succeeded, each logged.
/// Public (as `POSTGRES_SUCCEED_SQL`) so that tests and tools can run and EXPLAIN it.
pub const SUCCEED_SQL: &str = succeed!("unnest($1::uuid[], $2::text[], $3::bigint[]) AS c(cid, cworker, cattempt)", "");

/// [`SUCCEED_SQL`] for a batch in which some success recorded an output: `$5` each one's output
/// (NULL where it recorded none). Public (as `POSTGRES_SUCCEED_WITH_OUTPUT_SQL`) so that tests
/// and tools can EXPLAIN it.
pub const SUCCEED_WITH_OUTPUT_SQL: &str = succeed!(
    "unnest($1::uuid[], $2::text[], $3::bigint[], $5::bytea[]) AS c(cid, cworker, cattempt, coutput)",
    ", output = c.coutput"
);

/// A heartbeat's statement (see [`HEARTBEAT_SQL`]): `$batch` the named leases as `h` (`hid`,
/// `hattempt`, and whatever else the renewal writes), `$due` whether a lease read is to be
/// renewed, `$renew` what a renewal writes besides the lease.
macro_rules! heartbeat {
    ($batch:literal, $due:literal, $renew:literal) => {
        concat!(
            "WITH t AS (SELECT coalesce($4::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now),
                 h AS (SELECT * FROM ",
            $batch,
            "),
                 held AS (
                     SELECT jobs.id, jobs.attempt, jobs.cancel_requested_by IS NOT NULL AS cancel, h.*, ",
            $due,
            " AS due
                     FROM h, t, jobs
                     WHERE ",
            running_by_ids!("SELECT hid FROM h"),
            " AND jobs.id = h.hid AND jobs.lease_owner = $3 AND jobs.attempt = h.hattempt),
                 renewed AS (
                     UPDATE jobs SET lease_expires_at = t.now + $5::bigint",
            $renew,
            "
                     FROM held, t
                     WHERE ",
            running_by_ids!("SELECT id FROM held WHERE due"),
            " AND jobs.id = held.id AND jobs.lease_owner = $3 AND jobs.attempt = held.attempt
                     RETURNING jobs.id, jobs.attempt, jobs.cancel_requested_by IS NOT NULL)
             SELECT * FROM renewed
             UNION ALL
             SELECT id, attempt, cancel FROM held WHERE NOT due"
        )
    };
}

/// A heartbeat: `$1` the job ids, `$2` their attempts, `$3` the worker, `$4` a test's manual
/// clock (else NULL: the database clock, read when the statement runs), `$5` the lease, `$6` the
/// renewal threshold ([`renewal_threshold`]). Each named lease is read by its id (`held`, behind
/// the fence); those with less than the threshold left (or more than the lease: a shorter lease
/// cuts it) are renewed, the others returned as read; each row returned is a lease still held,
/// with whether an operator asked to cancel it. Split by the statement's snapshot; a renewal
/// that finds its row changed since (an operator's cancel) is decided on the row as it now is.
/// Both halves find their rows by id (`running_by_ids!`), and no lease bound is a condition on
/// `jobs` itself (only on the rows read): with one, the planner could read the leases through
/// `jobs_lease`, every Running job's. Public (as `POSTGRES_HEARTBEAT_SQL`) so that tests and
/// tools can EXPLAIN it.
pub const HEARTBEAT_SQL: &str = heartbeat!(
    "unnest($1::uuid[], $2::bigint[]) AS h(hid, hattempt)",
    "jobs.lease_expires_at NOT BETWEEN t.now + $6::bigint AND t.now + $5::bigint",
    ""
);

/// [`HEARTBEAT_SQL`] writing progress too: `$6` each job's fraction (NULL: none reported since
/// the last heartbeat), `$7` its message, `$8` the renewal threshold. A job with progress to
/// write is renewed whatever its lease. Public (as `POSTGRES_HEARTBEAT_WITH_PROGRESS_SQL`) so that
/// tests and tools can EXPLAIN it.
pub const HEARTBEAT_WITH_PROGRESS_SQL: &str = heartbeat!(
    "unnest($1::uuid[], $2::bigint[], $6::float8[], $7::text[]) AS h(hid, hattempt, hfraction, hmessage)",
    "h.hfraction IS NOT NULL OR jobs.lease_expires_at NOT BETWEEN t.now + $8::bigint AND t.now + $5::bigint",
    ", progress = CASE WHEN held.hfraction IS NULL THEN jobs.progress ELSE held.hfraction END,
       progress_message = CASE WHEN held.hfraction IS NULL THEN jobs.progress_message ELSE held.hmessage END"
);

/// Undo the claims of jobs that never started, behind the fence: `$1` the job ids, `$2` their
/// attempts, `$3` the worker, `$4` the time, `$5` the log's reason. A job an operator asked to
/// cancel is left for the caller to cancel. Returns each job moved back to Scheduled with the
/// attempt named (the log entry carries the attempt as it now is, one less). Public (as
/// `POSTGRES_HAND_BACK_SQL`) so that tests and tools can EXPLAIN it.
pub const HAND_BACK_SQL: &str = concat!(
    "WITH undone AS (
         UPDATE jobs SET state = 'scheduled', attempt = attempt - 1, lease_owner = NULL,
                lease_expires_at = NULL, updated_at = $4
         FROM unnest($1::uuid[], $2::bigint[]) AS h(hid, hattempt)
         WHERE ",
    running_by_ids!("SELECT unnest($1::uuid[])"),
    " AND jobs.id = h.hid AND jobs.lease_owner = $3
               AND jobs.attempt = h.hattempt AND jobs.attempt > 0 AND jobs.cancel_requested_by IS NULL
         RETURNING jobs.id, h.hattempt
     ), logged AS (
         INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, reason)
         SELECT id, $4, 'running', 'scheduled', hattempt - 1, $3, $5 FROM undone ORDER BY id
     )
     SELECT id, hattempt FROM undone"
);

/// The look for a lapsed lease, lapsed by `$now`: see [`LAPSED_LOOK_SQL`].
macro_rules! lapsed_look {
    ($now:literal) => {
        concat!(
            "SELECT lease_expires_at FROM jobs WHERE lease_expires_at < ",
            $now,
            " ORDER BY lease_expires_at LIMIT 1"
        )
    };
}

/// Whether any lease has lapsed: a row if one has.
/// Every group of every worker asks this every poll interval, busy or idle, so the database
/// clock is read in the same statement and the answer must cost one index probe however many
/// jobs run or ran. Asked as "the lowest lapsed lease", an order only `jobs_lease` gives, and
/// without `state = 'running'` (a job has a lease exactly while it runs: the table's CHECK), so
/// that the planner takes that index whatever its statistics say. As `EXISTS (… state =
/// 'running' AND lease_expires_at < now)`, on statistics taken before any job ran (as after a
/// burst), it walked `jobs_active`'s Running range instead, every entry a claim left there
/// since the last vacuum included (3.4 ms a look in the engine bench's drains); with the order
/// but the state still named, it did the same and sorted; without the state and the order, on
/// a table never analyzed, it read the whole table (15.8 ms a look).
///
/// It has no parameters, so a session plans it once and keeps the plan (the one plan it could
/// have: the clock is not known when planning either way). With the clock as a parameter, the
/// sessions an engine claims on planned it at every look, 0.23 ms of planning for 0.01 ms of
/// reading, which was nearly all an idle group cost the server.
/// Public (as `POSTGRES_LAPSED_LOOK_SQL`) so that tests and tools can EXPLAIN it.
pub const LAPSED_LOOK_SQL: &str = lapsed_look!("bw_now_ms()");

/// [`LAPSED_LOOK_SQL`] at a test's manual clock (`$1`).
const LAPSED_LOOK_AT_SQL: &str = lapsed_look!("$1::bigint");

/// [`CLAIM_SQL`] for a queue whose head holds due jobs of a paused wire name (same parameters).
/// Walking the claim index would step over every paused job on every claim; instead a recursive
/// "loose index scan" on `jobs_claim_wire` visits each wire name waiting in the queue once, takes
/// up to `$3` due jobs of each unpaused one, and keeps the `$3` due first (as SQLite's
/// `claim_around_paused`). The rows taken from a wire name beyond the `$3` kept stay locked only
/// until this transaction ends. The wire name is matched as a range and ordered on, not as `=`:
/// with `=` the planner reads the lateral side from the claim index and filters by wire name (it
/// prices a name as 1/n_distinct of the queue), which walks the whole paused backlog ahead of
/// the name's first due job; as a range only `jobs_claim_wire` yields the order, in custom and
/// generic plans alike (measured: 4,005 rows filtered per claim against 5 read).
const CLAIM_AROUND_PAUSED_SQL: &str = concat!(
    "WITH RECURSIVE names AS (
         (SELECT wire_name FROM jobs WHERE state = 'scheduled' AND queue = $1 ORDER BY wire_name LIMIT 1)
         UNION ALL
         SELECT (SELECT j.wire_name FROM jobs j
                 WHERE j.state = 'scheduled' AND j.queue = $1 AND j.wire_name > names.wire_name
                 ORDER BY j.wire_name LIMIT 1)
         FROM names WHERE names.wire_name IS NOT NULL
     ), candidates AS (
         SELECT d.ctid, d.priority, d.due_at, d.id FROM names CROSS JOIN LATERAL (
             SELECT ctid, priority, due_at, id FROM jobs
             WHERE state = 'scheduled' AND queue = $1 AND wire_name >= names.wire_name
                   AND wire_name <= names.wire_name AND due_at <= $2 AND attempt < 4294967295
             ORDER BY wire_name, due_at LIMIT $3
             FOR UPDATE SKIP LOCKED
         ) d
         WHERE names.wire_name IS NOT NULL AND names.wire_name <> ALL($4::text[])
     ), picked AS (
         SELECT ctid AS pick FROM candidates ORDER BY priority, due_at, id LIMIT $3
     ),",
    claim_tail!()
);

/// [`CLAIM_SQL`] for the one wire name `$4` (text, not an array) of queue `$1`: how a claim takes
/// a limited wire name's few remaining slots apart from the rest of the queue. The name as a
/// range, as in [`CLAIM_AROUND_PAUSED_SQL`], so that only `jobs_claim_wire` yields the order.
const CLAIM_WIRE_NAME_SQL: &str = concat!(
    "WITH picked AS (
         SELECT ctid AS pick FROM jobs
         WHERE state = 'scheduled' AND queue = $1 AND wire_name >= $4::text AND wire_name <= $4::text
               AND due_at <= $2 AND attempt < 4294967295
         ORDER BY wire_name, due_at LIMIT $3
         FOR UPDATE SKIP LOCKED
     ),",
    claim_tail!()
);

/// Whether any of the paused wire names `$3` has a due job in queue `$1` at `$2`: one probe of
/// `jobs_claim_wire` per name (the name as a range, as in [`CLAIM_AROUND_PAUSED_SQL`]: with
/// `= ANY($3)` the generic plan scans the table, measured 25 ms against 0.1 ms).
const PAUSED_DUE_SQL: &str = "SELECT EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(name) CROSS JOIN LATERAL (
         SELECT 1 FROM jobs
         WHERE state = 'scheduled' AND queue = $1 AND wire_name >= p.name AND wire_name <= p.name AND due_at <= $2
         ORDER BY wire_name, due_at LIMIT 1
     ) due)";

/// Insert the jobs at `which` (indexes into `jobs`, `ids`, `keys`) and log each one stored, in
/// that order; returns the ids stored (the others met the unique index).
fn insert_jobs(
    tx: &mut Tx<'_>,
    now: Millis,
    jobs: &[NewJob],
    ids: &[JobId],
    keys: &[Option<UniqueColumns>],
    which: &[usize],
) -> Result<HashSet<uuid::Uuid>> {
    let uuids: Vec<uuid::Uuid> = which.iter().map(|&i| ids[i].0).collect();
    let wire_names: Vec<&str> = which.iter().map(|&i| jobs[i].wire_name.as_str()).collect();
    let queues: Vec<&str> = which.iter().map(|&i| jobs[i].queue.as_str()).collect();
    let labels = labels_json(jobs, which)?;
    let payloads: Vec<&[u8]> = which.iter().map(|&i| jobs[i].payload.as_slice()).collect();
    let due: Vec<Option<i64>> = which.iter().map(|&i| jobs[i].due_at).collect();
    let seeds: Vec<i64> = which.iter().map(|&i| jitter_seed(&ids[i])).collect();
    let unique_keys: Vec<Option<&str>> = which.iter().map(|&i| keys[i].as_ref().map(|k| k.key.as_str())).collect();
    let unique_states: Vec<Option<i64>> = which.iter().map(|&i| keys[i].as_ref().map(|k| k.states)).collect();
    let unique_windows: Vec<Option<i64>> = which.iter().map(|&i| keys[i].as_ref().map(|k| k.window)).collect();
    let traceparents = traceparents(which.iter().map(|&i| &jobs[i]));
    let priorities = priorities(which.iter().map(|&i| &jobs[i]));
    let rows = tx.query(
        "WITH new AS (
             INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed,
                               created_at, updated_at, unique_key, unique_states, unique_window, traceparent,
                               priority)
             SELECT id, w, q, coalesce(l::jsonb, '{}'), p, 'scheduled', coalesce(d, $8), s, $8, $8, uk, us, uw, tp,
                    coalesce(pr, 0)
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[],
                         $7::bigint[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[])
                  AS n(id, w, q, l, p, d, s, uk, us, uw, tp, pr)
             ON CONFLICT DO NOTHING
             RETURNING id
         ), logged AS (
             INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
             SELECT new.id, $8, NULL, 'scheduled', 0
             FROM unnest($1::uuid[]) WITH ORDINALITY AS o(id, n) JOIN new ON new.id = o.id
             ORDER BY o.n
         )
         SELECT id FROM new",
        &[
            &uuids,
            &wire_names,
            &queues,
            &labels,
            &payloads,
            &due,
            &seeds,
            &now,
            &unique_keys,
            &unique_states,
            &unique_windows,
            &traceparents,
            &priorities,
        ],
    )?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

/// The schema's trigger refused a payload over the store's limit (`bw_check_payloads`).
fn is_over_payload_limit(e: &Error) -> bool {
    super::driver_error::pg_error(e)
        .and_then(|e| e.code())
        .is_some_and(|c| *c == postgres::error::SqlState::PROGRAM_LIMIT_EXCEEDED)
}

/// Each job's trace context, or no array at all when none has one: `unnest` of several arrays
/// pads the shorter ones with NULL, so a batch outside any trace sends nothing more.
fn traceparents<'a>(jobs: impl Iterator<Item = &'a NewJob> + Clone) -> Vec<Option<&'a str>> {
    if jobs.clone().all(|j| j.traceparent.is_none()) {
        return Vec::new();
    }
    jobs.map(|j| j.traceparent.as_deref()).collect()
}

/// Each job's priority, or no array at all when every one has the default (as [`traceparents`]).
fn priorities<'a>(jobs: impl Iterator<Item = &'a NewJob> + Clone) -> Vec<i64> {
    if jobs.clone().all(|j| j.priority == crate::model::PRIORITY_FIRST) {
        return Vec::new();
    }
    jobs.map(|j| i64::from(j.priority)).collect()
}

/// Each job's labels as JSON text, NULL for none (the column's `'{}'`): most jobs have none, and
/// an empty map is then neither serialised nor sent.
fn labels_json(jobs: &[NewJob], which: &[usize]) -> Result<Vec<Option<String>>> {
    which
        .iter()
        .map(|&i| {
            let labels = &jobs[i].labels;
            (!labels.is_empty()).then(|| serde_json::to_string(labels).map_err(Error::Encode)).transpose()
        })
        .collect()
}

/// Insert `jobs`, none of them unique, and log each in order: one statement without `ON
/// CONFLICT` and without `RETURNING`. Without a unique key only the primary key could refuse a
/// row, and ids are fresh v7 UUIDs, so every row goes in or the statement fails whole; the
/// speculative insertion `ON CONFLICT` makes for every row (a probe of both unique indexes
/// first) and the join back to the rows returned are then pure cost (issue 23).
fn insert_plain_jobs(tx: &mut Tx<'_>, now: Option<Millis>, jobs: &[NewJob], ids: &[JobId]) -> Result<()> {
    let all: Vec<usize> = (0..jobs.len()).collect();
    let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| id.0).collect();
    let wire_names: Vec<&str> = jobs.iter().map(|j| j.wire_name.as_str()).collect();
    let queues: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
    let labels = labels_json(jobs, &all)?;
    let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload.as_slice()).collect();
    let due: Vec<Option<i64>> = jobs.iter().map(|j| j.due_at).collect();
    let seeds: Vec<i64> = ids.iter().map(jitter_seed).collect();
    let traceparents = traceparents(jobs.iter());
    let priorities = priorities(jobs.iter());
    // `$8` NULL: the database clock, read by the statement itself (see `PgStore::enqueue_many`).
    let inserted = tx.execute(
        "WITH t AS (SELECT coalesce($8::bigint, bw_now_ms()) AS now), logged AS (
             INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
             SELECT o.id, t.now, NULL, 'scheduled', 0 FROM unnest($1::uuid[]) AS o(id), t
         )
         INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at, updated_at,
                           traceparent, priority)
         SELECT id, w, q, coalesce(l::jsonb, '{}'), p, 'scheduled', coalesce(d, t.now), s, t.now, t.now, tp,
                coalesce(pr, 0)
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[], $7::bigint[],
                     $9::text[], $10::bigint[])
              AS n(id, w, q, l, p, d, s, tp, pr), t",
        &[&uuids, &wire_names, &queues, &labels, &payloads, &due, &seeds, &now, &traceparents, &priorities],
    )?;
    if inserted != jobs.len() as u64 {
        // Cannot happen without ON CONFLICT; refuse rather than answer for rows not stored.
        return Err(Error::InvalidInput(format!(
            "{inserted} of {} jobs were stored; nothing was enqueued",
            jobs.len()
        )));
    }
    Ok(())
}

/// The answer for job `i`, which the unique index refused: the id of the job holding its key.
/// The holder was committed (or is ours) when the insert met it, but may have left its unique
/// states since (a job that finished): then the key is free and job `i` goes in after all.
fn settle_duplicate(
    tx: &mut Tx<'_>,
    now: Millis,
    jobs: &[NewJob],
    ids: &[JobId],
    keys: &[Option<UniqueColumns>],
    i: usize,
    key: &UniqueColumns,
) -> Result<Enqueued> {
    let holder_sql = unique::holder_sql("$1", "$2");
    // Each round that finds no holder is a job that left its states between two statements:
    // a handful of rounds only under a storm of finishing duplicates.
    for _ in 0..100 {
        if let Some(r) = tx.query_opt(&holder_sql, &[&key.key, &key.window])? {
            return Ok(Enqueued::Duplicate(JobId(r.try_get(0)?)));
        }
        if !insert_jobs(tx, now, jobs, ids, keys, &[i])?.is_empty() {
            return Ok(Enqueued::Created(ids[i]));
        }
    }
    Err(unique::holder_missing(&format!("'{}'", key.key)))
}

/// What the fence and a failed attempt need of a Running job (never the payload or labels), in
/// the order [`attempt_from_row`] reads.
const ATTEMPT_COLUMNS: &str = "id, attempt, max_attempts, delay_table::text, cancel_requested_by, lease_owner";

/// Insert `jobs` (already validated) as Scheduled in the caller's transaction: one statement for
/// the whole batch, the rows in as arrays, the log entries from the same ids in the same order.
/// A row the `jobs_unique` index refuses is skipped by `ON CONFLICT DO NOTHING` (which first
/// waits for a racing insert of the key to commit or roll back) and answered with the holder's
/// id, read afterwards in a new snapshot. Every insert path (enqueue, a schedule's ticks and
/// triggers) comes through here, so the payload limit and uniqueness hold on each.
pub(crate) fn insert_new_jobs(tx: &mut Tx<'_>, now: Millis, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    // Read in the transaction that writes; the schema's trigger checks the same setting.
    check_new_payloads(jobs, super::admin::payload_limit(tx)?)?;
    let ids: Vec<JobId> = jobs.iter().map(|_| JobId::new()).collect();
    if jobs.iter().all(|j| j.unique.is_none()) {
        insert_plain_jobs(tx, Some(now), jobs, &ids)?;
        return Ok(ids.into_iter().map(Enqueued::Created).collect());
    }
    let all: Vec<usize> = (0..jobs.len()).collect();
    let keys: Vec<Option<UniqueColumns>> = jobs.iter().map(|j| unique::columns(j, now)).collect();
    let inserted = insert_jobs(tx, now, jobs, &ids, &keys, &all)?;
    let mut out = Vec::with_capacity(jobs.len());
    for (i, id) in ids.iter().enumerate() {
        if inserted.contains(&id.0) {
            out.push(Enqueued::Created(*id));
            continue;
        }
        let Some(key) = &keys[i] else {
            return Err(Error::InvalidInput(format!("job id {id} is already taken")));
        };
        out.push(settle_duplicate(tx, now, jobs, &ids, &keys, i, key)?);
    }
    Ok(out)
}

impl PgStore {
    pub fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        validate_new_jobs(jobs)?;
        // Jobs without a unique rule: one statement on its own, one round trip (no `BEGIN`,
        // clock read, limit read or `COMMIT` of their own), the schema's trigger holding the
        // payload limit. A payload over it is then enqueued again the long way, which reads the
        // limit first and names the job in its refusal; nothing was stored either way.
        if jobs.iter().all(|j| j.unique.is_none()) {
            let ids: Vec<JobId> = jobs.iter().map(|_| JobId::new()).collect();
            match self.autocommit(|tx| insert_plain_jobs(tx, self.pinned_now(), jobs, &ids)) {
                Ok(()) => return Ok(ids.into_iter().map(Enqueued::Created).collect()),
                Err(e) if is_over_payload_limit(&e) => {}
                Err(e) => return Err(e),
            }
        }
        self.write(|tx| {
            let now = tx.now()?;
            insert_new_jobs(tx, now, jobs)
        })
    }

    /// A claim's latency here is its round trips. Its holds are read first, on their own (one
    /// statement sees one snapshot, as it would inside the transaction: READ COMMITTED gives
    /// each statement its own); a claim that is then one take ([`claim::one_take`], the usual
    /// case) runs that one statement, which moves and logs, without a transaction of its own:
    /// two round trips, where `BEGIN`, holds, take and `COMMIT` were four. Any other claim runs
    /// in a transaction with the holds already read.
    pub fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<Job>> {
        let shared = req.shared_table();
        let pinned = self.pinned_now();
        if self.in_snapshot() {
            return self.write(|tx| claim::claim(&mut PgClaim { tx, pinned }, req, shared.as_ref()));
        }
        let holds = self.read_one(|tx| PgClaim { tx, pinned }.holds(req.worker_id))?;
        if claim::one_take(req, shared.as_ref(), &holds) {
            return self.autocommit(|tx| claim::claim_held(&mut PgClaim { tx, pinned }, req, shared.as_ref(), &holds));
        }
        self.write(|tx| claim::claim_held(&mut PgClaim { tx, pinned }, req, shared.as_ref(), &holds))
    }

    /// Read every lease named and renew those still held that are due ([`renewal_threshold`]),
    /// in one statement; the others are Lost.
    pub fn heartbeat(&self, worker_id: &str, jobs: &[(JobId, u32)], lease: Duration) -> Result<Vec<LeaseStatus>> {
        self.heartbeat_with_progress(worker_id, jobs, &[], lease)
    }

    /// [`PgStore::heartbeat`], writing the progress reported since the last one in the same
    /// statement (a heartbeat without any keeps the statement it had).
    pub fn heartbeat_with_progress(
        &self,
        worker_id: &str,
        jobs: &[(JobId, u32)],
        progress: &[Option<Progress>],
        lease: Duration,
    ) -> Result<Vec<LeaseStatus>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, attempts) = fence_arrays(jobs);
        let (pinned, renew_under, lease) = (self.pinned_now(), renewal_threshold(lease), duration_ms(lease));
        let reported = progress.iter().any(Option::is_some);
        let fractions: Vec<Option<f64>> =
            (0..jobs.len()).map(|i| progress.get(i).and_then(Option::as_ref).map(|p| p.fraction)).collect();
        let messages: Vec<Option<&str>> =
            (0..jobs.len()).map(|i| progress.get(i).and_then(Option::as_ref).map(|p| p.message.as_str())).collect();
        // One statement, committed by the server by itself (see `HEARTBEAT_SQL`).
        self.autocommit(|tx| {
            // The lease runs from when the rows are written, read from the clock then
            // (`clock_timestamp()`, not the transaction's start): a heartbeat that waited behind
            // a lock on `jobs` must not write a lease that lapsed while it waited.
            let rows = if reported {
                tx.query_planned(
                    HEARTBEAT_WITH_PROGRESS_SQL,
                    &[&ids, &attempts, &worker_id, &pinned, &lease, &fractions, &messages, &renew_under],
                )?
            } else {
                tx.query_planned(HEARTBEAT_SQL, &[&ids, &attempts, &worker_id, &pinned, &lease, &renew_under])?
            };
            let held: HashMap<(uuid::Uuid, i64), bool> =
                rows.iter().map(|r| Ok(((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?))).collect::<Result<_>>()?;
            Ok(jobs
                .iter()
                .map(|(id, attempt)| match held.get(&(id.0, i64::from(*attempt))) {
                    Some(&cancel_requested) => LeaseStatus::Held { cancel_requested },
                    None => LeaseStatus::Lost,
                })
                .collect())
        })
    }

    pub fn complete(&self, completion: &Completion) -> Result<Fenced> {
        Ok(self.complete_many(std::slice::from_ref(completion))?[0])
    }

    /// One transaction for the batch, by the rule both backends follow
    /// ([`outcome::complete_many`]). A batch of plain successes ([`outcome::successes_alone`],
    /// the usual batch) is its one statement, committed by the server by itself (its time the
    /// statement's): one round trip where `BEGIN`, the clock, the statement and `COMMIT` were
    /// four.
    pub fn complete_many(&self, completions: &[Completion]) -> Result<Vec<Fenced>> {
        if completions.is_empty() {
            return Ok(Vec::new());
        }
        if outcome::successes_alone(completions) && !self.in_snapshot() {
            let successes: Vec<&Completion> = completions.iter().collect();
            let pinned = self.pinned_now();
            let accepted = self.autocommit(|tx| succeed_rows(tx, pinned, &successes))?;
            return Ok(outcome::fenced_successes(completions, &accepted));
        }
        self.write(|tx| {
            let now = tx.now()?;
            outcome::complete_many(tx, now, completions)
        })
    }

    /// When the earliest Scheduled job of `queues` is due: one probe of `jobs_claim_priority`
    /// per queue and priority (the first entry of each), planned for its values, in one
    /// statement and one round trip (an idle group looks after every claim that found nothing).
    pub fn next_due(&self, queues: &[String]) -> Result<Option<Millis>> {
        let row = self.read_one(|tx| {
            tx.query_planned_one(
                "SELECT min(first.due_at) FROM unnest($1::text[]) AS q(name)
                 CROSS JOIN generate_series(0, 9) AS pr(p) CROSS JOIN LATERAL (
                     SELECT due_at FROM jobs WHERE state = 'scheduled' AND queue = q.name AND priority = pr.p
                     ORDER BY due_at LIMIT 1
                 ) first",
                &[&queues],
            )
        })?;
        Ok(row.get(0))
    }

    /// Fail (or, when an operator asked, cancel) up to `limit` attempts whose lease lapsed,
    /// the oldest lapse first. `SKIP LOCKED`: a second reaper on another host takes other rows,
    /// and a row a completion holds is left to it. Folds the count deltas first.
    pub fn reap_lapsed(&self, limit: usize, confirmed: Confirmed<'_>) -> Result<Option<Reap>> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.write(|tx| {
            fold_counts(tx)?;
            let now = tx.now()?;
            // The row locks wait for nothing (`SKIP LOCKED`), but a lock on the table does: the
            // last column is how long this statement waited, measured in the server.
            let rows = tx.query_planned(
                &format!(
                    "SELECT {ATTEMPT_COLUMNS}, lease_expires_at,
                            (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::bigint
                     FROM jobs WHERE state = 'running' AND lease_expires_at < $1
                     ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED"
                ),
                &[&now, &limit],
            )?;
            let waited = rows.first().map(|r| r.try_get::<_, i64>(7)).transpose()?.unwrap_or(0);
            if matches!(confirmed, Confirmed::Seen(_)) && waited >= duration_ms(HELD_UP) {
                return Ok(None);
            }
            let found = rows.iter().map(|r| Ok((attempt_from_row(r)?, r.try_get(6)?))).collect::<Result<Vec<_>>>()?;
            outcome::reap_found(tx, now, found, confirmed).map(Some)
        })
    }

    /// Whether any lease has lapsed: one statement, no lock ([`LAPSED_LOOK_SQL`]).
    pub fn has_lapsed_leases(&self) -> Result<bool> {
        let rows = match self.pinned_now() {
            None => self.read_one(|tx| tx.query(LAPSED_LOOK_SQL, &[]))?,
            Some(now) => self.read_one(|tx| tx.query(LAPSED_LOOK_AT_SQL, &[&now]))?,
        };
        Ok(!rows.is_empty())
    }

    /// Undo the claims of jobs that never started (no attempt spent), in one statement; a job
    /// an operator asked to cancel is cancelled instead, and one no longer ours is Rejected.
    pub fn hand_back(&self, worker_id: &str, jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, attempts) = fence_arrays(jobs);
        self.write(|tx| {
            let now = tx.now()?;
            let mut undone: HashSet<(uuid::Uuid, i64)> = tx
                .query_planned(HAND_BACK_SQL, &[&ids, &attempts, &worker_id, &now, &HANDED_BACK])?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_>>()?;
            let capture = settings::detail_enabled(tx)?;
            jobs.iter()
                .map(|&(id, attempt)| {
                    // A job named twice is handed back once: the second meets a Scheduled job.
                    if undone.remove(&(id.0, i64::from(attempt))) {
                        return Ok(Fenced::Accepted(JobState::Scheduled));
                    }
                    outcome::complete(tx, now, capture, &Completion::not_handed_back(id, worker_id, attempt))
                })
                .collect()
        })
    }

    /// Reads every Running job and keeps this worker's: no index leads with the lease's owner,
    /// since every claim would write an entry in it, and this runs only after a claim whose
    /// answer was lost.
    pub fn leases_held(&self, worker_id: &str) -> Result<Vec<(JobId, u32)>> {
        self.read(|tx| {
            tx.query(
                "SELECT id, attempt FROM jobs WHERE state = 'running' AND lease_owner = $1 ORDER BY id",
                &[&worker_id],
            )?
            .iter()
            .map(|r| Ok((JobId(r.try_get(0)?), count(r.try_get(1)?))))
            .collect()
        })
    }

    /// A test's manual clock, to be bound as `coalesce($n, bw_now_ms())` where a statement
    /// reads the database clock itself (saving the round trip of [`Tx::now`]); `None` in
    /// production.
    fn pinned_now(&self) -> Option<Millis> {
        match self.clock {
            Clock::Manual(_) => Some(self.clock.now()),
            Clock::System => None,
        }
    }

    pub fn register_worker(&self, w: &WorkerInfo) -> Result<()> {
        let wire_names = serde_json::to_string(&w.wire_names).map_err(Error::Encode)?;
        let queues = serde_json::to_string(&w.queues).map_err(Error::Encode)?;
        self.write(|tx| {
            tx.execute(
                "INSERT INTO workers (id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at,
                                      stale_after_ms)
                 VALUES ($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, $8, $9)
                 ON CONFLICT (id) DO UPDATE SET worker_group = excluded.worker_group, host = excluded.host,
                        pid = excluded.pid, wire_names = excluded.wire_names, queues = excluded.queues,
                        started_at = excluded.started_at, last_heartbeat_at = excluded.last_heartbeat_at,
                        stale_after_ms = excluded.stale_after_ms",
                &[
                    &w.id,
                    &w.group,
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
        })
    }

    /// Say a worker is alive (at the database's time). Every worker does this every few seconds
    /// whether or not a lease lapsed, so it also folds the count deltas (one host at a time).
    pub fn worker_heartbeat(&self, id: &str) -> Result<bool> {
        self.write(|tx| {
            fold_counts(tx)?;
            let now = tx.now()?;
            Ok(tx.execute("UPDATE workers SET last_heartbeat_at = $2 WHERE id = $1", &[&id, &now])? > 0)
        })
    }

    pub fn unregister_worker(&self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM workers WHERE id = $1", &[&id])?;
            Ok(())
        })
    }

    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.read(workers)
    }
}

/// Fold the count deltas the statement triggers appended into `job_counts`, if no other
/// transaction is folding (one folder at a time, under an advisory lock; the others skip).
/// The DELETE sees only deltas committed before it began: later ones stay for the next fold, so
/// nothing is counted twice or lost, and readers that add the unfolded deltas stay exact.
pub(crate) fn fold_counts(tx: &mut Tx<'_>) -> Result<()> {
    if !tx.try_lock("counts")? {
        return Ok(());
    }
    tx.execute(
        "WITH moved AS (DELETE FROM job_count_deltas RETURNING queue, state, d)
         INSERT INTO job_counts (queue, state, n)
         SELECT queue, state, sum(d) FROM moved GROUP BY queue, state
         ON CONFLICT (queue, state) DO UPDATE SET n = job_counts.n + excluded.n",
        &[],
    )?;
    Ok(())
}

/// PostgreSQL's statements for a claim (`ops/claim.rs`), beside other claims on other hosts:
/// each take locks the rows it picks (`SKIP LOCKED`), moves them to Running and logs them in
/// one round trip per queue, planned for its values ([`Tx::query_planned`]).
struct PgClaim<'t, 'a> {
    tx: &'t mut Tx<'a>,
    /// A test's manual clock, else `None`: the database's clock.
    pinned: Option<Millis>,
}

impl PgClaim<'_, '_> {
    /// Run one of the claim statements for `queue`: `$3` how many, `$4` the wire names (an
    /// array) or the one name (text), the rest from the lease.
    fn take(
        &mut self,
        sql: &str,
        lease: &Lease<'_>,
        queue: &str,
        n: usize,
        names: &(dyn ToSql + Sync),
    ) -> Result<Vec<Taken>> {
        let n = n.min(i64::MAX as usize) as i64;
        let max = i64::from(lease.max_attempts);
        let rows = self.tx.query_planned(
            sql,
            &[&queue, &lease.now, &n, names, &lease.worker_id, &lease.group, &lease.until, &max, &lease.shared_table],
        )?;
        let mut taken = Vec::with_capacity(rows.len());
        for r in &rows {
            taken.push(row::claimed(r, queue, lease)?);
        }
        Ok(taken)
    }
}

impl ClaimTx for PgClaim<'_, '_> {
    fn holds(&mut self, worker_id: &str) -> Result<Holds> {
        let (now, paused_queues, paused_names, limited, quiet) = time_and_pauses(self.tx, self.pinned, worker_id)?;
        Ok(Holds { now, quiet, paused_queues, paused_names, limited })
    }

    fn limits(&mut self, now: Millis, queues: &[String]) -> Result<ClaimLimits> {
        super::limit::for_claim(self.tx, now, queues)
    }

    fn take_name(&mut self, lease: &Lease<'_>, queue: &str, name: &str, n: usize) -> Result<Vec<Taken>> {
        self.take(CLAIM_WIRE_NAME_SQL, lease, queue, n, &name)
    }

    fn names_due(&mut self, queue: &str, now: Millis, names: &[String]) -> Result<bool> {
        Ok(self.tx.query_planned_one(PAUSED_DUE_SQL, &[&queue, &now, &names])?.try_get(0)?)
    }

    /// `skipping` is left out again: a job of those names may have become due, committed by
    /// another transaction, since [`PAUSED_DUE_SQL`] looked.
    fn take_due(&mut self, lease: &Lease<'_>, queue: &str, n: usize, skipping: &[String]) -> Result<Vec<Taken>> {
        self.take(CLAIM_SQL, lease, queue, n, &skipping)
    }

    fn take_around(&mut self, lease: &Lease<'_>, queue: &str, n: usize, skipping: &[String]) -> Result<Vec<Taken>> {
        self.take(CLAIM_AROUND_PAUSED_SQL, lease, queue, n, &skipping)
    }

    /// The takes moved and logged the jobs: only each job's own delay table is left, one
    /// statement for the queue's set (none when they share the group's).
    fn write_claimed(&mut self, _lease: &Lease<'_>, jobs: &[Job], tables: &[Option<String>]) -> Result<()> {
        let (ids, tables): (Vec<uuid::Uuid>, Vec<&str>) =
            jobs.iter().zip(tables).filter_map(|(job, t)| Some((job.id.0, t.as_deref()?))).unzip();
        if ids.is_empty() {
            return Ok(());
        }
        self.tx.query_planned(
            "UPDATE jobs SET delay_table = t.tab::jsonb
             FROM unnest($1::uuid[], $2::text[]) AS t(tid, tab) WHERE jobs.id = t.tid",
            &[&ids, &tables],
        )?;
        Ok(())
    }

    fn write_handler_policies(&mut self, own: &[OwnPolicy]) -> Result<()> {
        let mut ids = Vec::with_capacity(own.len());
        let mut maxes = Vec::with_capacity(own.len());
        let mut tables = Vec::with_capacity(own.len());
        for (id, max, table) in own {
            ids.push(id.0);
            maxes.push(i64::from(*max));
            tables.push(table.as_str());
        }
        self.tx.query_planned(
            "UPDATE jobs SET max_attempts = t.max, delay_table = t.tab::jsonb
             FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS t(tid, max, tab) WHERE jobs.id = t.tid",
            &[&ids, &maxes, &tables],
        )?;
        Ok(())
    }

    fn charge_windows(&mut self, limits: &ClaimLimits, now: Millis) -> Result<()> {
        super::limit::charge_windows(self.tx, limits, now)
    }
}

/// What a claim reads before it claims, in one round trip: the claim's time (`pinned`, a test's
/// manual clock, else the database clock), the queues and wire names paused then, whether any
/// limit is in force, and whether the claiming worker is quiet; so that a claim with no limit in
/// force and a worker not quiet costs what it did before either existed.
///
/// On the database clock the statement has no parameters (the worker's id is in its text, the
/// same text for every claim the worker makes), so PostgreSQL plans it once per session and
/// keeps that plan, even on the sessions an engine claims on, which plan every statement with
/// parameters for its values ([`Tx::query_planned`]). Planned for each claim it cost 0.26 ms
/// of planning for 0.02 ms of reading, on the path from an enqueue to its job's start. Its
/// tables (pauses, limits, workers by primary key) are small and read the same way whatever
/// they hold, so the one plan fits every run.
#[allow(clippy::type_complexity)]
fn time_and_pauses(
    tx: &mut Tx<'_>,
    pinned: Option<Millis>,
    worker_id: &str,
) -> Result<(Millis, HashSet<String>, Vec<String>, bool, bool)> {
    let holds = |now: &str, worker: &str| {
        format!(
            "SELECT t.now, p.kind, p.name,
                    EXISTS (SELECT 1 FROM limits l WHERE l.until IS NULL OR l.until > t.now),
                    EXISTS (SELECT 1 FROM workers w WHERE w.id = {worker} AND w.quiet_at IS NOT NULL)
             FROM (SELECT {now} AS now) t
             LEFT JOIN pauses p ON p.until IS NULL OR p.until > t.now"
        )
    };
    let rows = match pinned {
        None => tx.query(&holds("bw_now_ms()", &text_literal(worker_id)), &[])?,
        Some(now) => tx.query(&holds("$1::bigint", "$2"), &[&now, &worker_id])?,
    };
    let mut now = pinned.unwrap_or_default();
    let mut queues = HashSet::new();
    let mut wire_names = Vec::new();
    let (mut limited, mut quiet) = (false, false);
    for r in &rows {
        now = r.try_get(0)?;
        limited = r.try_get(3)?;
        quiet = r.try_get(4)?;
        let (kind, name): (Option<String>, Option<String>) = (r.try_get(1)?, r.try_get(2)?);
        match (kind.as_deref(), name) {
            (Some("queue"), Some(name)) => {
                queues.insert(name);
            }
            (Some("wire-name"), Some(name)) => wire_names.push(name),
            _ => {}
        }
    }
    Ok((now, queues, wire_names, limited, quiet))
}

/// `(id, attempt)` pairs as the two arrays a fenced statement unnests, in id order: the order
/// the rows are locked in, the same as an operator's bulk action (`ORDER BY id`), so the two
/// do not deadlock.
fn fence_arrays(jobs: &[(JobId, u32)]) -> (Vec<uuid::Uuid>, Vec<i64>) {
    let mut pairs: Vec<(uuid::Uuid, i64)> = jobs.iter().map(|(id, attempt)| (id.0, i64::from(*attempt))).collect();
    pairs.sort_unstable();
    pairs.into_iter().unzip()
}

/// A duration in milliseconds as a time offset, saturating.
fn duration_ms(d: Duration) -> Millis {
    d.as_millis().min(i64::MAX as u128) as Millis
}

fn attempt_from_row(r: &postgres::Row) -> Result<RunningAttempt> {
    Ok(RunningAttempt {
        id: JobId(r.try_get(0)?),
        attempt: count(r.try_get(1)?),
        max_attempts: r.try_get::<_, Option<i64>>(2)?.map(count),
        delay_table: r.try_get(3)?,
        cancel_requested_by: r.try_get(4)?,
        lease_owner: r.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
    })
}

/// [`AttemptTx::succeed_all`] at `now`, or (`None`) at the statement's time on the database
/// clock: one statement for the set. The UPDATE returns the rows it moved and a data-modifying
/// CTE logs them, in id order, the order the rows are locked in (as in `fence_arrays`).
fn succeed_rows(tx: &mut Tx<'_>, now: Option<Millis>, successes: &[&Completion]) -> Result<HashSet<JobId>> {
    let mut successes = successes.to_vec();
    successes.sort_unstable_by_key(|c| c.job_id.0);
    let ids: Vec<uuid::Uuid> = successes.iter().map(|c| c.job_id.0).collect();
    let workers: Vec<&str> = successes.iter().map(|c| c.worker_id.as_str()).collect();
    let attempts: Vec<i64> = successes.iter().map(|c| i64::from(c.attempt)).collect();
    // Each success's output (NULL when it recorded none) goes in the same statement; a batch in
    // which none recorded one sends no array of them (most batches: a column of NULLs cost the
    // server 5 % of a completion).
    let outputs: Vec<Option<&[u8]>> = successes.iter().map(|c| outcome::output_of(c)).collect();
    let rows = match outputs.iter().any(Option::is_some) {
        true => tx.query_planned(SUCCEED_WITH_OUTPUT_SQL, &[&ids, &workers, &attempts, &now, &outputs])?,
        false => tx.query_planned(SUCCEED_SQL, &[&ids, &workers, &attempts, &now])?,
    };
    rows.iter().map(|r| Ok(JobId(r.try_get(0)?))).collect()
}

/// PostgreSQL's statements for the end of an attempt: the fenced read locks the Running row
/// (`FOR UPDATE`), so the row it found is the row written.
impl AttemptTx for Tx<'_> {
    fn fenced_attempt(&mut self, c: &Completion) -> Result<Option<RunningAttempt>> {
        self.query_opt(
            &format!(
                "SELECT {ATTEMPT_COLUMNS} FROM jobs
                 WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND attempt = $3 FOR UPDATE"
            ),
            &[&c.job_id.0, &c.worker_id, &i64::from(c.attempt)],
        )?
        .map(|r| attempt_from_row(&r))
        .transpose()
    }

    fn succeed_all(&mut self, now: Millis, successes: &[&Completion]) -> Result<HashSet<JobId>> {
        succeed_rows(self, Some(now), successes)
    }

    fn end_attempt(&mut self, id: JobId, now: Millis, end: AttemptEnd<'_>) -> Result<()> {
        match end {
            AttemptEnd::Succeeded { output } => self.execute(
                "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
                        finished_at = $2, updated_at = $2, output = $3 WHERE id = $1",
                &[&id.0, &now, &output],
            )?,
            AttemptEnd::Retry { due } => self.execute(
                "UPDATE jobs SET state = 'scheduled', lease_owner = NULL, lease_expires_at = NULL,
                        due_at = $2, updated_at = $3 WHERE id = $1",
                &[&id.0, &due, &now],
            )?,
            AttemptEnd::DeadLettered { cause } | AttemptEnd::Cancelled { cause } => {
                let state = if matches!(end, AttemptEnd::Cancelled { .. }) { "cancelled" } else { "dead-lettered" };
                self.execute(
                    "UPDATE jobs SET state = $5, lease_owner = NULL, lease_expires_at = NULL,
                            terminal_cause = $2, cause_fingerprint = $3, finished_at = $4, updated_at = $4 WHERE id = $1",
                    &[&id.0, &cause, &cause_fingerprint(cause), &now, &state],
                )?
            }
            AttemptEnd::Quarantined { reason, cause } => self.execute(
                "UPDATE jobs SET state = 'quarantined', lease_owner = NULL, lease_expires_at = NULL,
                        quarantine_reason = $2, terminal_cause = $3, cause_fingerprint = $4,
                        finished_at = $5, updated_at = $5 WHERE id = $1",
                &[&id.0, &reason.as_str(), &cause, &cause_fingerprint(cause), &now],
            )?,
        };
        Ok(())
    }

    fn log(&mut self, e: &Entry<'_>) -> Result<()> {
        log(self, e)
    }

    fn cancel_dependents(&mut self, now: Millis, parents: &[JobId]) -> Result<u64> {
        cancel_dependents(self, now, parents)
    }
}

/// Append one transition entry. The failure detail goes in as the worker's JSON text, kept
/// byte for byte (`json`, not `jsonb`).
/// New jobs as the columns of one insert: enqueue, and a schedule's tick in the transaction
/// that claims it. Built before the transaction, so a retried transaction encodes nothing again.
pub(crate) fn log(tx: &mut Tx<'_>, e: &Entry<'_>) -> Result<()> {
    let params: [&(dyn ToSql + Sync); 10] = [
        &e.job_id.0,
        &e.at,
        &e.from.map(JobState::as_str),
        &e.to.as_str(),
        &i64::from(e.attempt),
        &e.worker_id,
        &e.actor,
        &e.reason,
        &e.failure_detail,
        &e.detail_status,
    ];
    tx.execute(
        "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, actor, reason,
                                  failure_detail, detail_status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::json, $10)",
        &params,
    )?;
    Ok(())
}

/// Every registered worker, the most recent heartbeat first.
const WORKERS_SQL: &str = "SELECT id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at, \
                           stale_after_ms FROM workers ORDER BY last_heartbeat_at DESC, id COLLATE \"C\"";

/// Every registered worker as of `tx`, the most recent heartbeat first (by id among equals, as
/// on SQLite, so that `bw workers` lists them alike). `PgStore::workers` is this in a read.
pub(in crate::store::postgres) fn workers(tx: &mut Tx<'_>) -> Result<Vec<WorkerInfo>> {
    let names = |v: serde_json::Value| serde_json::from_value::<Vec<String>>(v).unwrap_or_default();
    tx.query(WORKERS_SQL, &[])?
        .iter()
        .map(|r| {
            Ok(WorkerInfo {
                id: r.try_get(0)?,
                group: r.try_get(1)?,
                host: r.try_get(2)?,
                // Another program may write any bigint; a pid is shown, never acted on.
                pid: u32::try_from(r.try_get::<_, i64>(3)?.max(0)).unwrap_or(u32::MAX),
                wire_names: names(r.try_get(4)?),
                queues: names(r.try_get(5)?),
                started_at: r.try_get(6)?,
                last_heartbeat_at: r.try_get(7)?,
                stale_after_ms: r.try_get(8)?,
            })
        })
        .collect()
}

/// Cancel, at `now`, what depends on the jobs `parents` that just ended Dead-Lettered,
/// Quarantined or Cancelled, where their workflow says so: the schema's `bw_cancel_dependents`
/// (SECURITY DEFINER, so that a worker role's dead-letter can do it). Returns how many.
pub(crate) fn cancel_dependents(tx: &mut Tx<'_>, now: Millis, parents: &[JobId]) -> Result<u64> {
    if parents.is_empty() {
        return Ok(0);
    }
    let ids: Vec<uuid::Uuid> = parents.iter().map(|p| p.0).collect();
    let n: i64 = tx.query_one("SELECT bw_cancel_dependents($1::uuid[], $2)", &[&ids, &now])?.try_get(0)?;
    Ok(n as u64)
}
