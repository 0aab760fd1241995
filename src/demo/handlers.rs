//! The demo's handlers and worker groups: seed 000's `Program.cs` and sample jobs, in Rust, one
//! handler for each path a job can take. This is the file to copy when starting a worker: a
//! payload type per wire name, a plain function per handler, a [`Registry`] that routes wire
//! names to them, and the worker groups that claim their queues.
//!
//! The smallest worker, cut from this file (README.md's developer tour shows one like it):
//!
//! ```no_run
//! use std::time::Duration;
//! use backwave::engine::{DispatchPolicy, Engine, HandlerError, HandlerResult, JobContext, Registry, WorkerGroup};
//! use backwave::RetryPolicy;
//!
//! // Seed 000's [Job("flaky", Queue = "low")]
//! fn flaky(label: String, ctx: &JobContext) -> HandlerResult {
//!     Err(HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt())))
//! }
//!
//! fn main() -> backwave::Result<()> {
//!     let mut registry = Registry::new();
//!     registry.handle::<String>("flaky", flaky).queue("low");
//!
//!     let mut backwave = Engine::new("backwave.db", registry);
//!     backwave.add_worker_group(WorkerGroup {
//!         name: "weighted-fair".into(),
//!         policy: DispatchPolicy::weighted([("high", 6), ("low", 1)]),
//!         poll_interval: Duration::from_millis(250),
//!         retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(500))?,
//!         ..WorkerGroup::default()
//!     });
//!     let running = backwave.start()?;
//!     // ... serve until asked to stop, then:
//!     running.shutdown(Duration::from_secs(10));
//!     Ok(())
//! }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use backwave::engine::{DispatchPolicy, HandlerError, HandlerResult, JobContext, Registry, WorkerGroup};
use backwave::schedule::{MissedTicks, Schedule};
use backwave::{Result, RetryPolicy};

// ---------------------------------------------------------------------------------------------
// Worker groups: seed 000's Program.cs, setting for setting. Everything not set here (4
// handler threads per group, a 60 s lease renewed by heartbeat) is the default.

/// `strict-priority`: always the first of critical, bulk, limited with a due job; 5 attempts,
/// 500 ms between them.
pub fn strict_priority() -> Result<WorkerGroup> {
    Ok(WorkerGroup {
        name: "strict-priority".into(),
        policy: DispatchPolicy::strict(["critical", "bulk", "limited"]),
        poll_interval: Duration::from_millis(250),
        retry_policy: RetryPolicy::new(5, |_| Duration::from_millis(500))?,
        ..WorkerGroup::default()
    })
}

/// `weighted-fair`: high and low served 6 : 1 while both have work; 3 attempts, 500 ms apart.
pub fn weighted_fair() -> Result<WorkerGroup> {
    Ok(WorkerGroup {
        name: "weighted-fair".into(),
        policy: DispatchPolicy::weighted([("high", 6), ("low", 1)]),
        poll_interval: Duration::from_millis(250),
        retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(500))?,
        ..WorkerGroup::default()
    })
}

/// The handlers the two seed groups run, by wire name and queue.
pub fn registry(ledger: Arc<ChargeLedger>) -> Registry {
    let mut registry = Registry::new();
    // [Job("charge-card", Queue = "critical")]
    registry.handle::<ChargeCard>("charge-card", move |job, ctx| charge_card(job, ctx, &ledger)).queue("critical");
    registry.handle::<ResizeImage>("resize-image", resize_image).queue("bulk");
    registry.handle::<ExportReport>("export-report", export_report).queue("limited");
    registry.handle::<SendEmail>("send-email", send_email).queue("high");
    registry.handle::<SyncInventory>("sync-inventory", sync_inventory).queue("high");
    // [Job("flaky", Queue = "low")]: its payload is a bare string, the label.
    registry.handle::<String>("flaky", flaky).queue("low");
    registry
}

/// The demo's recurring schedules, so a newcomer sees them fire in `bw top`: an inventory sync
/// every 15 seconds, and a nightly export at 02:00 Berlin time that catches up the last two
/// nights it missed.
pub fn schedules() -> Vec<Schedule> {
    vec![
        Schedule::new("inventory-sync", "*/15 * * * * *", "sync-inventory", "high", br#"{"warehouse":"all"}"#.to_vec())
            .label("source", "schedule"),
        Schedule::new(
            "nightly-export",
            "0 2 * * *",
            "export-report",
            "limited",
            br#"{"report":"nightly","steps":3}"#.to_vec(),
        )
        .zone("Europe/Berlin")
        .missed(MissedTicks::CatchUp { max: 2 }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Payloads: what each wire name's jobs carry, as JSON. A stored payload that no longer decodes
// into its type is quarantined on claim; the handler never sees it.

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChargeCard {
    pub card_token: String,
    pub amount_cents: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResizeImage {
    pub image: String,
    pub width: u32,
    pub height: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExportReport {
    pub report: String,
    /// Each step takes about 800 ms.
    pub steps: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SendEmail {
    pub to: String,
    pub subject: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncInventory {
    pub warehouse: String,
}

// ---------------------------------------------------------------------------------------------
// Handlers. Each returns Ok(()) for success; any error (`?` converts every std::error::Error)
// or a panic is a failed attempt, retried on the group's backoff until its attempts run out.
// A handler may run more than once for one job (at-least-once): keep its effects idempotent.

/// Seed 000's `flaky`: always fails, so every job of it ends Dead-Lettered after the claiming
/// group's last attempt (3 under weighted-fair), with this message as its terminal cause.
pub fn flaky(label: String, ctx: &JobContext) -> HandlerResult {
    Err(HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt())))
}

/// Seed 000's `ChargeCardHandler`: the payment gateway times out until the third attempt, and
/// an idempotency ledger keyed on the job id makes sure a card is never charged twice, however
/// often the handler runs.
pub fn charge_card(job: ChargeCard, ctx: &JobContext, ledger: &ChargeLedger) -> HandlerResult {
    let idempotency_key = format!("charge:{}", ctx.job_id());
    if ledger.already_charged(&idempotency_key) {
        return Ok(()); // a prior attempt already committed this side effect
    }
    gateway_charge(&job, &idempotency_key, ctx.attempt())?;
    ledger.record_charge(&idempotency_key, job.amount_cents);
    Ok(())
}

/// Resizes an image... and has a bug the demo leaves in on purpose: a zero width divides by
/// zero and panics. The engine catches the panic at the handler boundary; it is a failed
/// attempt like any other (failure detail type `panic`), and the fifth one dead-letters.
pub fn resize_image(job: ResizeImage, ctx: &JobContext) -> HandlerResult {
    let aspect_per_mille = job.height * 1000 / job.width; // panics when width is 0
    ctx.sleep(Duration::from_millis(10 + u64::from(aspect_per_mille % 40)))?;
    Ok(())
}

/// A slow handler: several seconds of work in steps. The engine renews its lease by heartbeat
/// while it runs, so it may take longer than the lease; `ctx.sleep` (or `ctx.check_cancelled()`
/// between steps) returns early when an operator cancels it or the process shuts down.
pub fn export_report(job: ExportReport, ctx: &JobContext) -> HandlerResult {
    for _step in 0..job.steps {
        ctx.sleep(Duration::from_millis(800))?;
    }
    Ok(())
}

/// Quick handlers that succeed.
pub fn send_email(_job: SendEmail, ctx: &JobContext) -> HandlerResult {
    ctx.sleep(Duration::from_millis(15))
}

pub fn sync_inventory(_job: SyncInventory, ctx: &JobContext) -> HandlerResult {
    ctx.sleep(Duration::from_millis(40))
}

// ---------------------------------------------------------------------------------------------
// The lapsed lease. A lease lapses when nobody renews it: the worker process died or stalled.
// (A slow handler in a live process keeps its lease: the engine heartbeats for it.) The demo
// plays that part with a third group in a "node" that gets killed: its handler wedges, the
// node is dropped without grace, nothing is reported, and the short lease lapses within a
// second. Whoever notices (here the seed groups, which reap any lapsed lease) counts it as a
// failed attempt; the third one dead-letters the job with cause `lease expired`.

/// The node's group: its own queue `fragile`, a 1 s lease so the demo shows a lapse quickly.
pub fn crashing_node() -> Result<WorkerGroup> {
    Ok(WorkerGroup {
        name: "crashing-node".into(),
        policy: DispatchPolicy::strict(["fragile"]),
        poll_interval: Duration::from_millis(250),
        retry_policy: RetryPolicy::new(3, |_| Duration::from_millis(500))?,
        lease: Duration::from_secs(1),
        concurrency: 2,
        ..WorkerGroup::default()
    })
}

pub fn crashing_node_registry() -> Registry {
    let mut registry = Registry::new();
    registry.handle::<Wedge>("wedge", wedge).queue("fragile");
    registry
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Wedge {
    pub note: String,
}

/// Waits for a lock that is never released; it returns only when the process stops it.
pub fn wedge(_job: Wedge, ctx: &JobContext) -> HandlerResult {
    ctx.sleep(Duration::from_secs(3600))
}

// ---------------------------------------------------------------------------------------------
// The fake payment gateway and the idempotency ledger behind charge-card.

/// The gateway's failure, a real error type with a source, so that the failure detail shows
/// its type name, message and chain.
#[derive(Debug, thiserror::Error)]
#[error("gateway timeout (attempt {attempt})")]
pub struct GatewayError {
    attempt: u32,
    #[source]
    source: std::io::Error,
}

/// The attempt on which the gateway starts answering (seed 000's `recorder.SucceedOnAttempt`).
pub const SUCCEED_ON_ATTEMPT: u32 = 3;

fn gateway_charge(job: &ChargeCard, _idempotency_key: &str, attempt: u32) -> std::result::Result<(), GatewayError> {
    if attempt < SUCCEED_ON_ATTEMPT {
        let source = std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer from the gateway within 250ms for {} cents", job.amount_cents),
        );
        return Err(GatewayError { attempt, source });
    }
    Ok(())
}

/// Which idempotency keys have been charged. A real application keeps this in its own database,
/// written in the same transaction as the charge's record; the demo keeps it in memory.
#[derive(Debug, Default)]
pub struct ChargeLedger {
    charges: Mutex<HashMap<String, ChargeEntry>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChargeEntry {
    pub amount_cents: u64,
    /// How many times a handler reached the charge for this key: more than 1 would be a
    /// double charge.
    pub charged: u32,
}

impl ChargeLedger {
    pub fn already_charged(&self, key: &str) -> bool {
        self.charges.lock().unwrap_or_else(|p| p.into_inner()).contains_key(key)
    }

    pub fn record_charge(&self, key: &str, amount_cents: u64) {
        let mut charges = self.charges.lock().unwrap_or_else(|p| p.into_inner());
        let entry = charges.entry(key.to_string()).or_default();
        entry.amount_cents = amount_cents;
        entry.charged += 1;
    }

    /// (keys charged, keys charged more than once).
    pub fn totals(&self) -> (usize, usize) {
        let charges = self.charges.lock().unwrap_or_else(|p| p.into_inner());
        (charges.len(), charges.values().filter(|e| e.charged > 1).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backwave::JobId;

    #[test]
    fn charge_card_succeeds_on_the_third_attempt_and_charges_once() {
        let ledger = ChargeLedger::default();
        let id = JobId::new();
        let job = ChargeCard { card_token: "tok_visa".into(), amount_cents: 1250 };
        for attempt in 1..SUCCEED_ON_ATTEMPT {
            let err = charge_card(job.clone(), &JobContext::detached(id, attempt, "charge-card", "critical"), &ledger)
                .unwrap_err();
            assert_eq!(err.message(), format!("gateway timeout (attempt {attempt})"));
            assert_eq!(err.chain().len(), 1, "the io::Error source is kept");
        }
        let third = JobContext::detached(id, SUCCEED_ON_ATTEMPT, "charge-card", "critical");
        charge_card(job.clone(), &third, &ledger).unwrap();
        // At-least-once: the same attempt may run again; the ledger keeps it to one charge.
        charge_card(job, &third, &ledger).unwrap();
        assert_eq!(ledger.totals(), (1, 0));
    }

    #[test]
    fn flaky_names_its_label_and_attempt() {
        let ctx = JobContext::detached(JobId::new(), 2, "flaky", "low");
        assert_eq!(flaky("nightly".into(), &ctx).unwrap_err().message(), "flaky 'nightly' always fails (attempt 2)");
    }

    #[test]
    fn groups_are_the_seeds_program_cs() {
        let strict = strict_priority().unwrap();
        assert_eq!(strict.policy, DispatchPolicy::strict(["critical", "bulk", "limited"]));
        assert_eq!(strict.retry_policy.max_attempts(), 5);
        assert_eq!(strict.retry_policy.delay_table_ms(0), vec![500; 4]);
        let fair = weighted_fair().unwrap();
        assert_eq!(fair.policy, DispatchPolicy::weighted([("high", 6), ("low", 1)]));
        assert_eq!(fair.retry_policy.max_attempts(), 3);
        assert_eq!(fair.retry_policy.delay_table_ms(0), vec![500; 2]);
        assert_eq!(
            (strict.poll_interval, fair.poll_interval),
            (Duration::from_millis(250), Duration::from_millis(250))
        );
    }
}
