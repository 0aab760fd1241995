//! The dashboard's database side: what one refresh asks for ([`Query`]), what it brings back
//! ([`Snapshot`]), and the requests for the operator actions (see `actions`), all through the
//! same library calls as the CLI.
//! [`serve`] is the only way to the store: the terminal loop runs it on a background thread with
//! its own [`Store`], tests call it directly. A refresh reads what every screen shows (header,
//! counts, log, chart) and asks the screen on show for its rows (`screens::Screen::read`), all
//! in one snapshot of the store ([`Store::snapshot`]), so that the figures agree.
//! Nothing here draws.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::actions::{preview, run};
pub use super::actions::{How, Op, Preview, Report, Target};
use crate::text::error_text;
use backwave::store::{
    CauseGroup, JobFilter, JobPage, LogFilter, Pause, QuarantineGroup, QueueLatency, ScheduleInfo, StateCounts,
    HANDED_BACK,
};
use backwave::{
    Error, FailureDetail, Job, JobId, JobState, LogCursor, Millis, Permission, Store, Transition, WorkerInfo,
};

pub use super::screens::View;

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
    /// The job whose payload `E` asked for: lists hold no payloads (they may be large), so an
    /// edit of a listed job reads its payload on the next refresh.
    pub payload: Option<JobId>,
    /// The cursor of the newest log entry the app holds (`None`: none yet).
    pub log_cursor: Option<LogCursor>,
    /// The cursor of the last log entry counted into the chart (`None`: start an hour back).
    pub chart_cursor: Option<LogCursor>,
    /// The actor, for the permissions shown in the header.
    pub actor: String,
    /// Log view: jobs on screen whose wire name the app does not know yet.
    pub wire_names: Vec<JobId>,
    /// Check the filter's queue and wire name against the names the store knows, should its
    /// page be empty: a scan of every job's wire name (1-2 s at 1,000,000 jobs), so the Jobs
    /// screen asks once per filter and again every [`NAMES_EVERY_MS`], not every refresh.
    pub check_names: bool,
}

/// Log entries a refresh reads at most, for the tail and for the chart's catch-up. The chart
/// catches up over several refreshes on a busy store, so no refresh reads an hour of log.
pub const LOG_BATCH: usize = 2_000;
/// Groups listed at most (the largest first).
pub const GROUP_LIMIT: usize = 200;
/// Running jobs the Workers view reads at most to say what each worker runs.
pub const WORKERS_RUNNING_LIMIT: usize = 5_000;
/// How often grouped views re-read their groups.
pub const GROUPS_EVERY_MS: Millis = 10_000;
/// How soon grouped views re-read their groups once their state's count has moved.
pub const GROUPS_CHANGED_MS: Millis = 2_000;
/// How often an empty filtered list checks its names again (see `Query::check_names`).
pub const NAMES_EVERY_MS: Millis = 10_000;
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
    /// The open job's workflow, parents and children, when it belongs to one.
    pub detail_workflow: Option<(backwave::WorkflowId, Vec<backwave::Parent>, Vec<backwave::workflow::Edge>)>,
    /// The payload `Query::payload` asked for (`None` inside: the job is gone).
    pub payload: Option<(JobId, Option<Vec<u8>>)>,
    /// New log entries after `Query::log_cursor`, oldest first. When the app was too far behind,
    /// `log_reset` says these replace what it holds.
    pub log: Vec<Transition>,
    pub log_reset: bool,
    /// Succeeded and failed transitions per minute (minute = at / 60000) found after
    /// `Query::chart_cursor`, and the cursor counted up to (`None`: the chart was not read).
    pub chart: BTreeMap<i64, (u64, u64)>,
    pub chart_cursor: Option<LogCursor>,
    /// Per queue: Scheduled jobs due now and how long the oldest of them has waited
    /// ([`Store::queue_latency`], the figures `bw stats` prints). Read every refresh: the header
    /// shows the worst.
    pub latency: Vec<QueueLatency>,
    /// Queues and wire names paused now ([`Store::pauses`]), for the header and the Queues view.
    pub pauses: Vec<Pause>,
    /// Log view: the wire names of `Query::wire_names` and of the newest entries read.
    pub wire_names: HashMap<JobId, String>,
    /// Workers view: every registered worker ([`Store::workers`]), and the jobs each runs.
    pub workers: Vec<WorkerInfo>,
    pub running_by_worker: HashMap<String, Vec<Job>>,
    /// Limits in force ([`Store::limits`], what `bw limits` prints), for the header and the
    /// Queues view.
    pub limits: Vec<backwave::store::LimitStatus>,
    /// Workers quiet or stopping ([`Store::worker_states`]), for the header.
    pub quiet_workers: Vec<backwave::store::WorkerState>,
    /// The Schedules view's rows, by name (read only for that view).
    pub schedules: Vec<ScheduleInfo>,
    /// The Workflows view's rows, newest first (read only for that view).
    pub workflows: Vec<backwave::WorkflowSummary>,
    /// When the page is empty under a filter naming a queue or wire name nothing has: what
    /// `bw jobs list` says of it on stderr, with its did-you-mean ([`crate::text::unknown_filter_names`]).
    pub unknown_names: Vec<String>,
    /// The filter whose names `unknown_names` answers, and when it was checked.
    pub names_checked: Option<(JobFilter, Millis)>,
    /// Wall time the queries took.
    pub query_time: Duration,
}

/// Work for the background thread.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Refresh(Box<Query>),
    Preview {
        op: Op,
        target: Target,
    },
    /// Do it, as the confirmation left it (see [`How`]).
    Run {
        op: Op,
        target: Target,
        how: How,
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
            Err(e) => Response::RefreshFailed { busy: matches!(e, Error::Busy), error: error_text(&e) },
        },
        Request::Preview { op, target } => match preview(store, actor, *op, target) {
            Ok(p) => Response::Preview(p),
            Err(e) => Response::PreviewFailed(error_text(&e)),
        },
        Request::Run { op: Op::Reveal, target: Target::Jobs(ids), .. } if ids.len() == 1 => {
            match store.reveal_failure_detail(actor, ids[0]) {
                Ok(details) => Response::Revealed { job: ids[0], details },
                Err(e) => Response::RevealFailed { job: ids[0], error: error_text(&e) },
            }
        }
        Request::Run { op, target, how } => match run(store, actor, *op, target, how) {
            Ok(r) => Response::Done(r),
            Err(e) => Response::Done(Report {
                title: format!("{} refused", op.verb()),
                lines: vec![error_text(&e)],
                refused: true,
            }),
        },
    }
}

fn refresh(store: &Store, q: &Query) -> backwave::Result<Snapshot> {
    refresh_racing(store, q, &mut || {})
}

/// One refresh, every read inside one snapshot of the store ([`Store::snapshot`]): read one
/// after the other, the header's counts and the page could each see a different moment, and
/// disagree while workers run. `between` runs after the header's reads and before the rest:
/// a test writes there to show that the rest does not see it.
#[doc(hidden)]
pub fn refresh_racing(store: &Store, q: &Query, between: &mut dyn FnMut()) -> backwave::Result<Snapshot> {
    let started = Instant::now();
    let mut s = store.snapshot(|store| read(store, q, between))?;
    s.query_time = started.elapsed();
    Ok(s)
}

fn read(store: &Store, q: &Query, between: &mut dyn FnMut()) -> backwave::Result<Snapshot> {
    let now = store.now();
    let mut s = Snapshot {
        at: now,
        counts: store.counts()?,
        permissions: store.permissions(&q.actor)?,
        query: Some(q.clone()),
        page_offset: q.offset,
        ..Default::default()
    };
    s.latency = store.queue_latency()?;
    s.pauses = store.pauses()?;
    s.limits = store.limits()?;
    s.quiet_workers =
        store.worker_states()?.into_iter().filter(|w| w.quiet_at.is_some() || w.stopping_at.is_some()).collect();
    between();
    if let Some(id) = q.payload {
        s.payload = Some((id, store.job(id)?.map(|j| j.payload)));
    }
    if let Some(id) = q.detail {
        if let Some(job) = store.job(id)? {
            let history = store.history(id)?;
            s.detail = Some((job, history));
            if let Some(wf) = store.workflow_of(id)? {
                s.detail_workflow = Some((wf, store.parents(id)?, store.children(id)?));
            }
        }
    }
    // The log tail: only entries newer than the last one held, unless the app is so far
    // behind that a fresh tail is cheaper than catching up (judged on seq alone: the
    // difference counts the entries in between closely enough on either backend).
    let end = store.log_end()?;
    match q.log_cursor {
        Some(held) if end.seq.saturating_sub(held.seq) <= LOG_BATCH as i64 => {
            s.log = store.log_after(&LogFilter::default(), held, LOG_BATCH)?;
        }
        _ => {
            s.log = store.log_tail(&LogFilter::default(), LOG_BATCH)?;
            s.log_reset = true;
        }
    }
    // The chart: count from an hour back (binary search on the first refresh), then only what
    // is new, a batch per refresh.
    let from = match q.chart_cursor {
        Some(counted) => counted,
        None => store.log_cursor_at(now - CHART_MINUTES * 60_000)?,
    };
    s.chart_cursor = Some(from);
    let batch = if !s.log_reset && q.chart_cursor.is_some() && q.chart_cursor == q.log_cursor {
        // The chart is caught up with the tail: the entries just read are the chart's too.
        s.log.clone()
    } else if from < end {
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
        s.chart_cursor = Some(t.cursor());
    }
    s.chart.retain(|_, v| *v != (0, 0));
    // What the screen on show lists (its page, groups, workers…): after the log, which the
    // Log screen names.
    q.view.screen(q.grouped).read(store, q, &mut s)?;
    Ok(s)
}

/// The wire name shown for a log entry whose job is gone (retention or `bw purge`).
pub const PURGED: &str = "(purged)";

/// For the chart: `Some(true)` a success, `Some(false)` a failed attempt (retried,
/// Dead-Lettered or Quarantined), `None` anything else.
pub fn classify(t: &Transition) -> Option<bool> {
    match (t.from, t.to) {
        (_, JobState::Succeeded) => Some(true),
        // An engine handing back a job it claimed ahead and never started: no attempt ran.
        (Some(JobState::Running), JobState::Scheduled) if t.reason.as_deref() == Some(HANDED_BACK) => None,
        (Some(JobState::Running), JobState::Scheduled)
        | (Some(JobState::Running), JobState::DeadLettered)
        | (Some(JobState::Running), JobState::Quarantined) => Some(false),
        _ => None,
    }
}

/// The background thread: owns its own store, answers requests in order until the app hangs
/// up. A failure to open the store is reported as a refresh failure and retried on the next
/// request, so a store that is briefly unavailable heals by itself.
pub fn spawn_worker(
    open: impl Fn() -> backwave::Result<Store> + Send + 'static,
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
                            if !responses(Response::RefreshFailed { error: error_text(&e), busy }) {
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
