//! Store operations only the engine needs (owned by the engine): a lock-free check for lapsed
//! leases, handing back claimed jobs that never started, and the leases a worker holds (to find
//! the jobs of a claim whose answer it lost). Every state change still goes through the fence:
//! nothing here touches a job that is not Running under the caller's lease.

use rusqlite::params;

use super::jobs::{log, Completion, Entry, Fenced};
use super::ops::outcome::{self, HANDED_BACK};
use super::ops::settings;
use super::row::parse_id;
use super::SqliteStore;
use crate::error::Result;
use crate::model::{JobId, JobState};

impl SqliteStore {
    pub fn has_lapsed_leases(&self) -> Result<bool> {
        let sql = "SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_lease
                   WHERE state = 'running' AND lease_expires_at < ?1)";
        Ok(self.conn.prepare_cached(sql)?.query_row([self.now()], |r| r.get(0))?)
    }

    pub fn leases_held(&self, worker_id: &str) -> Result<Vec<(JobId, u32)>> {
        let sql = "SELECT id, attempt FROM jobs INDEXED BY jobs_lease
                   WHERE state = 'running' AND lease_owner = ?1 ORDER BY id";
        Ok(self
            .conn
            .prepare_cached(sql)?
            .query_map([worker_id], |r| Ok((parse_id(r, 0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    pub fn hand_back(&self, worker_id: &str, jobs: &[(JobId, u32)]) -> Result<Vec<Fenced>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.write(|tx| {
            let mut undo = tx.prepare_cached(
                "UPDATE jobs SET state = 'scheduled', attempt = attempt - 1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = ?4
                 WHERE id = ?1 AND state = 'running' AND lease_owner = ?2 AND attempt = ?3
                       AND attempt > 0 AND cancel_requested_by IS NULL",
            )?;
            let capture = settings::detail_enabled(&mut { tx })?;
            jobs.iter()
                .map(|&(id, attempt)| {
                    if undo.execute(params![id.to_string(), worker_id, attempt, now])? == 1 {
                        let mut e = Entry::new(id, now, Some(JobState::Running), JobState::Scheduled, attempt - 1);
                        e.worker_id = Some(worker_id);
                        e.reason = Some(HANDED_BACK);
                        log(tx, &e)?;
                        return Ok(Fenced::Accepted(JobState::Scheduled));
                    }
                    outcome::complete(&mut { tx }, now, capture, &Completion::not_handed_back(id, worker_id, attempt))
                })
                .collect()
        })
    }
}
