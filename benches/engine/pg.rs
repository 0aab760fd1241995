//! The PostgreSQL half of the engine bench: the raw `FOR UPDATE SKIP LOCKED` ceiling (claim and
//! fenced completion in plain SQL, with their log rows, as the store does them) on 1, 2 and 4
//! connections; the store's own claim and record of successes in that loop (what the statements
//! cost apart from the engine's processes); then the engine draining the same jobs with 1, 2
//! and 4 worker *processes* (this bench binary started again as a worker: `BW_BENCH_WORKER=<url>`),
//! as separate hosts would. Each row says its CPU a job: the server's, the workers', the bench's,
//! and the host's idle share (`cpu.rs`); and the WAL it wrote a job, with whether a checkpoint
//! ran during it (after a checkpoint each page's first change writes the whole page to the WAL,
//! so a row on which one fell paid for more than its own work).
//!
//! Like the SQLite raw ceiling, this is a benchmark of the database itself, so it names the
//! driver (`backwave::postgres::Client`) and runs its own SQL on its own connections: the store's claim
//! (one statement: pick `FOR UPDATE SKIP LOCKED` in the claim index's order, priority then due
//! time, move to running, log) and a fenced completion of the whole batch in one statement,
//! without the engine's bookkeeping. The order is the claim index's on purpose: ordered by
//! `due_at` alone, the pick is planned on `jobs_active` once migration 20 dropped `jobs_claim
//! (queue, due_at)`, and the ceiling measured that way ran at half its rate with one connection
//! and 256 a claim, four fifths with 1,024 (2026-12-06: 15,600 against 34,500 jobs/s, 28,600
//! against 36,700) and three quarters with two connections: every ratio to it from migration 20
//! until then flattered the engine (`docs/benchmarks.md`). Its claim commits without waiting for
//! the WAL flush, as the store's does since 2026-12-06 (`synchronous_commit` off for the claim's
//! transaction alone); the completion waits for it, as the store's does.

use std::process::{Child, Command};
use std::sync::Barrier;
use std::time::Instant;

use backwave::engine::Engine;
use backwave::postgres::types::ToSql;
use backwave::Store;

use super::cpu::{Cost, Sample};
use super::{enqueue, registry, Settings};

/// Jobs a raw claim takes at once: the widths the engine's claims reach on a quick queue.
const RAW_BATCHES: [i64; 2] = [256, 1024];
/// The width of the store's statements in the raw loop: the ceiling's best.
const STORE_BATCH: i64 = 1024;

/// A fresh schema on the server and the URL whose connections use it.
pub struct Schema {
    admin: String,
    pub name: String,
    pub url: String,
}

impl Schema {
    pub fn new(server: &str, name: &str) -> Schema {
        let mut c = backwave::postgres::Client::connect(server, backwave::postgres::NoTls)
            .expect("connect to the bench server");
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}")).unwrap();
        let sep = if server.contains('?') { '&' } else { '?' };
        let url = format!("{server}{sep}options=-csearch_path%3D{name}");
        Schema { admin: server.to_string(), name: name.to_string(), url }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = backwave::postgres::Client::connect(&self.admin, backwave::postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

const CLAIM: &str = "
    WITH picked AS (
        SELECT id FROM jobs
        WHERE state = 'scheduled' AND queue = $1 AND due_at <= $2
        ORDER BY priority, due_at LIMIT $3
        FOR UPDATE SKIP LOCKED),
    claimed AS (
        UPDATE jobs j SET state = 'running', attempt = j.attempt + 1, max_attempts = 10,
               delay_table = '[2000,4000,8000,16000,32000,64000,128000,256000,300000]'::jsonb,
               lease_owner = $4, lease_expires_at = $2 + 60000, worker_group = 'raw', updated_at = $2
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.id, j.attempt),
    logged AS (
        INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
        SELECT id, $2, 'scheduled', 'running', attempt, $4 FROM claimed)
    SELECT id, attempt FROM claimed
    WHERE (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) = 'off'";

const COMPLETE: &str = "
    WITH done AS (
        UPDATE jobs j SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
               finished_at = $3, updated_at = $3
        FROM unnest($1::uuid[], $2::bigint[]) AS c(id, attempt)
        WHERE j.id = c.id AND j.state = 'running' AND j.lease_owner = $4 AND j.attempt = c.attempt
        RETURNING j.id, j.attempt),
    logged AS (
        INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
        SELECT id, $3, 'running', 'succeeded', attempt, $4 FROM done)
    SELECT count(*) FROM done";

/// The server's WAL, read on a connection of its own around a row: how much a row wrote, and
/// whether a checkpoint ran meanwhile (its redo point moved). [`Wal::open`] gives `None` where the
/// role may not read the control file's checkpoint (`pg_control_checkpoint`: superusers and
/// `pg_monitor`), and the rows then say nothing of the WAL.
struct Wal(backwave::postgres::Client);

/// A row's WAL: bytes a job, and whether a checkpoint ran during it.
struct WalCost {
    bytes_per_job: f64,
    checkpoint: bool,
}

impl Wal {
    fn open(url: &str) -> Option<Wal> {
        let mut wal = Wal(backwave::postgres::Client::connect(url, backwave::postgres::NoTls).ok()?);
        wal.at().map(|_| wal)
    }

    /// (bytes of WAL inserted so far, the last checkpoint's redo point).
    fn at(&mut self) -> Option<(f64, f64)> {
        let row = self
            .0
            .query_one(
                "SELECT (pg_current_wal_insert_lsn() - '0/0')::float8,
                        (SELECT redo_lsn - '0/0' FROM pg_control_checkpoint())::float8",
                &[],
            )
            .ok()?;
        Some((row.get(0), row.get(1)))
    }

    /// What `before` to now wrote for `n` jobs.
    fn since(&mut self, before: Option<(f64, f64)>, n: usize) -> Option<WalCost> {
        let ((bytes, redo), (now, now_redo)) = (before?, self.at()?);
        Some(WalCost { bytes_per_job: (now - bytes) / n as f64, checkpoint: now_redo != redo })
    }
}

impl std::fmt::Display for WalCost {
    /// "; WAL 2.71 kB a job" and ", a checkpoint during it" when one ran.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "; WAL {:.2} kB a job", self.bytes_per_job / 1000.0)?;
        if self.checkpoint {
            write!(f, ", a checkpoint during it")?;
        }
        Ok(())
    }
}

/// Which statements a raw loop runs: the ceiling's own ([`CLAIM`], [`COMPLETE`]), or the store's
/// (`POSTGRES_CLAIM_SQL` and `POSTGRES_SUCCEED_SQL`, custom-planned as the engine's sessions
/// run them) in the same loop, which tells what the store's statements cost apart from what
/// the engine's processes do around them.
#[derive(Clone, Copy)]
enum Statements {
    Ceiling,
    Store,
}

/// Claim and complete `n` jobs with `clients` connections of `batch` jobs a claim: jobs/s, the
/// CPU it took (sampled while the connections are still open, so their backends count) and the
/// WAL it wrote.
fn raw_loop(url: &str, n: usize, clients: usize, batch: i64, statements: Statements) -> (f64, Cost, Option<WalCost>) {
    let postmaster = super::cpu::postmaster(url);
    let mut wal = Wal::open(url);
    let (looped, sampled) = (Barrier::new(clients + 1), Barrier::new(clients + 1));
    let wal_before = wal.as_mut().and_then(Wal::at);
    let (start, before) = (Instant::now(), Sample::take(postmaster, &[]));
    std::thread::scope(|s| {
        for c in 0..clients {
            let (looped, sampled) = (&looped, &sampled);
            s.spawn(move || {
                let mut db = backwave::postgres::Client::connect(url, backwave::postgres::NoTls).unwrap();
                let worker = format!("raw-{c}");
                match statements {
                    Statements::Ceiling => ceiling_loop(&mut db, batch, &worker),
                    Statements::Store => store_loop(&mut db, batch, &worker),
                }
                looped.wait();
                sampled.wait();
            });
        }
        looped.wait();
        let rate = n as f64 / start.elapsed().as_secs_f64();
        let cpu = before.per_job(&Sample::take(postmaster, &[]), n);
        sampled.wait();
        (rate, cpu, wal.as_mut().and_then(|w| w.since(wal_before, n)))
    })
}

/// The ceiling's loop on one connection until the queue is empty.
fn ceiling_loop(db: &mut backwave::postgres::Client, batch: i64, worker: &str) {
    let claim = db.prepare(CLAIM).unwrap();
    let complete = db.prepare(COMPLETE).unwrap();
    loop {
        let now = backwave::store::system_now();
        let rows = db.query(&claim, &[&super::QUEUE, &now, &batch, &worker]).unwrap();
        if rows.is_empty() {
            return;
        }
        let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.get(0)).collect();
        let attempts: Vec<i64> = rows.iter().map(|r| r.get(1)).collect();
        let done: i64 = db.query_one(&complete, &[&ids, &attempts, &now, &worker]).unwrap().get(0);
        assert_eq!(done as usize, ids.len(), "the fence let every job through");
    }
}

/// The same loop with the store's own claim and record of successes, bound as the store binds
/// them (the group's delay table shared, no wire name left out, the database clock).
fn store_loop(db: &mut backwave::postgres::Client, batch: i64, worker: &str) {
    db.batch_execute("SET plan_cache_mode = force_custom_plan").unwrap();
    let claim = db.prepare(backwave::store::POSTGRES_CLAIM_SQL).unwrap();
    let succeed = db.prepare(backwave::store::POSTGRES_SUCCEED_SQL).unwrap();
    let (group, skipped, max_attempts) = ("raw", Vec::<String>::new(), 10i64);
    let delays = "[2000,4000,8000,16000,32000,64000,128000,256000,300000]";
    loop {
        let now = backwave::store::system_now();
        let until = now + 60_000;
        let params: [&(dyn ToSql + Sync); 9] =
            [&super::QUEUE, &now, &batch, &skipped, &worker, &group, &until, &max_attempts, &delays];
        let rows = db.query(&claim, &params).unwrap();
        if rows.is_empty() {
            return;
        }
        // Recorded in id order, as the store does (the order the rows are locked in).
        let mut done: Vec<(uuid::Uuid, i64)> = rows.iter().map(|r| (r.get("id"), r.get("attempt"))).collect();
        done.sort_unstable();
        let (ids, attempts): (Vec<uuid::Uuid>, Vec<i64>) = done.into_iter().unzip();
        let workers = vec![worker; ids.len()];
        let recorded = db.query(&succeed, &[&ids, &workers, &attempts, &None::<i64>]).unwrap();
        assert_eq!(recorded.len(), ids.len(), "the fence let every job through");
    }
}

/// Drain `n` due jobs with `workers` worker processes; jobs/s from their start to the last
/// success, the CPU it took (sampled before the workers are stopped) and the WAL it wrote.
fn drain(url: &str, store: &Store, n: usize, workers: usize) -> (f64, Cost, Option<WalCost>) {
    let exe = std::env::current_exe().expect("the bench binary");
    let postmaster = super::cpu::postmaster(url);
    let mut wal = Wal::open(url);
    let wal_before = wal.as_mut().and_then(Wal::at);
    let (start, before) = (Instant::now(), Sample::take(postmaster, &[]));
    let mut children: Vec<Child> = (0..workers)
        .map(|w| {
            Command::new(&exe)
                .env("BW_BENCH_WORKER", url)
                .env("BW_BENCH_WORKER_NAME", format!("bench-{w}"))
                .spawn()
                .expect("start a worker process")
        })
        .collect();
    super::wait_for_successes(store, n, start, || {
        for c in &mut children {
            if let Some(status) = c.try_wait().unwrap() {
                panic!("a worker process exited mid-drain: {status}");
            }
        }
    });
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let cpu = before.per_job(&Sample::take(postmaster, &pids), n);
    let wal = wal.as_mut().and_then(|w| w.since(wal_before, n));
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    (rate, cpu, wal)
}

/// The worker process of [`drain`]: one engine with the default worker group on the URL in
/// `BW_BENCH_WORKER`, until killed.
pub fn worker(url: &str) -> ! {
    let name = std::env::var("BW_BENCH_WORKER_NAME").unwrap_or_else(|_| "bench".into());
    let mut engine = Engine::new(url, registry());
    engine.add_worker_group(Settings::Default.group(name));
    let _running = engine.start().expect("start the worker engine");
    loop {
        std::thread::park();
    }
}

/// The PostgreSQL rows of the table: the best raw ceiling over 1, 2 and 4 connections at each
/// batch width, the store's statements in the same loop, then the engine's drains with 1, 2 and
/// 4 worker processes against the ceiling; each row with its CPU a job, and each drain's server
/// CPU a job against that of the best ceiling with as many connections (where the database has
/// cores of its own, what bounds a drain).
pub fn run(server: &str, n: usize, row: &mut impl FnMut(String, String, String)) -> (f64, f64) {
    let mut ceiling = 0.0f64;
    let mut by_clients = [0.0f64; 5];
    let mut server_by_clients: [Option<f64>; 5] = [None; 5];
    let runs = RAW_BATCHES.iter().map(|&b| (Statements::Ceiling, b)).chain([(Statements::Store, STORE_BATCH)]);
    for (statements, batch) in runs {
        for clients in [1, 2, 4] {
            let name = match statements {
                Statements::Ceiling => format!("bench_raw_{batch}_{clients}"),
                Statements::Store => format!("bench_store_{clients}"),
            };
            let schema = Schema::new(server, &name);
            let store = Store::create(schema.url.as_str()).expect("create the store");
            enqueue(&store, n, 0);
            let (rate, cpu, wal) = raw_loop(&schema.url, n, clients, batch, statements);
            let what = match statements {
                Statements::Ceiling => {
                    ceiling = ceiling.max(rate);
                    if rate > by_clients[clients] {
                        (by_clients[clients], server_by_clients[clients]) = (rate, cpu.server);
                    }
                    format!("postgres raw SKIP LOCKED ceiling, {clients} conn, {batch}/claim")
                }
                Statements::Store => format!("postgres raw loop, store's statements, {clients} conn, {batch}/claim"),
            };
            row(what, format!("{rate:.0}"), format!("{cpu}{}", wal.map(|w| w.to_string()).unwrap_or_default()));
        }
    }
    let mut best = 0.0f64;
    for workers in [1, 2, 4] {
        let schema = Schema::new(server, &format!("bench_drain_{workers}"));
        let store = Store::create(schema.url.as_str()).expect("create the store");
        enqueue(&store, n, 0);
        let (rate, cpu, wal) = drain(&schema.url, &store, n, workers);
        best = best.max(rate);
        let server_ratio = match (cpu.server, server_by_clients[workers]) {
            (Some(drain), Some(raw)) => format!("; server CPU a job {:.2}x that ceiling's", drain / raw),
            _ => String::new(),
        };
        row(
            format!("postgres drain, {workers} worker process(es), default settings"),
            format!("{rate:.0}"),
            format!(
                "{:.0}% of the best postgres raw ceiling; {:.0}% of the best with {workers} connection(s); {cpu}{server_ratio}{}",
                100.0 * rate / ceiling,
                100.0 * rate / by_clients[workers],
                wal.map(|w| w.to_string()).unwrap_or_default()
            ),
        );
    }
    (ceiling, best)
}
