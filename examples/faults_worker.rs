//! A worker process for the crash soak (`tests/faults.rs`, module `soak`): the test starts
//! several, SIGKILLs or SIGSTOPs them at random while they drain, and starts replacements.
//!
//! ```text
//! faults_worker <db> <lease-ms> <concurrency> <max-attempts> [sync|async]
//! ```
//! Handles wire name `soak` (queue `soak`), whose payload says how the handler behaves:
//! `{"kind":"ok","ms":3}` succeeds after `ms`, `fail` always fails, `flaky` fails its first
//! attempt, `panic` panics on its first attempt, `slow` sleeps `ms` (longer than the lease, so it
//! lives on heartbeats alone). `async` registers the same behaviours with `handle_async`, the
//! waits as `tokio::time::sleep` raced against `ctx.cancelled()`. Prints `ready <worker-id>` once its group runs, then serves until
//! killed.

use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, HandlerResult, Registry, WorkerGroup};
use backwave::RetryPolicy;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Soak {
    kind: String,
    #[serde(default)]
    ms: u64,
}

/// What a soak job does besides waiting: `None` means wait `ms` (cut short by a cancel).
fn outcome(job: &Soak, attempt: u32) -> Option<HandlerResult> {
    let first = attempt == 1;
    match job.kind.as_str() {
        "ok" | "slow" => None,
        "fail" => Some(Err(HandlerError::msg(format!("soak job always fails (attempt {attempt})")))),
        "flaky" if first => Some(Err(HandlerError::msg("flaky soak job fails its first attempt"))),
        "panic" if first => panic!("soak job panics on its first attempt"),
        "flaky" | "panic" => Some(Ok(())),
        other => Some(Err(HandlerError::msg(format!("unknown soak kind '{other}'")))),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: faults_worker <db> <lease-ms> <concurrency> <max-attempts> [sync|async]";
    let (db, lease_ms, concurrency, max_attempts, flavor) = match args.as_slice() {
        [db, l, c, m] => (db, l, c, m, "sync"),
        [db, l, c, m, f] if f == "sync" || f == "async" => (db, l, c, m, f.as_str()),
        _ => return Err(usage.into()),
    };
    let lease = Duration::from_millis(lease_ms.parse()?);
    let mut registry = Registry::new();
    if flavor == "async" {
        registry.handle_async::<Soak, _, _>("soak", |job, ctx| async move {
            if let Some(done) = outcome(&job, ctx.attempt()) {
                return done;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(job.ms)) => Ok(()),
                _ = ctx.cancelled() => Err(HandlerError::cancelled()),
            }
        })
    } else {
        registry.handle::<Soak>("soak", |job, ctx| match outcome(&job, ctx.attempt()) {
            Some(done) => done,
            None => ctx.sleep(Duration::from_millis(job.ms)),
        })
    }
    .queue("soak");
    let mut engine = Engine::new(db, registry);
    engine.add_worker_group(WorkerGroup {
        name: "soak".into(),
        policy: DispatchPolicy::strict(["soak"]),
        poll_interval: Duration::from_millis(20),
        retry_policy: RetryPolicy::new(max_attempts.parse()?, |_| Duration::from_millis(10))?,
        concurrency: concurrency.parse()?,
        lease,
        ..WorkerGroup::default()
    });
    let running = engine.start()?;
    println!("ready {}", running.worker_ids()[0].1);
    loop {
        std::thread::park();
    }
}
