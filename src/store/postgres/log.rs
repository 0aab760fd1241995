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

    pub fn log_after(&self, _filter: &LogFilter, _after: LogCursor, _limit: usize) -> Result<Vec<Transition>> {
        Err(super::not_yet("log_after"))
    }

    pub fn log_end(&self) -> Result<LogCursor> {
        Err(super::not_yet("log_end"))
    }

    pub fn log_cursor_at(&self, _at: Millis) -> Result<LogCursor> {
        Err(super::not_yet("log_cursor_at"))
    }

    pub fn count_transitions(&self, _counter: &mut TransitionCounter) -> Result<()> {
        Err(super::not_yet("count_transitions"))
    }
}
