//! Store reads the engine needs and nothing else does (owned by the engine). Reads only: every
//! state change still goes through the fenced operations in `jobs.rs`.

use super::Store;
use crate::error::Result;

impl Store {
    /// Whether any Running job's lease has lapsed, by the `jobs_lease` index and without the
    /// write lock, so that idle workers polling many times a second do not queue behind each
    /// other just to find nothing to reap.
    pub fn has_lapsed_leases(&self) -> Result<bool> {
        let sql = "SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_lease
                   WHERE state = 'running' AND lease_expires_at < ?1)";
        Ok(self.conn.prepare_cached(sql)?.query_row([self.now()], |r| r.get(0))?)
    }
}
