//! log: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn log_tail(&self, _filter: &LogFilter, _n: usize) -> Result<Vec<Transition>> {
        Err(super::not_yet("log_tail"))
    }

    pub fn log_after(&self, _filter: &LogFilter, _seq: i64, _limit: usize) -> Result<Vec<Transition>> {
        Err(super::not_yet("log_after"))
    }

    pub fn last_seq(&self) -> Result<i64> {
        Err(super::not_yet("last_seq"))
    }

    pub fn seq_at(&self, _at: Millis) -> Result<i64> {
        Err(super::not_yet("seq_at"))
    }

    pub fn count_transitions(&self, _counter: &mut TransitionCounter) -> Result<()> {
        Err(super::not_yet("count_transitions"))
    }
}
