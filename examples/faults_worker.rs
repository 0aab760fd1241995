//! A worker process for the crash soak (`tests/faults.rs`, module `soak`): the test starts
//! several, SIGKILLs or SIGSTOPs them at random while they drain, and starts replacements.
//!
//! ```text
//! faults_worker <db> <lease-ms> <concurrency> <max-attempts>
//! ```
//! Handles wire name `soak` (queue `soak`), whose payload says how the handler behaves:
//! `{"kind":"ok","ms":3}` succeeds after `ms`, `fail` always fails, `flaky` fails its first
//! attempt, `panic` panics on its first attempt, `slow` sleeps `ms` (longer than the lease, so it
//! lives on heartbeats alone). Prints `ready <worker-id>` once its group runs, then serves until
//! killed.

use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
use backwave::RetryPolicy;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Soak {
    kind: String,
    #[serde(default)]
    ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, lease_ms, concurrency, max_attempts] = args.as_slice() else {
        return Err("usage: faults_worker <db> <lease-ms> <concurrency> <max-attempts>".into());
    };
    let lease = Duration::from_millis(lease_ms.parse()?);
    let mut registry = Registry::new();
    registry
        .handle::<Soak>("soak", |job, ctx| {
            let first = ctx.attempt() == 1;
            match job.kind.as_str() {
                "ok" | "slow" => ctx.sleep(Duration::from_millis(job.ms)),
                "fail" => Err(HandlerError::msg(format!("soak job always fails (attempt {})", ctx.attempt()))),
                "flaky" if first => Err(HandlerError::msg("flaky soak job fails its first attempt")),
                "panic" if first => panic!("soak job panics on its first attempt"),
                "flaky" | "panic" => Ok(()),
                other => Err(HandlerError::msg(format!("unknown soak kind '{other}'"))),
            }
        })
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
