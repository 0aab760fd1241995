//! The engine: what makes jobs move. Register handlers by wire name, add worker groups, start;
//! the engine claims per each group's dispatch policy, runs handlers on worker threads under
//! heartbeated leases, and records every outcome through the store's fenced operations. It
//! never decides a job's fate on its own: retries, dead-lettering and quarantine are the
//! store's transitions, the engine only reports what happened.
//!
//! A worker process with two handlers on two queues and two worker groups:
//!
//! ```no_run
//! use std::time::Duration;
//! use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
//! use backwave::{RetryPolicy, Store};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct ChargeCard { card_token: String, amount: u64 }
//!
//! # fn main() -> backwave::Result<()> {
//! let mut registry = Registry::new();
//! registry
//!     .handle::<String>("flaky", |label, ctx| {
//!         Err(HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt())))
//!     })
//!     .queue("low");
//! registry
//!     .handle::<ChargeCard>("charge-card", |job, ctx| {
//!         if ctx.attempt() >= 3 {
//!             return Ok(()); // charged job.amount to job.card_token
//!         }
//!         Err(HandlerError::msg(format!("gateway timeout (attempt {})", ctx.attempt())))
//!     })
//!     .queue("high");
//!
//! // Enqueue from code: the registered queue and labels, a typed payload.
//! let store = Store::create("backwave.db")?;
//! registry.enqueue(&store, "flaky", "nightly")?;
//! registry.job("charge-card", &ChargeCard { card_token: "tok_1".into(), amount: 4200 })?
//!     .label("tenant", "acme")
//!     .due_in(Duration::from_secs(5))
//!     .enqueue(&store)?;
//!
//! let mut backwave = Engine::new("backwave.db", registry);
//! backwave.add_worker_group(WorkerGroup {
//!     name: "strict-priority".into(),
//!     policy: DispatchPolicy::strict(["critical", "bulk", "limited"]),
//!     poll_interval: Duration::from_millis(250),
//!     retry_policy: RetryPolicy::new(5, |_| Duration::from_millis(500))?,
//!     ..WorkerGroup::default()
//! });
//! backwave.add_worker_group(WorkerGroup {
//!     name: "weighted-fair".into(),
//!     policy: DispatchPolicy::weighted([("high", 6), ("low", 1)]),
//!     poll_interval: Duration::from_millis(250),
//!     retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(500))?,
//!     ..WorkerGroup::default()
//! });
//! let running = backwave.start()?;
//! // ... serve until the process is asked to stop, then:
//! running.shutdown(Duration::from_secs(10));
//! # Ok(()) }
//! ```
//!
//! A handler is a plain function `Fn(T, &JobContext) -> HandlerResult` run on a worker thread:
//! `Ok(())` is success, any error (`?` converts every `std::error::Error`) or a panic is a
//! failed attempt with its failure detail. An operator cancel reaches it through
//! [`JobContext::cancellation`] (within one heartbeat, at most 2 s); a handler that then stops
//! with an error (`ctx.check_cancelled()?`) ends Cancelled, one that finishes its work anyway
//! ends Succeeded. Its own timeouts, and a cancellation nobody asked for, are plain failures
//! that retry.
//!
//! With the `tokio` feature a handler may instead be async (`Registry::handle_async`): its
//! future runs on the application's runtime (`Engine::runtime`) or one the engine owns, and
//! awaits [`JobContext::cancelled`] to stop when asked. Only handler code runs there: claims,
//! heartbeats and completions stay on the engine's threads (`tasks.rs`).

mod claims;
mod deadlines;
mod dispatcher;
mod events;
mod group;
mod handler;
mod maintenance;
mod outage;
mod pace;
mod pool;
mod recorder;
mod registry;
mod runtime;
mod shared;
#[cfg(feature = "tokio")]
mod tasks;
mod ticker;
mod wake;

pub use events::Event;
pub use group::{DispatchPolicy, WorkerGroup};
pub use handler::{CancelReason, CancelSignal, Cancelled, HandlerError, HandlerResult, JobContext};
pub use registry::{Enqueue, Enqueuer, Registration, Registry, DEFAULT_QUEUE};
pub use runtime::{Engine, EngineHandle, GroupStats, ShutdownReport, StopSignals, TickerReport};
