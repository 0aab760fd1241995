//! operator: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn requeue(&self, _actor: &str, _ids: &[JobId]) -> Result<Vec<RequeueResult>> {
        Err(super::not_yet("requeue"))
    }

    pub fn requeue_matching(
        &self,
        _actor: &str,
        _filter: &JobFilter,
        _progress: impl FnMut(BulkProgress),
    ) -> Result<u64> {
        Err(super::not_yet("requeue_matching"))
    }

    pub fn cancel(&self, _actor: &str, _ids: &[JobId]) -> Result<Vec<CancelResult>> {
        Err(super::not_yet("cancel"))
    }

    pub fn sweep(&self, _cutoff: Millis, _limit: usize) -> Result<u64> {
        Err(super::not_yet("sweep"))
    }

    pub fn sweep_expired(&self, _limit: usize) -> Result<u64> {
        Err(super::not_yet("sweep_expired"))
    }

    pub fn purge(&self, _actor: &str, _cutoff: Millis, _progress: impl FnMut(BulkProgress)) -> Result<u64> {
        Err(super::not_yet("purge"))
    }

    pub fn count_purgeable(&self, _cutoff: Millis) -> Result<u64> {
        Err(super::not_yet("count_purgeable"))
    }

    pub fn plan_requeue(&self, _filter: &JobFilter) -> Result<RequeuePlan> {
        Err(super::not_yet("plan_requeue"))
    }

    pub fn check_requeue(&self, _ids: &[JobId]) -> Result<Vec<RequeueCheck>> {
        Err(super::not_yet("check_requeue"))
    }

    pub fn requeue_planned(
        &self,
        _actor: &str,
        _filter: &JobFilter,
        _force: bool,
        _progress: impl FnMut(BulkProgress),
    ) -> Result<u64> {
        Err(super::not_yet("requeue_planned"))
    }

    pub fn live_handler_count(&self, _wire_name: &str) -> Result<u64> {
        Err(super::not_yet("live_handler_count"))
    }

    pub fn run_now(&self, _actor: &str, _ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        Err(super::not_yet("run_now"))
    }

    pub fn check_run_now(&self, _ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        Err(super::not_yet("check_run_now"))
    }

    pub fn check_cancel(&self, _ids: &[JobId]) -> Result<Vec<CancelResult>> {
        Err(super::not_yet("check_cancel"))
    }

    pub fn plan_run_now(&self, _filter: &JobFilter) -> Result<RunNowPlan> {
        Err(super::not_yet("plan_run_now"))
    }

    pub fn run_now_matching(
        &self,
        _actor: &str,
        _filter: &JobFilter,
        _progress: impl FnMut(BulkProgress),
    ) -> Result<u64> {
        Err(super::not_yet("run_now_matching"))
    }

    pub fn plan_cancel(&self, _filter: &JobFilter) -> Result<CancelPlan> {
        Err(super::not_yet("plan_cancel"))
    }

    pub fn cancel_matching(
        &self,
        _actor: &str,
        _filter: &JobFilter,
        _progress: impl FnMut(BulkProgress),
    ) -> Result<CancelDone> {
        Err(super::not_yet("cancel_matching"))
    }

    pub fn edit_payload(&self, _actor: &str, _id: JobId, _payload: &[u8], _requeue: bool) -> Result<PayloadEdit> {
        Err(super::not_yet("edit_payload"))
    }

    pub fn pause(
        &self,
        _actor: &str,
        _kind: PauseKind,
        _name: &str,
        _until: Option<Millis>,
        _force: bool,
    ) -> Result<PauseResult> {
        Err(super::not_yet("pause"))
    }

    pub fn plan_pause(&self, _kind: PauseKind, _name: &str, _force: bool) -> Result<PausePlan> {
        Err(super::not_yet("plan_pause"))
    }

    pub fn resume(&self, _actor: &str, _kind: PauseKind, _name: &str) -> Result<ResumeResult> {
        Err(super::not_yet("resume"))
    }

    pub fn pauses(&self) -> Result<Vec<Pause>> {
        Err(super::not_yet("pauses"))
    }
}
