//! The async side of a worker group's pool (feature `tokio`): `concurrency` slot tasks on the
//! runtime, each taking a claimed job out of the ready buffer only when it is free, as a handler
//! thread does, and running it there: an async handler's future in place, a plain handler (in a
//! registry that mixes both) on the runtime's blocking pool. Outcomes go back over the
//! dispatcher's channel; nothing here touches the store, and nothing but handler code runs on
//! the runtime, so a handler that blocks a runtime thread delays no heartbeat.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::task::AbortHandle;
use tracing::{Instrument, Span};

use super::handler::{HandlerError, HandlerResult};
use super::pool::{in_handler, prepare, run_sync, settle, with_output, ReadyBuffer, Work};
use super::registry::{HandlerFuture, Ready, Registry};
use super::shared::Done;
use crate::store::Outcome;

/// A group's slot tasks, so that shutdown can drop the futures they still run.
pub(super) struct Tasks {
    slots: Mutex<Vec<AbortHandle>>,
}

impl Tasks {
    /// After the dispatcher has stopped (its grace period and the half second for handlers asked
    /// to stop are over): drop every future still running, as the shutdown promises. A future
    /// stuck in blocking code between two awaits ends only when it next yields; its job is left
    /// to its lease either way, as a stuck handler thread's is. Idle slots have ended already
    /// (the dispatcher closed the ready buffer).
    pub(super) fn abort_all(&self) {
        for slot in self.slots.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            slot.abort();
        }
    }
}

/// What a slot task is built from.
struct Slot {
    ready: Arc<ReadyBuffer>,
    done: Sender<Done>,
    registry: Arc<Registry>,
    capture: bool,
}

impl Slot {
    /// Run jobs one at a time until the ready buffer closes or the dispatcher is gone. One task
    /// per slot rather than one per job: a quick job costs no spawn, and no thread wakes between
    /// two jobs while the buffer holds more.
    async fn run(self) {
        while let Some(work) = self.ready.next_async().await {
            let run = work.run;
            let span = crate::telemetry::run_span(&work.job, &work.ctx, work.claimed_at);
            let began = std::time::Instant::now();
            // `None`: the runtime is shutting down and the job never started; its lease lapses.
            let Some(outcome) = self.run_one(work, &span).await else { return };
            if self.done.send(Done::Finished { run, outcome, span, took: began.elapsed() }).is_err() {
                return;
            }
            // A slot that always finds a job and a future that is ready at once would otherwise
            // keep its runtime thread from the application's other tasks.
            tokio::task::coop::consume_budget().await;
        }
    }

    /// Run one job inside its attempt `span`: the handler's own spans and events nest in it,
    /// its future entered at every poll.
    async fn run_one(&self, work: Work, span: &Span) -> Option<Outcome> {
        let (ready, ctx) = match span.in_scope(|| prepare(work, &self.registry)) {
            Ok(r) => r,
            Err(outcome) => return Some(*outcome),
        };
        let capture = self.capture;
        match ready {
            // `run_sync` catches the handler's panic: only a runtime shutting down fails the join.
            Ready::Sync(call) => {
                let span = span.clone();
                tokio::task::spawn_blocking(move || span.in_scope(|| run_sync(call, ctx, capture))).await.ok()
            }
            Ready::Async(start) => {
                let (cancel, report) = (ctx.cancel.clone(), Arc::clone(&ctx.report));
                // Called inside the first poll, so that a handler panicking before it returns
                // its future is caught like any other.
                let future: HandlerFuture = Box::pin(async move { start(ctx).await });
                let result = CatchUnwind { future, capture }.instrument(span.clone()).await;
                Some(with_output(settle(result, &cancel, capture), &report))
            }
        }
    }
}

/// A handler's future with each poll's panic caught, as a handler thread catches a call's.
struct CatchUnwind {
    future: HandlerFuture,
    capture: bool,
}

impl Future for CatchUnwind {
    type Output = Result<HandlerResult, HandlerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match in_handler(this.capture, || this.future.as_mut().poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

/// The runtime an engine's async handlers run on: the application's, or one the engine built
/// (and shuts down with it).
pub(super) struct AsyncRuntime {
    handle: Handle,
    owned: Option<tokio::runtime::Runtime>,
}

impl AsyncRuntime {
    /// `given`, or a multi-thread runtime of the engine's own: one worker thread per core, at
    /// most 4 (handlers that need more bring their own runtime through `Engine::runtime`).
    pub(super) fn new(given: Option<Handle>) -> crate::Result<Self> {
        if let Some(handle) = given {
            return Ok(AsyncRuntime { handle, owned: None });
        }
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("bw-async")
            .enable_all()
            .build()
            .map_err(|e| crate::Error::InvalidInput(format!("cannot start the async handlers' runtime: {e}")))?;
        Ok(AsyncRuntime { handle: rt.handle().clone(), owned: Some(rt) })
    }

    /// Start a group's `concurrency` slot tasks; returned, to drop at shutdown.
    pub(super) fn start_slots(
        &self,
        concurrency: usize,
        ready: Arc<ReadyBuffer>,
        done: Sender<Done>,
        registry: Arc<Registry>,
        capture: bool,
    ) -> Arc<Tasks> {
        let slots = (0..concurrency)
            .map(|_| {
                let slot =
                    Slot { ready: Arc::clone(&ready), done: done.clone(), registry: Arc::clone(&registry), capture };
                self.handle.spawn(slot.run()).abort_handle()
            })
            .collect();
        Arc::new(Tasks { slots: Mutex::new(slots) })
    }

    /// Stop an owned runtime without waiting for tasks stuck in blocking code (and without the
    /// panic a plain drop would raise when the engine is dropped inside async code).
    pub(super) fn shutdown(&mut self) {
        if let Some(rt) = self.owned.take() {
            rt.shutdown_background();
        }
    }
}
