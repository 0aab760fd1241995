//! The crash soak: real worker processes (`examples/faults_worker.rs`) drain a few thousand jobs
//! that succeed, fail, panic or outlive their lease, while the test SIGKILLs a random worker every
//! few hundred milliseconds (and now and then SIGSTOPs one for twice its lease, so that it wakes
//! up a stale worker) and starts replacements. Afterwards the log must tell one consistent story
//! per job. `BW_SOAK_SECS=600 cargo test --test runner faults::soak -- --nocapture` keeps the faults
//! coming, topping the queue up, for as long as asked. It runs on both backends: on PostgreSQL
//! the worker processes stand in for separate hosts sharing one database.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use backwave::store::RawValue;
use backwave::{JobState, NewJob, Store};

use super::support;
use crate::backend::{both_backends, plain_query, TestDb};

const LEASE_MS: u64 = 1_000;
const CONCURRENCY: usize = 4;
const MAX_ATTEMPTS: u32 = 4;
const WORKERS: usize = 4;
const JOBS: usize = 2_000;
/// The default run gives up on faults after this long even if jobs are left, then drains.
const FAULT_PHASE_MAX: Duration = Duration::from_secs(35);
const DRAIN_MAX: Duration = Duration::from_secs(30);

/// xorshift64*: the soak's only randomness, seeded from the clock and printed, so a failing run
/// can be repeated with `BW_SOAK_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Worker {
    child: Child,
    id: String,
}

/// Start a worker. A start can find the store locked past its busy timeout while SIGSTOPped
/// workers froze holding the write lock one after another (the harness's own doing): like a
/// supervisor, try again.
fn spawn_worker(bin: &Path, db: &TestDb, flavor: &str) -> Worker {
    let mut last = String::new();
    for _ in 0..10 {
        let mut child = Command::new(bin)
            .arg(db)
            .arg(LEASE_MS.to_string())
            .arg(CONCURRENCY.to_string())
            .arg(MAX_ATTEMPTS.to_string())
            .arg(flavor)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start faults_worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        if let Some(id) = line.strip_prefix("ready ").map(|s| s.trim().to_string()) {
            // Drain its stderr in the background so that a chatty worker never blocks on it.
            let mut stderr = child.stderr.take().unwrap();
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return Worker { child, id };
        }
        let _ = child.kill();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        let _ = child.wait();
        assert!(err.contains("Busy"), "faults_worker did not start: {line:?} {err}");
        last = err;
    }
    panic!("faults_worker could not start in 10 tries: {last}");
}

fn signal(w: &Worker, sig: libc::c_int) {
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(w.child.id() as libc::pid_t, sig) };
}

fn kill(mut w: Worker) {
    signal(&w, libc::SIGKILL);
    let _ = w.child.wait();
}

fn soak_jobs(n: usize, rng: &mut Rng) -> Vec<NewJob> {
    (0..n)
        .map(|_| {
            let (kind, ms) = match rng.below(100) {
                0..70 => ("ok", rng.below(6)),
                70..80 => ("fail", 0),
                80..88 => ("flaky", 0),
                88..95 => ("panic", 0),
                _ => ("slow", LEASE_MS + 200),
            };
            NewJob::new("soak", "soak", format!(r#"{{"kind":"{kind}","ms":{ms}}}"#))
        })
        .collect()
}

fn unfinished(store: &Store) -> u64 {
    let c = store.counts().unwrap();
    c.total(backwave::JobState::Scheduled) + c.total(backwave::JobState::Running)
}

both_backends! {
    fn crash_soak_every_job_ends_once_with_a_consistent_log() {
        crash_soak("sync");
    }

    /// The same soak with the workers' handlers registered with `handle_async` (their waits
    /// `tokio::time::sleep` raced against `ctx.cancelled()`).
    fn crash_soak_with_async_handlers_every_job_ends_once_with_a_consistent_log() {
        crash_soak("async");
    }
}

/// The soak, its workers' handlers registered as `flavor` (`sync` or `async`).
fn crash_soak(flavor: &str) {
    let soak_secs: Option<u64> = std::env::var("BW_SOAK_SECS").ok().and_then(|s| s.parse().ok());
    let seed = std::env::var("BW_SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("crash soak ({flavor} handlers): seed {seed} (BW_SOAK_SEED={seed} repeats the fault schedule)");
    let mut rng = Rng(seed);
    let bin = crate::programs::example("faults_worker");
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(dir.path());
    let store = Store::create(&db).unwrap();
    store.bootstrap_admin(&backwave::store::current_actor()).unwrap();
    store.enqueue_many(&soak_jobs(JOBS, &mut rng)).unwrap();
    let mut enqueued = JOBS;
    // An operator requeues the dead letters now and then, in the middle of the crashes.
    let mut operators: Vec<std::process::Child> = Vec::new();
    let mut last_requeue = Instant::now();
    let mut operators_started = 0;

    let started = Instant::now();
    let mut live: Vec<Worker> = (0..WORKERS).map(|_| spawn_worker(&bin, &db, flavor)).collect();
    let mut stalled: Vec<(Worker, Instant)> = Vec::new();
    let mut faulted: Vec<String> = Vec::new();
    let (mut kills, mut stalls) = (0, 0);
    loop {
        std::thread::sleep(Duration::from_millis(150 + rng.below(250)));
        let elapsed = started.elapsed();
        // Wake stalled workers: each comes back holding leases that have been reaped.
        let (wake, keep): (Vec<_>, Vec<_>) = stalled.into_iter().partition(|(_, until)| Instant::now() >= *until);
        stalled = keep;
        for (w, _) in wake {
            signal(&w, libc::SIGCONT);
            live.push(w);
        }
        match soak_secs {
            Some(secs) if elapsed < Duration::from_secs(secs) && unfinished(&store) < 500 => {
                store.enqueue_many(&soak_jobs(1_000, &mut rng)).unwrap();
                enqueued += 1_000;
            }
            Some(secs) if elapsed < Duration::from_secs(secs) => {}
            Some(_) => break,
            None if unfinished(&store) == 0 || elapsed > FAULT_PHASE_MAX => break,
            None => {}
        }
        // Twice in the default run (each requeue brings the always-failing jobs back for
        // another round), every 3 s through a long soak; only once there are dead letters.
        let dead = store.counts().unwrap().total(backwave::JobState::DeadLettered);
        if dead > 0 && last_requeue.elapsed() > Duration::from_secs(3) && (soak_secs.is_some() || operators_started < 2)
        {
            operators_started += 1;
            operators.push(
                Command::new(support::bw())
                    .arg("--db")
                    .arg(&db)
                    .args(["--format", "json", "requeue", "--state", "dead-lettered", "--yes"])
                    .env_remove("BW_NOW")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            last_requeue = Instant::now();
        }
        let victim = live.swap_remove(rng.below(live.len() as u64) as usize);
        faulted.push(victim.id.clone());
        if rng.below(6) == 0 {
            signal(&victim, libc::SIGSTOP);
            let stall = Duration::from_millis(2 * LEASE_MS + rng.below(LEASE_MS));
            // Woken by a timer, not by this loop: the loop may be waiting to start a replacement
            // that needs the very lock the stalled worker froze holding.
            let pid = victim.child.id() as libc::pid_t;
            std::thread::spawn(move || {
                std::thread::sleep(stall);
                // SAFETY: kill(2); the child is reaped only after `until` below has passed.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            });
            stalled.push((victim, Instant::now() + stall + Duration::from_millis(50)));
            stalls += 1;
        } else {
            kill(victim);
            kills += 1;
        }
        while live.len() < WORKERS {
            live.push(spawn_worker(&bin, &db, flavor));
        }
    }
    let fault_phase = started.elapsed();
    let mut requeued = 0;
    for op in operators.drain(..) {
        let out = op.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // 1: some dead letters would only quarantine again (no live worker at that instant).
        assert!(matches!(out.status.code(), Some(0 | 1)), "bw requeue during the soak: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        requeued += doc["requeued"].as_u64().unwrap_or(0);
    }
    for (w, _) in stalled.drain(..) {
        signal(&w, libc::SIGCONT);
        live.push(w);
    }
    let drain_started = Instant::now();
    while unfinished(&store) > 0 && drain_started.elapsed() < DRAIN_MAX {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = unfinished(&store);
    for w in live.drain(..) {
        kill(w);
    }
    assert_eq!(left, 0, "{left} jobs were still not terminal {DRAIN_MAX:?} after the faults stopped");

    let report = verify(&db, &faulted);
    eprintln!(
        "crash soak: {enqueued} jobs, {kills} SIGKILLs, {stalls} SIGSTOPs in {:.1}s of faults, drained in {:.1}s more; \
         {} attempts, {} lapsed leases reaped, {} claims handed back unstarted, {requeued} dead letters requeued by bw, \
         {} succeeded, {} dead-lettered",
        fault_phase.as_secs_f64(),
        drain_started.elapsed().as_secs_f64(),
        report.attempts,
        report.lapsed,
        report.handed_back,
        report.succeeded,
        report.dead_lettered,
    );
    assert_eq!(report.jobs, enqueued as u64);
    assert_eq!(report.requeues, requeued, "bw reported {requeued} requeues, the log holds {}", report.requeues);
    assert!(kills == 0 || report.lapsed > 0, "{kills} workers were killed mid-drain but no lease ever lapsed");
}

#[derive(Debug, Default)]
struct Report {
    jobs: u64,
    attempts: u64,
    lapsed: u64,
    succeeded: u64,
    dead_lettered: u64,
    /// Operator requeues in the log.
    requeues: u64,
    /// Claims handed back unstarted (jobs claimed ahead behind handlers busy with slow jobs).
    handed_back: u64,
}

/// A job row as `verify` reads it: id, state, attempt, payload, terminal cause.
type JobRow = (String, String, u32, Vec<u8>, Option<String>);

struct Row {
    from: Option<String>,
    to: String,
    attempt: u32,
    worker: Option<String>,
    actor: Option<String>,
    reason: Option<String>,
}

/// Read the finished store with plain SQL (not through the code under test) and check that each
/// job's log is one consistent story that ends where its row is.
fn verify(db: &TestDb, faulted: &[String]) -> Report {
    support::assert_intact(db);
    let mut report = Report::default();
    let mut logs: HashMap<String, Vec<Row>> = HashMap::new();
    let text = |v: &RawValue| v.as_opt_str().map(str::to_string);
    let u32_of = |v: &RawValue| u32::try_from(v.as_i64()).unwrap();
    let rows = plain_query(
        db,
        "SELECT job_id, from_state, to_state, attempt, worker_id, actor, reason FROM transitions ORDER BY seq",
    );
    for r in rows {
        let row = Row {
            from: text(&r[1]),
            to: r[2].as_str().to_string(),
            attempt: u32_of(&r[3]),
            worker: text(&r[4]),
            actor: text(&r[5]),
            reason: text(&r[6]),
        };
        logs.entry(r[0].as_str().to_string()).or_default().push(row);
    }
    let jobs: Vec<JobRow> = plain_query(db, "SELECT id, state, attempt, payload, terminal_cause FROM jobs")
        .iter()
        .map(|r| {
            (r[0].as_str().to_string(), r[1].as_str().to_string(), u32_of(&r[2]), r[3].as_bytes().to_vec(), text(&r[4]))
        })
        .collect();
    for (id, state, attempt, payload, cause) in jobs {
        report.jobs += 1;
        let log = logs.get(&id).unwrap_or_else(|| panic!("job {id} has no log"));
        // Exactly one terminal state, and the log ends there.
        assert!(
            ["succeeded", "dead-lettered", "quarantined", "cancelled"].contains(&state.as_str()),
            "job {id} ended {state}"
        );
        let last = log.last().unwrap();
        assert_eq!((last.to.as_str(), last.attempt), (state.as_str(), attempt), "job {id}: the log ends elsewhere");
        let succeeded = log.iter().filter(|r| r.to == "succeeded").count();
        assert!(succeeded <= 1, "job {id} reached Succeeded {succeeded} times");
        let since_requeue = log.iter().rposition(|r| r.actor.is_some() && r.to == "scheduled").map_or(0, |p| p + 1);
        // A claim a worker handed back unstarted is undone: it ran nothing and counts no attempt.
        let handed_back = |r: &&Row| r.reason.as_deref() == Some(backwave::store::HANDED_BACK);
        let claims = log[since_requeue..].iter().filter(|r| r.to == "running").count() as u32;
        let runs = claims - log[since_requeue..].iter().filter(handed_back).count() as u32;
        assert_eq!(runs, attempt, "job {id}: attempt {attempt} but {runs} claims run in its log");
        assert!(attempt <= MAX_ATTEMPTS, "job {id} ran {attempt} times, over its budget of {MAX_ATTEMPTS}");

        // Each attempt has exactly one outcome, recorded for the worker that held its lease:
        // a lapsed lease appears once as a failed attempt, a stale worker's word never.
        let mut open: Option<(u32, Option<String>)> = None;
        let mut prev: Option<&str> = None;
        for r in log {
            assert_eq!(r.from.as_deref(), prev, "job {id}: the log skips a state");
            prev = Some(&r.to);
            if r.actor.is_some() && r.to == "scheduled" {
                report.requeues += 1;
            }
            if r.to == "running" {
                assert!(open.is_none(), "job {id}: attempt {} claimed while another was open", r.attempt);
                open = Some((r.attempt, r.worker.clone()));
                report.attempts += 1;
            } else if r.from.as_deref() == Some("running") {
                let (a, w) = open.take().unwrap_or_else(|| panic!("job {id}: an outcome without a claim"));
                // A hand-back goes back to the attempt before the claim it undoes.
                let back_to = if handed_back(&r) { a - 1 } else { a };
                if handed_back(&r) {
                    // Counted as an attempt at its claim, which this undoes.
                    report.handed_back += 1;
                    report.attempts -= 1;
                }
                assert_eq!(r.attempt, back_to, "job {id}: {:?} at attempt {} closes attempt {a}", r.reason, r.attempt);
                assert_eq!(r.worker, w, "job {id}: attempt {a} of worker {w:?} closed by {:?}", r.worker);
                if r.reason.as_deref() == Some(backwave::store::LEASE_EXPIRED) {
                    report.lapsed += 1;
                    let owner = w.unwrap_or_default();
                    assert!(faulted.contains(&owner), "job {id}: the lease of worker {owner}, never faulted, lapsed");
                }
            }
        }
        assert!(open.is_none(), "job {id}: an attempt never ended");

        // The outcome fits what the handler does.
        let payload = String::from_utf8(payload).unwrap();
        let cause = cause.unwrap_or_default();
        match state.as_str() {
            "succeeded" => {
                report.succeeded += 1;
                assert!(!payload.contains("\"fail\""), "job {id} ({payload}) cannot succeed")
            }
            "dead-lettered" => {
                report.dead_lettered += 1;
                assert_eq!(attempt, MAX_ATTEMPTS, "job {id} dead-lettered before its budget ran out");
                assert!(
                    payload.contains("\"fail\"") || cause == backwave::store::LEASE_EXPIRED,
                    "job {id} ({payload}) dead-lettered with {cause:?}"
                );
            }
            other => panic!("job {id} ({payload}) ended {other}"),
        }
    }
    // The counts dashboards read (kept by triggers on SQLite, folded deltas on PostgreSQL) agree
    // with the rows.
    let counts = Store::open(db).unwrap().counts().unwrap();
    for row in plain_query(db, "SELECT queue, state, count(*) FROM jobs GROUP BY queue, state") {
        let (queue, state, actual) = (row[0].as_str(), row[1].as_str().parse::<JobState>().unwrap(), row[2].as_i64());
        let counted = counts.by_queue.get(queue).and_then(|q| q.get(&state)).copied().unwrap_or(0);
        assert_eq!(counted, actual as u64, "the counts say {counted} {queue} {state}, the rows say {actual}");
    }
    let counted: u64 = counts.by_queue.values().flat_map(|q| q.values()).sum();
    assert_eq!(counted, report.jobs, "the counts hold {counted} jobs, the rows {}", report.jobs);
    report
}
