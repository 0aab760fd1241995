//! The engine as an application meets it: register handlers, enqueue typed jobs, run worker
//! groups against a real store (an SQLite file, and a PostgreSQL schema: every test runs on both
//! backends), and read the outcome back from the store and its log.
//! Each test follows one item of seed 000 (and issue 3's "Done when").

use crate::backend;

#[path = "engine/admin.rs"]
pub mod admin;
#[path = "engine/async_handlers.rs"]
pub mod async_handlers;
#[path = "engine/claim_ahead.rs"]
pub mod claim_ahead;
#[path = "engine/durations.rs"]
pub mod durations;
#[path = "engine/held_up.rs"]
pub mod held_up;
#[path = "engine/limits.rs"]
pub mod limits;
#[path = "engine/output.rs"]
pub mod output;
#[path = "engine/pause.rs"]
pub mod pause;
#[path = "engine/refused_writes.rs"]
pub mod refused_writes;
#[path = "engine/schedules.rs"]
pub mod schedules;
#[path = "engine/self_cancel.rs"]
pub mod self_cancel;
#[path = "engine/stale_runs.rs"]
pub mod stale_runs;
#[path = "engine/support.rs"]
pub mod support;
// Not `mod tracing`: that would shadow the crate of the same name in every engine test.
#[path = "engine/tracing.rs"]
pub mod telemetry;
#[path = "engine/typed_enqueue.rs"]
pub mod typed_enqueue;
#[path = "engine/wake.rs"]
pub mod wake;
#[path = "engine/workflow.rs"]
pub mod workflow;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use backend::both_backends;
use backwave::engine::{DispatchPolicy, Engine, Enqueue, HandlerError, Registry, WorkerGroup};
use backwave::store::{CancelResult, RequeueResult, SettingKey, LEASE_EXPIRED};
use backwave::{DetailStatus, JobState, QuarantineReason};
use serde::{Deserialize, Serialize};
use support::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChargeCard {
    card_token: String,
    amount: u64,
}

fn strict(q: &str) -> DispatchPolicy {
    DispatchPolicy::strict([q])
}

both_flavors! {
    fn flaky_on_max_attempts_3_runs_three_times_then_dead_letters_with_the_last_message() {
        let t = test_store();
        let runs = Arc::new(AtomicU32::new(0));
        let mut registry = Registry::new();
        let r = Arc::clone(&runs);
        handle::<String>(&mut registry, "flaky", move |label, ctx| {
                r.fetch_add(1, Ordering::SeqCst);
                Err(HandlerError::msg(format!("flaky '{label}' always fails (attempt {})", ctx.attempt())))
            })
            .queue("low");
        let id = registry.enqueue(&t.store, "flaky", "nightly").unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("weighted-fair", DispatchPolicy::weighted([("high", 6), ("low", 1)]), 3));
        let running = engine.start().unwrap();

        let job = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(job.state, JobState::DeadLettered);
        assert_eq!(job.attempt, 3);
        assert_eq!(runs.load(Ordering::SeqCst), 3, "MaxAttempts counts executions, first included");
        assert_eq!(job.terminal_cause.as_deref(), Some("flaky 'nightly' always fails (attempt 3)"));

        let failing: Vec<_> =
            t.store.history(id).unwrap().into_iter().filter(|e| e.from == Some(JobState::Running)).collect();
        assert_eq!(
            failing.iter().map(|e| (e.to, e.attempt)).collect::<Vec<_>>(),
            [(JobState::Scheduled, 1), (JobState::Scheduled, 2), (JobState::DeadLettered, 3)]
        );
        for e in &failing {
            assert!(matches!(&e.detail, DetailStatus::Hidden { kind, .. } if kind == "message"), "{:?}", e.detail);
            assert_eq!(e.reason.as_deref(), Some(format!("flaky 'nightly' always fails (attempt {})", e.attempt).as_str()));
        }
        let revealed = t.store.reveal_failure_detail(ACTOR, id).unwrap();
        assert_eq!(revealed.len(), 3);
        assert_eq!(revealed[2].1.message, "flaky 'nightly' always fails (attempt 3)");
    }
}

both_flavors! {
    /// A handler's own retry policy (`Registration::retry`) replaces the claiming group's for
    /// its jobs only: a capture that may try twice beside a report that may try four times,
    /// served by one group.
    fn a_handler_s_own_retry_policy_replaces_the_group_s_for_its_jobs_only() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "capture", |_, _| Err(HandlerError::msg("declined")))
            .queue("q")
            .retry(backwave::RetryPolicy::new(2, Duration::from_millis(30)).unwrap());
        handle::<u32>(&mut registry, "report", |_, _| Err(HandlerError::msg("no data"))).queue("q");
        let capture = registry.enqueue(&t.store, "capture", &1).unwrap();
        let report = registry.enqueue(&t.store, "report", &1).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 4));
        let running = engine.start().unwrap();
        let (c, r) = (wait_terminal(&t.store, capture), wait_terminal(&t.store, report));
        running.shutdown(Duration::from_secs(1));
        assert_eq!((c.state, c.attempt, c.max_attempts, c.delay_table), (JobState::DeadLettered, 2, Some(2), Some(vec![30])));
        assert_eq!((r.state, r.attempt, r.max_attempts, r.delay_table), (JobState::DeadLettered, 4, Some(4), Some(vec![10; 3])));
    }
}

both_flavors! {
    /// A handler that knows when to come back (`HandlerError::retry_in`, an upstream's
    /// Retry-After) is retried then, not at its group's 10 ms.
    fn a_handler_s_own_retry_wait_replaces_the_delay_table_s_for_that_attempt() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u32>(&mut registry, "call-api", |_, ctx| match ctx.attempt() {
            1 => Err(HandlerError::msg("429 Too Many Requests").retry_in(Duration::from_millis(1500))),
            _ => Ok(()),
        })
        .queue("q");
        let id = registry.enqueue(&t.store, "call-api", &1).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 3));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        let history = t.store.history(id).unwrap();
        let failed = history.iter().find(|e| e.from == Some(JobState::Running) && e.to == JobState::Scheduled).unwrap();
        let again = history.iter().filter(|e| e.to == JobState::Running).nth(1).unwrap();
        assert!(again.at - failed.at >= 1500, "retried {} ms after the failure: {history:?}", again.at - failed.at);
    }
}

/// Seed 000's idempotency ledger and card gateway, in memory.
#[derive(Default)]
struct Payments {
    ledger: Mutex<HashSet<String>>,
    gateway: Mutex<Vec<(String, u64)>>,
}

both_flavors! {
    fn charge_card_succeeding_from_attempt_3_ends_succeeded_after_3_attempts_with_one_charge() {
        let t = test_store();
        let payments = Arc::new(Payments::default());
        let succeed_on_attempt = 3;
        let mut registry = Registry::new();
        let p = Arc::clone(&payments);
        handle::<ChargeCard>(&mut registry, "charge-card", move |job, ctx| {
                if ctx.attempt() < succeed_on_attempt {
                    return Err(HandlerError::msg(format!("gateway timeout (attempt {})", ctx.attempt())));
                }
                let key = format!("charge:{}", ctx.job_id());
                if p.ledger.lock().unwrap().contains(&key) {
                    return Ok(());
                }
                p.gateway.lock().unwrap().push((job.card_token, job.amount));
                p.ledger.lock().unwrap().insert(key);
                Ok(())
            })
            .queue("payments");
        let id =
            registry.enqueue(&t.store, "charge-card", &ChargeCard { card_token: "tok_visa".into(), amount: 4200 }).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("payments", strict("payments"), 5));
        let running = engine.start().unwrap();
        let job = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));

        assert_eq!((job.state, job.attempt), (JobState::Succeeded, 3));
        assert_eq!(*payments.gateway.lock().unwrap(), [("tok_visa".to_string(), 4200)]);
        let causes: Vec<_> = t.store.history(id).unwrap().into_iter().filter_map(|e| e.reason).collect();
        assert_eq!(causes, ["gateway timeout (attempt 1)", "gateway timeout (attempt 2)"]);
    }
}

both_flavors! {
    /// A worker stalls (SIGSTOP) after charging but before reporting: its lease lapses, another
    /// worker runs the job again, and the ledger keeps the card charged once. When the stalled
    /// worker wakes, the fence discards its late success.
    fn charge_card_rerun_after_a_stalled_worker_charges_once_and_the_late_success_is_fenced_out() {
        let t = test_store();
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.db");
        // The application's own ledger database, beside the store (the example's handler writes it).
        let db = backwave::store::RawConnection::open(&ledger).unwrap();
        db.batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE gateway (card_token TEXT, amount INTEGER, key TEXT);
             CREATE TABLE ledger (key TEXT PRIMARY KEY);",
        )
        .unwrap();
        let id = Enqueue::new("charge-card", "payments", &ChargeCard { card_token: "tok_amex".into(), amount: 990 })
            .unwrap()
            .enqueue(&t.store)
            .unwrap();
        let (dbp, lp) = (t.db.arg(), ledger.to_str().unwrap());
        let mut first = ChildWorker::spawn(&[dbp, "charge", lp, "500"]);
        assert_eq!(first.next_line(), format!("charged charge:{id}"));
        first.signal(libc::SIGSTOP);

        let mut second = ChildWorker::spawn(&[dbp, "charge", lp, "500"]);
        let j = wait_terminal(&t.store, id);
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        first.signal(libc::SIGCONT);
        // The first worker's receipt takes 3 s in all; wait for its late report to be fenced out.
        std::thread::sleep(Duration::from_millis(3200));

        let count = |sql: &str| db.query(sql, &[]).unwrap()[0][0].as_i64();
        assert_eq!(count("SELECT count(*) FROM gateway"), 1, "the card was charged twice");
        assert_eq!(count("SELECT count(*) FROM ledger"), 1);
        let log = t.store.history(id).unwrap();
        let lapsed = log.iter().find(|e| e.attempt == 1 && e.from == Some(JobState::Running)).expect("attempt 1 ended");
        assert_eq!(
            (lapsed.reason.as_deref(), lapsed.worker_id.as_deref()),
            (Some(LEASE_EXPIRED), Some(first.worker_id.as_str()))
        );
        let successes: Vec<_> = log.iter().filter(|e| e.to == JobState::Succeeded).collect();
        assert_eq!(successes.len(), 1);
        assert_eq!(successes[0].worker_id.as_deref(), Some(second.worker_id.as_str()));
        assert_eq!(job(&t.store, id).state, JobState::Succeeded);
        first.kill();
        second.kill();
    }
}

fn noop_registry(queues: &[&str]) -> Registry {
    let mut registry = Registry::new();
    for q in queues {
        handle::<u32>(&mut registry, &format!("noop-{q}"), |_, _| Ok(())).queue(q);
    }
    registry
}

fn enqueue_n(t: &TestStore, registry: &Registry, queue: &str, n: u32) {
    enqueue_n_at(t, registry, queue, n, 0);
}

/// `n` jobs of `queue` at `priority`.
fn enqueue_n_at(t: &TestStore, registry: &Registry, queue: &str, n: u32, priority: u8) {
    let now = t.store.now();
    let jobs: Vec<_> = (0..n)
        .map(|i| registry.job(&format!("noop-{queue}"), &i).unwrap().priority(priority).into_new_job(now))
        .collect();
    t.store.enqueue_many(&jobs).unwrap();
}

fn run_until_all_succeeded(t: &TestStore, engine: Engine, total: u64) {
    let running = engine.start().unwrap();
    wait_for("every job to succeed", Duration::from_secs(30), || {
        (t.store.counts().unwrap().total(JobState::Succeeded) == total).then_some(())
    });
    running.shutdown(Duration::from_secs(1));
}

both_flavors! {
    fn strict_dispatch_drains_the_first_non_empty_queue_first() {
        let t = test_store();
        let registry = noop_registry(&["critical", "bulk", "limited"]);
        // Enqueued last-first, so that creation order cannot explain the result; and the first
        // queue's jobs at the last priority, the last queue's at the first: priority orders
        // jobs within a queue, never the queues.
        for (q, priority) in [("limited", 0), ("bulk", 5), ("critical", 9)] {
            enqueue_n_at(&t, &registry, q, 40, priority);
        }
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup {
            concurrency: 3,
            ..group("strict-priority", DispatchPolicy::strict(["critical", "bulk", "limited"]), 5)
        });
        run_until_all_succeeded(&t, engine, 120);
        let order = claim_order(&t.store);
        let expected: Vec<String> =
            ["critical", "bulk", "limited"].iter().flat_map(|q| std::iter::repeat_n(q.to_string(), 40)).collect();
        assert_eq!(order, expected);
    }
}

both_flavors! {
    fn weighted_six_to_one_holds_over_700_claims_while_both_queues_are_full() {
        let t = test_store();
        let registry = noop_registry(&["high", "low"]);
        // The heavier queue's jobs at the last priority: the weights hold across queues whatever
        // the jobs' priorities.
        enqueue_n_at(&t, &registry, "high", 700, 9);
        enqueue_n_at(&t, &registry, "low", 200, 0);
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup {
            concurrency: 4,
            ..group("weighted-fair", DispatchPolicy::weighted([("high", 6), ("low", 1)]), 3)
        });
        run_until_all_succeeded(&t, engine, 900);
        let order = claim_order(&t.store);
        let first = &order[..700];
        let high = first.iter().filter(|q| *q == "high").count() as f64;
        let low = first.iter().filter(|q| *q == "low").count() as f64;
        let ratio = high / low;
        assert!((5.4..=6.6).contains(&ratio), "high:low over the first 700 claims is {high}:{low} = {ratio:.2}");
    }
}

both_flavors! {
    fn weighted_an_empty_queue_gives_its_share_to_the_other() {
        let t = test_store();
        let registry = noop_registry(&["high", "low"]);
        enqueue_n(&t, &registry, "high", 20);
        enqueue_n(&t, &registry, "low", 300);
        let mut engine = Engine::new(&t.db, registry);
        // A poll interval far longer than the test: a group that idled on the empty queue's share
        // instead of claiming from the other would not finish in time.
        engine.add_worker_group(WorkerGroup {
            concurrency: 4,
            poll_interval: Duration::from_secs(60),
            ..group("weighted-fair", DispatchPolicy::weighted([("high", 6), ("low", 1)]), 3)
        });
        let started = Instant::now();
        run_until_all_succeeded(&t, engine, 320);
        assert!(started.elapsed() < Duration::from_secs(30));
        let order = claim_order(&t.store);
        let last_high = order.iter().rposition(|q| q == "high").unwrap();
        // While both had work, high got about 6 of every 7 claims; then low got every claim.
        assert!(last_high < 30, "high's 20 jobs were spread over the first {} claims", last_high + 1);
        assert!(order[last_high + 1..].iter().all(|q| q == "low"));
    }
}

both_flavors! {
    fn a_sigkilled_worker_s_job_runs_again_elsewhere_as_the_next_attempt() {
        let t = test_store();
        let id = Enqueue::new("sleepy", "sleepy", "zzz").unwrap().enqueue(&t.store).unwrap();
        let mut child = ChildWorker::spawn(&[t.db.arg(), "sleepy", "3", "600"]);
        wait_for("the child to be running the job", Duration::from_secs(10), || {
            let j = job(&t.store, id);
            (j.state == JobState::Running && j.lease_owner.as_deref() == Some(child.worker_id.as_str())).then_some(())
        });
        child.kill();

        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        let r = Arc::clone(&ran);
        handle::<String>(&mut registry, "sleepy", move |_, ctx| {
                r.lock().unwrap().push(ctx.attempt());
                Ok(())
            })
            .queue("sleepy");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("survivor", strict("sleepy"), 3));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));

        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 2));
        assert_eq!(*ran.lock().unwrap(), [2]);
        let log = t.store.history(id).unwrap();
        let lapsed = log.iter().find(|e| e.from == Some(JobState::Running) && e.attempt == 1).unwrap();
        assert_eq!(lapsed.to, JobState::Scheduled);
        assert_eq!(lapsed.reason.as_deref(), Some(LEASE_EXPIRED));
        assert_eq!(lapsed.worker_id.as_deref(), Some(child.worker_id.as_str()));
    }
}

both_flavors! {
    fn a_sigkilled_worker_on_its_last_attempt_dead_letters_the_job_as_lease_expired() {
        let t = test_store();
        let id = Enqueue::new("sleepy", "sleepy", "zzz").unwrap().enqueue(&t.store).unwrap();
        let mut child = ChildWorker::spawn(&[t.db.arg(), "sleepy", "1", "600"]);
        wait_for("the child to be running the job", Duration::from_secs(10), || {
            (job(&t.store, id).state == JobState::Running).then_some(())
        });
        child.kill();
        // The survivor does not even handle "sleepy": reaping is every poll of every group.
        let mut engine = Engine::new(&t.db, noop_registry(&["other"]));
        engine.add_worker_group(group("survivor", strict("other"), 3));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::DeadLettered, 1));
        assert_eq!(j.terminal_cause.as_deref(), Some(LEASE_EXPIRED));
    }
}

both_flavors! {
    fn a_panicking_handler_is_a_failed_attempt_and_the_worker_keeps_serving() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "explode", |what, _| {
                if what == "boom" {
                    panic!("kaboom: the {what} payload");
                }
                Ok(())
            })
            .queue("q");
        let bad = registry.enqueue(&t.store, "explode", "boom").unwrap();
        let good: Vec<_> = (0..5).map(|i| registry.enqueue(&t.store, "explode", &format!("ok-{i}")).unwrap()).collect();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 2));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, bad);
        for id in &good {
            assert_eq!(wait_terminal(&t.store, *id).state, JobState::Succeeded);
        }
        running.shutdown(Duration::from_secs(1));

        assert_eq!((j.state, j.attempt), (JobState::DeadLettered, 2));
        assert_eq!(j.terminal_cause.as_deref(), Some("kaboom: the boom payload"));
        let failing: Vec<_> =
            t.store.history(bad).unwrap().into_iter().filter(|e| e.from == Some(JobState::Running)).collect();
        assert_eq!(failing.len(), 2);
        assert!(failing.iter().all(|e| matches!(&e.detail, DetailStatus::Hidden { kind, .. } if kind == "panic")));
        let detail = &t.store.reveal_failure_detail(ACTOR, bad).unwrap()[0].1;
        let trace = detail.backtrace.as_deref().unwrap_or_default();
        assert!(trace.contains("panicked at tests/engine.rs"), "{trace}");
    }
}

both_flavors! {
    fn an_unknown_wire_name_quarantines_at_attempt_1_until_a_handler_is_registered_and_requeued() {
        let t = test_store();
        let id = Enqueue::new("send-invoice", "q", &serde_json::json!({"invoice": 7})).unwrap().enqueue(&t.store).unwrap();
        let other_runs = Arc::new(AtomicU32::new(0));
        let o = Arc::clone(&other_runs);
        let mut registry = Registry::new();
        handle::<serde_json::Value>(&mut registry, "something-else", move |_, _| {
                o.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 3));
        let running = engine.start().unwrap();

        let j = wait_terminal(&t.store, id);
        assert_eq!(
            (j.state, j.attempt, j.quarantine_reason),
            (JobState::Quarantined, 1, Some(QuarantineReason::NoHandler))
        );
        assert!(j.terminal_cause.as_deref().unwrap().contains("'send-invoice'"), "{:?}", j.terminal_cause);
        // Requeued before the handler is deployed: quarantined again, at attempt 1 again.
        assert!(matches!(t.store.requeue(ACTOR, &[id]).unwrap()[..], [RequeueResult::Requeued { .. }]));
        let j = wait_terminal(&t.store, id);
        assert_eq!((j.state, j.attempt), (JobState::Quarantined, 1));
        running.shutdown(Duration::from_secs(1));
        assert_eq!(other_runs.load(Ordering::SeqCst), 0);

        let runs = Arc::new(Mutex::new(Vec::new()));
        let r = Arc::clone(&runs);
        let mut registry = Registry::new();
        handle::<serde_json::Value>(&mut registry, "send-invoice", move |v, ctx| {
                r.lock().unwrap().push((v, ctx.attempt()));
                Ok(())
            })
            .queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 3));
        let running = engine.start().unwrap();
        t.store.requeue(ACTOR, &[id]).unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt, j.max_attempts), (JobState::Succeeded, 1, Some(3)));
        assert_eq!(*runs.lock().unwrap(), [(serde_json::json!({"invoice": 7}), 1)]);
    }
}

both_flavors! {
    fn an_undecodable_payload_quarantines_without_running_the_handler_until_the_type_accepts_it() {
        let t = test_store();
        // A payload written before `amount` existed.
        let id = Enqueue::new("charge-card", "payments", &serde_json::json!({"card_token": "tok"}))
            .unwrap()
            .enqueue(&t.store)
            .unwrap();
        let runs = Arc::new(AtomicU32::new(0));
        let r = Arc::clone(&runs);
        let mut registry = Registry::new();
        handle::<ChargeCard>(&mut registry, "charge-card", move |_, _| {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .queue("payments");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("payments"), 3));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(
            (j.state, j.attempt, j.quarantine_reason),
            (JobState::Quarantined, 1, Some(QuarantineReason::UndecodablePayload))
        );
        let cause = j.terminal_cause.unwrap();
        assert!(cause.contains("'charge-card'") && cause.contains("missing field `amount`"), "{cause}");
        assert_eq!(runs.load(Ordering::SeqCst), 0);

        // The fix is deployed: the type now gives `amount` a default. Requeue runs it afresh.
        #[derive(Deserialize)]
        struct ChargeCardV2 {
            #[allow(dead_code)]
            card_token: String,
            #[serde(default)]
            amount: u64,
        }
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let mut registry = Registry::new();
        handle::<ChargeCardV2>(&mut registry, "charge-card", move |job, ctx| {
                Ok(tx.lock().unwrap().send((job.amount, ctx.attempt()))?)
            })
            .queue("payments");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("payments"), 3));
        let running = engine.start().unwrap();
        t.store.requeue(ACTOR, &[id]).unwrap();
        assert_eq!(wait_terminal(&t.store, id).state, JobState::Succeeded);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(rx.try_recv().unwrap(), (0, 1));
    }
}

both_flavors! {
    fn operator_cancel_ends_a_scheduled_and_a_running_job_cancelled() {
        let t = test_store();
        let (started_tx, started_rx) = mpsc::channel();
        let started_tx = Mutex::new(started_tx);
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "long", move |_, ctx| {
                started_tx.lock().unwrap().send(ctx.job_id()).unwrap();
                ctx.sleep(Duration::from_secs(30))?;
                Err(HandlerError::msg("ran for 30 s without being cancelled"))
            })
            .queue("q");
        let later = registry.job("long", "later").unwrap().due_in(Duration::from_secs(3600)).enqueue(&t.store).unwrap();
        let now = registry.enqueue(&t.store, "long", "now").unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { lease: Duration::from_millis(300), ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();

        assert_eq!(started_rx.recv_timeout(Duration::from_secs(10)).unwrap(), now);
        assert_eq!(t.store.cancel(ACTOR, &[later, now]).unwrap(), [CancelResult::Cancelled, CancelResult::CancelRequested]);
        let j = wait_terminal(&t.store, now);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Cancelled, 1));
        assert_eq!(j.terminal_cause.as_deref(), Some("cancelled by tester"));
        let l = job(&t.store, later);
        assert_eq!((l.state, l.attempt), (JobState::Cancelled, 0));
        assert!(started_rx.try_recv().is_err(), "the cancelled scheduled job ran");
    }
}

both_flavors! {
    fn a_handler_s_own_timeout_or_unrequested_cancellation_is_a_plain_failure_that_retries() {
        let t = test_store();
        let (_never_tx, never_rx) = mpsc::channel::<()>();
        let never_rx = Mutex::new(never_rx);
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "call-gateway", move |_, ctx| {
                if ctx.attempt() == 1 {
                    // The gateway never answers: the handler's own deadline gives up.
                    never_rx.lock().unwrap().recv_timeout(Duration::from_millis(30))?;
                }
                Ok(())
            })
            .queue("q");
        handle::<String>(&mut registry,
                "self-cancel",
                |_, ctx| if ctx.attempt() == 1 { Err(HandlerError::cancelled()) } else { Ok(()) },
            )
            .queue("q");
        let a = registry.enqueue(&t.store, "call-gateway", "x").unwrap();
        let b = registry.enqueue(&t.store, "self-cancel", "x").unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 3));
        let running = engine.start().unwrap();
        let (ja, jb) = (wait_terminal(&t.store, a), wait_terminal(&t.store, b));
        running.shutdown(Duration::from_secs(1));
        assert_eq!((ja.state, ja.attempt), (JobState::Succeeded, 2));
        assert_eq!((jb.state, jb.attempt), (JobState::Succeeded, 2));
        let first_a = &t.store.history(a).unwrap()[2];
        assert_eq!((first_a.to, first_a.attempt), (JobState::Scheduled, 1));
        assert!(matches!(&first_a.detail, DetailStatus::Hidden { kind, .. } if kind.contains("RecvTimeoutError")));
        assert!(t.store.history(b).unwrap().iter().all(|e| e.to != JobState::Cancelled));
    }
}

both_flavors! {
    fn failure_detail_is_not_captured_when_the_host_or_the_store_switches_it_off() {
        for host_off in [true, false] {
            let t = test_store();
            if !host_off {
                t.store.set_setting(ACTOR, SettingKey::FailureDetail, "off").unwrap();
            }
            let mut registry = Registry::new();
            handle::<String>(&mut registry, "fail", |s, _| Err(HandlerError::msg(format!("card {s} declined")))).queue("q");
            let id = registry.enqueue(&t.store, "fail", "4242").unwrap();
            let mut engine = Engine::new(&t.db, registry);
            engine.capture_failure_detail(!host_off).add_worker_group(group("g", strict("q"), 1));
            let running = engine.start().unwrap();
            let j = wait_terminal(&t.store, id);
            running.shutdown(Duration::from_secs(1));
            assert_eq!(j.terminal_cause.as_deref(), Some("card 4242 declined"));
            let last = t.store.history(id).unwrap().pop().unwrap();
            assert_eq!((last.to, last.detail), (JobState::DeadLettered, DetailStatus::NotCaptured), "host off: {host_off}");
        }
    }
}

both_flavors! {
    fn shutdown_lets_handlers_finish_within_the_grace_period_and_leaves_the_rest_to_lapse() {
        let t = test_store();
        let started = Arc::new(AtomicU32::new(0));
        let mut registry = Registry::new();
        handle::<u64>(&mut registry, "work", {
                let started = Arc::clone(&started);
                move |ms, ctx| {
                    started.fetch_add(1, Ordering::SeqCst);
                    // Ignores cancellation on purpose, like a handler stuck in a blocking call.
                    std::thread::sleep(Duration::from_millis(ms));
                    let _ = ctx;
                    Ok(())
                }
            })
            .queue("q");
        let quick = registry.enqueue(&t.store, "work", &200u64).unwrap();
        let stuck = registry.enqueue(&t.store, "work", &4000u64).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { concurrency: 2, ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        let worker = running.worker_ids()[0].1.clone();
        // Both handlers started, not just both jobs claimed: a claimed job no handler has started
        // yet would be handed back at the shutdown, not left running.
        wait_for("both handlers to start", Duration::from_secs(10), || (started.load(Ordering::SeqCst) == 2).then_some(()));
        let report = running.shutdown(Duration::from_millis(1500));

        assert_eq!(report.abandoned, 1);
        assert_eq!(job(&t.store, quick).state, JobState::Succeeded);
        let s = job(&t.store, stuck);
        assert_eq!((s.state, s.lease_owner.as_deref()), (JobState::Running, Some(worker.as_str())), "nothing was reported");
        assert!(t.store.workers().unwrap().iter().all(|w| w.id != worker), "the worker left the registry");

        // Another worker inherits the job once the lease lapses.
        let mut registry = Registry::new();
        handle::<u64>(&mut registry, "work", |_, _| Ok(())).queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("heir", strict("q"), 3));
        let running = engine.start().unwrap();
        let s = wait_terminal(&t.store, stuck);
        running.shutdown(Duration::from_secs(1));
        assert_eq!((s.state, s.attempt), (JobState::Succeeded, 2));
    }
}

both_backends! {
    fn each_group_registers_as_a_worker_with_host_pid_wire_names_and_queues() {
        let t = test_store();
        let mut engine = Engine::new(&t.db, noop_registry(&["high", "low"]));
        engine.add_worker_group(group("weighted-fair", DispatchPolicy::weighted([("high", 6), ("low", 1)]), 3));
        engine.add_worker_group(group("strict-priority", DispatchPolicy::strict(["critical", "bulk"]), 5));
        let running = engine.start().unwrap();
        let mut workers = t.store.workers().unwrap();
        workers.sort_by(|a, b| a.group.cmp(&b.group));
        assert_eq!(workers.len(), 2);
        assert_eq!(workers[0].group, "strict-priority");
        assert_eq!(workers[0].queues, ["critical", "bulk"]);
        assert_eq!(workers[1].queues, ["high", "low"]);
        for w in &workers {
            assert_eq!(w.pid, std::process::id());
            assert!(!w.host.is_empty());
            assert_eq!(w.wire_names, ["noop-high", "noop-low"]);
            assert!(w.is_live(t.store.now()));
            // The id reads as host/pid/group in every log line, long after the worker is gone.
            let prefix = format!("{}/{}/{}#", w.host, w.pid, w.group);
            assert!(w.id.starts_with(&prefix) && w.id.len() == prefix.len() + 4, "{}", w.id);
        }
        assert_eq!(t.store.live_handlers().unwrap().get("noop-high"), Some(&2));
        running.shutdown(Duration::from_secs(1));
        assert!(t.store.workers().unwrap().is_empty());
    }
}

both_backends! {
    fn the_retention_sweep_deletes_terminal_jobs_older_than_the_store_setting() {
        let t = test_store();
        t.store.set_setting(ACTOR, SettingKey::Retention, "1s").unwrap();
        let registry = noop_registry(&["q"]);
        let id = registry.enqueue(&t.store, "noop-q", &1u32).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.sweep_interval(Duration::from_millis(100)).add_worker_group(group("g", strict("q"), 3));
        let running = engine.start().unwrap();
        assert_eq!(wait_terminal(&t.store, id).state, JobState::Succeeded);
        wait_for("the sweep to delete the job", Duration::from_secs(10), || {
            t.store.job(id).unwrap().is_none().then_some(())
        });
        running.shutdown(Duration::from_secs(1));
        assert!(t.store.history(id).unwrap().is_empty(), "the log goes with the job");
    }
}

both_backends! {
    fn typed_enqueue_uses_the_registration_and_refuses_payloads_the_handler_cannot_decode() {
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<ChargeCard>("charge-card", |_, _| Ok(())).queue("payments").label("team", "billing");
        let id = registry
            .job("charge-card", &ChargeCard { card_token: "tok".into(), amount: 1 })
            .unwrap()
            .label("tenant", "acme")
            .due_in(Duration::from_secs(60))
            .enqueue(&t.store)
            .unwrap();
        let j = job(&t.store, id);
        assert_eq!(j.queue, "payments");
        assert_eq!(j.labels.get("team").map(String::as_str), Some("billing"));
        assert_eq!(j.labels.get("tenant").map(String::as_str), Some("acme"));
        assert!(j.due_at >= t.store.now() + 59_000);

        let err = registry.job("charge-card", "not a card").unwrap_err().to_string();
        assert!(err.contains("'charge-card'") && err.contains("does not decode"), "{err}");
        let err = registry.job("refund", &1).unwrap_err().to_string();
        assert!(err.contains("'refund'"), "{err}");
    }
}

both_backends! {
    fn due_in_an_enormous_delay_is_far_future_not_a_wrapped_past() {
        let t = test_store();
        let mut registry = Registry::new();
        registry.handle::<u32>("later", |_, _| Ok(())).queue("q");
        let id = registry.job("later", &1).unwrap().due_in(Duration::MAX).enqueue(&t.store).unwrap();
        assert!(job(&t.store, id).due_at > t.store.now() + 1_000 * 86_400 * 365 * 1000, "due in the far future");
    }
}

both_backends! {
    fn invalid_worker_groups_are_refused_before_anything_is_claimed() {
        let t = test_store();
        let mut engine = Engine::new(&t.db, Registry::new());
        engine.add_worker_group(WorkerGroup { concurrency: 0, ..group("busy", strict("q"), 3) });
        let err = engine.start().unwrap_err().to_string();
        assert!(err.contains("'busy'") && err.contains("concurrency 0"), "{err}");
        let mut engine = Engine::new(&t.db, Registry::new());
        engine.add_worker_group(group("twin", strict("a"), 3)).add_worker_group(group("twin", strict("b"), 3));
        assert!(engine.start().unwrap_err().to_string().contains("'twin'"));
    }
}

#[derive(Debug)]
struct GatewayError {
    source: std::io::Error,
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the card gateway failed")
    }
}

impl std::error::Error for GatewayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

both_flavors! {
    fn failure_detail_holds_the_error_type_message_and_source_chain() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "charge", |_, _| {
                let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
                Err(GatewayError { source: refused })?
            })
            .queue("q");
        let id = registry.enqueue(&t.store, "charge", "x").unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", strict("q"), 1));
        let running = engine.start().unwrap();
        let j = wait_terminal(&t.store, id);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(j.terminal_cause.as_deref(), Some("the card gateway failed"));
        let detail = &t.store.reveal_failure_detail(ACTOR, id).unwrap()[0].1;
        assert_eq!(detail.kind, "runner::engine::GatewayError");
        assert_eq!(detail.message, "the card gateway failed");
        assert_eq!(detail.chain, ["connection refused"]);
    }
}

both_flavors! {
    fn heartbeats_keep_the_lease_of_a_handler_that_runs_longer_than_it() {
        let t = test_store();
        let mut registry = Registry::new();
        handle::<u64>(&mut registry, "slow", |ms, _| {
                std::thread::sleep(Duration::from_millis(ms));
                Ok(())
            })
            .queue("q");
        let id = registry.enqueue(&t.store, "slow", &1500u64).unwrap();
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(WorkerGroup { lease: Duration::from_millis(300), ..group("g", strict("q"), 3) });
        let running = engine.start().unwrap();
        // A second worker reaping every 20 ms finds nothing lapsed while the first one heartbeats.
        let mut watcher = Engine::new(&t.db, noop_registry(&["other"]));
        watcher.add_worker_group(group("watcher", strict("other"), 3));
        let watching = watcher.start().unwrap();
        let j = wait_terminal(&t.store, id);
        let reaped = watching.stats()[0].reaped;
        watching.shutdown(Duration::from_secs(1));
        running.shutdown(Duration::from_secs(1));
        assert_eq!((j.state, j.attempt), (JobState::Succeeded, 1));
        assert_eq!(reaped, 0);
        assert!(t.store.history(id).unwrap().iter().all(|e| e.reason.as_deref() != Some(LEASE_EXPIRED)));
    }
}

/// Found by an application developer's walkthrough: a schedule whose payload its handler's type
/// does not decode (`"nope"` for a `u64` handler) started, and every tick was quarantined. It is
/// refused at start, before anything is stored, as `registry.job` refuses such an enqueue; a
/// schedule of a wire name another process handles is not this registry's to judge.
#[test]
fn a_schedule_its_handler_cannot_decode_is_refused_at_start() {
    use backwave::schedule::Schedule;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bw.db");
    let engine = |payload: &str, wire_name: &str| {
        let mut registry = Registry::new();
        registry.handle::<u64>("report", |_, _| Ok(()));
        let mut engine = Engine::new(&db, registry);
        engine.add_worker_group(WorkerGroup { name: "g".into(), ..WorkerGroup::default() });
        engine.add_schedule(Schedule::new("nightly", "0 0 3 * * *", wire_name, "default", payload.as_bytes().to_vec()));
        engine
    };
    let Err(err) = engine("\"nope\"", "report").start() else { panic!("a schedule its handler cannot decode started") };
    let err = err.to_string();
    assert!(err.contains("schedule 'nightly': its payload for 'report' does not decode as u64"), "{err}");
    assert!(!db.exists(), "nothing stored");
    engine("42", "report").start().unwrap().shutdown(Duration::from_secs(1));
    engine("{}", "handled-elsewhere").start().unwrap().shutdown(Duration::from_secs(1));
}
