//! Limits, quiet and deploys as worker processes meet them (issue 21): four `engine_worker`
//! processes under a concurrency limit sampled from the store while one is SIGKILLed, a rate
//! limit checked window by window from the log, a quieted process (from the store, and by
//! SIGTSTP) claiming nothing while the others drain, and a deploy (quiet, then a 2 s shutdown
//! with long handlers running) losing no job and charging no attempt to a job that never ran.
//! The engine has no limit code: the store's claim enforces it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
use backwave::store::{LimitSpec, PauseKind, Rate, WorkerSelector, LEASE_EXPIRED};
use backwave::{JobId, JobState, NewJob, Store};

use super::support::*;
use crate::backend::{both_backends, plain_query};

fn enqueue(store: &Store, wire_name: &str, n: usize) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n).map(|i| NewJob::new(wire_name, "mixed", i.to_string().into_bytes())).collect();
    jobs.chunks(500).flat_map(|c| store.enqueue_many(c).unwrap()).collect()
}

/// Jobs of `wire_name` in `state`: one query, not one per job (the waits poll it).
fn count_state(store: &Store, wire_name: &str, state: JobState) -> usize {
    let sql = format!("SELECT count(*) FROM jobs WHERE wire_name = '{wire_name}' AND state = '{}'", state.as_str());
    store.raw_query(&sql, &[]).unwrap()[0][0].as_i64() as usize
}

/// The last time a job of `wire_name` moved to `state`, by the store's clock.
fn last_at(db: &crate::backend::TestDb, wire_name: &str, state: JobState) -> i64 {
    let sql = format!(
        "SELECT max(t.at) FROM transitions t JOIN jobs j ON j.id = t.job_id
         WHERE j.wire_name = '{wire_name}' AND t.to_state = '{}'",
        state.as_str()
    );
    plain_query(db, &sql)[0][0].as_i64()
}

/// Running jobs of `wire_name` under a live lease, by the database's own clock read after the
/// statement's snapshot (so that a claim visible to it is never older than the time it counts
/// leases against): what a concurrency limit counts.
fn running_now(store: &Store, postgres: bool, wire_name: &str) -> i64 {
    let now = if postgres {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    } else {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    };
    let sql = format!(
        "SELECT count(*) FROM jobs WHERE state = 'running' AND wire_name = '{wire_name}' AND lease_expires_at >= {now}"
    );
    store.raw_query(&sql, &[]).unwrap()[0][0].as_i64()
}

fn workers(t: &TestStore, n: usize, concurrency: u32) -> Vec<ChildWorker> {
    (0..n).map(|_| ChildWorker::spawn(&[t.db.arg(), "limits", &concurrency.to_string(), "800"])).collect()
}

both_backends! {
    fn a_concurrency_limit_of_3_holds_across_four_processes_while_one_is_killed() {
        let t = test_store();
        let limited = enqueue(&t.store, "limited", 2_000);
        let free = enqueue(&t.store, "free", 2_000);
        let spec = LimitSpec { concurrency: Some(3), rate: None };
        t.store.set_limit(ACTOR, PauseKind::WireName, "limited", &spec, None, true).unwrap();

        // Sample from the store every few ms on a thread of its own, for the whole run.
        let stop = Arc::new(AtomicBool::new(false));
        let (most, samples) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let sampler = {
            let (stop, most, samples) = (Arc::clone(&stop), Arc::clone(&most), Arc::clone(&samples));
            let (target, postgres) = (t.db.target(), t.db.schema().is_some());
            std::thread::spawn(move || {
                let store = Store::open(&target).unwrap();
                while !stop.load(Ordering::SeqCst) {
                    most.fetch_max(running_now(&store, postgres, "limited") as u64, Ordering::SeqCst);
                    samples.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        };
        let mut procs = workers(&t, 4, 4);
        wait_for("a quarter of the limited jobs", Duration::from_secs(60), || {
            (count_state(&t.store, "limited", JobState::Succeeded) >= 500).then_some(())
        });
        // Killed with its claims in hand: their leases lapse and free their slots.
        procs[0].kill();
        wait_for("every job", Duration::from_secs(180), || {
            (count_state(&t.store, "limited", JobState::Succeeded) == limited.len()
                && count_state(&t.store, "free", JobState::Succeeded) == free.len())
            .then_some(())
        });
        stop.store(true, Ordering::SeqCst);
        sampler.join().unwrap();
        drop(procs);

        let most = most.load(Ordering::SeqCst);
        let samples = samples.load(Ordering::SeqCst);
        assert!(samples > 100, "only {samples} samples were taken");
        assert!(most <= 3, "{most} limited jobs ran at once under a limit of 3");
        assert_eq!(most, 3, "the limit's slots were never all used");
        // The other wire name of the same queue drained meanwhile, not after (the store's times).
        let (free_done, limited_done) =
            (last_at(&t.db, "free", JobState::Succeeded), last_at(&t.db, "limited", JobState::Succeeded));
        assert!(free_done < limited_done, "free drained at {free_done}, limited at {limited_done}");
        // A job over the limit spent no attempt: only the killed process's runs were retried.
        let retried = limited.iter().filter(|id| job(&t.store, **id).attempt > 1).count();
        assert!(retried <= 4 * 5, "{retried} limited jobs ran more than once");
    }

    fn a_rate_limit_of_50_a_second_holds_in_every_window_while_other_work_drains() {
        let t = test_store();
        let rated = enqueue(&t.store, "rated", 150);
        let free = enqueue(&t.store, "free", 2_000);
        let spec = LimitSpec { concurrency: None, rate: Some(Rate::parse("50/s").unwrap()) };
        t.store.set_limit(ACTOR, PauseKind::WireName, "rated", &spec, None, true).unwrap();
        let procs = workers(&t, 4, 4);
        wait_for("every job", Duration::from_secs(120), || {
            (count_state(&t.store, "rated", JobState::Succeeded) == rated.len()
                && count_state(&t.store, "free", JobState::Succeeded) == free.len())
            .then_some(())
        });
        drop(procs);
        // Every claim of a rated job, by the time the claim counted it against.
        let claims = plain_query(
            &t.db,
            "SELECT t.at FROM transitions t JOIN jobs j ON j.id = t.job_id
             WHERE j.wire_name = 'rated' AND t.to_state = 'running' ORDER BY t.at",
        );
        let at: Vec<i64> = claims.iter().map(|r| r[0].as_i64()).collect();
        let mut per_window = std::collections::BTreeMap::<i64, u32>::new();
        for a in &at {
            *per_window.entry(a - a.rem_euclid(1000)).or_default() += 1;
        }
        assert!(per_window.values().all(|n| *n <= 50), "claims per 1 s window: {per_window:?}");
        // 150 at 50 a window take at least three windows: the limit held them back.
        assert!(per_window.len() >= 3, "claims per 1 s window: {per_window:?}");
        let span = at.last().unwrap() - at.first().unwrap();
        assert!(span >= 1_000, "150 claims in {span} ms under 50/s");
        // The free jobs went on being claimed in a window whose rated budget was spent: the
        // held-back wire name did not hold up the rest of its queue.
        let free_at: Vec<i64> = plain_query(
            &t.db,
            "SELECT t.at FROM transitions t JOIN jobs j ON j.id = t.job_id
             WHERE j.wire_name = 'free' AND t.to_state = 'running'",
        )
        .iter()
        .map(|r| r[0].as_i64())
        .collect();
        let spent: Vec<(i64, i64)> = per_window
            .iter()
            .filter(|(_, n)| **n == 50)
            .map(|(w, _)| (*w, *at.iter().filter(|a| **a >= *w && **a < w + 1000).max().unwrap()))
            .collect();
        assert!(!spent.is_empty(), "no window spent its budget: {per_window:?}");
        assert!(
            spent.iter().any(|(w, last)| free_at.iter().any(|f| f > last && *f < w + 1000)),
            "no free job was claimed after the rated budget was spent in a window: {spent:?}"
        );
    }

    fn a_quieted_process_claims_nothing_after_its_next_poll_while_the_others_drain() {
        let t = test_store();
        let mut procs = workers(&t, 3, 2);
        let quiet = procs[0].worker_id.clone();
        let changed = t.store.quiet_workers(ACTOR, &WorkerSelector::Id(quiet.clone())).unwrap();
        assert_eq!(changed, vec![quiet.clone()]);
        // SIGTSTP quiets the second one in its process, which writes it into its row (waited
        // for: a process the machine is slow to schedule takes the signal late).
        procs[1].signal(libc::SIGTSTP);
        let signalled = procs[1].worker_id.clone();
        wait_for("the SIGTSTP to reach the row", Duration::from_secs(30), || {
            let states = t.store.worker_states().unwrap();
            let row = states.iter().find(|s| s.id == signalled)?;
            (row.quiet_by.as_deref() == Some(backwave::store::QUIET_BY_PROCESS)).then_some(())
        });
        std::thread::sleep(Duration::from_millis(200)); // four polls of each, for a claim under way
        let since = t.store.now();
        let ids = enqueue(&t.store, "free", 500);
        wait_for("the others to drain", Duration::from_secs(60), || {
            (count_state(&t.store, "free", JobState::Succeeded) == ids.len()).then_some(())
        });
        let claimers = plain_query(
            &t.db,
            &format!("SELECT DISTINCT worker_id FROM transitions WHERE to_state = 'running' AND at >= {since}"),
        );
        let claimers: Vec<&str> = claimers.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(claimers, vec![procs[2].worker_id.as_str()], "only the process not quieted claims");
        let states = t.store.worker_states().unwrap();
        let q = states.iter().find(|s| s.id == quiet).unwrap();
        assert_eq!(q.quiet_by.as_deref(), Some(ACTOR));
        assert!(q.quiet_at.is_some());
        // Found by an application developer's walkthrough: a quiet set in the process (SIGTSTP,
        // EngineHandle::quiet) was the process's alone, and `bw workers` showed it `live`.
        let by_itself = states.iter().find(|s| s.id == procs[1].worker_id).unwrap();
        assert_eq!(by_itself.quiet_by.as_deref(), Some(backwave::store::QUIET_BY_PROCESS));
        assert!(by_itself.quiet_at.is_some());
        let audit = t.store.audit_entries(0, 100).unwrap();
        assert!(audit.iter().any(|a| a.action == "quiet" && a.detail.as_deref().is_some_and(|d| d.contains(&quiet))));

        // Resumed, it claims again from its next poll.
        assert_eq!(t.store.resume_workers(ACTOR, &WorkerSelector::Id(quiet.clone())).unwrap(), vec![quiet.clone()]);
        procs[2].kill();
        let more = enqueue(&t.store, "limited", 50);
        wait_for("the resumed process to drain", Duration::from_secs(60), || {
            (count_state(&t.store, "limited", JobState::Succeeded) == more.len()).then_some(())
        });
        let claimers = plain_query(
            &t.db,
            "SELECT DISTINCT t.worker_id FROM transitions t JOIN jobs j ON j.id = t.job_id
             WHERE j.wire_name = 'limited' AND t.to_state = 'running'",
        );
        let claimers: Vec<&str> = claimers.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(claimers, vec![quiet.as_str()], "the resumed process claims again; the SIGTSTP one does not");

        // An operator lifts the process's own quiet as any other: it claims again.
        let by_itself = signalled;
        assert_eq!(t.store.resume_workers(ACTOR, &WorkerSelector::Id(by_itself.clone())).unwrap(), vec![by_itself.clone()]);
        procs[0].kill();
        let last = enqueue(&t.store, "free", 50);
        wait_for("the process resumed by an operator to drain", Duration::from_secs(60), || {
            (count_state(&t.store, "free", JobState::Succeeded) == ids.len() + last.len()).then_some(())
        });
        // A second SIGTSTP after the operator's lift quiets it again (it was a flag still set,
        // so the second signal changed nothing).
        procs[1].signal(libc::SIGTSTP);
        wait_for("the second SIGTSTP to reach the row", Duration::from_secs(30), || {
            let states = t.store.worker_states().unwrap();
            let row = states.iter().find(|s| s.id == by_itself)?;
            (row.quiet_by.as_deref() == Some(backwave::store::QUIET_BY_PROCESS)).then_some(())
        });
        std::thread::sleep(Duration::from_millis(200)); // four polls
        let since = t.store.now();
        let after = enqueue(&t.store, "free", 20);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(count_state(&t.store, "free", JobState::Scheduled), after.len(), "the requieted process claimed");
        let claimed = format!("SELECT count(*) FROM transitions WHERE to_state = 'running' AND at >= {since}");
        assert_eq!(plain_query(&t.db, &claimed)[0][0].as_i64(), 0);
        let unknown = t.store.quiet_workers(ACTOR, &WorkerSelector::Host("no-such-host".into())).unwrap_err();
        assert!(unknown.to_string().contains("'no-such-host'"), "{unknown}");
    }
}

/// The deploy test's handlers: `report` records that it started and, while `slow` is set when it
/// starts, waits 30 s for a request to stop (a blocking wait, or an awaited `ctx.cancelled()`).
fn deploy_registry(slow: &Arc<AtomicBool>, ran_slow: &Arc<Mutex<Vec<JobId>>>) -> Registry {
    let mut r = Registry::new();
    let (slow, ran_slow) = (Arc::clone(slow), Arc::clone(ran_slow));
    let registration = match flavor() {
        Flavor::Sync => r.handle::<u32>("report", move |_, ctx| {
            if !slow.load(Ordering::SeqCst) {
                return Ok(());
            }
            ran_slow.lock().unwrap().push(ctx.job_id());
            ctx.sleep(Duration::from_secs(30))
        }),
        Flavor::Async => r.handle_async::<u32, _, _>("report", move |_, ctx| {
            let slow = slow.load(Ordering::SeqCst);
            if slow {
                ran_slow.lock().unwrap().push(ctx.job_id());
            }
            async move {
                if slow && tokio::time::timeout(Duration::from_secs(30), ctx.cancelled()).await.is_ok() {
                    return Err(HandlerError::cancelled());
                }
                Ok(())
            }
        }),
    };
    registration.queue("reports");
    r
}

both_flavors! {
    /// A worker process's `main` ends with `EngineHandle::serve_until` (with `StopSignals` installed before the start) (an application
    /// developer's walkthrough found no SIGTERM helper: each application wrote its own, or its
    /// workers died on the orchestrator's SIGTERM with their claims). SIGTERM stops it as a
    /// deploy does: a running handler gets the grace period (60 s in the child), so the process
    /// still serves a moment later, marked stopping; a second signal (Ctrl-C) ends the grace at
    /// once: the handler stops when asked, its lease ends at once, the worker leaves the registry
    /// and the process exits 0.
    fn sigterm_stops_a_worker_process_under_its_grace_and_a_second_signal_at_once() {
        let t = test_store();
        let id = NewJob::new("sleepy", "sleepy", "\"zzz\"");
        let id = t.store.enqueue_many(&[id]).unwrap()[0];
        let mut child = ChildWorker::spawn(&[t.db.arg(), "sleepy", "3", "60000"]);
        let worker = child.worker_id.clone();
        // Its handler running, not only its job claimed (a job not started is handed back at the
        // first signal, and the child then ends at once).
        assert_eq!(child.next_line(), format!("started {id}"));
        assert_eq!(job(&t.store, id).lease_owner.as_deref(), Some(worker.as_str()));
        child.signal(libc::SIGTERM);
        wait_for("the worker to be marked stopping", Duration::from_secs(10), || {
            let states = t.store.worker_states().unwrap();
            states.iter().find(|s| s.id == worker)?.stopping_at.map(drop)
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.child.try_wait().unwrap().is_none(), "exited at the first signal, inside its 60 s grace");
        assert_eq!(job(&t.store, id).state, JobState::Running);

        let asked = Instant::now();
        child.signal(libc::SIGINT);
        let status = wait_for("the child to exit", Duration::from_secs(10), || child.child.try_wait().unwrap());
        assert!(status.success(), "{status}");
        assert!(asked.elapsed() < Duration::from_secs(5), "exited {:?} after the second signal", asked.elapsed());
        assert_eq!(child.next_line(), "stopped handed_back=0 stopped=1 abandoned=0");
        let j = job(&t.store, id);
        assert!(j.lease_expires_at.is_some_and(|at| at <= t.store.now()), "the stopped job's lease still runs: {j:?}");
        assert!(!t.store.worker_states().unwrap().iter().any(|s| s.id == worker), "the worker did not leave the registry");
    }

    /// A deploy (issue 21): the old process is quieted, then stopped with one 2 s deadline while
    /// its long handlers run and the new version already serves. No job is lost; a job claimed
    /// ahead that never started costs no attempt; the handlers running at the deadline stop when
    /// asked and report nothing (a host shutdown reports nothing: SPEC), their leases ended at
    /// once, so the new version inherits them as lapses (one failed attempt each, `lease
    /// expired`) within a poll or two, not after their 60 s leases.
    fn a_deploy_quiets_then_stops_in_2s_losing_no_job_and_the_running_ones_lapse_at_once() {
        let t = test_store();
        let slow = Arc::new(AtomicBool::new(true));
        let ran_slow = Arc::new(Mutex::new(Vec::new()));
        let ids: Vec<JobId> =
            (0..12).map(|i| deploy_registry(&slow, &ran_slow).enqueue(&t.store, "report", &i).unwrap()).collect();
        let lease = Duration::from_secs(60);
        let mut old = Engine::new(&t.db, deploy_registry(&slow, &ran_slow));
        let policy = DispatchPolicy::strict(["reports"]);
        old.add_worker_group(WorkerGroup { lease, ..group("a", policy.clone(), 3) });
        old.add_worker_group(WorkerGroup { lease, concurrency: 2, ..group("b", policy.clone(), 3) });
        let old = old.start().unwrap();
        let old_workers: Vec<String> = old.worker_ids().into_iter().map(|(_, id)| id).collect();
        // Three handlers (1 + 2), all busy with long jobs, maybe more claimed ahead behind them.
        wait_for("three long handlers to run", Duration::from_secs(30), || {
            (ran_slow.lock().unwrap().len() == 3).then_some(())
        });
        for id in &old_workers {
            t.store.quiet_workers(ACTOR, &WorkerSelector::Id(id.clone())).unwrap();
        }
        // The new version serves beside it.
        slow.store(false, Ordering::SeqCst);
        let mut new = Engine::new(&t.db, deploy_registry(&slow, &ran_slow));
        new.add_worker_group(WorkerGroup { lease, concurrency: 3, ..group("new", policy, 3) });
        let new = new.start().unwrap();
        let new_worker = new.worker_ids()[0].1.clone();

        let stopping = Instant::now();
        let report = old.shutdown(Duration::from_secs(2));
        let stopped_at = Instant::now();
        let took = stopped_at - stopping;
        assert!(took < Duration::from_secs(4), "the two groups stopped in {took:?}, not under one 2 s deadline");
        // The long handlers heeded the request to stop: their leases ended, none left to lapse.
        assert_eq!((report.stopped, report.abandoned), (3, 0), "{report:?}");

        // The new version drains everything, the stopped jobs within a few polls of the stop.
        wait_for("every job to succeed", Duration::from_secs(20), || {
            ids.iter().all(|id| job(&t.store, *id).state == JobState::Succeeded).then_some(())
        });
        let inherited_in = stopped_at.elapsed();
        new.shutdown(Duration::from_secs(1));
        assert!(inherited_in < Duration::from_secs(15), "inherited after {inherited_in:?}: as late as a lapsing lease");

        let ran_slow = ran_slow.lock().unwrap().clone();
        assert_eq!(ran_slow.len(), 3, "{ran_slow:?}");
        for id in &ids {
            let history = t.store.history(*id).unwrap();
            let started = history.iter().filter(|e| e.to == JobState::Running).count() as u32;
            let handed_back =
                history.iter().filter(|e| e.reason.as_deref() == Some(backwave::store::HANDED_BACK)).count() as u32;
            let j = job(&t.store, *id);
            // Each attempt is a run that started: a hand-back gave its claim back.
            assert_eq!(j.attempt, started - handed_back, "job {id}: {history:?}");
            let lapses: Vec<_> = history.iter().filter(|e| e.reason.as_deref() == Some(LEASE_EXPIRED)).collect();
            if ran_slow.contains(id) {
                // Stopped at the deadline: no outcome of its own, one lapse (a failed attempt,
                // the old worker's), then the new version's success.
                assert_eq!(j.attempt, 2, "job {id}: {history:?}");
                assert_eq!(lapses.len(), 1, "job {id}: {history:?}");
                assert_eq!(
                    (lapses[0].from, lapses[0].to, lapses[0].attempt),
                    (Some(JobState::Running), JobState::Scheduled, 1),
                    "job {id}"
                );
                assert!(old_workers.contains(lapses[0].worker_id.as_ref().unwrap()), "job {id}: {history:?}");
                let failed_otherwise = history.iter().filter(|e| {
                    e.from == Some(JobState::Running)
                        && e.to == JobState::Scheduled
                        && e.reason.as_deref() != Some(LEASE_EXPIRED)
                        && e.reason.as_deref() != Some(backwave::store::HANDED_BACK)
                });
                assert_eq!(failed_otherwise.count(), 0, "job {id} reported an outcome: {history:?}");
            } else {
                assert_eq!(j.attempt, 1, "job {id} never started before the stop: {history:?}");
                assert!(lapses.is_empty(), "job {id}: {history:?}");
            }
            let last = history.last().unwrap();
            assert_eq!((last.to, last.worker_id.as_deref()), (JobState::Succeeded, Some(new_worker.as_str())), "job {id}");
        }
    }
}
