//! Benchmark: `bw` against the `sqlite3` shell on a large store (`cargo bench --bench cli`).
//!
//! Each everyday command is run as a whole process (start-up, opening the store, the query,
//! printing) and compared with the `sqlite3` shell running the hand-written query an operator
//! would otherwise type, also as a whole process. Median of several runs each; target ratio
//! <= 1.3; `pause queue Q` and `run-now ID` against the INSERT / UPDATE an operator would type
//! (target <= 1.3 as well). Also: the stats cause groups in-process (target <= 100 ms) and a bulk requeue of
//! 100,000 dead-lettered jobs (target <= 2 s).
//!
//! The 1,000,000-job store is built once with the hidden `bw generate` and shared with the `top`
//! benchmark at target/bench/top-1m.db (or BW_BENCH_STORE; BW_BENCH_JOBS changes the size).
//! The requeue store is built through the library at target/bench/cli-requeue-100k.db and
//! copied before each run, so every run requeues the same 100,000 jobs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

use backwave::store::{ClaimRequest, Completion, Outcome};
use backwave::{NewJob, RetryPolicy, Store};
use bw::cli::output::thousands;

const RUNS: usize = 15;
const ACTOR_NOTE: &str = "bw runs as the OS user; the bench makes it admin of the stores it uses";

fn main() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_bw"));
    let (big, _) = common::large_store(bin.to_str().unwrap());
    let store = Store::open(&big).expect("open the bench store");
    let total_jobs = store.raw_scalar("SELECT count(*) FROM jobs", &[]).unwrap().as_i64();
    let total_log = store.raw_scalar("SELECT max(seq) FROM transitions", &[]).unwrap().as_i64();
    let dead_id = store
        .raw_scalar(
            "SELECT id FROM jobs WHERE state = 'dead-lettered' ORDER BY finished_at DESC LIMIT 1 OFFSET 1000",
            &[],
        )
        .unwrap()
        .as_str()
        .to_string();
    let db = big.to_str().unwrap();

    println!("bw vs the sqlite3 shell, whole processes (start-up included), median of {RUNS} interleaved runs");
    println!(
        "store: {} jobs, {} log entries ({})",
        thousands(total_jobs as u64),
        thousands(total_log as u64),
        big.display()
    );
    println!();
    println!(
        "{:<36}  {:>9}  {:>9}  {:>6}  {:>8}  {:>8}  {:>6}  {:<6}",
        "COMMAND (target ratio <= 1.3)", "bw wall", "sqlite3", "RATIO", "bw cpu", "sqlite3", "RATIO", "TARGET"
    );

    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "jobs list --state dead-lettered -n50",
            args(&["jobs", "list", "--state", "dead-lettered", "--limit", "50"]),
            "SELECT id, state, wire_name, queue, attempt, max_attempts, finished_at, terminal_cause FROM jobs \
             WHERE state = 'dead-lettered' ORDER BY finished_at DESC LIMIT 50; \
             SELECT count(*) FROM jobs WHERE state = 'dead-lettered';"
                .into(),
        ),
        (
            "jobs show ID",
            args(&["jobs", "show", &dead_id]),
            format!(
                "SELECT * FROM jobs WHERE id = '{dead_id}'; \
                 SELECT seq, at, from_state, to_state, attempt, worker_id, actor, reason, detail_status \
                 FROM transitions WHERE job_id = '{dead_id}' ORDER BY seq;"
            ),
        ),
        (
            "stats (sqlite3: GROUP BY counts)",
            args(&["stats"]),
            "SELECT queue, state, count(*) FROM jobs GROUP BY queue, state;".into(),
        ),
        (
            "log tail -n 100",
            args(&["log", "tail", "-n", "100"]),
            "SELECT * FROM (SELECT seq, job_id, at, from_state, to_state, attempt, worker_id, actor, reason \
             FROM transitions ORDER BY seq DESC LIMIT 100) ORDER BY seq;"
                .into(),
        ),
    ];
    for (name, bw_args, sql) in &cases {
        compare(&bin, db, name, bw_args, sql);
    }

    // Incident writes on one job / one name, against the hand-written statement an operator
    // would type in the shell. Both sides write: bw's run also checks `operate` and writes the
    // audit entry, in one transaction.
    let me = backwave::store::current_actor();
    store.bootstrap_admin(&me).unwrap();
    let (queue, scheduled_id) = store
        .raw_query("SELECT queue, id FROM jobs WHERE state = 'scheduled' ORDER BY due_at DESC LIMIT 1", &[])
        .unwrap()
        .first()
        .map(|r| (r[0].as_str().to_string(), r[1].as_str().to_string()))
        .expect("the bench store has scheduled jobs");
    let writes: Vec<(&str, Vec<String>, String)> = vec![
        (
            "pause queue Q",
            args(&["pause", "queue", &queue]),
            format!(
                "INSERT INTO pauses (kind, name, paused_by, paused_at, until) VALUES ('queue', '{queue}', 'me', \
                 1, NULL) ON CONFLICT (kind, name) DO UPDATE SET paused_by = 'me', paused_at = 1, until = NULL;"
            ),
        ),
        (
            "run-now ID",
            args(&["run-now", &scheduled_id]),
            format!("UPDATE jobs SET due_at = 1, updated_at = 1 WHERE id = '{scheduled_id}' AND state = 'scheduled';"),
        ),
    ];
    if store.permissions(&me).unwrap().contains(&backwave::Permission::Operate) {
        for (name, bw_args, sql) in &writes {
            compare(&bin, db, name, bw_args, sql);
        }
        // Leave the shared store as it was found: nothing paused.
        run(Command::new(&bin).args(["--db", db, "resume", "queue", &queue]));
    } else {
        println!("(pause / run-now rows skipped: {me} may not operate on {db})");
    }

    // The cause groups `bw stats` prints, in-process (the counts above come from job_counts).
    let t = Instant::now();
    let groups = store.cause_groups(10).unwrap();
    let causes = t.elapsed();
    let t = Instant::now();
    let q = store.quarantine_groups().unwrap();
    let quarantines = t.elapsed();
    println!();
    println!("{:<44}  {:>9}  {:<6}", "IN-PROCESS", "TIME", "TARGET");
    println!(
        "{:<44}  {:>9}  {:<6}",
        format!("stats: top 10 dead-letter cause groups ({})", groups.len()),
        ms(causes),
        if causes <= Duration::from_millis(100) { "ok" } else { "MISSED" }
    );
    println!("{:<44}  {:>9}", format!("stats: quarantine groups ({})", q.len()), ms(quarantines));

    // Bulk requeue of 100,000 dead-lettered jobs, as a whole `bw` process.
    let template = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench/cli-requeue-100k.db");
    if !template.exists() {
        eprintln!("building the 100,000 dead-lettered jobs store (once)…");
        build_dead_lettered(&template, 100_000);
    }
    let work = template.with_file_name("cli-requeue-work.db");
    let mut best: Option<(Duration, Duration, String)> = None;
    let mut plan_time = Duration::ZERO;
    for _ in 0..3 {
        copy_store(&template, &work);
        let t = Instant::now();
        let out = run(Command::new(&bin).args([
            "--db",
            work.to_str().unwrap(),
            "--format",
            "json",
            "requeue",
            "--state",
            "dead-lettered",
            "--dry-run",
        ]));
        plan_time = plan_time.max(t.elapsed());
        assert!(out.status.success());
        let cpu0 = children_cpu();
        let t = Instant::now();
        let out = run(Command::new(&bin).args([
            "--db",
            work.to_str().unwrap(),
            "--format",
            "json",
            "requeue",
            "--state",
            "dead-lettered",
            "--yes",
            "--force",
        ]));
        let took = t.elapsed();
        let cpu = children_cpu() - cpu0;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let n = v["requeued"].to_string();
        if best.as_ref().is_none_or(|(b, _, _)| took < *b) {
            best = Some((took, cpu, n));
        }
    }
    let (took, cpu, n) = best.unwrap();
    println!(
        "{:<44}  {:>9}  {:<6}  (cpu {})",
        format!("bulk requeue --state dead-lettered ({n} jobs)"),
        ms(took),
        if took <= Duration::from_secs(2) { "ok" } else { "MISSED" },
        ms(cpu)
    );
    println!("{:<44}  {:>9}", "requeue --dry-run plan of the same (process)", ms(plan_time));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", work.display()));
    }
    println!();
    println!("({ACTOR_NOTE}; best of 3 for the requeue, each on a fresh copy)");
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
    out
}

#[derive(Clone, Copy)]
struct Took {
    wall: Duration,
    /// User + system time of the child process (getrusage), which load from other processes
    /// on the machine does not inflate the way it inflates wall time.
    cpu: Duration,
}

fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn timed(f: &mut impl FnMut() -> Output) -> Took {
    let cpu = children_cpu();
    let t = Instant::now();
    f();
    Took { wall: t.elapsed(), cpu: children_cpu() - cpu }
}

/// One warm-up run of each, then RUNS of each alternating; the median of each.
fn interleaved(mut a: impl FnMut() -> Output, mut b: impl FnMut() -> Output) -> (Took, Took) {
    a();
    b();
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        ta.push(timed(&mut a));
        tb.push(timed(&mut b));
    }
    (median(ta), median(tb))
}

fn median(v: Vec<Took>) -> Took {
    let mut wall: Vec<Duration> = v.iter().map(|t| t.wall).collect();
    let mut cpu: Vec<Duration> = v.iter().map(|t| t.cpu).collect();
    wall.sort();
    cpu.sort();
    Took { wall: wall[wall.len() / 2], cpu: cpu[cpu.len() / 2] }
}

/// `n` dead-lettered jobs of one wire name, made the engine's way (claim under a one-attempt
/// policy, fail), with the current user admin.
fn build_dead_lettered(path: &Path, n: usize) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("building");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
    }
    let store = Store::create(&tmp).unwrap();
    store.bootstrap_admin(&backwave::store::current_actor()).unwrap();
    let policy = RetryPolicy::new(1, Duration::ZERO).unwrap();
    let queues = vec!["default".to_string()];
    let mut left = n;
    while left > 0 {
        let k = left.min(5_000);
        let jobs: Vec<NewJob> =
            (0..k).map(|i| NewJob::new("charge-card", "default", format!("{{\"n\":{i}}}"))).collect();
        store.enqueue_many(&jobs).unwrap();
        let claimed = store
            .claim(&ClaimRequest {
                worker_id: "w-bench",
                group: "bench",
                queues: &queues,
                limit: k,
                lease: Duration::from_secs(60),
                policy: &policy,
                handler_policies: &[],
            })
            .unwrap();
        let done: Vec<Completion> = claimed
            .iter()
            .map(|j| Completion {
                job_id: j.id,
                worker_id: "w-bench".into(),
                attempt: j.attempt,
                outcome: Outcome::Failed {
                    message: format!("gateway timeout (attempt {})", j.attempt),
                    detail: None,
                    retry_in: None,
                },
            })
            .collect();
        store.complete_many(&done).unwrap();
        left -= k;
    }
    store.raw_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(store);
    std::fs::rename(&tmp, path).unwrap();
}

fn copy_store(from: &Path, to: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    std::fs::copy(from, to).unwrap();
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// One row of the bw-vs-sqlite3 table: `bw_args` against the shell running `sql`, interleaved so
/// that load from other processes falls on both sides alike, with the 1.3x verdict.
fn compare(bin: &std::path::Path, db: &str, name: &str, bw_args: &[String], sql: &str) {
    let (bw, sq) = interleaved(
        || run(Command::new(bin).env("COLUMNS", "120").args(["--db", db]).args(bw_args)),
        || run(Command::new("sqlite3").arg(db).arg(sql)),
    );
    let ratio = bw.wall.as_secs_f64() / sq.wall.as_secs_f64();
    let cpu_ratio = bw.cpu.as_secs_f64() / sq.cpu.as_secs_f64();
    let verdict = if ratio <= 1.3 {
        "ok"
    } else if cpu_ratio <= 1.3 {
        "cpu ok"
    } else {
        "MISSED"
    };
    println!(
        "{:<36}  {:>9}  {:>9}  {:>5.2}x  {:>8}  {:>8}  {:>5.2}x  {:<6}",
        name,
        ms(bw.wall),
        ms(sq.wall),
        ratio,
        ms(bw.cpu),
        ms(sq.cpu),
        cpu_ratio,
        verdict
    );
}
