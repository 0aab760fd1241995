//! The handler pool of one worker group: a bounded ready buffer of claimed jobs, the handler
//! threads that take jobs from it and run them, and the panic hook that keeps a handler's panic
//! quiet and its backtrace for the failure detail. Nothing here touches the store: outcomes go
//! back to the dispatcher, which records them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, MutexGuard, Once};
use std::time::Instant;

use super::handler::{CancelReason, CancelSignal, HandlerError, HandlerResult, JobContext, Report};
use super::registry::{Ready, Registry};
use super::shared::Done;
use crate::error::panic_message;
use crate::model::{Job, QuarantineReason};
use crate::store::{Outcome, UNREQUESTED_CANCEL};

/// A claimed, not yet finished job for a handler thread.
pub(super) struct Work {
    pub job: Job,
    pub ctx: JobContext,
    /// The dispatcher's token for this claim: its outcome comes back under it.
    pub run: u64,
    /// Its queue's place in a strict policy (0 first); 0 for every job under a weighted one.
    /// Lower ranks start first, claim order within a rank.
    pub rank: usize,
    pub claimed_at: Instant,
}

/// Claimed jobs waiting for a free handler thread. The dispatcher fills it (claiming ahead of
/// the handlers, so that they never wait for a store transaction) and can take a job back out
/// as long as no handler has started it: whatever it takes back is certain never to have run.
#[derive(Default)]
pub(super) struct ReadyBuffer {
    state: Mutex<ReadyState>,
    available: Condvar,
    /// The same news for async slots waiting on a runtime (see `tasks.rs`).
    #[cfg(feature = "tokio")]
    pushed: tokio::sync::Notify,
}

#[derive(Default)]
struct ReadyState {
    jobs: VecDeque<Work>,
    /// The claim tokens of the jobs handlers took since the dispatcher last asked, so that its
    /// claim table knows them running (see [`ReadyBuffer::take_started`]).
    started: Vec<u64>,
    /// No more jobs will come: idle handler threads end.
    closed: bool,
}

impl ReadyState {
    fn pop(&mut self) -> Option<Work> {
        let w = self.jobs.pop_front()?;
        self.started.push(w.run);
        Some(w)
    }
}

impl ReadyBuffer {
    fn lock(&self) -> MutexGuard<'_, ReadyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add claimed jobs, each after every waiting job of its rank or a better one.
    pub fn push(&self, works: impl IntoIterator<Item = Work>) {
        let mut s = self.lock();
        let before = s.jobs.len();
        for w in works {
            let at = s.jobs.partition_point(|o| o.rank <= w.rank);
            s.jobs.insert(at, w);
        }
        let added = s.jobs.len() - before;
        drop(s);
        // One job wakes one idle thread; a batch wakes them all (waking a thread for each job
        // of a wide batch would only have most of them find it empty).
        match added {
            0 => {}
            1 => {
                self.available.notify_one();
                #[cfg(feature = "tokio")]
                self.pushed.notify_one();
            }
            _ => {
                self.available.notify_all();
                #[cfg(feature = "tokio")]
                self.pushed.notify_waiters();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lock().jobs.len()
    }

    /// Take back one job no handler has started, by its claim token.
    pub fn take(&self, run: u64) -> Option<Work> {
        let mut s = self.lock();
        let at = s.jobs.iter().position(|w| w.run == run)?;
        s.jobs.remove(at)
    }

    /// Take back every job no handler has started.
    pub fn take_all(&self) -> Vec<Work> {
        self.lock().jobs.drain(..).collect()
    }

    /// Take back the jobs beyond the first `keep` in line, if any waiting job was claimed
    /// before `stale`: the handlers have stalled since those were claimed ahead.
    pub fn take_surplus(&self, keep: usize, stale: Instant) -> Vec<Work> {
        let mut s = self.lock();
        if s.jobs.len() <= keep || !s.jobs.iter().any(|w| w.claimed_at < stale) {
            return Vec::new();
        }
        s.jobs.split_off(keep).into()
    }

    /// The claim tokens of the jobs handlers took since the last call, oldest first.
    pub fn take_started(&self) -> Vec<u64> {
        std::mem::take(&mut self.lock().started)
    }

    /// No more jobs: handler threads end once idle.
    pub fn close(&self) {
        self.lock().closed = true;
        self.available.notify_all();
        #[cfg(feature = "tokio")]
        self.pushed.notify_waiters();
    }

    /// The next job to run, waiting for one; `None` once closed.
    pub(super) fn next(&self) -> Option<Work> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(w) = s.pop() {
                return Some(w);
            }
            s = self.available.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// [`ReadyBuffer::next`] for an async slot: awaits instead of blocking its thread.
    #[cfg(feature = "tokio")]
    pub(super) async fn next_async(&self) -> Option<Work> {
        loop {
            // While jobs wait, take one without registering for a wake-up (a lock on the
            // notifier's waiters per job for nothing).
            if let Some(next) = self.try_next() {
                return next;
            }
            // Registered before the second look, so a push between the look and the await
            // still wakes us.
            let mut pushed = std::pin::pin!(self.pushed.notified());
            pushed.as_mut().enable();
            if let Some(next) = self.try_next() {
                return next;
            }
            pushed.await;
        }
    }

    /// `Some(None)` once closed, `Some(job)` if one waits, `None` if the buffer is empty.
    #[cfg(feature = "tokio")]
    fn try_next(&self) -> Option<Option<Work>> {
        let mut s = self.lock();
        if s.closed {
            return Some(None);
        }
        s.pop().map(Some)
    }
}

/// One handler thread: take a job, run it, report its outcome; until the buffer closes or the
/// dispatcher is gone.
pub(super) fn handler_loop(ready: &ReadyBuffer, done: &Sender<Done>, registry: &Registry, capture: bool) {
    while let Some(work) = ready.next() {
        let run = work.run;
        let span = crate::telemetry::run_span(&work.job, &work.ctx, work.claimed_at);
        let began = Instant::now();
        let outcome = span.in_scope(|| run_one(work, registry, capture));
        if done.send(Done::Finished { run, outcome, span, took: began.elapsed() }).is_err() {
            // The dispatcher is gone (shutdown past its grace): nothing is reported.
            return;
        }
    }
}

thread_local! {
    /// Set while this thread runs a handler, so the panic hook can keep quiet and keep a
    /// backtrace for the failure detail instead of printing to a terminal that may be a TUI.
    static IN_HANDLER: Cell<Option<bool>> = const { Cell::new(None) };
    static PANIC_TRACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Install (once per process) the hook that keeps handler panics off the terminal; panics
/// anywhere else go to the hook that was there before.
pub(super) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match IN_HANDLER.with(Cell::get) {
            Some(capture) => {
                if capture {
                    let at = info.location().map(|l| format!("panicked at {l}\n")).unwrap_or_default();
                    let trace = super::handler::panic_trace(&at, &std::backtrace::Backtrace::force_capture());
                    PANIC_TRACE.with(|t| *t.borrow_mut() = Some(trace));
                }
            }
            None => previous(info),
        }));
    });
}

/// Route, decode and run one job on this thread.
fn run_one(work: Work, registry: &Registry, capture: bool) -> Outcome {
    let (ready, ctx) = match prepare(work, registry) {
        Ok(r) => r,
        Err(outcome) => return *outcome,
    };
    match ready {
        Ready::Sync(run) => run_sync(run, ctx, capture),
        // Handler threads serve only registries without async routes: the engine gives a
        // registry with one a feeder for every group (see `tasks.rs`), never threads.
        #[cfg(feature = "tokio")]
        Ready::Async(_) => unreachable!("an async handler reached a handler thread"),
    }
}

/// Run a decoded plain handler here, its panic caught.
pub(super) fn run_sync(
    run: Box<dyn FnOnce(&JobContext) -> HandlerResult + Send>,
    ctx: JobContext,
    capture: bool,
) -> Outcome {
    let result = in_handler(capture, || run(&ctx));
    with_output(settle(result, &ctx.cancel, capture), &ctx.report)
}

/// A success carries the output the handler recorded ([`JobContext::set_output`]); any other
/// outcome drops it.
pub(super) fn with_output(outcome: Outcome, report: &Report) -> Outcome {
    match (outcome, report.take_output()) {
        (Outcome::Succeeded, Some(output)) => Outcome::SucceededWith { output },
        (outcome, _) => outcome,
    }
}

/// Before any handler code runs: an operator's cancel that reached the job while it waited,
/// and quarantine of a job no handler can take (no route, or a payload that does not decode).
/// The outcome is boxed: the rare path, and `Outcome` is large.
pub(super) fn prepare(work: Work, registry: &Registry) -> Result<(Ready, JobContext), Box<Outcome>> {
    let Work { job, ctx, .. } = work;
    // An operator's cancel that reached the job while it waited: it never starts.
    if ctx.cancel.reason() == Some(CancelReason::Operator) {
        return Err(Box::new(Outcome::Cancelled));
    }
    let Some(entry) = registry.entry(&job.wire_name) else {
        return Err(Box::new(Outcome::Quarantined {
            reason: QuarantineReason::NoHandler,
            cause: format!("no handler is registered for wire name '{}'", job.wire_name),
        }));
    };
    match entry.route.decode(&job.payload) {
        Ok(r) => Ok((r, ctx)),
        Err(e) => Err(Box::new(Outcome::Quarantined {
            reason: QuarantineReason::UndecodablePayload,
            cause: format!("the payload of '{}' does not decode as {}: {e}", job.wire_name, entry.route.type_name()),
        })),
    }
}

/// Run `f` (a handler call, or one poll of a handler's future) with its panic caught: the hook
/// keeps it off the terminal and, with `capture`, keeps its backtrace for the failure detail.
pub(super) fn in_handler<R>(capture: bool, f: impl FnOnce() -> R) -> Result<R, HandlerError> {
    let outer = IN_HANDLER.with(|h| h.replace(Some(capture)));
    let result = catch_unwind(AssertUnwindSafe(f));
    IN_HANDLER.with(|h| h.set(outer));
    result.map_err(|panic| {
        let message = panic_message(&*panic);
        let trace = PANIC_TRACE.with(|t| t.borrow_mut().take());
        HandlerError::panic(message, trace)
    })
}

/// What a finished attempt (returned, failed, or panicked) is to the store.
pub(super) fn settle(result: Result<HandlerResult, HandlerError>, cancel: &CancelSignal, capture: bool) -> Outcome {
    let error = match result {
        Ok(Ok(())) => return Outcome::Succeeded,
        Ok(Err(e)) | Err(e) => e,
    };
    // A handler that stopped on an operator's cancel says so: the store ends the job Cancelled.
    // One that stopped on a cancellation nobody requested (its own deadline) failed a plain
    // attempt, and its entry keeps the detail like any failure's (an Outcome::Cancelled
    // would be logged as detail "not captured", as if the switch were off). Any other error
    // after an operator's request also ends Cancelled in the store, its message kept.
    if error.is_cancelled() && cancel.reason() == Some(CancelReason::Operator) {
        return Outcome::Cancelled;
    }
    let message = if error.is_cancelled() { UNREQUESTED_CANCEL.to_string() } else { error.message().to_string() };
    let retry_in = error.retry_delay();
    Outcome::Failed { message, detail: capture.then(|| error.into_detail()), retry_in }
}
