//! BackWave: a durable background-job system on one shared SQLite database (or, with the
//! `postgres` feature, one PostgreSQL database).
//!
//! An application registers handlers by wire name ([`Registry`]), enqueues jobs into the
//! [`Store`] (also inside its own database transaction: [`enqueue_in_sqlite`]), and runs worker
//! groups in an [`Engine`]. Jobs run at least once under heartbeated leases, are retried on a
//! [`Backoff`] by their [`RetryPolicy`], and end Succeeded, Dead-Lettered, Quarantined or
//! Cancelled; every change of state is written to the transition log. Any number of processes
//! (and, on PostgreSQL, hosts) share one store: each job runs in one of them at a time.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use backwave::{Engine, HandlerError, Registry, Store, WorkerGroup};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Resize { image: String, width: u32 }
//!
//! let dir = tempfile::tempdir()?;
//! let db = dir.path().join("jobs.db");
//!
//! // 1. Handlers, by wire name: a plain function of the payload and the attempt's context.
//! let mut registry = Registry::new();
//! registry.handle::<Resize>("resize-image", |job, ctx| {
//!     if job.width == 0 {
//!         return Err(HandlerError::msg(format!("{}: width 0 (attempt {})", job.image, ctx.attempt())));
//!     }
//!     Ok(())
//! });
//!
//! // 2. Enqueue: the payload is checked against the handler's type before it is stored.
//! let store = Store::create(&db)?;
//! registry.enqueue(&store, "resize-image", &Resize { image: "cat.png".into(), width: 640 })?;
//!
//! // 3. Run a worker group (here on the default queue) until the job is done.
//! let mut engine = Engine::new(&db, registry);
//! engine.add_worker_group(WorkerGroup { poll_interval: Duration::from_millis(20), ..WorkerGroup::default() });
//! let running = engine.start()?;
//! let started = Instant::now();
//! while running.stats()[0].succeeded == 0 && started.elapsed() < Duration::from_secs(10) {
//!     std::thread::sleep(Duration::from_millis(10));
//! }
//! running.shutdown(Duration::from_secs(5));
//! assert_eq!(store.counts()?.total(backwave::JobState::Succeeded), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Where to start
//!
//! - [`Registry`]: handlers by wire name, and typed enqueues ([`Registry::job`]).
//! - [`Engine`] and [`WorkerGroup`]: what runs the handlers; [`EngineHandle`] stops it and
//!   reports [`stats`](EngineHandle::stats).
//! - [`Store`]: enqueue, read jobs and the transition log, the store's [`health`](Store::health),
//!   and the operator's actions (requeue, cancel, pause, limits), each checked against the
//!   actor's [`Permission`].
//! - [`RetryPolicy`] and [`Backoff`]: how many attempts, and the waits between them.
//! - [`Schedule`]: recurring jobs from cron expressions, fired exactly once per tick.
//! - [`Error`]: what can go wrong, by kind.
//!
//! # Features
//!
//! The default features build the SQLite store and the engine on plain threads, and nothing
//! else: no PostgreSQL client, no TLS, no async runtime. Turn on what the application uses:
//!
//! - **`postgres`**: stores on a PostgreSQL server. [`Store::open`], [`Store::create`] and
//!   [`Engine::new`] then take `postgres://` URLs (without the feature they answer
//!   [`Error::PostgresNotBuilt`]), and `enqueue_in_postgres` / `enqueue_in_tokio_postgres`
//!   enqueue inside the application's own PostgreSQL transaction. Needed when several hosts
//!   share one store. Brings the `postgres` and `tokio-postgres` clients (re-exported here at the
//!   versions this build links) and TLS through rustls with ring (`sslmode` in the URL; an
//!   application that installed a process-wide rustls `CryptoProvider` has it used instead).
//! - **`tokio`**: async applications. `Registry::handle_async` registers handlers that are
//!   futures, run on the application's runtime (`Engine::runtime`) or a small one the engine
//!   owns, and `AsyncStore` enqueues and reads from async code without blocking a runtime
//!   thread. Not needed for handlers that are plain functions, even in an async program (use
//!   `spawn_blocking` around [`Store`] calls there).
//!
//! ```toml
//! [dependencies]
//! backwave = { version = "0.1", features = ["postgres", "tokio"] }
//! ```
//!
//! The library never knows a terminal exists, and depends on no terminal crate: `bw`, the
//! operator tool and dashboard over the same store (package `backwave-cli`), calls the same
//! functions an application does.

// Safe bindings (nix) cover the user name, access(2) and the host name: no unsafe code here.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod engine;
pub mod error;
pub mod model;
mod otel;
pub mod retry;
pub mod schedule;
mod states;
pub mod store;
pub mod telemetry;
pub mod workflow;

pub use engine::{
    DispatchPolicy, Engine, EngineHandle, HandlerError, HandlerResult, JobContext, Registry, WorkerGroup,
};
pub use error::{Error, Result};
pub use model::{
    cause_fingerprint, DetailStatus, Enqueued, FailureDetail, Job, JobId, JobState, LogCursor, Millis, NewJob,
    Permission, Progress, QuarantineReason, Transition, UniqueBy, UniqueRule, WorkerInfo, PRIORITY_FIRST,
    PRIORITY_LAST,
};
pub use retry::{Backoff, BackoffFn, RetryPolicy, Shape};
pub use schedule::{MissedTicks, Schedule};
#[cfg(feature = "tokio")]
pub use store::AsyncStore;
#[cfg(feature = "postgres")]
pub use store::{enqueue_in_postgres, enqueue_in_tokio_postgres};
pub use store::{enqueue_in_sqlite, Clock, Store, StoreTarget};
pub use workflow::{
    EnqueuedWorkflow, Needs, OnFailure, Parent, ParentCounts, Step, Workflow, WorkflowGraph, WorkflowId,
    WorkflowSummary,
};

// The drivers an application's own transaction comes from, at the versions this build links:
// `backwave::rusqlite::Transaction` is the type `enqueue_in_sqlite` takes.
#[cfg(feature = "postgres")]
pub use postgres;
pub use rusqlite;
#[cfg(feature = "postgres")]
pub use tokio_postgres;
