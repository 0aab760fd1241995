//! Workflows (issue 42), on both backends: a child starts only after its parents succeeded, is
//! released exactly once however its parents' completions race or die, a cycle enqueues
//! nothing, a dead-lettered parent requeued resumes its workflow, a batch's callback fires once.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry};
use backwave::store::{CancelResult, ClaimRequest, Completion, JobFilter, Outcome, RequeueResult};
use backwave::workflow::OnFailure;
use backwave::{JobId, JobState, NewJob, RetryPolicy, Store, Workflow};

use super::support::*;
use crate::backend::both_backends;

fn job(name: &str, queue: &str) -> NewJob {
    NewJob::new(name, queue, b"{}".to_vec())
}

/// A workflow that cancels on failure, enqueued: dump -> pack -> upload (queue `q`).
fn export_cancelling_on_failure(store: &Store) -> (backwave::EnqueuedWorkflow, [backwave::Step; 3]) {
    let mut wf = Workflow::new("export");
    wf.on_failure(OnFailure::Cancel);
    let dump = wf.add(job("dump", "q"));
    let pack = wf.add_after(job("pack", "q"), &[dump]).unwrap();
    let upload = wf.add_after(job("upload", "q"), &[pack]).unwrap();
    (store.enqueue_workflow(&wf).unwrap(), [dump, pack, upload])
}

/// The log's entries of `id` that released it (`waiting` -> `scheduled`).
fn releases(store: &Store, id: JobId) -> usize {
    store.history(id).unwrap().iter().filter(|e| e.from == Some(JobState::Waiting)).count()
}

/// The sequence number of the log entry that moved `id` to `to` (the first one).
fn seq_of(store: &Store, id: JobId, to: JobState) -> i64 {
    store.history(id).unwrap().iter().find(|e| e.to == to).unwrap_or_else(|| panic!("{id} never went {to}")).seq
}

fn all_terminal(store: &Store, ids: &[JobId]) -> bool {
    ids.iter().all(|id| store.job(*id).unwrap().unwrap().state.is_terminal())
}

both_backends! {
    fn each_child_starts_only_after_all_its_parents_succeeded() {
        let t = test_store();
        let mut wf = Workflow::new("thumbnails");
        let fetch = wf.add(job("fetch", "media"));
        let resizes: Vec<_> = (0..3).map(|_| wf.add_after(job("resize", "media"), &[fetch]).unwrap()).collect();
        let publish = wf.add_after(job("publish", "media"), &resizes).unwrap();
        let e = t.store.enqueue_workflow(&wf).unwrap();
        assert_eq!(support_job(&t.store, e.job(fetch)).state, JobState::Scheduled);
        assert_eq!(support_job(&t.store, e.job(publish)).state, JobState::Waiting);

        let mut registry = Registry::new();
        for name in ["fetch", "resize", "publish"] {
            registry.handle::<serde_json::Value>(name, |_, _| Ok(())).queue("media");
        }
        let mut engine = Engine::new(&t.db, registry);
        let mut g = group("g", DispatchPolicy::strict(["media"]), 3);
        g.concurrency = 4;
        engine.add_worker_group(g);
        let running = engine.start().unwrap();
        wait_for("the workflow to finish", Duration::from_secs(20), || all_terminal(&t.store, &e.jobs).then_some(()));
        running.shutdown(Duration::from_secs(1));

        for id in &e.jobs {
            assert_eq!(support_job(&t.store, *id).state, JobState::Succeeded);
        }
        let fetched = seq_of(&t.store, e.job(fetch), JobState::Succeeded);
        for r in &resizes {
            assert!(seq_of(&t.store, e.job(*r), JobState::Running) > fetched, "a resize ran before fetch succeeded");
            assert_eq!(releases(&t.store, e.job(*r)), 1);
        }
        let last_resize = resizes.iter().map(|r| seq_of(&t.store, e.job(*r), JobState::Succeeded)).max().unwrap();
        assert!(seq_of(&t.store, e.job(publish), JobState::Running) > last_resize, "publish ran before its last parent");
        assert_eq!(releases(&t.store, e.job(publish)), 1);

        let summary = &t.store.workflows(10).unwrap()[0];
        assert_eq!((summary.id, summary.name.as_str(), summary.jobs), (e.id, "thumbnails", 5));
        assert!(summary.is_done());
        let graph = t.store.workflow(&e.id.to_string()[..8]).unwrap().unwrap();
        assert_eq!(graph.graph.first().unwrap().id, e.job(fetch));
        assert_eq!(graph.graph.last().unwrap().parents.len(), 3);
        let parents = t.store.parents(e.job(publish)).unwrap();
        assert!(parents.iter().all(|p| p.state == Some(JobState::Succeeded) && p.wire_name == "resize"));
        // The trigger's releases kept the exact counts exact.
        assert_eq!(t.store.check_integrity().unwrap(), Vec::<String>::new());
    }

    fn a_child_of_eight_parents_completing_at_once_is_released_exactly_once() {
        let t = test_store();
        for round in 0..5 {
            let mut wf = Workflow::new(format!("race-{round}"));
            let parents: Vec<_> = (0..8).map(|_| wf.add(job("p", "race"))).collect();
            let child = wf.add_after(job("c", "after"), &parents).unwrap();
            let e = t.store.enqueue_workflow(&wf).unwrap();
            // Eight workers, each on a store handle (connection) of its own, claim one parent each...
            let policy = RetryPolicy::new(3, |_| Duration::from_millis(10)).unwrap();
            let queues = vec!["race".to_string()];
            let claims: Vec<(Store, String, JobId, u32)> = (0..8)
                .map(|w| {
                    let store = Store::open(&t.db).unwrap();
                    let worker = format!("w{round}-{w}");
                    let req = ClaimRequest {
                        worker_id: &worker,
                        group: "g",
                        queues: &queues,
                        limit: 1,
                        lease: Duration::from_secs(30),
                        policy: &policy,
                        handler_policies: &[],
                    };
                    let job = store.claim(&req).unwrap().pop().expect("a parent to claim");
                    (store, worker, job.id, job.attempt)
                })
                .collect();
            // ...and all eight complete at the same instant, in eight transactions.
            let barrier = Arc::new(Barrier::new(8));
            let threads: Vec<_> = claims
                .into_iter()
                .map(|(store, worker, id, attempt)| {
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        barrier.wait();
                        let c = Completion { job_id: id, worker_id: worker, attempt, outcome: Outcome::Succeeded };
                        loop {
                            match store.complete(&c) {
                                Ok(f) => return f,
                                Err(backwave::Error::Busy) => continue,
                                Err(e) => panic!("completion failed: {e}"),
                            }
                        }
                    })
                })
                .collect();
            for th in threads {
                th.join().unwrap();
            }
            let c = support_job(&t.store, e.job(child));
            assert_eq!(c.state, JobState::Scheduled, "round {round}: the child was not released");
            assert_eq!(releases(&t.store, e.job(child)), 1, "round {round}: released more than once");
        }
        assert_eq!(t.store.check_integrity().unwrap(), Vec::<String>::new());
    }

    fn a_cycle_is_refused_and_nothing_is_enqueued() {
        let t = test_store();
        let mut wf = Workflow::new("loop");
        let a = wf.add(job("a", "q"));
        let b = wf.add_after(job("b", "q"), &[a]).unwrap();
        wf.depends_on(a, b).unwrap();
        let err = t.store.enqueue_workflow(&wf).unwrap_err().to_string();
        assert!(err.contains("cycle: #0 a -> #1 b -> #0 a"), "{err}");
        assert!(t.store.workflows(10).unwrap().is_empty());
        assert_eq!(t.store.counts().unwrap().by_queue.len(), 0, "a job was stored");

        // A payload over the limit in the middle: nothing of the workflow either.
        let mut wf = Workflow::new("big");
        let a = wf.add(job("a", "q"));
        wf.add_after(NewJob::new("b", "q", vec![b'x'; 2 << 20]), &[a]).unwrap();
        assert!(matches!(t.store.enqueue_workflow(&wf), Err(backwave::Error::PayloadTooLarge { .. })));
        assert!(t.store.workflows(10).unwrap().is_empty());
        assert_eq!(t.store.counts().unwrap().by_queue.len(), 0, "a job was stored");
    }

    fn a_dead_lettered_parent_requeued_resumes_its_workflow() {
        let t = test_store();
        let mut wf = Workflow::new("flaky");
        let parent = wf.add(job("flaky", "q"));
        let child = wf.add_after(job("after", "q"), &[parent]).unwrap();
        let e = t.store.enqueue_workflow(&wf).unwrap();

        let fail = Arc::new(Mutex::new(true));
        let mut registry = Registry::new();
        let f = Arc::clone(&fail);
        registry
            .handle::<serde_json::Value>("flaky", move |_, _| match *f.lock().unwrap() {
                true => Err(HandlerError::msg("upstream down")),
                false => Ok(()),
            })
            .queue("q");
        registry.handle::<serde_json::Value>("after", |_, _| Ok(())).queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 1));
        let running = engine.start().unwrap();
        assert_eq!(wait_terminal(&t.store, e.job(parent)).state, JobState::DeadLettered);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(support_job(&t.store, e.job(child)).state, JobState::Waiting, "the child ran without its parent");
        let summary = &t.store.workflows(1).unwrap()[0];
        assert_eq!(summary.stuck, 1, "the waiting child is stuck behind a dead-lettered parent");

        *fail.lock().unwrap() = false;
        let requeued = t.store.requeue(ACTOR, &[e.job(parent)]).unwrap();
        assert!(matches!(requeued[0], RequeueResult::Requeued { .. }));
        assert_eq!(wait_terminal(&t.store, e.job(child)).state, JobState::Succeeded);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(releases(&t.store, e.job(child)), 1);
        assert_eq!(t.store.workflows(1).unwrap()[0].stuck, 0);
    }

    fn a_batch_callback_fires_once_when_every_member_is_terminal_and_sees_how_each_ended() {
        let t = test_store();
        let mut wf = Workflow::new("import");
        let members: Vec<_> = (0..5u32).map(|i| wf.add(NewJob::new("row", "q", serde_json::to_vec(&i).unwrap()))).collect();
        let done = wf.add_when_finished(job("report", "q"), &members).unwrap();
        let e = t.store.enqueue_workflow(&wf).unwrap();

        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        registry
            .handle::<u32>("row", |i, _| if i == 3 { Err(HandlerError::msg("bad row")) } else { Ok(()) })
            .queue("q");
        let s = Arc::clone(&seen);
        registry
            .handle::<serde_json::Value>("report", move |_, ctx| {
                let parents = ctx.parents().map_err(HandlerError::msg)?;
                let ok = parents.iter().filter(|p| p.state == Some(JobState::Succeeded)).count();
                let dead = parents.iter().filter(|p| p.state == Some(JobState::DeadLettered)).count();
                // The same, counted by the store without the outputs.
                let counts = ctx.parent_counts().map_err(HandlerError::msg)?;
                assert_eq!((counts.get(JobState::Succeeded), counts.get(JobState::DeadLettered)), (ok as u64, dead as u64));
                assert_eq!((counts.total(), counts.deleted), (5, 0));
                s.lock().unwrap().push((ok, dead));
                Ok(())
            })
            .queue("q");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("g", DispatchPolicy::strict(["q"]), 2));
        let running = engine.start().unwrap();
        assert_eq!(wait_terminal(&t.store, e.job(done)).state, JobState::Succeeded);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(*seen.lock().unwrap(), [(4, 1)], "the callback ran once and saw four succeeded, one dead-lettered");
        assert_eq!(releases(&t.store, e.job(done)), 1);
        let last_member = members.iter().map(|m| seq_of(&t.store, e.job(*m), JobState::Running)).max().unwrap();
        assert!(seq_of(&t.store, e.job(done), JobState::Running) > last_member);
    }
}

both_backends! {
    fn a_workflow_is_swept_with_its_last_job_and_not_before() {
        let t = test_store();
        let flow = |name: &str| {
            let mut wf = Workflow::new(name);
            let a = wf.add(job("a", "sweep"));
            wf.add_after(job("b", "sweep"), &[a]).unwrap();
            t.store.enqueue_workflow(&wf).unwrap()
        };
        let done = flow("done");
        let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
        let queues = vec!["sweep".to_string()];
        for _ in 0..2 {
            let claimed = t
                .store
                .claim(&ClaimRequest {
                    worker_id: "w",
                    group: "g",
                    queues: &queues,
                    limit: 1,
                    lease: Duration::from_secs(30),
                    policy: &policy,
                    handler_policies: &[],
                })
                .unwrap();
            let j = &claimed[0];
            t.store
                .complete(&Completion { job_id: j.id, worker_id: "w".into(), attempt: j.attempt, outcome: Outcome::Succeeded })
                .unwrap();
        }
        assert!(all_terminal(&t.store, &done.jobs));
        let waiting = flow("waiting");
        // Everything finished is older than this cutoff: both jobs of `done` go, and `done` with
        // them; `waiting` keeps its two unfinished jobs, and so its row.
        let swept = t.store.sweep(t.store.now() + 86_400_000, 1000).unwrap();
        assert_eq!(swept, 2);
        let left: Vec<_> = t.store.workflows(10).unwrap().into_iter().map(|w| w.id).collect();
        assert_eq!(left, [waiting.id]);
    }
}

both_flavors! {
    fn a_parent_whose_worker_was_sigkilled_releases_its_child_once_after_it_runs_again() {
        let t = test_store();
        let mut wf = Workflow::new("killed");
        let parent = wf.add(NewJob::new("sleepy", "sleepy", serde_json::to_vec("zzz").unwrap()));
        let child = wf.add_after(job("after", "after"), &[parent]).unwrap();
        let e = t.store.enqueue_workflow(&wf).unwrap();
        let mut worker = ChildWorker::spawn(&[t.db.arg(), "sleepy", "3", "600"]);
        wait_for("the child process to be running the parent", Duration::from_secs(10), || {
            (support_job(&t.store, e.job(parent)).state == JobState::Running).then_some(())
        });
        worker.kill();

        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        handle::<String>(&mut registry, "sleepy", |_, _| Ok(())).queue("sleepy");
        let r = Arc::clone(&ran);
        handle::<serde_json::Value>(&mut registry, "after", move |_, ctx| {
            r.lock().unwrap().push(ctx.attempt());
            Ok(())
        })
        .queue("after");
        let mut engine = Engine::new(&t.db, registry);
        engine.add_worker_group(group("survivor", DispatchPolicy::strict(["sleepy", "after"]), 3));
        let running = engine.start().unwrap();
        assert_eq!(wait_terminal(&t.store, e.job(child)).state, JobState::Succeeded);
        running.shutdown(Duration::from_secs(1));
        assert_eq!(support_job(&t.store, e.job(parent)).attempt, 2, "the parent ran again after the kill");
        assert_eq!(*ran.lock().unwrap(), [1], "the child ran once");
        assert_eq!(releases(&t.store, e.job(child)), 1);
    }
}

fn support_job(store: &Store, id: JobId) -> backwave::Job {
    super::support::job(store, id)
}

/// Claim the one due job of `queue` and fail it on its last attempt: it ends Dead-Lettered.
fn dead_letter(store: &Store, queue: &str) -> JobId {
    let queues = vec![queue.to_string()];
    let policy = RetryPolicy::new(1, Duration::from_millis(10)).unwrap();
    let req = ClaimRequest {
        worker_id: "w",
        group: "g",
        queues: &queues,
        limit: 1,
        lease: Duration::from_secs(30),
        policy: &policy,
        handler_policies: &[],
    };
    let j = store.claim(&req).unwrap().pop().expect("a job to claim");
    let failed = Outcome::Failed { message: "upstream down".into(), detail: None, retry_in: None };
    store.complete(&Completion { job_id: j.id, worker_id: "w".into(), attempt: j.attempt, outcome: failed }).unwrap();
    j.id
}

/// The log entry that cancelled `id`, when a parent's failure did.
fn cancel_reason(store: &Store, id: JobId) -> String {
    let h = store.history(id).unwrap();
    let e = h.iter().find(|e| e.to == JobState::Cancelled).unwrap_or_else(|| panic!("{id} was not cancelled: {h:?}"));
    assert_eq!((e.from, e.actor.as_deref()), (Some(JobState::Waiting), None));
    e.reason.clone().unwrap_or_default()
}

both_backends! {
    fn a_workflow_that_cancels_on_failure_cancels_every_job_below_a_dead_letter_and_nothing_else() {
        let t = test_store();
        let mut wf = Workflow::new("export");
        wf.on_failure(OnFailure::Cancel);
        let dump = wf.add(job("dump", "first"));
        let pack = wf.add_after(job("pack", "q"), &[dump]).unwrap();
        let upload = wf.add_after(job("upload", "q"), &[pack]).unwrap();
        let notify = wf.add_after(job("notify", "q"), &[pack, upload]).unwrap();
        let other = wf.add(job("index", "q"));
        let after_other = wf.add_after(job("reindex", "q"), &[other]).unwrap();
        let report = wf.add_when_finished(job("report", "q"), &[pack, upload]).unwrap();
        let e = t.store.enqueue_workflow(&wf).unwrap();
        assert_eq!(t.store.workflows(1).unwrap()[0].on_failure, OnFailure::Cancel);

        let failed = dead_letter(&t.store, "first");
        assert_eq!(failed, e.job(dump));
        // Everything below the dead letter, down the graph, in the same transaction.
        for step in [pack, upload, notify] {
            assert_eq!(support_job(&t.store, e.job(step)).state, JobState::Cancelled, "{step:?}");
            let why = cancel_reason(&t.store, e.job(step));
            assert!(why.contains(&e.job(dump).to_string()) && why.contains("dead-lettered"), "{why}");
            assert_eq!(t.store.history(e.job(step)).unwrap().iter().filter(|h| h.to == JobState::Cancelled).count(), 1);
        }
        // Not what does not depend on it; and a batch's callback over cancelled members runs.
        assert_eq!(support_job(&t.store, e.job(other)).state, JobState::Scheduled);
        assert_eq!(support_job(&t.store, e.job(after_other)).state, JobState::Waiting);
        assert_eq!(support_job(&t.store, e.job(report)).state, JobState::Scheduled);
        assert_eq!(releases(&t.store, e.job(report)), 1);
        let summary = &t.store.workflows(1).unwrap()[0];
        assert_eq!((summary.stuck, summary.counts.get(&JobState::Cancelled)), (0, Some(&3)));
    }

    fn an_operator_cancelling_a_job_of_such_a_workflow_cancels_its_dependents_and_counts_them() {
        let t = test_store();
        let (e, [dump, pack, upload]) = export_cancelling_on_failure(&t.store);
        // The default workflow keeps them waiting: the same cancel there leaves its child alone.
        let mut patient = Workflow::new("patient");
        let first = patient.add(job("dump", "q"));
        let second = patient.add_after(job("pack", "q"), &[first]).unwrap();
        let p = t.store.enqueue_workflow(&patient).unwrap();

        let results = t.store.cancel(ACTOR, &[e.job(dump), p.job(first)]).unwrap();
        assert!(results.iter().all(|r| matches!(r, CancelResult::Cancelled)), "{results:?}");
        for step in [pack, upload] {
            assert_eq!(support_job(&t.store, e.job(step)).state, JobState::Cancelled);
            assert!(cancel_reason(&t.store, e.job(step)).contains("ended cancelled"));
        }
        assert_eq!(support_job(&t.store, p.job(second)).state, JobState::Waiting);
        assert_eq!(t.store.workflow(&p.id.to_string()).unwrap().unwrap().summary.stuck, 1);
    }

    /// A bulk cancel of the Scheduled jobs cancels the waiting jobs below them too, where their
    /// workflow says so: those are counted apart, and the progress counts only the set it was
    /// asked for (it never passes its total).
    fn a_bulk_cancel_counts_the_dependents_it_cancelled_apart_from_its_set() {
        let t = test_store();
        let (e, [dump, pack, upload]) = export_cancelling_on_failure(&t.store);
        let plain = t.store.enqueue(&job("plain", "q")).unwrap();

        let filter = JobFilter { states: vec![JobState::Scheduled], ..JobFilter::default() };
        let mut progress = Vec::new();
        let done = t.store.cancel_matching(ACTOR, &filter, |p| progress.push((p.done, p.total))).unwrap();
        assert_eq!(progress, [(2, 2)], "the set is the two Scheduled jobs");
        assert_eq!((done.cancelled, done.asked_to_stop, done.dependents_cancelled), (2, 0, 2));
        for id in [e.job(dump), e.job(pack), e.job(upload), plain] {
            assert_eq!(support_job(&t.store, id).state, JobState::Cancelled, "{id}");
        }
        // Counted by the store: each child's one parent, cancelled; a job outside workflows has none.
        let counts = t.store.parent_counts(e.job(upload)).unwrap();
        assert_eq!((counts.get(JobState::Cancelled), counts.total(), counts.deleted), (1, 1, 0));
        assert_eq!(t.store.parent_counts(plain).unwrap(), backwave::ParentCounts::default());
    }
}
