//! BackWave: a durable background-job system on one shared SQLite database.
//!
//! Applications embed this library, register handlers by wire name and run worker groups; jobs
//! run at least once, are retried on a backoff, and end Succeeded, Dead-Lettered, Quarantined or
//! Cancelled. `bw` (the `backwave-cli` package, this repository's root) is the operator tool over
//! the same store.
//!
//! The library never knows a terminal exists, and depends on no terminal crate: `bw`'s CLI and
//! dashboard call the same functions an application does.

// Safe bindings (nix) cover the user name, access(2) and the host name: no unsafe code here.
#![forbid(unsafe_code)]

pub mod engine;
pub mod error;
pub mod model;
mod otel;
pub mod retry;
pub mod schedule;
pub mod store;
pub mod telemetry;

pub use engine::{
    DispatchPolicy, Engine, EngineHandle, HandlerError, HandlerResult, JobContext, Registry, WorkerGroup,
};
pub use error::{Error, Result};
pub use model::{
    cause_fingerprint, DetailStatus, Enqueued, FailureDetail, Job, JobId, JobState, LogCursor, Millis, NewJob,
    Permission, QuarantineReason, Transition, UniqueBy, UniqueRule, WorkerInfo,
};
pub use retry::{Backoff, BackoffFn, RetryPolicy, Shape};
pub use schedule::{MissedTicks, Schedule};
#[cfg(feature = "tokio")]
pub use store::AsyncStore;
#[cfg(feature = "postgres")]
pub use store::{enqueue_in_postgres, enqueue_in_tokio_postgres};
pub use store::{enqueue_in_sqlite, Clock, Store, StoreTarget};

// The drivers an application's own transaction comes from, at the versions this build links:
// `backwave::rusqlite::Transaction` is the type `enqueue_in_sqlite` takes.
#[cfg(feature = "postgres")]
pub use postgres;
pub use rusqlite;
#[cfg(feature = "postgres")]
pub use tokio_postgres;
