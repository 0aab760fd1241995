//! The claim table of one worker group: every claim its dispatcher holds, from the store's claim
//! to the store's word on it, in one of six states, and the one answer to "which leases does
//! this worker hold" that heartbeats and the lost-claim check read. Pure bookkeeping: it never
//! talks to the store, to handler threads or to the ready buffer.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tracing::Span;

use super::events::About;
use super::handler::{CancelSignal, Report};
use crate::model::{JobId, Progress};
use crate::store::{Completion, Outcome};

/// Where one claim stands. Every state but `Superseded` holds the claim's lease, which the
/// heartbeat renews until the store has the claim's outcome or hand-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Waiting in the ready buffer. As far as the dispatcher knows: a handler may have taken it
    /// since the last news from the buffer, whose `take` is the only certain test.
    Buffered,
    /// A handler took it from the buffer.
    Running,
    /// A handler is running it, but the store has since let this worker claim the job again
    /// (its lease was reaped, the job retried or requeued): it holds no lease, and its outcome
    /// is dropped when it comes.
    Superseded,
    /// Its handler returned (or it ended before starting); its outcome is not recorded yet.
    Finished,
    /// Its outcome is in the batch being written (`recorder.rs`), not yet answered.
    Recording,
    /// Taken back unstarted (at shutdown, held too long behind stalled handlers, or never heard
    /// of after a claim in doubt); to be handed back to the store without spending an attempt.
    HandingBack,
}

/// One claim, by the token of its claim. Not keyed by job: this same worker may claim a job
/// again while an earlier run of it still hangs, and a requeue even repeats the
/// `(worker, attempt)` pair the store's fence checks.
#[derive(Debug)]
pub(super) struct Claim {
    pub job_id: JobId,
    pub attempt: u32,
    pub cancel: CancelSignal,
    pub state: State,
    /// The attempt's span (`telemetry::RUN_SPAN`) once its handler has returned, kept until the
    /// store's word on the outcome is recorded on it; disabled before (and without a subscriber).
    pub span: Span,
    /// What the attempt's events say of its job (its wire name, queue, budget, retry wait).
    pub about: About,
    /// How long its handler ran, once it returned.
    pub took: Duration,
    /// What its handler reports besides its result (progress for the heartbeat); `None` for a
    /// claim no handler will run.
    pub report: Option<Arc<Report>>,
}

impl Claim {
    fn lease(&self) -> (JobId, u32) {
        (self.job_id, self.attempt)
    }
}

/// The hash of a run token, a counter this table hands out: one multiplication (Fibonacci
/// hashing, which spreads a counter over the high bits the table's control bytes read). The
/// default SipHash cost some 140 instructions a lookup, and a job is looked up about six times
/// from its claim to the store's word on it. Also the hash of the ids of a claim ([`JobIds`]),
/// eight bytes a multiplication: uuids, in a set the size of one claim.
#[derive(Default)]
pub(super) struct RunHasher(u64);

impl Hasher for RunHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.write_u64(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        for b in words.remainder() {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The ids of the jobs of one claim, hashed by [`RunHasher`].
pub(super) type JobIds = HashSet<JobId, BuildHasherDefault<RunHasher>>;

pub(super) struct Claims {
    worker_id: Arc<str>,
    claims: HashMap<u64, Claim, BuildHasherDefault<RunHasher>>,
    next_run: u64,
    /// The `Finished` claims in the order their handlers returned, with their outcomes ready to
    /// record in one call (`outcomes[i]` is `finished[i]`'s).
    finished: Vec<u64>,
    outcomes: Vec<Completion>,
    /// The `Recording` claims, in the order of the batch being written.
    recording: Vec<u64>,
    /// `Buffered`, `Running` and `Superseded`: the claims a handler has or may still take, the
    /// ones the claim room counts. Kept as a count: the room is asked after every finished job.
    active: usize,
    handing_back: usize,
}

impl Claims {
    pub fn new(worker_id: Arc<str>) -> Self {
        Claims {
            worker_id,
            claims: HashMap::default(),
            next_run: 0,
            finished: Vec::new(),
            outcomes: Vec::new(),
            recording: Vec::new(),
            active: 0,
            handing_back: 0,
        }
    }

    fn token(&mut self) -> u64 {
        let run = self.next_run;
        self.next_run += 1;
        run
    }

    /// A job just claimed, going into the ready buffer: its token.
    #[cfg(test)]
    pub fn claimed(&mut self, job_id: JobId, attempt: u32, cancel: CancelSignal) -> u64 {
        self.claimed_with(job_id, attempt, cancel, About::default(), None)
    }

    /// `Claims::claimed` (the tests'), with what its events say of the job and where its
    /// handler reports its progress.
    pub fn claimed_with(
        &mut self,
        job_id: JobId,
        attempt: u32,
        cancel: CancelSignal,
        about: About,
        report: Option<Arc<Report>>,
    ) -> u64 {
        let run = self.token();
        let claim = Claim {
            job_id,
            attempt,
            cancel,
            state: State::Buffered,
            span: Span::none(),
            about,
            took: Duration::ZERO,
            report,
        };
        self.claims.insert(run, claim);
        self.active += 1;
        run
    }

    /// A lease the store says this worker holds that it never heard of (a claim whose answer
    /// was lost): to be handed back.
    pub fn lost(&mut self, job_id: JobId, attempt: u32) -> u64 {
        let run = self.token();
        let claim = Claim {
            job_id,
            attempt,
            cancel: CancelSignal::new(),
            state: State::HandingBack,
            span: Span::none(),
            about: About::default(),
            took: Duration::ZERO,
            report: None,
        };
        self.claims.insert(run, claim);
        self.handing_back += 1;
        run
    }

    /// The progress reported since the last heartbeat by each of `runs`, taken for the next one
    /// (`None`: nothing new). Only a claim that holds its lease reports: the caller passes those
    /// of [`Claims::renewable`].
    pub fn new_progress(&self, runs: &[u64]) -> Vec<Option<Progress>> {
        runs.iter()
            .map(|run| self.claims.get(run).and_then(|c| c.report.as_ref()).and_then(|r| r.take_new_progress()))
            .collect()
    }

    /// A heartbeat that carried `progress` failed: each is written by the next one.
    pub fn untake_progress(&self, runs: &[u64], progress: &[Option<Progress>]) {
        for (run, p) in runs.iter().zip(progress) {
            if let (Some(c), Some(_)) = (self.claims.get(run), p) {
                if let Some(r) = &c.report {
                    r.untake_progress();
                }
            }
        }
    }

    pub fn get(&self, run: u64) -> Option<&Claim> {
        self.claims.get(&run)
    }

    /// A handler took the claim from the buffer.
    pub fn started(&mut self, run: u64) {
        if let Some(c) = self.claims.get_mut(&run) {
            if c.state == State::Buffered {
                c.state = State::Running;
            }
        }
    }

    /// The claim's outcome is known: it waits to be recorded. Only a claim that holds its lease
    /// and has not ended moves; returns whether it did.
    pub fn finished(&mut self, run: u64, outcome: Outcome) -> bool {
        self.finished_in(run, outcome, Span::none(), Duration::ZERO)
    }

    /// [`Claims::finished`] for a run whose handler ran in `span` for `took`: kept for the
    /// store's word.
    pub fn finished_in(&mut self, run: u64, outcome: Outcome, span: Span, took: Duration) -> bool {
        let Some(c) = self.claims.get_mut(&run) else { return false };
        if !matches!(c.state, State::Buffered | State::Running) {
            return false;
        }
        c.state = State::Finished;
        c.span = span;
        c.took = took;
        self.active -= 1;
        self.finished.push(run);
        self.outcomes.push(Completion {
            job_id: c.job_id,
            worker_id: self.worker_id.to_string(),
            attempt: c.attempt,
            outcome,
        });
        true
    }

    /// The store let this worker claim the job again: this run's lease is gone.
    pub fn supersede(&mut self, run: u64) {
        if let Some(c) = self.claims.get_mut(&run) {
            if matches!(c.state, State::Buffered | State::Running) {
                c.state = State::Superseded;
            }
        }
    }

    /// A claim taken back from the buffer unstarted: to be handed back if it still holds its
    /// lease, forgotten if superseded.
    pub fn take_back(&mut self, run: u64) {
        let Some(c) = self.claims.get_mut(&run) else { return };
        match c.state {
            State::Buffered | State::Running => {
                c.state = State::HandingBack;
                self.active -= 1;
                self.handing_back += 1;
            }
            State::Superseded => {
                self.remove(run);
            }
            State::Finished | State::Recording | State::HandingBack => {}
        }
    }

    /// Forget a claim (its run ended with nothing to record, or it was dropped). A `Recording`
    /// claim stays: only the store's answer on its batch ends it.
    pub fn remove(&mut self, run: u64) -> Option<Claim> {
        if self.claims.get(&run)?.state == State::Recording {
            return None;
        }
        let c = self.claims.remove(&run)?;
        match c.state {
            State::Buffered | State::Running | State::Superseded => self.active -= 1,
            State::HandingBack => self.handing_back -= 1,
            State::Finished => {
                let at = self.finished.iter().position(|r| *r == run).expect("a finished claim is listed");
                self.finished.remove(at);
                self.outcomes.remove(at);
            }
            State::Recording => unreachable!("kept above"),
        }
        Some(c)
    }

    /// Every lease this worker holds, with the claim's token: buffered, running, finished with
    /// its outcome not yet written (or being written), or being handed back.
    pub fn held(&self) -> impl Iterator<Item = (u64, (JobId, u32))> + '_ {
        self.claims.iter().filter(|(_, c)| c.state != State::Superseded).map(|(run, c)| (*run, c.lease()))
    }

    /// The leases a heartbeat renews: every one held but those being recorded. Each must be
    /// renewed, or it would lapse and the job run again. A batch being written settles its own
    /// leases, and a heartbeat of the same rows beside it would only wait for its row locks (or,
    /// taking them in another order, deadlock with it); were the batch refused, its claims are
    /// `Finished` again before the next heartbeat.
    pub fn renewable(&self) -> impl Iterator<Item = (u64, (JobId, u32))> + '_ {
        self.held().filter(|(run, _)| self.claims[run].state != State::Recording)
    }

    /// The claims holding their lease whose handler has or may still take them (`Buffered`,
    /// `Running`) among `jobs`.
    pub fn live_of(&self, jobs: &JobIds) -> Vec<u64> {
        self.claims
            .iter()
            .filter(|(_, c)| matches!(c.state, State::Buffered | State::Running) && jobs.contains(&c.job_id))
            .map(|(run, _)| *run)
            .collect()
    }

    /// Drop the unwritten outcomes of `jobs` (the store let this worker claim them again, so
    /// those runs' leases are gone); the claims dropped.
    pub fn drop_outcomes_of(&mut self, jobs: &JobIds) -> Vec<Claim> {
        let dropped: Vec<u64> = self
            .finished
            .iter()
            .zip(&self.outcomes)
            .filter(|(_, o)| jobs.contains(&o.job_id))
            .map(|(r, _)| *r)
            .collect();
        dropped.into_iter().filter_map(|run| self.remove(run)).collect()
    }

    /// The outcomes waiting to be recorded, in the order their handlers returned.
    pub fn outcomes(&self) -> &[Completion] {
        &self.outcomes
    }

    /// Outcomes the store has not taken yet: waiting, or in the batch being written. Their
    /// leases are held until it does.
    pub fn unrecorded(&self) -> usize {
        self.outcomes.len() + self.recording.len()
    }

    /// Whether a batch of outcomes is being written (one at a time: the next carries everything
    /// that finished meanwhile).
    pub fn recording(&self) -> bool {
        !self.recording.is_empty()
    }

    /// Every waiting outcome, taken to be written as one batch: those claims are `Recording`
    /// until [`Claims::recorded_each`] or [`Claims::not_recorded`].
    pub fn take_outcomes(&mut self) -> Vec<Completion> {
        debug_assert!(self.recording.is_empty(), "one batch at a time");
        for run in &self.finished {
            if let Some(c) = self.claims.get_mut(run) {
                c.state = State::Recording;
            }
        }
        self.recording.append(&mut self.finished);
        std::mem::take(&mut self.outcomes)
    }

    /// The store has recorded the batch: those claims end.
    #[cfg(test)]
    pub fn recorded(&mut self) {
        self.recorded_each(|_| {});
    }

    /// `Claims::recorded` (the tests'), handing each ended claim to `each` in the batch's order.
    pub fn recorded_each(&mut self, mut each: impl FnMut(Claim)) {
        for run in self.recording.drain(..) {
            if let Some(c) = self.claims.remove(&run) {
                each(c);
            }
        }
    }

    /// The store refused the batch (given back as taken): its outcomes wait again, ahead of
    /// those that finished since, and their leases are renewed again.
    pub fn not_recorded(&mut self, mut batch: Vec<Completion>) {
        for run in &self.recording {
            if let Some(c) = self.claims.get_mut(run) {
                c.state = State::Finished;
            }
        }
        self.recording.append(&mut self.finished);
        self.finished = std::mem::take(&mut self.recording);
        batch.append(&mut self.outcomes);
        self.outcomes = batch;
    }

    /// The leases being handed back.
    pub fn handing_back(&self) -> Vec<(JobId, u32)> {
        if self.handing_back == 0 {
            return Vec::new();
        }
        self.claims.values().filter(|c| c.state == State::HandingBack).map(Claim::lease).collect()
    }

    /// The store has taken every hand-back: those claims end.
    pub fn handed_back(&mut self) {
        if self.handing_back > 0 {
            self.claims.retain(|_, c| c.state != State::HandingBack);
            self.handing_back = 0;
        }
    }

    /// Claims a handler has or may still take, superseded ones included.
    pub fn active(&self) -> usize {
        self.active
    }

    pub fn handing_back_count(&self) -> usize {
        self.handing_back
    }

    /// The cancel signals of every claim a handler has or may still take.
    pub fn active_signals(&self) -> impl Iterator<Item = &CancelSignal> + '_ {
        self.claims
            .values()
            .filter(|c| matches!(c.state, State::Buffered | State::Running | State::Superseded))
            .map(|c| &c.cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Claims {
        Claims::new(Arc::from("host/1/g#abcd"))
    }

    fn held(t: &Claims) -> HashSet<(JobId, u32)> {
        t.held().map(|(_, lease)| lease).collect()
    }

    fn fail(msg: &str) -> Outcome {
        Outcome::Failed { message: msg.into(), detail: None, retry_in: None }
    }

    #[test]
    fn a_claim_holds_its_lease_buffered_running_and_finished_until_its_outcome_is_recorded() {
        let mut t = table();
        let job = JobId::new();
        let run = t.claimed(job, 1, CancelSignal::new());
        assert_eq!((t.get(run).unwrap().state, t.active()), (State::Buffered, 1));
        assert_eq!(held(&t), HashSet::from([(job, 1)]));

        t.started(run);
        assert_eq!((t.get(run).unwrap().state, t.active()), (State::Running, 1));
        assert_eq!(held(&t), HashSet::from([(job, 1)]));

        assert!(t.finished(run, Outcome::Succeeded));
        assert_eq!((t.get(run).unwrap().state, t.active()), (State::Finished, 0), "no longer takes a place");
        assert_eq!(held(&t), HashSet::from([(job, 1)]), "its lease is kept until the outcome is written");
        assert_eq!(t.outcomes().len(), 1);
        assert_eq!((t.outcomes()[0].job_id, t.outcomes()[0].attempt), (job, 1));
        assert_eq!(t.outcomes()[0].worker_id, "host/1/g#abcd");

        let batch = t.take_outcomes();
        assert_eq!((batch.len(), t.get(run).unwrap().state), (1, State::Recording));
        assert_eq!(held(&t), HashSet::from([(job, 1)]), "held while the batch is written");
        assert_eq!(t.renewable().count(), 0, "but not renewed beside that write");
        t.recorded();
        assert!(t.get(run).is_none());
        assert!(held(&t).is_empty());
        assert!(t.outcomes().is_empty());
    }

    #[test]
    fn a_refused_batch_waits_again_ahead_of_the_outcomes_that_finished_while_it_was_written() {
        let mut t = table();
        let jobs: Vec<JobId> = (0..3).map(|_| JobId::new()).collect();
        let runs: Vec<u64> = jobs.iter().map(|j| t.claimed(*j, 1, CancelSignal::new())).collect();
        t.finished(runs[0], Outcome::Succeeded);
        t.finished(runs[1], fail("boom"));
        let batch = t.take_outcomes();
        assert!(t.recording());
        assert!(t.remove(runs[0]).is_none(), "only the store's answer ends a claim being recorded");
        assert!(t.drop_outcomes_of(&JobIds::from_iter([jobs[0]])).is_empty(), "nor is its outcome dropped");
        t.finished(runs[2], Outcome::Succeeded);
        assert_eq!(t.outcomes().len(), 1, "finished meanwhile: waits for the next batch");

        t.not_recorded(batch);
        assert!(!t.recording());
        let order: Vec<JobId> = t.outcomes().iter().map(|c| c.job_id).collect();
        assert_eq!(order, jobs, "the refused batch first, in its order");
        assert!(runs.iter().all(|r| t.get(*r).unwrap().state == State::Finished));
        assert_eq!(t.renewable().count(), 3, "renewed again until written");

        let again = t.take_outcomes();
        assert_eq!(again.len(), 3);
        t.recorded();
        assert_eq!((t.held().count(), t.outcomes().len(), t.recording()), (0, 0, false));
    }

    #[test]
    fn a_claim_can_finish_before_the_news_that_it_started_arrives_and_the_late_news_changes_nothing() {
        let mut t = table();
        let run = t.claimed(JobId::new(), 1, CancelSignal::new());
        assert!(t.finished(run, Outcome::Cancelled), "a buffered job cancelled by an operator ends unstarted");
        t.started(run);
        assert_eq!(t.get(run).unwrap().state, State::Finished);
        assert!(!t.finished(run, Outcome::Succeeded), "one outcome per claim");
        assert_eq!(t.outcomes().len(), 1);
    }

    #[test]
    fn outcomes_are_recorded_in_the_order_the_handlers_returned() {
        let mut t = table();
        let jobs: Vec<JobId> = (0..3).map(|_| JobId::new()).collect();
        let runs: Vec<u64> = jobs.iter().map(|j| t.claimed(*j, 1, CancelSignal::new())).collect();
        for run in [runs[2], runs[0], runs[1]] {
            t.finished(run, fail(&format!("run {run}")));
        }
        let order: Vec<JobId> = t.outcomes().iter().map(|c| c.job_id).collect();
        assert_eq!(order, [jobs[2], jobs[0], jobs[1]]);
    }

    #[test]
    fn a_superseded_run_holds_no_lease_but_keeps_its_place_until_its_handler_returns() {
        let mut t = table();
        let job = JobId::new();
        let old = t.claimed(job, 1, CancelSignal::new());
        t.started(old);
        t.supersede(old);
        assert_eq!(t.get(old).unwrap().state, State::Superseded);
        assert!(held(&t).is_empty(), "the store gave its lease to a newer claim");
        assert_eq!(t.active(), 1, "its handler thread is still busy");
        assert_eq!(t.active_signals().count(), 1, "a shutdown still tells it to stop");

        let new = t.claimed(job, 1, CancelSignal::new());
        assert_eq!(t.live_of(&JobIds::from_iter([job])), [new], "only the newest run is live");
        assert!(!t.finished(old, Outcome::Succeeded), "its outcome is not recorded");
        assert!(t.remove(old).is_some());
        assert_eq!((t.active(), held(&t)), (1, HashSet::from([(job, 1)])));
    }

    #[test]
    fn a_claim_taken_back_holds_its_lease_until_the_store_has_it_back() {
        let mut t = table();
        let (a, b) = (JobId::new(), JobId::new());
        let ra = t.claimed(a, 2, CancelSignal::new());
        let rb = t.claimed(b, 1, CancelSignal::new());
        t.take_back(ra);
        assert_eq!(t.get(ra).unwrap().state, State::HandingBack);
        assert_eq!((t.active(), t.handing_back_count()), (1, 1));
        assert_eq!(t.handing_back(), [(a, 2)]);
        assert_eq!(held(&t), HashSet::from([(a, 2), (b, 1)]));

        t.handed_back();
        assert!(t.get(ra).is_none());
        assert_eq!((held(&t), t.handing_back_count()), (HashSet::from([(b, 1)]), 0));
        assert!(t.get(rb).is_some());
    }

    #[test]
    fn a_superseded_claim_taken_back_is_forgotten_not_handed_back() {
        let mut t = table();
        let run = t.claimed(JobId::new(), 1, CancelSignal::new());
        t.supersede(run);
        t.take_back(run);
        assert!(t.get(run).is_none());
        assert!(t.handing_back().is_empty());
        assert_eq!(t.active(), 0);
    }

    #[test]
    fn a_lease_never_heard_of_is_held_as_a_hand_back() {
        let mut t = table();
        let job = JobId::new();
        let run = t.lost(job, 3);
        assert_eq!(t.get(run).unwrap().state, State::HandingBack);
        assert_eq!((t.active(), t.handing_back()), (0, vec![(job, 3)]));
        assert_eq!(held(&t), HashSet::from([(job, 3)]));
    }

    #[test]
    fn dropping_the_outcomes_of_reclaimed_jobs_keeps_the_others_in_order() {
        let mut t = table();
        let jobs: Vec<JobId> = (0..3).map(|_| JobId::new()).collect();
        for j in &jobs {
            let run = t.claimed(*j, 1, CancelSignal::new());
            t.finished(run, Outcome::Succeeded);
        }
        assert_eq!(t.drop_outcomes_of(&JobIds::from_iter([jobs[1]])).len(), 1);
        let left: Vec<JobId> = t.outcomes().iter().map(|c| c.job_id).collect();
        assert_eq!(left, [jobs[0], jobs[2]]);
        assert_eq!(held(&t), HashSet::from([(jobs[0], 1), (jobs[2], 1)]));
    }

    #[test]
    fn progress_is_taken_once_per_heartbeat_and_again_after_a_failed_one() {
        let mut t = table();
        let ctx = crate::JobContext::detached(JobId::new(), 1, "w", "q");
        let quiet = t.claimed(JobId::new(), 1, CancelSignal::new());
        let busy =
            t.claimed_with(ctx.job_id(), 1, CancelSignal::new(), About::default(), Some(Arc::clone(&ctx.report)));
        let runs = [quiet, busy];
        assert_eq!(t.new_progress(&runs), [None, None], "nothing reported yet");
        ctx.progress(0.25, "a").unwrap();
        ctx.progress(0.5, "b").unwrap();
        let taken = t.new_progress(&runs);
        assert_eq!(taken, [None, Some(Progress::new(0.5, "b").unwrap())], "only the latest report rides");
        assert_eq!(t.new_progress(&runs), [None, None], "taken: the next heartbeat writes nothing");
        t.untake_progress(&runs, &taken);
        assert_eq!(t.new_progress(&runs), taken, "a heartbeat that failed leaves it for the next");
    }

    #[test]
    fn removing_a_claim_in_any_state_keeps_the_counts_right() {
        let mut t = table();
        let buffered = t.claimed(JobId::new(), 1, CancelSignal::new());
        let running = t.claimed(JobId::new(), 1, CancelSignal::new());
        t.started(running);
        let finished = t.claimed(JobId::new(), 1, CancelSignal::new());
        t.finished(finished, Outcome::Succeeded);
        let back = t.claimed(JobId::new(), 1, CancelSignal::new());
        t.take_back(back);
        assert_eq!((t.active(), t.handing_back_count(), t.outcomes().len()), (2, 1, 1));
        for run in [buffered, running, finished, back] {
            assert!(t.remove(run).is_some());
        }
        assert_eq!((t.active(), t.handing_back_count(), t.outcomes().len()), (0, 0, 0));
        assert_eq!(t.held().count(), 0);
    }
}
