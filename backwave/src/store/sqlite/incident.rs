//! Incident actions on SQLite: run now, priority changes and payload repair, each one write
//! transaction under the policy of `ops/jobs.rs` (the results' types are `store/incident.rs`).

use super::{SqliteOps, SqliteStore};
use crate::error::Result;
use crate::model::JobId;
use crate::store::ops;
use crate::store::ops::jobs::check_new_payload;
use crate::store::{CancelResult, PayloadEdit, PriorityChange, RunNowResult};

impl SqliteStore {
    pub fn set_priority(&self, actor: &str, id: JobId, priority: u8) -> Result<PriorityChange> {
        let now = self.now();
        self.write(|c| ops::jobs::set_priority(&mut SqliteOps { c, now }, actor, id, priority))
    }

    pub fn run_now(&self, actor: &str, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let now = self.now();
        self.write(|c| ops::jobs::run_now(&mut SqliteOps { c, now }, actor, ids))
    }

    pub fn check_run_now(&self, ids: &[JobId]) -> Result<Vec<RunNowResult>> {
        let now = self.now();
        self.read(|c| ops::jobs::check_run_now(&mut SqliteOps { c, now }, ids))
    }

    pub fn check_cancel(&self, ids: &[JobId]) -> Result<Vec<CancelResult>> {
        let now = self.now();
        self.read(|c| ops::jobs::check_cancel(&mut SqliteOps { c, now }, ids))
    }

    pub fn edit_payload(&self, actor: &str, id: JobId, payload: &[u8], requeue: bool) -> Result<PayloadEdit> {
        check_new_payload(payload)?;
        let now = self.now();
        self.write(|c| ops::jobs::edit_payload(&mut SqliteOps { c, now }, actor, id, payload, requeue))
    }
}
