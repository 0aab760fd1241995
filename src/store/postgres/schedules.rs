//! Recurring schedules on PostgreSQL: the primitives under the policy of `store/schedules.rs`.
//! A tick is claimed by `UPDATE ... WHERE last_tick = $expected` in the transaction that inserts
//! its jobs: under READ COMMITTED a second writer waits for the first's row lock, re-reads the
//! row, finds the cursor moved and changes nothing. Declarations, pauses and resumes of one name
//! are decided one at a time (an advisory lock on the name), as with SQLite's one writer.

use super::admin::{audit, require};
use super::jobs::insert_new_jobs;
use super::{PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{Enqueued, JobId, Millis, NewJob, Permission};
use crate::schedule::{check_schedule_name, MissedTicks, Schedule};
use crate::store::pause::check_until;
use crate::store::row::labels_from_json;
use crate::store::schedules::{
    check_payloads, declare_detail, differences, last_created, no_schedules_table, pause_detail, row_columns, skipped,
    trigger_job, unknown_schedule, validate_all,
};
use crate::store::{Declared, SchedulePauseResult, ScheduleResumeResult, ScheduleRow, Trigger};

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

fn lock_name(tx: &mut Tx<'_>, name: &str) -> Result<()> {
    tx.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':schedule:' || $1))", &[&name])?;
    Ok(())
}

fn labels_text(d: &Schedule) -> Result<String> {
    serde_json::to_string(&d.labels).map_err(Error::Encode)
}

impl PgStore {
    fn require_schedules(&self) -> Result<()> {
        if self.version < 7 {
            return Err(no_schedules_table(self.version));
        }
        Ok(())
    }

    pub fn schedule_rows(&self) -> Result<Vec<ScheduleRow>> {
        if self.version < 7 {
            return Ok(Vec::new());
        }
        self.read(|tx| select_rows(tx, self.version, None))
    }

    pub fn schedule_row(&self, name: &str) -> Result<Option<ScheduleRow>> {
        if self.version < 7 {
            return Ok(None);
        }
        self.read(|tx| Ok(select_rows(tx, self.version, Some(name))?.pop()))
    }

    pub fn declare_schedules(&self, actor: &str, defs: &[Schedule]) -> Result<Vec<Declared>> {
        validate_all(defs)?;
        self.require_schedules()?;
        let labels = defs.iter().map(labels_text).collect::<Result<Vec<String>>>()?;
        let now = self.now();
        self.write(|tx| {
            check_payloads(defs, super::admin::payload_limit(tx)?)?;
            let mut out = Vec::with_capacity(defs.len());
            for (d, labels) in defs.iter().zip(&labels) {
                lock_name(tx, &d.name)?;
                let max = d.missed.catch_up_max();
                let unique = i64::from(d.unique);
                let params: [&(dyn postgres::types::ToSql + Sync); 11] = [
                    &d.name,
                    &d.cron,
                    &d.zone,
                    &d.wire_name,
                    &d.queue,
                    &d.payload,
                    labels,
                    &d.missed.as_str(),
                    &max,
                    &now,
                    &unique,
                ];
                let result = match select_rows(tx, self.version, Some(&d.name))?.pop() {
                    None => {
                        tx.execute(
                            "INSERT INTO schedules (name, cron, zone, wire_name, queue, payload, labels, missed,
                                                    catch_up_max, last_tick, declared_at, updated_at, seen_at,
                                                    unique_pending)
                             VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, $9, $10, $10, $10, $10, $11)",
                            &params,
                        )?;
                        audit(tx, now, actor, "schedule-declare", None, &declare_detail(d))?;
                        Declared::New
                    }
                    Some(row) => {
                        let changes = differences(&row.schedule, d);
                        if changes.is_empty() {
                            tx.execute(
                                "UPDATE schedules SET seen_at = greatest(seen_at, $2) WHERE name = $1",
                                &[&d.name, &now],
                            )?;
                            Declared::Unchanged
                        } else {
                            tx.execute(
                                "UPDATE schedules SET cron = $2, zone = $3, wire_name = $4, queue = $5, payload = $6,
                                        labels = $7::text::jsonb, missed = $8, catch_up_max = $9, updated_at = $10,
                                        seen_at = $10, unique_pending = $11
                                 WHERE name = $1",
                                &params,
                            )?;
                            let detail = format!("{}: {}", d.name, changes.join("; "));
                            audit(tx, now, actor, "schedule-update", None, &detail)?;
                            Declared::Updated { changes }
                        }
                    }
                };
                out.push(result);
            }
            Ok(out)
        })
    }

    pub fn touch_schedules(&self, names: &[String]) -> Result<()> {
        self.require_schedules()?;
        let now = self.now();
        self.write(|tx| {
            tx.execute("UPDATE schedules SET seen_at = greatest(seen_at, $2) WHERE name = ANY($1)", &[&names, &now])?;
            Ok(())
        })
    }

    pub fn claim_ticks(
        &self,
        name: &str,
        expected_last: Millis,
        through: Millis,
        jobs: &[NewJob],
    ) -> Result<Option<Vec<Enqueued>>> {
        crate::store::jobs::validate_new_jobs(jobs)?;
        self.require_schedules()?;
        self.write(|tx| {
            let now = tx.now()?;
            let moved = tx.execute(
                "UPDATE schedules SET last_tick = $3 WHERE name = $1 AND last_tick = $2",
                &[&name, &expected_last, &through],
            )?;
            if moved == 0 {
                return Ok(None);
            }
            // A tick's job that is the duplicate of a unique job answers with the holder's id.
            let made = insert_new_jobs(tx, now, jobs)?;
            if let Some(last) = last_created(&made) {
                tx.execute(
                    "UPDATE schedules SET last_job_id = $2, last_fired_at = $3 WHERE name = $1",
                    &[&name, &last.0, &now],
                )?;
            }
            let skipped = skipped(&made);
            if skipped > 0 {
                tx.execute(
                    "UPDATE schedules SET skipped_ticks = skipped_ticks + $2 WHERE name = $1",
                    &[&name, &skipped],
                )?;
            }
            Ok(Some(made))
        })
    }

    pub fn pause_schedule(&self, actor: &str, name: &str, until: Option<Millis>) -> Result<SchedulePauseResult> {
        check_schedule_name(name)?;
        self.require_schedules()?;
        self.write(|tx| {
            let now = tx.now()?;
            check_until(until, now)?;
            require(tx, actor, Permission::Operate)?;
            lock_name(tx, name)?;
            let row = select_rows(tx, self.version, Some(name))?.pop().ok_or_else(|| unknown_schedule(name))?;
            tx.execute(
                "UPDATE schedules SET paused_by = $2, paused_at = $3, paused_until = $4 WHERE name = $1",
                &[&name, &actor, &now, &until],
            )?;
            audit(tx, now, actor, "schedule-pause", None, &pause_detail(name, until))?;
            Ok(if row.is_paused(now) {
                SchedulePauseResult::Extended { previous_until: row.paused_until }
            } else {
                SchedulePauseResult::Paused
            })
        })
    }

    pub fn resume_schedule(&self, actor: &str, name: &str) -> Result<ScheduleResumeResult> {
        check_schedule_name(name)?;
        self.require_schedules()?;
        self.write(|tx| {
            let now = tx.now()?;
            require(tx, actor, Permission::Operate)?;
            lock_name(tx, name)?;
            let row = select_rows(tx, self.version, Some(name))?.pop().ok_or_else(|| unknown_schedule(name))?;
            tx.execute(
                "UPDATE schedules SET paused_by = NULL, paused_at = NULL, paused_until = NULL WHERE name = $1",
                &[&name],
            )?;
            if !row.is_paused(now) {
                return Ok(ScheduleResumeResult::NotPaused);
            }
            audit(tx, now, actor, "schedule-resume", None, &format!("schedule {name}"))?;
            Ok(ScheduleResumeResult::Resumed)
        })
    }

    pub fn trigger_schedule(&self, actor: &str, name: &str) -> Result<Trigger> {
        check_schedule_name(name)?;
        self.require_schedules()?;
        self.write(|tx| {
            let now = tx.now()?;
            require(tx, actor, Permission::Operate)?;
            let row = select_rows(tx, self.version, Some(name))?.pop().ok_or_else(|| unknown_schedule(name))?;
            let job = [trigger_job(&row.schedule, actor)];
            let id = insert_new_jobs(tx, now, &job)?[0].id();
            tx.execute(
                "UPDATE schedules SET last_job_id = $2, last_fired_at = $3 WHERE name = $1",
                &[&name, &id.0, &now],
            )?;
            audit(tx, now, actor, "schedule-trigger", Some(id), &format!("schedule {name}"))?;
            Ok(Trigger { schedule: name.to_string(), job: id })
        })
    }
}
