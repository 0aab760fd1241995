//! bw metrics: the store's health ([`Store::health`](backwave::Store::health)) as Prometheus text
//! exposition, printed once or served over HTTP (`--listen`) until SIGTERM. Owns the metric
//! names, label escaping and the bound on label cardinality; reads only, never writes.

use std::fmt::Write as _;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::check::ThresholdArgs;
use super::output::sanitize;
use super::{eprint_quiet, CliError, Ctx};
use backwave::store::{CheckName, Health, PauseKind, QueueHealth, Status, TransitionCounter};
use backwave::{JobState, Store};

/// The address `--listen` without a value serves on: loopback, Prometheus' exporter port range.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve the metrics over HTTP at http://ADDR/metrics until SIGTERM or Ctrl-C, instead of
    /// printing them once. Without ADDR: 127.0.0.1:9464 (loopback only).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_LISTEN)]
    pub listen: Option<SocketAddr>,
    /// Label at most this many dead-letter cause groups, quarantine groups and pauses (of each
    /// kind) each, the largest (0 to 100); the rest are summed under "(other)", so a flood of
    /// distinct causes cannot flood the time-series database.
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub top: u8,
    /// The thresholds behind backwave_check_status, as for `bw check`.
    #[command(flatten, next_help_heading = "Thresholds (as bw check)")]
    pub thresholds: ThresholdArgs,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if ctx.json() {
        return Err(CliError::Usage(
            "bw metrics prints the Prometheus text format; --format json does not apply (see bw check --format json)"
                .into(),
        ));
    }
    let store = ctx.open()?;
    match a.listen {
        None => {
            let text = render(&store.health(&a.thresholds.thresholds())?, None, a.top.into(), None);
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Some(addr) => serve(store, ctx, addr, a),
    }
}

/// Serve until SIGTERM or SIGINT: each scrape is one health read. One thread; a scrape that
/// arrives while another is read waits its turn (Prometheus scrapes one at a time anyway).
fn serve(store: Store, ctx: &Ctx, addr: SocketAddr, a: &Args) -> Result<ExitCode, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let server =
        tiny_http::Server::http(addr).map_err(|e| CliError::Usage(format!("cannot listen on '{addr}': {e}")))?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    let thresholds = a.thresholds.thresholds();
    let mut transitions = TransitionCounter::default();
    store.count_transitions(&mut transitions)?;
    let mut store = Some(store);
    eprint_quiet(format_args!("bw metrics: serving http://{bound}/metrics (SIGTERM or Ctrl-C stops)\n"));
    if !bound.ip().is_loopback() {
        eprint_quiet(format_args!(
            "bw metrics: warning: {bound} is reachable from other hosts, and the metrics name wire names and failure causes\n"
        ));
    }
    while !stop.load(Ordering::SeqCst) {
        // A short wait, so a signal is noticed within 200 ms even with no scraper.
        let Some(request) = server.recv_timeout(Duration::from_millis(200))? else { continue };
        let path = request.url().split('?').next().unwrap_or("");
        let get = matches!(request.method(), tiny_http::Method::Get | tiny_http::Method::Head);
        let response = match (get, path) {
            (false, _) => text(405, "only GET and HEAD are served\n".into()),
            (true, "/metrics") => {
                let started = Instant::now();
                let read = current(&mut store, ctx, &mut transitions).and_then(|store| {
                    store.count_transitions(&mut transitions)?;
                    Ok(store.health(&thresholds)?)
                });
                match read {
                    Ok(h) => text(200, render(&h, Some(&transitions), a.top.into(), Some(started.elapsed()))),
                    Err(e) => {
                        // Prometheus records the failed scrape as up == 0; the reason goes to the log.
                        eprint_quiet(format_args!("bw metrics: scrape failed: {e}\n"));
                        text(503, format!("the store could not be read: {e}\n"))
                    }
                }
            }
            (true, "/") => text(200, "BackWave metrics: /metrics\n".into()),
            (true, _) => text(404, "not found: the metrics are at /metrics\n".into()),
        };
        // A scraper that hung up mid-response is its problem, not a reason to stop serving.
        let _ = request.respond(response);
    }
    eprint_quiet(format_args!("bw metrics: stopped\n"));
    Ok(ExitCode::SUCCESS)
}

/// The store a scrape reads: the one open, unless its file was removed or replaced since (a
/// restore from a backup renamed into place, which the open connection would go on reading
/// unseen); then the file at the path now, opened afresh, or the error while there is none
/// (the scrape answers 503, and the next one tries again). The old store is closed first, so
/// that its `-wal` is checkpointed into the old file and removed, never read with the new one.
/// The transition counter carries on from the new store's end of log: its totals never drop.
fn current<'a>(
    slot: &'a mut Option<Store>,
    ctx: &Ctx,
    transitions: &mut TransitionCounter,
) -> Result<&'a Store, CliError> {
    if let Some(why) = slot.as_ref().and_then(Store::replaced) {
        eprint_quiet(format_args!("bw metrics: {why}; reopening it\n"));
        *slot = None;
    }
    match slot {
        Some(store) => Ok(store),
        None => {
            let store = ctx.open()?;
            transitions.last = None;
            store.count_transitions(transitions)?;
            eprint_quiet(format_args!("bw metrics: opened {}\n", store.target()));
            Ok(slot.insert(store))
        }
    }
}

fn text(status: u16, body: String) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let header = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header");
    tiny_http::Response::from_string(body).with_status_code(status).with_header(header)
}

/// A label value in the text format. Database text is first made inert as everywhere else in
/// `bw` (control, bidi and zero-width characters become visible escapes such as `\e`, so a
/// `curl` of the endpoint or a one-shot print at a terminal cannot drive it), cut to 200
/// characters, then backslash and double quote are escaped as the format requires.
pub fn escape_label(value: &str) -> String {
    const MAX: usize = 200;
    let cut: String = value.chars().take(MAX).collect();
    let mut out = String::with_capacity(cut.len() + 8);
    for c in sanitize(&cut).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    if value.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}

/// The label value under which everything past `--top` is summed.
pub const OTHER: &str = "(other)";

struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// A gauge exported once per queue.
struct QueueGauge {
    name: &'static str,
    help: &'static str,
    value: fn(&QueueHealth) -> f64,
}

/// The per-queue gauges, in the order they are exported. One table so that a gauge added for a
/// queue is one row, its family and samples written as every other's.
const QUEUE_GAUGES: [QueueGauge; 4] = [
    QueueGauge {
        name: "backwave_queue_due_jobs",
        help: "Scheduled jobs due now and claimable, waiting for a worker, by queue (a pause's are held, not due).",
        value: |q| q.due_now as f64,
    },
    QueueGauge {
        name: "backwave_queue_held_jobs",
        help: "Scheduled jobs due now that a pause holds back (of a paused queue or wire name), by queue.",
        value: |q| q.held_by_pause as f64,
    },
    QueueGauge {
        name: "backwave_queue_oldest_due_age_seconds",
        help: "How long the oldest due, claimable Scheduled job of the queue has waited (0 when none is due).",
        value: |q| q.oldest_due_age_ms as f64 / 1000.0,
    },
    QueueGauge {
        name: "backwave_queue_live_workers",
        help: "Live workers whose groups claim from the queue.",
        value: |q| q.live_workers as f64,
    },
];

/// The exposition of one health read. `transitions` is the listener's counter (absent from a
/// one-shot print, which has no earlier read to count from).
pub fn render(h: &Health, transitions: Option<&TransitionCounter>, top: usize, took: Option<Duration>) -> String {
    let mut e = Exposition(String::with_capacity(8 * 1024));

    e.family("backwave_jobs", "gauge", "Jobs in the store by queue and state.");
    for (queue, states) in &h.counts.by_queue {
        for s in JobState::ALL {
            e.sample(
                "backwave_jobs",
                &[("queue", queue), ("state", s.as_str())],
                states.get(&s).copied().unwrap_or(0) as f64,
            );
        }
    }

    for g in &QUEUE_GAUGES {
        e.family(g.name, "gauge", g.help);
        for q in &h.queues {
            e.sample(g.name, &[("queue", &q.queue)], (g.value)(q));
        }
    }

    e.family(
        "backwave_dead_lettered_jobs",
        "gauge",
        "Dead-Lettered jobs by wire name and cause fingerprint: the largest groups, the rest under (other).",
    );
    let mut shown = 0u64;
    for c in h.causes.iter().take(top) {
        let labels = [("wire_name", c.wire_name.as_str()), ("cause", c.fingerprint.as_str())];
        e.sample("backwave_dead_lettered_jobs", &labels, c.count as f64);
        shown += c.count;
    }
    if h.cause_groups_total > top.min(h.causes.len()) as u64 {
        // Everything not labelled: the exact total (trigger-kept) less the groups shown.
        let other = h.counts.total(JobState::DeadLettered).saturating_sub(shown);
        e.sample("backwave_dead_lettered_jobs", &[("wire_name", OTHER), ("cause", OTHER)], other as f64);
    }
    e.family("backwave_dead_lettered_recent_jobs", "gauge", "Jobs Dead-Lettered within the check window.");
    e.sample("backwave_dead_lettered_recent_jobs", &[], h.dead_lettered_in_window as f64);
    e.family("backwave_new_causes", "gauge", "Dead-letter cause groups first seen within the check window.");
    e.sample("backwave_new_causes", &[], h.new_causes_total as f64);

    e.family(
        "backwave_quarantined_jobs",
        "gauge",
        "Quarantined jobs by wire name and reason: the largest groups, the rest under (other).",
    );
    let mut other = 0u64;
    for (i, g) in h.quarantines.iter().enumerate() {
        if i < top {
            e.sample(
                "backwave_quarantined_jobs",
                &[("wire_name", &g.wire_name), ("reason", g.reason.as_str())],
                g.count as f64,
            );
        } else {
            other += g.count;
        }
    }
    if h.quarantines.len() > top {
        e.sample("backwave_quarantined_jobs", &[("wire_name", OTHER), ("reason", OTHER)], other as f64);
    }

    e.family(
        "backwave_paused",
        "gauge",
        "1 per queue or wire name paused now; past --top per kind, the rest counted under name=\"(other)\".",
    );
    for kind in [PauseKind::Queue, PauseKind::WireName] {
        let of_kind: Vec<_> = h.pauses.iter().filter(|p| p.kind == kind).collect();
        for p in of_kind.iter().take(top) {
            e.sample("backwave_paused", &[("kind", kind.as_str()), ("name", &p.name)], 1.0);
        }
        if of_kind.len() > top {
            e.sample("backwave_paused", &[("kind", kind.as_str()), ("name", OTHER)], (of_kind.len() - top) as f64);
        }
    }

    e.family("backwave_workers", "gauge", "Registered workers, live (heartbeating) or stale.");
    e.sample("backwave_workers", &[("status", "live")], h.workers.live as f64);
    e.sample("backwave_workers", &[("status", "stale")], h.workers.stale as f64);
    e.family(
        "backwave_workers_quiet",
        "gauge",
        "Registered workers quieted (bw workers quiet): they claim nothing and finish what they run.",
    );
    e.sample("backwave_workers_quiet", &[], h.worker_states.iter().filter(|s| s.quiet_at.is_some()).count() as f64);

    // Limits are few and set by hand, so every one is labelled (no --top cut).
    e.family("backwave_limit_concurrency", "gauge", "The concurrency limit in force per queue or wire name.");
    for l in &h.limits {
        if let Some(c) = l.effective.concurrency {
            e.sample("backwave_limit_concurrency", &[("kind", l.kind.as_str()), ("name", &l.name)], f64::from(c));
        }
    }
    e.family(
        "backwave_limit_rate_per_second",
        "gauge",
        "The rate limit in force per queue or wire name, as claims per second.",
    );
    for l in &h.limits {
        if let Some(r) = l.effective.rate {
            let per_s = f64::from(r.n) / r.per.as_secs_f64();
            e.sample("backwave_limit_rate_per_second", &[("kind", l.kind.as_str()), ("name", &l.name)], per_s);
        }
    }
    e.family("backwave_limit_running", "gauge", "Jobs running under each limit now (live leases).");
    for l in &h.limits {
        e.sample("backwave_limit_running", &[("kind", l.kind.as_str()), ("name", &l.name)], l.running as f64);
    }
    e.family(
        "backwave_limit_held_back",
        "gauge",
        "Scheduled jobs due now that a limit holds back (its budget is spent), per queue or wire name.",
    );
    for l in &h.limits {
        e.sample("backwave_limit_held_back", &[("kind", l.kind.as_str()), ("name", &l.name)], l.held_back as f64);
    }

    // Schedules are declared in code, so their names are bounded by the applications: no --top.
    e.family(
        "backwave_schedule_seconds_since_last_fire",
        "gauge",
        "Seconds since each schedule last made a job (a tick or a trigger); absent until its first.",
    );
    for i in &h.schedules {
        if let Some(at) = i.row.last_fired_at {
            let secs = h.at.saturating_sub(at).max(0) as f64 / 1000.0;
            e.sample("backwave_schedule_seconds_since_last_fire", &[("schedule", &i.row.schedule.name)], secs);
        }
    }
    e.family(
        "backwave_schedule_skipped_ticks_total",
        "counter",
        "Ticks of a unique schedule that made no job because its previous tick's job was still pending.",
    );
    for i in &h.schedules {
        e.sample(
            "backwave_schedule_skipped_ticks_total",
            &[("schedule", &i.row.schedule.name)],
            i.row.skipped_ticks as f64,
        );
    }
    e.family("backwave_schedule_paused", "gauge", "1 when the schedule is paused now, else 0.");
    for i in &h.schedules {
        e.sample("backwave_schedule_paused", &[("schedule", &i.row.schedule.name)], f64::from(u8::from(i.paused)));
    }
    e.family(
        "backwave_schedule_orphaned",
        "gauge",
        "1 when no running application has declared the schedule for a minute (kept, never deleted), else 0.",
    );
    for i in &h.schedules {
        e.sample("backwave_schedule_orphaned", &[("schedule", &i.row.schedule.name)], f64::from(u8::from(i.orphaned)));
    }

    e.family("backwave_check_status", "gauge", "bw check's verdict per check: 0 ok, 1 warning, 2 critical.");
    for name in CheckName::ALL {
        let v = match h.check(name).status {
            Status::Ok => 0.0,
            Status::Warning => 1.0,
            Status::Critical => 2.0,
        };
        e.sample("backwave_check_status", &[("check", name.as_str())], v);
    }

    e.family(
        "backwave_log_entries_total",
        "counter",
        "Transitions ever appended to the log (its sequence; the retention sweep does not lower it).",
    );
    e.sample("backwave_log_entries_total", &[], h.log_seq as f64);
    if let Some(t) = transitions {
        e.family(
            "backwave_transitions_total",
            "counter",
            "Transitions by the state they moved a job into, counted since this exporter started.",
        );
        for s in JobState::ALL {
            e.sample(
                "backwave_transitions_total",
                &[("to_state", s.as_str())],
                t.by_state.get(&s).copied().unwrap_or(0) as f64,
            );
        }
    }
    if let Some(took) = took {
        e.family("backwave_scrape_duration_seconds", "gauge", "How long this scrape took to read the store.");
        e.sample("backwave_scrape_duration_seconds", &[], took.as_secs_f64());
    }
    e.0
}

#[cfg(test)]
mod tests {
    use super::escape_label;

    #[test]
    fn label_values_escape_backslash_and_quote_and_print_control_characters_inert() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        // A newline or an escape sequence becomes visible text, its backslash escaped in turn.
        assert_eq!(escape_label("line\nnext"), r"line\\nnext");
        assert_eq!(escape_label("\u{1b}]0;pwned\u{7}"), r"\\e]0;pwned\\x07");
        assert_eq!(escape_label(&"x".repeat(300)).chars().count(), 201);
        assert_eq!(escape_label(&"x".repeat(200)).chars().count(), 200);
    }
}
