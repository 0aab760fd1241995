//! A worker process for the engine tests (`tests/engine.rs`): the tests SIGKILL or SIGSTOP it
//! mid-handler to show what a dead or stalled worker does to its jobs.
//!
//! ```text
//! engine_worker <db> sleepy <max-attempts> <lease-ms>
//!     handles "sleepy" (queue "sleepy"): the handler prints `started <job-id>`, then sleeps for
//!     a minute (a test that stops the process mid-handler waits for that line: a job claimed
//!     but not yet started is handed back at once instead).
//! engine_worker <db> charge <ledger-db> <lease-ms>
//!     handles "charge-card" (queue "payments") with seed 000's idempotent ChargeCard handler,
//!     then takes 3 s over a receipt: a window in which the test can stall the process.
//! engine_worker <db> limits <concurrency> <lease-ms>
//!     handles "limited" (3 ms), "rated" and "free" (instant), all in queue "mixed", with
//!     <concurrency> handlers; SIGTSTP quiets it (the limits and quiet tests).
//! engine_worker <db> ticks <clock-file> <missed>
//!     declares the schedule "every-second" (`* * * * * *`, wire name "tick", queue "ticks",
//!     missed-tick policy `latest`, `skip` or `catch-up-N`) on a manual clock that follows the
//!     epoch milliseconds written in <clock-file>, so that a test moves the time of several
//!     processes at once; its ticker looks every 2 ms.
//! ```
//! It prints `ready <worker-id>` once its worker group runs, and serves until killed; the modes
//! but `ticks` stop on SIGTERM or SIGINT with a 60 s grace period (a second signal: at once) and
//! print `stopped handed_back=N stopped=N abandoned=N`. With
//! `BW_WORKER_ASYNC=1` every handler is registered with `handle_async` (the engine tests run each
//! child scenario with plain and with async handlers). The library's warnings go to stderr.

use std::path::PathBuf;
use std::time::Duration;

use backwave::engine::{
    DispatchPolicy, Engine, HandlerError, HandlerResult, JobContext, Registration, Registry, StopSignals, WorkerGroup,
};
use backwave::{Clock, MissedTicks, RetryPolicy, Schedule};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct ChargeCard {
    card_token: String,
    amount: u64,
}

/// Register `handler` plainly, or (with `BW_WORKER_ASYNC=1`) as an async handler whose future
/// yields once to the runtime and then runs the same body.
fn handle<'r, T: serde::de::DeserializeOwned + Send + 'static>(
    registry: &'r mut Registry,
    wire_name: &str,
    handler: impl Fn(T, &JobContext) -> HandlerResult + Send + Sync + 'static,
) -> Registration<'r> {
    if !is_async() {
        return registry.handle::<T>(wire_name, handler);
    }
    let handler = std::sync::Arc::new(handler);
    registry.handle_async::<T, _, _>(wire_name, move |payload, ctx| {
        let handler = std::sync::Arc::clone(&handler);
        async move {
            tokio::task::yield_now().await;
            handler(payload, &ctx)
        }
    })
}

fn is_async() -> bool {
    std::env::var("BW_WORKER_ASYNC").is_ok_and(|v| v == "1")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // What the library warns of (a store that fails, a stop held up) goes to stderr, which the
    // tests leave to the child: a test that times out waiting on the child then says why.
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(tracing::Level::WARN).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: engine_worker <db> sleepy <max-attempts> <lease-ms> | <db> charge <ledger-db> <lease-ms> \
                 | <db> limits <concurrency> <lease-ms> | <db> ticks <clock-file> <missed>";
    let [db, mode, arg, last] = args.as_slice() else { return Err(usage.into()) };
    if mode == "ticks" {
        return ticks(db, &PathBuf::from(arg), last);
    }
    let lease = Duration::from_millis(last.parse()?);
    let mut registry = Registry::new();
    let mut concurrency = 1;
    let (queue, max_attempts) = match mode.as_str() {
        "limits" => {
            handle::<u32>(&mut registry, "limited", |_, _| {
                std::thread::sleep(Duration::from_millis(3));
                Ok(())
            })
            .queue("mixed");
            handle::<u32>(&mut registry, "rated", |_, _| Ok(())).queue("mixed");
            handle::<u32>(&mut registry, "free", |_, _| Ok(())).queue("mixed");
            concurrency = arg.parse()?;
            ("mixed", 3)
        }
        "sleepy" => {
            if is_async() {
                registry
                    .handle_async::<String, _, _>("sleepy", |_, ctx| async move {
                        println!("started {}", ctx.job_id());
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(()),
                            _ = ctx.cancelled() => Err(HandlerError::cancelled()),
                        }
                    })
                    .queue("sleepy");
            } else {
                registry
                    .handle::<String>("sleepy", |_, ctx| {
                        println!("started {}", ctx.job_id());
                        ctx.sleep(Duration::from_secs(60))
                    })
                    .queue("sleepy");
            }
            ("sleepy", arg.parse()?)
        }
        "charge" => {
            let ledger = PathBuf::from(arg);
            handle::<ChargeCard>(&mut registry, "charge-card", move |job, ctx| {
                // The application's own ledger database, not the store: which driver an
                // application uses for its side effects is its own choice.
                let db = backwave::rusqlite::Connection::open(&ledger)?;
                db.busy_timeout(Duration::from_secs(5))?;
                let key = format!("charge:{}", ctx.job_id());
                let already: bool =
                    db.query_row("SELECT EXISTS (SELECT 1 FROM ledger WHERE key = ?1)", [&key], |r| r.get(0))?;
                if already {
                    return Ok(()); // a prior attempt already committed this side effect
                }
                // The gateway: every call is a charge on the card.
                db.execute(
                    "INSERT INTO gateway (card_token, amount, key) VALUES (?1, ?2, ?3)",
                    backwave::rusqlite::params![job.card_token, job.amount, key],
                )?;
                db.execute("INSERT INTO ledger (key) VALUES (?1)", [&key])?;
                println!("charged {key}");
                // Sending the receipt is slow; a stall here outlives the lease.
                std::thread::sleep(Duration::from_secs(3));
                Ok::<(), HandlerError>(())
            })
            .queue("payments");
            ("payments", 3)
        }
        _ => return Err(usage.into()),
    };
    let mut engine = Engine::new(db, registry);
    engine.add_worker_group(WorkerGroup {
        name: format!("child-{mode}"),
        policy: DispatchPolicy::strict([queue]),
        poll_interval: Duration::from_millis(50),
        retry_policy: RetryPolicy::new(max_attempts, |_| Duration::ZERO)?,
        concurrency,
        lease,
        ..WorkerGroup::default()
    });
    // Caught from before the start: a SIGTERM while the engine starts is a stop like any other.
    let stop = StopSignals::install()?;
    let running = engine.start()?;
    if mode == "limits" {
        running.quiet_on_sigtstp()?;
    }
    println!("ready {}", running.worker_ids()[0].1);
    // Serves until SIGTERM or SIGINT, then stops as a deploy does; a second signal: at once.
    let report = running.serve_until(stop, Duration::from_secs(60))?;
    println!("stopped handed_back={} stopped={} abandoned={}", report.handed_back, report.stopped, report.abandoned);
    Ok(())
}

/// The `ticks` mode: a schedule every second on a clock the test moves through a file.
fn ticks(db: &str, clock_file: &PathBuf, missed: &str) -> Result<(), Box<dyn std::error::Error>> {
    let read = |f: &PathBuf| -> Option<i64> { std::fs::read_to_string(f).ok()?.trim().parse().ok() };
    let clock = Clock::manual(read(clock_file).ok_or("the clock file holds no epoch milliseconds")?);
    {
        let (clock, file) = (clock.clone(), clock_file.clone());
        std::thread::spawn(move || loop {
            // The test replaces the file by a rename, so a read never sees half a number.
            if let Some(at) = read(&file) {
                clock.set(at);
            }
            std::thread::sleep(Duration::from_millis(1));
        });
    }
    let missed = match missed {
        "latest" => MissedTicks::Latest,
        "skip" => MissedTicks::Skip,
        other => match other.strip_prefix("catch-up-").map(str::parse) {
            Some(Ok(max)) => MissedTicks::CatchUp { max },
            _ => return Err(format!("unknown missed-tick policy {other:?}").into()),
        },
    };
    let mut engine = Engine::new(db, Registry::new());
    engine.clock(clock);
    engine.schedule_poll(Duration::from_millis(2));
    engine.add_schedule(Schedule::new("every-second", "* * * * * *", "tick", "ticks", "{}").missed(missed));
    // The tick jobs are left Scheduled for the test to count: the group serves another queue.
    engine.add_worker_group(WorkerGroup {
        name: "child-ticks".into(),
        policy: DispatchPolicy::strict(["elsewhere"]),
        poll_interval: Duration::from_millis(200),
        ..WorkerGroup::default()
    });
    let running = engine.start()?;
    println!("ready {}", running.worker_ids()[0].1);
    loop {
        std::thread::park();
    }
}
