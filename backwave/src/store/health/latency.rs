//! Queue latency over what workers may claim: jobs due now and the age of the oldest due one, per
//! queue, from the claim indexes (`jobs_claim`, and `jobs_claim_wire` around a paused wire name),
//! a pause's due jobs counted apart as held. Read-only; the cost is the number of due jobs (and of
//! wire names waiting in a queue), never the backlog due later, the paused backlog nor the
//! finished jobs. This file owns the arithmetic around pauses, written once; the probes are the
//! dialects' `health/latency.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::Result;
use crate::model::{JobState, Millis};
use crate::store::pause::{Pause, PauseKind};
use crate::store::query::StateCounts;

/// How long work waits in one queue: the Scheduled jobs due now that a worker may claim, the
/// oldest of them, and the due jobs a pause holds back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueLatency {
    /// The queue's name.
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

/// The index probes a latency read makes, each answered from a claim index: the backends differ
/// only in how they ask, so the arithmetic around pauses ([`latency`]) is written once.
pub(crate) trait DueProbe {
    /// The due Scheduled jobs of `queue` at `now`: how many, and the earliest `due_at`
    /// ([`DUE_SQL`](crate::store::DUE_SQL) on SQLite).
    fn due(&mut self, queue: &str, now: Millis) -> Result<(u64, Option<Millis>)>;
    /// The same for one wire name of `queue` ([`DUE_WIRE_NAME_SQL`](crate::store::DUE_WIRE_NAME_SQL)
    /// on SQLite).
    fn due_of(&mut self, queue: &str, wire_name: &str, now: Millis) -> Result<(u64, Option<Millis>)>;
    /// The first wire name after `after` among the Scheduled jobs of `queue`
    /// ([`CLAIM_NEXT_WIRE_NAME_SQL`](crate::store::CLAIM_NEXT_WIRE_NAME_SQL) on SQLite).
    fn next_wire_name(&mut self, queue: &str, after: &str) -> Result<Option<String>>;
}

/// The pauses in force, as the latency reads need them.
pub(crate) struct InForce<'a> {
    pub(crate) queues: BTreeMap<&'a str, &'a Pause>,
    pub(crate) wire_names: BTreeSet<&'a str>,
}

impl<'a> InForce<'a> {
    pub(crate) fn new(pauses: &'a [Pause]) -> Self {
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
/// `held_by_wire_name` per paused wire name). Both backends, through their [`DueProbe`].
pub(crate) fn latency(
    probe: &mut impl DueProbe,
    counts: &StateCounts,
    queue: &str,
    now: Millis,
    pauses: &InForce,
    held_by_wire_name: &mut BTreeMap<String, u64>,
) -> Result<QueueLatency> {
    let paused = pauses.queues.get(queue).map(|p| (*p).clone());
    // A queue without Scheduled jobs (the counts say so exactly) needs no look at the index.
    let scheduled = counts.by_queue.get(queue).and_then(|m| m.get(&JobState::Scheduled)).copied().unwrap_or(0);
    let (mut due_now, mut oldest_due_at) = if scheduled == 0 { (0, None) } else { probe.due(queue, now)? };
    let mut held_by_pause = 0;
    if due_now > 0 && paused.is_some() {
        // Every due job of a paused queue is held: nothing in it is claimable.
        (held_by_pause, due_now, oldest_due_at) = (due_now, 0, None);
    } else if due_now > 0 && !pauses.wire_names.is_empty() {
        let mut oldest_is_held = false;
        for name in &pauses.wire_names {
            let (n, first) = probe.due_of(queue, name, now)?;
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
            oldest_due_at = oldest_unpaused(probe, queue, now, &pauses.wire_names)?;
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
fn oldest_unpaused(
    probe: &mut impl DueProbe,
    queue: &str,
    now: Millis,
    paused: &BTreeSet<&str>,
) -> Result<Option<Millis>> {
    let mut oldest: Option<Millis> = None;
    let mut after = String::new();
    while let Some(name) = probe.next_wire_name(queue, &after)? {
        if !paused.contains(name.as_str()) {
            let (_, first) = probe.due_of(queue, &name, now)?;
            oldest = match (oldest, first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        after = name;
    }
    Ok(oldest)
}
