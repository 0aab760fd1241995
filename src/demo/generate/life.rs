//! How one generated job lives: the fate drawn for it, its attempts, leases and failures laid out
//! in time, and the log entries each step appends, as the engine would have written them.
//! One file of some 520 lines: one generator, whose steps share its random stream in order (a
//! seed names one store, so their order is the contract).

use std::rc::Rc;

use super::catalogue::*;
use super::GenerateOptions;
use crate::demo::rng::Rng;
use backwave::model::{FailureDetail, JobState, Millis};

pub(super) struct Worker {
    pub(super) id: String,
    pub(super) group: usize,
    pub(super) host: &'static str,
    pub(super) pid: u32,
    pub(super) last_heartbeat: Millis,
    pub(super) live: bool,
}

pub(super) struct Generator {
    pub(super) rng: Rng,
    pub(super) now: Millis,
    pub(super) jobs: u64,
    /// Jobs from this index on are the last few minutes' traffic, where the active ones are.
    pub(super) recent_from: u64,
    pub(super) workers: Rc<Vec<Worker>>,
    pub(super) kind_weights: u32,
}

/// One generated job and its log.
pub(super) struct GenJob {
    pub(super) id: Rc<str>,
    pub(super) wire_name: &'static str,
    pub(super) queue: &'static str,
    pub(super) labels: &'static str,
    pub(super) payload: String,
    pub(super) state: JobState,
    pub(super) attempt: u32,
    pub(super) max_attempts: Option<u32>,
    pub(super) due_at: Millis,
    pub(super) lease_owner: Option<usize>,
    pub(super) lease_expires_at: Option<Millis>,
    pub(super) group: Option<usize>,
    pub(super) cancel_requested_by: Option<&'static str>,
    pub(super) terminal_cause: Option<String>,
    pub(super) quarantine_reason: Option<&'static str>,
    pub(super) created_at: Millis,
    pub(super) updated_at: Millis,
    pub(super) finished_at: Option<Millis>,
    pub(super) log: Vec<Entry>,
}

pub(super) struct Entry {
    pub(super) job_id: Rc<str>,
    pub(super) at: Millis,
    pub(super) from: Option<JobState>,
    pub(super) to: JobState,
    pub(super) attempt: u32,
    pub(super) worker: Option<usize>,
    pub(super) actor: Option<&'static str>,
    pub(super) reason: Option<Rc<str>>,
    pub(super) detail: Option<String>,
    pub(super) detail_status: Option<&'static str>,
}

/// How a job's life ends, decided before its times are laid out.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Succeeded {
        failures: u32,
    },
    DeadLettered,
    Quarantined {
        no_handler: bool,
    },
    CancelledScheduled,
    CancelledRunning {
        failures: u32,
    },
    /// Enqueued with a due time after `now`, never claimed.
    Delayed,
    /// Due, waiting in the backlog, never claimed.
    Backlog,
    RetryPending {
        failures: u32,
    },
    Running {
        failures: u32,
        lapsed: bool,
    },
}

impl Generator {
    pub(super) fn new(opts: &GenerateOptions) -> Self {
        let mut rng = Rng(opts.seed ^ 0x6261_636b_7761_7665);
        let recent = (opts.jobs / 200).clamp(100.min(opts.jobs), 2000);
        let mut workers = Vec::new();
        let hosts: [(&str, u32); 2] = [("gen-host-1", 1001), ("gen-host-2", 2002)];
        for (host, pid) in hosts {
            for group in [STRICT, WEIGHTED, MAINTENANCE] {
                workers.push(Worker {
                    id: worker_id(&mut rng, host, pid, group),
                    group,
                    host,
                    pid,
                    last_heartbeat: opts.now - rng.range((0, 3000)),
                    live: true,
                });
            }
        }
        // A process that died: its heartbeat is 20 minutes old and some leases are still its.
        workers.push(Worker {
            id: worker_id(&mut rng, "gen-host-3", 3003, STRICT),
            group: STRICT,
            host: "gen-host-3",
            pid: 3003,
            last_heartbeat: opts.now - 20 * MINUTE,
            live: false,
        });
        Generator {
            rng,
            now: opts.now,
            jobs: opts.jobs,
            recent_from: opts.jobs - recent,
            workers: Rc::new(workers),
            kind_weights: KINDS.iter().map(|k| k.weight).sum(),
        }
    }

    /// Creation time of job `i`: strictly increasing; the old traffic spread over 7 days up to
    /// 30 minutes ago, the recent traffic over 6 to 2 minutes ago (two minutes leave room for
    /// the retries of the slowest handler before `now`).
    fn created_at(&self, i: u64) -> Millis {
        let old_start = self.now - 7 * DAY;
        let old_end = self.now - 30 * MINUTE;
        let recent_start = self.now - 6 * MINUTE;
        let recent_end = self.now - 2 * MINUTE;
        if i < self.recent_from {
            old_start + ((old_end - old_start) as u128 * i as u128 / self.recent_from.max(1) as u128) as Millis
        } else {
            let n = (self.jobs - self.recent_from).max(1);
            recent_start + ((recent_end - recent_start) as u128 * (i - self.recent_from) as u128 / n as u128) as Millis
        }
    }

    fn fate(&mut self, recent: bool, group: usize) -> Fate {
        let r = self.rng.unit();
        let failures_before_success = |rng: &mut Rng, max: u32| {
            let f = match rng.unit() {
                x if x < 0.6 => 0,
                x if x < 0.85 => 1,
                _ => 2,
            };
            f.min(max - 1)
        };
        let max = GROUPS[group].max_attempts;
        if !recent {
            match r {
                x if x < 0.85 => Fate::Succeeded { failures: failures_before_success(&mut self.rng, max) },
                x if x < 0.93 => Fate::DeadLettered,
                x if x < 0.95 => Fate::Quarantined { no_handler: self.rng.unit() < 0.6 },
                x if x < 0.953 => Fate::CancelledScheduled,
                x if x < 0.955 => Fate::CancelledRunning { failures: 0 },
                x if x < 0.965 => Fate::Delayed,
                _ => Fate::Succeeded { failures: 0 },
            }
        } else {
            let small = (max - 1).min(2);
            match r {
                x if x < 0.35 => Fate::Succeeded { failures: failures_before_success(&mut self.rng, max) },
                // A dead-letter on the default policy takes minutes: only the quick groups here.
                x if x < 0.40 && group != MAINTENANCE => Fate::DeadLettered,
                x if x < 0.42 => Fate::Quarantined { no_handler: self.rng.unit() < 0.6 },
                x if x < 0.57 => Fate::Backlog,
                x if x < 0.72 => Fate::RetryPending { failures: 1 + self.rng.below(small as u64) as u32 },
                x if x < 0.97 => {
                    Fate::Running { failures: self.rng.below(small as u64 + 1) as u32, lapsed: self.rng.unit() < 0.1 }
                }
                _ => Fate::CancelledRunning { failures: 0 },
            }
        }
    }

    pub(super) fn job(&mut self, i: u64) -> GenJob {
        let created = self.created_at(i);
        let recent = i >= self.recent_from;
        let mut pick = self.rng.below(self.kind_weights as u64) as u32;
        let kind = KINDS
            .iter()
            .find(|k| {
                if pick < k.weight {
                    true
                } else {
                    pick -= k.weight;
                    false
                }
            })
            .unwrap_or(&KINDS[0]);
        let fate = self.fate(recent, kind.group);
        let (wire, queue) = match fate {
            Fate::Quarantined { no_handler: true } => self.rng.pick(&UNKNOWN_WIRES),
            _ => (kind.wire, kind.queue),
        };
        let group_ix = GROUPS.iter().position(|g| g.queues.contains(&queue)).unwrap_or(kind.group);
        let group = &GROUPS[group_ix];
        let id: Rc<str> = uuid_from(&mut self.rng, created).into();
        let payload = match fate {
            Fate::Quarantined { no_handler: false } => r#"{"v":1,"legacy":true}"#.to_string(),
            _ => self.fill(kind.payload, 0),
        };
        // 10% of jobs ran on hosts with failure detail switched off.
        let capture = self.rng.unit() >= 0.1;
        let mut cause_ix = kind.causes[self.rng.zipf(kind.causes.len())];
        if recent && cause_ix == LEASE_CAUSE {
            // A lapsed lease takes a minute to notice: too slow for the last minutes' traffic.
            cause_ix = kind.causes.iter().copied().find(|&c| c != LEASE_CAUSE).unwrap_or(7);
        }
        let mut job = GenJob {
            id: id.clone(),
            wire_name: wire,
            queue,
            labels: self.rng.pick(&TENANTS),
            payload,
            state: JobState::Scheduled,
            attempt: 0,
            max_attempts: None,
            due_at: created,
            lease_owner: None,
            lease_expires_at: None,
            group: None,
            cancel_requested_by: None,
            terminal_cause: None,
            quarantine_reason: None,
            created_at: created,
            updated_at: created,
            finished_at: None,
            log: Vec::with_capacity(8),
        };
        job.log.push(self.entry(&id, created, None, JobState::Scheduled, 0));

        // 2% of old terminal jobs were dead-lettered once before and requeued by an operator:
        // the log keeps that first life, the row only the second.
        let mut t = created;
        if created < self.now - DAY
            && matches!(fate, Fate::Succeeded { .. } | Fate::DeadLettered)
            && self.rng.unit() < 0.02
        {
            let first = self.run_attempts(&mut job, kind, group_ix, t, group.max_attempts, cause_ix, capture, true);
            let actor = self.rng.pick(&OPERATORS);
            t = first + self.rng.range((MINUTE, 3 * 3_600_000));
            let mut e = self.entry(&id, t, Some(JobState::DeadLettered), JobState::Scheduled, 0);
            e.actor = Some(actor);
            e.reason = Some("requeued by operator: attempt budget reset".into());
            job.log.push(e);
            job.attempt = 0;
            job.state = JobState::Scheduled;
            job.terminal_cause = None;
            job.finished_at = None;
            job.due_at = t;
        }

        match fate {
            Fate::Succeeded { failures } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                let done = claim + self.rng.range(kind.run_ms);
                let w = job.log.last().and_then(|e| e.worker);
                job.log.push(self.entry_w(&id, done, JobState::Running, JobState::Succeeded, job.attempt, w));
                self.finish(&mut job, JobState::Succeeded, done);
            }
            Fate::DeadLettered => {
                self.run_attempts(&mut job, kind, group_ix, t, group.max_attempts, cause_ix, capture, true);
            }
            Fate::Quarantined { no_handler } => {
                let claim = self.claim(&mut job, group_ix, t);
                let (reason, cause) = if no_handler {
                    ("no-handler", format!("no handler registered for wire name '{wire}'"))
                } else {
                    (
                        "undecodable-payload",
                        format!(
                            "payload does not decode into {}: unknown field `legacy`, expected one of `{}`",
                            kind.wire,
                            kind.payload.split('"').nth(1).unwrap_or("value")
                        ),
                    )
                };
                let at = claim + 1;
                let w = job.log.last().and_then(|e| e.worker);
                let mut e = self.entry_w(&id, at, JobState::Running, JobState::Quarantined, 1, w);
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.quarantine_reason = Some(reason);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Quarantined, at);
            }
            Fate::CancelledScheduled => {
                let actor = self.rng.pick(&OPERATORS);
                job.due_at = created + self.rng.range((MINUTE, DAY));
                let at = created + self.rng.range((1000, 10 * MINUTE));
                let mut e = self.entry(&id, at, Some(JobState::Scheduled), JobState::Cancelled, 0);
                e.actor = Some(actor);
                let cause = format!("cancelled by {actor}");
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.cancel_requested_by = Some(actor);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Cancelled, at);
            }
            Fate::CancelledRunning { failures } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                let actor = self.rng.pick(&OPERATORS);
                let at = claim + self.rng.range((500, 20_000));
                let w = job.log.last().and_then(|e| e.worker);
                let mut e = self.entry_w(&id, at, JobState::Running, JobState::Cancelled, job.attempt, w);
                let cause = format!("cancelled by {actor}");
                e.actor = Some(actor);
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.cancel_requested_by = Some(actor);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Cancelled, at);
            }
            Fate::Delayed => {
                job.due_at = self.now + self.rng.range((MINUTE, 3 * DAY));
            }
            Fate::Backlog => {
                job.due_at = created;
            }
            Fate::RetryPending { failures } => {
                let due = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                job.due_at = due;
            }
            Fate::Running { failures, lapsed } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                job.state = JobState::Running;
                job.updated_at = claim;
                let owner = if lapsed && group_ix == STRICT {
                    self.workers.iter().position(|w| !w.live).unwrap_or(0)
                } else {
                    job.log.last().and_then(|e| e.worker).unwrap_or(0)
                };
                if let Some(last) = job.log.last_mut() {
                    last.worker = Some(owner);
                }
                job.lease_owner = Some(owner);
                job.lease_expires_at = Some(if lapsed {
                    self.now - self.rng.range((1000, 30_000))
                } else {
                    self.now + self.rng.range((5_000, LEASE_MS))
                });
            }
        }
        job
    }

    /// Claim the job at (about) `due` for its group; returns the claim time.
    fn claim(&mut self, job: &mut GenJob, group: usize, due: Millis) -> Millis {
        let at = due + self.rng.range((1, 250));
        let worker = self.worker_of(group);
        job.attempt += 1;
        job.max_attempts = Some(GROUPS[group].max_attempts);
        job.group = Some(group);
        job.updated_at = at;
        let id = job.id.clone();
        let e = self.entry_w(&id, at, JobState::Scheduled, JobState::Running, job.attempt, Some(worker));
        job.log.push(e);
        at
    }

    /// Run `failures` failed attempts from `t`; when `dead_letter`, `failures` is the whole
    /// budget and the last one dead-letters the job. Returns when the next attempt is due (or
    /// when the job dead-lettered).
    #[allow(clippy::too_many_arguments)]
    fn run_attempts(
        &mut self,
        job: &mut GenJob,
        kind: &Kind,
        group: usize,
        mut t: Millis,
        failures: u32,
        cause: usize,
        capture: bool,
        dead_letter: bool,
    ) -> Millis {
        let label = self.rng.pick(&LABEL_WORDS);
        let g = &GROUPS[group];
        for k in 0..failures {
            let claim = self.claim(job, group, t);
            let lease = cause == LEASE_CAUSE;
            let at =
                if lease { claim + LEASE_MS + self.rng.range((10, 2000)) } else { claim + self.rng.range(kind.run_ms) };
            let last = dead_letter && k + 1 == failures;
            let message = self.fill_cause(CAUSES[cause], job.attempt, label);
            let w = job.log.last().and_then(|e| e.worker);
            let to = if last { JobState::DeadLettered } else { JobState::Scheduled };
            let mut e = self.entry_w(&job.id, at, JobState::Running, to, job.attempt, w);
            if !lease {
                if capture {
                    let panic = CAUSES[cause].starts_with("panicked");
                    let detail = FailureDetail {
                        kind: if panic { "panic".into() } else { kind.error_type.into() },
                        message: message.clone(),
                        chain: if panic { vec![] } else { vec![format!("{} failed", kind.wire)] },
                        backtrace: last.then(|| backtrace(kind.wire)),
                    };
                    e.detail = serde_json::to_string(&detail).ok();
                    e.detail_status = Some("captured");
                } else {
                    e.detail_status = Some("not-captured");
                }
            }
            e.reason = Some(message.as_str().into());
            job.log.push(e);
            job.updated_at = at;
            if last {
                job.terminal_cause = Some(message);
                self.finish(job, JobState::DeadLettered, at);
                return at;
            }
            t = at + g.delays_ms[(job.attempt as usize - 1).min(g.delays_ms.len() - 1)];
            job.due_at = t;
        }
        t
    }

    fn finish(&mut self, job: &mut GenJob, state: JobState, at: Millis) {
        job.state = state;
        job.updated_at = at;
        job.finished_at = Some(at);
    }

    fn worker_of(&mut self, group: usize) -> usize {
        let candidates: Vec<usize> = (0..self.workers.len()).filter(|&w| self.workers[w].group == group).collect();
        self.rng.pick(&candidates)
    }

    fn entry(&self, id: &Rc<str>, at: Millis, from: Option<JobState>, to: JobState, attempt: u32) -> Entry {
        Entry {
            job_id: id.clone(),
            at,
            from,
            to,
            attempt,
            worker: None,
            actor: None,
            reason: None,
            detail: None,
            detail_status: None,
        }
    }

    fn entry_w(
        &self,
        id: &Rc<str>,
        at: Millis,
        from: JobState,
        to: JobState,
        attempt: u32,
        worker: Option<usize>,
    ) -> Entry {
        let mut e = self.entry(id, at, Some(from), to, attempt);
        e.worker = worker;
        e
    }

    fn fill(&mut self, template: &str, attempt: u32) -> String {
        let label = self.rng.pick(&LABEL_WORDS);
        self.fill_cause(template, attempt, label)
    }

    fn fill_cause(&mut self, template: &str, attempt: u32, label: &str) -> String {
        if !template.contains('{') {
            return template.to_string();
        }
        let mut out = String::with_capacity(template.len() + 16);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else { break };
            match &rest[open + 1..open + close] {
                "attempt" => out.push_str(&attempt.to_string()),
                "n" => out.push_str(&self.rng.range((2, 99_999)).to_string()),
                "hex" => out.push_str(&format!("{:012x}", self.rng.next() >> 16)),
                "host" => out.push_str(self.rng.pick(&HOSTS)),
                "label" => out.push_str(label),
                "file" => out.push_str(self.rng.pick(&FILES)),
                other => {
                    out.push('{');
                    out.push_str(other);
                    out.push('}');
                }
            }
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// A worker id as the engine writes it: `host/pid/group#tail`.
fn worker_id(rng: &mut Rng, host: &str, pid: u32, group: usize) -> String {
    format!("{host}/{pid}/{}#{:04x}", GROUPS[group].name, rng.next() & 0xffff)
}

/// A time-ordered (v7) id for `at`, its random bits from the generator's stream.
fn uuid_from(rng: &mut Rng, at: Millis) -> String {
    let a = rng.next().to_le_bytes();
    let b = rng.next().to_le_bytes();
    let bytes = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1]];
    uuid::Builder::from_unix_timestamp_millis(at.max(0) as u64, &bytes).into_uuid().hyphenated().to_string()
}

fn backtrace(wire: &str) -> String {
    let f = wire.replace('-', "_");
    format!(
        "   0: handlers::{f}::run\n             at ./src/handlers/{f}.rs:42:9\n   1: backwave::engine::runtime::run_attempt\n             at ./src/engine/runtime.rs:210:17\n   2: std::panicking::try\n   3: std::thread::spawn::{{{{closure}}}}"
    )
}
