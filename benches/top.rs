//! Benchmark: `bw top` on a 1,000,000-job store. Prints one table:
//! - the store time of one refresh of each view (the same `serve` the dashboard's background
//!   thread runs): the first refresh (chart binary search, log tail) and the steady ones;
//! - idle CPU of a real `bw top` in tmux over 10 s (utime + stime from /proc/PID/stat);
//! - its resident memory (VmRSS and peak VmHWM from /proc/PID/status).
//!
//! Targets: refresh <= 20 ms, idle CPU <= 2 % of a core, RSS <= 50 MB.
//!
//! The store is built once with the hidden `bw generate --jobs 1000000` and kept at
//! target/bench/top-1m.db (or BW_BENCH_STORE); BW_BENCH_JOBS changes the size.
//!
//! A second table (issue 24): 50 Dead-Lettered jobs with 1 MiB payloads (the default
//! `payload_limit`) all in the list on screen, the same measures at 120x64 on a store of their
//! own. `BW_BENCH_TOP=payloads` runs that table alone. With `BW_TEST_PG` set (a server URL, as
//! for the tests), the same table again on a PostgreSQL store in a schema of its own.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use backwave::store::{ClaimRequest, Completion, Outcome, DEFAULT_PAYLOAD_LIMIT};
use backwave::{NewJob, RetryPolicy, Store};
use bw::cli::output::thousands;
use bw::tui::{serve, Action, App, Config, Request, Response, View};

const ACTOR: &str = "bench";

fn main() {
    let bin = env!("CARGO_BIN_EXE_bw");
    if std::env::var("BW_BENCH_TOP").as_deref() != Ok("payloads") {
        large_store_table(bin);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("top-payloads.db");
    let _ = std::fs::remove_file(&path);
    payloads_table(bin, &path.display().to_string());
    match std::env::var("BW_TEST_PG") {
        Ok(server) if !server.trim().is_empty() => {
            let schema = pg_schema(&server, "bw_bench_top_payloads");
            payloads_table(bin, &schema);
            pg_drop_schema(&server, "bw_bench_top_payloads");
        }
        _ => println!("\n(PostgreSQL: set BW_TEST_PG to a server URL to run the payloads table there too)"),
    }
}

/// A fresh schema `name` on `server`, as a store URL whose connections use it.
fn pg_schema(server: &str, name: &str) -> String {
    let mut c = backwave::postgres::Client::connect(server, backwave::postgres::NoTls).expect("connect to BW_TEST_PG");
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}")).unwrap();
    let sep = if server.contains('?') { '&' } else { '?' };
    format!("{server}{sep}options=-csearch_path%3D{name}")
}

fn pg_drop_schema(server: &str, name: &str) {
    if let Ok(mut c) = backwave::postgres::Client::connect(server, backwave::postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"));
    }
}

fn large_store_table(bin: &str) {
    let (path, _) = common::large_store(bin);
    let store = Store::open(&path).expect("open the bench store");
    let total: u64 = store.counts().unwrap().by_queue.values().flat_map(|m| m.values()).sum();

    let mut rows: Vec<(String, String, String)> = Vec::new();
    rows.push(("jobs in the store".into(), thousands(total), String::new()));

    // One refresh per view, as the dashboard at 120x32 asks for it.
    let mut app = App::new(
        Config {
            store: path.display().to_string(),
            actor: ACTOR.into(),
            interval: Duration::from_secs(1),
            read_only: true,
            color: true,
            ask_before_quit: false,
        },
        store.now(),
    );
    app.update(Action::Resize(120, 32));
    let mut first = None;
    for (view, grouped) in [
        (View::DeadLettered, false),
        (View::DeadLettered, true),
        (View::Quarantined, true),
        (View::Quarantined, false),
        (View::Running, false),
        (View::Scheduled, false),
        (View::Queues, false),
        (View::Log, false),
    ] {
        app.update(Action::ShowView(view));
        if app.vs().grouped != grouped {
            app.update(Action::ToggleGroup);
        }
        let mut times = Vec::new();
        let mut with_groups = Vec::new();
        for i in 0..21 {
            let q = app.query();
            let t = Instant::now();
            let resp = serve(&store, ACTOR, &Request::Refresh(Box::new(q.clone())));
            let took = t.elapsed();
            let Response::Snapshot(_) = &resp else { panic!("refresh failed: {resp:?}") };
            app.update(Action::Store(resp));
            if first.is_none() && i == 0 {
                first = Some(took);
            } else if q.read_groups {
                with_groups.push(took);
            } else {
                times.push(took);
            }
            if grouped && i % 5 == 0 {
                // The every-10-seconds group read, measured on its own.
                let mut q = app.query();
                q.read_groups = true;
                let t = Instant::now();
                let _ = serve(&store, ACTOR, &Request::Refresh(Box::new(q)));
                with_groups.push(t.elapsed());
            }
        }
        times.sort();
        let median = times[times.len() / 2];
        let max = *times.last().unwrap();
        let name = format!("refresh: {}{}", view.title(), if grouped { " by group" } else { "" });
        rows.push((name, format!("median {} · max {}", ms(median), ms(max)), verdict(median)));
        if !with_groups.is_empty() {
            with_groups.sort();
            let m = with_groups[with_groups.len() / 2];
            rows.push((
                format!("  … re-reading the groups (every {}s)", bw::tui::data::GROUPS_EVERY_MS / 1000),
                format!("median {}", ms(m)),
                verdict(m),
            ));
        }
    }
    // Paging deep into the biggest list, and the detail pane.
    app.update(Action::ShowView(View::DeadLettered));
    if app.vs().grouped {
        app.update(Action::ToggleGroup);
    }
    app.update(Action::Store(serve(&store, ACTOR, &Request::Refresh(Box::new(app.query())))));
    for _ in 0..50 {
        app.update(Action::PageDown);
    }
    let t = Instant::now();
    let resp = serve(&store, ACTOR, &Request::Refresh(Box::new(app.query())));
    let deep = t.elapsed();
    app.update(Action::Store(resp));
    rows.push((format!("refresh: Dead-Lettered, {} rows down", app.vs().selected), ms(deep), verdict(deep)));
    app.update(Action::Open);
    let t = Instant::now();
    let resp = serve(&store, ACTOR, &Request::Refresh(Box::new(app.query())));
    let detail = t.elapsed();
    app.update(Action::Store(resp));
    rows.push(("refresh: detail pane open".into(), ms(detail), verdict(detail)));
    rows.insert(1, ("first refresh (chart search, log tail)".into(), ms(first.unwrap()), String::new()));

    // The real dashboard, idle, in a real terminal.
    idle_rows(&mut rows, idle_in_tmux(bin, &path.display().to_string(), 32));
    print_table(&format!("bw top on {}", path.display()), rows);
}

/// 50 Dead-Lettered jobs with payloads of the default limit, 1 MiB each, every one in the list
/// `bw top` shows first: one refresh of that list, and a real `bw top` on it refreshing every
/// second (issue 24: three jobs of 50 MiB made it 270-470 MB and a whole core).
fn payloads_table(bin: &str, target: &str) {
    let store = Store::create(target).expect("create the payloads store");
    store.bootstrap_admin(ACTOR).unwrap();
    // A JSON string of exactly the limit, of letters that do not compress (PostgreSQL would
    // otherwise keep a run of one letter as a few kilobytes, inline).
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut payload: Vec<u8> = (0..DEFAULT_PAYLOAD_LIMIT)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b'a' + (seed % 26) as u8
        })
        .collect();
    payload[0] = b'"';
    payload[DEFAULT_PAYLOAD_LIMIT as usize - 1] = b'"';
    let jobs: Vec<NewJob> = (0..50).map(|_| NewJob::new("ingest-blob", "bulk", payload.clone())).collect();
    store.enqueue_many(&jobs).unwrap();
    let policy = RetryPolicy::new(1, Duration::from_secs(1)).unwrap();
    let queues = ["bulk".to_string()];
    let claim = ClaimRequest {
        worker_id: "bench-worker",
        group: "bench",
        queues: &queues,
        limit: 50,
        lease: Duration::from_secs(60),
        policy: &policy,
        handler_policies: &[],
    };
    let completions: Vec<Completion> = store
        .claim(&claim)
        .unwrap()
        .iter()
        .map(|j| Completion {
            job_id: j.id,
            worker_id: "bench-worker".into(),
            attempt: j.attempt,
            outcome: Outcome::Failed { message: "blob store unreachable".into(), detail: None, retry_in: None },
        })
        .collect();
    assert_eq!(store.complete_many(&completions).unwrap().len(), 50);

    let mut rows: Vec<(String, String, String)> = Vec::new();
    rows.push(("jobs in the list (1 MiB payloads)".into(), "50".into(), String::new()));
    measure_payloads(bin, target, &store, &mut rows, "");
    if !target.contains("://") {
        // The same again as before migration 8: without the listing index, each listed row is
        // read from the table, through its payload's overflow pages.
        store.raw_batch("DROP INDEX jobs_failed_list").unwrap();
        measure_payloads(bin, target, &store, &mut rows, " (without jobs_failed_list)");
    }
    // The control: the same jobs with 3-byte payloads, so what remains is the refresh itself.
    let small = if target.contains("://") { "'\\x227822'::bytea" } else { "X'227822'" };
    store.raw_execute(&format!("UPDATE jobs SET payload = {small}"), &[]).unwrap();
    measure_payloads(bin, target, &store, &mut rows, " (the same jobs, 3-byte payloads)");
    let on = if target.contains("://") { "PostgreSQL (BW_TEST_PG)" } else { target };
    print_table(&format!("bw top, 50 jobs of 1 MiB payloads in the list, on {on}"), rows);
}

/// One refresh of the Dead-Lettered list timed 21 times, then a real `bw top` idling on it.
fn measure_payloads(bin: &str, target: &str, store: &Store, rows: &mut Vec<(String, String, String)>, label: &str) {
    let mut app = App::new(
        Config {
            store: target.to_string(),
            actor: ACTOR.into(),
            interval: Duration::from_secs(1),
            read_only: true,
            color: true,
            ask_before_quit: false,
        },
        store.now(),
    );
    app.update(Action::Resize(120, 64));
    app.update(Action::ShowView(View::DeadLettered));
    let mut times = Vec::new();
    for _ in 0..21 {
        let q = app.query();
        let t = Instant::now();
        let resp = serve(store, ACTOR, &Request::Refresh(Box::new(q)));
        times.push(t.elapsed());
        let Response::Snapshot(s) = &resp else { panic!("refresh failed: {resp:?}") };
        assert_eq!(s.page.as_ref().map(|p| p.jobs.len()), Some(50), "all 50 in the list");
        app.update(Action::Store(resp));
    }
    times.sort();
    let median = times[times.len() / 2];
    rows.push((
        format!("refresh: Dead-Lettered{label}"),
        format!("median {} · max {}", ms(median), ms(times[20])),
        verdict(median),
    ));
    let mut idle = Vec::new();
    idle_rows(&mut idle, idle_in_tmux(bin, target, 64));
    rows.extend(idle.into_iter().map(|(a, b, c)| (format!("{a}{label}"), b, c)));
}

fn idle_rows(rows: &mut Vec<(String, String, String)>, (cpu, rss, hwm): (f64, f64, f64)) {
    rows.push((
        "idle CPU of bw top (10 s)".into(),
        format!("{cpu:.2} % of a core"),
        if cpu <= 2.0 { "ok (<= 2 %)".into() } else { "OVER 2 %".into() },
    ));
    rows.push((
        "resident memory (VmRSS / peak)".into(),
        format!("{:.1} MB / {:.1} MB", rss, hwm),
        if hwm <= 50.0 { "ok (<= 50 MB)".into() } else { "OVER 50 MB".into() },
    ));
}

fn print_table(title: &str, rows: Vec<(String, String, String)>) {
    let w0 = rows.iter().map(|r| r.0.chars().count()).max().unwrap();
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap();
    println!("\n{title}");
    println!("{:<w0$}  {:<w1$}  TARGET", "MEASURE", "RESULT");
    for (a, b, c) in rows {
        println!("{a:<w0$}  {b:<w1$}  {c}");
    }
}

/// Start `bw top` in a detached tmux, 120 columns by `height` rows, let it settle, then measure
/// 10 s of idling (a refresh every second).
fn idle_in_tmux(bin: &str, target: &str, height: u16) -> (f64, f64, f64) {
    let session = format!("bwtopbench{}", std::process::id());
    let status = Command::new("tmux")
        .args(["new-session", "-d", "-s", &session, "-x", "120", "-y", &height.to_string()])
        .arg(format!("exec {bin} --db '{target}' top"))
        .status()
        .expect("tmux is needed for the idle measurement");
    assert!(status.success());
    let pid: i32 = {
        let out = Command::new("tmux").args(["display-message", "-p", "-t", &session, "#{pane_pid}"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    std::thread::sleep(Duration::from_secs(3));
    let ticks = |pid: i32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("bw top is running");
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let t0 = Instant::now();
    let c0 = ticks(pid);
    std::thread::sleep(Duration::from_secs(10));
    let c1 = ticks(pid);
    let secs = t0.elapsed().as_secs_f64();
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (c1 - c0) as f64 / hz / secs * 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb = |key: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    let (rss, hwm) = (kb("VmRSS:"), kb("VmHWM:"));
    let screen = Command::new("tmux").args(["capture-pane", "-p", "-t", &session]).output().unwrap();
    let capture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench/top-screen.txt");
    let _ = std::fs::write(&capture, &screen.stdout);
    eprintln!("screen captured to {}", capture.display());
    let _ = Command::new("tmux").args(["send-keys", "-t", &session, "q"]).status();
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("tmux").args(["kill-session", "-t", &session]).output();
    (cpu, rss, hwm)
}

fn verdict(d: Duration) -> String {
    if d <= Duration::from_millis(20) {
        "ok (<= 20 ms)".into()
    } else {
        "OVER 20 ms".into()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
