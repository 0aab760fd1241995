//! The checks `bw check` exits on: where each draws its line ([`Thresholds`]), how bad crossing
//! it is, and the verdict with a one-line message naming what is wrong. Pure: judges a [`Health`]
//! already read, never touches the store.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;

use super::{Health, QueueHealth};
use crate::store::pause::Pause;
use crate::store::ScheduleInfo;

/// Where each check draws its line. [`Thresholds::default`] is the usual set; change a field to
/// draw one line elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// `latency` is critical when a queue's oldest due job has waited longer than this.
    pub max_latency: Duration,
    /// The recent past that `dead-lettered`, `new-cause`, `unhandled-quarantine` and
    /// `stale-workers` look at.
    pub window: Duration,
    /// `dead-lettered` is critical when more jobs than this were Dead-Lettered in the window.
    pub max_dead: u64,
    /// `new-cause` warns when more cause fingerprints than this were first seen in the window.
    pub max_new_causes: u64,
    /// `unhandled-quarantine` warns when more wire names than this were Quarantined in the window
    /// and no live worker handles them now.
    pub max_unhandled: u64,
    /// `unworked-queue` is critical when a queue no live worker serves has had a job due for
    /// longer than this (a grace for a deploy restarting its workers).
    pub unworked_after: Duration,
    /// `stale-workers` warns when more workers than this stopped heartbeating in the window.
    pub max_stale: u64,
    /// `forgotten-pause` warns when a pause has been in force longer than this: a pause nobody
    /// lifted stops work silently.
    pub max_pause: Duration,
    /// `quiet-worker` warns when a worker process has been quiet longer than this: a deploy that
    /// quieted it and never stopped it leaves its slots idle.
    pub max_quiet: Duration,
    /// `overdue-schedule` warns when a schedule's first unfired tick is later than this: no
    /// running application fires it (a paused schedule is not judged).
    pub schedule_grace: Duration,
    /// Queues the latency checks leave out (known to be unserved on purpose). Paused queues are
    /// left out without being named here (they are reported as paused instead).
    pub exclude_queues: BTreeSet<String>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_latency: Duration::from_secs(5 * 60),
            window: Duration::from_secs(60 * 60),
            max_dead: 10,
            max_new_causes: 0,
            max_unhandled: 0,
            unworked_after: Duration::from_secs(60),
            max_stale: 0,
            max_pause: Duration::from_secs(60 * 60),
            max_quiet: Duration::from_secs(60 * 60),
            schedule_grace: crate::schedule::TICK_GRACE,
            exclude_queues: BTreeSet::new(),
        }
    }
}

/// How bad a check is. Ordered: the worst check is the store's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Within every threshold.
    Ok,
    /// Something needs a look soon (a new failure cause, a forgotten pause).
    Warning,
    /// Jobs are not getting done (latency, an unworked queue, many dead letters): page someone.
    Critical,
}

impl Status {
    /// The spelling in JSON and metrics: `ok`, `warning`, `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Critical => "critical",
        }
    }
}

/// The checks, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// A queue's oldest due job waited longer than `max_latency` (critical).
    Latency,
    /// No live worker serves a queue with a job due longer than `unworked_after` (critical).
    UnworkedQueue,
    /// More than `max_dead` jobs Dead-Lettered in the window (critical).
    DeadLettered,
    /// A dead-letter cause fingerprint first seen inside the window: a new failure (warning).
    NewCause,
    /// A wire name Quarantined in the window that no live worker handles (warning).
    UnhandledQuarantine,
    /// Workers that stopped heartbeating in the window (warning).
    StaleWorkers,
    /// A pause in force for longer than `max_pause` (warning).
    ForgottenPause,
    /// A worker process quiet for longer than `max_quiet` (warning).
    QuietWorker,
    /// A schedule whose tick is overdue by more than `schedule_grace`: nobody fires it (warning).
    OverdueSchedule,
    /// Workflow jobs waiting behind a parent that ended Dead-Lettered, Quarantined or Cancelled:
    /// they run only if someone requeues that parent (warning).
    StuckWorkflow,
}

impl CheckName {
    /// Every check, in the order they are reported.
    pub const ALL: [CheckName; 10] = [
        CheckName::Latency,
        CheckName::UnworkedQueue,
        CheckName::DeadLettered,
        CheckName::NewCause,
        CheckName::UnhandledQuarantine,
        CheckName::StaleWorkers,
        CheckName::ForgottenPause,
        CheckName::QuietWorker,
        CheckName::OverdueSchedule,
        CheckName::StuckWorkflow,
    ];

    /// The check's name in JSON and metrics: `latency`, `unworked-queue`, …
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Latency => "latency",
            CheckName::UnworkedQueue => "unworked-queue",
            CheckName::DeadLettered => "dead-lettered",
            CheckName::NewCause => "new-cause",
            CheckName::UnhandledQuarantine => "unhandled-quarantine",
            CheckName::StaleWorkers => "stale-workers",
            CheckName::ForgottenPause => "forgotten-pause",
            CheckName::QuietWorker => "quiet-worker",
            CheckName::OverdueSchedule => "overdue-schedule",
            CheckName::StuckWorkflow => "stuck-workflow",
        }
    }

    /// What crossing the threshold means.
    pub fn severity(self) -> Status {
        match self {
            CheckName::Latency | CheckName::UnworkedQueue | CheckName::DeadLettered => Status::Critical,
            CheckName::NewCause
            | CheckName::UnhandledQuarantine
            | CheckName::StaleWorkers
            | CheckName::ForgottenPause
            | CheckName::QuietWorker
            | CheckName::OverdueSchedule
            | CheckName::StuckWorkflow => Status::Warning,
        }
    }

    /// The unit of `value` and `threshold`.
    pub fn unit(self) -> &'static str {
        match self {
            CheckName::Latency
            | CheckName::UnworkedQueue
            | CheckName::ForgottenPause
            | CheckName::QuietWorker
            | CheckName::OverdueSchedule => "seconds",
            CheckName::DeadLettered | CheckName::StuckWorkflow => "jobs",
            CheckName::NewCause => "causes",
            CheckName::UnhandledQuarantine => "wire names",
            CheckName::StaleWorkers => "workers",
        }
    }
}

/// One check's verdict: `value` against `threshold` (both in `unit`); over it is `severity`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Which check.
    pub name: CheckName,
    /// `Ok`, or the check's severity when `value` is over `threshold`.
    pub status: Status,
    /// What was measured (the worst queue's latency, the dead letters in the window, …).
    pub value: f64,
    /// The threshold it was compared with, from [`Thresholds`].
    pub threshold: f64,
    /// The unit of both ([`CheckName::unit`]).
    pub unit: &'static str,
    /// One line naming what is wrong (the queues, causes, wire names, workers), or all is well.
    pub message: String,
}

/// Database text named in a one-line message: quoted, line breaks and other control characters
/// as spaces, cut to 80 characters (the full text is in `bw stats` and `bw jobs show`).
fn quote(text: &str) -> String {
    const MAX: usize = 80;
    // A cause that holds a single quote ("flaky 'daily' failed") is quoted in double quotes, so
    // the reader sees where it ends; one that holds both has its single quotes escaped.
    let (mark, escape) = match (text.contains('\''), text.contains('"')) {
        (false, _) => ('\'', false),
        (true, false) => ('"', false),
        (true, true) => ('\'', true),
    };
    let mut out = String::from(mark);
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        if escape && c == '\'' {
            out.push('\\');
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out.push(mark);
    out
}

/// `paused by alice until 2026-11-30T14:30:00Z` (or `until resumed`), the actor quoted.
fn paused_by(p: &Pause) -> String {
    let until = match p.until {
        Some(u) => {
            let at = std::time::UNIX_EPOCH + Duration::from_millis(u.max(0) as u64);
            format!("until {}", humantime::format_rfc3339_seconds(at))
        }
        None => "until resumed".into(),
    };
    format!("paused by {} {until}", quote(&p.paused_by))
}

pub(super) fn judge(name: CheckName, h: &Health, t: &Thresholds) -> Check {
    let verdict = |over: bool| if over { name.severity() } else { Status::Ok };
    let secs = |ms: u64| ms as f64 / 1000.0;
    let ago = |ms: u64| humantime::format_duration(Duration::from_secs(ms / 1000)).to_string();
    let counted = |ms: u64| -> String {
        if ms < 1000 {
            "under 1s".into()
        } else {
            ago(ms)
        }
    };
    let window = ago(t.window.as_millis() as u64);
    // The first five of `total` things named, then how many more.
    let list_of = |items: Vec<String>, total: usize| -> String {
        const SHOWN: usize = 5;
        let more = total.saturating_sub(SHOWN.min(items.len()));
        let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let list = |items: Vec<String>| {
        let total = items.len();
        list_of(items, total)
    };
    // A paused queue is not judged: it is paused on purpose (and `forgotten-pause` watches it).
    let watched = || h.queues.iter().filter(|q| !q.excluded && q.paused.is_none() && q.due_now > 0);
    // The paused queues, named after a latency verdict so that a quiet queue is never a mystery.
    let paused_queues = || -> String {
        let named: Vec<String> = h
            .queues
            .iter()
            .filter_map(|q| q.paused.as_ref().map(|p| (q, p)))
            .map(|(q, p)| format!("{} {}, {} due", quote(&q.queue), paused_by(p), q.held_by_pause))
            .collect();
        if named.is_empty() {
            String::new()
        } else {
            format!("; not judged, paused: {}", list(named))
        }
    };
    // The limits holding due jobs back now, named after a latency verdict as pauses are: a queue
    // throttled on purpose waits, and the reader should see why.
    let limited = || -> String {
        let named: Vec<String> = h
            .limits
            .iter()
            .filter(|l| l.budget == 0 && l.held_back > 0)
            .map(|l| format!("{} {} ({}), {} due held", l.kind, quote(&l.name), l.effective, l.held_back))
            .collect();
        if named.is_empty() {
            String::new()
        } else {
            format!("; held back by a limit: {}", list(named))
        }
    };
    let (value, threshold, message) = match name {
        CheckName::Latency => {
            let limit = t.max_latency.as_millis() as u64;
            let mut late: Vec<&QueueHealth> = watched().filter(|q| q.oldest_due_age_ms > limit).collect();
            late.sort_by_key(|q| std::cmp::Reverse(q.oldest_due_age_ms));
            let worst = watched().map(|q| q.oldest_due_age_ms).max().unwrap_or(0);
            let message = if late.is_empty() {
                match watched().max_by_key(|q| q.oldest_due_age_ms) {
                    Some(q) => {
                        format!("oldest due job waited {} (queue {})", counted(q.oldest_due_age_ms), quote(&q.queue))
                    }
                    None => "no job is waiting for a worker".into(),
                }
            } else {
                let named = late
                    .iter()
                    .map(|q| format!("{} {} ({} due)", quote(&q.queue), ago(q.oldest_due_age_ms), q.due_now))
                    .collect();
                format!("oldest due job waited longer than {}: {}", ago(limit), list(named))
            };
            (secs(worst), secs(limit), message + &paused_queues() + &limited())
        }
        CheckName::UnworkedQueue => {
            let grace = t.unworked_after.as_millis() as u64;
            let mut unworked: Vec<&QueueHealth> = watched().filter(|q| q.live_workers == 0).collect();
            unworked.sort_by_key(|q| std::cmp::Reverse(q.oldest_due_age_ms));
            let worst = unworked.first().map_or(0, |q| q.oldest_due_age_ms);
            let over: Vec<String> = unworked
                .iter()
                .filter(|q| q.oldest_due_age_ms > grace)
                .map(|q| format!("{} ({} due, oldest {})", quote(&q.queue), q.due_now, ago(q.oldest_due_age_ms)))
                .collect();
            let message = if !over.is_empty() {
                format!("no live worker serves {} (quiet and stopping workers claim nothing)", list(over))
            } else if unworked.is_empty() {
                "every queue with due jobs has a live worker claiming".into()
            } else {
                format!("no live worker yet for {} queue(s), within the {} grace", unworked.len(), ago(grace))
            };
            (secs(worst), secs(grace), message)
        }
        CheckName::DeadLettered => {
            let n = h.dead_lettered_in_window;
            let message = if n > t.max_dead {
                let top = h
                    .causes
                    .iter()
                    .filter(|c| c.last_seen >= h.window_start)
                    .take(3)
                    .map(|c| format!("{}: {}", quote(&c.wire_name), quote(&c.fingerprint)))
                    .collect::<Vec<_>>();
                format!(
                    "dead-lettered in the last {window}: {n} (more than {}); latest causes: {}",
                    t.max_dead,
                    list(top)
                )
            } else {
                format!("dead-lettered in the last {window}: {n}")
            };
            (n as f64, t.max_dead as f64, message)
        }
        CheckName::NewCause => {
            let n = h.new_causes_total;
            let message = if n > t.max_new_causes {
                let named = h
                    .new_causes
                    .iter()
                    .map(|c| format!("{}: {} (jobs: {})", quote(&c.wire_name), quote(&c.example), c.count))
                    .collect();
                format!("new failure cause(s) first seen in the last {window}: {}", list_of(named, n as usize))
            } else if n > 0 {
                format!("new failure causes in the last {window}: {n}, within the threshold")
            } else {
                format!("no failure cause first seen in the last {window}")
            };
            (n as f64, t.max_new_causes as f64, message)
        }
        CheckName::UnhandledQuarantine => {
            let mut names: Vec<(&str, u64)> = Vec::new();
            for g in h.quarantines.iter().filter(|g| g.live_handlers == 0 && g.last_seen >= h.window_start) {
                match names.iter_mut().find(|(w, _)| *w == g.wire_name) {
                    Some((_, n)) => *n += g.count,
                    None => names.push((&g.wire_name, g.count)),
                }
            }
            let n = names.len() as u64;
            let message = if n > 0 {
                let named = names.iter().map(|(w, c)| format!("{} (jobs: {c})", quote(w))).collect();
                format!("quarantined in the last {window} with no live handler: {}", list(named))
            } else {
                format!("no wire name quarantined in the last {window} lacks a live handler")
            };
            (n as f64, t.max_unhandled as f64, message)
        }
        CheckName::StaleWorkers => {
            let stale = &h.workers.recently_stale;
            let n = stale.len() as u64;
            let message = if n > 0 {
                format!(
                    "stopped heartbeating in the last {window}: {}",
                    list(stale.iter().map(|id| quote(id)).collect())
                )
            } else {
                format!("live workers: {}; none stopped heartbeating in the last {window}", h.workers.live)
            };
            (n as f64, t.max_stale as f64, message)
        }
        CheckName::ForgottenPause => {
            let limit = t.max_pause.as_millis() as u64;
            let age = |p: &Pause| h.at.saturating_sub(p.paused_at).max(0) as u64;
            let mut long: Vec<&Pause> = h.pauses.iter().filter(|p| age(p) > limit).collect();
            long.sort_by_key(|p| std::cmp::Reverse(age(p)));
            let worst = h.pauses.iter().map(age).max().unwrap_or(0);
            let message = if !long.is_empty() {
                let named = long
                    .iter()
                    .map(|p| {
                        format!(
                            "{} {} {} for {}, {} due held",
                            p.kind,
                            quote(&p.name),
                            paused_by(p),
                            ago(age(p)),
                            h.held_by(p)
                        )
                    })
                    .collect();
                format!("paused longer than {}: {}", ago(limit), list(named))
            } else if h.pauses.is_empty() {
                "nothing is paused".into()
            } else {
                format!("{} pause(s) in force, the longest for {}", h.pauses.len(), counted(worst))
            };
            (secs(worst), secs(limit), message)
        }
        CheckName::QuietWorker => {
            let limit = t.max_quiet.as_millis() as u64;
            let quiet: Vec<(&str, Option<&str>, u64, u64)> = h
                .worker_states
                .iter()
                .filter_map(|s| {
                    s.quiet_at.map(|at| {
                        (s.id.as_str(), s.quiet_by.as_deref(), h.at.saturating_sub(at).max(0) as u64, s.running)
                    })
                })
                .collect();
            let worst = quiet.iter().map(|q| q.2).max().unwrap_or(0);
            let mut long: Vec<_> = quiet.iter().filter(|q| q.2 > limit).collect();
            long.sort_by_key(|q| std::cmp::Reverse(q.2));
            let message = if !long.is_empty() {
                let named = long
                    .iter()
                    .map(|(id, by, age, running)| {
                        format!(
                            "{} quiet by {} for {}, {running} running",
                            quote(id),
                            quote(by.unwrap_or("?")),
                            ago(*age)
                        )
                    })
                    .collect();
                format!("quiet longer than {}: {}", ago(limit), list(named))
            } else if quiet.is_empty() {
                "no worker is quiet".into()
            } else {
                format!("{} worker(s) quiet, the longest for {}", quiet.len(), counted(worst))
            };
            (secs(worst), secs(limit), message)
        }
        CheckName::OverdueSchedule => {
            let grace = t.schedule_grace;
            let late = |s: &ScheduleInfo| -> u64 {
                if s.paused {
                    return 0;
                }
                crate::schedule::Timetable::parse(&s.row.schedule.cron, &s.row.schedule.zone)
                    .ok()
                    .and_then(|tt| tt.overdue(s.row.last_tick, h.at, Duration::ZERO))
                    .map_or(0, |d| d.as_millis() as u64)
            };
            // Stored before the limit was lowered (or by an older build): every tick fails to
            // enqueue, so it is named now rather than once its tick is overdue.
            let too_big = |s: &ScheduleInfo| !s.paused && s.row.schedule.payload.len() as u64 > h.payload_limit;
            let mut over: Vec<(&ScheduleInfo, u64)> = h
                .schedules
                .iter()
                .map(|s| (s, late(s)))
                .filter(|(s, l)| *l > grace.as_millis() as u64 || too_big(s))
                .collect();
            over.sort_by_key(|(_, l)| std::cmp::Reverse(*l));
            let worst = h.schedules.iter().map(late).max().unwrap_or(0);
            let message = if !over.is_empty() {
                let named = over
                    .iter()
                    .map(|(s, l)| {
                        let why = if s.orphaned { ", orphaned: no running application declares it" } else { "" };
                        let name = quote(&s.row.schedule.name);
                        if too_big(s) {
                            let size = s.row.schedule.payload.len();
                            format!(
                                "{name} payload is {size} bytes, over payload_limit ({} bytes): every tick fails{why}",
                                h.payload_limit
                            )
                        } else {
                            format!("{name} tick overdue by {}{why}", ago(*l))
                        }
                    })
                    .collect();
                if over.iter().any(|(s, _)| too_big(s)) {
                    format!("schedules that fire no job: {}", list(named))
                } else {
                    format!("nobody fired within {}: {}", counted(grace.as_millis() as u64), list(named))
                }
            } else if h.schedules.is_empty() {
                "no schedules".into()
            } else {
                format!("{} schedule(s), every due tick fired", h.schedules.len())
            };
            (secs(worst), secs(grace.as_millis() as u64), message)
        }
        CheckName::StuckWorkflow => {
            let stuck: u64 = h.stuck_workflows.iter().map(|w| w.stuck).sum();
            let message = if stuck == 0 {
                "no workflow job waits behind a failed parent".into()
            } else {
                let named = h
                    .stuck_workflows
                    .iter()
                    .map(|w| format!("{} ({}): {} waiting", quote(&w.name), w.id, w.stuck))
                    .collect();
                format!(
                    "workflow jobs wait behind a parent that ended dead-lettered, quarantined or cancelled (they run once it is requeued and succeeds): {}",
                    list(named)
                )
            };
            (stuck as f64, 0.0, message)
        }
    };
    let over_limit = name == CheckName::OverdueSchedule
        && h.schedules.iter().any(|s| !s.paused && s.row.schedule.payload.len() as u64 > h.payload_limit);
    Check { name, status: verdict(value > threshold || over_limit), value, threshold, unit: name.unit(), message }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn a_quoted_cause_that_holds_quotes_still_shows_where_it_ends() {
        assert_eq!(quote("gateway timeout"), "'gateway timeout'");
        assert_eq!(quote("flaky 'tick-12' (attempt 4)"), "\"flaky 'tick-12' (attempt 4)\"");
        assert_eq!(quote(r#"it's "odd""#), r#"'it\'s "odd"'"#);
        assert_eq!(quote("a\nb"), "'a b'");
    }
}
