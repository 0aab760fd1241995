//! Queue latency over what workers may claim: jobs due now and the age of the oldest due one, per
//! queue, from the claim indexes (`jobs_claim`, and `jobs_claim_wire` around a paused wire name),
//! a pause's due jobs counted apart as held. Read-only; the cost is the number of due jobs (and of
//! wire names waiting in a queue), never the backlog due later, the paused backlog nor the
//! finished jobs.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::error::Result;
use crate::model::{JobState, Millis};
use crate::store::jobs::CLAIM_NEXT_WIRE_NAME_SQL;
use crate::store::pause::{Pause, PauseKind};
use crate::store::query::StateCounts;
use crate::store::SqliteStore;

/// Due Scheduled jobs of one queue: how many, and the earliest `due_at` among them. A range of
/// the claim index (`jobs_claim (queue, due_at) WHERE state = 'scheduled'`), covering, so the
/// cost is the number of due jobs, never the backlog waiting for later nor the terminal rows.
/// Named with INDEXED BY because the planner may otherwise prefer `jobs_active` and read every
/// Scheduled row. `?1` is the queue, `?2` now.
pub const DUE_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim \
                           WHERE state = 'scheduled' AND queue = ?1 AND due_at <= ?2";

/// Due Scheduled jobs of one wire name `?2` in queue `?1` at `?3`: how many, and the earliest
/// `due_at`. A range of `jobs_claim_wire (queue, wire_name, due_at) WHERE state = 'scheduled'`,
/// covering: what a paused wire name holds back in a queue costs one probe, and the oldest due
/// job among the names not paused one probe per name waiting in the queue, never a walk over
/// the paused backlog.
pub const DUE_WIRE_NAME_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim_wire \
                                     WHERE state = 'scheduled' AND queue = ?1 AND wire_name = ?2 AND due_at <= ?3";

/// How long work waits in one queue: the Scheduled jobs due now that a worker may claim, the
/// oldest of them, and the due jobs a pause holds back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueLatency {
    pub queue: String,
    /// Scheduled jobs whose `due_at` has come and that no pause holds: waiting for a worker now.
    pub due_now: u64,
    /// The earliest `due_at` among them.
    pub oldest_due_at: Option<Millis>,
    /// How long that job has waited, in milliseconds (0 when nothing is due).
    pub oldest_due_age_ms: u64,
    /// Due jobs no worker claims because of a pause in force: every due job of a paused queue,
    /// or those of a paused wire name. Not in `due_now`.
    pub held_by_pause: u64,
    /// The pause of the queue itself, when one is in force.
    pub paused: Option<Pause>,
}

impl SqliteStore {
    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        let now = self.now();
        self.read(|conn| {
            let pauses = self.pauses()?;
            let in_force = InForce::new(&pauses);
            let counts = self.counts()?;
            let mut held = BTreeMap::new();
            counts.by_queue.keys().map(|q| latency(conn, &counts, q, now, &in_force, &mut held)).collect()
        })
    }
}

/// The pauses in force, as the latency reads need them.
pub(super) struct InForce<'a> {
    pub(super) queues: BTreeMap<&'a str, &'a Pause>,
    pub(super) wire_names: BTreeSet<&'a str>,
}

impl<'a> InForce<'a> {
    pub(super) fn new(pauses: &'a [Pause]) -> Self {
        let mut out = InForce { queues: BTreeMap::new(), wire_names: BTreeSet::new() };
        for p in pauses {
            match p.kind {
                PauseKind::Queue => {
                    out.queues.insert(&p.name, p);
                }
                PauseKind::WireName => {
                    out.wire_names.insert(&p.name);
                }
            }
        }
        out
    }
}

/// One queue's latency over what workers may claim, and what pauses hold back (added to
/// `held_by_wire_name` per paused wire name).
pub(super) fn latency(
    conn: &Connection,
    counts: &StateCounts,
    queue: &str,
    now: Millis,
    pauses: &InForce,
    held_by_wire_name: &mut BTreeMap<String, u64>,
) -> Result<QueueLatency> {
    let paused = pauses.queues.get(queue).map(|p| (*p).clone());
    // A queue without Scheduled jobs (the counts say so exactly) needs no look at the index.
    let scheduled = counts.by_queue.get(queue).and_then(|m| m.get(&JobState::Scheduled)).copied().unwrap_or(0);
    let (mut due_now, mut oldest_due_at) = if scheduled == 0 {
        (0, None)
    } else {
        let (n, oldest): (i64, Option<Millis>) =
            conn.prepare_cached(DUE_SQL)?.query_row(params![queue, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
        (n.max(0) as u64, oldest)
    };
    let mut held_by_pause = 0;
    if due_now > 0 && paused.is_some() {
        // Every due job of a paused queue is held: nothing in it is claimable.
        (held_by_pause, due_now, oldest_due_at) = (due_now, 0, None);
    } else if due_now > 0 && !pauses.wire_names.is_empty() {
        let mut oldest_is_held = false;
        let mut due_of = conn.prepare_cached(DUE_WIRE_NAME_SQL)?;
        for name in &pauses.wire_names {
            let (n, first): (i64, Option<Millis>) =
                due_of.query_row(params![queue, name, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let n = n.max(0) as u64;
            if n > 0 {
                held_by_pause += n;
                *held_by_wire_name.entry(name.to_string()).or_default() += n;
                oldest_is_held |= first.is_some() && first <= oldest_due_at;
            }
        }
        due_now = due_now.saturating_sub(held_by_pause);
        if due_now == 0 {
            oldest_due_at = None;
        } else if oldest_is_held {
            oldest_due_at = oldest_unpaused(conn, queue, now, &pauses.wire_names)?;
        }
    }
    Ok(QueueLatency {
        queue: queue.to_string(),
        due_now,
        oldest_due_at,
        oldest_due_age_ms: oldest_due_at.map_or(0, |t| now.saturating_sub(t).max(0) as u64),
        held_by_pause,
        paused,
    })
}

/// The earliest `due_at` among the due jobs of `queue` whose wire name is not paused: the wire
/// names waiting in the queue visited one index probe each on `jobs_claim_wire` (as the claim
/// steps around a paused name), so the cost is the number of names, never the paused backlog.
fn oldest_unpaused(conn: &Connection, queue: &str, now: Millis, paused: &BTreeSet<&str>) -> Result<Option<Millis>> {
    let mut next_name = conn.prepare_cached(CLAIM_NEXT_WIRE_NAME_SQL)?;
    let mut due_of = conn.prepare_cached(DUE_WIRE_NAME_SQL)?;
    let mut oldest: Option<Millis> = None;
    let mut after = String::new();
    while let Some(name) = next_name.query_row(params![queue, after], |r| r.get::<_, String>(0)).optional()? {
        if !paused.contains(name.as_str()) {
            let first: Option<Millis> = due_of.query_row(params![queue, name, now], |r| r.get(1))?;
            oldest = match (oldest, first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        after = name;
    }
    Ok(oldest)
}
