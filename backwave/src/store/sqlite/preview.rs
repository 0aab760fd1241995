//! What a requeue would do, before doing it, on SQLite (the plan's types and arithmetic are
//! `ops/preview.rs`'s): the one plan that `bw requeue --dry-run` prints and
//! the dashboard shows in its confirmation, by filter
//! ([`Store::plan_requeue`](crate::Store::plan_requeue)) or by id
//! ([`Store::check_requeue`](crate::Store::check_requeue)). Requeueing a job whose wire name no
//! live worker handles only quarantines it again, so the plan counts those apart and
//! [`Store::requeue_planned`](crate::Store::requeue_planned) leaves them alone unless `force`:
//! the CLI and the dashboard pass that choice explicitly, and no other bulk-requeue path exists.
//! Read-only except that last call.

use rusqlite::OptionalExtension;

use super::SqliteStore;
use crate::error::Result;
use crate::model::{JobId, JobState, QuarantineReason};
use crate::store::ops::preview::{check_one, requeue_scope, undecodable_in_scope};
use crate::store::JobFilter;
use crate::store::{unique, RequeueCheck, RequeuePlan};

impl SqliteStore {
    pub fn plan_requeue(&self, filter: &JobFilter) -> Result<RequeuePlan> {
        let as_of = self.now();
        let scope = requeue_scope(filter, as_of);
        let handlers = self.live_handlers()?;
        self.read(|_| {
            let matching = self.count_jobs(&scope)?;
            let mut plan = RequeuePlan { matching, as_of, ..Default::default() };
            for wire_name in self.requeueable_wire_names(&scope)? {
                let mut f = scope.clone();
                f.wire_name = Some(wire_name.clone());
                let count = self.count_jobs(&f)?;
                plan.add(wire_name, count, &handlers);
            }
            plan.sort();
            if self.version >= 3 {
                let (clause, args) = scope.where_clause();
                plan.would_conflict = self
                    .conn
                    .prepare_cached(&unique::conflicts_sql(&clause))?
                    .query_row(rusqlite::params_from_iter(args), |r| r.get::<_, i64>(0))?
                    as u64;
            }
            if undecodable_in_scope(&scope) {
                for w in &plan.handled {
                    plan.undecodable += self.count_jobs(&JobFilter {
                        states: vec![JobState::Quarantined],
                        wire_name: Some(w.wire_name.clone()),
                        quarantine_reason: Some(QuarantineReason::UndecodablePayload),
                        ..scope.clone()
                    })?;
                }
            }
            Ok(plan)
        })
    }

    pub fn check_requeue(&self, ids: &[JobId]) -> Result<Vec<RequeueCheck>> {
        let handlers = self.live_handlers()?;
        let holder_sql = unique::holder_of_sql("?1");
        self.read(|c| {
            ids.iter()
                .map(|id| {
                    let holder = if self.version >= 3 {
                        c.prepare_cached(&holder_sql)?
                            .query_row([id.to_string()], |r| super::row::parse_id(r, 0))
                            .optional()?
                    } else {
                        None
                    };
                    Ok(check_one(self.job(*id)?, holder, &handlers))
                })
                .collect()
        })
    }

    /// Distinct wire names among the scope's jobs, read from the per-state partial indexes
    /// (each covers `wire_name`), so this stays fast on millions of terminal jobs.
    fn requeueable_wire_names(&self, scope: &JobFilter) -> Result<Vec<String>> {
        if let Some(w) = &scope.wire_name {
            return Ok(vec![w.clone()]);
        }
        let mut names = std::collections::BTreeSet::new();
        for state in &scope.states {
            let sql = match state {
                JobState::DeadLettered => "SELECT DISTINCT wire_name FROM jobs WHERE state = 'dead-lettered'",
                JobState::Quarantined => "SELECT DISTINCT wire_name FROM jobs WHERE state = 'quarantined'",
                _ => continue,
            };
            let mut stmt = self.conn.prepare_cached(sql)?;
            for name in stmt.query_map([], |r| r.get::<_, String>(0))? {
                names.insert(name?);
            }
        }
        Ok(names.into_iter().collect())
    }
}
