//! Unique jobs: one job per key among the jobs in the rule's states, enforced by the store's
//! unique index against racing processes; duplicates answered with the holder's id; requeue,
//! run-now and payload repair keep the rule; bad rules refused with nothing stored.

use std::sync::Barrier;
use std::time::Duration;

use backwave::store::{JobFilter, Outcome, RawValue, RequeueCheck, RequeueResult};
use backwave::{Enqueued, Error, JobId, JobState, NewJob, Store, UniqueRule};

use super::{failed, policy, Fixture, ADMIN, T0, WORKER};
use crate::backend::both_backends;

fn keyed(key: &str) -> NewJob {
    NewJob::new("report", "q", br#"{"day":1}"#.to_vec()).unique(UniqueRule::key(key))
}

fn by_payload(payload: &str) -> NewJob {
    NewJob::new("send", "q", payload.as_bytes().to_vec()).unique(UniqueRule::by_payload())
}

fn scheduled(store: &Store) -> u64 {
    store.counts().unwrap().total(JobState::Scheduled)
}

/// A job of `job`'s key that ran once and dead-lettered (on a queue of its own); returns its id.
fn dead_lettered(fx: &Fixture, job: NewJob) -> JobId {
    let queue = format!("dead-{}", JobId::new().short());
    let id = fx.store.insert(&job.queue(&queue)).unwrap();
    let Enqueued::Created(id) = id else { panic!("expected a new job, got {id:?}") };
    let claimed = fx.claim_one(&queue, &policy(1, Duration::from_secs(1)));
    assert_eq!(claimed.id, id);
    fx.report(&claimed, failed("always fails"));
    assert_eq!(fx.job(id).state, JobState::DeadLettered);
    id
}

trait OnQueue {
    fn queue(self, queue: &str) -> Self;
}

impl OnQueue for NewJob {
    fn queue(mut self, queue: &str) -> Self {
        self.queue = queue.to_string();
        self
    }
}

both_backends! {
    fn eight_racing_enqueues_of_one_key_make_one_job_and_seven_duplicates() {
        let fx = Fixture::new();
        // Several rounds, each key fresh: a race that lets two through shows up as two jobs.
        for round in 0..5 {
            let key = format!("nightly-{round}");
            let barrier = Barrier::new(8);
            let answers: Vec<Enqueued> = std::thread::scope(|s| {
                let threads: Vec<_> = (0..8)
                    .map(|_| {
                        let (db, barrier, key) = (&fx.db, &barrier, &key);
                        s.spawn(move || {
                            // Its own store: on PostgreSQL its own connection.
                            let store = Store::open(db).unwrap();
                            barrier.wait();
                            store.insert(&keyed(key)).unwrap()
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let created: Vec<JobId> =
                answers.iter().filter_map(|a| match a { Enqueued::Created(id) => Some(*id), _ => None }).collect();
            assert_eq!(created.len(), 1, "round {round}: {answers:?}");
            let duplicates: Vec<JobId> =
                answers.iter().filter_map(|a| match a { Enqueued::Duplicate(id) => Some(*id), _ => None }).collect();
            assert_eq!(duplicates, vec![created[0]; 7], "round {round}: every duplicate names the one job");
            assert_eq!(fx.store.history(created[0]).unwrap().len(), 1);
        }
        assert_eq!(scheduled(&fx.store), 5);
        fx.assert_sound();
    }
}

both_backends! {
    fn enqueue_many_reports_each_job_new_or_duplicate() {
        let fx = Fixture::new();
        let Enqueued::Created(held) = fx.store.insert(&keyed("a")).unwrap() else { panic!("a is new") };
        let answers = fx
            .store
            .insert_many(&[
                keyed("a"),
                keyed("b"),
                NewJob::new("report", "q", br#"{"day":1}"#.to_vec()),
                keyed("b"),
                by_payload(r#"{"to":"x"}"#),
                by_payload(r#"{"to":"x"}"#),
                by_payload(r#"{"to":"y"}"#),
            ])
            .unwrap();
        assert_eq!(answers[0], Enqueued::Duplicate(held));
        let Enqueued::Created(b) = answers[1] else { panic!("{answers:?}") };
        assert!(matches!(answers[2], Enqueued::Created(_)), "a job without a rule is always new");
        assert_eq!(answers[3], Enqueued::Duplicate(b), "a key taken earlier in the same batch");
        let Enqueued::Created(x) = answers[4] else { panic!("{answers:?}") };
        assert_eq!(answers[5], Enqueued::Duplicate(x), "same wire name and payload");
        assert!(matches!(answers[6], Enqueued::Created(_)), "another payload is another job");
        // Only what was created is stored, each with its one log entry.
        assert_eq!(scheduled(&fx.store), 5);
        for a in &answers {
            assert_eq!(fx.store.history(a.id()).unwrap().len(), 1);
        }
        // The plain API answers the holder's id for a duplicate.
        assert_eq!(fx.store.enqueue_many(&[keyed("a"), keyed("b")]).unwrap(), vec![held, b]);
        // The same payload under another wire name is not a duplicate.
        let other = NewJob::new("archive", "q", br#"{"to":"x"}"#.to_vec()).unique(UniqueRule::by_payload());
        assert!(matches!(fx.store.insert(&other).unwrap(), Enqueued::Created(_)));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_key_is_free_again_when_its_job_leaves_the_rule_states_and_stays_on_the_row() {
        let fx = Fixture::new();
        let p = policy(3, Duration::from_secs(1));
        let Enqueued::Created(first) = fx.store.insert(&keyed("k")).unwrap() else { panic!() };
        let job = fx.claim_one("q", &p);
        // Running still holds it; a retry back to Scheduled too.
        assert_eq!(fx.store.insert(&keyed("k")).unwrap(), Enqueued::Duplicate(first));
        fx.report(&job, failed("flaky"));
        assert_eq!(fx.job(first).state, JobState::Scheduled);
        assert_eq!(fx.store.insert(&keyed("k")).unwrap(), Enqueued::Duplicate(first));
        fx.clock.advance(Duration::from_secs(2));
        let job = fx.claim_one("q", &p);
        fx.report(&job, Outcome::Succeeded);
        // Succeeded is outside the default states: the key is free, and still on the old row.
        let Enqueued::Created(second) = fx.store.insert(&keyed("k")).unwrap() else { panic!("key is free") };
        assert_ne!(second, first);
        let key = fx
            .store
            .raw_scalar("SELECT unique_key FROM jobs WHERE unique_window = 0 AND state = 'succeeded'", &[])
            .unwrap();
        assert_eq!(key, RawValue::Text("k".into()));
        // "Once only": a rule that keeps the key in Succeeded too.
        let once = |key: &str| {
            keyed(key).unique(UniqueRule::key(key).states(&[JobState::Scheduled, JobState::Running, JobState::Succeeded]))
        };
        let Enqueued::Created(o) = fx.store.insert(&once("once")).unwrap() else { panic!() };
        fx.clock.advance(Duration::from_secs(2));
        let jobs = fx.claim_as(WORKER, "q", 2, &p);
        for j in &jobs {
            fx.report(j, Outcome::Succeeded);
        }
        assert_eq!(fx.job(o).state, JobState::Succeeded);
        assert_eq!(fx.store.insert(&once("once")).unwrap(), Enqueued::Duplicate(o));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_period_holds_the_key_once_per_window() {
        let fx = Fixture::new();
        let hourly = || keyed("digest").unique(UniqueRule::key("digest").period(Duration::from_secs(3600)));
        let Enqueued::Created(first) = fx.store.insert(&hourly()).unwrap() else { panic!() };
        fx.clock.advance(Duration::from_secs(60));
        assert_eq!(fx.store.insert(&hourly()).unwrap(), Enqueued::Duplicate(first));
        // T0 is on the hour: an hour later is the next window, with the first job still waiting.
        fx.clock.advance(Duration::from_secs(3600));
        let Enqueued::Created(next) = fx.store.insert(&hourly()).unwrap() else { panic!("a new window") };
        assert_ne!(next, first);
        assert_eq!(fx.store.insert(&hourly()).unwrap(), Enqueued::Duplicate(next));
        // Without a period the same key is one job across windows.
        assert!(matches!(fx.store.insert(&keyed("digest")).unwrap(), Enqueued::Created(_)));
        assert_eq!(scheduled(&fx.store), 3);
    }
}

both_backends! {
    fn a_requeue_that_would_collide_is_refused_as_a_conflict_naming_the_holder() {
        let fx = Fixture::new();
        let dead = dead_lettered(&fx, keyed("k"));
        // The key was released when the job dead-lettered: a new job takes it.
        let Enqueued::Created(holder) = fx.store.insert(&keyed("k")).unwrap() else { panic!() };
        let before = (fx.job(dead), fx.store.history(dead).unwrap());
        assert_eq!(fx.store.check_requeue(&[dead]).unwrap(), [RequeueCheck::Conflict {
            state: JobState::DeadLettered,
            existing: holder
        }]);
        let plain = fx.enqueue("other", "dead");
        assert_eq!(fx.store.requeue(ADMIN, &[dead, plain]).unwrap()[0], RequeueResult::Conflict { existing: holder });
        assert_eq!((fx.job(dead), fx.store.history(dead).unwrap()), before, "nothing changed");
        // The bulk plan counts it, and a bulk requeue leaves it.
        let filter = JobFilter { states: vec![JobState::DeadLettered], ..Default::default() };
        assert_eq!(fx.store.plan_requeue(ADMIN, &filter).unwrap().would_conflict, 1);
        assert_eq!(fx.store.requeue_matching(ADMIN, &filter, |_| {}).unwrap(), 0);
        assert_eq!(fx.job(dead).state, JobState::DeadLettered);
        // Once the holder is done, the requeue goes through.
        fx.store.cancel(ADMIN, &[holder]).unwrap();
        assert_eq!(fx.store.plan_requeue(ADMIN, &filter).unwrap().would_conflict, 0);
        assert_eq!(fx.store.requeue(ADMIN, &[dead]).unwrap(), [RequeueResult::Requeued { from: JobState::DeadLettered }]);
        assert_eq!(fx.store.insert(&keyed("k")).unwrap(), Enqueued::Duplicate(dead));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_bulk_requeue_of_jobs_sharing_a_key_requeues_one_and_counts_the_rest() {
        let fx = Fixture::new();
        // A recurring job that failed three times: three dead letters of one key.
        let dead: Vec<JobId> = (0..3).map(|_| dead_lettered(&fx, keyed("tick"))).collect();
        let other = dead_lettered(&fx, keyed("other"));
        let filter = JobFilter { states: vec![JobState::DeadLettered], ..Default::default() };
        let plan = fx.store.plan_requeue(ADMIN, &filter).unwrap();
        assert_eq!((plan.matching, plan.would_conflict), (4, 2));
        assert_eq!(fx.store.requeue_matching(ADMIN, &filter, |_| {}).unwrap(), 2);
        let requeued: Vec<&JobId> = dead.iter().filter(|id| fx.job(**id).state == JobState::Scheduled).collect();
        assert_eq!(requeued.len(), 1, "one job per key");
        assert_eq!(fx.job(other).state, JobState::Scheduled);
        assert_eq!(fx.store.plan_requeue(ADMIN, &filter).unwrap().would_conflict, 2);
        // By id: the first named goes, the second meets it.
        let left: Vec<JobId> = dead.iter().filter(|id| fx.job(**id).state == JobState::DeadLettered).copied().collect();
        assert_eq!(fx.store.requeue(ADMIN, &left).unwrap(), [
            RequeueResult::Conflict { existing: *requeued[0] },
            RequeueResult::Conflict { existing: *requeued[0] }
        ]);
        fx.assert_sound();
    }
}

both_backends! {
    fn run_now_keeps_a_unique_job_the_holder_of_its_key() {
        let fx = Fixture::new();
        let later = keyed("k").due_at(T0 + 3_600_000);
        let Enqueued::Created(id) = fx.store.insert(&later).unwrap() else { panic!() };
        fx.store.run_now(ADMIN, &[id]).unwrap();
        assert_eq!(fx.job(id).due_at, T0);
        assert_eq!(fx.store.insert(&keyed("k")).unwrap(), Enqueued::Duplicate(id));
    }
}

both_backends! {
    fn a_payload_repair_moves_a_payload_key_and_its_requeue_respects_the_rule() {
        let fx = Fixture::new();
        let dead = dead_lettered(&fx, by_payload(r#"{"to":"bad"}"#));
        let Enqueued::Created(holder) = fx.store.insert(&by_payload(r#"{"to":"good"}"#)).unwrap() else { panic!() };
        // Repaired into the holder's payload: the edit stands, the requeue is refused.
        let edit = fx.store.edit_payload(ADMIN, dead, br#"{"to":"good"}"#, true).unwrap();
        assert_eq!((edit.requeued, edit.conflict), (false, Some(holder)));
        assert_eq!(fx.job(dead).payload, br#"{"to":"good"}"#.to_vec());
        assert_eq!(fx.job(dead).state, JobState::DeadLettered);
        // The old payload's key went with the old payload.
        assert!(matches!(fx.store.insert(&by_payload(r#"{"to":"bad"}"#)).unwrap(), Enqueued::Created(_)));
        fx.store.cancel(ADMIN, &[holder]).unwrap();
        assert_eq!(fx.store.requeue(ADMIN, &[dead]).unwrap(), [RequeueResult::Requeued { from: JobState::DeadLettered }]);
        assert_eq!(fx.store.insert(&by_payload(r#"{"to":"good"}"#)).unwrap(), Enqueued::Duplicate(dead));
        // An explicit key stays what it was whatever the payload.
        let named = dead_lettered(&fx, keyed("named"));
        let edit = fx.store.edit_payload(ADMIN, named, br#"{"day":2}"#, true).unwrap();
        assert!(edit.requeued && edit.conflict.is_none());
        assert_eq!(fx.store.insert(&keyed("named")).unwrap(), Enqueued::Duplicate(named));
        fx.assert_sound();
    }
}

both_backends! {
    fn a_rule_the_index_could_not_keep_is_refused_quoting_it_and_nothing_is_stored() {
        let fx = Fixture::new();
        let cases: Vec<(UniqueRule, &str)> = vec![
            (UniqueRule::key("k").states(&[JobState::Succeeded]), "'succeeded'"),
            (UniqueRule::key("k").states(&[JobState::Scheduled]), "running"),
            (UniqueRule::key(""), "unique key"),
            (UniqueRule::key("a\u{7}b"), "\"a\\u{7}b\""),
            (UniqueRule::key("k").period(Duration::ZERO), "'0s'"),
        ];
        for (rule, quoted) in cases {
            let job = NewJob::new("report", "q", b"{}".to_vec()).unique(rule);
            // In a batch with a good job: the whole batch is refused.
            let err = fx.store.insert_many(&[keyed("fine"), job]).unwrap_err();
            let Error::InvalidInput(msg) = &err else { panic!("{err:?}") };
            assert!(msg.contains(quoted), "should quote {quoted}: {msg}");
            assert!(!msg.contains('\n'), "one line: {msg}");
        }
        assert_eq!(scheduled(&fx.store), 0);
    }
}

both_backends! {
    fn a_large_batch_answers_each_unique_job_across_the_statements_it_is_cut_into() {
        // 1077 jobs: more than one multi-row statement of each size the store cuts a batch
        // into, with keys repeated within a statement, across statements, and held before.
        let fx = Fixture::new();
        let Enqueued::Created(held) = fx.store.insert(&keyed("k-5")).unwrap() else { panic!("k-5 is new") };
        let jobs: Vec<NewJob> = (0..1077)
            .map(|i| match i % 3 {
                0 => keyed(&format!("k-{}", i % 61)),
                _ => NewJob::new("report", "q", format!("{{\"n\":{i}}}").into_bytes()),
            })
            .collect();
        let answers = fx.store.insert_many(&jobs).unwrap();
        assert_eq!(answers.len(), jobs.len());
        let mut first_of_key: std::collections::HashMap<String, JobId> = [("k-5".to_string(), held)].into();
        let mut created = vec![held];
        for (i, (job, answer)) in jobs.iter().zip(&answers).enumerate() {
            let Some(rule) = &job.unique else {
                let Enqueued::Created(id) = answer else { panic!("job {i} has no rule: {answer:?}") };
                created.push(*id);
                continue;
            };
            let backwave::UniqueBy::Key(key) = &rule.by else { unreachable!("keyed jobs only") };
            match first_of_key.get(key) {
                Some(holder) => assert_eq!(*answer, Enqueued::Duplicate(*holder), "job {i}, key {key}"),
                None => {
                    let Enqueued::Created(id) = answer else { panic!("job {i}: first of {key}: {answer:?}") };
                    first_of_key.insert(key.clone(), *id);
                    created.push(*id);
                }
            }
        }
        // 718 plain jobs and 61 keys, one of them held before the batch.
        assert_eq!(created.len(), 1 + 718 + 60);
        assert_eq!(scheduled(&fx.store), created.len() as u64);
        // One creation entry per stored job, in the order of the batch.
        let logged: Vec<JobId> = fx
            .store
            .raw_query("SELECT CAST(job_id AS TEXT) FROM transitions ORDER BY seq", &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().parse().unwrap())
            .collect();
        assert_eq!(logged, created);
        fx.assert_sound();
    }
}
