//! The Schedules view: each recurring schedule with its cron and zone, next fire, last fire and
//! the state of the job it made, and its status (paused, orphaned, overdue; a unique one's
//! skipped ticks), from
//! `Store::schedules`, the rows `bw schedules` prints.

use super::*;

impl App {
    pub(super) fn schedules(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &self.snapshot else { return self.empty(t, area, buf, "schedules") };
        if s.schedules.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "schedules (an application declares them in code)");
        }
        let now = self.now;
        let sel = (self.vs().selected as usize).checked_sub(self.vs().offset as usize);
        let rows = s
            .schedules
            .iter()
            .skip(self.vs().offset as usize)
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
                Row::new(vec![
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
        self.table(
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
