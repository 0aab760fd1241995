//! The dispatcher of one worker group: the thread that talks to the store for it. It claims
//! ahead into the group's ready buffer as fast as the handlers drain it, records finished jobs in
//! batches behind the fence (through `recorder.rs`: on PostgreSQL a second connection writes one
//! batch while this one claims), heartbeats every lease its claim table holds (`claims.rs`), runs the
//! maintenance chores when due (`maintenance.rs`), and at shutdown hands back the jobs no handler
//! started and ends the leases of those whose handlers stopped when asked. It never runs handler
//! code, and never sleeps but to wait for the next finished job or deadline.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::claims::{Claims, JobIds, State};
use super::deadlines::{later, Deadlines};
use super::events::{self, About, Event, Hooks};
use super::group::{DispatchPolicy, Planner, WorkerGroup};
use super::handler::{CancelReason, CancelSignal, JobContext};
use super::maintenance::Maintenance;
use super::outage::Watch;
use super::pace::{Pace, MAX_AHEAD};
use super::pool::{ReadyBuffer, Work};
use super::recorder::Recorder;
use super::shared::{Counters, Done, ProcessQuiet, Recorded, StopFlag};
use super::wake::Rung;
use crate::error::Result;
use crate::model::{JobId, JobState, Millis, WorkerInfo};
use crate::retry::RetryPolicy;
use crate::store::{ClaimRequest, Fenced, LeaseStatus, Outcome, Store, UNREQUESTED_CANCEL};

/// After a store error, how long before the dispatcher tries that step again. A deadline, never
/// a sleep: the heartbeat must not wait behind a write the store refused.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// Once one handler has finished, how long `collect` waits for the next before recording what
/// it has, and how long it gathers at most: quick handlers finish microseconds apart, and one
/// transaction for all of them is far cheaper than one each.
const COLLECT_LINGER: Duration = Duration::from_micros(200);
const COLLECT_MAX: Duration = Duration::from_millis(5);
/// At the shutdown deadline, how long the running handlers just asked to stop get to say they
/// did, so that their leases end at once rather than after a whole lease.
const STOP_WAIT: Duration = Duration::from_millis(500);
/// Outcomes waiting for the store, beyond one per handler thread, past which the group claims
/// nothing more until the store takes them. A completion that stalls (a store overloaded, a
/// statement stuck behind a lock or a bad plan) must not let the group go on claiming as fast
/// as its handlers finish: one worker whose completions hung took 192,000 jobs of a burst of
/// 200,000 in five seconds, each held under a lease nobody would renew. Four widest claims: in a
/// steady drain the waiting outcomes are what finishes during one completion round trip.
const UNRECORDED_MAX: usize = 4 * MAX_AHEAD;
/// A job claimed ahead that has waited this long means the handlers stalled after it was
/// claimed (a burst of quick jobs, then slow ones): jobs beyond the current claim-ahead are
/// handed back so that another worker can run them now.
const BUFFER_MAX_WAIT: Duration = Duration::from_secs(1);
/// How long a job must have been due, while a claim with room left it, before the group says
/// due work is held back: a job enqueued just after a claim's look is not.
const HELD_BACK_AFTER_MS: i64 = 1_000;

/// The dispatcher's own steps, each on its deadline (the maintenance chores keep theirs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The next claim: now while the queues give all that was asked, a poll interval after they
    /// ran dry, a short backoff after an error. Only waited for while there is room.
    Claim,
    /// Read every held lease and renew those due ([`crate::store::renewal_threshold`]): every
    /// third of the lease, at most every 2 s.
    Heartbeat,
    /// Set only while outcomes wait after the store refused them: the next try.
    Flush,
}

/// What the dispatcher is built from.
pub(super) struct Setup {
    pub store: Store,
    pub cfg: WorkerGroup,
    pub info: WorkerInfo,
    pub worker_id: Arc<str>,
    pub ready: Arc<ReadyBuffer>,
    pub done_rx: Receiver<Done>,
    pub recorder: Recorder,
    pub stats: Arc<Counters>,
    pub stop: Arc<StopFlag>,
    /// The process's own quiet (SIGTSTP, `EngineHandle::quiet`): written into this worker's
    /// registry row when it changes (see [`Dispatcher::sync_quiet`]).
    pub quiet: Arc<ProcessQuiet>,
    /// Only the first group of an engine sweeps.
    pub sweep_interval: Option<Duration>,
    /// Handlers' own retry policies (`Registration::retry`), by wire name.
    pub handler_policies: Vec<(String, RetryPolicy)>,
    /// What the rings since the last [`Done::Work`] said (`wake.rs`).
    pub rung: Arc<Rung>,
    /// This group's view of the store, for the engine's once-per-outage events (`outage.rs`).
    pub watch: Watch,
    /// The engine's read handle for handlers ([`JobContext::parents`]).
    pub reader: Arc<super::handler::Reader>,
    /// The application's hooks ([`crate::engine::Engine::on_event`]).
    pub hooks: Arc<Hooks>,
}

pub(super) struct Dispatcher {
    store: Store,
    reader: Arc<super::handler::Reader>,
    planner: Planner,
    group: Arc<str>,
    cfg: WorkerGroup,
    worker_id: Arc<str>,
    /// Every claim not yet settled with the store, and so every lease this worker holds.
    claims: Claims,
    /// Runs whose handlers returned because the shutdown asked them to stop: they report no
    /// outcome, their leases are ended at once (see [`Dispatcher::end_stopped_leases`]).
    stopped: Vec<(JobId, u32)>,
    ready: Arc<ReadyBuffer>,
    done_rx: Receiver<Done>,
    recorder: Recorder,
    stats: Arc<Counters>,
    stop: Arc<StopFlag>,
    quiet: Arc<ProcessQuiet>,
    handler_policies: Vec<(String, RetryPolicy)>,
    /// The process's quiet as last written into the registry row, and how many asks to be quiet
    /// that write had seen (a later ask is written again: an operator may have lifted the first).
    quiet_written: bool,
    quiet_asks_written: u64,
    pace: Pace,
    steps: Deadlines<Step>,
    heartbeat_every: Duration,
    maintenance: Maintenance,
    /// The last claim failed without an answer: the store may have committed it (on PostgreSQL
    /// a connection can drop between COMMIT and its reply), leasing jobs to this worker that it
    /// never heard of. Checked before the next claim ([`Dispatcher::reclaim_lost`]).
    claim_in_doubt: bool,
    /// The store was told this worker is stopping (once).
    marked_stopping: bool,
    /// Past this many outcomes waiting for the store, no claim ([`UNRECORDED_MAX`]).
    unrecorded_max: usize,
    rung: Arc<Rung>,
    /// The next claim was asked for by a ring that only knows the store changed: look first
    /// whether anything is due (a read) before claiming (a write lock on SQLite).
    look_first: bool,
    /// Until then, rings that only know the store changed are not heard: a claim one of them
    /// asked for found a job due but could claim none (a paused wire name or a limit holds it),
    /// and every commit of a busy store would otherwise ask for that write again.
    deaf_until: Instant,
    /// Every queue of the policy: where [`Store::next_due`] looks when the queues ran dry.
    queues: Vec<String>,
    /// Whether the store answered a claim, heartbeat or batch of outcomes in this turn: with
    /// no error in the same turn, the store works again (see [`Dispatcher::run`]).
    answered: bool,
    watch: Watch,
    /// Due work of the group's queues waits while it has room (said once per change).
    held_back: bool,
    /// The due time of the oldest due job a look found passed over, and when it was first found.
    held_candidate: Option<(i64, Instant)>,
    hooks: Arc<Hooks>,
}

impl Dispatcher {
    pub(super) fn new(s: Setup) -> Self {
        let now = Instant::now();
        let heartbeat_every = crate::store::heartbeat_every(s.cfg.lease);
        let mut steps = Deadlines::new();
        steps.set(Step::Claim, now);
        steps.set(Step::Heartbeat, later(now, heartbeat_every));
        let unrecorded_max = s.cfg.concurrency.saturating_add(UNRECORDED_MAX);
        Dispatcher {
            queues: s.cfg.policy.queues(),
            planner: Planner::new(s.cfg.policy.clone()),
            group: Arc::from(s.cfg.name.as_str()),
            maintenance: Maintenance::new(now, s.cfg.poll_interval, s.sweep_interval, s.info, Arc::clone(&s.hooks)),
            store: s.store,
            reader: s.reader,
            cfg: s.cfg,
            claims: Claims::new(Arc::clone(&s.worker_id)),
            worker_id: s.worker_id,
            stopped: Vec::new(),
            ready: s.ready,
            done_rx: s.done_rx,
            recorder: s.recorder,
            stats: s.stats,
            stop: s.stop,
            quiet: s.quiet,
            handler_policies: s.handler_policies,
            quiet_written: false,
            quiet_asks_written: 0,
            pace: Pace::new(now),
            steps,
            heartbeat_every,
            claim_in_doubt: false,
            marked_stopping: false,
            unrecorded_max,
            rung: s.rung,
            look_first: false,
            deaf_until: now,
            answered: false,
            watch: s.watch,
            held_back: false,
            held_candidate: None,
            hooks: s.hooks,
        }
    }

    pub(super) fn run(mut self) {
        loop {
            let (errors, began) = (self.stats.own_errors(), Instant::now());
            self.answered = false;
            let more = self.turn();
            self.watch_turn(errors, began);
            if !more {
                break;
            }
        }
        self.finish();
    }

    /// After a turn: a store error in it means the store fails (said once, however many turns
    /// it lasts); an answer without an error, that it works (again). A turn that asked the
    /// store nothing changes nothing, and one where a claim went through but the outcomes were
    /// refused still counts as failing, so a store that refuses one write keeps one warning.
    fn watch_turn(&mut self, errors_before: u64, began: Instant) {
        if self.stats.own_errors() > errors_before {
            self.watch.failed(&self.stats.last_error(), began);
        } else if self.answered {
            self.watch.worked();
        }
    }

    /// One turn of the loop: wait for a finished job or the next deadline, record what finished,
    /// then whatever is due: the heartbeat, the chores, a claim. False once the group should
    /// leave (stopping, and nothing runs or the grace period is over).
    fn turn(&mut self) -> bool {
        let stopping = self.stop.requested.load(Ordering::SeqCst);
        let grace_end = *self.stop.grace.lock().unwrap_or_else(|p| p.into_inner());
        if stopping {
            self.hand_back_unstarted();
            // `bw workers` shows it stopping, with what it still runs. Written once; a write
            // that failed (the store busy past its timeout, say) is tried again next turn,
            // rather than leaving the worker shown live for the rest of its stop.
            if !self.marked_stopping {
                match self.store.mark_stopping(&self.worker_id) {
                    Ok(()) => self.marked_stopping = true,
                    Err(e) => self.stats.error(&e),
                }
            }
        }
        let now = Instant::now();
        let wait = if stopping && self.claims.active() == 0 {
            Duration::ZERO
        } else {
            self.next_wake(stopping, grace_end).map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
        };
        self.collect(wait, stopping);
        self.sync_started();
        self.flush(Instant::now());

        let now = Instant::now();
        if stopping && (self.claims.active() == 0 || grace_end.is_none_or(|g| now >= g)) {
            return false;
        }
        self.sync_quiet();
        if self.steps.is_due(Step::Heartbeat, now) {
            self.heartbeat();
            self.give_back_surplus(now);
            self.steps.set(Step::Heartbeat, later(now, self.heartbeat_every));
        }
        // A reaped job may be due again at once.
        if self.maintenance.run_due(&self.store, &self.worker_id, &self.stats, now) > 0 {
            self.steps.set(Step::Claim, now);
        }
        if stopping || !self.steps.is_due(Step::Claim, now) {
            return true;
        }
        if let Some(room) = self.claim_room() {
            let doubtful = std::mem::take(&mut self.look_first);
            if doubtful {
                if let Some(next) = self.nothing_due(now) {
                    self.steps.set(Step::Claim, next);
                    return true;
                }
            }
            let claimed = self.claim(room);
            self.answered |= claimed.is_ok();
            let next = match claimed {
                // Every place filled: there may be more due, claim again as room frees.
                Ok(n) if n == room => now,
                // The queues are drained: look again when the next job is due, or after a poll
                // interval (unless a ring brings the claim forward).
                Ok(n) => {
                    let due = self.next_due();
                    let store_now = self.store.now();
                    self.look_held_back(due.filter(|&at| at <= store_now.saturating_sub(HELD_BACK_AFTER_MS)), now);
                    // Nothing claimed though a job is still due: something holds it back (not
                    // another worker that was quicker, which would have left nothing due).
                    if doubtful && n == 0 && due.is_some_and(|at| at <= self.store.now()) {
                        self.deaf_until = later(now, self.cfg.poll_interval);
                    }
                    self.look_after(now, due)
                }
                Err(e) => {
                    self.stats.error(&e);
                    now + ERROR_BACKOFF.min(self.cfg.poll_interval)
                }
            };
            self.steps.set(Step::Claim, next);
        }
        true
    }

    /// Before a claim a doubtful ring asked for: `None` if a job of the group's queues is due
    /// (claim now), else when to look next, as [`Dispatcher::look_after`] says.
    fn nothing_due(&self, now: Instant) -> Option<Instant> {
        match self.store.next_due(&self.queues) {
            Ok(Some(at)) if at <= self.store.now() => None,
            Ok(due) => Some(self.look_after(now, due)),
            // The claim will say what is wrong.
            Err(_) => None,
        }
    }

    /// When the earliest Scheduled job of the group's queues is due ([`Store::next_due`]); on a
    /// store error, `None` (the poll then looks again).
    fn next_due(&self) -> Option<Millis> {
        self.store.next_due(&self.queues).unwrap_or_else(|e| {
            self.stats.error(&e);
            None
        })
    }

    /// The next look for a group whose earliest job is due at `due`: one millisecond after it,
    /// or at the poll interval, whichever is sooner; a job due already (held back by a pause or
    /// a limit) waits for the poll.
    fn look_after(&self, now: Instant, due: Option<Millis>) -> Instant {
        let poll = later(now, self.cfg.poll_interval);
        // The store's clock and the monotonic one read together: `now` was read before the
        // claim and the look, which may have taken a while, and a deadline counted from it
        // would come before the job is due (found on a loaded machine: the claim came 10 ms
        // early, took nothing, and the retry then waited for the poll).
        let (store_now, instant_now) = (self.store.now(), Instant::now());
        match due.map(|at| at.saturating_sub(store_now)) {
            Some(ms) if ms > 0 => poll.min(later(instant_now, Duration::from_millis(ms as u64 + 1))),
            _ => poll,
        }
    }

    /// After a claim that left room: `oldest`, the due time of the earliest job of the group's
    /// queues if it has been due for [`HELD_BACK_AFTER_MS`]. Held back once the same job has
    /// been found so for as long again: on PostgreSQL a job another worker's claim has locked
    /// (`SKIP LOCKED`) is passed over once, and is gone at the next look.
    fn look_held_back(&mut self, oldest: Option<i64>, now: Instant) {
        let held = match (oldest, self.held_candidate) {
            (None, _) => {
                self.held_candidate = None;
                false
            }
            (Some(at), Some((seen, since))) if seen == at => {
                self.held_back || now.saturating_duration_since(since).as_millis() as i64 >= HELD_BACK_AFTER_MS
            }
            (Some(at), _) => {
                self.held_candidate = Some((at, now));
                self.held_back
            }
        };
        self.tell_held_back(held);
    }

    /// Say once when due work starts (and stops) waiting while this group had room to claim it:
    /// a pause or a limit holds it back (or a claim of this group cannot reach it).
    fn tell_held_back(&mut self, held: bool) {
        if held == self.held_back {
            return;
        }
        self.held_back = held;
        let group = self.group.to_string();
        let event = if held {
            tracing::info!(
                backwave.worker_group = %self.group,
                backwave.worker_id = %self.worker_id,
                backwave.queues = ?self.queues,
                "due work held back: jobs of this group's queues wait while it has room (a pause or a limit)"
            );
            Event::HeldBack { group, queues: self.queues.clone() }
        } else {
            tracing::info!(
                backwave.worker_group = %self.group,
                backwave.worker_id = %self.worker_id,
                "due work no longer held back"
            );
            Event::HeldBackEnded { group }
        };
        self.hooks.tell(&event);
    }

    /// When the loop must next act: its own steps (a claim only when there is room for one and
    /// no stop was asked), the maintenance chores, and the end of a shutdown's grace period.
    fn next_wake(&self, stopping: bool, grace_end: Option<Instant>) -> Option<Instant> {
        let claiming = !stopping && self.claim_room().is_some();
        let own = self.steps.next(|s| s != Step::Claim || claiming);
        let grace = grace_end.filter(|_| stopping);
        [own, self.maintenance.next_due(), grace].into_iter().flatten().min()
    }

    /// Write the process's own quiet into this worker's registry row when it changed (SIGTSTP
    /// and `EngineHandle::quiet` only set a flag): the row is what the claim reads, what `bw
    /// workers` and `bw check` show, and what `bw workers resume` lifts. Such a quiet was once
    /// the process's alone, so a worker that claimed nothing still showed `live`. Until the
    /// write succeeds the flag itself holds the claims (see [`Dispatcher::claim_room`]).
    fn sync_quiet(&mut self) {
        let wanted = self.quiet.is_on();
        if !self.quiet_unwritten() && wanted == self.quiet_written {
            return;
        }
        let asks = self.quiet.asks();
        match self.store.mark_quiet_self(&self.worker_id, wanted) {
            Ok(()) => (self.quiet_written, self.quiet_asks_written) = (wanted, asks),
            Err(e) => self.stats.error(&e),
        }
    }

    /// Whether the process is quiet by an ask not yet written into the registry row.
    fn quiet_unwritten(&self) -> bool {
        self.quiet.is_on() && (!self.quiet_written || self.quiet.asks() != self.quiet_asks_written)
    }

    /// Tell the claim table which buffered jobs handlers have taken since the last look.
    fn sync_started(&mut self) {
        for run in self.ready.take_started() {
            self.claims.started(run);
        }
    }

    /// How many jobs to claim now, if any: up to one per handler thread plus the claim-ahead,
    /// at most the policy's widest round. With a handler thread possibly idle, any room is worth
    /// a claim; past that, the buffer is topped up only once half the claim-ahead has drained,
    /// so claims stay wide. None while the store has not taken [`UNRECORDED_MAX`] outcomes.
    fn claim_room(&self) -> Option<usize> {
        // A process quiet not yet in the row holds the claims itself; once written, the row
        // does (the claim reads it), so an operator's `bw workers resume` lifts it.
        if self.quiet_unwritten() || self.claims.unrecorded() >= self.unrecorded_max {
            return None;
        }
        let ahead = self.pace.ahead();
        let held = self.claims.active();
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
            finished += usize::from(self.take(done));
            next = match self.done_rx.try_recv() {
                Ok(d) => Some(d),
                Err(_) => {
                    // Linger only while handlers are still running and the buffer needs no
                    // refill: starving the handlers to widen a batch would cost more than it saves.
                    let now = Instant::now();
                    let running = self.claims.active() > self.ready.len();
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

    /// Take in one message; whether it was a handler's finished run.
    fn take(&mut self, done: Done) -> bool {
        let (run, outcome, span, took) = match done {
            Done::Finished { run, outcome, span, took } => (run, outcome, span, took),
            Done::Recorded(recorded) => {
                self.recorded(recorded, Instant::now());
                return false;
            }
            Done::Wake => return false,
            Done::Work => {
                // Cleared before the claim it asks for: a ring during that claim asks again.
                self.rung.pending.store(false, Ordering::SeqCst);
                let sure = self.rung.sure.swap(false, Ordering::SeqCst);
                let now = Instant::now();
                if !sure && now < self.deaf_until {
                    return false;
                }
                // A poll or an earlier ring that was sure wins over a doubt.
                self.look_first = !sure && (self.look_first || !self.steps.is_due(Step::Claim, now));
                self.steps.set(Step::Claim, now);
                return false;
            }
        };
        match self.claims.get(run).map(|c| (c.state, stopped_at_shutdown(&outcome, &c.cancel))) {
            Some((State::Buffered | State::Running, true)) => {
                if let Some(c) = self.claims.remove(run) {
                    self.stopped.push((c.job_id, c.attempt));
                }
                crate::telemetry::stopped(&span);
            }
            Some((State::Buffered | State::Running, false)) => {
                self.claims.finished_in(run, outcome, span, took);
            }
            // A stale run: the job was claimed again since, so its word is discarded.
            Some((State::Superseded, _)) => {
                if let Some(c) = self.claims.remove(run) {
                    Counters::add(&self.stats.fenced_out, 1);
                    let lease = (c.job_id, c.attempt);
                    self.hooks.verdict(&span, self.store.now(), || events::discarded(lease, events::CLAIMED_AGAIN));
                }
            }
            Some((State::Finished | State::Recording | State::HandingBack, _)) | None => {}
        }
        true
    }

    /// Record the finished jobs behind the fence, in one transaction, unless a refused write
    /// waits for its retry. On a store error they stay in the claim table (their leases
    /// heartbeated, they are still ours) and the next try is a deadline [`ERROR_BACKOFF`] away:
    /// the loop goes on heartbeating meanwhile instead of sleeping it off.
    fn flush(&mut self, now: Instant) {
        if self.steps.get(Step::Flush).is_some_and(|at| now < at) {
            return;
        }
        self.flush_now(now);
    }

    /// [`Dispatcher::flush`] whatever the deadline. One batch at a time: while one is being
    /// written, what finishes waits for the next.
    fn flush_now(&mut self, now: Instant) {
        if self.claims.recording() {
            return;
        }
        if self.claims.outcomes().is_empty() {
            self.steps.clear(Step::Flush);
            return;
        }
        let batch = self.claims.take_outcomes();
        if let Some(recorded) = self.recorder.record(&self.store, batch) {
            self.recorded(recorded, now);
        }
    }

    /// The store's word on a batch of outcomes: each counted and its claim ended, or, refused,
    /// the batch waits again for a try [`ERROR_BACKOFF`] away.
    fn recorded(&mut self, (batch, result): Recorded, now: Instant) {
        match result {
            Ok(fenced) => {
                self.answered = true;
                for f in &fenced {
                    self.count(*f);
                }
                // The store's word on each attempt, on its span; a refused one's handler hears
                // that its attempt is lost (its result was discarded), should it still be at work.
                let store_now = self.store.now();
                let mut answers = fenced.iter().zip(&batch);
                let hooks = &self.hooks;
                self.claims.recorded_each(|claim| {
                    let Some((f, c)) = answers.next() else { return };
                    if *f == Fenced::Rejected {
                        claim.cancel.cancel(CancelReason::LeaseLost);
                    }
                    let lease = (claim.job_id, claim.attempt);
                    hooks.verdict(&claim.span, store_now, || {
                        events::verdict(lease, &claim.about, *f, &c.outcome, store_now, claim.took)
                    });
                });
                self.steps.clear(Step::Flush);
            }
            Err(e) => {
                self.stats.error(&e);
                self.claims.not_recorded(batch);
                self.steps.set(Step::Flush, now + ERROR_BACKOFF);
            }
        }
    }

    /// At shutdown: record every outcome there is, waiting for the batch being written first.
    /// A refused batch is not tried again (there is no later try: those leases lapse).
    fn flush_all(&mut self) {
        self.settle_recording();
        self.flush_now(Instant::now());
        self.settle_recording();
    }

    /// Wait for the store's word on the batch being written, if one is.
    fn settle_recording(&mut self) {
        while self.claims.recording() {
            match self.done_rx.recv() {
                Ok(done) => {
                    self.take(done);
                }
                // Every sender gone: nothing will answer.
                Err(_) => break,
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
            // An attempt never ends Waiting: only an enqueue makes a job wait.
            Fenced::Accepted(JobState::Running | JobState::Waiting) | Fenced::Rejected => &s.fenced_out,
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
                handler_policies: &self.handler_policies,
            });
            self.claim_in_doubt = claimed.is_err();
            let jobs = claimed?;
            total += jobs.len();
            Counters::add(&self.stats.claimed, jobs.len() as u64);
            self.supersede(&jobs.iter().map(|j| j.id).collect());
            let mut works = Vec::with_capacity(jobs.len());
            // The jobs of a claim mostly share their wire name and queue: one shared string each.
            let mut names: Option<(Arc<str>, Arc<str>)> = None;
            for job in jobs {
                let cancel = CancelSignal::new();
                let (wire_name, queue) = match names.take() {
                    Some((w, q)) if *w == *job.wire_name && *q == *job.queue => (w, q),
                    _ => (Arc::from(job.wire_name.as_str()), Arc::from(job.queue.as_str())),
                };
                names = Some((Arc::clone(&wire_name), Arc::clone(&queue)));
                let ctx = JobContext {
                    job_id: job.id,
                    attempt: job.attempt,
                    max_attempts: job.max_attempts.unwrap_or(self.cfg.retry_policy.max_attempts()),
                    wire_name: Arc::clone(&wire_name),
                    queue: Arc::clone(&queue),
                    labels: job.labels.clone(),
                    group: Arc::clone(&self.group),
                    worker_id: Arc::clone(&self.worker_id),
                    cancel: cancel.clone(),
                    reader: Some(Arc::clone(&self.reader)),
                    report: Arc::default(),
                };
                let about = About { wire_name, queue, max_attempts: ctx.max_attempts, retry_ms: job.next_delay_ms() };
                let run = self.claims.claimed_with(job.id, job.attempt, cancel, about, Some(Arc::clone(&ctx.report)));
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
        let known: HashSet<(JobId, u32)> = self.claims.held().map(|(_, lease)| lease).collect();
        self.claim_in_doubt = false;
        let mut lost = false;
        for (job_id, attempt) in held.into_iter().filter(|j| !known.contains(j)) {
            self.claims.lost(job_id, attempt);
            lost = true;
        }
        if lost {
            self.give_back(Vec::new());
        }
        Ok(())
    }

    /// The store let us claim these jobs, so any earlier run of one of them here has lost its
    /// lease: one still waiting never starts, a running one is told and made stale, and an
    /// outcome of it not yet written is dropped. One pass per claim, not per job: the group may
    /// hold a thousand claims.
    fn supersede(&mut self, claimed: &JobIds) {
        for run in self.claims.live_of(claimed) {
            if self.ready.take(run).is_some() {
                self.claims.remove(run);
                Counters::add(&self.stats.fenced_out, 1);
            } else {
                self.claims.supersede(run);
                if let Some(c) = self.claims.get(run) {
                    if c.cancel.reason().is_none() {
                        tracing::warn!(
                            messaging.message.id = %c.job_id,
                            backwave.attempt = c.attempt,
                            backwave.worker_id = %self.worker_id,
                            "lease lost while the handler runs (the job was claimed again): it is told to stop, and its result will be discarded"
                        );
                        self.hooks.tell(&Event::LeaseLost { job: c.job_id, attempt: c.attempt });
                    }
                    c.cancel.cancel(CancelReason::LeaseLost);
                }
            }
        }
        let dropped = self.claims.drop_outcomes_of(claimed);
        Counters::add(&self.stats.fenced_out, dropped.len() as u64);
        for c in dropped {
            let lease = (c.job_id, c.attempt);
            self.hooks.verdict(&c.span, self.store.now(), || events::discarded(lease, events::CLAIMED_AGAIN));
        }
    }

    /// Read every lease this group holds (see [`Claims::held`]) and renew those due
    /// ([`crate::store::renewal_threshold`]); pass an operator's cancel or a lost lease on to
    /// the claims a handler has or may still take. A buffered job that was cancelled never
    /// starts (it ends Cancelled now); one whose lease was lost is dropped.
    fn heartbeat(&mut self) {
        let (runs, held): (Vec<u64>, Vec<(JobId, u32)>) = self.claims.renewable().unzip();
        if held.is_empty() {
            return;
        }
        // What the handlers reported of their progress since the last heartbeat rides on it.
        let progress = self.claims.new_progress(&runs);
        let statuses = match self.store.heartbeat_with_progress(&self.worker_id, &held, &progress, self.cfg.lease) {
            Ok(s) => s,
            Err(e) => {
                self.claims.untake_progress(&runs, &progress);
                return self.stats.error(&e);
            }
        };
        self.answered = true;
        for (run, status) in runs.into_iter().zip(statuses) {
            let reason = match status {
                LeaseStatus::Held { cancel_requested: false } => continue,
                LeaseStatus::Held { cancel_requested: true } => CancelReason::Operator,
                LeaseStatus::Lost => CancelReason::LeaseLost,
            };
            // Finished outcomes and hand-backs have no handler to tell: the fence settles them.
            let state = self.claims.get(run).map(|c| c.state);
            if !matches!(state, Some(State::Buffered | State::Running)) {
                continue;
            }
            if state == Some(State::Buffered) && self.ready.take(run).is_some() {
                match reason {
                    CancelReason::Operator => {
                        self.claims.finished(run, Outcome::Cancelled);
                    }
                    _ => {
                        self.claims.remove(run);
                        Counters::add(&self.stats.fenced_out, 1);
                    }
                }
            } else if let Some(c) = self.claims.get(run) {
                if reason == CancelReason::LeaseLost && c.cancel.reason().is_none() {
                    tracing::warn!(
                        messaging.message.id = %c.job_id,
                        backwave.attempt = c.attempt,
                        backwave.worker_id = %self.worker_id,
                        "lease lost while the handler runs: it is told to stop, and its result will be discarded"
                    );
                    self.hooks.tell(&Event::LeaseLost { job: c.job_id, attempt: c.attempt });
                }
                c.cancel.cancel(reason);
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
    /// [`Store::hand_back`]). On a store error they stay in the claim table (their leases
    /// heartbeated) and the next call tries again.
    fn give_back(&mut self, works: Vec<Work>) {
        for w in works {
            self.claims.take_back(w.run);
        }
        let leases = self.claims.handing_back();
        if leases.is_empty() {
            return;
        }
        match self.store.hand_back(&self.worker_id, &leases) {
            Ok(fenced) => {
                for f in fenced {
                    match f {
                        Fenced::Accepted(JobState::Scheduled) => Counters::add(&self.stats.handed_back, 1),
                        other => self.count(other),
                    }
                }
                self.claims.handed_back();
            }
            Err(e) => self.stats.error(&e),
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
        self.flush_all();
        self.hand_back_unstarted();
        for cancel in self.claims.active_signals() {
            cancel.cancel(CancelReason::Shutdown);
        }
        // A dropped handle (no grace, as a crash) waits for none of them.
        let wait = if self.stop.wait_for_stopped.load(Ordering::SeqCst) { STOP_WAIT } else { Duration::ZERO };
        let until = Instant::now() + wait;
        loop {
            let now = Instant::now();
            if self.claims.active() == 0 || now >= until {
                break;
            }
            self.collect(until - now, true);
        }
        self.flush_all();
        let lapsing = self.end_stopped_leases();
        let left = self.claims.active() + self.claims.handing_back_count() + lapsing;
        Counters::add(&self.stats.abandoned, left as u64);
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{self, Sender};

    use super::*;
    use crate::engine::Enqueue;

    const REFUSE_SUCCESS: &str = "CREATE TRIGGER refuse_success BEFORE UPDATE OF state ON jobs \
         WHEN NEW.state = 'succeeded' BEGIN SELECT RAISE(ABORT, 'the disk is full'); END";

    struct Harness {
        d: Dispatcher,
        done: Sender<Done>,
        store: Store,
        _dir: tempfile::TempDir,
    }

    /// A dispatcher over a fresh SQLite store holding `jobs` jobs of queue `q`, with no handler
    /// threads: the test takes jobs from the ready buffer and reports their outcomes itself.
    fn harness(jobs: usize) -> (Harness, Vec<JobId>) {
        harness_with(jobs, jobs)
    }

    /// [`harness`] with `concurrency` handler places.
    fn harness_with(jobs: usize, concurrency: usize) -> (Harness, Vec<JobId>) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bw.db");
        let store = Store::create(&db).unwrap();
        let ids = (0..jobs).map(|i| Enqueue::new("w", "q", &i).unwrap().enqueue(&store).unwrap()).collect();
        let cfg = WorkerGroup {
            name: "g".into(),
            policy: DispatchPolicy::strict(["q"]),
            concurrency,
            lease: Duration::from_millis(900),
            poll_interval: Duration::from_secs(60),
            ..WorkerGroup::default()
        };
        let worker_id: Arc<str> = Arc::from("host/1/g#test");
        let now = store.now();
        let info = WorkerInfo {
            id: worker_id.to_string(),
            group: "g".into(),
            host: "host".into(),
            pid: 1,
            wire_names: vec!["w".into()],
            queues: vec!["q".into()],
            started_at: now,
            last_heartbeat_at: now,
            stale_after_ms: 30_000,
        };
        store.register_worker(&info).unwrap();
        let (done, done_rx) = mpsc::channel();
        let d = Dispatcher::new(Setup {
            store: Store::open(&db).unwrap(),
            cfg,
            info,
            worker_id,
            ready: Arc::new(ReadyBuffer::default()),
            done_rx,
            recorder: Recorder::InPlace,
            stats: Arc::new(Counters::default()),
            stop: Arc::new(StopFlag::default()),
            quiet: Arc::new(ProcessQuiet::default()),
            sweep_interval: None,
            handler_policies: Vec::new(),
            rung: Arc::default(),
            watch: Watch::new(
                &crate::engine::outage::StoreHealth::new(&crate::StoreTarget::File(db.clone()), Arc::default()),
                "test",
            ),
            reader: Arc::new(crate::engine::handler::Reader::new(crate::StoreTarget::File(db.clone()))),
            hooks: Arc::default(),
        });
        (Harness { d, done, store, _dir: dir }, ids)
    }

    fn lease_expiry(store: &Store, id: JobId) -> i64 {
        store.job(id).unwrap().unwrap().lease_expires_at.expect("running")
    }

    #[test]
    fn a_refused_completion_is_retried_on_a_deadline_while_the_heartbeat_renews_every_lease_on_time() {
        let (mut h, ids) = harness(2);
        assert_eq!(h.d.claim(2).unwrap(), 2);
        // Both jobs start; the first finishes at once, the second keeps running.
        let (first, _second) = (h.d.ready.next().unwrap(), h.d.ready.next().unwrap());
        h.d.sync_started();
        assert_eq!(h.d.claims.held().count(), 2);
        h.store.raw_batch(REFUSE_SUCCESS).unwrap();
        h.done
            .send(Done::Finished {
                run: first.run,
                outcome: Outcome::Succeeded,
                span: tracing::Span::none(),
                took: Duration::ZERO,
            })
            .unwrap();
        let expiries: Vec<i64> = ids.iter().map(|id| lease_expiry(&h.store, *id)).collect();
        std::thread::sleep(Duration::from_millis(20));

        // A turn in which the heartbeat is due and the store refuses the completion: the refusal
        // costs its one write, not a sleep, and the heartbeat goes out in the same turn.
        h.d.steps.set(Step::Heartbeat, Instant::now());
        let started = Instant::now();
        assert!(h.d.turn());
        let took = started.elapsed();
        assert!(took < ERROR_BACKOFF, "the turn took {took:?}: it slept on the refused write");
        assert_eq!(h.d.stats.errors.load(Ordering::Relaxed), 1);
        assert_eq!(h.d.claims.outcomes().len(), 1, "the outcome waits in the claim table");
        for (id, before) in ids.iter().zip(expiries) {
            assert!(lease_expiry(&h.store, *id) > before, "the lease of {id} was renewed");
        }

        // The retry is a deadline the loop wakes for, not a write on every turn before it.
        let retry = h.d.steps.get(Step::Flush).expect("a retry is set");
        assert!(h.d.next_wake(false, None).is_some_and(|at| at <= retry));
        h.d.flush(retry - Duration::from_millis(1));
        assert_eq!(h.d.stats.errors.load(Ordering::Relaxed), 1, "no write before the deadline");

        h.store.raw_batch("DROP TRIGGER refuse_success").unwrap();
        h.d.flush(retry);
        assert!(h.d.claims.outcomes().is_empty());
        assert!(h.d.steps.get(Step::Flush).is_none());
        assert_eq!(h.store.job(ids[0]).unwrap().unwrap().state, JobState::Succeeded);
        assert_eq!(h.d.stats.succeeded.load(Ordering::Relaxed), 1);
        assert_eq!(h.d.claims.held().map(|(_, l)| l).collect::<Vec<_>>(), [(ids[1], 1)]);
    }

    #[test]
    fn while_the_store_does_not_take_outcomes_the_group_stops_claiming() {
        let (mut h, ids) = harness_with(20, 2);
        h.d.unrecorded_max = 2 + 4;
        // No claim-ahead: the pace is measured from an hour on, so a loaded machine whose loop
        // below takes over 5 ms does not widen the claims (it failed 9 runs in 12 so).
        h.d.pace = Pace::new(later(Instant::now(), Duration::from_secs(3600)));
        h.store.raw_batch(REFUSE_SUCCESS).unwrap();
        // Handlers that finish at once, completions the store refuses: every round frees the
        // handler places, and the outcomes pile up.
        let mut claimed = 0;
        while let Some(room) = h.d.claim_room() {
            let n = h.d.claim(room).unwrap();
            assert!(
                n > 0 && claimed < ids.len(),
                "claimed {claimed} with {} outcomes waiting",
                h.d.claims.unrecorded()
            );
            claimed += n;
            for _ in 0..n {
                let w = h.d.ready.next().unwrap();
                h.done
                    .send(Done::Finished {
                        run: w.run,
                        outcome: Outcome::Succeeded,
                        span: tracing::Span::none(),
                        took: Duration::ZERO,
                    })
                    .unwrap();
            }
            h.d.sync_started();
            h.d.collect(Duration::ZERO, false);
            h.d.flush_now(Instant::now());
        }
        assert_eq!(claimed, 6, "two places and four waiting outcomes");
        assert_eq!(h.d.claims.unrecorded(), 6);
        let scheduled = ids.iter().filter(|id| h.store.job(**id).unwrap().unwrap().state == JobState::Scheduled);
        assert_eq!(scheduled.count(), 14, "the rest stay for other workers");
        // The store takes them: the group claims again.
        h.store.raw_batch("DROP TRIGGER refuse_success").unwrap();
        h.d.flush_now(Instant::now());
        assert_eq!(h.d.claims.unrecorded(), 0);
        assert_eq!(h.d.claim_room(), Some(2));
    }

    /// Ring the dispatcher as `wake.rs` does, `sure` or not, and let it take one turn.
    fn ring(h: &mut Harness, sure: bool) {
        h.d.rung.sure.store(sure, Ordering::SeqCst);
        h.d.rung.pending.store(true, Ordering::SeqCst);
        h.done.send(Done::Work).unwrap();
        assert!(h.d.turn());
    }

    #[test]
    fn a_doubtful_ring_whose_due_job_is_held_back_is_not_heard_again_until_the_poll() {
        let (mut h, ids) = harness(1);
        // The poll is a minute away; the store holds the worker quiet, so its claims take
        // nothing though the job is due.
        h.d.steps.set(Step::Claim, later(Instant::now(), Duration::from_secs(60)));
        h.store.mark_quiet_self("host/1/g#test", true).unwrap();
        ring(&mut h, false);
        assert!(h.d.deaf_until > Instant::now(), "the held-back job makes the group deaf to doubts");
        // Lifted: a doubtful ring (any commit on SQLite) is not heard until the poll…
        h.store.mark_quiet_self("host/1/g#test", false).unwrap();
        ring(&mut h, false);
        assert_eq!(h.store.job(ids[0]).unwrap().unwrap().state, JobState::Scheduled);
        // …but a sure one (an enqueue, a notification) is.
        ring(&mut h, true);
        assert_eq!(h.store.job(ids[0]).unwrap().unwrap().state, JobState::Running);
    }

    #[test]
    fn a_doubtful_ring_with_nothing_due_looks_and_does_not_claim() {
        let (mut h, _) = harness(0);
        h.d.steps.set(Step::Claim, later(Instant::now(), Duration::from_secs(60)));
        // A job due in 5 s (long enough that no stall of a loaded machine makes it due before
        // the look): the look finds it not due, and the next claim is set for it, not the poll.
        let id = Enqueue::new("w", "q", &1).unwrap().due_in(Duration::from_secs(5)).enqueue(&h.store).unwrap();
        let before = Instant::now();
        ring(&mut h, false);
        let next = h.d.steps.get(Step::Claim).expect("a claim is set");
        assert!(next > before && next <= before + Duration::from_millis(5_100), "the next look is at the job's time");
        assert_eq!(h.store.job(id).unwrap().unwrap().state, JobState::Scheduled);
        assert!(h.d.deaf_until <= Instant::now(), "nothing was held back");
    }

    #[test]
    fn the_claim_table_follows_each_claim_from_the_buffer_to_its_handler() {
        let (mut h, ids) = harness(3);
        assert_eq!(h.d.claim(3).unwrap(), 3);
        let states = |d: &Dispatcher| {
            let mut s: Vec<(JobId, State)> =
                d.claims.held().map(|(run, (id, _))| (id, d.claims.get(run).unwrap().state)).collect();
            s.sort_by_key(|(id, _)| ids.iter().position(|i| i == id));
            s.into_iter().map(|(_, st)| st).collect::<Vec<_>>()
        };
        assert_eq!(states(&h.d), [State::Buffered; 3]);
        let first = h.d.ready.next().unwrap();
        h.d.sync_started();
        assert_eq!(first.job.id, ids[0]);
        assert_eq!(states(&h.d), [State::Running, State::Buffered, State::Buffered]);
        // At shutdown the unstarted ones go back to the store, and the table lets them go.
        h.d.hand_back_unstarted();
        assert_eq!(states(&h.d), [State::Running]);
        assert_eq!(h.d.stats.handed_back.load(Ordering::Relaxed), 2);
        assert_eq!(h.store.job(ids[1]).unwrap().unwrap().state, JobState::Scheduled);
    }
}
