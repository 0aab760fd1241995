//! jobs: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn enqueue(&self, _job: &NewJob) -> Result<JobId> {
        Err(super::not_yet("enqueue"))
    }

    pub fn enqueue_many(&self, _jobs: &[NewJob]) -> Result<Vec<JobId>> {
        Err(super::not_yet("enqueue_many"))
    }

    pub fn claim(&self, _req: &ClaimRequest<'_>) -> Result<Vec<Job>> {
        Err(super::not_yet("claim"))
    }

    pub fn heartbeat(&self, _worker_id: &str, _jobs: &[(JobId, u32)], _lease: Duration) -> Result<Vec<LeaseStatus>> {
        Err(super::not_yet("heartbeat"))
    }

    pub fn complete(&self, _completion: &Completion) -> Result<Fenced> {
        Err(super::not_yet("complete"))
    }

    pub fn complete_many(&self, _completions: &[Completion]) -> Result<Vec<Fenced>> {
        Err(super::not_yet("complete_many"))
    }

    pub fn reap_expired(&self, _limit: usize) -> Result<usize> {
        Err(super::not_yet("reap_expired"))
    }

    pub fn has_lapsed_leases(&self) -> Result<bool> {
        Err(super::not_yet("has_lapsed_leases"))
    }

    pub fn hand_back(&self, _worker_id: &str, _jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>> {
        Err(super::not_yet("hand_back"))
    }

    pub fn register_worker(&self, _w: &WorkerInfo) -> Result<()> {
        Err(super::not_yet("register_worker"))
    }

    pub fn worker_heartbeat(&self, _id: &str) -> Result<bool> {
        Err(super::not_yet("worker_heartbeat"))
    }

    pub fn unregister_worker(&self, _id: &str) -> Result<()> {
        Err(super::not_yet("unregister_worker"))
    }

    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        Err(super::not_yet("workers"))
    }
}
