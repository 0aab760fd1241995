//! The async side of a worker group's pool (feature `tokio`): a feeder thread that takes a
//! claimed job out of the ready buffer only when one of the group's `concurrency` slots is free
//! and spawns it on the runtime: an async handler's future as a task, a plain handler (in a
//! registry that mixes both) on the runtime's blocking pool. Outcomes go back over the
//! dispatcher's channel; nothing here touches the store, and nothing but handler code runs on
//! the runtime, so a handler that blocks a runtime thread delays no heartbeat.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use super::handler::{HandlerError, HandlerResult};
use super::pool::{in_handler, prepare, run_sync, settle, Done, ReadyBuffer};
use super::registry::{HandlerFuture, Ready, Registry};

/// A group's slots and its running tasks.
pub(super) struct Tasks {
    state: Mutex<TaskState>,
    freed: Condvar,
}

struct TaskState {
    free: usize,
    /// Aborted (or the engine is gone): the feeder ends.
    closed: bool,
    /// Every spawned task not yet ended, by its claim token, so that shutdown can drop them.
    running: HashMap<u64, AbortHandle>,
}

impl Tasks {
    pub(super) fn new(concurrency: usize) -> Arc<Self> {
        Arc::new(Tasks {
            state: Mutex::new(TaskState { free: concurrency, closed: false, running: HashMap::new() }),
            freed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for a free slot and take it; `false` once closed.
    fn acquire(&self) -> bool {
        let mut s = self.lock();
        loop {
            if s.closed {
                return false;
            }
            if s.free > 0 {
                s.free -= 1;
                return true;
            }
            s = self.freed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn release(&self, run: Option<u64>) {
        let mut s = self.lock();
        s.free += 1;
        if let Some(run) = run {
            s.running.remove(&run);
        }
        drop(s);
        self.freed.notify_one();
    }

    /// After the dispatcher has stopped (its grace period and the half second for handlers asked
    /// to stop are over): drop every future still running, as the shutdown promises. A future
    /// stuck in blocking code between two awaits ends only when it next yields; its job is left
    /// to its lease either way, as a stuck handler thread's is.
    pub(super) fn abort_all(&self) {
        let mut s = self.lock();
        s.closed = true;
        let running: Vec<AbortHandle> = s.running.drain().map(|(_, h)| h).collect();
        drop(s);
        self.freed.notify_all();
        for h in running {
            h.abort();
        }
    }
}

/// Gives a task's slot back however the task ends: finished, panicked, or dropped by an abort.
struct Slot {
    tasks: Arc<Tasks>,
    run: Option<u64>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.tasks.release(self.run);
    }
}

/// What the feeder is built from.
pub(super) struct Feeder {
    pub ready: Arc<ReadyBuffer>,
    pub done: Sender<Done>,
    pub registry: Arc<Registry>,
    pub runtime: Handle,
    pub tasks: Arc<Tasks>,
    pub capture: bool,
}

impl Feeder {
    /// Start jobs as slots free, until the ready buffer closes or the tasks are aborted.
    pub(super) fn run(self) {
        while self.tasks.acquire() {
            let Some(work) = self.ready.next() else {
                self.tasks.release(None);
                return;
            };
            let run = work.run;
            let (ready, ctx) = match prepare(work, &self.registry) {
                Ok(r) => r,
                Err(outcome) => {
                    self.tasks.release(None);
                    if self.done.send(Done::Finished { run, outcome }).is_err() {
                        return;
                    }
                    continue;
                }
            };
            let (done, capture, cancel) = (self.done.clone(), self.capture, ctx.cancel.clone());
            match ready {
                Ready::Sync(call) => {
                    let slot = Slot { tasks: Arc::clone(&self.tasks), run: None };
                    self.runtime.spawn_blocking(move || {
                        let outcome = run_sync(call, ctx, capture);
                        drop(slot);
                        let _ = done.send(Done::Finished { run, outcome });
                    });
                }
                Ready::Async(start) => {
                    let slot = Slot { tasks: Arc::clone(&self.tasks), run: Some(run) };
                    // Called inside the first poll, so that a handler panicking before it
                    // returns its future is caught like any other.
                    let future: HandlerFuture = Box::pin(async move { start(ctx).await });
                    // The map is locked across the spawn: the task's own end (its slot's drop)
                    // removes its entry, and must not come before the entry is there.
                    let mut s = self.tasks.lock();
                    let handle = self.runtime.spawn(async move {
                        let result = CatchUnwind { future, capture }.await;
                        let outcome = settle(result, &cancel, capture);
                        drop(slot);
                        let _ = done.send(Done::Finished { run, outcome });
                    });
                    s.running.insert(run, handle.abort_handle());
                }
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

    /// Start a group's feeder thread; its tasks, to drop at shutdown.
    pub(super) fn start_feeder(
        &self,
        name: String,
        concurrency: usize,
        ready: Arc<ReadyBuffer>,
        done: Sender<Done>,
        registry: Arc<Registry>,
        capture: bool,
    ) -> crate::Result<Arc<Tasks>> {
        let tasks = Tasks::new(concurrency);
        let feeder = Feeder { ready, done, registry, runtime: self.handle.clone(), tasks: Arc::clone(&tasks), capture };
        std::thread::Builder::new()
            .name(name)
            .spawn(move || feeder.run())
            .map_err(|e| crate::Error::InvalidInput(format!("cannot start a feeder thread: {e}")))?;
        Ok(tasks)
    }

    /// Stop an owned runtime without waiting for tasks stuck in blocking code (and without the
    /// panic a plain drop would raise when the engine is dropped inside async code).
    pub(super) fn shutdown(&mut self) {
        if let Some(rt) = self.owned.take() {
            rt.shutdown_background();
        }
    }
}
