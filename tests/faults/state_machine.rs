//! The state-machine property test: random sequences of store operations from several simulated
//! workers, under a manual clock, checked after every step against a small model of SPEC.md
//! written here without looking at how the store does it. The model decides what each operation
//! must return and what every job row and its transition log must then hold. Both backends run
//! the same cases (`store_follows_the_spec_state_machine::sqlite` and `::postgres`).

use std::collections::HashMap;
use std::time::Duration;

use backwave::store::{
    CancelResult, ClaimRequest, Completion, Fenced, JobFilter, LeaseStatus, Outcome, RequeueResult, HANDED_BACK,
    LEASE_EXPIRED,
};
use backwave::{
    Backoff, Clock, DetailStatus, Error, FailureDetail, JobId, JobState, Millis, NewJob, QuarantineReason, RetryPolicy,
    Store,
};
use proptest::prelude::*;

use crate::backend::TestDb;

const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
const QUEUES: [&str; 2] = ["q0", "q1"];
const OPERATOR: &str = "op";
/// Holds no permission: every operator action by this actor must change nothing.
const STRANGER: &str = "mallory";
const START: Millis = 1_800_000_000_000;
/// Stands for the store's own wording of a handler's unrequested cancel (unchecked).
const SELF_CANCEL: &str = "<a handler cancelled itself>";

/// The retry policies a simulated worker group may claim with, and the delay table SPEC.md says
/// each must write (None: jittered, checked against bounds instead).
fn policies() -> Vec<(RetryPolicy, Option<Vec<u64>>)> {
    let ms = Duration::from_millis;
    vec![
        // SPEC.md: 10 attempts; 2^n s capped at 300 s: 2 4 8 16 32 64 128 256 300.
        (RetryPolicy::default(), Some(vec![2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000])),
        // MaxAttempts = 1: the first failure dead-letters, the table is empty.
        (RetryPolicy::new(1, Duration::from_secs(1)).unwrap(), Some(vec![])),
        (RetryPolicy::new(3, Backoff::linear(ms(500))).unwrap(), Some(vec![500, 1_000])),
        (
            RetryPolicy::from_backoff(
                Backoff::exponential(Duration::from_secs(1)).cap(Duration::from_secs(5)).max_attempts(5),
            )
            .unwrap(),
            Some(vec![1_000, 2_000, 4_000, 5_000]),
        ),
        (RetryPolicy::new(4, Backoff::fixed(Duration::from_secs(10)).jitter(0.5)).unwrap(), None),
        (RetryPolicy::new(3, |n: u32| Duration::from_millis(100 * n as u64 + 7)).unwrap(), Some(vec![107, 207])),
    ]
}

/// Bounds of the jittered policy above: 10 s ± 50 %.
const JITTER_RANGE: std::ops::RangeInclusive<u64> = 5_000..=15_000;

#[derive(Clone, Debug)]
enum Act {
    Succeed,
    Fail {
        detail: bool,
    },
    /// The handler stopped itself; only an operator's request makes this a Cancel.
    Cancelled,
    Quarantine,
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        queue: usize,
        delay_ms: u32,
    },
    Claim {
        worker: usize,
        queues: Vec<usize>,
        limit: usize,
        lease_ms: u32,
    },
    Heartbeat {
        worker: Option<usize>,
        pick: usize,
        skew: i8,
        lease_ms: u32,
    },
    Complete {
        worker: Option<usize>,
        pick: usize,
        skew: i8,
        act: Act,
    },
    /// A worker hands back a claim it never started (claimed ahead, then its shutdown).
    HandBack {
        worker: Option<usize>,
        pick: usize,
        skew: i8,
    },
    Advance {
        ms: u32,
    },
    Reap,
    Requeue {
        pick: usize,
        permitted: bool,
    },
    Cancel {
        pick: usize,
        permitted: bool,
    },
    Sweep {
        age_ms: u32,
    },
    /// `bw purge`: the sweep on demand, with a permission check.
    Purge {
        age_ms: u32,
        permitted: bool,
    },
    /// `bw requeue --state …`: every Dead-Lettered and/or Quarantined job.
    RequeueAll {
        states: Vec<JobState>,
        permitted: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let worker = prop_oneof![3 => Just(None), 1 => (0..WORKERS.len()).prop_map(Some)];
    // Mostly the true attempt; sometimes a stale or a future one, to test the fence.
    let skew = prop_oneof![6 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)];
    let lease = prop_oneof![Just(1_000u32), Just(5_000), Just(30_000)];
    let act = prop_oneof![
        3 => Just(Act::Succeed),
        4 => any::<bool>().prop_map(|detail| Act::Fail { detail }),
        1 => Just(Act::Cancelled),
        1 => Just(Act::Quarantine),
    ];
    prop_oneof![
        4 => (0..QUEUES.len(), prop_oneof![Just(0u32), 0..3_000u32]).prop_map(|(queue, delay_ms)| Op::Enqueue { queue, delay_ms }),
        5 => (0..WORKERS.len(), prop_oneof![Just(vec![0, 1]), Just(vec![1, 0]), Just(vec![0]), Just(vec![1])], 1..4usize, lease.clone())
            .prop_map(|(worker, queues, limit, lease_ms)| Op::Claim { worker, queues, limit, lease_ms }),
        2 => (worker.clone(), any::<usize>(), skew.clone(), lease).prop_map(|(worker, pick, skew, lease_ms)| Op::Heartbeat { worker, pick, skew, lease_ms }),
        6 => (worker.clone(), any::<usize>(), skew.clone(), act).prop_map(|(worker, pick, skew, act)| Op::Complete { worker, pick, skew, act }),
        2 => (worker, any::<usize>(), skew).prop_map(|(worker, pick, skew)| Op::HandBack { worker, pick, skew }),
        3 => prop_oneof![0..2_000u32, 2_000..70_000u32].prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Reap),
        2 => (any::<usize>(), prop_oneof![5 => Just(true), 1 => Just(false)]).prop_map(|(pick, permitted)| Op::Requeue { pick, permitted }),
        2 => (any::<usize>(), prop_oneof![5 => Just(true), 1 => Just(false)]).prop_map(|(pick, permitted)| Op::Cancel { pick, permitted }),
        1 => (0..60_000u32).prop_map(|age_ms| Op::Sweep { age_ms }),
        1 => (0..60_000u32, prop_oneof![5 => Just(true), 1 => Just(false)]).prop_map(|(age_ms, permitted)| Op::Purge { age_ms, permitted }),
        1 => (
            prop_oneof![
                Just(vec![JobState::DeadLettered]),
                Just(vec![JobState::Quarantined]),
                Just(vec![JobState::DeadLettered, JobState::Quarantined])
            ],
            prop_oneof![5 => Just(true), 1 => Just(false)]
        )
            .prop_map(|(states, permitted)| Op::RequeueAll { states, permitted }),
    ]
}

/// What the log must hold for one entry. `reason: None` leaves the text unchecked.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    at: Millis,
    from: Option<JobState>,
    to: JobState,
    attempt: u32,
    worker: Option<String>,
    actor: Option<String>,
    reason: Option<String>,
    detail: Detail,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Detail {
    None,
    NotCaptured,
    Captured,
    /// Either of the above: the store's choice (a handler's own cancel has no error to keep).
    Unchecked,
}

#[derive(Clone, Debug)]
struct MJob {
    id: JobId,
    queue: usize,
    state: JobState,
    attempt: u32,
    max_attempts: Option<u32>,
    table: Option<Vec<u64>>,
    due_at: Millis,
    owner: Option<String>,
    lease_until: Option<Millis>,
    group: Option<String>,
    cancel_by: Option<String>,
    cause: Option<String>,
    quarantine: Option<QuarantineReason>,
    finished_at: Option<Millis>,
    deleted: bool,
    log: Vec<Entry>,
    /// The table each policy wrote for this job: rewriting it must give the same table.
    tables_seen: HashMap<usize, Vec<u64>>,
}

impl MJob {
    fn entry(&mut self, now: Millis, to: JobState) -> &mut Entry {
        self.log.push(Entry {
            at: now,
            from: Some(self.state),
            to,
            attempt: self.attempt,
            worker: None,
            actor: None,
            reason: None,
            detail: Detail::None,
        });
        self.state = to;
        self.log.last_mut().unwrap()
    }

    fn finish(&mut self, now: Millis, to: JobState, worker: Option<String>) -> &mut Entry {
        self.owner = None;
        self.lease_until = None;
        self.finished_at = Some(now);
        let e = self.entry(now, to);
        e.worker = worker;
        e
    }

    /// A failed attempt: retried after the job's own delay, or dead-lettered when it was the
    /// last one the budget allows.
    fn fail(&mut self, now: Millis, worker: Option<String>, message: &str, detail: Detail) {
        let max = self.max_attempts.expect("a running job has a budget");
        self.owner = None;
        self.lease_until = None;
        let to = if self.attempt >= max {
            self.finished_at = Some(now);
            self.cause = Some(message.to_string());
            JobState::DeadLettered
        } else {
            let wait = self.table.as_ref().expect("a running job has a delay table")[self.attempt as usize - 1];
            self.due_at = now + wait as Millis;
            JobState::Scheduled
        };
        let e = self.entry(now, to);
        e.worker = worker;
        e.reason = Some(message.to_string());
        e.detail = detail;
    }

    fn cancel_now(&mut self, now: Millis, worker: Option<String>, actor: &str) {
        self.owner = None;
        self.lease_until = None;
        self.finished_at = Some(now);
        self.cause = Some(format!("cancelled by {actor}"));
        let e = self.entry(now, JobState::Cancelled);
        e.worker = worker;
        e.actor = Some(actor.to_string());
    }
}

/// Fields drop in order: the store's connections close before its schema is dropped.
struct Harness {
    store: Store,
    clock: Clock,
    jobs: Vec<MJob>,
    policies: Vec<(RetryPolicy, Option<Vec<u64>>)>,
    /// The one worker group's policy in this run (a job's budget is the claiming group's).
    policy: usize,
    seq: u32,
    _db: TestDb,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new(policy: usize) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let clock = Clock::manual(START);
        let store = Store::create(&db).unwrap().with_clock(clock.clone());
        assert!(store.bootstrap_admin(OPERATOR).unwrap());
        Harness { store, clock, jobs: Vec::new(), policies: policies(), policy, seq: 0, _db: db, _dir: dir }
    }

    fn now(&self) -> Millis {
        self.clock.now()
    }

    fn pick(&self, pick: usize) -> Option<usize> {
        (!self.jobs.is_empty()).then(|| pick % self.jobs.len())
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now();
        match op {
            Op::Enqueue { queue, delay_ms } => {
                let id = self
                    .store
                    .enqueue(&NewJob::new("sm.job", QUEUES[*queue], b"{}".to_vec()).due_at(now + *delay_ms as Millis))
                    .unwrap();
                self.jobs.push(MJob {
                    id,
                    queue: *queue,
                    state: JobState::Scheduled,
                    attempt: 0,
                    max_attempts: None,
                    table: None,
                    due_at: now + *delay_ms as Millis,
                    owner: None,
                    lease_until: None,
                    group: None,
                    cancel_by: None,
                    cause: None,
                    quarantine: None,
                    finished_at: None,
                    deleted: false,
                    log: vec![Entry {
                        at: now,
                        from: None,
                        to: JobState::Scheduled,
                        attempt: 0,
                        worker: None,
                        actor: None,
                        reason: None,
                        detail: Detail::None,
                    }],
                    tables_seen: HashMap::new(),
                });
            }
            Op::Claim { worker, queues, limit, lease_ms } => {
                let policy = &self.policy;
                let queue_names: Vec<String> = queues.iter().map(|q| QUEUES[*q].to_string()).collect();
                let group = format!("group-{policy}");
                let claimed = self
                    .store
                    .claim(&ClaimRequest {
                        worker_id: WORKERS[*worker],
                        group: &group,
                        queues: &queue_names,
                        limit: *limit,
                        lease: Duration::from_millis(*lease_ms as u64),
                        policy: &self.policies[*policy].0,
                        handler_policies: &[],
                    })
                    .unwrap();
                // Which of several equally-due jobs is claimed is the store's choice; the model
                // checks the choice is allowed: queues in order, earliest due first, no more
                // than asked, and none left behind while there was room.
                let mut left = *limit;
                for q in queues {
                    let mut due: Vec<usize> = (0..self.jobs.len())
                        .filter(|&i| {
                            let j = &self.jobs[i];
                            !j.deleted && j.queue == *q && j.state == JobState::Scheduled && j.due_at <= now
                        })
                        .collect();
                    due.sort_by_key(|&i| self.jobs[i].due_at);
                    let take = due.len().min(left);
                    left -= take;
                    let got: Vec<usize> = claimed
                        .iter()
                        .filter(|c| c.queue == QUEUES[*q])
                        .map(|c| self.jobs.iter().position(|j| j.id == c.id).expect("claimed a job nobody enqueued"))
                        .collect();
                    assert_eq!(
                        got.len(),
                        take,
                        "claim from {} took {} of {} due (room {})",
                        QUEUES[*q],
                        got.len(),
                        due.len(),
                        take
                    );
                    let cutoff = due.get(take.wrapping_sub(1)).map(|&i| self.jobs[i].due_at);
                    for &i in &got {
                        assert!(due.contains(&i), "claimed a job that was not due and scheduled");
                        assert!(Some(self.jobs[i].due_at) <= cutoff, "claimed a later job before an earlier one");
                    }
                    let expected_table = self.policies[*policy].1.clone();
                    let max = self.policies[*policy].0.max_attempts();
                    for &i in &got {
                        let c = claimed.iter().find(|c| c.id == self.jobs[i].id).unwrap();
                        let table = c.delay_table.clone().expect("a claim writes the delay table");
                        match &expected_table {
                            Some(t) => assert_eq!(&table, t, "delay table of policy {policy}"),
                            None => {
                                assert_eq!(table.len(), max as usize - 1);
                                assert!(
                                    table.iter().all(|d| JITTER_RANGE.contains(d)),
                                    "jitter out of range: {table:?}"
                                );
                            }
                        }
                        let j = &mut self.jobs[i];
                        let earlier = j.tables_seen.entry(*policy).or_insert_with(|| table.clone());
                        assert_eq!(earlier, &table, "the same policy wrote a different table for the same job");
                        j.attempt += 1;
                        j.max_attempts = Some(max);
                        j.table = Some(table);
                        j.owner = Some(WORKERS[*worker].to_string());
                        j.lease_until = Some(now + *lease_ms as Millis);
                        j.group = Some(group.clone());
                        let e = j.entry(now, JobState::Running);
                        e.worker = Some(WORKERS[*worker].to_string());
                        // Returned rows are the rows as they now are.
                        assert_eq!(c.state, JobState::Running);
                        assert_eq!(c.attempt, j.attempt);
                    }
                }
                assert_eq!(claimed.len(), *limit - left, "claimed jobs outside the requested queues");
            }
            Op::Heartbeat { worker, pick, skew, lease_ms } => {
                let Some(i) = self.pick(*pick) else { return };
                let j = &self.jobs[i];
                let w = worker.map(|w| WORKERS[w].to_string()).or_else(|| j.owner.clone()).unwrap_or("w0".into());
                let attempt = (j.attempt as i64 + *skew as i64).max(0) as u32;
                let status =
                    self.store.heartbeat(&w, &[(j.id, attempt)], Duration::from_millis(*lease_ms as u64)).unwrap();
                let holds = !j.deleted
                    && j.state == JobState::Running
                    && j.owner.as_deref() == Some(&w)
                    && j.attempt == attempt;
                if holds {
                    assert_eq!(status, vec![LeaseStatus::Held { cancel_requested: j.cancel_by.is_some() }]);
                    // Renewed when due (under two thirds of the lease and one heartbeat's gap, a
                    // third of it at most 2 s, left) or when it would end later than asked.
                    let lease = *lease_ms as Millis;
                    let due_under = lease - lease / 3 + (lease / 3).min(2_000);
                    if j.lease_until.is_some_and(|until| until < now + due_under || until > now + lease) {
                        self.jobs[i].lease_until = Some(now + lease);
                    }
                } else {
                    assert_eq!(status, vec![LeaseStatus::Lost], "a heartbeat without the lease renewed it");
                }
            }
            Op::Complete { worker, pick, skew, act } => {
                let Some(i) = self.pick(*pick) else { return };
                self.seq += 1;
                let message = format!("boom #{}", self.seq);
                let j = &self.jobs[i];
                let w = worker.map(|w| WORKERS[w].to_string()).or_else(|| j.owner.clone()).unwrap_or("w1".into());
                let attempt = (j.attempt as i64 + *skew as i64).max(0) as u32;
                let outcome = match act {
                    Act::Succeed => Outcome::Succeeded,
                    Act::Fail { detail } => Outcome::Failed {
                        message: message.clone(),
                        detail: detail.then(|| FailureDetail {
                            kind: "std::io::Error".into(),
                            message: message.clone(),
                            chain: vec!["disk full".into()],
                            backtrace: None,
                        }),
                        retry_in: None,
                    },
                    Act::Cancelled => Outcome::Cancelled,
                    Act::Quarantine => Outcome::Quarantined {
                        reason: QuarantineReason::NoHandler,
                        cause: format!("no handler for 'sm.job' ({})", self.seq),
                    },
                };
                let fenced =
                    self.store.complete(&Completion { job_id: j.id, worker_id: w.clone(), attempt, outcome }).unwrap();
                let passes = !j.deleted
                    && j.state == JobState::Running
                    && j.owner.as_deref() == Some(&w)
                    && j.attempt == attempt;
                if !passes {
                    assert_eq!(fenced, Fenced::Rejected, "a stale outcome passed the fence: {j:?} by {w}/{attempt}");
                    return;
                }
                let j = &mut self.jobs[i];
                match (act, j.cancel_by.clone()) {
                    (Act::Succeed, _) => {
                        j.finish(now, JobState::Succeeded, Some(w));
                    }
                    (Act::Cancelled, Some(actor)) => j.cancel_now(now, Some(w), &actor),
                    // The handler failed while asked to stop: that is the cancel, and what it
                    // failed with is kept as detail of the Cancelled entry.
                    (Act::Fail { detail }, Some(actor)) => {
                        j.cancel_now(now, Some(w), &actor);
                        j.log.last_mut().unwrap().detail = if *detail { Detail::Captured } else { Detail::NotCaptured };
                    }
                    (Act::Cancelled, None) => {
                        j.fail(now, Some(w), SELF_CANCEL, Detail::None);
                        // The text of a self-cancel is the store's to choose; only its kind is specified.
                        let e = j.log.last_mut().unwrap();
                        e.reason = None;
                        e.detail = Detail::Unchecked;
                    }
                    (Act::Fail { detail }, None) => {
                        j.fail(now, Some(w), &message, if *detail { Detail::Captured } else { Detail::NotCaptured })
                    }
                    (Act::Quarantine, _) => {
                        j.quarantine = Some(QuarantineReason::NoHandler);
                        j.cause = Some(format!("no handler for 'sm.job' ({})", self.seq));
                        let cause = j.cause.clone();
                        j.finish(now, JobState::Quarantined, Some(w)).reason = cause;
                    }
                }
                assert_eq!(fenced, Fenced::Accepted(j.state));
            }
            Op::HandBack { worker, pick, skew } => {
                let Some(i) = self.pick(*pick) else { return };
                let j = &self.jobs[i];
                let w = worker.map(|w| WORKERS[w].to_string()).or_else(|| j.owner.clone()).unwrap_or("w2".into());
                let attempt = (j.attempt as i64 + *skew as i64).max(0) as u32;
                let fenced = self.store.hand_back(&w, &[(j.id, attempt)]).unwrap();
                let passes = !j.deleted
                    && j.state == JobState::Running
                    && j.owner.as_deref() == Some(&w)
                    && j.attempt == attempt;
                if !passes {
                    assert_eq!(fenced, vec![Fenced::Rejected], "a hand-back without the lease passed the fence");
                    return;
                }
                let j = &mut self.jobs[i];
                match j.cancel_by.clone() {
                    // An operator asked it to stop: it ends Cancelled, as its handler would have.
                    Some(actor) => j.cancel_now(now, Some(w), &actor),
                    // The claim is undone: due as before, the attempt not consumed.
                    None => {
                        j.owner = None;
                        j.lease_until = None;
                        j.attempt -= 1;
                        let e = j.entry(now, JobState::Scheduled);
                        e.worker = Some(w);
                        e.reason = Some(HANDED_BACK.to_string());
                    }
                }
                assert_eq!(fenced, vec![Fenced::Accepted(j.state)]);
            }
            Op::Advance { ms } => self.clock.advance(Duration::from_millis(*ms as u64)),
            Op::Reap => {
                let reaped = self.store.reap_expired(10_000).unwrap();
                let mut expected = 0;
                for j in self.jobs.iter_mut().filter(|j| !j.deleted && j.state == JobState::Running) {
                    if j.lease_until.unwrap() >= now {
                        continue;
                    }
                    expected += 1;
                    let owner = j.owner.clone();
                    match j.cancel_by.clone() {
                        Some(actor) => j.cancel_now(now, owner, &actor),
                        None => j.fail(now, owner, LEASE_EXPIRED, Detail::None),
                    }
                }
                assert_eq!(reaped, expected, "lapsed leases reaped");
            }
            Op::Requeue { pick, permitted } => {
                let Some(i) = self.pick(*pick) else { return };
                let actor = if *permitted { OPERATOR } else { STRANGER };
                let result = self.store.requeue(actor, &[self.jobs[i].id]);
                if !permitted {
                    assert!(matches!(result, Err(Error::PermissionDenied { .. })), "{result:?}");
                    return;
                }
                let result = result.unwrap();
                let j = &mut self.jobs[i];
                if j.deleted {
                    assert_eq!(result, vec![RequeueResult::NotFound]);
                } else if matches!(j.state, JobState::DeadLettered | JobState::Quarantined) {
                    assert_eq!(result, vec![RequeueResult::Requeued { from: j.state }]);
                    j.attempt = 0;
                    j.due_at = now;
                    j.finished_at = None;
                    j.cause = None;
                    j.quarantine = None;
                    j.cancel_by = None;
                    j.entry(now, JobState::Scheduled).actor = Some(OPERATOR.into());
                } else {
                    assert_eq!(result, vec![RequeueResult::NotRequeueable { state: j.state }]);
                }
            }
            Op::Cancel { pick, permitted } => {
                let Some(i) = self.pick(*pick) else { return };
                let actor = if *permitted { OPERATOR } else { STRANGER };
                let result = self.store.cancel(actor, &[self.jobs[i].id]);
                if !permitted {
                    assert!(matches!(result, Err(Error::PermissionDenied { .. })), "{result:?}");
                    return;
                }
                let result = result.unwrap();
                let j = &mut self.jobs[i];
                if j.deleted {
                    assert_eq!(result, vec![CancelResult::NotFound]);
                    return;
                }
                match j.state {
                    JobState::Scheduled => {
                        assert_eq!(result, vec![CancelResult::Cancelled]);
                        j.cancel_now(now, None, OPERATOR);
                    }
                    JobState::Running => {
                        assert_eq!(result, vec![CancelResult::CancelRequested]);
                        j.cancel_by.get_or_insert_with(|| OPERATOR.into());
                    }
                    state => assert_eq!(result, vec![CancelResult::NotCancellable { state }]),
                }
            }
            Op::Sweep { age_ms } => {
                let cutoff = now - *age_ms as Millis;
                let n = self.store.sweep(cutoff, 10_000).unwrap();
                let mut expected = 0;
                for j in self.jobs.iter_mut().filter(|j| !j.deleted && j.state.is_terminal()) {
                    if j.finished_at.unwrap() < cutoff {
                        j.deleted = true;
                        expected += 1;
                    }
                }
                assert_eq!(n, expected, "retention sweep deleted");
            }
            Op::Purge { age_ms, permitted } => {
                let cutoff = now - *age_ms as Millis;
                let actor = if *permitted { OPERATOR } else { STRANGER };
                let result = self.store.purge(actor, cutoff, |_| {});
                if !permitted {
                    assert!(matches!(result, Err(Error::PermissionDenied { .. })), "{result:?}");
                    return;
                }
                let mut expected = 0;
                for j in self.jobs.iter_mut().filter(|j| !j.deleted && j.state.is_terminal()) {
                    if j.finished_at.unwrap() < cutoff {
                        j.deleted = true;
                        expected += 1;
                    }
                }
                assert_eq!(result.unwrap(), expected, "purge deleted");
            }
            Op::RequeueAll { states, permitted } => {
                let actor = if *permitted { OPERATOR } else { STRANGER };
                let filter = JobFilter { states: states.clone(), ..Default::default() };
                let result = self.store.requeue_matching(actor, &filter, |_| {});
                if !permitted {
                    assert!(matches!(result, Err(Error::PermissionDenied { .. })), "{result:?}");
                    return;
                }
                let mut expected = 0;
                // In log order: the store requeues in its own order, the model compares per job.
                for j in self.jobs.iter_mut().filter(|j| !j.deleted && states.contains(&j.state)) {
                    expected += 1;
                    j.attempt = 0;
                    j.due_at = now;
                    j.finished_at = None;
                    j.cause = None;
                    j.quarantine = None;
                    j.cancel_by = None;
                    j.entry(now, JobState::Scheduled).actor = Some(OPERATOR.into());
                }
                assert_eq!(result.unwrap(), expected, "bulk requeue of {states:?}");
            }
        }
    }

    /// Every job row and its whole log against the model.
    fn check(&self) {
        for m in &self.jobs {
            let row = self.store.job(m.id).unwrap();
            let history = self.store.history(m.id).unwrap();
            if m.deleted {
                assert!(row.is_none(), "swept job {} still there", m.id);
                assert!(history.is_empty(), "swept job {} left its log behind", m.id);
                continue;
            }
            let row = row.unwrap_or_else(|| panic!("job {} vanished", m.id));
            assert_eq!(row.state, m.state, "state of {}", m.id);
            assert_eq!(row.attempt, m.attempt, "attempt of {}", m.id);
            assert_eq!(row.max_attempts, m.max_attempts, "budget of {}", m.id);
            if let Some(max) = m.max_attempts {
                assert!(row.attempt <= max, "attempt {} over budget {max}", row.attempt);
            }
            assert_eq!(row.delay_table, m.table, "delay table of {}", m.id);
            assert_eq!(row.worker_group, m.group);
            assert_eq!(row.finished_at, m.finished_at, "finished_at of {} ({})", m.id, m.state);
            match m.state {
                JobState::Scheduled => assert_eq!(row.due_at, m.due_at, "due_at of {}", m.id),
                JobState::Running => {
                    assert_eq!(row.lease_owner, m.owner, "lease owner of {}", m.id);
                    assert_eq!(row.lease_expires_at, m.lease_until, "lease of {}", m.id);
                    assert_eq!(row.cancel_requested_by, m.cancel_by);
                }
                JobState::DeadLettered if m.cause.as_deref() == Some(SELF_CANCEL) => {
                    assert!(!row.terminal_cause.unwrap_or_default().is_empty(), "a dead-lettered job without a cause")
                }
                JobState::DeadLettered | JobState::Quarantined => {
                    assert_eq!(row.terminal_cause, m.cause, "terminal cause of {}", m.id)
                }
                JobState::Cancelled => {
                    let cause = row.terminal_cause.unwrap_or_default();
                    assert!(cause.contains(OPERATOR), "cancel cause {cause:?} does not name the operator")
                }
                // The model enqueues no workflow.
                JobState::Succeeded | JobState::Waiting => {}
            }
            if m.state != JobState::Running {
                assert_eq!(row.lease_owner, None);
                assert_eq!(row.lease_expires_at, None);
            }
            assert_eq!(row.quarantine_reason, m.quarantine);

            // The log is the exact history of the row.
            let got: Vec<Entry> = history
                .iter()
                .zip(m.log.iter())
                .map(|(t, want)| Entry {
                    at: t.at,
                    from: t.from,
                    to: t.to,
                    attempt: t.attempt,
                    worker: t.worker_id.clone(),
                    actor: t.actor.clone(),
                    reason: want.reason.as_ref().and(t.reason.clone()),
                    detail: match &t.detail {
                        _ if want.detail == Detail::Unchecked => Detail::Unchecked,
                        DetailStatus::None => Detail::None,
                        DetailStatus::NotCaptured => Detail::NotCaptured,
                        DetailStatus::Hidden { .. } | DetailStatus::Revealed(_) => Detail::Captured,
                    },
                })
                .collect();
            assert_eq!(history.len(), m.log.len(), "log length of {}: {history:#?}", m.id);
            assert_eq!(got, m.log, "log of {}", m.id);
            assert!(history.windows(2).all(|w| w[0].seq < w[1].seq));
            replay(&history, row.state, row.attempt);
        }
        // The counts the dashboards read agree with the rows.
        let counts = self.store.counts().unwrap();
        for state in JobState::ALL {
            let n = self.jobs.iter().filter(|j| !j.deleted && j.state == state).count() as u64;
            assert_eq!(counts.total(state), n, "job_counts for {state}");
        }
    }
}

/// Replaying a job's log alone gives its state and attempt, and every step is an edge of
/// SPEC.md's state machine.
fn replay(log: &[backwave::Transition], state: JobState, attempt: u32) {
    use JobState::*;
    let mut cur: Option<(JobState, u32)> = None;
    for t in log {
        assert_eq!(t.from, cur.map(|c| c.0), "log entry does not start where the last one ended");
        let ok = match (t.from, t.to) {
            (None, Scheduled) => t.attempt == 0,
            (Some(Scheduled), Running) => t.attempt == cur.unwrap().1 + 1 && t.worker_id.is_some(),
            // A claim handed back unstarted is undone: back to the attempt before it.
            (Some(Running), Scheduled) if t.reason.as_deref() == Some(HANDED_BACK) => {
                t.attempt + 1 == cur.unwrap().1 && t.worker_id.is_some()
            }
            (Some(Running), Scheduled | Succeeded | DeadLettered | Quarantined) => t.attempt == cur.unwrap().1,
            (Some(Running | Scheduled), Cancelled) => t.attempt == cur.unwrap().1 && t.actor.is_some(),
            (Some(DeadLettered | Quarantined), Scheduled) => t.attempt == 0 && t.actor.is_some(),
            _ => false,
        };
        assert!(ok, "illegal transition {:?} -> {} at attempt {}", t.from, t.to, t.attempt);
        cur = Some((t.to, t.attempt));
    }
    assert_eq!(cur, Some((state, attempt)), "replaying the log does not give the row");
}

/// One case, on a fresh store of the thread's backend.
fn follows_the_spec(policy: usize, ops: &[Op]) {
    let mut h = Harness::new(policy);
    for op in ops {
        h.apply(op);
        h.check();
    }
}

/// `both_backends!` by hand: proptest's macro makes the `#[test]` functions itself. The cases
/// and the regressions file (`state_machine.proptest-regressions`) are the same for both arms.
mod store_follows_the_spec_state_machine {
    use super::*;
    use crate::backend::{use_backend, Backend};

    proptest! {
        #[test]
        fn sqlite(policy in 0..6usize, ops in proptest::collection::vec(op(), 1..50)) {
            let _backend = use_backend(Backend::Sqlite);
            follows_the_spec(policy, &ops);
        }

        #[test]
        fn postgres(policy in 0..6usize, ops in proptest::collection::vec(op(), 1..50)) {
            let _backend = use_backend(Backend::Postgres);
            follows_the_spec(policy, &ops);
        }
    }
}
