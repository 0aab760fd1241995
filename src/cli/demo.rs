//! `bw demo`: two example worker groups running for real on a demo store, watched in
//! `bw top`, or for `--duration` without a terminal, then a summary. The workers and handlers
//! are `crate::demo`; this file picks the store (a file, or the database a PostgreSQL URL names;
//! never one it did not make), shows the run, and prints what happened.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::output::{sanitize, shell_quote, state_style, thousands, Cell, Render, Table, Term};
use super::{parse_duration, CliError, Ctx};
use crate::demo::{Demo, DemoOptions, DemoReport};
use backwave::{Error, Store, StoreTarget};

/// Where the demo keeps its store unless `--db` (or BW_DB) says otherwise.
pub const DEFAULT_DEMO_DB: &str = "./backwave-demo.db";

/// How long running handlers get to finish when the demo stops.
const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not open `bw top`: run for --duration, then print a summary (also when stdout is not
    /// a terminal).
    #[arg(long)]
    pub no_tui: bool,
    /// How long to run without the dashboard.
    #[arg(long, value_parser = parse_duration, default_value = "20s", value_name = "DUR")]
    pub duration: Duration,
    /// Jobs enqueued per second (after a first round of one job of each kind).
    #[arg(long, default_value_t = 20.0, value_name = "N", value_parser = parse_rate)]
    pub rate: f64,
    /// Start over: replace the demo store an earlier run left, without asking.
    #[arg(long)]
    pub reset: bool,
    /// Seed of the job mix.
    #[arg(long, default_value_t = 1, hide = true)]
    pub seed: u64,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if (0.0..=5000.0).contains(&r) => Ok(r),
        _ => Err(format!("'{s}' is not a rate: use a number of jobs per second from 0 to 5000")),
    }
}

pub fn run(args: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let target = demo_target(&ctx.global.db);
    let shown = target.to_string();
    if !prepare_store(&target, args.reset, ctx)? {
        eprintln!("bw demo: left {} as it is; look at it with `bw --db {} top`", sanitize(&shown), shell_quote(&shown));
        return Ok(ExitCode::SUCCESS);
    }
    let opts = DemoOptions { db: target.clone(), rate: args.rate, actor: ctx.actor().to_string(), seed: args.seed };
    let demo = Demo::start(&opts)?;
    let tui = !args.no_tui && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let (report, ran_for, top_result) = if tui {
        let started = Instant::now();
        // The dashboard shows the store's errors as they happen; the demo's own follow it.
        let result = run_top(&target, ctx);
        for e in demo.take_events() {
            eprintln!("bw demo: {}", sanitize(&e));
        }
        (demo.stop(GRACE), started.elapsed(), result)
    } else {
        let (report, ran_for) = run_headless(demo, args, &shown)?;
        (report, ran_for, Ok(()))
    };
    // Leases the crashing node left behind have lapsed by now: record them as the failed
    // attempts they are, as any worker or `bw` process that notices would.
    let store = Store::open(&target)?;
    let _ = store.reap_expired(1000);
    let summary = Summary::new(&store, &target, &report, ran_for)?;
    ctx.printer()?.print(&summary)?;
    for e in &report.errors {
        eprintln!("bw demo: {}", sanitize(e));
    }
    for g in &report.groups {
        if let Some(e) = &g.last_error {
            eprintln!(
                "bw demo: worker group {} hit an error and carried on; the last: {}",
                sanitize(&g.group),
                sanitize(e)
            );
        }
    }
    top_result?;
    if let Some(e) = report.enqueue_failure {
        eprintln!(
            "bw demo: enqueuing stopped after {} jobs and the store did not recover before the end",
            thousands(report.enqueued)
        );
        return Err(e.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// `bw top` on the demo store, as a child process that shares the terminal, until the person
/// quits it. A separate process because the dashboard owns the terminal and its panic hook:
/// a handler's panic, caught by the engine in this process, must not reach the dashboard's
/// hook (which would leave the alternate screen mid-run).
fn run_top(target: &StoreTarget, ctx: &Ctx) -> Result<(), CliError> {
    // Ctrl-C and SIGTERM are the dashboard's to act on; this process waits for it to end, then
    // stops the workers cleanly instead of dying with them.
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))?;
    }
    let mut top = std::process::Command::new(std::env::current_exe()?);
    match target {
        StoreTarget::File(path) => top.arg("--db").arg(path),
        // Through the environment, not the command line, where every user's `ps` would show
        // the URL's password.
        StoreTarget::Postgres(url) => top.env("BW_DB", url.secret()?),
    };
    top.arg("--busy-timeout").arg(humantime::format_duration(ctx.global.busy_timeout).to_string());
    if ctx.global.no_color {
        top.arg("--no-color");
    }
    // q asks there before quitting: it stops the workers too.
    let status = top.arg("top").arg("--ask-before-quit").status()?;
    if status.success() {
        Ok(())
    } else {
        Err(CliError::Refused(format!("bw top ended with {status}; the workers were stopped")))
    }
}

/// `--db` when given (or BW_DB, even empty: refused then, as by every command), else the demo's
/// own file: the global default is the user's real store, which the demo must never pick by
/// accident.
fn demo_target(global: &StoreTarget) -> StoreTarget {
    let explicit = std::env::args_os().any(|a| a == "--db" || a.to_string_lossy().starts_with("--db="))
        || std::env::var_os("BW_DB").is_some();
    if explicit {
        global.clone()
    } else {
        StoreTarget::from(std::path::Path::new(DEFAULT_DEMO_DB))
    }
}

/// Make sure `target` holds a fresh demo store: a new one where there is none, an earlier demo
/// store started over (`Store::reset_demo`) when the person agrees or passed `--reset`, and a
/// refusal for anything else. Returns false when the person declined a reset.
fn prepare_store(target: &StoreTarget, reset: bool, ctx: &Ctx) -> Result<bool, CliError> {
    let shown = sanitize(&target.to_string()).into_owned();
    let elsewhere = match target {
        StoreTarget::File(_) => "another file",
        StoreTarget::Postgres(_) => "another database or schema",
    };
    let earlier = match target {
        StoreTarget::File(path) if !path.exists() => None,
        // Whatever is in the file, unless it opens as a demo store, is not the demo's to touch.
        StoreTarget::File(path) => Some(Store::open(path).ok().filter(|s| s.is_demo().unwrap_or(false))),
        // A database without a BackWave schema gets one (as `bw init` would); one that cannot be
        // reached or read is an error, never taken for "not a demo store".
        StoreTarget::Postgres(_) => match Store::open(target) {
            Err(Error::NotAStore { .. }) => None,
            Err(e) => return Err(e.into()),
            Ok(store) => Some(if store.is_demo()? { Some(store) } else { None }),
        },
    };
    let store = match earlier {
        None => {
            let store = Store::create(target)?;
            store.mark_demo()?;
            store
        }
        Some(None) => {
            return Err(CliError::Usage(format!(
                "'{shown}' exists and is not a demo store: bw demo only replaces stores it made; \
                 choose {elsewhere} with --db"
            )))
        }
        Some(Some(store)) => {
            let replace = if reset {
                true
            } else if ctx.interactive() {
                ctx.confirm(&format!("'{shown}' holds a demo store from an earlier run. Start over?"))?
            } else {
                return Err(CliError::Usage(format!(
                    "'{shown}' holds a demo store from an earlier run: pass --reset to start over, or --db to use \
                     {elsewhere}"
                )));
            };
            if !replace {
                return Ok(false);
            }
            store.reset_demo()?;
            store
        }
    };
    // So that `bw requeue` and `bw cancel` work on the demo store for whoever ran it.
    store.bootstrap_admin(ctx.actor())?;
    Ok(true)
}

/// Run for `--duration` (Ctrl-C stops early), with a progress line every 5 seconds.
fn run_headless(demo: Demo, args: &Args, shown: &str) -> Result<(DemoReport, Duration), CliError> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))?;
    }
    eprintln!(
        "bw demo: the retry guide's two worker groups on {} for {}, {} jobs/s; Ctrl-C stops early",
        sanitize(shown),
        super::output::compact_duration(args.duration),
        args.rate
    );
    let started = Instant::now();
    let mut next_progress = started + Duration::from_secs(5);
    // Each worker group's error count when last looked at, to say when it meets new ones.
    let mut group_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut next_errors = started;
    while started.elapsed() < args.duration && !interrupted.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50).min(args.duration.saturating_sub(started.elapsed())));
        for e in demo.take_events() {
            eprintln!("bw demo: {}", sanitize(&e));
        }
        // Store errors of the workers, as they happen (at most once a second per group: a
        // worker polling a restarting server meets one every poll).
        if Instant::now() >= next_errors {
            next_errors = Instant::now() + Duration::from_secs(1);
            for g in demo.stats() {
                let seen = group_errors.entry(g.group.clone()).or_insert(0);
                if g.errors > *seen {
                    eprintln!(
                        "bw demo: worker group {}: {} store error(s), retrying; the last: {}",
                        sanitize(&g.group),
                        g.errors - *seen,
                        sanitize(g.last_error.as_deref().unwrap_or("?"))
                    );
                    *seen = g.errors;
                }
            }
        }
        if Instant::now() >= next_progress {
            next_progress += Duration::from_secs(5);
            let stats = demo.stats();
            let sum = |f: fn(&backwave::engine::GroupStats) -> u64| stats.iter().map(f).sum::<u64>();
            eprintln!(
                "  {:>3}s  {} enqueued, {} succeeded, {} retried, {} dead-lettered, {} quarantined",
                started.elapsed().as_secs(),
                demo.enqueued(),
                sum(|g| g.succeeded),
                sum(|g| g.retried),
                sum(|g| g.dead_lettered),
                sum(|g| g.quarantined)
            );
        }
    }
    let ran_for = started.elapsed();
    for e in demo.take_events() {
        eprintln!("bw demo: {}", sanitize(&e));
    }
    eprintln!(
        "bw demo: stopping the workers: running handlers get {} to finish; any still running then is left to its \
         lease and runs again later",
        super::output::compact_duration(GRACE)
    );
    Ok((demo.stop(GRACE), ran_for))
}

/// What the run left in the store, and where to look next.
#[derive(Debug, Serialize)]
struct Summary {
    store: String,
    seconds: f64,
    enqueued: u64,
    /// Jobs by queue, then state (command-line spelling).
    by_queue: BTreeMap<String, BTreeMap<&'static str, u64>>,
    dead_lettered: Vec<Group>,
    quarantined: Vec<Group>,
    charges: usize,
    double_charges: usize,
    /// Handlers the shutdown stopped (their leases ended at once) and handlers left running
    /// (their leases left to lapse).
    stopped: u64,
    abandoned: u64,
    explore: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Group {
    count: u64,
    wire_name: String,
    /// The cause fingerprint for dead-letters; the reason for quarantines.
    cause: String,
}

impl Summary {
    fn new(store: &Store, target: &StoreTarget, report: &DemoReport, ran_for: Duration) -> Result<Self, CliError> {
        let counts = store.counts()?;
        let by_queue = counts
            .by_queue
            .iter()
            .map(|(q, states)| (q.clone(), states.iter().map(|(s, n)| (s.as_str(), *n)).collect()))
            .collect();
        let dead_lettered = store
            .cause_groups(10)?
            .into_iter()
            .map(|g| Group { count: g.count, wire_name: g.wire_name, cause: g.fingerprint })
            .collect();
        let quarantined = store
            .quarantine_groups()?
            .into_iter()
            .map(|g| Group { count: g.count, wire_name: g.wire_name, cause: g.reason.as_str().to_string() })
            .collect();
        // A URL's password shows as `***`: the person retypes it, or sets BW_DB and drops --db.
        let db = shell_quote(&target.to_string()).into_owned();
        let explore = vec![
            format!("bw --db {db} top"),
            format!("bw --db {db} stats"),
            format!("bw --db {db} jobs list --state dead-lettered"),
            format!("bw --db {db} jobs list --state quarantined"),
            format!("bw --db {db} jobs list --state dead-lettered --wire-name flaky"),
            format!("bw --db {db} log tail -n 30"),
            format!("bw --db {db} jobs show ID --detail"),
            format!("bw --db {db} requeue --state dead-lettered --wire-name flaky --dry-run"),
        ];
        Ok(Summary {
            store: target.to_string(),
            seconds: (ran_for.as_secs_f64() * 10.0).round() / 10.0,
            enqueued: report.enqueued,
            by_queue,
            dead_lettered,
            quarantined,
            charges: report.charges,
            double_charges: report.double_charges,
            stopped: report.stopped,
            abandoned: report.abandoned,
            explore,
        })
    }
}

impl Render for Summary {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        writeln!(
            out,
            "BackWave demo: {} jobs enqueued in {:.0} s on {}\n",
            thousands(self.enqueued),
            self.seconds,
            sanitize(&self.store)
        )?;
        let mut headers = vec!["QUEUE"];
        // The demo enqueues no workflow: the six states its operators know.
        let shown = crate::text::states_shown(false);
        headers.extend(shown.iter().map(|s| s.as_str()));
        headers.push("total");
        let upper: Vec<String> = headers.iter().map(|h| h.to_uppercase()).collect();
        let mut table = Table::new(&upper.iter().map(String::as_str).collect::<Vec<_>>());
        let mut totals = vec![0u64; shown.len() + 1];
        let row = |name: &str, ns: &[u64]| -> Vec<Cell> {
            let mut cells = vec![Cell::from(sanitize(name).into_owned())];
            for (i, n) in ns.iter().enumerate() {
                let style = shown.get(i).filter(|_| *n > 0).map(|s| state_style(*s)).unwrap_or_default();
                cells.push(Cell::styled(format!("{:>w$}", thousands(*n), w = upper[i + 1].len()), style));
            }
            cells
        };
        for (queue, states) in &self.by_queue {
            let mut ns: Vec<u64> = shown.iter().map(|s| states.get(s.as_str()).copied().unwrap_or(0)).collect();
            ns.push(ns.iter().sum());
            for (t, n) in totals.iter_mut().zip(&ns) {
                *t += n;
            }
            table.row(row(queue, &ns));
        }
        table.row(row("total", &totals));
        table.write(out, term)?;

        writeln!(out, "\nDead-lettered (it ran and kept failing), by cause:")?;
        write_groups(out, &self.dead_lettered)?;
        writeln!(out, "\nQuarantined (it never ran: deploy drift), by reason:")?;
        write_groups(out, &self.quarantined)?;
        writeln!(
            out,
            "\ncharge-card's idempotency ledger: {} cards charged, {} charged twice.",
            thousands(self.charges as u64),
            self.double_charges
        )?;
        // Said apart: a stopped handler's lease ended at once (its job is Scheduled again, or
        // dead-lettered on its last attempt), so "left to their leases" beside Running 0 in the
        // table above read as a contradiction.
        if self.stopped > 0 {
            writeln!(
                out,
                "{} handler(s) stopped when the workers shut down: their leases ended at once and their jobs are \
                 retried (one attempt spent), as on a host shutdown.",
                self.stopped
            )?;
        }
        if self.abandoned > 0 {
            writeln!(
                out,
                "{} handler(s) still running at the end were left to their leases, as on a host shutdown: \
                 the next worker runs them again once they lapse.",
                self.abandoned
            )?;
        }
        writeln!(out, "\nExplore the result (ID: any id from a list):")?;
        for cmd in &self.explore {
            writeln!(out, "  {}", sanitize(cmd))?;
        }
        Ok(())
    }
}

fn write_groups(out: &mut dyn Write, groups: &[Group]) -> io::Result<()> {
    if groups.is_empty() {
        return writeln!(out, "  (none yet)");
    }
    let w = groups.iter().map(|g| super::output::width(&sanitize(&g.wire_name))).max().unwrap_or(0);
    for g in groups {
        let name = sanitize(&g.wire_name);
        let pad = w.saturating_sub(super::output::width(&name));
        writeln!(out, "  {:>5}  {name}{}  {}", thousands(g.count), " ".repeat(pad), sanitize(&g.cause))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(stopped: u64, abandoned: u64) -> String {
        let s = Summary {
            store: "demo.db".into(),
            seconds: 1.0,
            enqueued: 0,
            by_queue: BTreeMap::new(),
            dead_lettered: Vec::new(),
            quarantined: Vec::new(),
            charges: 0,
            double_charges: 0,
            stopped,
            abandoned,
            explore: Vec::new(),
        };
        let mut out = Vec::new();
        s.table(&mut out, &Term { width: Some(200), color: false, now: 0 }).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Found in a 3 a.m. walkthrough: "3 handler(s) still running … left to their leases" beside
    /// Running 0 in the same table. Handlers the shutdown stopped had their leases ended at once;
    /// only those still running are left to their leases.
    #[test]
    fn the_summary_says_stopped_handlers_apart_from_those_left_to_their_leases() {
        let text = summary(3, 0);
        assert!(text.contains("3 handler(s) stopped when the workers shut down: their leases ended at once"), "{text}");
        assert!(!text.contains("left to their leases"), "{text}");
        let text = summary(0, 2);
        assert!(text.contains("2 handler(s) still running at the end were left to their leases"), "{text}");
        assert!(!text.contains("stopped when"), "{text}");
        assert!(!summary(0, 0).contains("handler(s)"));
    }
}
