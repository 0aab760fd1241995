//! The dispatcher of one worker group: the only thread that talks to the store for it. It claims
//! ahead into the group's ready buffer as fast as the handlers drain it, records finished jobs in
//! batches behind the fence, heartbeats every lease it holds (buffered or running), reaps lapsed
//! leases, runs the retention sweep, keeps the worker's registry row alive, and at shutdown hands
//! back the jobs no handler started and ends the leases of those whose handlers stopped when
//! asked. It never runs handler code.
//!
//! Over 500 lines on purpose: every step shares the one loop's state (what is claimed, waiting,
//! running, finished but unwritten, being handed back), and splitting it would pass that state
//! around; what stands alone is out already (`pool.rs`, `pace.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::group::{DispatchPolicy, Planner, WorkerGroup};
use super::handler::{CancelReason, CancelSignal, JobContext};
use super::pace::Pace;
use super::pool::{Done, ReadyBuffer, Work};
use super::runtime::{later, Counters, StopFlag};
use crate::error::Result;
use crate::model::{JobId, JobState, WorkerInfo};
use crate::store::{ClaimRequest, Completion, Fenced, LeaseStatus, Outcome, Store, UNREQUESTED_CANCEL};

/// How often a worker says it is alive in the registry, and after how long without that it
/// counts as gone.
pub(super) const WORKER_HEARTBEAT: Duration = Duration::from_secs(10);
pub(super) const WORKER_STALE_AFTER: Duration = Duration::from_secs(30);
/// Lapsed leases reaped per store transaction.
const REAP_BATCH: usize = 200;
/// Terminal jobs deleted per retention-sweep transaction, and batches per sweep.
const SWEEP_BATCH: usize = 500;
const SWEEP_MAX_BATCHES: usize = 20;
/// The longest gap between lease heartbeats, whatever the lease: the heartbeat is also how an
/// operator's cancel reaches a running or buffered job, so it should arrive within seconds.
const MAX_HEARTBEAT_GAP: Duration = Duration::from_secs(2);
/// After a store error, wait this long before the dispatcher tries again.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// Once one handler has finished, how long `collect` waits for the next before recording what
/// it has, and how long it gathers at most: quick handlers finish microseconds apart, and one
/// transaction for all of them is far cheaper than one each.
const COLLECT_LINGER: Duration = Duration::from_micros(200);
const COLLECT_MAX: Duration = Duration::from_millis(5);
/// At the shutdown deadline, how long the running handlers just asked to stop get to say they
/// did, so that their leases end at once rather than after a whole lease.
const STOP_WAIT: Duration = Duration::from_millis(500);
/// A job claimed ahead that has waited this long means the handlers stalled after it was
/// claimed (a burst of quick jobs, then slow ones): jobs beyond the current claim-ahead are
/// handed back so that another worker can run them now.
const BUFFER_MAX_WAIT: Duration = Duration::from_secs(1);

/// One claim of this dispatcher not yet reported, by the token of its claim: waiting in the
/// ready buffer or running. Not keyed by job: this same worker may claim a job again (its lease
/// was reaped, the job retried or requeued) while an earlier run of it still hangs, and a
/// requeue even repeats the `(worker, attempt)` pair the store's fence checks. Only the newest
/// run of a job is `current`: a stale one's outcome is dropped, and its end leaves the newer
/// run's lease alone.
struct Inflight {
    job_id: JobId,
    attempt: u32,
    cancel: CancelSignal,
    current: bool,
}

/// What the dispatcher is built from.
pub(super) struct Setup {
    pub store: Store,
    pub cfg: WorkerGroup,
    pub info: WorkerInfo,
    pub worker_id: Arc<str>,
    pub ready: Arc<ReadyBuffer>,
    pub done_rx: Receiver<Done>,
    pub stats: Arc<Counters>,
    pub stop: Arc<StopFlag>,
    /// The process's own quiet (SIGTSTP, `EngineHandle::quiet`): no claims while set.
    pub quiet: Arc<AtomicBool>,
    /// Only the first group of an engine sweeps.
    pub sweep_interval: Option<Duration>,
}

pub(super) struct Dispatcher {
    store: Store,
    planner: Planner,
    group: Arc<str>,
    cfg: WorkerGroup,
    info: WorkerInfo,
    worker_id: Arc<str>,
    inflight: HashMap<u64, Inflight>,
    next_run: u64,
    /// Outcomes not yet recorded (the store was busy, or they arrived since the last flush).
    pending: Vec<Completion>,
    /// Unstarted jobs taken back (at shutdown, or held too long behind stalled handlers) and
    /// not yet handed back to the store.
    handing_back: Vec<(JobId, u32)>,
    /// Runs whose handlers returned because the shutdown asked them to stop: they report no
    /// outcome, their leases are ended at once (see [`Dispatcher::end_stopped_leases`]).
    stopped: Vec<(JobId, u32)>,
    ready: Arc<ReadyBuffer>,
    done_rx: Receiver<Done>,
    stats: Arc<Counters>,
    stop: Arc<StopFlag>,
    quiet: Arc<AtomicBool>,
    sweep_interval: Option<Duration>,
    pace: Pace,
    /// The last claim failed without an answer: the store may have committed it (on PostgreSQL
    /// a connection can drop between COMMIT and its reply), leasing jobs to this worker that it
    /// never heard of. Checked before the next claim ([`Dispatcher::reclaim_lost`]).
    claim_in_doubt: bool,
}

impl Dispatcher {
    pub(super) fn new(s: Setup) -> Self {
        Dispatcher {
            planner: Planner::new(s.cfg.policy.clone()),
            group: Arc::from(s.cfg.name.as_str()),
            store: s.store,
            cfg: s.cfg,
            info: s.info,
            worker_id: s.worker_id,
            inflight: HashMap::new(),
            next_run: 0,
            pending: Vec::new(),
            handing_back: Vec::new(),
            stopped: Vec::new(),
            ready: s.ready,
            done_rx: s.done_rx,
            stats: s.stats,
            stop: s.stop,
            quiet: s.quiet,
            sweep_interval: s.sweep_interval,
            pace: Pace::new(Instant::now()),
            claim_in_doubt: false,
        }
    }

    pub(super) fn run(mut self) {
        let heartbeat_every = (self.cfg.lease / 3).min(MAX_HEARTBEAT_GAP);
        let start = Instant::now();
        let mut next_claim = start;
        let mut next_reap = start;
        let mut next_heartbeat = later(start, heartbeat_every);
        let mut next_worker_heartbeat = start + WORKER_HEARTBEAT;
        let mut next_sweep = self.sweep_interval.map(|_| later(start, self.cfg.poll_interval));
        let mut marked_stopping = false;
        loop {
            let stopping = self.stop.requested.load(Ordering::SeqCst);
            let grace_end = *self.stop.grace.lock().unwrap_or_else(|p| p.into_inner());
            if stopping {
                self.hand_back_unstarted();
                // `bw workers` shows it stopping, with what it still runs. Once: a failure
                // costs only the display.
                if !marked_stopping {
                    marked_stopping = true;
                    if let Err(e) = self.store.mark_stopping(&self.worker_id) {
                        self.stats.error(&e);
                    }
                }
            }
            let now = Instant::now();
            let mut wake = [next_heartbeat, next_worker_heartbeat, next_reap].into_iter().min().unwrap_or(now);
            if !stopping && self.claim_room().is_some() {
                wake = wake.min(next_claim);
            }
            if let Some(s) = next_sweep {
                wake = wake.min(s);
            }
            if let (true, Some(g)) = (stopping, grace_end) {
                wake = wake.min(g);
            }
            let wait =
                if stopping && self.inflight.is_empty() { Duration::ZERO } else { wake.saturating_duration_since(now) };
            self.collect(wait, stopping);
            self.flush();

            let now = Instant::now();
            if stopping && (self.inflight.is_empty() || grace_end.is_none_or(|g| now >= g)) {
                break;
            }
            if now >= next_heartbeat {
                self.heartbeat();
                self.give_back_surplus(now);
                next_heartbeat = later(now, heartbeat_every);
            }
            if now >= next_worker_heartbeat {
                self.worker_heartbeat();
                next_worker_heartbeat = now + WORKER_HEARTBEAT;
            }
            if let (Some(at), Some(every)) = (next_sweep, self.sweep_interval) {
                if now >= at {
                    self.sweep();
                    next_sweep = Some(later(now, every));
                }
            }
            if now >= next_reap {
                if self.reap() > 0 {
                    // A reaped job may be due again at once.
                    next_claim = now;
                }
                next_reap = later(now, self.cfg.poll_interval);
            }
            if stopping || now < next_claim {
                continue;
            }
            if let Some(room) = self.claim_room() {
                match self.claim(room) {
                    // Every place filled: there may be more due, claim again as room frees.
                    Ok(n) if n == room => next_claim = now,
                    // The queues are drained: look again after a poll interval.
                    Ok(_) => next_claim = later(now, self.cfg.poll_interval),
                    Err(e) => {
                        self.stats.error(&e);
                        next_claim = now + ERROR_BACKOFF.min(self.cfg.poll_interval);
                    }
                }
            }
        }
        self.finish();
    }

    /// How many jobs to claim now, if any: up to one per handler thread plus the claim-ahead,
    /// at most the policy's widest round. With a handler thread possibly idle, any room is worth
    /// a claim; past that, the buffer is topped up only once half the claim-ahead has drained,
    /// so claims stay wide.
    fn claim_room(&self) -> Option<usize> {
        if self.quiet.load(Ordering::SeqCst) {
            return None;
        }
        let ahead = self.pace.ahead();
        let held = self.inflight.len();
        let room = (self.cfg.concurrency + ahead).saturating_sub(held);
        let worth = held < self.cfg.concurrency || room >= ahead.div_ceil(2);
        (room > 0 && worth).then_some(room.min(self.planner.widest_round()))
    }

    /// Wait up to `wait` for the first finished job, then gather the others finishing right
    /// behind it, so that one store transaction records them all.
    fn collect(&mut self, wait: Duration, stopping: bool) {
        let first = if wait.is_zero() {
            self.done_rx.try_recv().ok()
        } else {
            match self.done_rx.recv_timeout(wait) {
                Ok(d) => Some(d),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
            }
        };
        let until = Instant::now() + COLLECT_MAX;
        let mut finished = 0;
        let mut next = first;
        while let Some(done) = next {
            if let Done::Finished { run, outcome } = done {
                finished += 1;
                match self.inflight.remove(&run) {
                    Some(f) if f.current && stopped_at_shutdown(&outcome, &f.cancel) => {
                        self.stopped.push((f.job_id, f.attempt));
                    }
                    Some(f) if f.current => self.pending.push(Completion {
                        job_id: f.job_id,
                        worker_id: self.worker_id.to_string(),
                        attempt: f.attempt,
                        outcome,
                    }),
                    // A stale run: the job was claimed again since, so its word is discarded.
                    Some(_) => Counters::add(&self.stats.fenced_out, 1),
                    None => {}
                }
            }
            next = match self.done_rx.try_recv() {
                Ok(d) => Some(d),
                Err(_) => {
                    // Linger only while handlers are still running and the buffer needs no
                    // refill: starving the handlers to widen a batch would cost more than it saves.
                    let now = Instant::now();
                    let running = self.inflight.len() > self.ready.len();
                    let refill = !stopping && self.claim_room().is_some();
                    if running && !refill && now < until {
                        self.done_rx.recv_timeout(COLLECT_LINGER.min(until - now)).ok()
                    } else {
                        None
                    }
                }
            };
        }
        self.pace.record(finished, Instant::now());
    }

    /// Record the finished jobs behind the fence, in one transaction. On a store error they
    /// stay pending and are retried: the leases are still ours until they lapse.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.store.complete_many(&self.pending) {
            Ok(fenced) => {
                for f in fenced {
                    self.count(f);
                }
                self.pending.clear();
            }
            Err(e) => {
                self.stats.error(&e);
                std::thread::sleep(ERROR_BACKOFF);
            }
        }
    }

    fn count(&self, f: Fenced) {
        let s = &self.stats;
        let counter = match f {
            Fenced::Accepted(JobState::Succeeded) => &s.succeeded,
            Fenced::Accepted(JobState::Scheduled) => &s.retried,
            Fenced::Accepted(JobState::DeadLettered) => &s.dead_lettered,
            Fenced::Accepted(JobState::Quarantined) => &s.quarantined,
            Fenced::Accepted(JobState::Cancelled) => &s.cancelled,
            Fenced::Accepted(JobState::Running) | Fenced::Rejected => &s.fenced_out,
        };
        Counters::add(counter, 1);
    }

    /// A job's place in line in the ready buffer: its queue's position under a strict policy,
    /// so a job claimed from a higher queue starts before buffered jobs of lower ones.
    fn rank(&self, queue: &str) -> usize {
        match &self.cfg.policy {
            DispatchPolicy::Strict(qs) => qs.iter().position(|q| q == queue).unwrap_or(qs.len()),
            DispatchPolicy::Weighted(_) => 0,
        }
    }

    /// Claim up to `room` jobs per the dispatch policy into the ready buffer.
    fn claim(&mut self, room: usize) -> Result<usize> {
        if self.claim_in_doubt {
            self.reclaim_lost()?;
        }
        let mut total = 0;
        for (queues, limit) in self.planner.plan(room) {
            let limit = limit.min(room - total);
            if limit == 0 {
                break;
            }
            let claimed = self.store.claim(&ClaimRequest {
                worker_id: &self.worker_id,
                group: &self.group,
                queues: &queues,
                limit,
                lease: self.cfg.lease,
                policy: &self.cfg.retry_policy,
            });
            self.claim_in_doubt = claimed.is_err();
            let jobs = claimed?;
            total += jobs.len();
            Counters::add(&self.stats.claimed, jobs.len() as u64);
            self.supersede(&jobs.iter().map(|j| j.id).collect());
            let mut works = Vec::with_capacity(jobs.len());
            for job in jobs {
                let cancel = CancelSignal::new();
                let ctx = JobContext {
                    job_id: job.id,
                    attempt: job.attempt,
                    max_attempts: job.max_attempts.unwrap_or(self.cfg.retry_policy.max_attempts()),
                    wire_name: job.wire_name.clone(),
                    queue: job.queue.clone(),
                    labels: job.labels.clone(),
                    group: Arc::clone(&self.group),
                    worker_id: Arc::clone(&self.worker_id),
                    cancel: cancel.clone(),
                };
                let run = self.next_run;
                self.next_run += 1;
                self.inflight.insert(run, Inflight { job_id: job.id, attempt: job.attempt, cancel, current: true });
                let rank = self.rank(&job.queue);
                works.push(Work { job, ctx, run, rank, claimed_at: Instant::now() });
            }
            self.ready.push(works);
        }
        Ok(total)
    }

    /// After a claim that failed without an answer: hand back (no attempt spent) every job the
    /// store leases to this worker that it does not hold, buffer, or owe an outcome or a hand-back
    /// for. Left alone they would sit until their leases lapse and then cost an attempt (a job on
    /// its last attempt would dead-letter as "lease expired" without ever having run).
    fn reclaim_lost(&mut self) -> Result<()> {
        let held = self.store.leases_held(&self.worker_id)?;
        let known: HashSet<(JobId, u32)> = self
            .inflight
            .values()
            .filter(|f| f.current)
            .map(|f| (f.job_id, f.attempt))
            .chain(self.pending.iter().map(|c| (c.job_id, c.attempt)))
            .chain(self.handing_back.iter().copied())
            .collect();
        self.claim_in_doubt = false;
        let before = self.handing_back.len();
        self.handing_back.extend(held.into_iter().filter(|j| !known.contains(j)));
        if self.handing_back.len() > before {
            self.give_back(Vec::new());
        }
        Ok(())
    }

    /// The store let us claim these jobs, so any earlier run of one of them here has lost its
    /// lease: one still waiting never starts, a running one is told and made stale, and an
    /// outcome of it not yet written is dropped. One pass per claim, not per job: the group may
    /// hold a thousand claims.
    fn supersede(&mut self, claimed: &HashSet<JobId>) {
        let earlier: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, f)| f.current && claimed.contains(&f.job_id))
            .map(|(run, _)| *run)
            .collect();
        for run in earlier {
            if self.ready.take(run).is_some() {
                self.inflight.remove(&run);
                Counters::add(&self.stats.fenced_out, 1);
            } else if let Some(f) = self.inflight.get_mut(&run) {
                f.current = false;
                f.cancel.cancel(CancelReason::LeaseLost);
            }
        }
        let before = self.pending.len();
        self.pending.retain(|c| !claimed.contains(&c.job_id));
        Counters::add(&self.stats.fenced_out, (before - self.pending.len()) as u64);
    }

    /// Renew the lease of every job this group holds (buffered, running, or finished with its
    /// outcome not yet written); pass an operator's cancel or a lost lease on. A buffered job
    /// that was cancelled never starts (it ends Cancelled now); one whose lease was lost is
    /// dropped.
    fn heartbeat(&mut self) {
        let runs: Vec<u64> = self.inflight.iter().filter(|(_, f)| f.current).map(|(run, _)| *run).collect();
        // Finished jobs whose outcome is not written yet (the store was busy), and unstarted ones
        // not yet handed back, keep their leases too, or they would lapse and run again.
        let held: Vec<(JobId, u32)> = runs
            .iter()
            .map(|run| (self.inflight[run].job_id, self.inflight[run].attempt))
            .chain(self.pending.iter().map(|c| (c.job_id, c.attempt)))
            .chain(self.handing_back.iter().copied())
            .collect();
        if held.is_empty() {
            return;
        }
        let statuses = match self.store.heartbeat(&self.worker_id, &held, self.cfg.lease) {
            Ok(s) => s,
            Err(e) => return self.stats.error(&e),
        };
        // Statuses past `runs` are the pending outcomes' and hand-backs': no handler to tell.
        for (run, status) in runs.into_iter().zip(statuses) {
            let reason = match status {
                LeaseStatus::Held { cancel_requested: false } => continue,
                LeaseStatus::Held { cancel_requested: true } => CancelReason::Operator,
                LeaseStatus::Lost => CancelReason::LeaseLost,
            };
            if self.ready.take(run).is_some() {
                let Some(f) = self.inflight.remove(&run) else { continue };
                match reason {
                    CancelReason::Operator => self.pending.push(Completion {
                        job_id: f.job_id,
                        worker_id: self.worker_id.to_string(),
                        attempt: f.attempt,
                        outcome: Outcome::Cancelled,
                    }),
                    _ => Counters::add(&self.stats.fenced_out, 1),
                }
            } else if let Some(f) = self.inflight.get(&run) {
                f.cancel.cancel(reason);
            }
        }
    }

    /// At shutdown: take every job no handler has started out of the ready buffer and give it
    /// back to the store unconsumed, then let idle handler threads end. A job never started
    /// should not be charged an attempt, nor wait for its lease to lapse before another worker
    /// may run it. If the store cannot be reached before the grace period ends, their leases
    /// lapse instead (counted as abandoned; that costs an attempt, as a crash would).
    fn hand_back_unstarted(&mut self) {
        if self.claim_in_doubt {
            if let Err(e) = self.reclaim_lost() {
                self.stats.error(&e);
            }
        }
        let all = self.ready.take_all();
        self.ready.close();
        self.give_back(all);
    }

    /// Hand back the jobs claimed ahead that the handlers' pace no longer justifies, once one
    /// has waited [`BUFFER_MAX_WAIT`]: held behind stalled handlers they would wait for no
    /// reason while other workers are free.
    fn give_back_surplus(&mut self, now: Instant) {
        let keep = self.pace.ahead();
        let surplus = self.ready.take_surplus(keep, now.checked_sub(BUFFER_MAX_WAIT).unwrap_or(now));
        self.give_back(surplus);
    }

    /// Return unstarted jobs to the store as Scheduled, their attempt not consumed (see
    /// [`Store::hand_back`]). On a store error they stay listed (their leases heartbeated) and
    /// the next call tries again.
    fn give_back(&mut self, works: Vec<Work>) {
        for w in works {
            if let Some(f) = self.inflight.remove(&w.run) {
                if f.current {
                    self.handing_back.push((f.job_id, f.attempt));
                }
            }
        }
        if self.handing_back.is_empty() {
            return;
        }
        match self.store.hand_back(&self.worker_id, &self.handing_back) {
            Ok(fenced) => {
                for f in fenced {
                    match f {
                        Fenced::Accepted(JobState::Scheduled) => Counters::add(&self.stats.handed_back, 1),
                        other => self.count(other),
                    }
                }
                self.handing_back.clear();
            }
            Err(e) => self.stats.error(&e),
        }
    }

    fn reap(&mut self) -> usize {
        match self.store.has_lapsed_leases() {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(e) => {
                self.stats.error(&e);
                return 0;
            }
        }
        let mut total = 0;
        loop {
            match self.store.reap_expired(REAP_BATCH) {
                Ok(n) => {
                    total += n;
                    if n < REAP_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    self.stats.error(&e);
                    break;
                }
            }
        }
        Counters::add(&self.stats.reaped, total as u64);
        total
    }

    fn worker_heartbeat(&mut self) {
        match self.store.worker_heartbeat(&self.worker_id) {
            Ok(true) => {}
            // Someone removed our row (e.g. a cleanup of stale workers): put it back.
            Ok(false) => {
                self.info.last_heartbeat_at = self.store.now();
                if let Err(e) = self.store.register_worker(&self.info) {
                    self.stats.error(&e);
                }
            }
            Err(e) => self.stats.error(&e),
        }
    }

    /// The retention sweep at the store's own setting, a bounded number of batches per round so
    /// that a huge first sweep does not hold up claims.
    fn sweep(&mut self) {
        for _ in 0..SWEEP_MAX_BATCHES {
            match self.store.sweep_expired(SWEEP_BATCH) {
                Ok(n) if n as usize == SWEEP_BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    self.stats.error(&e);
                    break;
                }
            }
        }
    }

    /// A host shutdown reports nothing for a job it stopped (SPEC, "Attempts and budget"): the
    /// job's lease is ended now instead, behind the same fence as a heartbeat (its expiry set
    /// to the store's now), so that the next reaper of any worker inherits it through the lapse
    /// path (a failed attempt, retried by its delay table) without waiting a whole lease.
    /// Returns how many are left to lapse in their own time (the store could not be reached).
    fn end_stopped_leases(&mut self) -> usize {
        if self.stopped.is_empty() {
            return 0;
        }
        // Twice: a PostgreSQL connection cut under the first write reconnects for the second.
        for _ in 0..2 {
            match self.store.heartbeat(&self.worker_id, &self.stopped, Duration::ZERO) {
                Ok(statuses) => {
                    // A lease already lost was another worker's to settle: nothing ended here.
                    let ended = statuses.iter().filter(|s| matches!(s, LeaseStatus::Held { .. })).count();
                    Counters::add(&self.stats.stopped, ended as u64);
                    Counters::add(&self.stats.fenced_out, (statuses.len() - ended) as u64);
                    self.stopped.clear();
                    return 0;
                }
                Err(e) => self.stats.error(&e),
            }
        }
        std::mem::take(&mut self.stopped).len()
    }

    /// Leave: anything finished is recorded, unstarted jobs are handed back, handlers still
    /// running after the grace period are told to stop; those that stop within [`STOP_WAIT`]
    /// report nothing but have their leases ended now (another worker inherits the jobs as
    /// lapses at its next poll), the others are reported on never (their leases lapse in
    /// their time); the worker leaves the registry.
    fn finish(mut self) {
        // Anything that finished during the last wait still counts.
        self.collect(Duration::ZERO, true);
        self.flush();
        self.hand_back_unstarted();
        for f in self.inflight.values() {
            f.cancel.cancel(CancelReason::Shutdown);
        }
        // A dropped handle (no grace, as a crash) waits for none of them.
        let wait = if self.stop.wait_for_stopped.load(Ordering::SeqCst) { STOP_WAIT } else { Duration::ZERO };
        let until = Instant::now() + wait;
        loop {
            let now = Instant::now();
            if self.inflight.is_empty() || now >= until {
                break;
            }
            self.collect(until - now, true);
        }
        self.flush();
        let lapsing = self.end_stopped_leases();
        Counters::add(&self.stats.abandoned, (self.inflight.len() + self.handing_back.len() + lapsing) as u64);
        if let Err(e) = self.store.unregister_worker(&self.worker_id) {
            self.stats.error(&e);
        }
        // Dropping self closes the ready buffer: idle handler threads end now, busy ones after
        // their job.
    }
}

/// Whether a handler gave up because the shutdown deadline asked it to (it returned the
/// cancellation after the shutdown's signal), rather than finishing or failing on its own.
fn stopped_at_shutdown(outcome: &Outcome, cancel: &CancelSignal) -> bool {
    matches!(outcome, Outcome::Failed { message, .. } if message == UNREQUESTED_CANCEL)
        && cancel.reason() == Some(CancelReason::Shutdown)
}

impl Drop for Dispatcher {
    /// However the dispatcher ends (its shutdown, or a bug that panicked it), the handler
    /// threads waiting on its ready buffer end too.
    fn drop(&mut self) {
        self.ready.close();
    }
}
