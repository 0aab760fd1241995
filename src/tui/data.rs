//! The dashboard's database side: what one refresh asks for ([`Query`]), what it brings back
//! ([`Snapshot`]), and the operator actions, all through the same library calls as the CLI.
//! [`serve`] is the only function that touches the store; the terminal loop runs it on a
//! background thread with its own [`Store`], tests call it directly. Nothing here draws.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::store::{
    CancelResult, CauseGroup, JobFilter, JobPage, LogFilter, Pause, PauseKind, PauseResult, QuarantineGroup,
    QueueLatency, RequeueCheck, ResumeResult, RunNowResult, StateCounts,
};
use crate::{Error, FailureDetail, Job, JobId, JobState, Millis, Permission, QuarantineReason, Store, Transition};

/// The six views, in tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum View {
    DeadLettered,
    Quarantined,
    Running,
    Scheduled,
    Queues,
    Log,
}

impl View {
    pub const ALL: [View; 6] =
        [View::DeadLettered, View::Quarantined, View::Running, View::Scheduled, View::Queues, View::Log];

    pub fn index(self) -> usize {
        View::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    pub fn title(self) -> &'static str {
        match self {
            View::DeadLettered => "Dead-Lettered",
            View::Quarantined => "Quarantined",
            View::Running => "Running",
            View::Scheduled => "Scheduled",
            View::Queues => "Queues",
            View::Log => "Log",
        }
    }

    /// The state a job list of this view shows.
    pub fn state(self) -> Option<JobState> {
        match self {
            View::DeadLettered => Some(JobState::DeadLettered),
            View::Quarantined => Some(JobState::Quarantined),
            View::Running => Some(JobState::Running),
            View::Scheduled => Some(JobState::Scheduled),
            View::Queues | View::Log => None,
        }
    }
}

/// Everything one refresh reads. Built by the app from its state; cheap to clone.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub view: View,
    /// Dead-Lettered by cause, or Quarantined by wire name and reason, instead of jobs.
    pub grouped: bool,
    /// Read the groups this time. Grouping scans every Dead-Lettered or Quarantined job, so
    /// the app asks for it every [`GROUPS_EVERY_MS`] (and at once after a change), not every
    /// second; between, it keeps the groups it has.
    pub read_groups: bool,
    /// The job list's filter (state included); `None` for views without a job list.
    pub filter: Option<JobFilter>,
    pub offset: u64,
    pub limit: usize,
    /// The job open in the detail pane.
    pub detail: Option<JobId>,
    /// The last log sequence number the app holds (0: none yet).
    pub log_seq: i64,
    /// The last log sequence number counted into the chart (0: start an hour back).
    pub chart_seq: i64,
    /// The actor, for the permissions shown in the header.
    pub actor: String,
}

/// Log entries a refresh reads at most, for the tail and for the chart's catch-up. The chart
/// catches up over several refreshes on a busy store, so no refresh reads an hour of log.
pub const LOG_BATCH: usize = 2_000;
/// Groups listed at most (the largest first).
pub const GROUP_LIMIT: usize = 200;
/// How often grouped views re-read their groups.
pub const GROUPS_EVERY_MS: Millis = 10_000;
/// Minutes the chart covers.
pub const CHART_MINUTES: i64 = 60;

/// What one refresh found.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The store's clock when the refresh ran.
    pub at: Millis,
    pub counts: StateCounts,
    pub permissions: Vec<Permission>,
    /// The view's page of jobs (offset, filter and state as asked).
    pub page: Option<JobPage>,
    pub page_offset: u64,
    /// The query this snapshot answers, so the app can tell a stale page from a fresh one.
    pub query: Option<Query>,
    pub cause_groups: Vec<CauseGroup>,
    pub quarantine_groups: Vec<QuarantineGroup>,
    /// Live workers per wire name now.
    pub live_handlers: HashMap<String, u64>,
    pub detail: Option<(Job, Vec<Transition>)>,
    /// New log entries after `Query::log_seq`, oldest first. When the app was too far behind,
    /// `log_reset` says these replace what it holds.
    pub log: Vec<Transition>,
    pub log_reset: bool,
    /// Succeeded and failed transitions per minute (minute = at / 60000) found after
    /// `Query::chart_seq`, and the sequence number counted up to.
    pub chart: BTreeMap<i64, (u64, u64)>,
    pub chart_seq: i64,
    /// Per queue: Scheduled jobs due now and how long the oldest of them has waited
    /// ([`Store::queue_latency`], the figures `bw stats` prints). Read every refresh: the header
    /// shows the worst.
    pub latency: Vec<QueueLatency>,
    /// Queues and wire names paused now ([`Store::pauses`]), for the header and the Queues view.
    pub pauses: Vec<Pause>,
    /// Wall time the queries took.
    pub query_time: Duration,
}

/// Which jobs an action covers.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// Jobs by id (the selected one, or the marked ones).
    Jobs(Vec<JobId>),
    /// A Dead-Lettered cause group.
    CauseGroup { wire_name: String, fingerprint: String },
    /// A Quarantined group.
    QuarantineGroup { wire_name: String, reason: QuarantineReason },
    /// Every job a list's filter matches (`X`: bulk cancel of the Scheduled or Running list);
    /// `described` is the filter as the operator typed it.
    Matching { filter: Box<JobFilter>, described: String },
    /// A queue or a wire name, to pause or resume.
    Paused { kind: PauseKind, name: String },
    /// A payload repair of one Dead-Lettered or Quarantined job: the new payload (valid JSON,
    /// checked again by the store), and whether to requeue it in the same transaction.
    Payload { id: JobId, payload: Vec<u8>, requeue: bool },
}

impl Target {
    /// The bulk filter of a group target.
    pub fn group_filter(&self) -> Option<JobFilter> {
        match self {
            Target::Jobs(_) | Target::Paused { .. } | Target::Payload { .. } => None,
            Target::Matching { filter, .. } => Some((**filter).clone()),
            Target::CauseGroup { wire_name, fingerprint } => Some(JobFilter {
                states: vec![JobState::DeadLettered],
                wire_name: Some(wire_name.clone()),
                fingerprint: Some(fingerprint.clone()),
                ..Default::default()
            }),
            Target::QuarantineGroup { wire_name, reason } => Some(JobFilter {
                states: vec![JobState::Quarantined],
                wire_name: Some(wire_name.clone()),
                quarantine_reason: Some(*reason),
                ..Default::default()
            }),
        }
    }
}

/// An operator action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Requeue,
    Cancel,
    Reveal,
    Pause,
    Resume,
    RunNow,
    EditPayload,
}

impl Op {
    pub fn verb(self) -> &'static str {
        match self {
            Op::Requeue => "Requeue",
            Op::Cancel => "Cancel",
            Op::Reveal => "Reveal failure detail of",
            Op::Pause => "Pause",
            Op::Resume => "Resume",
            Op::RunNow => "Run now",
            Op::EditPayload => "Save the payload of",
        }
    }

    /// The action on its own, for messages that name no jobs ("Reveal declined").
    pub fn name(self) -> &'static str {
        match self {
            Op::Requeue => "Requeue",
            Op::Cancel => "Cancel",
            Op::Reveal => "Reveal",
            Op::Pause => "Pause",
            Op::Resume => "Resume",
            Op::RunNow => "Run now",
            Op::EditPayload => "Payload edit",
        }
    }
}

/// What an action would do, counted in the store just before asking for confirmation.
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    pub op: Op,
    pub target: Target,
    /// Jobs the action would change.
    pub affected: u64,
    /// Jobs it would leave alone, with why (wrong state, gone).
    pub skipped: Vec<String>,
    /// Requeue only: how many would be quarantined again because no live worker handles
    /// their wire name now.
    pub would_requarantine: u64,
    /// Wire names without a live worker among the affected jobs.
    pub unhandled: Vec<String>,
    /// Requeue only: affected jobs quarantined because their payload did not decode. A live
    /// worker for their wire name is no sign they will run: they quarantine again unless the
    /// handler now accepts the payload.
    pub undecodable: u64,
    /// A one-line description of the jobs (ids, or the group).
    pub what: String,
    /// Running jobs among the affected: a cancel asks them to stop (the rest end Cancelled at
    /// once); a pause lets them finish.
    pub running: u64,
    /// Run now only: affected jobs already due, which stay as they are.
    pub already_due: u64,
    /// Requeue of a group only: also requeue the jobs no live worker handles. Never the
    /// default; the dialog's `f` turns it on, as `--force` does for `bw requeue`.
    pub force: bool,
}

/// What an action did, job by job.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub title: String,
    pub lines: Vec<String>,
    /// Something was refused (permission, wrong state): shown in red.
    pub refused: bool,
}

/// Work for the background thread.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Refresh(Box<Query>),
    Preview {
        op: Op,
        target: Target,
    },
    /// Do it; `force` as the confirmation left it (see [`Preview::force`]).
    Run {
        op: Op,
        target: Target,
        force: bool,
    },
}

/// Answers from the background thread.
#[derive(Clone, Debug)]
pub enum Response {
    Snapshot(Box<Snapshot>),
    /// A refresh failed; `busy` when the store was locked (it is retried by itself).
    RefreshFailed {
        error: String,
        busy: bool,
    },
    Preview(Preview),
    /// An action was refused before it started, or failed.
    PreviewFailed(String),
    Done(Report),
    Revealed {
        job: JobId,
        details: Vec<(i64, FailureDetail)>,
    },
    RevealFailed {
        job: JobId,
        error: String,
    },
}

/// Run one request against the store. Errors become responses: the dashboard shows them and
/// carries on.
pub fn serve(store: &Store, actor: &str, request: &Request) -> Response {
    match request {
        Request::Refresh(q) => match refresh(store, q) {
            Ok(s) => Response::Snapshot(Box::new(s)),
            Err(e) => Response::RefreshFailed { busy: matches!(e, Error::Busy), error: e.to_string() },
        },
        Request::Preview { op, target } => match preview(store, *op, target) {
            Ok(p) => Response::Preview(p),
            Err(e) => Response::PreviewFailed(e.to_string()),
        },
        Request::Run { op: Op::Reveal, target: Target::Jobs(ids), .. } if ids.len() == 1 => {
            match store.reveal_failure_detail(actor, ids[0]) {
                Ok(details) => Response::Revealed { job: ids[0], details },
                Err(e) => Response::RevealFailed { job: ids[0], error: e.to_string() },
            }
        }
        Request::Run { op, target, force } => match run(store, actor, *op, target, *force) {
            Ok(r) => Response::Done(r),
            Err(e) => Response::Done(Report {
                title: format!("{} refused", op.verb()),
                lines: vec![e.to_string()],
                refused: true,
            }),
        },
    }
}

fn refresh(store: &Store, q: &Query) -> crate::Result<Snapshot> {
    let started = Instant::now();
    let now = store.now();
    let mut s = Snapshot {
        at: now,
        counts: store.counts()?,
        permissions: store.permissions(&q.actor)?,
        query: Some(q.clone()),
        page_offset: q.offset,
        ..Default::default()
    };
    match (q.view, q.grouped && q.read_groups) {
        (View::DeadLettered, true) => s.cause_groups = store.cause_groups(GROUP_LIMIT)?,
        (View::Quarantined, true) => s.quarantine_groups = store.quarantine_groups()?,
        _ => {}
    }
    s.latency = store.queue_latency()?;
    s.pauses = store.pauses()?;
    if let (Some(filter), false) = (&q.filter, q.grouped) {
        s.page = Some(store.list_jobs(filter, q.limit.max(1), q.offset)?);
    }
    if matches!(q.view, View::Quarantined) {
        s.live_handlers = store.live_handlers()?;
    }
    if let Some(id) = q.detail {
        if let Some(job) = store.job(id)? {
            let history = store.history(id)?;
            s.detail = Some((job, history));
        }
    }
    // The log tail: only entries newer than the last one held, unless the app is so far
    // behind that a fresh tail is cheaper than catching up.
    let last = store.last_seq()?;
    if q.log_seq == 0 || last - q.log_seq > LOG_BATCH as i64 {
        s.log = store.log_tail(&LogFilter::default(), LOG_BATCH)?;
        s.log_reset = true;
    } else {
        s.log = store.log_after(&LogFilter::default(), q.log_seq, LOG_BATCH)?;
    }
    // The chart: count from an hour back (binary search on the first refresh), then only what
    // is new, a batch per refresh.
    let from = if q.chart_seq == 0 { store.seq_at(now - CHART_MINUTES * 60_000)? - 1 } else { q.chart_seq };
    s.chart_seq = from;
    let batch = if !s.log_reset && q.chart_seq != 0 && q.chart_seq == q.log_seq {
        // The chart is caught up with the tail: the entries just read are the chart's too.
        s.log.clone()
    } else if from < last {
        store.log_after(&LogFilter::default(), from, LOG_BATCH)?
    } else {
        Vec::new()
    };
    for t in &batch {
        let minute = t.at.div_euclid(60_000);
        let entry = s.chart.entry(minute).or_default();
        match classify(t) {
            Some(true) => entry.0 += 1,
            Some(false) => entry.1 += 1,
            None => {}
        }
        s.chart_seq = t.seq;
    }
    s.chart.retain(|_, v| *v != (0, 0));
    s.query_time = started.elapsed();
    Ok(s)
}

/// For the chart: `Some(true)` a success, `Some(false)` a failed attempt (retried,
/// Dead-Lettered or Quarantined), `None` anything else.
pub fn classify(t: &Transition) -> Option<bool> {
    match (t.from, t.to) {
        (_, JobState::Succeeded) => Some(true),
        (Some(JobState::Running), JobState::Scheduled)
        | (Some(JobState::Running), JobState::DeadLettered)
        | (Some(JobState::Running), JobState::Quarantined) => Some(false),
        _ => None,
    }
}

fn preview(store: &Store, op: Op, target: &Target) -> crate::Result<Preview> {
    let mut p = Preview {
        op,
        target: target.clone(),
        affected: 0,
        skipped: Vec::new(),
        would_requarantine: 0,
        unhandled: Vec::new(),
        undecodable: 0,
        what: String::new(),
        running: 0,
        already_due: 0,
        force: false,
    };
    let mut unhandled = std::collections::BTreeSet::new();
    match target {
        Target::Jobs(ids) => {
            p.what = match ids.as_slice() {
                [one] => format!("job {one}"),
                many => format!("{} marked jobs", many.len()),
            };
            let gone = |id: &JobId| format!("{} is gone", id.short());
            match op {
                // The by-id plan `bw requeue ID --dry-run` prints.
                Op::Requeue => {
                    for (id, check) in ids.iter().zip(store.check_requeue(ids)?) {
                        match check {
                            RequeueCheck::NotFound => p.skipped.push(gone(id)),
                            RequeueCheck::NotRequeueable { state } => {
                                p.skipped.push(format!("{} is {state}", id.short()))
                            }
                            RequeueCheck::WouldRequeue { wire_name, requarantine, undecodable, .. } => {
                                p.affected += 1;
                                if requarantine {
                                    p.would_requarantine += 1;
                                    unhandled.insert(wire_name);
                                } else if undecodable {
                                    p.undecodable += 1;
                                }
                            }
                        }
                    }
                }
                // The by-id plan of `bw cancel ID --dry-run`.
                Op::Cancel => {
                    for (id, check) in ids.iter().zip(store.check_cancel(ids)?) {
                        match check {
                            CancelResult::Cancelled => p.affected += 1,
                            CancelResult::CancelRequested => {
                                p.affected += 1;
                                p.running += 1;
                            }
                            CancelResult::NotCancellable { state } => {
                                p.skipped.push(format!("{} is {state}", id.short()))
                            }
                            CancelResult::NotFound => p.skipped.push(gone(id)),
                        }
                    }
                }
                // The by-id plan of `bw run-now ID --dry-run`.
                Op::RunNow => {
                    let now = store.now();
                    for (id, check) in ids.iter().zip(store.check_run_now(ids)?) {
                        match check {
                            RunNowResult::Due { was_due_at } => {
                                p.affected += 1;
                                if was_due_at <= now {
                                    p.already_due += 1;
                                }
                            }
                            RunNowResult::NotScheduled { state } => {
                                p.skipped.push(format!("{} is {state}", id.short()))
                            }
                            RunNowResult::NotFound => p.skipped.push(gone(id)),
                        }
                    }
                }
                Op::Reveal => {
                    for id in ids {
                        match store.job(*id)? {
                            Some(_) => p.affected += 1,
                            None => p.skipped.push(gone(id)),
                        }
                    }
                }
                Op::Pause | Op::Resume | Op::EditPayload => return Err(not_for(op, "jobs by id")),
            }
        }
        Target::CauseGroup { wire_name, .. } | Target::QuarantineGroup { wire_name, .. } => {
            if op != Op::Requeue {
                return Err(not_for(op, "a group"));
            }
            let filter = target.group_filter().unwrap_or_default();
            p.what = match target {
                Target::CauseGroup { fingerprint, .. } => format!("{wire_name} · {fingerprint}"),
                Target::QuarantineGroup { reason, .. } => format!("{wire_name} · {reason}"),
                _ => unreachable!("matched above"),
            };
            // The same plan `bw requeue --dry-run` prints.
            let plan = store.plan_requeue(&filter)?;
            p.affected = plan.matching;
            p.would_requarantine = plan.would_requarantine;
            p.undecodable = plan.undecodable;
            unhandled.extend(plan.unhandled.into_iter().map(|w| w.wire_name));
        }
        Target::Matching { filter, described } => {
            if op != Op::Cancel {
                return Err(not_for(op, "a filtered list"));
            }
            p.what = described.clone();
            // The plan `bw cancel --state … --dry-run` prints.
            let plan = store.plan_cancel(filter)?;
            p.affected = plan.would_cancel + plan.would_ask_to_stop;
            p.running = plan.would_ask_to_stop;
            if plan.already_asked > 0 {
                p.skipped.push(format!("{} Running already asked to stop", plan.already_asked));
            }
        }
        Target::Paused { kind, name } => {
            p.what = format!("{kind} {name}");
            // The plan `bw pause --dry-run` prints. A resume counts the same jobs (they become
            // claimable again); it is not refused as an unknown name, since it is paused.
            let plan = match op {
                Op::Pause => store.plan_pause(*kind, name, false)?,
                Op::Resume => store.plan_pause(*kind, name, true)?,
                _ => return Err(not_for(op, "a queue or wire name")),
            };
            p.affected = plan.scheduled;
            p.running = plan.running;
        }
        Target::Payload { .. } => return Err(not_for(op, "a payload")),
    }
    p.unhandled = unhandled.into_iter().collect();
    Ok(p)
}

fn not_for(op: Op, what: &str) -> Error {
    Error::InvalidInput(format!("{} does not apply to {what}", op.name()))
}

fn run(store: &Store, actor: &str, op: Op, target: &Target, force: bool) -> crate::Result<Report> {
    use crate::store::RequeueResult;
    let mut report = Report { title: String::new(), lines: Vec::new(), refused: false };
    match (op, target) {
        (Op::Requeue, Target::Jobs(ids)) => {
            let results = store.requeue(actor, ids)?;
            let done = results.iter().filter(|r| matches!(r, RequeueResult::Requeued { .. })).count();
            report.title = format!("Requeued {done} of {}", ids.len());
            for (id, r) in ids.iter().zip(results) {
                report.lines.push(match r {
                    RequeueResult::Requeued { from } => {
                        format!("{}  requeued (was {from}): Scheduled now, attempt budget reset", id.short())
                    }
                    RequeueResult::NotRequeueable { state } => {
                        report.refused = true;
                        format!("{}  not requeued: it is {state}", id.short())
                    }
                    RequeueResult::NotFound => {
                        report.refused = true;
                        format!("{}  not found", id.short())
                    }
                });
            }
        }
        (Op::Cancel, Target::Jobs(ids)) => {
            let results = store.cancel(actor, ids)?;
            let ended = results.iter().filter(|r| matches!(r, CancelResult::Cancelled)).count();
            let asked = results.iter().filter(|r| matches!(r, CancelResult::CancelRequested)).count();
            report.title = format!("Cancelled {} of {}", ended + asked, ids.len());
            for (id, r) in ids.iter().zip(results) {
                report.lines.push(match r {
                    CancelResult::Cancelled => format!("{}  cancelled", id.short()),
                    CancelResult::CancelRequested => {
                        format!("{}  asked to stop: it ends Cancelled when its handler stops", id.short())
                    }
                    CancelResult::NotCancellable { state } => {
                        report.refused = true;
                        format!("{}  not cancelled: it is already {state}", id.short())
                    }
                    CancelResult::NotFound => {
                        report.refused = true;
                        format!("{}  not found", id.short())
                    }
                });
            }
        }
        (Op::RunNow, Target::Jobs(ids)) => {
            let results = store.run_now(actor, ids)?;
            let now = store.now();
            let done = results.iter().filter(|r| matches!(r, RunNowResult::Due { .. })).count();
            report.title = format!("Due now: {done} of {}", ids.len());
            for (id, r) in ids.iter().zip(results) {
                report.lines.push(match r {
                    RunNowResult::Due { was_due_at } if was_due_at <= now => {
                        format!("{}  due now (it already was)", id.short())
                    }
                    RunNowResult::Due { .. } => {
                        format!("{}  due now: the next free worker runs it, attempt and budget unchanged", id.short())
                    }
                    RunNowResult::NotScheduled { state } => {
                        report.refused = true;
                        format!("{}  not made due: it is {state}", id.short())
                    }
                    RunNowResult::NotFound => {
                        report.refused = true;
                        format!("{}  not found", id.short())
                    }
                });
            }
        }
        (Op::Pause, Target::Paused { kind, name }) => {
            let result = store.pause(actor, *kind, name, None, false)?;
            report.title = format!("Paused {kind} {name}");
            report.lines.push(match result {
                PauseResult::Paused => {
                    format!("no worker claims from {kind} {name} until resumed; running jobs finish")
                }
                PauseResult::Extended { .. } => format!("{kind} {name} was paused already: now until resumed"),
            });
        }
        (Op::Resume, Target::Paused { kind, name }) => match store.resume(actor, *kind, name)? {
            ResumeResult::Resumed => {
                report.title = format!("Resumed {kind} {name}");
                report.lines.push(format!("workers claim from {kind} {name} again at their next poll"));
            }
            ResumeResult::NotPaused => {
                report.title = format!("{kind} {name} was not paused");
                report.lines.push("nothing changed (its pause had ended or someone resumed it)".into());
                report.refused = true;
            }
        },
        (Op::EditPayload, Target::Payload { id, payload, requeue }) => {
            let done = store.edit_payload(actor, *id, payload, *requeue)?;
            report.title = format!("Payload of {} saved", id.short());
            report.lines.push(format!(
                "{}  payload replaced ({} bytes, was {}); the old one is kept in the audit log",
                id.short(),
                done.new_bytes,
                done.old_bytes
            ));
            report.lines.push(if done.requeued {
                format!("{}  requeued (was {}): Scheduled now, attempt budget reset", id.short(), done.from)
            } else {
                format!("{}  left {} (r requeues it)", id.short(), done.from)
            });
        }
        (Op::Requeue, group @ (Target::CauseGroup { .. } | Target::QuarantineGroup { .. })) => {
            let filter = group.group_filter().unwrap_or_default();
            // The same plan and the same call as `bw requeue --state …`: jobs no live worker
            // handles are left alone unless forced (the dialog's `f`, like `--force`).
            let plan = store.plan_requeue(&filter)?;
            let done = store.requeue_planned(actor, &filter, force, |_| {})?;
            let (jobs, are) = if done == 1 { ("job", "is") } else { ("jobs", "are") };
            report.title = format!("Requeued {done} {jobs}");
            report.lines.push(match group {
                Target::CauseGroup { wire_name, fingerprint } => {
                    format!("{done} Dead-Lettered {wire_name} {jobs} with cause '{fingerprint}' {are} Scheduled now")
                }
                Target::QuarantineGroup { wire_name, reason } => {
                    format!("{done} Quarantined {wire_name} {jobs} ({reason}) {are} Scheduled now")
                }
                _ => String::new(),
            });
            if !force && plan.would_requarantine > 0 {
                report.refused = true;
                report.lines.push(format!(
                    "{} left alone: no live worker handles {} (they would quarantine again)",
                    plan.would_requarantine,
                    plan.unhandled.iter().map(|w| w.wire_name.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        (Op::Cancel, Target::Matching { filter, .. }) => {
            // The same call as `bw cancel --state … --yes`: batches, each job whole.
            let done = store.cancel_matching(actor, filter, |_| {})?;
            report.title = format!("Cancelled {}", done.cancelled + done.asked_to_stop);
            report.lines.push(format!("{} Scheduled ended Cancelled", done.cancelled));
            report.lines.push(format!(
                "{} Running asked to stop: they end Cancelled when their handler stops",
                done.asked_to_stop
            ));
        }
        (op, Target::Matching { .. }) => return Err(not_for(op, "a filtered list")),
        (op, Target::Jobs(_)) => return Err(not_for(op, "jobs by id")),
        (op, Target::CauseGroup { .. } | Target::QuarantineGroup { .. }) => return Err(not_for(op, "a group")),
        (op, Target::Paused { .. }) => return Err(not_for(op, "a queue or wire name")),
        (op, Target::Payload { .. }) => return Err(not_for(op, "a payload")),
    }
    Ok(report)
}

/// The background thread: owns its own store, answers requests in order until the app hangs
/// up. A failure to open the store is reported as a refresh failure and retried on the next
/// request, so a store that is briefly unavailable heals by itself.
pub fn spawn_worker(
    open: impl Fn() -> crate::Result<Store> + Send + 'static,
    actor: String,
    requests: Receiver<Request>,
    responses: impl Fn(Response) -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("bw-top-store".into())
        .spawn(move || {
            let mut store: Option<Store> = None;
            while let Ok(request) = requests.recv() {
                if store.is_none() {
                    match open() {
                        Ok(s) => store = Some(s),
                        Err(e) => {
                            let busy = matches!(e, Error::Busy);
                            if !responses(Response::RefreshFailed { error: e.to_string(), busy }) {
                                return;
                            }
                            continue;
                        }
                    }
                }
                let Some(s) = store.as_ref() else { continue };
                let response = serve(s, &actor, &request);
                if !responses(response) {
                    return;
                }
            }
        })
        .expect("spawning a thread only fails when the process is out of resources")
}
