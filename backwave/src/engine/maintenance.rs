//! A worker's chores beside its own claims, each on its own timer: reaping any worker's lapsed
//! leases, the retention sweep (one group per engine), and keeping the worker's registry row
//! alive. The dispatcher runs what is due after its own heartbeat and wakes for the next chore;
//! nothing here touches the group's claims.

use std::time::{Duration, Instant};

use super::deadlines::Deadlines;
use super::dispatcher::MAX_HEARTBEAT_GAP;
use super::runtime::{later, Counters};
use crate::model::WorkerInfo;
use crate::store::Store;

/// How often a worker says it is alive in the registry, and after how long without that it
/// counts as gone.
pub(super) const WORKER_HEARTBEAT: Duration = Duration::from_secs(10);
pub(super) const WORKER_STALE_AFTER: Duration = Duration::from_secs(30);
/// Lapsed leases reaped per store transaction.
const REAP_BATCH: usize = 200;
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
    /// Held up this long (a heartbeat interval of this worker's), the reaper holds off.
    held_up_after: Duration,
    /// The worker's registry row, to put back if someone removed it.
    info: WorkerInfo,
}

impl Maintenance {
    /// Reaping starts at once; the sweep (`sweep_every`: only the first group of an engine)
    /// after one poll interval; the registry row was just written, so its heartbeat waits.
    pub fn new(
        now: Instant,
        poll: Duration,
        sweep_every: Option<Duration>,
        held_up_after: Duration,
        info: WorkerInfo,
    ) -> Self {
        let mut timers = Deadlines::new();
        timers.set(Chore::Reap, now);
        timers.set(Chore::Registry, later(now, WORKER_HEARTBEAT));
        if sweep_every.is_some() {
            timers.set(Chore::Sweep, later(now, poll));
        }
        Maintenance { timers, poll, sweep_every, held_up_after, info }
    }

    /// When the next chore falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.timers.next(|_| true)
    }

    /// Run the chores due at `now`, each then set for its next turn. Returns how many lapsed
    /// leases were reaped (a reaped job may be due again at once).
    ///
    /// `held_up`: how long the dispatcher's turn was kept from running (its thread not run, or
    /// its writes waiting on the store). A worker held up for one of its own heartbeat intervals
    /// cannot tell a dead worker from one held up as it was (the same lock, the same starved
    /// CPU), so it reaps nothing for a whole heartbeat gap, by which time every live worker has
    /// renewed its leases; the same goes when the reap itself was kept waiting (and the store
    /// reaps nothing after waiting [`HELD_UP`](crate::store::HELD_UP) for a lock).
    pub fn run_due(
        &mut self,
        store: &Store,
        worker_id: &str,
        stats: &Counters,
        now: Instant,
        held_up: Duration,
    ) -> usize {
        // `take_held_up`: any write of this worker (a claim, a heartbeat) waited for the store's
        // write lock long enough that a shorter lease than ours may have lapsed meanwhile.
        if held_up >= self.held_up_after || store.take_held_up() {
            self.hold_off_reaping(now);
        }
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
            self.timers.set(Chore::Reap, later(now, self.poll));
            match reap(store, stats, self.held_up_after) {
                Reaped::Count(n) => reaped = n,
                Reaped::HeldUp => self.hold_off_reaping(Instant::now()),
            }
        }
        reaped
    }

    /// No reaping until a whole heartbeat gap from now.
    fn hold_off_reaping(&mut self, now: Instant) {
        let until = later(now, MAX_HEARTBEAT_GAP);
        if self.timers.get(Chore::Reap).is_none_or(|at| at < until) {
            self.timers.set(Chore::Reap, until);
        }
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

enum Reaped {
    Count(usize),
    /// The store kept the reaper waiting: it reaped nothing more and holds off.
    HeldUp,
}

/// Reap every lapsed lease of any worker, a batch per transaction, unless the store holds the
/// reaper up: the look for lapsed leases takes `held_up_after` or longer (e.g. behind a
/// PostgreSQL lock on `jobs`), or the reap itself waited for a lock (`reap_lapsed` says `None`).
/// The leases it would find may have lapsed for that very wait.
fn reap(store: &Store, stats: &Counters, held_up_after: Duration) -> Reaped {
    let asked = Instant::now();
    match store.has_lapsed_leases() {
        Ok(true) => {}
        Ok(false) => return Reaped::Count(0),
        Err(e) => {
            stats.error(&e);
            return Reaped::Count(0);
        }
    }
    let mut total = 0;
    let mut held_up = asked.elapsed() >= held_up_after;
    while !held_up {
        match store.reap_lapsed(REAP_BATCH) {
            Ok(None) => held_up = true,
            Ok(Some(n)) => {
                total += n;
                if n < REAP_BATCH {
                    break;
                }
            }
            Err(e) => {
                stats.error(&e);
                break;
            }
        }
    }
    Counters::add(&stats.reaped, total as u64);
    match held_up {
        true => Reaped::HeldUp,
        false => Reaped::Count(total),
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
