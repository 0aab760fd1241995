//! The PostgreSQL backend: one database that workers on several hosts share.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::error::{Error, Result};
use crate::model::{FailureDetail, Job, JobId, LogCursor, Millis, NewJob, Permission, Transition, WorkerInfo};

pub(crate) struct PgStore {
    url: PostgresUrl,
    clock: Clock,
    read_only: bool,
    version: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.url).field("read_only", &self.read_only).finish()
    }
}

impl PgStore {
    pub(crate) fn open(url: &PostgresUrl) -> Result<PgStore> {
        Err(Error::PostgresNotBuilt { target: url.to_string() })
    }

    pub(crate) fn create(url: &PostgresUrl) -> Result<PgStore> {
        Self::open(url)
    }

    pub(crate) fn url(&self) -> &PostgresUrl {
        &self.url
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn schema_version(&self) -> i64 {
        self.version
    }

    fn not_yet(&self, what: &str) -> Error {
        Error::InvalidInput(format!("{what} is not yet implemented on PostgreSQL"))
    }
}

impl PgStore {
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        let _ = (timeout,);
        Err(self.not_yet("set_busy_timeout"))
    }

    pub fn check_integrity(&self) -> Result<Vec<String>> {
        let _ = ();
        Err(self.not_yet("check_integrity"))
    }

    pub fn permissions(&self, actor: &str) -> Result<Vec<Permission>> {
        let _ = (actor,);
        Err(self.not_yet("permissions"))
    }

    pub fn grant(&self, actor: &str, who: &str, permission: Permission) -> Result<()> {
        let _ = (actor, who, permission);
        Err(self.not_yet("grant"))
    }

    pub fn revoke(&self, actor: &str, who: &str, permission: Permission) -> Result<bool> {
        let _ = (actor, who, permission);
        Err(self.not_yet("revoke"))
    }

    pub fn has_admin(&self) -> Result<bool> {
        Err(self.not_yet("has_admin"))
    }

    pub fn bootstrap_admin(&self, actor: &str) -> Result<bool> {
        let _ = (actor,);
        Err(self.not_yet("bootstrap_admin"))
    }

    pub fn setting(&self, key: SettingKey) -> Result<String> {
        let _ = (key,);
        Err(self.not_yet("setting"))
    }

    pub fn set_setting(&self, actor: &str, key: SettingKey, value: &str) -> Result<()> {
        let _ = (actor, key, value);
        Err(self.not_yet("set_setting"))
    }

    pub fn retention(&self) -> Result<std::time::Duration> {
        let _ = ();
        Err(self.not_yet("retention"))
    }

    pub fn failure_detail_enabled(&self) -> Result<bool> {
        let _ = ();
        Err(self.not_yet("failure_detail_enabled"))
    }

    pub fn mark_demo(&self) -> Result<()> {
        let _ = ();
        Err(self.not_yet("mark_demo"))
    }

    pub fn is_demo(&self) -> Result<bool> {
        let _ = ();
        Err(self.not_yet("is_demo"))
    }

    pub fn reveal_failure_detail(&self, actor: &str, job: JobId) -> Result<Vec<(i64, FailureDetail)>> {
        let _ = (actor, job);
        Err(self.not_yet("reveal_failure_detail"))
    }

    pub fn audit_entries(&self, since: Millis, limit: usize) -> Result<Vec<AuditEntry>> {
        let _ = (since, limit);
        Err(self.not_yet("audit_entries"))
    }

    pub fn register_worker(&self, w: &WorkerInfo) -> Result<()> {
        let _ = (w,);
        Err(self.not_yet("register_worker"))
    }

    pub fn worker_heartbeat(&self, id: &str) -> Result<bool> {
        let _ = (id,);
        Err(self.not_yet("worker_heartbeat"))
    }

    pub fn unregister_worker(&self, id: &str) -> Result<()> {
        let _ = (id,);
        Err(self.not_yet("unregister_worker"))
    }

    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let _ = ();
        Err(self.not_yet("workers"))
    }

    pub fn has_lapsed_leases(&self) -> Result<bool> {
        let _ = ();
        Err(self.not_yet("has_lapsed_leases"))
    }

    pub fn hand_back(&self, worker_id: &str, jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>> {
        let _ = (worker_id, jobs);
        Err(self.not_yet("hand_back"))
    }

    pub fn cause_groups(&self, limit: usize) -> Result<Vec<CauseGroup>> {
        let _ = (limit,);
        Err(self.not_yet("cause_groups"))
    }

    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>> {
        let _ = ();
        Err(self.not_yet("quarantine_groups"))
    }

    pub fn live_handlers(&self) -> Result<HashMap<String, u64>> {
        let _ = ();
        Err(self.not_yet("live_handlers"))
    }

    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        let _ = ();
        Err(self.not_yet("queue_latency"))
    }

    pub fn health(&self, thresholds: &Thresholds) -> Result<Health> {
        let _ = (thresholds,);
        Err(self.not_yet("health"))
    }

    pub fn count_transitions(&self, counter: &mut TransitionCounter) -> Result<()> {
        let _ = (counter,);
        Err(self.not_yet("count_transitions"))
    }

    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let _ = (actor, ids);
        Err(self.not_yet("run_now"))
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let _ = (ids,);
        Err(self.not_yet("check_run_now"))
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let _ = (ids,);
        Err(self.not_yet("check_cancel"))
    }

    pub fn plan_run_now(&self, filter: &JobFilter) -> Result<RunNowPlan> {
        let _ = (filter,);
        Err(self.not_yet("plan_run_now"))
    }

    pub fn run_now_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let _ = (actor, filter, progress);
        Err(self.not_yet("run_now_matching"))
    }

    pub fn plan_cancel(&self, filter: &JobFilter) -> Result<CancelPlan> {
        let _ = (filter,);
        Err(self.not_yet("plan_cancel"))
    }

    pub fn cancel_matching(
        &self,
        actor: &str,
        filter: &JobFilter,
        progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        let _ = (actor, filter, progress);
        Err(self.not_yet("cancel_matching"))
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        let _ = (actor, id, payload, requeue);
        Err(self.not_yet("edit_payload"))
    }

    pub fn enqueue(&self, job: &NewJob) -> Result<JobId> {
        let _ = (job,);
        Err(self.not_yet("enqueue"))
    }

    pub fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        let _ = (jobs,);
        Err(self.not_yet("enqueue_many"))
    }

    pub fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<Job>> {
        let _ = (req,);
        Err(self.not_yet("claim"))
    }

    pub fn heartbeat(&self, worker_id: &str, jobs: &[(JobId, u32)], lease: Duration) -> Result<Vec<LeaseStatus>> {
        let _ = (worker_id, jobs, lease);
        Err(self.not_yet("heartbeat"))
    }

    pub fn complete(&self, completion: &Completion) -> Result<Fenced> {
        let _ = (completion,);
        Err(self.not_yet("complete"))
    }

    pub fn complete_many(&self, completions: &[Completion]) -> Result<Vec<Fenced>> {
        let _ = (completions,);
        Err(self.not_yet("complete_many"))
    }

    pub fn reap_expired(&self, limit: usize) -> Result<usize> {
        let _ = (limit,);
        Err(self.not_yet("reap_expired"))
    }

    pub fn log_tail(&self, filter: &LogFilter, n: usize) -> Result<Vec<Transition>> {
        let _ = (filter, n);
        Err(self.not_yet("log_tail"))
    }

    pub fn log_after(&self, filter: &LogFilter, after: LogCursor, limit: usize) -> Result<Vec<Transition>> {
        let _ = (filter, after, limit);
        Err(self.not_yet("log_after"))
    }

    pub fn log_end(&self) -> Result<LogCursor> {
        let _ = ();
        Err(self.not_yet("log_end"))
    }

    pub fn log_cursor_at(&self, at: Millis) -> Result<LogCursor> {
        let _ = (at,);
        Err(self.not_yet("log_cursor_at"))
    }

    pub fn requeue(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RequeueResult>> {
        let _ = (actor, ids);
        Err(self.not_yet("requeue"))
    }

    pub fn requeue_matching(&self, actor: &str, filter: &JobFilter, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let _ = (actor, filter, progress);
        Err(self.not_yet("requeue_matching"))
    }

    pub fn cancel(&self, actor: &str, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let _ = (actor, ids);
        Err(self.not_yet("cancel"))
    }

    pub fn sweep(&self, cutoff: Millis, limit: usize) -> Result<u64> {
        let _ = (cutoff, limit);
        Err(self.not_yet("sweep"))
    }

    pub fn sweep_expired(&self, limit: usize) -> Result<u64> {
        let _ = (limit,);
        Err(self.not_yet("sweep_expired"))
    }

    pub fn purge(&self, actor: &str, cutoff: Millis, progress: impl FnMut(BulkProgress)) -> Result<u64> {
        let _ = (actor, cutoff, progress);
        Err(self.not_yet("purge"))
    }

    pub fn count_purgeable(&self, cutoff: Millis) -> Result<u64> {
        let _ = (cutoff,);
        Err(self.not_yet("count_purgeable"))
    }

    pub fn pause(
        &self,
        actor: &str,
        kind: PauseKind,
        name: &str,
        until: Option<Millis>,
        force: bool,
    ) -> Result<PauseResult> {
        let _ = (actor, kind, name, until, force);
        Err(self.not_yet("pause"))
    }

    pub fn plan_pause(&self, kind: PauseKind, name: &str, force: bool) -> Result<PausePlan> {
        let _ = (kind, name, force);
        Err(self.not_yet("plan_pause"))
    }

    pub fn resume(&self, actor: &str, kind: PauseKind, name: &str) -> Result<ResumeResult> {
        let _ = (actor, kind, name);
        Err(self.not_yet("resume"))
    }

    pub fn pauses(&self) -> Result<Vec<Pause>> {
        let _ = ();
        Err(self.not_yet("pauses"))
    }

    pub fn plan_requeue(&self, filter: &JobFilter) -> Result<RequeuePlan> {
        let _ = (filter,);
        Err(self.not_yet("plan_requeue"))
    }

    pub fn check_requeue(&self, ids: &[JobId]) -> Result<Vec<RequeueCheck>> {
        let _ = (ids,);
        Err(self.not_yet("check_requeue"))
    }

    pub fn requeue_planned(
        &self,
        actor: &str,
        filter: &JobFilter,
        force: bool,
        progress: impl FnMut(BulkProgress),
    ) -> Result<u64> {
        let _ = (actor, filter, force, progress);
        Err(self.not_yet("requeue_planned"))
    }

    pub fn live_handler_count(&self, wire_name: &str) -> Result<u64> {
        let _ = (wire_name,);
        Err(self.not_yet("live_handler_count"))
    }

    pub fn job(&self, id: JobId) -> Result<Option<Job>> {
        let _ = (id,);
        Err(self.not_yet("job"))
    }

    pub fn resolve_id(&self, text: &str) -> Result<JobId> {
        let _ = (text,);
        Err(self.not_yet("resolve_id"))
    }

    pub fn history(&self, id: JobId) -> Result<Vec<Transition>> {
        let _ = (id,);
        Err(self.not_yet("history"))
    }

    pub fn list_jobs(&self, filter: &JobFilter, limit: usize, offset: u64) -> Result<JobPage> {
        let _ = (filter, limit, offset);
        Err(self.not_yet("list_jobs"))
    }

    pub fn list_jobs_after(&self, filter: &JobFilter, limit: usize, cursor: &Cursor) -> Result<JobPage> {
        let _ = (filter, limit, cursor);
        Err(self.not_yet("list_jobs_after"))
    }

    pub fn count_jobs(&self, filter: &JobFilter) -> Result<u64> {
        let _ = (filter,);
        Err(self.not_yet("count_jobs"))
    }

    pub fn counts(&self) -> Result<StateCounts> {
        let _ = ();
        Err(self.not_yet("counts"))
    }

    pub fn raw_execute(&self, sql: &str, params: &[RawValue]) -> Result<usize> {
        let _ = (sql, params);
        Err(self.not_yet("raw_execute"))
    }

    pub fn raw_batch(&self, sql: &str) -> Result<()> {
        let _ = (sql,);
        Err(self.not_yet("raw_batch"))
    }

    pub fn raw_query(&self, sql: &str, params: &[RawValue]) -> Result<Vec<Vec<RawValue>>> {
        let _ = (sql, params);
        Err(self.not_yet("raw_query"))
    }

    pub fn raw_scalar(&self, sql: &str, params: &[RawValue]) -> Result<RawValue> {
        let _ = (sql, params);
        Err(self.not_yet("raw_scalar"))
    }

    pub fn pragma(&self, name: &str) -> Result<RawValue> {
        let _ = (name,);
        Err(self.not_yet("pragma"))
    }

    pub fn explain(&self, sql: &str, params: &[RawValue]) -> Result<Vec<String>> {
        let _ = (sql, params);
        Err(self.not_yet("explain"))
    }
}
