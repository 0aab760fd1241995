//! `BW_BENCH_ONLY=idle`: what an idle worker process costs (issue 40). One child process runs
//! one `Engine` with `WorkerGroup::default()` and nothing to do, for `BW_BENCH_IDLE_SECS`
//! (default 10) after a 2 s settle, with poll-only (how every worker found work before wake-ups:
//! the poll alone) and with the default (listening: PostgreSQL `LISTEN`, SQLite's
//! `data_version` every 2 ms), on SQLite and PostgreSQL. Printed per row: the child's CPU (its
//! user + system time from /proc, in % of one core), the store transactions it committed per
//! second (PostgreSQL's `pg_stat_database.xact_commit` of the bench's database, less the
//! bench's own reads; not observable from outside on SQLite) and the writes per second (commits
//! that changed the database: SQLite's `data_version` seen by the bench, PostgreSQL's rows
//! inserted, updated or deleted).

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use backwave::engine::{Engine, Registry, WorkerGroup};

/// The child: `BW_BENCH_IDLE_CHILD=<db>`, `BW_BENCH_IDLE_POLL_ONLY=1` for poll-only.
pub fn child(db: &str) -> ! {
    let mut registry = Registry::new();
    registry.handle::<u32>("noop", |_, _| Ok(()));
    let mut engine = Engine::new(db, registry);
    engine.poll_only(std::env::var_os("BW_BENCH_IDLE_POLL_ONLY").is_some());
    engine.add_worker_group(WorkerGroup::default());
    let _running = engine.start().expect("start the idle engine");
    loop {
        std::thread::park();
    }
}

fn spawn(db: &str, poll_only: bool) -> Child {
    let mut cmd = Command::new(std::env::current_exe().expect("this bench"));
    cmd.env("BW_BENCH_IDLE_CHILD", db);
    if poll_only {
        cmd.env("BW_BENCH_IDLE_POLL_ONLY", "1");
    }
    cmd.spawn().expect("start the idle child")
}

struct Sample {
    cpu_pct: f64,
    tx_per_s: Option<f64>,
    writes_per_s: f64,
}

/// How the bench counts the store's transactions and writes from outside the child.
trait Observer {
    /// (transactions committed, writes) so far; transactions `None` where not observable.
    fn counts(&mut self) -> (Option<u64>, u64);
    /// Look while the time passes (SQLite counts changes as they happen).
    fn watch(&mut self, until: Instant) {
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
    }
}

struct SqliteObserver {
    conn: backwave::rusqlite::Connection,
    last: i64,
    changes: u64,
}

impl Observer for SqliteObserver {
    fn counts(&mut self) -> (Option<u64>, u64) {
        (None, self.changes)
    }
    fn watch(&mut self, until: Instant) {
        while Instant::now() < until {
            let v: i64 = self.conn.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap();
            if v != self.last {
                self.last = v;
                self.changes += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

struct PgObserver {
    client: backwave::postgres::Client,
    own: u64,
}

impl Observer for PgObserver {
    fn counts(&mut self) -> (Option<u64>, u64) {
        // Fresh figures, not this transaction's cached snapshot of the statistics.
        self.client.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
        let r = self
            .client
            .query_one(
                "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database
                 WHERE datname = current_database()",
                &[],
            )
            .unwrap();
        self.own += 2;
        (Some(r.get::<_, i64>(0) as u64 - self.own), r.get::<_, i64>(1) as u64)
    }
}

fn measure(db: &str, poll_only: bool, secs: u64, observer: &mut dyn Observer) -> Sample {
    let mut child = spawn(db, poll_only);
    observer.watch(Instant::now() + Duration::from_secs(2));
    let (tx0, w0) = observer.counts();
    let (c0, t0) = (super::cpu::process(child.id()), Instant::now());
    observer.watch(t0 + Duration::from_secs(secs));
    let (c1, elapsed) = (super::cpu::process(child.id()), t0.elapsed().as_secs_f64());
    // PostgreSQL's backends report their counts at most once a second.
    observer.watch(Instant::now() + Duration::from_millis(1_200));
    let (tx1, w1) = observer.counts();
    let _ = child.kill();
    let _ = child.wait();
    Sample {
        cpu_pct: (c1 - c0).as_secs_f64() / elapsed * 100.0,
        tx_per_s: tx0.zip(tx1).map(|(a, b)| b.saturating_sub(a) as f64 / elapsed),
        writes_per_s: w1.saturating_sub(w0) as f64 / elapsed,
    }
}

/// The rows: SQLite, then PostgreSQL on `server`; poll-only and listening each.
pub fn rows(dir: &Path, server: &str) {
    let secs = std::env::var("BW_BENCH_IDLE_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    println!();
    println!("idle worker process, WorkerGroup::default(), {secs} s each");
    println!("| store      | finds work by                    | CPU, % of a core | transactions/s | writes/s |");
    println!("|------------|----------------------------------|-----------------:|---------------:|---------:|");
    let print = |store: &str, how: &str, s: Sample| {
        let tx = s.tx_per_s.map_or("-".to_string(), |t| format!("{t:.1}"));
        println!("| {store:<10} | {how:<32} | {:>16.2} | {tx:>14} | {:>8.1} |", s.cpu_pct, s.writes_per_s);
    };
    for (poll_only, how) in [(true, "poll only (250 ms)"), (false, "listening (default) + 250 ms poll")] {
        let file = dir.join(format!("idle-{poll_only}.db"));
        backwave::Store::create(&file).expect("create the store");
        let conn = backwave::rusqlite::Connection::open(&file).unwrap();
        let last = conn.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap();
        let mut o = SqliteObserver { conn, last, changes: 0 };
        print("SQLite", how, measure(file.to_str().unwrap(), poll_only, secs, &mut o));
    }
    for (poll_only, how) in [(true, "poll only (250 ms)"), (false, "listening (default) + 250 ms poll")] {
        let schema = super::pg::Schema::new(server, &format!("bench_idle_{poll_only}"));
        backwave::Store::create(schema.url.as_str()).expect("create the store");
        let client = backwave::postgres::Client::connect(&schema.url, backwave::postgres::NoTls).unwrap();
        let mut o = PgObserver { client, own: 0 };
        print("PostgreSQL", how, measure(&schema.url, poll_only, secs, &mut o));
    }
    println!();
}
