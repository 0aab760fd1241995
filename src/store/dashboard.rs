//! Reads that only the `bw top` dashboard needs, each answered from an index in a few
//! milliseconds at millions of jobs (it asks every second). Read-only; owned by the dashboard.

use std::collections::BTreeMap;

use super::Store;
use crate::error::Result;
use crate::model::Millis;

impl Store {
    /// For each queue with Scheduled jobs, the earliest `due_at` among them: how long the
    /// oldest due job has waited (or when the next one is due). One pass over the claim index
    /// (`jobs_claim`, covering), never over the job rows: named with INDEXED BY because the
    /// planner otherwise prefers `jobs_active` and reads every Scheduled row (60 ms a queue).
    pub fn oldest_due_per_queue(&self) -> Result<BTreeMap<String, Millis>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT queue, min(due_at) FROM jobs INDEXED BY jobs_claim WHERE state = 'scheduled' GROUP BY queue",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Millis>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
