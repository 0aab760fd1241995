//! Recurring schedules on SQLite: the statements under the schedule policy of `ops/schedules.rs`
//! ([`ScheduleTx`]). One writer: a tick's cursor moves and its jobs are inserted under the
//! write lock, so no second process can claim the same tick.

use rusqlite::{params, Connection, Row};

use super::{SqliteOps, SqliteStore};
use crate::error::{Error, Result};
use crate::model::{Enqueued, JobId, Millis, NewJob};
use crate::schedule::{MissedTicks, Schedule};
use crate::store::ops::schedules::row_columns;
use crate::store::ops::schedules::ScheduleTx;
use crate::store::ops::StoreTx;
use crate::store::ScheduleRow;

fn row_from(r: &Row<'_>) -> Result<ScheduleRow> {
    let labels: String = r.get(6)?;
    let missed: String = r.get(7)?;
    let last_job: Option<String> = r.get(10)?;
    let state: Option<String> = r.get(11)?;
    Ok(ScheduleRow {
        schedule: Schedule {
            name: r.get(0)?,
            cron: r.get(1)?,
            zone: r.get(2)?,
            wire_name: r.get(3)?,
            queue: r.get(4)?,
            payload: r.get(5)?,
            // As PostgreSQL reads them: another program's non-string value is kept as its JSON
            // text (it emptied every label here).
            labels: super::row::parse_labels(&labels),
            missed: MissedTicks::from_columns(&missed, r.get(8)?)?,
            unique: r.get::<_, i64>(19)? != 0,
            priority: crate::store::ops::columns::priority(r.get(21)?),
        },
        last_tick: r.get(9)?,
        last_job_id: last_job.and_then(|s| s.parse().ok()),
        last_job_state: state.and_then(|s| s.parse().ok()),
        last_fired_at: r.get(12)?,
        declared_at: r.get(13)?,
        updated_at: r.get(14)?,
        seen_at: r.get(15)?,
        paused_by: r.get(16)?,
        paused_at: r.get(17)?,
        paused_until: r.get(18)?,
        skipped_ticks: r.get(20)?,
    })
}

pub(crate) fn select_rows(c: &Connection, version: i64, name: Option<&str>) -> Result<Vec<ScheduleRow>> {
    let sql = format!(
        "SELECT {} FROM schedules s LEFT JOIN jobs j ON j.id = s.last_job_id
         WHERE ?1 IS NULL OR s.name = ?1 ORDER BY s.name",
        row_columns(version, "0")
    );
    let mut stmt = c.prepare_cached(&sql)?;
    let mut rows = stmt.query([name])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(row_from(r)?);
    }
    Ok(out)
}

impl SqliteStore {
    /// Run `f` in one transaction (a write one when `write`) as the schedule policy takes it.
    pub(crate) fn schedule_tx<T>(
        &self,
        write: bool,
        version: i64,
        mut f: impl FnMut(&mut dyn ScheduleTx) -> Result<T>,
    ) -> Result<T> {
        let now = self.now();
        let mut run = |c: &Connection| f(&mut SqliteSchedules { ops: SqliteOps { c, now }, version });
        if write {
            self.write(run)
        } else {
            self.read(&mut run)
        }
    }
}

/// SQLite's statements for the schedule policy; `now` is the store's clock (one writer).
struct SqliteSchedules<'c> {
    ops: SqliteOps<'c>,
    version: i64,
}

impl ScheduleTx for SqliteSchedules<'_> {
    fn ops(&mut self) -> &mut dyn StoreTx {
        &mut self.ops
    }

    fn lock_name(&mut self, _: &str) -> Result<()> {
        Ok(())
    }

    fn rows(&mut self, name: Option<&str>) -> Result<Vec<ScheduleRow>> {
        select_rows(self.ops.c, self.version, name)
    }

    fn touch(&mut self, names: &[String], now: Millis) -> Result<()> {
        let mut stmt = self.ops.c.prepare_cached("UPDATE schedules SET seen_at = max(seen_at, ?2) WHERE name = ?1")?;
        for n in names {
            stmt.execute(params![n, now])?;
        }
        Ok(())
    }

    fn write_definition(&mut self, d: &Schedule, now: Millis, new: bool) -> Result<()> {
        let sql = if new {
            "INSERT INTO schedules (name, cron, zone, wire_name, queue, payload, labels, missed, catch_up_max,
                                    last_tick, declared_at, updated_at, seen_at, unique_pending, priority)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?10, ?10, ?11, ?12)"
        } else {
            "UPDATE schedules SET cron = ?2, zone = ?3, wire_name = ?4, queue = ?5, payload = ?6, labels = ?7,
                    missed = ?8, catch_up_max = ?9, updated_at = ?10, seen_at = ?10, unique_pending = ?11,
                    priority = ?12
             WHERE name = ?1"
        };
        let labels = serde_json::to_string(&d.labels).map_err(Error::Encode)?;
        let (missed, max) = (d.missed.as_str(), d.missed.catch_up_max());
        self.ops.c.prepare_cached(sql)?.execute(params![
            d.name,
            d.cron,
            d.zone,
            d.wire_name,
            d.queue,
            d.payload,
            labels,
            missed,
            max,
            now,
            d.unique,
            d.priority
        ])?;
        Ok(())
    }

    fn see(&mut self, name: &str, now: Millis) -> Result<()> {
        // A later `seen_at` stays, as in `touch` and on PostgreSQL.
        self.ops
            .c
            .prepare_cached("UPDATE schedules SET seen_at = max(seen_at, ?2) WHERE name = ?1")?
            .execute(params![name, now])?;
        Ok(())
    }

    fn move_cursor(&mut self, name: &str, expected: Millis, through: Millis) -> Result<bool> {
        Ok(self
            .ops
            .c
            .prepare_cached("UPDATE schedules SET last_tick = ?3 WHERE name = ?1 AND last_tick = ?2")?
            .execute(params![name, expected, through])?
            > 0)
    }

    fn insert_jobs(&mut self, jobs: &[NewJob], now: Millis) -> Result<Vec<Enqueued>> {
        super::jobs::insert_jobs(self.ops.c, jobs, now)
    }

    fn set_last_job(&mut self, name: &str, job: JobId, now: Millis) -> Result<()> {
        self.ops
            .c
            .prepare_cached("UPDATE schedules SET last_job_id = ?2, last_fired_at = ?3 WHERE name = ?1")?
            .execute(params![name, job.to_string(), now])?;
        Ok(())
    }

    fn add_skipped(&mut self, name: &str, n: i64) -> Result<()> {
        self.ops
            .c
            .prepare_cached("UPDATE schedules SET skipped_ticks = skipped_ticks + ?2 WHERE name = ?1")?
            .execute(params![name, n])?;
        Ok(())
    }

    fn set_pause(&mut self, name: &str, pause: Option<(&str, Millis, Option<Millis>)>) -> Result<()> {
        let (by, at, until) = pause.map_or((None, None, None), |(by, at, until)| (Some(by), Some(at), until));
        self.ops
            .c
            .prepare_cached("UPDATE schedules SET paused_by = ?2, paused_at = ?3, paused_until = ?4 WHERE name = ?1")?
            .execute(params![name, by, at, until])?;
        Ok(())
    }
}
