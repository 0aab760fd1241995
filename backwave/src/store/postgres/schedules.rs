//! Recurring schedules on PostgreSQL: the statements under the policy of `ops/schedules.rs`
//! ([`ScheduleTx`]).
//! A tick is claimed by `UPDATE ... WHERE last_tick = $expected` in the transaction that inserts
//! its jobs: under READ COMMITTED a second writer waits for the first's row lock, re-reads the
//! row, finds the cursor moved and changes nothing. Declarations, pauses and resumes of one name
//! are decided one at a time (an advisory lock on the name), as with SQLite's one writer.

use super::jobs::insert_new_jobs;
use super::{PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{Enqueued, JobId, Millis, NewJob};
use crate::schedule::{MissedTicks, Schedule};
use crate::store::ops::columns::labels_from_json;
use crate::store::ops::schedules::{row_columns, ScheduleTx};
use crate::store::ops::StoreTx;
use crate::store::ScheduleRow;

fn row_from(r: &postgres::Row) -> Result<ScheduleRow> {
    let missed: String = r.try_get(7)?;
    Ok(ScheduleRow {
        schedule: Schedule {
            name: r.try_get(0)?,
            cron: r.try_get(1)?,
            zone: r.try_get(2)?,
            wire_name: r.try_get(3)?,
            queue: r.try_get(4)?,
            payload: r.try_get(5)?,
            labels: labels_from_json(r.try_get(6)?),
            missed: MissedTicks::from_columns(&missed, r.try_get(8)?)?,
            unique: r.try_get::<_, i64>(19)? != 0,
            priority: crate::store::ops::columns::priority(r.try_get(21)?),
        },
        last_tick: r.try_get(9)?,
        last_job_id: r.try_get::<_, Option<uuid::Uuid>>(10)?.map(JobId),
        last_job_state: r.try_get::<_, Option<String>>(11)?.and_then(|s| s.parse().ok()),
        last_fired_at: r.try_get(12)?,
        declared_at: r.try_get(13)?,
        updated_at: r.try_get(14)?,
        seen_at: r.try_get(15)?,
        paused_by: r.try_get(16)?,
        paused_at: r.try_get(17)?,
        paused_until: r.try_get(18)?,
        skipped_ticks: r.try_get(20)?,
    })
}

pub(crate) fn select_rows(tx: &mut Tx<'_>, version: i64, name: Option<&str>) -> Result<Vec<ScheduleRow>> {
    let columns = row_columns(version, "0::bigint");
    let sql = format!(
        "SELECT {columns} FROM schedules s LEFT JOIN jobs j ON j.id = s.last_job_id
         WHERE $1::text IS NULL OR s.name = $1 ORDER BY s.name"
    );
    tx.query(&sql, &[&name])?.iter().map(row_from).collect()
}

impl PgStore {
    /// Run `f` in one transaction (a write one when `write`) as the schedule policy takes it.
    pub(crate) fn schedule_tx<T>(
        &self,
        write: bool,
        version: i64,
        mut f: impl FnMut(&mut dyn ScheduleTx) -> Result<T>,
    ) -> Result<T> {
        let run = |tx: &mut Tx<'_>| f(&mut PgSchedules { tx, version });
        if write {
            self.write(run)
        } else {
            self.read(run)
        }
    }
}

/// PostgreSQL's statements for the schedule policy, in one transaction.
struct PgSchedules<'t, 'a> {
    tx: &'t mut Tx<'a>,
    version: i64,
}

impl ScheduleTx for PgSchedules<'_, '_> {
    fn ops(&mut self) -> &mut dyn StoreTx {
        self.tx
    }

    fn lock_name(&mut self, name: &str) -> Result<()> {
        self.tx
            .query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':schedule:' || $1))", &[&name])?;
        Ok(())
    }

    fn rows(&mut self, name: Option<&str>) -> Result<Vec<ScheduleRow>> {
        select_rows(self.tx, self.version, name)
    }

    fn touch(&mut self, names: &[String], now: Millis) -> Result<()> {
        let sql = "UPDATE schedules SET seen_at = greatest(seen_at, $2) WHERE name = ANY($1)";
        self.tx.execute(sql, &[&names, &now])?;
        Ok(())
    }

    fn write_definition(&mut self, d: &Schedule, now: Millis, new: bool) -> Result<()> {
        let sql = if new {
            "INSERT INTO schedules (name, cron, zone, wire_name, queue, payload, labels, missed, catch_up_max,
                                    last_tick, declared_at, updated_at, seen_at, unique_pending, priority)
             VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, $9, $10, $10, $10, $10, $11, $12)"
        } else {
            "UPDATE schedules SET cron = $2, zone = $3, wire_name = $4, queue = $5, payload = $6,
                    labels = $7::text::jsonb, missed = $8, catch_up_max = $9, updated_at = $10, seen_at = $10,
                    unique_pending = $11, priority = $12
             WHERE name = $1"
        };
        let labels = serde_json::to_string(&d.labels).map_err(Error::Encode)?;
        let (missed, max, unique) = (d.missed.as_str(), d.missed.catch_up_max(), i64::from(d.unique));
        let priority = i64::from(d.priority);
        let params: [&(dyn postgres::types::ToSql + Sync); 12] = [
            &d.name,
            &d.cron,
            &d.zone,
            &d.wire_name,
            &d.queue,
            &d.payload,
            &labels,
            &missed,
            &max,
            &now,
            &unique,
            &priority,
        ];
        self.tx.execute(sql, &params)?;
        Ok(())
    }

    fn see(&mut self, name: &str, now: Millis) -> Result<()> {
        self.tx.execute("UPDATE schedules SET seen_at = greatest(seen_at, $2) WHERE name = $1", &[&name, &now])?;
        Ok(())
    }

    fn move_cursor(&mut self, name: &str, expected: Millis, through: Millis) -> Result<bool> {
        let sql = "UPDATE schedules SET last_tick = $3 WHERE name = $1 AND last_tick = $2";
        Ok(self.tx.execute(sql, &[&name, &expected, &through])? > 0)
    }

    fn insert_jobs(&mut self, jobs: &[NewJob], now: Millis) -> Result<Vec<Enqueued>> {
        insert_new_jobs(self.tx, now, jobs)
    }

    fn set_last_job(&mut self, name: &str, job: JobId, now: Millis) -> Result<()> {
        let sql = "UPDATE schedules SET last_job_id = $2, last_fired_at = $3 WHERE name = $1";
        self.tx.execute(sql, &[&name, &job.0, &now])?;
        Ok(())
    }

    fn add_skipped(&mut self, name: &str, n: i64) -> Result<()> {
        self.tx.execute("UPDATE schedules SET skipped_ticks = skipped_ticks + $2 WHERE name = $1", &[&name, &n])?;
        Ok(())
    }

    fn set_pause(&mut self, name: &str, pause: Option<(&str, Millis, Option<Millis>)>) -> Result<()> {
        let (by, at, until) = pause.map_or((None, None, None), |(by, at, until)| (Some(by), Some(at), until));
        let sql = "UPDATE schedules SET paused_by = $2, paused_at = $3, paused_until = $4 WHERE name = $1";
        self.tx.execute(sql, &[&name, &by, &at, &until])?;
        Ok(())
    }
}
