//! The store's health in one read: queue latency (jobs due now and the age of the oldest due one,
//! per queue, over what workers may claim: a pause's jobs are counted apart as held), the pauses
//! in force, recent dead letters and new failure causes, quarantines nobody handles, workers,
//! and the checks `bw check` exits on, `bw metrics` exports and `bw top` shows. Read-only, one
//! snapshot, every figure answered from an index or the trigger-kept counts: never a table scan.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::groups::{CauseGroup, QuarantineGroup};
use super::jobs::CLAIM_NEXT_WIRE_NAME_SQL;
use super::pause::{Pause, PauseKind};
use super::query::StateCounts;
use super::Store;
use crate::error::Result;
use crate::model::{JobState, Millis};

/// Due Scheduled jobs of one queue: how many, and the earliest `due_at` among them. A range of
/// the claim index (`jobs_claim (queue, due_at) WHERE state = 'scheduled'`), covering, so the
/// cost is the number of due jobs, never the backlog waiting for later nor the terminal rows.
/// Named with INDEXED BY because the planner may otherwise prefer `jobs_active` and read every
/// Scheduled row. `?1` is the queue, `?2` now.
pub const DUE_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim \
                           WHERE state = 'scheduled' AND queue = ?1 AND due_at <= ?2";

/// Due Scheduled jobs of one wire name `?2` in queue `?1` at `?3`: how many, and the earliest
/// `due_at`. A range of `jobs_claim_wire (queue, wire_name, due_at) WHERE state = 'scheduled'`,
/// covering: what a paused wire name holds back in a queue costs one probe, and the oldest due
/// job among the names not paused one probe per name waiting in the queue, never a walk over
/// the paused backlog.
pub const DUE_WIRE_NAME_SQL: &str = "SELECT count(*), min(due_at) FROM jobs INDEXED BY jobs_claim_wire \
                                     WHERE state = 'scheduled' AND queue = ?1 AND wire_name = ?2 AND due_at <= ?3";

/// Jobs Dead-Lettered at or after `?1`: a range of `jobs_finished (state, finished_at)`, which
/// `finished_at IS NOT NULL` (implied by the state) makes usable, covering.
pub const DEAD_SINCE_SQL: &str = "SELECT count(*) FROM jobs WHERE state = 'dead-lettered' \
                                  AND finished_at IS NOT NULL AND finished_at >= ?1";

/// How many cause groups a health read carries with their examples, largest first (and as many
/// of the new ones): more than any screen or label set shows.
pub const CAUSE_GROUPS: usize = 100;

/// Where each check draws its line. `Default` is what `bw check` uses without flags.
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
            exclude_queues: BTreeSet::new(),
        }
    }
}

/// How bad a check is. Ordered: the worst check is the store's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Warning,
    Critical,
}

impl Status {
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
}

impl CheckName {
    pub const ALL: [CheckName; 7] = [
        CheckName::Latency,
        CheckName::UnworkedQueue,
        CheckName::DeadLettered,
        CheckName::NewCause,
        CheckName::UnhandledQuarantine,
        CheckName::StaleWorkers,
        CheckName::ForgottenPause,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Latency => "latency",
            CheckName::UnworkedQueue => "unworked-queue",
            CheckName::DeadLettered => "dead-lettered",
            CheckName::NewCause => "new-cause",
            CheckName::UnhandledQuarantine => "unhandled-quarantine",
            CheckName::StaleWorkers => "stale-workers",
            CheckName::ForgottenPause => "forgotten-pause",
        }
    }

    /// What crossing the threshold means.
    pub fn severity(self) -> Status {
        match self {
            CheckName::Latency | CheckName::UnworkedQueue | CheckName::DeadLettered => Status::Critical,
            CheckName::NewCause
            | CheckName::UnhandledQuarantine
            | CheckName::StaleWorkers
            | CheckName::ForgottenPause => Status::Warning,
        }
    }

    /// The unit of `value` and `threshold`.
    pub fn unit(self) -> &'static str {
        match self {
            CheckName::Latency | CheckName::UnworkedQueue | CheckName::ForgottenPause => "seconds",
            CheckName::DeadLettered => "jobs",
            CheckName::NewCause => "causes",
            CheckName::UnhandledQuarantine => "wire names",
            CheckName::StaleWorkers => "workers",
        }
    }
}

/// One check's verdict: `value` against `threshold` (both in `unit`); over it is `severity`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub name: CheckName,
    pub status: Status,
    pub value: f64,
    pub threshold: f64,
    pub unit: &'static str,
    /// One line naming what is wrong (the queues, causes, wire names, workers), or all is well.
    pub message: String,
}

/// How long work waits in one queue: the Scheduled jobs due now that a worker may claim, the
/// oldest of them, and the due jobs a pause holds back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueLatency {
    pub queue: String,
    /// Scheduled jobs whose `due_at` has come and that no pause holds: waiting for a worker now.
    pub due_now: u64,
    /// The earliest `due_at` among them.
    pub oldest_due_at: Option<Millis>,
    /// How long that job has waited, in milliseconds (0 when nothing is due).
    pub oldest_due_age_ms: u64,
    /// Due jobs no worker claims because of a pause in force: every due job of a paused queue,
    /// or those of a paused wire name. Not in `due_now`.
    pub held_by_pause: u64,
    /// The pause of the queue itself, when one is in force.
    pub paused: Option<Pause>,
}

/// One queue's latency and who serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueHealth {
    pub queue: String,
    /// Scheduled jobs whose `due_at` has come and that no pause holds: waiting for a worker now.
    pub due_now: u64,
    /// The earliest `due_at` among them.
    pub oldest_due_at: Option<Millis>,
    /// How long that job has waited, in milliseconds (0 when nothing is due).
    pub oldest_due_age_ms: u64,
    /// Due jobs a pause in force holds back (the queue's or a wire name's); not in `due_now`.
    pub held_by_pause: u64,
    /// The queue's own pause: a paused queue is reported, not judged by `latency` or
    /// `unworked-queue` (it is paused on purpose; `forgotten-pause` watches how long).
    pub paused: Option<Pause>,
    /// Live workers whose groups claim from this queue.
    pub live_workers: u64,
    /// Left out of the latency checks (`Thresholds::exclude_queues`).
    pub excluded: bool,
}

/// Workers in the registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerHealth {
    pub live: u64,
    pub stale: u64,
    /// Ids of the workers whose last heartbeat fell inside the window and are stale now: they
    /// stopped recently (killed, hung, host lost). Older stale rows are history.
    pub recently_stale: Vec<String>,
}

/// Everything [`Store::health`] reads, and the verdicts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Health {
    /// The instant it was read at.
    pub at: Millis,
    /// `at` minus the window: "recent" means at or after this.
    pub window_start: Millis,
    /// The worst check.
    pub status: Status,
    /// One per [`CheckName`], in that order.
    pub checks: Vec<Check>,
    /// Jobs by queue and state.
    pub counts: StateCounts,
    /// Every queue that has jobs or a registered worker, by name.
    pub queues: Vec<QueueHealth>,
    /// The pauses in force at `at`, queues first, then by name.
    pub pauses: Vec<Pause>,
    /// Due jobs held back by each wire-name pause in force, by wire name, summed over the queues
    /// not paused themselves (a paused queue's due jobs are all in its
    /// [`QueueHealth::held_by_pause`], whatever their wire name).
    pub held_by_wire_name: BTreeMap<String, u64>,
    /// Jobs Dead-Lettered at or after `window_start`.
    pub dead_lettered_in_window: u64,
    /// The largest dead-letter cause groups (wire name and fingerprint), largest first: at most
    /// [`CAUSE_GROUPS`], so a flood of distinct causes costs neither memory nor example lookups.
    pub causes: Vec<CauseGroup>,
    /// How many cause groups there are in all.
    pub cause_groups_total: u64,
    /// The groups first seen at or after `window_start` (new failures), largest first: at most
    /// [`CAUSE_GROUPS`] of them.
    pub new_causes: Vec<CauseGroup>,
    /// How many groups were first seen at or after `window_start`.
    pub new_causes_total: u64,
    /// Quarantined jobs by wire name and reason, with their live handlers.
    pub quarantines: Vec<QuarantineGroup>,
    pub workers: WorkerHealth,
    /// The transition log's sequence: every transition ever appended (it never goes back, even
    /// when the retention sweep deletes old entries). A Prometheus counter.
    pub log_seq: i64,
}

impl Health {
    pub fn check(&self, name: CheckName) -> &Check {
        // Every Health holds one check per name, in CheckName::ALL order.
        &self.checks[CheckName::ALL.iter().position(|n| *n == name).unwrap_or(0)]
    }
}

/// Transitions by the state they moved a job into, counted from the log as it grows. A
/// reader keeps one and passes it to [`Store::count_transitions`] each time; each call reads
/// only the entries appended since the last, by sequence (the log's primary key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransitionCounter {
    /// The last sequence counted; `None` until the first call, which sets the baseline.
    pub last_seq: Option<i64>,
    pub by_state: BTreeMap<JobState, u64>,
}

impl Store {
    /// The store's health against `thresholds`, read in one snapshot (pauses included). Read-only.
    /// Fast at millions of jobs: counts come from the trigger-kept table, latency from the claim
    /// indexes (`jobs_claim`, and `jobs_claim_wire` for a paused wire name), causes and
    /// quarantines from their covering indexes, recent dead letters from `jobs_finished`.
    pub fn health(&self, thresholds: &Thresholds) -> Result<Health> {
        let now = self.now();
        let window_ms = i64::try_from(thresholds.window.as_millis()).unwrap_or(i64::MAX);
        let window_start = now.saturating_sub(window_ms);
        self.read(|conn| {
            let pauses = self.pauses()?;
            let in_force = InForce::new(&pauses);
            let counts = self.counts()?;
            let workers = self.workers()?;
            let groups = cause_groups(conn)?;
            let quarantines = self.quarantine_groups()?;
            let dead_lettered_in_window = dead_since(conn, window_start)?;
            let log_seq = log_seq(conn)?;

            let mut serving: BTreeMap<&str, u64> = BTreeMap::new();
            let mut worker_health = WorkerHealth::default();
            for w in &workers {
                if w.is_live(now) {
                    worker_health.live += 1;
                    for q in &w.queues {
                        *serving.entry(q.as_str()).or_default() += 1;
                    }
                } else {
                    worker_health.stale += 1;
                    if w.last_heartbeat_at >= window_start {
                        worker_health.recently_stale.push(w.id.clone());
                    }
                }
            }
            let names: BTreeSet<&str> = counts
                .by_queue
                .keys()
                .map(String::as_str)
                .chain(workers.iter().flat_map(|w| w.queues.iter().map(String::as_str)))
                .collect();
            let mut queues = Vec::with_capacity(names.len());
            let mut held_by_wire_name: BTreeMap<String, u64> =
                in_force.wire_names.iter().map(|n| (n.to_string(), 0)).collect();
            for queue in names {
                let l = latency(conn, &counts, queue, now, &in_force, &mut held_by_wire_name)?;
                queues.push(QueueHealth {
                    queue: l.queue,
                    due_now: l.due_now,
                    oldest_due_at: l.oldest_due_at,
                    oldest_due_age_ms: l.oldest_due_age_ms,
                    held_by_pause: l.held_by_pause,
                    paused: l.paused,
                    live_workers: serving.get(queue).copied().unwrap_or(0),
                    excluded: thresholds.exclude_queues.contains(queue),
                });
            }
            let cause_groups_total = groups.len() as u64;
            let new: Vec<&Group> = groups.iter().filter(|g| g.first_seen >= window_start).collect();
            let new_causes_total = new.len() as u64;
            let causes = with_examples(conn, groups.iter().take(CAUSE_GROUPS))?;
            let new_causes = with_examples(conn, new.into_iter().take(CAUSE_GROUPS))?;

            let mut health = Health {
                at: now,
                window_start,
                status: Status::Ok,
                checks: Vec::new(),
                counts,
                queues,
                pauses,
                held_by_wire_name,
                dead_lettered_in_window,
                causes,
                cause_groups_total,
                new_causes,
                new_causes_total,
                quarantines,
                workers: worker_health,
                log_seq,
            };
            health.checks = CheckName::ALL.iter().map(|n| judge(*n, &health, thresholds)).collect();
            health.status = health.checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
            Ok(health)
        })
    }

    /// Queue latency for every queue that has jobs, by name: `bw stats` and `bw top`. One range
    /// of the claim index per queue with Scheduled jobs ([`DUE_SQL`]); its cost is the number of
    /// jobs due now, never the backlog due later nor the finished jobs. With a wire name paused,
    /// one more probe per paused name ([`DUE_WIRE_NAME_SQL`]), and, when the oldest due job is
    /// a paused one, one per wire name waiting in the queue. Pauses read in the same snapshot.
    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        let now = self.now();
        self.read(|conn| {
            let pauses = self.pauses()?;
            let in_force = InForce::new(&pauses);
            let counts = self.counts()?;
            let mut held = BTreeMap::new();
            counts.by_queue.keys().map(|q| latency(conn, &counts, q, now, &in_force, &mut held)).collect()
        })
    }

    /// Add the transitions appended since `counter` last looked. The first call only sets the
    /// baseline (the log's current end), so a counter counts from when its reader started and
    /// a scrape never walks the whole log.
    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()> {
        self.read(|conn| {
            let end = log_seq(conn)?;
            let Some(last) = counter.last_seq else {
                counter.last_seq = Some(end);
                return Ok(());
            };
            let mut stmt = conn.prepare_cached(
                "SELECT to_state, count(*) FROM transitions WHERE seq > ?1 AND seq <= ?2 GROUP BY to_state",
            )?;
            let rows = stmt.query_map(params![last, end], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (state, n) = row?;
                if let Ok(state) = state.parse::<JobState>() {
                    *counter.by_state.entry(state).or_default() += n as u64;
                }
            }
            counter.last_seq = Some(end.max(last));
            Ok(())
        })
    }
}

/// The pauses in force, as the latency reads need them.
struct InForce<'a> {
    queues: BTreeMap<&'a str, &'a Pause>,
    wire_names: BTreeSet<&'a str>,
}

impl<'a> InForce<'a> {
    fn new(pauses: &'a [Pause]) -> Self {
        let mut out = InForce { queues: BTreeMap::new(), wire_names: BTreeSet::new() };
        for p in pauses {
            match p.kind {
                PauseKind::Queue => {
                    out.queues.insert(&p.name, p);
                }
                PauseKind::WireName => {
                    out.wire_names.insert(&p.name);
                }
            }
        }
        out
    }
}

/// One queue's latency over what workers may claim, and what pauses hold back (added to
/// `held_by_wire_name` per paused wire name).
fn latency(
    conn: &Connection,
    counts: &StateCounts,
    queue: &str,
    now: Millis,
    pauses: &InForce,
    held_by_wire_name: &mut BTreeMap<String, u64>,
) -> Result<QueueLatency> {
    let paused = pauses.queues.get(queue).map(|p| (*p).clone());
    // A queue without Scheduled jobs (the counts say so exactly) needs no look at the index.
    let scheduled = counts.by_queue.get(queue).and_then(|m| m.get(&JobState::Scheduled)).copied().unwrap_or(0);
    let (mut due_now, mut oldest_due_at) = if scheduled == 0 {
        (0, None)
    } else {
        let (n, oldest): (i64, Option<Millis>) =
            conn.prepare_cached(DUE_SQL)?.query_row(params![queue, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
        (n.max(0) as u64, oldest)
    };
    let mut held_by_pause = 0;
    if due_now > 0 && paused.is_some() {
        // Every due job of a paused queue is held: nothing in it is claimable.
        (held_by_pause, due_now, oldest_due_at) = (due_now, 0, None);
    } else if due_now > 0 && !pauses.wire_names.is_empty() {
        let mut oldest_is_held = false;
        let mut due_of = conn.prepare_cached(DUE_WIRE_NAME_SQL)?;
        for name in &pauses.wire_names {
            let (n, first): (i64, Option<Millis>) =
                due_of.query_row(params![queue, name, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let n = n.max(0) as u64;
            if n > 0 {
                held_by_pause += n;
                *held_by_wire_name.entry(name.to_string()).or_default() += n;
                oldest_is_held |= first.is_some() && first <= oldest_due_at;
            }
        }
        due_now = due_now.saturating_sub(held_by_pause);
        if due_now == 0 {
            oldest_due_at = None;
        } else if oldest_is_held {
            oldest_due_at = oldest_unpaused(conn, queue, now, &pauses.wire_names)?;
        }
    }
    Ok(QueueLatency {
        queue: queue.to_string(),
        due_now,
        oldest_due_at,
        oldest_due_age_ms: oldest_due_at.map_or(0, |t| now.saturating_sub(t).max(0) as u64),
        held_by_pause,
        paused,
    })
}

/// The earliest `due_at` among the due jobs of `queue` whose wire name is not paused: the wire
/// names waiting in the queue visited one index probe each on `jobs_claim_wire` (as the claim
/// steps around a paused name), so the cost is the number of names, never the paused backlog.
fn oldest_unpaused(conn: &Connection, queue: &str, now: Millis, paused: &BTreeSet<&str>) -> Result<Option<Millis>> {
    let mut next_name = conn.prepare_cached(CLAIM_NEXT_WIRE_NAME_SQL)?;
    let mut due_of = conn.prepare_cached(DUE_WIRE_NAME_SQL)?;
    let mut oldest: Option<Millis> = None;
    let mut after = String::new();
    while let Some(name) = next_name.query_row(params![queue, after], |r| r.get::<_, String>(0)).optional()? {
        if !paused.contains(name.as_str()) {
            let first: Option<Millis> = due_of.query_row(params![queue, name, now], |r| r.get(1))?;
            oldest = match (oldest, first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        after = name;
    }
    Ok(oldest)
}

/// A dead-letter cause group before its example is looked up.
struct Group {
    wire_name: String,
    fingerprint: Option<String>,
    count: u64,
    first_seen: Millis,
    last_seen: Millis,
}

/// Every cause group, largest first: one pass over the covering `jobs_dead_causes` index, no
/// example (a correlated example per group read thousands of rows when causes were many).
fn cause_groups(conn: &Connection) -> Result<Vec<Group>> {
    let mut stmt = conn.prepare_cached(
        "SELECT wire_name, cause_fingerprint, count(*) AS n, min(finished_at), max(finished_at) AS last_seen
         FROM jobs WHERE state = 'dead-lettered' GROUP BY wire_name, cause_fingerprint
         ORDER BY n DESC, last_seen DESC",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Group {
            wire_name: r.get(0)?,
            fingerprint: r.get(1)?,
            count: r.get::<_, i64>(2)? as u64,
            first_seen: r.get(3)?,
            last_seen: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The groups as [`CauseGroup`]s, each with its latest real cause: one indexed lookup a group.
fn with_examples<'a>(conn: &Connection, groups: impl Iterator<Item = &'a Group>) -> Result<Vec<CauseGroup>> {
    let mut stmt = conn.prepare_cached(
        "SELECT terminal_cause FROM jobs WHERE state = 'dead-lettered' AND wire_name = ?1 AND cause_fingerprint IS ?2
         ORDER BY finished_at DESC LIMIT 1",
    )?;
    let mut out = Vec::new();
    for g in groups {
        let example: Option<String> =
            stmt.query_row(params![g.wire_name, g.fingerprint], |r| r.get(0)).optional()?.flatten();
        let example = example.unwrap_or_default();
        out.push(CauseGroup {
            wire_name: g.wire_name.clone(),
            // As `bw stats` shows it: a job written without a fingerprint groups by its cause.
            fingerprint: g.fingerprint.clone().unwrap_or_else(|| example.clone()),
            example,
            count: g.count,
            first_seen: g.first_seen,
            last_seen: g.last_seen,
        });
    }
    Ok(out)
}

fn dead_since(conn: &Connection, since: Millis) -> Result<u64> {
    let n: i64 = conn.prepare_cached(DEAD_SINCE_SQL)?.query_row([since], |r| r.get(0))?;
    Ok(n as u64)
}

/// The log's sequence: AUTOINCREMENT keeps the highest ever used in sqlite_sequence, so it holds
/// after the retention sweep deleted every entry; max(seq) covers a store whose sequence row
/// another program removed.
fn log_seq(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'transitions'), 0),
                    coalesce((SELECT max(seq) FROM transitions), 0))",
        )?
        .query_row([], |r| r.get(0))?)
}

/// Database text named in a one-line message: quoted, line breaks and other control characters
/// as spaces, cut to 80 characters (the full text is in `bw stats` and `bw jobs show`).
fn quote(text: &str) -> String {
    const MAX: usize = 80;
    let mut out = String::from("'");
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out.push('\'');
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

fn judge(name: CheckName, h: &Health, t: &Thresholds) -> Check {
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
            (secs(worst), secs(limit), message + &paused_queues())
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
                format!("no live worker serves {}", list(over))
            } else if unworked.is_empty() {
                "every queue with due jobs has a live worker".into()
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
            let held = |p: &Pause| -> u64 {
                match p.kind {
                    PauseKind::Queue => h.queues.iter().find(|q| q.queue == p.name).map_or(0, |q| q.held_by_pause),
                    PauseKind::WireName => h.held_by_wire_name.get(&p.name).copied().unwrap_or(0),
                }
            };
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
                            held(p)
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
    };
    Check { name, status: verdict(value > threshold), value, threshold, unit: name.unit(), message }
}
