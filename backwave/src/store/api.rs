//! Every operation of the store, listed once with its documentation: each forwards to the
//! backend the store was opened on. A backend that lacks one of them, or gives it another
//! signature, does not compile.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::error::Result;
use crate::model::{
    Enqueued, FailureDetail, Job, JobId, JobState, LogCursor, Millis, NewJob, Permission, Progress, Transition,
    WorkerInfo,
};

macro_rules! forward {
    ($( $(#[$attr:meta])* pub fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        impl Store {
            $(
                $(#[$attr])*
                pub fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match &self.backend {
                        Backend::Sqlite(s) => s.$name($($arg),*),
                        #[cfg(feature = "postgres")]
                        Backend::Postgres(p) => p.$name($($arg),*),
                    }
                }
            )*
        }
    };
}

forward! {
    // The comments name the file of each dialect (`sqlite/`, `postgres/`) that implements what
    // follows them.

    // mod.rs
    /// How long a statement waits for another writer's lock before failing with
    /// [`Busy`](crate::Error::Busy) (default [`BUSY_TIMEOUT`]); on PostgreSQL the session's
    /// `lock_timeout`. Over [`MAX_BUSY_TIMEOUT`]: [`InvalidInput`](crate::Error::InvalidInput).
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()>;
    /// The store's clock now ([`Clock`]), in milliseconds since the Unix epoch: the time every
    /// due time, lease and log entry of this handle is written with.
    pub fn now(&self) -> Millis;
    /// Whether this handle may only read (see [`Store::open`]): writes then fail with
    /// [`ReadOnly`](crate::Error::ReadOnly).
    pub fn is_read_only(&self) -> bool;
    /// The schema version of the store (a read-only open of an older store stays at its version).
    pub fn schema_version(&self) -> i64;
    /// The store's own consistency checks: the problems found, none when clean. SQLite runs
    /// `PRAGMA integrity_check` and `foreign_key_check`; both backends check that `job_counts`
    /// equals a count of the jobs.
    pub fn check_integrity(&self) -> Result<Vec<String>>;

    // admin.rs
    /// The permissions `actor` holds; `admin` brings the other two with it.
    pub fn permissions(&self, actor: &str) -> Result<Vec<Permission>>;
    /// Give `who` a permission. Needs `admin`; audited.
    pub fn grant(&self, actor: &str, who: &str, permission: Permission) -> Result<()>;
    /// Take a permission away. Needs `admin`; audited when `who` had it. Returns whether `who` had it.
    pub fn revoke(&self, actor: &str, who: &str, permission: Permission) -> Result<bool>;
    /// Whether anybody holds `admin` in this store.
    pub fn has_admin(&self) -> Result<bool>;
    /// Make `actor` admin if the store has no admin yet (as a store's creator, setting it up).
    /// Returns whether it did.
    pub fn bootstrap_admin(&self, actor: &str) -> Result<bool>;
    /// A setting's value, or its default.
    pub fn setting(&self, key: SettingKey) -> Result<String>;
    /// Change a setting. Needs `admin`; audited.
    pub fn set_setting(&self, actor: &str, key: SettingKey, value: &str) -> Result<()>;
    /// How long terminal jobs are kept before the retention sweep deletes them (default 14 days).
    pub fn retention(&self) -> Result<std::time::Duration>;
    /// The largest payload, in bytes, that an enqueue or a payload edit may store: the
    /// `payload_limit` setting, 1 MiB by default. Over it they fail with
    /// [`PayloadTooLarge`](crate::Error::PayloadTooLarge) and write nothing; the schema's
    /// triggers refuse the same rows from any other program.
    pub fn payload_limit(&self) -> Result<u64>;
    /// The largest output, in bytes, that a handler may record: the `output_limit` setting,
    /// 32 KiB by default ([`DEFAULT_OUTPUT_LIMIT`]). A larger one fails its attempt (see
    /// [`Outcome::SucceededWith`]).
    pub fn output_limit(&self) -> Result<u64>;
    /// Whether failure detail is captured in this store at all.
    pub fn failure_detail_enabled(&self) -> Result<bool>;
    /// Mark a store as a throwaway demo store, which [`Store::reset_demo`] may empty, and read the
    /// mark back.
    pub fn mark_demo(&self) -> Result<()>;
    /// Whether [`Store::mark_demo`] marked this store.
    pub fn is_demo(&self) -> Result<bool>;

    // demo.rs
    /// Start a demo store over: in one transaction, refuse with
    /// [`InvalidInput`](crate::Error::InvalidInput) unless the store is marked as a demo store, then delete every row
    /// of every table (the schema and its version stay) and mark it again. Grants go too:
    /// bootstrap an admin afterwards.
    pub fn reset_demo(&self) -> Result<()>;

    // admin.rs
    /// The failure detail of every failed attempt of a job, by log sequence number. Needs
    /// `view-failure-detail`; every reveal is written to the audit table, in the same
    /// transaction that reads the detail.
    ///
    /// While the store's switch is off nothing is revealed to anyone, not even detail captured
    /// before it was turned off: the answer is [`FailureDetailOff`](crate::Error::FailureDetailOff), so nobody
    /// mistakes "off" for "no failure".
    pub fn reveal_failure_detail(&self, actor: &str, job: JobId) -> Result<Vec<(i64, FailureDetail)>>;
    /// The audit trail since `since`, oldest first.
    pub fn audit_entries(&self, since: Millis, limit: usize) -> Result<Vec<AuditEntry>>;

    // jobs.rs: the live worker registry, and what only the engine calls
    /// Register (or re-register) a worker in the live registry.
    pub fn register_worker(&self, w: &WorkerInfo) -> Result<()>;
    /// Say a worker is alive. Returns false if its row is gone (it is then re-registered by
    /// the caller).
    pub fn worker_heartbeat(&self, id: &str) -> Result<bool>;
    /// Remove a worker on clean shutdown.
    pub fn unregister_worker(&self, id: &str) -> Result<()>;
    /// Every registered worker, live or stale, most recent heartbeat first.
    pub fn workers(&self) -> Result<Vec<WorkerInfo>>;
    /// Whether any Running job's lease has lapsed, by the `jobs_lease` index and without the
    /// write lock, so that idle workers polling many times a second do not queue behind each
    /// other just to find nothing to reap.
    pub fn has_lapsed_leases(&self) -> Result<bool>;
    /// Undo the claims of jobs a worker holds but never started (claimed ahead into its ready
    /// buffer, then its shutdown, or its handlers stalled), in one transaction, each behind the
    /// fence. A job goes back to
    /// Scheduled with its attempt counter lowered again, so the claim consumed no budget
    /// (attempts count executions, and this one never ran) and its `due_at` keeps its place in
    /// line; the log says so (`Running -> Scheduled` at the attempt it is back at, reason
    /// [`HANDED_BACK`]). A job an operator asked to cancel meanwhile ends Cancelled instead, as
    /// its handler would have. Per job: `Accepted(Scheduled)`, `Accepted(Cancelled)`, or
    /// `Rejected` when the lease is no longer the worker's (nothing changed).
    pub fn hand_back(&self, worker_id: &str, jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>>;
    /// The `(job, attempt)` of every Running job leased to `worker_id`. A worker whose claim
    /// failed without an answer (a connection lost mid-commit) asks this to find jobs the store
    /// gave it that it never heard of, and hands them back (no attempt spent) instead of letting
    /// their leases lapse.
    pub fn leases_held(&self, worker_id: &str) -> Result<Vec<(JobId, u32)>>;

    // limit.rs: quiet and stopping workers
    /// Quiet the matching workers (needs `operate`; audited): each claims nothing from its next
    /// poll and finishes what it runs. Returns the ids that became quiet (already quiet ones keep
    /// their time and actor); a selector matching no registered worker is refused.
    pub fn quiet_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>>;
    /// Lift a quiet (needs `operate`; audited). Returns the ids that were quiet.
    pub fn resume_workers(&self, actor: &str, selector: &WorkerSelector) -> Result<Vec<String>>;
    /// Record that a worker's engine began to shut down.
    pub fn mark_stopping(&self, worker_id: &str) -> Result<()>;
    /// Write a worker's own quiet (SIGTSTP, `EngineHandle::quiet`) into its registry row, as
    /// [`crate::store::QUIET_BY_PROCESS`], so that [`Store::worker_states`] and the health report
    /// see it and [`Store::resume_workers`] lifts it; `false` lifts only a quiet the process wrote
    /// itself. No permission, no audit: a process's word about itself.
    pub fn mark_quiet_self(&self, worker_id: &str, quiet: bool) -> Result<()>;
    /// Quiet and stopping state and live Running count of every registered worker, by id.
    pub fn worker_states(&self) -> Result<Vec<WorkerState>>;

    // health/groups.rs
    /// The top dead-letter causes: Dead-Lettered jobs grouped by wire name and cause
    /// fingerprint, the largest groups first.
    pub fn cause_groups(&self, limit: usize) -> Result<Vec<CauseGroup>>;
    /// Quarantined jobs grouped by wire name and reason, each marked with how many live
    /// workers handle that wire name now.
    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>>;
    /// For each wire name, how many live workers handle it now.
    pub fn live_handlers(&self) -> Result<HashMap<String, u64>>;

    // health/latency.rs
    /// Queue latency for every queue that has jobs, by name: how long its oldest due job has
    /// waited. One range
    /// of the claim index per queue with Scheduled jobs ([`DUE_SQL`]); its cost is the number of
    /// jobs due now, never the backlog due later nor the finished jobs. With a wire name paused,
    /// one more probe per paused name ([`DUE_WIRE_NAME_SQL`]), and, when the oldest due job is
    /// a paused one, one per wire name waiting in the queue. Pauses read in the same snapshot.
    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>>;

    // health/mod.rs
    /// The store's health against `thresholds`, read in one snapshot (pauses included). Read-only.
    /// Fast at millions of jobs: counts come from the trigger-kept table, latency from the claim
    /// indexes (`jobs_claim`, and `jobs_claim_wire` for a paused wire name), causes and
    /// quarantines from their covering indexes, recent dead letters from `jobs_finished`.
    pub fn health(&self, thresholds: &Thresholds) -> Result<Health>;

    // log.rs
    /// Add the transitions appended since `counter` last looked. The first call only sets the
    /// baseline (the log's current end), so a counter counts from when its reader started and
    /// a scrape never walks the whole log.
    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()>;

    // incident.rs
    /// Make Scheduled jobs due now, by id, without touching attempt or budget. Needs `operate`;
    /// each change is audited (`run-now`, with the due time it replaced): a new due time is not
    /// a state change, so it has no transition entry.
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>>;
    /// What [`Store::run_now`] would answer for each of `ids` now, changing nothing: the by-id
    /// plan, to show before running them.
    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>>;
    /// What [`Store::cancel`] would answer for each of `ids` now, changing nothing.
    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>>;
    /// Replace the payload of a Dead-Lettered or Quarantined job with `payload`, which must be
    /// valid JSON; with `requeue`, requeue it in the same transaction. Needs `operate`. The old
    /// payload is kept in the audit entry (`edit-payload`), so nothing is lost. Any other state
    /// is refused with [`WrongState`](crate::Error::WrongState) and nothing changes; so is a
    /// payload over the store's [`payload_limit`](Store::payload_limit)
    /// ([`PayloadTooLarge`](crate::Error::PayloadTooLarge)).
    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit>;
    /// Give one job another priority within its queue, 0 (claimed first) to 9 (claimed last;
    /// see [`NewJob::priority`](crate::NewJob::priority)), whatever its state: a Scheduled job
    /// is claimed by it from the next claim, a Running or terminal one keeps it for a retry or
    /// a requeue. Needs `operate`; audited as `set-priority` with the old and new values (the
    /// priority it already has changes and audits nothing). A priority outside the range is
    /// [`InvalidInput`](crate::Error::InvalidInput) quoting it; an unknown id
    /// [`JobNotFound`](crate::Error::JobNotFound).
    pub fn set_priority(&self, actor: &str, id: JobId, priority: u8) -> Result<PriorityChange>;

    // jobs.rs
    /// Claim up to `limit` due jobs from the request's queues, in order, under a lease. Each
    /// claim raises the attempt and writes the group's retry budget and delay table into the job.
    pub fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<Job>>;
    /// When the earliest Scheduled job of `queues` is due, due or not (None: they hold none).
    /// How long an idle worker may sleep: a job due later (a retry's delay, one enqueued to run
    /// later) is claimed at its time rather than at the next poll.
    pub fn next_due(&self, queues: &[String]) -> Result<Option<Millis>>;
    /// Read the leases a worker holds and renew those due, in one transaction: a lease is
    /// renewed to `lease` from now once less than [`crate::store::renewal_threshold`] of it is
    /// left (two thirds of it and one heartbeat's gap: every 18 s or so of a minute's lease), so
    /// a long job's row is not rewritten at every heartbeat; one that would end later than
    /// `lease` from now is cut to it (`Duration::ZERO` ends it now). A lease that is no longer
    /// ours is reported `Lost`; a held one, renewed or not, tells whether an operator asked the
    /// job to stop.
    pub fn heartbeat(&self, worker_id: &str, jobs: &[(JobId, u32)], lease: Duration) -> Result<Vec<LeaseStatus>>;
    /// [`Store::heartbeat`], writing what each handler reported of its progress since the last
    /// heartbeat, in the statement that renews the leases (a lease with progress to write is
    /// renewed with it, due or not; no extra write):
    /// `progress[i]` is `jobs[i]`'s, `None` (or past the end of `progress`) keeps what is stored.
    /// A lease no longer held writes nothing. The engine calls it with what
    /// [`JobContext::progress`](crate::JobContext::progress) reported.
    pub fn heartbeat_with_progress(
        &self,
        worker_id: &str,
        jobs: &[(JobId, u32)],
        progress: &[Option<Progress>],
        lease: Duration
    ) -> Result<Vec<LeaseStatus>>;
    /// Record one outcome behind the fence.
    pub fn complete(&self, completion: &Completion) -> Result<Fenced>;
    /// Record several outcomes in one transaction, each behind the fence.
    pub fn complete_many(&self, completions: &[Completion]) -> Result<Vec<Fenced>>;
    /// Look for up to `limit` lapsed leases, oldest first, and turn those `confirmed` into
    /// failed attempts: retried at the job's own delay table, Dead-Lettered with cause `lease
    /// expired` when the budget is spent, or Cancelled when an operator had asked. The others
    /// come back as seen. With [`Confirmed::Seen`], a look the store kept waiting [`HELD_UP`] or
    /// longer for a lock reaps and sees nothing (`None`): every heartbeat may have waited as
    /// long. Any process may call it: it needs nothing from the worker that held the lease.
    pub fn reap_lapsed(&self, limit: usize, confirmed: Confirmed<'_>) -> Result<Option<Reap>>;

    // limit.rs (setting, clearing and declaring limits are written once, on `Store`, in
    // `ops/limits.rs`, over the backends' `LimitTx`)
    /// Every limit in force, the operator's and the application's side by side, with what runs
    /// under it, its current window and what it holds back now.
    pub fn limits(&self) -> Result<Vec<LimitStatus>>;

    // log.rs
    /// The last `n` log entries matching `filter`, oldest first, in cursor order; only entries a
    /// reader may have seen ([`Store::log_end`]), so following on from the newest of them with
    /// [`Store::log_after`] misses nothing.
    pub fn log_tail(&self, filter: &LogFilter, n: usize) -> Result<Vec<Transition>>;
    /// Up to `limit` entries strictly after `after`, in cursor order (see [`LogCursor`]): polling
    /// with the cursor of the last entry seen never misses or repeats an entry. On PostgreSQL an
    /// entry is delivered only once every transaction that could sort before it has ended.
    pub fn log_after(&self, filter: &LogFilter, after: LogCursor, limit: usize) -> Result<Vec<Transition>>;
    /// The cursor of the newest entry a reader may have seen: past it, everything is new.
    /// (0, 0) on an empty log.
    pub fn log_end(&self) -> Result<LogCursor>;
    /// The cursor just before the first entry at or after `at`, where a count of the entries
    /// since `at` starts. Both backends find it by binary search over the log's primary key
    /// (entries are appended in time order), so no index on time is needed; on PostgreSQL an
    /// entry's time is its transaction's start, so entries of transactions running side by side
    /// at `at` may fall on either side.
    pub fn log_cursor_at(&self, at: Millis) -> Result<LogCursor>;

    // operator.rs
    /// Requeue jobs by id: only Dead-Lettered or Quarantined jobs change. Needs `operate`.
    pub fn requeue(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>>;
    /// Cancel jobs by id. Needs `operate`.
    pub fn cancel(&self, actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>>;
    /// The retention sweep: delete up to `limit` terminal jobs that finished before `cutoff`,
    /// with their log. Returns how many were deleted. The engine runs it unattended.
    pub fn sweep(&self, cutoff: Millis, limit: usize) -> Result<u64>;
    /// The unattended retention sweep at the store's own `retention` setting: up to `limit`
    /// terminal jobs that finished longer ago than that, deleted with their log.
    pub fn sweep_expired(&self, limit: usize) -> Result<u64>;
    /// The retention sweep on demand, of every terminal job that finished before `cutoff`: in
    /// batches, each audited in its own transaction. Needs `operate`.
    pub fn purge(&self, actor: &str, cutoff: Millis, progress: impl FnMut(BulkProgress)) -> Result<u64>;
    /// Delete terminal jobs by id with their log, in one transaction, each
    /// audited (`purge`, with its state, wire name and queue). A Scheduled or Running job is
    /// refused (`NotTerminal`) and nothing of it changes. Needs `operate`.
    pub fn purge_jobs(&self, actor: &str, ids: &[JobId]) -> Result<Vec<PurgeResult>>;
    /// How many terminal jobs finished before `cutoff`.
    pub fn count_purgeable(&self, cutoff: Millis) -> Result<u64>;
    /// The terminal jobs that finished before `cutoff`, by state (states with none left out):
    /// what a purge or a shorter retention would delete.
    pub fn purgeable_by_state(&self, cutoff: Millis) -> Result<Vec<(JobState, u64)>>;

    // pause.rs (pause and resume are written once, on `Store`, in `ops/names.rs`)
    /// Count what pausing `kind` `name` would hold now, after the same checks as
    /// [`Store::pause`] in the same order (`actor`'s `operate` first, then the name). Index-bound:
    /// a queue's counts come from `job_counts`; a wire name's from one `jobs_claim_wire` range
    /// per queue and the (few) running jobs.
    pub fn plan_pause(&self, actor: &str, kind: PauseKind, name: &str, force: bool) -> Result<PausePlan>;
    /// The pauses in force now, queues first, then by name. Anyone may read them. A version-1
    /// store opened read-only has none.
    pub fn pauses(&self) -> Result<Vec<Pause>>;

    // preview.rs
    /// What requeueing each of `ids` would do now, one answer per id in order, changing nothing:
    /// the by-id half of the plan, with its per-id warnings, to show before [`Store::requeue`].
    pub fn check_requeue(&self, ids: &[JobId]) -> Result<Vec<RequeueCheck>>;

    // workflow.rs
    /// Workflows, newest first (at most `limit`), with their jobs' counts by state.
    pub fn workflows(&self, limit: usize) -> Result<Vec<crate::WorkflowSummary>>;
    /// One workflow and its graph, by id or by a unique prefix of it; `None` when no workflow has it.
    pub fn workflow(&self, id_or_prefix: &str) -> Result<Option<crate::WorkflowGraph>>;
    /// The parents of a workflow job (none for any other job): each one's id, wire name,
    /// state and what the edge needed of it. A child's handler reads them to learn how its
    /// parents ended (a batch's callback: how many failed).
    pub fn parents(&self, job: JobId) -> Result<Vec<crate::Parent>>;
    /// The parents of a workflow job counted by state (none for any other job), without reading
    /// their outputs: for the callback of a batch of many members, which wants how many
    /// succeeded rather than each one.
    pub fn parent_counts(&self, job: JobId) -> Result<crate::ParentCounts>;
    /// The children of a workflow job, with whether each one's edge to `job` is met.
    pub fn children(&self, job: JobId) -> Result<Vec<crate::workflow::Edge>>;
    /// The workflow a job belongs to, if any.
    pub fn workflow_of(&self, job: JobId) -> Result<Option<crate::WorkflowId>>;

    // query.rs
    /// One job by id.
    pub fn job(&self, id: JobId) -> Result<Option<Job>>;
    /// The output of job `id`: the JSON bytes its succeeded attempt recorded
    /// ([`JobContext::set_output`](crate::JobContext::set_output)); `None` when it has not
    /// succeeded or recorded nothing. An unknown id (or one the retention sweep deleted) is
    /// [`JobNotFound`](crate::Error::JobNotFound). Decode it with `serde_json::from_slice`, or
    /// read the job and use [`Job::output_as`].
    pub fn output(&self, id: JobId) -> Result<Option<Vec<u8>>>;
    /// The outputs of those of `ids` that have one, in one read (ids unknown or without an
    /// output are left out).
    pub fn outputs(&self, ids: &[JobId]) -> Result<HashMap<JobId, Vec<u8>>>;
    /// The wire name of each of `ids` still in the store (a deleted job is left out), in one
    /// statement: for naming the jobs of many log entries at once, rather than reading a whole job
    /// per entry (100 entries: 100 reads, each a round trip on PostgreSQL).
    pub fn wire_names_of(&self, ids: &[JobId]) -> Result<HashMap<JobId, String>>;
    /// Resolve a full id, any unique prefix of one (`0192f3a1`, with or without hyphens), or
    /// the short id tables show ([`JobId::short`]: the last hex digits of the id, up to 12).
    ///
    /// Ids are time-ordered, so a prefix names the minute a job was made and a short prefix is
    /// shared by every job of that minute; the tail is random and tells them apart. A prefix is
    /// found through the primary-key index; a tail needs a scan of that index (about 0.1 s per
    /// million jobs), which is why it is only tried for inputs of 12 hex digits or fewer.
    pub fn resolve_id(&self, text: &str) -> Result<JobId>;
    /// Every transition of one job, oldest first.
    pub fn history(&self, id: JobId) -> Result<Vec<Transition>>;
    /// One page of jobs matching `filter`, skipping `offset` rows. Ordered by [`JobFilter::order`].
    pub fn list_jobs(&self, filter: &JobFilter, limit: usize, offset: u64) -> Result<JobPage>;
    /// The page after `cursor`.
    pub fn list_jobs_after(&self, filter: &JobFilter, limit: usize, cursor: &Cursor) -> Result<JobPage>;
    /// How many jobs match `filter`.
    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64>;
    /// Counts of jobs by queue and state, from the trigger-kept table: O(queues), not O(jobs).
    pub fn counts(&self) -> Result<StateCounts>;
    /// Every wire name a job in the store has, sorted. A scan of the jobs: for telling a typo
    /// from a name that has no jobs (a filter on wire name `flakey` that matched nothing), not for
    /// every listing.
    pub fn wire_names(&self) -> Result<Vec<String>>;

    // raw.rs: hidden hooks for the tests and benches
    #[doc(hidden)]
    /// The plan of [`Store::count_jobs`]'s statement for `filter`: SQLite's `EXPLAIN QUERY PLAN`
    /// lines, PostgreSQL's `EXPLAIN`.
    pub fn explain_count_jobs(&self, filter: &JobFilter) -> Result<Vec<String>>;
    #[doc(hidden)]
    /// The plan of [`Store::list_jobs`]'s statement for the first page of `limit` of `filter`.
    pub fn explain_list_jobs(&self, filter: &JobFilter, limit: usize) -> Result<Vec<String>>;
    #[doc(hidden)]
    /// Run one statement of SQL text with `params` outside any library check: the rows changed.
    pub fn raw_execute(&self, sql: &str, params: &[RawValue]) -> Result<usize>;
    #[doc(hidden)]
    /// Run several `;`-separated statements of SQL text, without parameters.
    pub fn raw_batch(&self, sql: &str) -> Result<()>;
    #[doc(hidden)]
    /// Every row of one query of SQL text, each a `Vec` of its columns in order.
    pub fn raw_query(&self, sql: &str, params: &[RawValue]) -> Result<Vec<Vec<RawValue>>>;
    #[doc(hidden)]
    /// The first column of the first row of one query (NULL when it returns no row).
    pub fn raw_scalar(&self, sql: &str, params: &[RawValue]) -> Result<RawValue>;
    #[doc(hidden)]
    /// The value of `PRAGMA name` as the store's connection sees it.
    pub fn pragma(&self, name: &str) -> Result<RawValue>;
    #[doc(hidden)]
    /// The detail column of `EXPLAIN QUERY PLAN sql`, one line per step.
    pub fn explain(&self, sql: &str, params: &[RawValue]) -> Result<Vec<String>>;
}

impl Store {
    /// Enqueue several jobs in one transaction, each answered [`Enqueued::Created`] with its new
    /// id, or, for a job whose [`UniqueRule`](crate::UniqueRule) key another job holds (one
    /// stored earlier, or earlier in `jobs`), [`Enqueued::Duplicate`] with that job's id and
    /// nothing stored for it. A rule the store could not keep (a state set without Scheduled and
    /// Running, an empty key, a zero period) is [`Error::InvalidInput`](crate::Error) and
    /// nothing is stored; so is a payload over the store's [`payload_limit`](Store::payload_limit)
    /// ([`PayloadTooLarge`](crate::Error::PayloadTooLarge)): all of the jobs, or none. The
    /// unique index decides, never a lock or a read before the write, so racing enqueues of one
    /// key from any number of processes and hosts store one job.
    ///
    /// Each call is one [`ENQUEUE_SPAN`](crate::telemetry::ENQUEUE_SPAN) in the caller's
    /// current span (see [`crate::telemetry`]).
    pub fn insert_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let span = crate::telemetry::enqueue_span(jobs);
        let traced = crate::otel::stamp(jobs, &span);
        let done = span.in_scope(|| match &self.backend {
            Backend::Sqlite(s) => s.enqueue_many(&traced),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.enqueue_many(&traced),
        });
        crate::telemetry::enqueued(&span, done.as_deref());
        let done = done?;
        // Committed: this process's idle workers on this store hear of it now.
        listen::ring(&self.bell, jobs.iter().map(|j| j.queue.as_str()));
        Ok(done)
    }

    /// Enqueue a [`Workflow`](crate::Workflow) in one transaction: every job, with its edges,
    /// or nothing. A job with parents is stored [`Waiting`](JobState::Waiting); the others are
    /// Scheduled. Refused with [`InvalidInput`](crate::Error::InvalidInput) before anything is
    /// written: a cycle (quoted), no job, more than
    /// [`MAX_WORKFLOW_JOBS`](crate::workflow::MAX_WORKFLOW_JOBS), a job with a unique rule, a
    /// bad name; a payload over the limit is [`PayloadTooLarge`](crate::Error::PayloadTooLarge).
    pub fn enqueue_workflow(&self, workflow: &crate::Workflow) -> Result<crate::EnqueuedWorkflow> {
        workflow.validate()?;
        let span = crate::telemetry::enqueue_span(workflow.jobs());
        let traced = crate::otel::stamp(workflow.jobs(), &span);
        let id = crate::WorkflowId::new();
        let done = span.in_scope(|| match &self.backend {
            Backend::Sqlite(s) => s.enqueue_workflow(id, workflow, &traced),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.enqueue_workflow(id, workflow, &traced),
        });
        let recorded = done.as_ref().map(|ids| ids.iter().copied().map(Enqueued::Created).collect::<Vec<_>>());
        crate::telemetry::enqueued(&span, recorded.as_deref());
        let jobs = done?;
        listen::ring(&self.bell, workflow.jobs().iter().map(|j| j.queue.as_str()));
        Ok(crate::EnqueuedWorkflow { id, jobs })
    }

    /// [`Store::insert_many`] for one job.
    pub fn insert(&self, job: &NewJob) -> Result<Enqueued> {
        Ok(self.insert_many(std::slice::from_ref(job))?[0])
    }

    /// Enqueue one job; returns its id (for a unique job's duplicate, the id of the job holding
    /// the key: [`Store::insert`] tells the two apart).
    pub fn enqueue(&self, job: &NewJob) -> Result<JobId> {
        Ok(self.insert(job)?.id())
    }

    /// Enqueue several jobs in one transaction; returns their ids as [`Store::enqueue`] does.
    pub fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        Ok(self.insert_many(jobs)?.into_iter().map(Enqueued::id).collect())
    }

    /// Every queue name a job has now or a registered worker serves, sorted: what a filter's
    /// queue can be checked against when it matched nothing (a likely typo).
    pub fn queue_names(&self) -> Result<Vec<String>> {
        let mut names: std::collections::BTreeSet<String> = self.counts()?.by_queue.into_keys().collect();
        names.extend(self.workers()?.into_iter().flat_map(|w| w.queues));
        Ok(names.into_iter().collect())
    }

    /// [`Store::wire_names`] of the jobs, and those registered workers handle, sorted.
    pub fn known_wire_names(&self) -> Result<Vec<String>> {
        let mut names: std::collections::BTreeSet<String> = self.wire_names()?.into_iter().collect();
        names.extend(self.workers()?.into_iter().flat_map(|w| w.wire_names));
        Ok(names.into_iter().collect())
    }

    /// The jobs [`Store::requeue_matching`] would act on for `filter`: the requeueable states it
    /// names (dead-lettered and quarantined when it names none), finished before now.
    pub fn requeue_scope(&self, filter: &JobFilter) -> JobFilter {
        ops::preview::requeue_scope(filter, self.now())
    }

    /// The jobs [`Store::run_now_matching`] would act on: the scheduled ones `filter` matches.
    pub fn run_now_scope(&self, filter: &JobFilter) -> JobFilter {
        ops::jobs::run_now_scope(filter)
    }

    /// The jobs [`Store::cancel_matching`] would act on: the scheduled and running ones `filter`
    /// matches (both when it names neither). It needs no permission, so an application or a
    /// read-only view can list it ([`Store::list_jobs`]) to show what a bulk cancel would touch;
    /// [`Store::plan_cancel`] counts the same jobs, cut at the instant it counted, for an actor
    /// with `operate`.
    pub fn cancel_scope(&self, filter: &JobFilter) -> JobFilter {
        ops::jobs::cancel_scope(filter)
    }

    /// How many live workers handle `wire_name` now.
    pub fn live_handler_count(&self, wire_name: &str) -> Result<u64> {
        Ok(self.live_handlers()?.get(wire_name).copied().unwrap_or(0))
    }

    /// Turn up to `limit` lapsed leases into failed attempts at once, unconfirmed (a tool, a
    /// test, a demo; the engine confirms first, see [`Store::reap_lapsed`]). Returns how many.
    pub fn reap_expired(&self, limit: usize) -> Result<usize> {
        Ok(self.reap_lapsed(limit, Confirmed::All)?.map_or(0, |r| r.reaped))
    }
}
