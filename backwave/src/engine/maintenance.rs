//! A worker's chores beside its own claims, each on its own timer: reaping any worker's lapsed
//! leases, the retention sweep (one group per engine), and keeping the worker's registry row
//! alive. The dispatcher runs what is due after its own heartbeat and wakes for the next chore;
//! nothing here touches the group's claims.
//!
//! A lapsed lease is reaped only once confirmed: a look the store did not hold up found it
//! lapsed, and a look [`CONFIRM_AFTER`] or more later, not held up either, finds it lapsed still
//! with the same expiry. Something that holds the whole store (SQLite's write lock held by a
//! process, or by one frozen holding it; a PostgreSQL lock on `jobs`) keeps every heartbeat
//! waiting alike, and SQLite's lock is not handed out in turn: the first writer through once it
//! is free may well be a reaper, finding leases that lapsed only for that wait. Their workers'
//! heartbeats, queued behind the same lock, land within the confirmation and move the expiry;
//! a worker that really died stays lapsed and is reaped one confirmation later. A look takes
//! the lock it would reap under, so no look is made while the store is held: either it waited
//! (then it saw nothing) or the store was writable when it looked. Nothing else is needed: a
//! reaper starved of CPU only reaps later, never sooner.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadlines::{later, Deadlines};
use super::events::{Event, Hooks};
use super::shared::Counters;
use crate::model::WorkerInfo;
use crate::store::{Confirmed, Lapse, Store};

/// How often a worker says it is alive in the registry, and after how long without that it
/// counts as gone.
pub(super) const WORKER_HEARTBEAT: Duration = Duration::from_secs(10);
pub(super) const WORKER_STALE_AFTER: Duration = Duration::from_secs(30);
/// Lapsed leases looked at per store transaction.
const REAP_BATCH: usize = 200;
/// How long a lapse stays in sight before it is reaped (see the module's documentation): time
/// for a heartbeat that waited on the store to land once it is free.
const CONFIRM_AFTER: Duration = Duration::from_secs(1);
/// How long a sighting is kept without being reaped (see `Maintenance::reap`).
const SIGHTING_KEPT: Duration = Duration::from_secs(30);
/// Terminal jobs deleted per retention-sweep transaction, and batches per sweep.
const SWEEP_BATCH: usize = 500;
const SWEEP_MAX_BATCHES: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chore {
    /// Every poll interval.
    Reap,
    /// Every sweep interval, first after one poll interval.
    Sweep,
    /// Every [`WORKER_HEARTBEAT`].
    Registry,
}

pub(super) struct Maintenance {
    timers: Deadlines<Chore>,
    poll: Duration,
    sweep_every: Option<Duration>,
    /// Lapsed leases in sight, each with when a look first found it so.
    seen: HashMap<Lapse, Instant>,
    /// The worker's registry row, to put back if someone removed it.
    info: WorkerInfo,
    hooks: Arc<Hooks>,
}

impl Maintenance {
    /// Reaping starts at once; the sweep (`sweep_every`: only the first group of an engine)
    /// after one poll interval; the registry row was just written, so its heartbeat waits.
    pub fn new(
        now: Instant,
        poll: Duration,
        sweep_every: Option<Duration>,
        info: WorkerInfo,
        hooks: Arc<Hooks>,
    ) -> Self {
        let mut timers = Deadlines::new();
        timers.set(Chore::Reap, now);
        timers.set(Chore::Registry, later(now, WORKER_HEARTBEAT));
        if sweep_every.is_some() {
            timers.set(Chore::Sweep, later(now, poll));
        }
        Maintenance { timers, poll, sweep_every, seen: HashMap::new(), info, hooks }
    }

    /// When the next chore falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.timers.next(|_| true)
    }

    /// Run the chores due at `now`, each then set for its next turn. Returns how many lapsed
    /// leases were reaped (a reaped job may be due again at once).
    pub fn run_due(&mut self, store: &Store, worker_id: &str, stats: &Counters, now: Instant) -> usize {
        if self.timers.is_due(Chore::Registry, now) {
            self.registry_heartbeat(store, worker_id, stats);
            self.timers.set(Chore::Registry, later(now, WORKER_HEARTBEAT));
        }
        if let Some(every) = self.sweep_every {
            if self.timers.is_due(Chore::Sweep, now) {
                sweep(store, stats);
                self.timers.set(Chore::Sweep, later(now, every));
            }
        }
        let mut reaped = 0;
        if self.timers.is_due(Chore::Reap, now) {
            reaped = self.reap(store, stats);
            // The next look: a poll interval on, or sooner when a lapse in sight is confirmed.
            let confirm = self.seen.values().map(|&at| later(at, CONFIRM_AFTER)).filter(|&at| at > now).min();
            let next = later(now, self.poll);
            self.timers.set(Chore::Reap, confirm.map_or(next, |at| at.min(next)));
        }
        reaped
    }

    /// Look for lapsed leases of any worker, a batch per transaction: reap those confirmed, keep
    /// the others in sight. A look the store held up ends the round and forgets every sighting:
    /// its wait may have kept their workers' heartbeats waiting too.
    fn reap(&mut self, store: &Store, stats: &Counters) -> usize {
        match store.has_lapsed_leases() {
            Ok(true) => {}
            Ok(false) => {
                self.seen.clear();
                return 0;
            }
            Err(e) => {
                stats.error(&e);
                return 0;
            }
        }
        let looked = Instant::now();
        let confirmed: HashSet<Lapse> = self
            .seen
            .iter()
            .filter(|(_, &at)| looked.saturating_duration_since(at) >= CONFIRM_AFTER)
            .map(|(lapse, _)| *lapse)
            .collect();
        let mut total = 0;
        loop {
            match store.reap_lapsed(REAP_BATCH, Confirmed::Seen(&confirmed)) {
                Ok(None) => {
                    self.seen.clear();
                    break;
                }
                Ok(Some(round)) => {
                    total += round.reaped;
                    for r in &round.ended {
                        tracing::warn!(
                            messaging.message.id = %r.job_id,
                            backwave.attempt = r.attempt,
                            backwave.lease_owner = %r.worker_id,
                            backwave.worker_id = %self.info.id,
                            backwave.state = r.state.as_str(),
                            "lease lapsed: the attempt is reaped as failed"
                        );
                        self.hooks.tell(&Event::LapseReaped {
                            job: r.job_id,
                            attempt: r.attempt,
                            owner: r.worker_id.clone(),
                            state: r.state,
                        });
                    }
                    let at = Instant::now();
                    for lapse in &round.seen {
                        self.seen.entry(*lapse).or_insert(at);
                    }
                    // A full batch of which some were reaped: there may be more behind it.
                    if round.reaped == 0 || round.reaped + round.seen.len() < REAP_BATCH {
                        break;
                    }
                }
                // An error is no evidence either way: what was in sight stays so.
                Err(e) => {
                    stats.error(&e);
                    break;
                }
            }
        }
        // A sighting a look did not find again stays: on PostgreSQL another reaper's look may
        // hold its row (`SKIP LOCKED`), and forgetting it would start its confirmation over at
        // every such miss. A stale one is harmless (a renewal moves the expiry, a reap ends the
        // attempt, so it never matches again) and is dropped after a while.
        self.seen.retain(|_, at| looked.saturating_duration_since(*at) < SIGHTING_KEPT);
        Counters::add(&stats.reaped, total as u64);
        total
    }

    fn registry_heartbeat(&mut self, store: &Store, worker_id: &str, stats: &Counters) {
        match store.worker_heartbeat(worker_id) {
            Ok(true) => {}
            // Someone removed our row (e.g. a cleanup of stale workers): put it back.
            Ok(false) => {
                self.info.last_heartbeat_at = store.now();
                if let Err(e) = store.register_worker(&self.info) {
                    stats.error(&e);
                }
            }
            Err(e) => stats.error(&e),
        }
    }
}

/// The retention sweep at the store's own setting, a bounded number of batches per round so
/// that a huge first sweep does not hold up claims.
fn sweep(store: &Store, stats: &Counters) {
    for _ in 0..SWEEP_MAX_BATCHES {
        match store.sweep_expired(SWEEP_BATCH) {
            Ok(n) if n as usize == SWEEP_BATCH => continue,
            Ok(_) => break,
            Err(e) => {
                stats.error(&e);
                break;
            }
        }
    }
}
