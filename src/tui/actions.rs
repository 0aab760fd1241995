//! The operator actions of the dashboard: what an action covers ([`Target`]), which one it is
//! ([`Op`]), what it would do ([`Preview`], counted by the same store plan `bw … --dry-run`
//! prints) and what it did ([`Report`], per id like `bw`). Each preview and each run is one
//! library call, the one the CLI makes: no decision is made here that `bw` makes elsewhere.
//! Only [`super::data::serve`] calls in.

use crate::text::thousands;
use backwave::store::{
    CancelPlan, CancelResult, JobFilter, PauseKind, PauseResult, RequeueCheck, RequeuePlan, ResumeResult, RunNowResult,
};
use backwave::{Error, JobId, JobState, Millis, Permission, QuarantineReason, Store};

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
    /// A recurring schedule, to pause, resume or trigger.
    Schedule { name: String },
    /// A payload repair of one Dead-Lettered or Quarantined job: the new payload (valid JSON,
    /// checked again by the store), and whether to requeue it in the same transaction.
    Payload { id: JobId, payload: Vec<u8>, requeue: bool },
}

impl Target {
    /// The bulk filter of a group target.
    pub fn group_filter(&self) -> Option<JobFilter> {
        match self {
            Target::Jobs(_) | Target::Paused { .. } | Target::Payload { .. } | Target::Schedule { .. } => None,
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
    /// One job of a schedule now, outside its ticks (`bw schedule trigger`).
    Trigger,
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
            Op::Trigger => "Trigger",
        }
    }

    /// The permission a preview asks the store for before reading anything, as `bw` does, so
    /// that an actor who may not act learns nothing else. A reveal's preview reads only the job,
    /// which anyone may read; the reveal itself is refused in the detail pane.
    pub fn preview_permission(self) -> Option<Permission> {
        match self {
            Op::Reveal => None,
            _ => Some(Permission::Operate),
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
            Op::Trigger => "Trigger",
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
    /// A bulk action's plan, as the library counted it: the run acts on its set (see
    /// [`How::plan`]).
    pub plan: Option<Plan>,
}

/// The library's plan of a bulk action, counted for the confirmation and carried to the run,
/// which hands it to the `*_planned` call `bw` makes after its own plan: the set, the cut at
/// the plan's instant and the count of what arrived after it are the library's, not decided here.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// A group requeue ([`Store::plan_requeue`], then [`Store::requeue_planned`]).
    Requeue(Box<RequeuePlan>),
    /// A filtered cancel ([`Store::plan_cancel`], then [`Store::cancel_planned`]).
    Cancel(Box<CancelPlan>),
}

/// How to run a confirmed action.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct How {
    /// See [`Preview::force`].
    pub force: bool,
    /// A group requeue or a filtered cancel acts on the set this plan counted: jobs that
    /// turned Dead-Lettered (or were enqueued) after it are left alone, and the report says how
    /// many. Without a plan the run took in whatever had arrived since, and the dashboard
    /// cancelled 69 after asking about 68. `None` (no confirmation shown): the run plans first,
    /// as `bw … --yes` does.
    pub plan: Option<Plan>,
    /// A pause that ends by itself after this long (the dialog's 1, 2, 3; `bw pause --for`).
    pub pause_for: Option<std::time::Duration>,
}

/// The report's line for jobs that arrived after the plan, if any did.
fn arrivals_line(n: u64, what: &str) -> Option<String> {
    match n {
        0 => None,
        1 => Some(format!("1 job {what} after the plan: left alone (not in what you confirmed)")),
        n => Some(format!("{} jobs {what} after the plan: left alone (not in what you confirmed)", thousands(n))),
    }
}

/// What an action did, job by job.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub title: String,
    pub lines: Vec<String>,
    /// Something was refused (permission, wrong state): shown in red.
    pub refused: bool,
}

pub(super) fn preview(store: &Store, actor: &str, op: Op, target: &Target) -> backwave::Result<Preview> {
    if let Some(permission) = op.preview_permission() {
        store.require(actor, permission)?;
    }
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
        plan: None,
    };
    let mut unhandled = std::collections::BTreeSet::new();
    match target {
        Target::Jobs(ids) => {
            p.what = match ids.as_slice() {
                [one] => format!("job {one}"),
                // Named (found at 3 a.m.: "2 marked jobs" hid that one was a job slid under the
                // selection, never looked at).
                many => {
                    let shown: Vec<String> = many.iter().take(4).map(|id| id.short()).collect();
                    let more = if many.len() > 4 { format!(" and {} more", many.len() - 4) } else { String::new() };
                    format!("{} marked jobs: {}{more}", many.len(), shown.join(" "))
                }
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
                            RequeueCheck::Conflict { existing, .. } => {
                                p.skipped.push(format!("{}: job {} holds its unique key", id.short(), existing.short()))
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
                Op::Pause | Op::Resume | Op::EditPayload | Op::Trigger => return Err(not_for(op, "jobs by id")),
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
            // The same plan `bw requeue --dry-run` prints: the run acts on exactly its jobs.
            let plan = store.plan_requeue(actor, &filter)?;
            p.affected = plan.matching;
            p.would_requarantine = plan.would_requarantine;
            p.undecodable = plan.undecodable;
            unhandled.extend(plan.unhandled.iter().map(|w| w.wire_name.clone()));
            p.plan = Some(Plan::Requeue(Box::new(plan)));
        }
        Target::Matching { filter, described } => {
            if op != Op::Cancel {
                return Err(not_for(op, "a filtered list"));
            }
            p.what = described.clone();
            // The plan `bw cancel --state … --dry-run` prints: the run acts on exactly its jobs.
            let plan = store.plan_cancel(actor, filter)?;
            p.affected = plan.would_cancel + plan.would_ask_to_stop;
            p.running = plan.would_ask_to_stop;
            if plan.already_asked > 0 {
                p.skipped.push(format!("{} Running already asked to stop", plan.already_asked));
            }
            p.plan = Some(Plan::Cancel(Box::new(plan)));
        }
        Target::Paused { kind, name } => {
            p.what = format!("{kind} {name}");
            // The plan `bw pause --dry-run` prints. A resume counts the same jobs (they become
            // claimable again); it is not refused as an unknown name, since it is paused.
            let plan = match op {
                Op::Pause => store.plan_pause(actor, *kind, name, false)?,
                Op::Resume => store.plan_pause(actor, *kind, name, true)?,
                _ => return Err(not_for(op, "a queue or wire name")),
            };
            p.affected = plan.scheduled;
            p.running = plan.running;
        }
        Target::Payload { .. } => return Err(not_for(op, "a payload")),
        Target::Schedule { name } => {
            if !matches!(op, Op::Pause | Op::Resume | Op::Trigger) {
                return Err(not_for(op, "a schedule"));
            }
            // What `bw schedule … --dry-run` reads: the schedule by name (refused if gone).
            let info = store.schedule(name)?;
            let s = &info.row.schedule;
            p.what = match op {
                Op::Trigger => format!("schedule {name}: one {} job on {} now", s.wire_name, s.queue),
                _ => format!("schedule {name}"),
            };
            p.affected = 1;
        }
    }
    p.unhandled = unhandled.into_iter().collect();
    Ok(p)
}

fn not_for(op: Op, what: &str) -> Error {
    Error::InvalidInput(format!("{} does not apply to {what}", op.name()))
}

pub(super) fn run(store: &Store, actor: &str, op: Op, target: &Target, how: &How) -> backwave::Result<Report> {
    let force = how.force;
    use backwave::store::{BulkDone, RequeueResult};
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
                    RequeueResult::Conflict { existing } => {
                        report.refused = true;
                        format!("{}  not requeued: job {} holds its unique key", id.short(), existing.short())
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
            let until = how.pause_for.map(|d| store.now().saturating_add(d.as_millis() as Millis));
            let result = store.pause(actor, *kind, name, until, false)?;
            let till = match until {
                Some(u) => format!("until {} (UTC)", crate::text::rfc3339(u).get(11..16).unwrap_or("?")),
                None => "until resumed".to_string(),
            };
            report.title = match how.pause_for {
                Some(d) => format!("Paused {kind} {name} for {}", crate::text::compact_duration(d)),
                None => format!("Paused {kind} {name}"),
            };
            report.lines.push(match result {
                PauseResult::Paused => format!("no worker claims from {kind} {name} {till}; running jobs finish"),
                PauseResult::Extended { .. } => format!("{kind} {name} was paused already: now {till}"),
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
            } else if let Some(existing) = done.conflict {
                report.refused = true;
                format!("{}  left {}: job {} holds its unique key", id.short(), done.from, existing.short())
            } else {
                format!("{}  left {} (r requeues it)", id.short(), done.from)
            });
        }
        (Op::Requeue, group @ (Target::CauseGroup { .. } | Target::QuarantineGroup { .. })) => {
            // The same plan and the same call as `bw requeue --state …`: jobs no live worker
            // handles are left alone unless forced (the dialog's `f`, like `--force`).
            let planned;
            let plan = match &how.plan {
                Some(Plan::Requeue(plan)) => &**plan,
                _ => {
                    planned = store.plan_requeue(actor, &group.group_filter().unwrap_or_default())?;
                    &planned
                }
            };
            let BulkDone { done, arrived_after_plan: arrived } = store.requeue_planned(actor, plan, force, |_| {})?;
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
            report.lines.extend(arrivals_line(arrived, "joined the group"));
        }
        (Op::Cancel, Target::Matching { filter, .. }) => {
            // The same plan and the same call as `bw cancel --state … --yes`: batches, each job
            // whole; on the jobs the plan counted.
            let planned;
            let plan = match &how.plan {
                Some(Plan::Cancel(plan)) => &**plan,
                _ => {
                    planned = store.plan_cancel(actor, filter)?;
                    &planned
                }
            };
            let done = store.cancel_planned(actor, plan, |_| {})?;
            report.title = format!("Cancelled {}", thousands(done.cancelled + done.asked_to_stop));
            report.lines.push(format!("{} Scheduled ended Cancelled", thousands(done.cancelled)));
            report.lines.push(format!(
                "{} Running asked to stop: they end Cancelled when their handler stops",
                thousands(done.asked_to_stop)
            ));
            if done.dependents_cancelled > 0 {
                report.lines.push(format!(
                    "{} Waiting dependents cancelled with them (their workflows cancel on failure)",
                    thousands(done.dependents_cancelled)
                ));
            }
            report.lines.extend(arrivals_line(done.arrived_after_plan, "were enqueued"));
        }
        (Op::Pause, Target::Schedule { name }) => {
            // The dialog's durations (1 2 3) hold for a schedule as for a queue.
            let until = how.pause_for.map(|d| store.now().saturating_add(d.as_millis() as Millis));
            let result = store.pause_schedule(actor, name, until)?;
            let till = match until {
                Some(u) => format!("until {} (UTC)", crate::text::rfc3339(u).get(11..16).unwrap_or("?")),
                None => "until resumed".to_string(),
            };
            report.title = match how.pause_for {
                Some(d) => format!("Paused schedule {name} for {}", crate::text::compact_duration(d)),
                None => format!("Paused schedule {name}"),
            };
            report.lines.push(match result {
                backwave::store::SchedulePauseResult::Paused => format!("its ticks are dropped {till}"),
                backwave::store::SchedulePauseResult::Extended { .. } => format!("it was paused already: now {till}"),
            });
        }
        (Op::Resume, Target::Schedule { name }) => match store.resume_schedule(actor, name)? {
            backwave::store::ScheduleResumeResult::Resumed => {
                report.title = format!("Resumed schedule {name}");
                report.lines.push("its next tick fires".into());
            }
            backwave::store::ScheduleResumeResult::NotPaused => {
                report.title = format!("schedule {name} was not paused");
                report.lines.push("nothing changed (its pause had ended or someone resumed it)".into());
                report.refused = true;
            }
        },
        (Op::Trigger, Target::Schedule { name }) => {
            let t = store.trigger_schedule(actor, name)?;
            report.title = format!("Triggered schedule {name}");
            report.lines.push(format!("{}  enqueued now, outside its ticks", t.job.short()));
        }
        (op, Target::Schedule { .. }) => return Err(not_for(op, "a schedule")),
        (op, Target::Matching { .. }) => return Err(not_for(op, "a filtered list")),
        (op, Target::Jobs(_)) => return Err(not_for(op, "jobs by id")),
        (op, Target::CauseGroup { .. } | Target::QuarantineGroup { .. }) => return Err(not_for(op, "a group")),
        (op, Target::Paused { .. }) => return Err(not_for(op, "a queue or wire name")),
        (op, Target::Payload { .. }) => return Err(not_for(op, "a payload")),
    }
    Ok(report)
}
