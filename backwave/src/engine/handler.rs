//! What a handler sees and returns: the per-attempt [`JobContext`] with its [`CancelSignal`],
//! and [`HandlerError`], which turns any error (or a panic) into the failure detail the
//! transition log keeps. A handler succeeds with `Ok(())` and fails with `Err`: nothing else.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::model::{FailureDetail, JobId, Progress};

/// What every handler returns: `Ok(())` is success, any `Err` is a failed attempt.
pub type HandlerResult = Result<(), HandlerError>;

/// A failed attempt, as a handler reports it.
///
/// Any `std::error::Error + Send + Sync + 'static` converts into it with `?`, keeping its type
/// name, message, `source()` chain and (when `RUST_BACKTRACE` or `RUST_LIB_BACKTRACE` is set) a
/// backtrace. For a failure that is only a message, use [`HandlerError::msg`]. Like `anyhow`,
/// it does not itself implement `std::error::Error`, so that the blanket conversion can exist.
pub struct HandlerError {
    kind: String,
    message: String,
    chain: Vec<String>,
    backtrace: Option<String>,
    cancelled: bool,
    retry_in: Option<Duration>,
}

impl HandlerError {
    /// A failure that is just a message, e.g.
    /// `HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt()))`.
    pub fn msg(message: impl fmt::Display) -> Self {
        HandlerError {
            kind: "message".into(),
            message: message.to_string(),
            chain: Vec::new(),
            backtrace: captured(Backtrace::capture()),
            cancelled: false,
            retry_in: None,
        }
    }

    /// A boxed error (`Box<dyn Error + Send + Sync>`), which `?` cannot convert on its own. Its
    /// concrete type is not known, so the kind is `dyn Error`; the message and chain are kept.
    pub fn from_boxed(e: Box<dyn std::error::Error + Send + Sync + 'static>) -> Self {
        HandlerError {
            kind: "dyn Error".into(),
            message: e.to_string(),
            chain: source_chain(&*e),
            backtrace: captured(Backtrace::capture()),
            cancelled: false,
            retry_in: None,
        }
    }

    /// The handler stopped because its [`CancelSignal`] fired. Returned by
    /// [`JobContext::check_cancelled`]; if nobody asked (no operator cancel), the engine still
    /// records it as a plain failed attempt.
    pub fn cancelled() -> Self {
        HandlerError {
            kind: "cancelled".into(),
            message: "the handler stopped on its cancellation signal".into(),
            chain: Vec::new(),
            backtrace: None,
            cancelled: true,
            retry_in: None,
        }
    }

    /// The error's type name (`std::io::error::Error`), `message`, `panic` or `cancelled`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The error's own message (its `Display`), without the `source()` chain.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `source()` chain, outermost first, the message itself excluded.
    pub fn chain(&self) -> &[String] {
        &self.chain
    }

    /// Whether this is [`HandlerError::cancelled`]: the handler stopped on its cancellation
    /// signal. The engine ends the job Cancelled only if an operator asked for it.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// Retry this failed attempt after `d` rather than the retry policy's wait for it: an
    /// upstream's `Retry-After`, a lock another system holds until a known time. The attempt
    /// still counts (on the last one the job is dead-lettered as after any failure); the delay
    /// table is unchanged for the attempts after it. E.g.
    /// `Err(HandlerError::msg("rate limited").retry_in(Duration::from_secs(retry_after)))`.
    pub fn retry_in(mut self, d: Duration) -> Self {
        self.retry_in = Some(d);
        self
    }

    /// The wait the handler chose with [`HandlerError::retry_in`].
    pub fn retry_delay(&self) -> Option<Duration> {
        self.retry_in
    }

    pub(crate) fn panic(message: String, backtrace: Option<String>) -> Self {
        HandlerError { kind: "panic".into(), message, chain: Vec::new(), backtrace, cancelled: false, retry_in: None }
    }

    pub(crate) fn into_detail(self) -> FailureDetail {
        FailureDetail { kind: self.kind, message: self.message, chain: self.chain, backtrace: self.backtrace }
    }
}

impl<E> From<E> for HandlerError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(e: E) -> Self {
        HandlerError {
            kind: std::any::type_name::<E>().to_string(),
            message: e.to_string(),
            chain: source_chain(&e),
            backtrace: captured(Backtrace::capture()),
            cancelled: false,
            retry_in: None,
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        for c in &self.chain {
            write!(f, "\n  caused by: {c}")?;
        }
        Ok(())
    }
}

/// The `source()` chain of an error, outermost first, the error itself excluded.
fn source_chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    std::iter::successors(e.source(), |s| s.source()).map(ToString::to_string).collect()
}

/// A captured backtrace, trimmed to the application's frames; none when no frame is left. A
/// plain `HandlerError::msg` otherwise stored some forty frames of std, the engine and libc per
/// attempt, which buried the one line an operator needed under internals nobody can change.
fn captured(bt: Backtrace) -> Option<String> {
    if bt.status() != BacktraceStatus::Captured {
        return None;
    }
    let frames = application_frames(&bt.to_string());
    (!frames.is_empty()).then_some(frames)
}

/// A panic's trace: where it panicked, then the application's frames (a panic always says
/// something, so its location is kept even when no application frame is left).
pub(crate) fn panic_trace(location: &str, bt: &Backtrace) -> String {
    let frames = application_frames(&bt.to_string());
    if frames.is_empty() {
        location.trim_end().to_string()
    } else {
        format!("{}\n{frames}", location.trim_end())
    }
}

/// Symbols of frames that are not the application's: the standard library, the runtime's entry
/// and thread start, the backtrace machinery, and this engine's dispatch (which runs every
/// handler, so it says nothing about one failure). Trait-impl frames (`<T as core::…>::f`) are
/// judged by their type.
const FOREIGN_FRAMES: [&str; 18] = [
    "std::",
    // The runtime an async registry runs sync handlers on (`spawn_blocking`): some 17 frames,
    // 3 KiB of every failed attempt's detail, none of them the application's.
    "tokio::",
    "futures_util::",
    "core::",
    "alloc::",
    "backtrace::",
    "panic_unwind::",
    "backwave::engine::",
    "rust_begin_unwind",
    "rust_panic",
    "__rust",
    "_start",
    "__libc_start",
    "start_thread",
    "clone",
    "__clone",
    "<unknown>",
    "test::",
];

/// The frames of a `Backtrace`'s text (`  N: symbol` then `at file:line` lines) whose symbol is
/// the application's, as they were written (numbers kept, so gaps show where frames went).
pub(crate) fn application_frames(trace: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut keep = false;
    for line in trace.lines() {
        let trimmed = line.trim_start();
        let symbol = trimmed
            .split_once(": ")
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .map(|(_, s)| s);
        match symbol {
            Some(symbol) => {
                let symbol = symbol.trim_start_matches('<');
                keep = !FOREIGN_FRAMES.iter().any(|p| symbol.starts_with(p));
                if keep {
                    kept.push(line);
                }
            }
            // An `at file:line` line (or anything else) belongs to the frame above it.
            None if keep => kept.push(line),
            None => {}
        }
    }
    kept.join("\n")
}

/// Why a [`CancelSignal`] fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelReason {
    /// An operator cancelled the job ([`Store::cancel`](crate::Store::cancel) and the bulk
    /// cancels): the attempt ends Cancelled if the handler stops with an error.
    Operator,
    /// The process is shutting down and the deadline has passed: a handler that stops now (returns
    /// the cancellation) reports nothing, as the SPEC has a host shutdown do; its lease is ended
    /// at once, so another worker inherits the job as a lapse (a failed attempt, retried by its
    /// delay table) at its next reap. One that does not stop is left to its lease.
    Shutdown,
    /// The lease was lost (it lapsed and the job was reaped elsewhere): whatever this attempt
    /// reports now is discarded by the fence.
    LeaseLost,
}

/// A cancellation signal a handler can poll, block on, or await. Cloning shares the signal.
#[derive(Clone, Debug, Default)]
pub struct CancelSignal {
    inner: Arc<(Mutex<CancelState>, Condvar)>,
}

#[derive(Debug, Default)]
struct CancelState {
    reason: Option<CancelReason>,
    /// The tasks awaiting [`CancelSignal::cancelled`], by the key of their future: a future
    /// dropped before the signal fires takes its waker out, so a handler that awaits the signal
    /// in a loop does not grow this list.
    wakers: Vec<(u64, Waker)>,
    next_key: u64,
}

impl CancelSignal {
    /// A signal that has not fired. The engine makes one per attempt; a test makes its own to
    /// drive a handler's cancellation path.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, CancelState> {
        self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fire the signal. The first reason wins.
    pub fn cancel(&self, reason: CancelReason) {
        let mut s = self.lock();
        if s.reason.is_none() {
            s.reason = Some(reason);
            let wakers = std::mem::take(&mut s.wakers);
            drop(s);
            self.inner.1.notify_all();
            for (_, w) in wakers {
                w.wake();
            }
        }
    }

    /// Why the signal fired, or `None` while it has not.
    pub fn reason(&self) -> Option<CancelReason> {
        self.lock().reason
    }

    /// Whether the signal has fired, for whatever reason: cheap enough to poll between steps.
    pub fn is_cancelled(&self) -> bool {
        self.reason().is_some()
    }

    /// Block until the signal fires or `timeout` passes; returns the reason if it fired.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<CancelReason> {
        // None: a timeout past what an Instant holds (`Duration::MAX`) waits for the signal only.
        let deadline = Instant::now().checked_add(timeout);
        let mut s = self.lock();
        while s.reason.is_none() {
            s = match deadline {
                None => self.inner.1.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    self.inner.1.wait_timeout(s, deadline - now).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
        s.reason
    }

    /// A future that resolves, with the reason, when the signal fires (at once if it has).
    /// It works on any executor: the signal wakes the awaiting task itself.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { signal: self.clone(), key: None }
    }
}

/// The future of [`CancelSignal::cancelled`] and [`JobContext::cancelled`]: owns its signal, so
/// it can be moved into a spawned task or raced against the work in `tokio::select!`.
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Cancelled {
    signal: CancelSignal,
    key: Option<u64>,
}

impl Future for Cancelled {
    type Output = CancelReason;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CancelReason> {
        let this = &mut *self;
        let mut s = this.signal.lock();
        if let Some(reason) = s.reason {
            return Poll::Ready(reason);
        }
        let key = *this.key.get_or_insert_with(|| {
            s.next_key += 1;
            s.next_key
        });
        match s.wakers.iter_mut().find(|(k, _)| *k == key) {
            Some((_, w)) => w.clone_from(cx.waker()),
            None => s.wakers.push((key, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.signal.lock().wakers.retain(|(k, _)| *k != key);
        }
    }
}

/// A fresh context for each attempt: who the job is, which attempt this is, and the signal
/// that tells the handler to stop.
#[derive(Clone, Debug)]
pub struct JobContext {
    pub(crate) job_id: JobId,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    pub(crate) wire_name: Arc<str>,
    pub(crate) queue: Arc<str>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) group: Arc<str>,
    pub(crate) worker_id: Arc<str>,
    pub(crate) cancel: CancelSignal,
    /// The engine's shared read handle on the store ([`JobContext::parents`]); none when detached.
    pub(crate) reader: Option<Arc<Reader>>,
    pub(crate) report: Arc<Report>,
}

/// One store handle the handlers of an engine share for their reads ([`JobContext::parents`]),
/// opened at the first read: most engines never run a workflow job.
pub(crate) struct Reader {
    target: crate::StoreTarget,
    store: std::sync::Mutex<Option<crate::Store>>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl Reader {
    pub(crate) fn new(target: crate::StoreTarget) -> Self {
        Reader { target, store: std::sync::Mutex::new(None) }
    }

    fn with<T>(&self, f: impl FnOnce(&crate::Store) -> crate::Result<T>) -> crate::Result<T> {
        let mut slot = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(crate::Store::open(self.target.clone())?);
        }
        let done = f(slot.as_ref().expect("opened above"));
        if matches!(&done, Err(e) if e.is_transient() && !matches!(e, crate::Error::Busy)) {
            // A lost connection: the next read opens another.
            *slot = None;
        }
        done
    }
}

/// What a running attempt has told the engine besides its result: the output it recorded and
/// the progress it last reported. Shared by the attempt's [`JobContext`] (and its clones) and
/// the dispatcher's claim table, which takes new progress for the next heartbeat and the output
/// with the attempt's success.
#[derive(Debug, Default)]
pub(crate) struct Report {
    inner: Mutex<ReportState>,
}

#[derive(Debug, Default)]
struct ReportState {
    output: Option<Vec<u8>>,
    progress: Option<Progress>,
    /// Reported since the last heartbeat took it.
    progress_new: bool,
}

impl Report {
    fn lock(&self) -> MutexGuard<'_, ReportState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The progress reported since the last call, if any, for the next heartbeat to write.
    pub(crate) fn take_new_progress(&self) -> Option<Progress> {
        let mut s = self.lock();
        std::mem::take(&mut s.progress_new).then(|| s.progress.clone()).flatten()
    }

    /// A heartbeat that took `progress` did not reach the store: write it with the next one,
    /// unless a newer report came meanwhile (which the next one takes anyway).
    pub(crate) fn untake_progress(&self) {
        let mut s = self.lock();
        if s.progress.is_some() {
            s.progress_new = true;
        }
    }

    /// The output recorded, taken with the attempt's success.
    pub(crate) fn take_output(&self) -> Option<Vec<u8>> {
        self.lock().output.take()
    }
}

impl JobContext {
    /// A context for calling a handler outside a worker (unit tests of handlers): the given id,
    /// attempt, wire name and queue, no labels, an empty group and worker id, `max_attempts`
    /// equal to `attempt`, and a signal that has not fired (fire it through
    /// [`JobContext::cancellation`]).
    ///
    /// ```
    /// use backwave::{HandlerError, HandlerResult, JobContext, JobId};
    ///
    /// fn resize(width: u32, ctx: &JobContext) -> HandlerResult {
    ///     ctx.check_cancelled()?;
    ///     if width == 0 {
    ///         return Err(HandlerError::msg(format!("width 0 on attempt {}", ctx.attempt())));
    ///     }
    ///     Ok(())
    /// }
    ///
    /// let ctx = JobContext::detached(JobId::new(), 1, "resize", "default");
    /// assert!(resize(640, &ctx).is_ok());
    /// assert_eq!(resize(0, &ctx).unwrap_err().message(), "width 0 on attempt 1");
    /// ctx.cancellation().cancel(backwave::engine::CancelReason::Operator);
    /// assert!(resize(640, &ctx).unwrap_err().is_cancelled());
    /// ```
    pub fn detached(job_id: JobId, attempt: u32, wire_name: &str, queue: &str) -> Self {
        JobContext {
            job_id,
            attempt,
            max_attempts: attempt.max(1),
            wire_name: wire_name.into(),
            queue: queue.into(),
            labels: BTreeMap::new(),
            group: Arc::from(""),
            worker_id: Arc::from(""),
            cancel: CancelSignal::new(),
            reader: None,
            report: Arc::default(),
        }
    }

    /// This workflow job's parents ([`Workflow`](crate::Workflow)): each one's id, wire name,
    /// state and what the edge needed of it, read from the store now. A batch's callback learns
    /// here how its members ended. Empty for a job outside workflows; an error for a
    /// [`JobContext::detached`] context, which has no store.
    pub fn parents(&self) -> crate::Result<Vec<crate::Parent>> {
        self.read_parents(|store, job| store.parents(job))
    }

    /// This workflow job's parents counted by state, without reading their outputs: what the
    /// callback of a batch of many members reads ([`Store::parent_counts`](crate::Store::parent_counts)).
    /// Empty for a job outside workflows; an error for a [`JobContext::detached`] context.
    pub fn parent_counts(&self) -> crate::Result<crate::ParentCounts> {
        self.read_parents(|store, job| store.parent_counts(job))
    }

    /// `read` of this job's parents on the store the context reads from.
    fn read_parents<T>(&self, read: impl FnOnce(&crate::Store, JobId) -> crate::Result<T>) -> crate::Result<T> {
        match &self.reader {
            Some(reader) => reader.with(|store| read(store, self.job_id)),
            None => Err(crate::Error::InvalidInput(
                "a detached JobContext has no store to read the job's parents from".into(),
            )),
        }
    }

    /// The job's id: with the attempt, the natural idempotency key (`charge:{job_id}`).
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// 1-based; it rose when this worker claimed the job.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The claiming group's budget: the failure of attempt `max_attempts` dead-letters.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wire name the job was enqueued under, which chose this handler.
    pub fn wire_name(&self) -> &str {
        &self.wire_name
    }

    /// The queue the job was claimed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The job's labels (e.g. `tenant=acme`), as given at enqueue ([`Enqueue::label`]).
    ///
    /// [`Enqueue::label`]: crate::engine::Enqueue::label
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// One label's value, `None` when the job has no label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// The worker group that claimed the job.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The id of the claiming worker (`host/pid/group#tail`), as the store's worker registry
    /// and the transition log name it.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The signal that fires on an operator cancel, a lost lease, or the end of a shutdown's
    /// grace period.
    pub fn cancellation(&self) -> &CancelSignal {
        &self.cancel
    }

    /// Whether the job was asked to stop: an operator's cancel, a lost lease, or the end of a
    /// shutdown's grace period ([`CancelSignal::reason`] tells which).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the job is asked to stop (an operator's cancel, a lost lease, the end of a
    /// shutdown's grace period): race it against an async handler's work, e.g.
    /// `tokio::select! { r = work => r, _ = ctx.cancelled() => Err(HandlerError::cancelled()) }`.
    pub fn cancelled(&self) -> Cancelled {
        self.cancel.cancelled()
    }

    /// `Err(HandlerError::cancelled())` once the signal has fired: `ctx.check_cancelled()?`
    /// between steps of a long handler.
    pub fn check_cancelled(&self) -> HandlerResult {
        if self.cancel.is_cancelled() {
            Err(HandlerError::cancelled())
        } else {
            Ok(())
        }
    }

    /// Record the attempt's output: `output` serialized as JSON, kept with the job if the
    /// attempt succeeds (written with the success, in the same statement) and read back with
    /// [`Store::output`](crate::Store::output) and [`Store::outputs`](crate::Store::outputs), and
    /// by the jobs that depend on it. A later call replaces an earlier one; a failed attempt's
    /// output is dropped. An output over the store's [`output_limit`](crate::Store::output_limit)
    /// (32 KiB by default) fails the attempt instead, with a cause naming the limit and the
    /// size: it is never cut. A value that does not serialize is an error here
    /// (`ctx.set_output(&v)?`).
    ///
    /// ```
    /// use backwave::{JobContext, JobId};
    ///
    /// #[derive(serde::Serialize)]
    /// struct Resized { width: u32, bytes: u64 }
    ///
    /// let ctx = JobContext::detached(JobId::new(), 1, "resize", "default");
    /// ctx.set_output(&Resized { width: 640, bytes: 48_213 })?;
    /// assert_eq!(ctx.output().as_deref(), Some(&br#"{"width":640,"bytes":48213}"#[..]));
    /// # Ok::<(), backwave::HandlerError>(())
    /// ```
    pub fn set_output<T: serde::Serialize + ?Sized>(&self, output: &T) -> HandlerResult {
        let bytes = serde_json::to_vec(output)?;
        self.report.lock().output = Some(bytes);
        Ok(())
    }

    /// The output recorded so far by [`JobContext::set_output`] (JSON bytes), if any: for
    /// tests of handlers.
    pub fn output(&self) -> Option<Vec<u8>> {
        self.report.lock().output.clone()
    }

    /// Report how far the attempt has got: `fraction` from 0 to 1 and a short `message`
    /// (`resizing 3 of 8`; cut at [`Progress::MAX_MESSAGE_CHARS`] characters). Kept in memory
    /// and written by the next heartbeat of the job's lease (at most 2 s away), in the
    /// statement that renews the lease, so reporting often costs no extra write: only the latest
    /// report before each heartbeat reaches the store. A fraction outside 0..=1, or NaN, is an
    /// error quoting it and reports nothing. The next attempt starts with no progress; after the
    /// attempt ends, the last report written stays with the job.
    ///
    /// ```
    /// use backwave::{JobContext, JobId};
    ///
    /// let ctx = JobContext::detached(JobId::new(), 1, "resize", "default");
    /// ctx.progress(0.25, "resizing 1 of 4")?;
    /// assert_eq!(ctx.last_progress().unwrap().to_string(), "25% resizing 1 of 4");
    /// let refused = ctx.progress(1.5, "too far").unwrap_err();
    /// assert_eq!(refused.message(), "progress fraction 1.5 is not between 0 and 1 (0.42 is 42%): nothing was reported");
    /// # Ok::<(), backwave::HandlerError>(())
    /// ```
    pub fn progress(&self, fraction: f64, message: impl Into<String>) -> HandlerResult {
        let progress = Progress::new(fraction, message)?;
        let mut s = self.report.lock();
        s.progress = Some(progress);
        s.progress_new = true;
        Ok(())
    }

    /// The progress last reported by [`JobContext::progress`], if any: for tests of handlers.
    pub fn last_progress(&self) -> Option<Progress> {
        self.report.lock().progress.clone()
    }

    /// Sleep for `d`, waking early (with `Err(HandlerError::cancelled())`) if the signal fires.
    pub fn sleep(&self, d: Duration) -> HandlerResult {
        match self.cancel.wait_timeout(d) {
            Some(_) => Err(HandlerError::cancelled()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::application_frames;

    /// A `HandlerError::msg` trace as std prints it: the capture point in the engine, the
    /// application's handler, then the dispatch machinery and the thread start.
    const TRACE: &str = "   0: backwave::engine::handler::HandlerError::msg
             at ./src/engine/handler.rs:38:24
   1: shop::jobs::charge_card
             at ./src/jobs.rs:42:9
   2: <shop::jobs::Charge as backwave::engine::registry::Handler>::handle
             at ./src/jobs.rs:80:5
   3: backwave::engine::pool::run_one
             at ./src/engine/pool.rs:190:20
   4: core::ops::function::FnOnce::call_once
             at /rustc/abc/library/core/src/ops/function.rs:250:5
   5: std::sys::backtrace::__rust_begin_short_backtrace
             at /rustc/abc/library/std/src/sys/backtrace.rs:152:18
   6: <alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once
   7: start_thread
   8: clone";

    #[test]
    fn a_backtrace_keeps_only_the_application_frames() {
        let kept = application_frames(TRACE);
        assert_eq!(
            kept,
            "   1: shop::jobs::charge_card
             at ./src/jobs.rs:42:9
   2: <shop::jobs::Charge as backwave::engine::registry::Handler>::handle
             at ./src/jobs.rs:80:5"
        );
    }

    /// Found by an application developer's walkthrough: with an async handler in the registry,
    /// sync handlers run on tokio's blocking pool, and each failed attempt kept its frames.
    #[test]
    fn tokio_frames_are_not_the_applications() {
        let trace = "   0: shop::jobs::charge_card
             at ./src/jobs.rs:42:9
   1: tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll
   2: <tokio::runtime::blocking::task::BlockingTask<T> as core::future::future::Future>::poll
             at /cargo/tokio-1.48.0/src/runtime/blocking/task.rs:42:21
   3: tokio::runtime::task::core::Core<T,S>::poll::{{closure}}
   4: <futures_util::future::catch_unwind::CatchUnwind<Fut> as core::future::future::Future>::poll";
        assert_eq!(application_frames(trace), "   0: shop::jobs::charge_card\n             at ./src/jobs.rs:42:9");
    }

    #[test]
    fn a_backtrace_of_internals_only_is_dropped() {
        let internals: String = TRACE
            .lines()
            .filter(|l| !l.contains("shop::") && !l.contains("./src/jobs.rs"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(application_frames(&internals), "");
    }
}
