//! The Schedules view: each recurring schedule with its cron and zone, next fire, last fire and
//! the state of the job it made, and its status (paused, orphaned, overdue; a unique one's
//! skipped ticks), from `Store::schedules`, the rows `bw schedules` prints. Enter opens the job
//! the schedule made last; `P` and `t` pause, resume or trigger the schedule.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Info, Open, Query, Row, Screen, Snapshot};
use crate::text::{compact_duration, relative};
use crate::tui::view::{clean, header_only, len, pointer, short_id, Theme};
use backwave::Store;

pub(super) const VIEW: Info = Info::of("Schedules", "Cron", &Schedules);

pub(crate) struct Schedules;

impl Screen for Schedules {
    fn read(&self, store: &Store, _q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        s.schedules = store.schedules()?;
        Ok(())
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().map_or(0, |s| s.schedules.len() as u64)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        let s = app.snapshot.as_ref()?;
        s.schedules.get(index as usize).map(|i| Row::Schedule(i.row.schedule.name.clone()))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Schedule(name) = row else { return None };
        let s = app.snapshot.as_ref()?;
        s.schedules.iter().position(|i| i.row.schedule.name == *name).map(|i| i as u64)
    }

    /// The job the schedule made last, if it is still there.
    fn open(&self, app: &App, index: u64) -> Option<Open> {
        let s = app.snapshot.as_ref()?;
        s.schedules.get(index as usize).and_then(|i| i.row.last_job_id).map(Open::Detail)
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &app.snapshot else { return app.empty(t, area, buf, "schedules") };
        if s.schedules.is_empty() {
            header_only(t, area, buf);
            return app.empty(t, area, buf, "schedules (an application declares them in code)");
        }
        let now = app.now;
        let sel = (app.vs().selected as usize).checked_sub(app.vs().offset as usize);
        let rows = s
            .schedules
            .iter()
            .skip(app.vs().offset as usize)
            .enumerate()
            .map(|(i, info)| {
                let r = &info.row;
                let last_job = match (r.last_job_id, r.last_job_state) {
                    (Some(id), Some(state)) => Line::from(vec![
                        Span::raw(format!("{} ", short_id(&id))),
                        Span::styled(state.to_string(), t.state(state)),
                    ]),
                    (Some(id), None) => Line::from(format!("{} swept", short_id(&id))),
                    _ => Line::from("—"),
                };
                let mut status = Vec::new();
                if info.paused {
                    status.push(match r.paused_until {
                        Some(u) => format!("PAUSED, ends {}", relative(now, u)),
                        None => "PAUSED".to_string(),
                    });
                }
                if info.orphaned {
                    status.push("orphaned".to_string());
                }
                if let Some(d) = info.overdue {
                    status.push(format!("overdue {}", compact_duration(d)));
                }
                // A unique schedule's skipped ticks, as `bw schedules` tells them: a fact, not a fault.
                let skipped = (r.skipped_ticks > 0).then(|| {
                    format!("{} tick{} skipped", r.skipped_ticks, if r.skipped_ticks == 1 { "" } else { "s" })
                });
                let status = match (status.is_empty(), skipped) {
                    (true, None) => Line::styled("ok", t.dim()),
                    (true, Some(skipped)) => Line::styled(skipped, t.dim()),
                    (false, None) => Line::styled(status.join(", "), t.error()),
                    (false, Some(skipped)) => Line::from(vec![
                        Span::styled(status.join(", "), t.error()),
                        Span::styled(format!(", {skipped}"), t.dim()),
                    ]),
                };
                TableRow::new(vec![
                    Cell::from(format!("{}{}", pointer(sel == Some(i)), clean(&r.schedule.name, 19))),
                    Cell::from(clean(&r.schedule.cron, 16)),
                    Cell::from(clean(&r.schedule.zone, 14)),
                    Cell::from(info.next_fire.map_or_else(|| "—".to_string(), |n| relative(now, n))),
                    Cell::from(r.last_fired_at.map_or_else(|| "never".to_string(), |at| relative(now, at))),
                    Cell::from(last_job),
                    Cell::from(status),
                ])
            })
            .collect();
        app.table(
            t,
            area,
            buf,
            (
                &[" SCHEDULE", "CRON", "ZONE", "NEXT", "LAST FIRE", "LAST JOB", "STATUS"],
                &[len(20), len(16), len(14), len(9), len(9), len(26), Constraint::Fill(1)],
            ),
            rows,
            sel,
        );
    }
}
