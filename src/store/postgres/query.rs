//! query: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn job(&self, _id: JobId) -> Result<Option<Job>> {
        Err(super::not_yet("job"))
    }

    pub fn resolve_id(&self, _text: &str) -> Result<JobId> {
        Err(super::not_yet("resolve_id"))
    }

    pub fn history(&self, _id: JobId) -> Result<Vec<Transition>> {
        Err(super::not_yet("history"))
    }

    pub fn list_jobs(&self, _filter: &JobFilter, _limit: usize, _offset: u64) -> Result<JobPage> {
        Err(super::not_yet("list_jobs"))
    }

    pub fn list_jobs_after(&self, _filter: &JobFilter, _limit: usize, _cursor: &Cursor) -> Result<JobPage> {
        Err(super::not_yet("list_jobs_after"))
    }

    pub fn count_jobs(&self, _filter: &JobFilter) -> Result<u64> {
        Err(super::not_yet("count_jobs"))
    }

    pub fn counts(&self) -> Result<StateCounts> {
        Err(super::not_yet("counts"))
    }
}
