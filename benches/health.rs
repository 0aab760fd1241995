//! Benchmark: `bw check` and `bw metrics` on the large store (`cargo bench --bench health`).
//!
//! Targets (issue #11): `bw check` and one `bw metrics` scrape <= 100 ms on the 1,000,000-job
//! store, as whole processes (start-up included, median of 15); a `bw metrics --listen` scraped
//! every second adds <= 2 % of a core (its own CPU time from /proc over 20 scrapes). Also the
//! in-process `Store::health` and `Store::queue_latency` reads, and both again with a pause in
//! force: the wire name of the busiest queue's oldest due job (its backlog held apart, the
//! oldest claimable job found around it) and another queue (written to `pauses` for the run
//! and removed after it, even on a panic).
//!
//! The store is the one the `cli` and `top` benchmarks share (target/bench/top-1m.db, built once
//! by `bw generate`; BW_BENCH_STORE / BW_BENCH_JOBS change it).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use backwave::store::Thresholds;
use backwave::Store;
use bw::cli::output::thousands;

const RUNS: usize = 15;
const SCRAPES: usize = 20;

fn main() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_bw"));
    let (big, _) = common::large_store(bin.to_str().unwrap());
    let db = big.to_str().unwrap();
    let store = Store::open(&big).expect("open the bench store");
    let total = store.raw_scalar("SELECT sum(n) FROM job_counts", &[]).unwrap().as_i64();
    println!("bw check / bw metrics on {} jobs ({})", thousands(total as u64), big.display());
    println!();
    println!("{:<44}  {:>9}  {:>9}  {:<6}", "WHAT (target)", "median", "max", "TARGET");

    // In-process reads.
    let mut health = Vec::new();
    let mut latency = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let h = store.health(&Thresholds::default()).unwrap();
        health.push(t.elapsed());
        assert!(!h.checks.is_empty());
        let t = Instant::now();
        store.queue_latency().unwrap();
        latency.push(t.elapsed());
    }
    row("Store::health, in-process", &mut health, None);
    row("Store::queue_latency, in-process", &mut latency, None);

    // Whole processes.
    for (name, args) in [
        ("bw check (process, <= 100 ms)", vec!["check"]),
        ("bw metrics, one-shot (process, <= 100 ms)", vec!["metrics"]),
    ] {
        let mut took = Vec::new();
        for i in 0..=RUNS {
            let t = Instant::now();
            let out = Command::new(&bin).args(["--db", db]).args(&args).output().expect("run bw");
            let d = t.elapsed();
            // bw check exits 0, 1 or 2 with the verdict; anything else is a failure.
            assert!(matches!(out.status.code(), Some(0..=2)), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            if i > 0 {
                took.push(d);
            }
        }
        row(name, &mut took, Some(Duration::from_millis(100)));
    }
    let mut stats = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let out = Command::new(&bin).args(["--db", db, "stats"]).output().unwrap();
        stats.push(t.elapsed());
        assert!(out.status.success());
    }
    row("bw stats with latency (process)", &mut stats, None);

    // A listener scraped once a second, as Prometheus would.
    let mut child = Command::new(&bin)
        .args(["--db", db, "metrics", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start bw metrics --listen");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("the listen address").to_string();
    let agent = ureq::Agent::new_with_defaults();
    let cpu0 = process_cpu(child.id());
    let started = Instant::now();
    let mut scrapes = Vec::new();
    for i in 0..SCRAPES {
        let t = Instant::now();
        let body = agent.get(&url).call().expect("scrape").into_body().read_to_string().expect("body");
        scrapes.push(t.elapsed());
        assert!(body.contains("backwave_jobs"));
        let next = started + Duration::from_secs(i as u64 + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let cpu = process_cpu(child.id()) - cpu0;
    let share = cpu.as_secs_f64() / started.elapsed().as_secs_f64() * 100.0;
    // SAFETY: kill(2) on the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    row("metrics --listen scrape over HTTP (<= 100 ms)", &mut scrapes, Some(Duration::from_millis(100)));
    println!(
        "{:<44}  {:>8.2} %  {:>9}  {:<6}",
        format!("CPU of a listener scraped every 1 s ({SCRAPES} s)"),
        share,
        "",
        if share <= 2.0 { "ok" } else { "MISSED" }
    );
    println!("(listener stopped by SIGTERM: {status})");

    paused(&store, &bin, db);
}

/// Rows this bench put in `pauses`, removed when dropped (a failed run leaves nothing paused).
struct BenchPauses<'a>(&'a Store);

impl Drop for BenchPauses<'_> {
    fn drop(&mut self) {
        let removed = self.0.raw_execute("DELETE FROM pauses WHERE paused_by = 'bench'", &[]);
        if let Err(e) = removed {
            eprintln!("could not remove the bench's pauses (bw resume them): {e}");
        }
    }
}

/// Health read around pauses: the worst case for latency is a paused wire name holding the
/// oldest due job of the busiest queue, so the oldest claimable one is looked for name by name.
fn paused(store: &Store, bin: &PathBuf, db: &str) {
    if !store.pauses().unwrap().is_empty() {
        println!("(pauses already in force on the bench store: the paused runs are skipped)");
        return;
    }
    let h = store.health(&Thresholds::default()).unwrap();
    let Some(busiest) = h.queues.iter().max_by_key(|q| q.due_now) else { return };
    let Some(other) = h.queues.iter().find(|q| q.queue != busiest.queue) else { return };
    let wire_name = store
        .raw_scalar(
            "SELECT wire_name FROM jobs INDEXED BY jobs_claim WHERE state = 'scheduled' AND queue = ?1 AND due_at <= ?2
             ORDER BY due_at LIMIT 1",
            &[(&busiest.queue).into(), h.at.into()],
        )
        .unwrap()
        .as_str()
        .to_string();
    let _guard = BenchPauses(store);
    store
        .raw_execute(
            "INSERT INTO pauses (kind, name, paused_by, paused_at, until) VALUES ('wire-name', ?1, 'bench', ?3, NULL),
                    ('queue', ?2, 'bench', ?3, NULL)",
            &[(&wire_name).into(), (&other.queue).into(), h.at.into()],
        )
        .unwrap();
    let p = store.health(&Thresholds::default()).unwrap();
    let q = p.queues.iter().find(|q| q.queue == busiest.queue).unwrap();
    println!();
    println!(
        "paused: wire name '{wire_name}' ({} due held in '{}', {} claimable left) and queue '{}'",
        thousands(q.held_by_pause),
        busiest.queue,
        thousands(q.due_now),
        other.queue
    );
    let mut health = Vec::new();
    let mut latency = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        store.health(&Thresholds::default()).unwrap();
        health.push(t.elapsed());
        let t = Instant::now();
        store.queue_latency().unwrap();
        latency.push(t.elapsed());
    }
    row("Store::health, paused, in-process", &mut health, None);
    row("Store::queue_latency, paused, in-process", &mut latency, None);
    let mut took = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let out = Command::new(bin).args(["--db", db, "check"]).output().expect("run bw check");
        took.push(t.elapsed());
        assert!(matches!(out.status.code(), Some(0..=2)), "{}", String::from_utf8_lossy(&out.stderr));
    }
    row("bw check, paused (process, <= 100 ms)", &mut took, Some(Duration::from_millis(100)));
}

fn row(name: &str, v: &mut [Duration], target: Option<Duration>) {
    v.sort();
    let median = v[v.len() / 2];
    let verdict = match target {
        Some(t) if median <= t => "ok",
        Some(_) => "MISSED",
        None => "",
    };
    println!("{:<44}  {:>9}  {:>9}  {:<6}", name, ms(median), ms(v[v.len() - 1]), verdict);
}

/// User + system CPU time of a process, from /proc/PID/stat (in clock ticks).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces: the fields after it follow the last ')'.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // utime and stime are fields 14 and 15 of the line: 11 and 12 counted from after the name.
    Duration::from_micros((ticks(11) + ticks(12)) * 1_000_000 / hz)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
