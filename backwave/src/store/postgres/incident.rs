//! Incident actions beyond requeue and cancel on PostgreSQL: run now, bulk cancel of a filtered
//! set, and payload repair of a terminal job; planned first (exact counts, one snapshot), then
//! done in batches that lock the jobs they decide on (see `operator.rs`), with the same log
//! entries and audit rows as SQLite.

use super::PgStore;
use crate::error::Result;
use crate::model::JobId;
use crate::store::ops;
use crate::store::ops::jobs::check_new_payload;
use crate::store::{CancelResult, PayloadEdit, PriorityChange, RunNowResult};

impl PgStore {
    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.write(|tx| ops::jobs::run_now(tx, actor, ids))
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        self.read(|tx| ops::jobs::check_run_now(tx, ids))
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        self.read(|tx| ops::jobs::check_cancel(tx, ids))
    }

    pub fn set_priority(&self, actor: &str, id: JobId, priority: u8) -> Result<PriorityChange> {
        self.write(|tx| ops::jobs::set_priority(tx, actor, id, priority))
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        check_new_payload(payload)?;
        self.write(|tx| ops::jobs::edit_payload(tx, actor, id, payload, requeue))
    }
}
