//! The Log view: the newest transitions of every job, newest first, from the live feed (see
//! `tui::feed`), filtered in the app; the wire names of the rows on screen are read by key as
//! they come on screen. Enter opens the entry's job.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Filter, Info, Open, Query, Row, Screen, Snapshot};
use crate::text::rfc3339;
use crate::tui::data::PURGED;
use crate::tui::view::{clean, fill_width, header_only, len, short_id, Theme};
use backwave::{JobId, Store};

pub(super) const VIEW: Info = Info::of("Log", "Log", &Log);

pub(crate) struct Log;

impl Screen for Log {
    fn read(&self, store: &Store, q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        // The log holds job ids only: the wire names of the rows on screen, and of the newest
        // entries (about to be on screen), in one read (`bw log tail` reads them the same way).
        let newest = s.log.iter().rev().take(q.limit).map(|t| t.job_id);
        let mut wanted: Vec<JobId> =
            q.wire_names.iter().copied().chain(newest).filter(|id| !s.wire_names.contains_key(id)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut found = store.wire_names_of(&wanted)?;
        for id in wanted {
            s.wire_names.insert(id, found.remove(&id).unwrap_or_else(|| PURGED.to_string()));
        }
        Ok(())
    }

    /// Jobs of the rows on screen whose wire name is not known yet.
    fn ask(&self, app: &App, q: &mut Query) {
        let mut ids: Vec<JobId> = app
            .log_rows()
            .iter()
            .skip(app.vs().offset as usize)
            .take(app.page_rows())
            .map(|t| t.job_id)
            .filter(|id| !app.feed.wire_names.contains_key(id))
            .collect();
        ids.sort();
        ids.dedup();
        q.wire_names = ids;
    }

    fn len(&self, app: &App) -> u64 {
        app.log_rows().len() as u64
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        app.log_rows().get(index as usize).map(|t| Row::Entry { seq: t.seq, job: t.job_id })
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Entry { seq, .. } = row else { return None };
        app.log_rows().iter().position(|t| t.seq == *seq).map(|i| i as u64)
    }

    /// New entries arrive at the top: the selection follows its entry once the operator has
    /// moved (Enter opened whichever job had scrolled under it), whatever the last refresh was
    /// for.
    fn pin(&self, app: &App, _same_list: bool) -> Option<Row> {
        self.row(app, app.vs().selected)
    }

    fn open(&self, app: &App, index: u64) -> Option<Open> {
        match self.row(app, index)? {
            Row::Entry { job, .. } => Some(Open::Detail(job)),
            _ => None,
        }
    }

    fn check_filter(&self, filter: &Filter) -> Result<(), String> {
        filter.check_log()
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let rows = app.log_rows();
        if rows.is_empty() {
            header_only(t, area, buf);
            return app.empty(t, area, buf, "log entries");
        }
        let offset = app.vs().offset as usize;
        // Every time carries its date: a tail spans midnight, and today's 11:10 followed
        // yesterday's 11:59 with nothing to tell them apart. Below 120 columns the FROM and
        // WORKER / ACTOR columns go (the job's history has them) so the wire name and the
        // reason keep their room.
        let wide = area.width >= 120;
        let widths: Vec<Constraint> = if wide {
            vec![len(18), len(8), len(18), len(13), len(15), len(3), len(19), Constraint::Fill(1)]
        } else {
            vec![len(14), len(8), len(14), len(15), len(3), Constraint::Fill(1)]
        };
        let fill = fill_width(area, &widths);
        let visible = rows
            .iter()
            .skip(offset)
            .take(area.height as usize)
            .map(|e| {
                let to_style = t.state(e.to);
                let who = match (&e.actor, &e.worker_id) {
                    (Some(a), _) => format!("by {}", clean(a, 16)),
                    (None, Some(w)) => clean(w, 19),
                    _ => String::new(),
                };
                let when = rfc3339(e.at);
                let when = if wide { when.get(5..23) } else { when.get(5..19) }.unwrap_or(&when).replacen('T', " ", 1);
                let wire = match app.feed.wire_names.get(&e.job_id) {
                    Some(w) => Cell::from(clean(w, if wide { 18 } else { 14 })),
                    None => Cell::from("…").style(t.dim()),
                };
                let mut cells = vec![Cell::from(when), Cell::from(short_id(&e.job_id)), wire];
                if wide {
                    cells.push(Cell::from(e.from.map(|s| s.title()).unwrap_or("(new)")));
                }
                cells.push(Cell::from(format!("→ {}", e.to.title())).style(to_style));
                cells.push(Cell::from(format!("{:>3}", e.attempt)));
                let reason = clean(e.reason.as_deref().unwrap_or(""), fill);
                if wide {
                    cells.push(Cell::from(who));
                    cells.push(Cell::from(reason));
                } else if reason.is_empty() {
                    cells.push(Cell::from(clean(&who, fill)).style(t.dim()));
                } else {
                    cells.push(Cell::from(reason));
                }
                TableRow::new(cells)
            })
            .collect();
        let sel = (app.vs().selected as usize).checked_sub(offset);
        let header: &[&str] = if wide {
            &["TIME (UTC)", "JOB", "WIRE NAME", "FROM", "TO", "ATT", "WORKER / ACTOR", "REASON"]
        } else {
            &["TIME (UTC)", "JOB", "WIRE NAME", "TO", "ATT", "REASON (or who)"]
        };
        app.table(t, area, buf, (header, &widths), visible, sel);
    }
}
