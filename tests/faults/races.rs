//! Operators racing each other and the workers, through real `bw` processes: concurrent bulk
//! requeues, a requeue against a purge, a cancel against a worker's completions, bulk commands
//! SIGKILLed part-way, and commands against a store another process holds locked. Every test
//! but the lock's (SQLite's write lock) runs on both backends.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use backwave::store::{current_actor, ClaimRequest, Completion, Outcome, RawConnection};
use backwave::{Clock, JobId, JobState, NewJob, RetryPolicy, Store, WorkerInfo};

use super::support;
use crate::backend::{both_backends, plain_query, TestDb};

/// `bw --db <db>`, stdin closed (so nothing can prompt), no pinned clock.
pub(crate) fn bw(db: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(support::bw());
    c.arg("--db").arg(db).env_remove("BW_NOW").env_remove("BW_DB").stdin(Stdio::null());
    c
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A live worker that handles `wire_names`, so a bulk requeue does not skip them as jobs that
/// would only quarantine again.
fn register_live_worker(store: &Store, wire_names: Vec<String>) {
    let now = backwave::store::system_now();
    store
        .register_worker(&WorkerInfo {
            id: JobId::new().to_string(),
            group: "races".into(),
            host: "test".into(),
            pid: std::process::id(),
            wire_names,
            queues: vec!["q".into()],
            started_at: now,
            last_heartbeat_at: now,
            stale_after_ms: 3_600_000,
        })
        .unwrap();
}

/// `n` jobs that ran once and dead-lettered `ago` in the past; the current user may operate.
fn dead_lettered_store(db: &TestDb, n: usize, ago: Duration) -> Vec<JobId> {
    let clock = Clock::manual(backwave::store::system_now() - ago.as_millis() as i64);
    let store = Store::create(db).unwrap().with_clock(clock);
    store.bootstrap_admin(&current_actor()).unwrap();
    register_live_worker(&store, vec!["w".into()]);
    let ids = store
        .enqueue_many(&(0..n).map(|i| NewJob::new("w", "q", format!("{{\"n\":{i}}}"))).collect::<Vec<_>>())
        .unwrap();
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let claimed = store
        .claim(&ClaimRequest {
            worker_id: "w-1",
            group: "g",
            queues: &["q".to_string()],
            limit: n,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        })
        .unwrap();
    assert_eq!(claimed.len(), n);
    let done: Vec<Completion> = claimed
        .iter()
        .map(|j| Completion {
            job_id: j.id,
            worker_id: "w-1".into(),
            attempt: 1,
            outcome: Outcome::Failed { message: "gateway timeout".into(), detail: None, retry_in: None },
        })
        .collect();
    store.complete_many(&done).unwrap();
    assert_eq!(store.counts().unwrap().total(JobState::DeadLettered), n as u64);
    ids
}

/// Operator requeues per job: log entries back to Scheduled that name an actor.
fn requeues_per_job(db: &TestDb) -> HashMap<String, u32> {
    plain_query(
        db,
        "SELECT job_id, count(*) FROM transitions WHERE to_state = 'scheduled' AND actor IS NOT NULL GROUP BY job_id",
    )
    .iter()
    .map(|r| (r[0].as_str().to_string(), u32::try_from(r[1].as_i64()).unwrap()))
    .collect()
}

fn run_requeue_racers(racers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::new(dir.path());
    let ids = dead_lettered_store(&db, 1_000, Duration::from_secs(60));
    let children: Vec<_> = (0..racers)
        .map(|_| {
            bw(&db)
                .args(["--format", "json", "requeue", "--state", "dead-lettered", "--yes"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut reported = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a racing requeue failed: {}", String::from_utf8_lossy(&out.stderr));
        // A racer that found nothing left prints its (empty) plan instead of a count.
        reported += json(&out)["requeued"].as_u64().unwrap_or(0);
    }
    assert_eq!(reported, 1_000, "the racers together report {reported} requeues of 1,000 jobs");
    let per_job = requeues_per_job(&db);
    for id in &ids {
        assert_eq!(per_job.get(&id.to_string()), Some(&1), "job {id} was not requeued exactly once");
    }
    let store = Store::open(&db).unwrap();
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 1_000);
    assert!(store.check_integrity().unwrap().is_empty());
}

both_backends! {
    fn two_racing_bulk_requeues_requeue_each_job_exactly_once() {
        run_requeue_racers(2);
    }
}

both_backends! {
    fn four_racing_bulk_requeues_requeue_each_job_exactly_once() {
        run_requeue_racers(4);
    }
}

both_backends! {
    fn racing_requeue_and_purge_never_both_touch_a_job() {
        for round in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let db = TestDb::new(dir.path());
            let ids = dead_lettered_store(&db, 1_000, Duration::from_secs(3_600));
            let spawn = |args: &[&str]| {
                bw(&db).args(["--format", "json"]).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
            };
            // Alternate who starts first so that each wins some of the batches.
            let (requeue, purge) = if round % 2 == 0 {
                let r = spawn(&["requeue", "--state", "dead-lettered", "--yes"]);
                (r, spawn(&["purge", "--older-than", "1m", "--yes"]))
            } else {
                let p = spawn(&["purge", "--older-than", "1m", "--yes"]);
                (spawn(&["requeue", "--state", "dead-lettered", "--yes"]), p)
            };
            let (r, p) = (requeue.wait_with_output().unwrap(), purge.wait_with_output().unwrap());
            assert!(r.status.success(), "requeue: {}", String::from_utf8_lossy(&r.stderr));
            assert!(p.status.success(), "purge: {}", String::from_utf8_lossy(&p.stderr));
            let requeued = json(&r)["requeued"].as_u64().unwrap_or(0);
            let purged = json(&p)["jobs"].as_u64().unwrap();

            let store = Store::open(&db).unwrap();
            let per_job = requeues_per_job(&db);
            let mut left = 0;
            for id in &ids {
                match store.job(*id).unwrap() {
                    Some(job) => {
                        left += 1;
                        assert_eq!(job.state, JobState::Scheduled, "job {id} survived the purge without being requeued");
                        assert_eq!(per_job.get(&id.to_string()), Some(&1));
                    }
                    None => assert!(store.history(*id).unwrap().is_empty(), "purged job {id} left its log"),
                }
            }
            // A job requeued and then purged would be counted by both and missing from the store.
            assert_eq!(left, requeued, "round {round}: {requeued} reported requeued, {left} are in the store");
            assert_eq!(requeued + purged, 1_000, "round {round}: {requeued} requeued + {purged} purged");
            assert!(store.check_integrity().unwrap().is_empty());
        }
    }
}

both_backends! {
    fn cancel_racing_a_workers_completions_records_exactly_one_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        let store = Store::create(&db).unwrap();
        store.bootstrap_admin(&current_actor()).unwrap();
        let ids = store.enqueue_many(&(0..300).map(|_| NewJob::new("w", "q", "{}")).collect::<Vec<_>>()).unwrap();
        drop(store);

        let worker_db = db.target();
        let worker = std::thread::spawn(move || {
            let store = Store::open(&worker_db).unwrap();
            let policy = RetryPolicy::new(3, Duration::ZERO).unwrap();
            let queues = ["q".to_string()];
            let mut completed = 0;
            loop {
                let claimed = store
                    .claim(&ClaimRequest {
                        worker_id: "racer",
                        group: "g",
                        queues: &queues,
                        limit: 7,
                        lease: Duration::from_secs(60),
                        policy: &policy,
                        handler_policies: &[],
                    })
                    .unwrap();
                if claimed.is_empty() {
                    return completed;
                }
                let done: Vec<Completion> = claimed
                    .iter()
                    .map(|j| Completion {
                        job_id: j.id,
                        worker_id: "racer".into(),
                        attempt: j.attempt,
                        outcome: Outcome::Succeeded,
                    })
                    .collect();
                completed += store.complete_many(&done).unwrap().len();
            }
        });
        let out = bw(&db).args(["--format", "json", "cancel"]).args(ids.iter().map(|id| id.to_string())).output().unwrap();
        let claimed_and_completed = worker.join().unwrap();
        // 1 when some ids were no longer cancellable: the worker finished them first.
        assert!(matches!(out.status.code(), Some(0 | 1)), "bw cancel: {}", String::from_utf8_lossy(&out.stderr));
        let results = json(&out)["results"].as_array().cloned().unwrap();
        assert_eq!(results.len(), ids.len());

        let store = Store::open(&db).unwrap();
        let (mut cancelled, mut succeeded) = (0, 0);
        for (id, r) in ids.iter().zip(&results) {
            let job = store.job(*id).unwrap().unwrap();
            let log = store.history(*id).unwrap();
            let outcomes: Vec<_> = log.iter().filter(|t| t.to.is_terminal()).collect();
            assert_eq!(outcomes.len(), 1, "job {id} has {} terminal entries: {log:#?}", outcomes.len());
            match job.state {
                JobState::Cancelled => {
                    cancelled += 1;
                    assert_eq!(r["result"], "Cancelled");
                    assert!(log.iter().all(|t| t.to != JobState::Running), "job {id} ran after it was cancelled");
                }
                JobState::Succeeded => {
                    succeeded += 1;
                    assert_ne!(r["result"], "Cancelled", "bw said {id} was cancelled but it succeeded");
                }
                other => panic!("job {id} ended {other}"),
            }
        }
        assert_eq!(cancelled + succeeded, ids.len());
        assert_eq!(succeeded, claimed_and_completed);
        eprintln!("cancel race: {cancelled} cancelled before a claim, {succeeded} completed by the worker");
    }
}

/// A store from `bw generate`, with a live worker for every wire name in it.
fn generated_store(db: &TestDb, jobs: u64) {
    let out = bw(db).args(["generate", "--jobs", &jobs.to_string()]).output().unwrap();
    assert!(out.status.success(), "bw generate: {}", String::from_utf8_lossy(&out.stderr));
    let store = Store::open(db).unwrap();
    store.bootstrap_admin(&current_actor()).unwrap();
    let mut names: Vec<String> = store
        .raw_query("SELECT DISTINCT wire_name FROM jobs", &[])
        .unwrap()
        .into_iter()
        .map(|r| r[0].as_str().to_string())
        .collect();
    names.sort();
    register_live_worker(&store, names);
}

/// Start `bw args…`, and SIGKILL it as soon as it reports its first committed batch.
pub(crate) fn kill_after_first_batch(db: &TestDb, args: &[&str], progress: &str) {
    let mut child = bw(db).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let hit = line.starts_with(progress);
        seen.push(line);
        if hit {
            break;
        }
    }
    // SAFETY: kill(2) on our own unreaped child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert!(
        seen.last().is_some_and(|l| l.starts_with(progress)),
        "bw {} never reported progress: {seen:?}",
        args.join(" ")
    );
    assert_eq!(status.code(), None, "bw {} finished before it could be killed: {seen:?}", args.join(" "));
}

/// Each job's log starts with its creation and ends where its row is.
pub(crate) fn assert_log_matches_rows(db: &TestDb) {
    support::assert_intact(db);
    let bad: Vec<(String, String, Option<String>)> = plain_query(
        db,
        "SELECT j.id, j.state, (SELECT t.to_state || '/' || t.attempt FROM transitions t WHERE t.job_id = j.id
                                    ORDER BY t.seq DESC LIMIT 1)
             FROM jobs j
             WHERE coalesce((SELECT t.to_state || '/' || t.attempt FROM transitions t WHERE t.job_id = j.id
                             ORDER BY t.seq DESC LIMIT 1), '') != j.state || '/' || j.attempt
                OR NOT EXISTS (SELECT 1 FROM transitions t WHERE t.job_id = j.id AND t.from_state IS NULL)",
    )
    .into_iter()
    .map(|r| (r[0].as_str().to_string(), r[1].as_str().to_string(), r[2].as_opt_str().map(str::to_string)))
    .collect();
    assert!(bad.is_empty(), "{} jobs whose log disagrees with the row, e.g. {:?}", bad.len(), &bad[..bad.len().min(3)]);
}

both_backends! {
    fn bulk_requeue_killed_part_way_leaves_each_job_whole_and_a_rerun_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        generated_store(&db, 40_000);
        let store = Store::open(&db).unwrap();
        let dead: Vec<JobId> = store
            .raw_query("SELECT id FROM jobs WHERE state = 'dead-lettered'", &[])
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().parse().unwrap())
            .collect();
        assert!(dead.len() > 2_000, "the generated store has only {} dead-lettered jobs", dead.len());
        let before = requeues_per_job(&db);

        kill_after_first_batch(&db, &["requeue", "--state", "dead-lettered", "--yes"], "requeued ");
        assert_log_matches_rows(&db);
        let after_kill = requeues_per_job(&db);
        let mut changed = 0;
        for id in &dead {
            let job = store.job(*id).unwrap().unwrap();
            let added = after_kill.get(&id.to_string()).unwrap_or(&0) - before.get(&id.to_string()).unwrap_or(&0);
            match job.state {
                JobState::Scheduled => {
                    assert_eq!((added, job.attempt, job.finished_at), (1, 0, None), "job {id} half requeued");
                    changed += 1;
                }
                JobState::DeadLettered => assert_eq!(added, 0, "job {id} has a requeue entry but is still dead-lettered"),
                other => panic!("job {id} is {other}"),
            }
        }
        assert!(changed > 0 && changed < dead.len(), "the kill was not part-way: {changed} of {} requeued", dead.len());

        let out = bw(&db).args(["requeue", "--state", "dead-lettered", "--yes"]).output().unwrap();
        assert!(out.status.success(), "the rerun failed: {}", String::from_utf8_lossy(&out.stderr));
        assert_log_matches_rows(&db);
        let after = requeues_per_job(&db);
        for id in &dead {
            let added = after.get(&id.to_string()).unwrap_or(&0) - before.get(&id.to_string()).unwrap_or(&0);
            assert_eq!(added, 1, "job {id} was requeued {added} times over the two runs");
        }
        assert_eq!(store.counts().unwrap().total(JobState::DeadLettered), 0);
        eprintln!("interrupted requeue: {changed} of {} requeued before the kill; the rerun did the rest", dead.len());
    }
}

both_backends! {
    fn purge_killed_part_way_leaves_each_job_whole_and_a_rerun_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::new(dir.path());
        generated_store(&db, 40_000);
        let store = Store::open(&db).unwrap();
        let terminal_before = store.count_purgeable(i64::MAX).unwrap();
        // `--older-than 0s`: every terminal job, so that the run has many batches to be killed in.
        kill_after_first_batch(&db, &["purge", "--older-than", "0s", "--yes"], "deleted ");
        assert_log_matches_rows(&db);
        let terminal_after_kill = store.count_purgeable(i64::MAX).unwrap();
        assert!(
            terminal_after_kill > 0 && terminal_after_kill < terminal_before,
            "the kill was not part-way: {terminal_after_kill} of {terminal_before} terminal jobs left"
        );
        let out = bw(&db).args(["purge", "--older-than", "0s", "--yes"]).output().unwrap();
        assert!(out.status.success(), "the rerun failed: {}", String::from_utf8_lossy(&out.stderr));
        assert_log_matches_rows(&db);
        assert_eq!(store.count_purgeable(i64::MAX).unwrap(), 0, "the rerun left terminal jobs");
        let orphans = store
            .raw_scalar(
                "SELECT count(*) FROM transitions t WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = t.job_id)",
                &[],
            )
            .unwrap()
            .as_i64();
        assert_eq!(orphans, 0, "purged jobs left log entries behind");
        eprintln!(
            "interrupted purge: {} of {terminal_before} deleted before the kill",
            terminal_before - terminal_after_kill
        );
    }
}

/// Hold the store's write lock from another connection until told to let go.
fn hold_write_lock(db: &Path) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let db = db.to_path_buf();
    let holder = std::thread::spawn(move || {
        let conn = RawConnection::open(&db).unwrap();
        conn.batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        let _ = release_rx.recv();
        conn.batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    (release_tx, holder)
}

#[test]
fn commands_against_a_locked_store_wait_the_busy_timeout_then_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::sqlite(dir.path().join("busy.db"));
    let ids = dead_lettered_store(&db, 20, Duration::from_secs(3_600));
    let id = ids[0].to_string();
    let (release, holder) = hold_write_lock(db.file());

    let writes: [&[&str]; 5] = [
        &["requeue", &id],
        &["cancel", &id],
        &["requeue", "--state", "dead-lettered", "--yes"],
        &["purge", "--older-than", "1m", "--yes"],
        &["enqueue", "w", "--queue", "q"],
    ];
    for args in writes {
        let started = Instant::now();
        let out = bw(&db).args(["--busy-timeout", "300ms"]).args(args).output().unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "bw {} under a lock: {stderr}", args.join(" "));
        assert!(stderr.contains("lock"), "bw {}: the error does not name the lock: {stderr}", args.join(" "));
        // Which store, and how long it waited (found at 3 a.m.: the message named neither).
        assert!(stderr.contains("waited --busy-timeout 300ms)"), "bw {}: {stderr}", args.join(" "));
        assert!(stderr.contains(&format!("'{}'", db.arg())), "bw {}: the store is not named: {stderr}", args.join(" "));
        assert_eq!(stderr.trim_end().lines().count(), 1, "not a one-line error: {stderr}");
        assert!(
            took >= Duration::from_millis(300),
            "bw {} gave up after {took:?}, before its busy timeout",
            args.join(" ")
        );
        assert!(took < Duration::from_secs(4), "bw {} waited {took:?} with a 300ms busy timeout", args.join(" "));
    }
    // Readers are not blocked by a writer (WAL).
    for args in
        [&["jobs", "list", "--state", "dead-lettered"][..], &["stats"], &["log", "tail"], &["jobs", "show", &id]]
    {
        let out = bw(&db).args(["--busy-timeout", "300ms"]).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "bw {} while a writer holds the lock: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    release.send(()).unwrap();
    holder.join().unwrap();

    let store = Store::open(&db).unwrap();
    assert!(store.check_integrity().unwrap().is_empty());
    assert_eq!(store.counts().unwrap().total(JobState::DeadLettered), 20, "a refused command changed jobs");
    assert_eq!(store.counts().unwrap().total(JobState::Scheduled), 0);
    drop(store);
    // With the lock gone, the same command goes through.
    let out = bw(&db).args(["--busy-timeout", "300ms", "requeue", &id]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
