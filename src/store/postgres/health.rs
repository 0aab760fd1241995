//! health: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn cause_groups(&self, _limit: usize) -> Result<Vec<CauseGroup>> {
        Err(super::not_yet("cause_groups"))
    }

    pub fn quarantine_groups(&self) -> Result<Vec<QuarantineGroup>> {
        Err(super::not_yet("quarantine_groups"))
    }

    pub fn live_handlers(&self) -> Result<HashMap<String, u64>> {
        Err(super::not_yet("live_handlers"))
    }

    pub fn queue_latency(&self) -> Result<Vec<QueueLatency>> {
        Err(super::not_yet("queue_latency"))
    }

    pub fn health(&self, _thresholds: &Thresholds) -> Result<Health> {
        Err(super::not_yet("health"))
    }
}
