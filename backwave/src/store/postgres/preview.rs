//! What a requeue would do, before doing it, on PostgreSQL: the same plan as SQLite's
//! (`store/ops/preview.rs` holds the plan's arithmetic), counted in one snapshot with one
//! grouped query. Read-only.

use std::collections::HashMap;

use uuid::Uuid;

use super::filter::where_clause;
use super::row::{job, JOB_COLUMNS};
use super::PgStore;
use crate::error::Result;
use crate::model::{Job, JobId};
use crate::store::ops::preview::{check_one, requeue_scope};
use crate::store::unique;
use crate::store::{JobFilter, RequeueCheck, RequeuePlan};

impl PgStore {
    pub fn plan_requeue(&self, filter: &JobFilter) -> Result<RequeuePlan> {
        let handlers = self.live_handlers()?;
        self.read(|tx| {
            let as_of = tx.now()?;
            let scope = requeue_scope(filter, as_of);
            let w = where_clause(&scope, 1);
            // Undecodable jobs counted within the scope: none when it leaves out Quarantined
            // jobs or names the other reason, as SQLite's separate count gives.
            let rows = tx.query(
                &format!(
                    "SELECT wire_name, count(*),
                            count(*) FILTER (WHERE state = 'quarantined' AND quarantine_reason = 'undecodable-payload')
                     FROM jobs WHERE {} GROUP BY wire_name",
                    w.sql
                ),
                &w.params(&[]),
            )?;
            let mut plan = RequeuePlan { as_of, ..Default::default() };
            for r in &rows {
                let (wire_name, count, undecodable): (String, i64, i64) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
                plan.matching += count as u64;
                if plan.add(wire_name, count as u64, &handlers) {
                    plan.undecodable += undecodable as u64;
                }
            }
            plan.sort();
            // A version-2 store opened read-only has no unique keys to conflict.
            if self.version >= 3 {
                let conflicts: i64 = tx.query_one(&unique::conflicts_sql(&w.sql), &w.params(&[]))?.get(0);
                plan.would_conflict = conflicts as u64;
            }
            Ok(plan)
        })
    }

    pub fn check_requeue(&self, ids: &[JobId]) -> Result<Vec<RequeueCheck>> {
        let handlers = self.live_handlers()?;
        let wanted: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let (found, holders): (HashMap<Uuid, Job>, HashMap<Uuid, Uuid>) = self.read(|tx| {
            let found = tx
                .query(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY($1)"), &[&wanted])?
                .iter()
                .map(|r| job(r).map(|j| (j.id.0, j)))
                .collect::<Result<_>>()?;
            if self.version < 3 {
                return Ok((found, HashMap::new()));
            }
            let holders = tx
                .query(
                    &format!(
                        "SELECT j.id, h.id FROM jobs j JOIN jobs h
                             ON h.unique_key = j.unique_key AND h.unique_window = j.unique_window
                         WHERE j.id = ANY($1) AND h.id <> j.id AND {}",
                        unique::holds("h")
                    ),
                    &[&wanted],
                )?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<_>>()?;
            Ok((found, holders))
        })?;
        Ok(ids
            .iter()
            .map(|id| check_one(found.get(&id.0).cloned(), holders.get(&id.0).map(|h| JobId(*h)), &handlers))
            .collect())
    }
}
