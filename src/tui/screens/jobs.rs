//! The job lists of the Dead-Lettered, Quarantined, Running and Scheduled views: a page of one
//! state's jobs from the store (offset, filter), columns per state, marks, and Enter opening the
//! job.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Open, Query, Row, Screen, Snapshot, View};
use crate::text::{attempts, compact_duration, relative};
use crate::tui::data::NAMES_EVERY_MS;
use crate::tui::view::{clean, due, fill_width, header_only, len, live_handlers, short_id, Theme};
use backwave::{Job, Store};

pub(crate) struct Jobs;

impl Screen for Jobs {
    fn read(&self, store: &Store, q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        if let Some(filter) = &q.filter {
            let page = store.list_jobs(filter, q.limit.max(1), q.offset)?;
            if page.total == 0 && q.check_names {
                // Only an empty list pays for the known names (a scan of the wire names).
                s.unknown_names = crate::text::unknown_filter_names(store, filter)?;
                s.names_checked = Some((filter.clone(), s.at));
            }
            s.page = Some(page);
        }
        if q.view == View::Quarantined {
            // The LIVE HANDLER column: a job nobody handles would quarantine again.
            s.live_handlers = store.live_handlers()?;
        }
        Ok(())
    }

    fn ask(&self, app: &App, q: &mut Query) {
        let checked = app.snapshot.as_ref().and_then(|s| s.names_checked.as_ref());
        q.check_names = match (&q.filter, checked) {
            (Some(filter), Some((was, at))) => filter != was || app.now - at >= NAMES_EVERY_MS,
            _ => true,
        };
    }

    fn carry(&self, prev: &Snapshot, next: &mut Snapshot) {
        // Names not checked this time: what the last check of the same filter said holds.
        let same = |(was, _): &(backwave::store::JobFilter, backwave::Millis)| {
            next.query.as_ref().is_some_and(|q| q.filter.as_ref() == Some(was))
        };
        if next.names_checked.is_none() && prev.names_checked.as_ref().is_some_and(same) {
            next.names_checked = prev.names_checked.clone();
            next.unknown_names = prev.unknown_names.clone();
        }
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().and_then(|s| s.page.as_ref()).map_or(0, |p| p.total)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        let s = app.snapshot_for_view()?;
        let i = index.checked_sub(s.page_offset)?;
        app.page_jobs().get(i as usize).map(|j| Row::Job(j.id))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Job(id) = row else { return None };
        let s = app.snapshot_for_view()?;
        let i = app.page_jobs().iter().position(|j| j.id == *id)?;
        Some(s.page_offset + i as u64)
    }

    /// Once the operator has moved off the top row, the selection follows the job, not the
    /// row: new failures arrive at the top of a newest-first list, and a positional selection
    /// slid onto another job between two key presses (Enter or r then acted on a job the
    /// operator never chose). On the top row it stays there, watching the newest.
    fn pin(&self, app: &App, same_list: bool) -> Option<Row> {
        same_list.then(|| self.row(app, app.vs().selected)).flatten()
    }

    fn open(&self, app: &App, index: u64) -> Option<Open> {
        match self.row(app, index)? {
            Row::Job(id) => Some(Open::Detail(id)),
            _ => None,
        }
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let jobs = app.page_jobs();
        let what = format!("{} jobs", app.nav.view.title());
        if jobs.is_empty() {
            header_only(t, area, buf);
            app.empty(t, area, buf, &what);
            return;
        }
        let now = app.now;
        let live = app.snapshot.as_ref().map(|s| &s.live_handlers);
        let sel = app.selected_on_screen();
        // A marked row is bold and its mark a plain `*` without colour: a `●` told apart from
        // the selection by its colour alone disappeared under NO_COLOR.
        let mark_glyph = if app.cfg.color { "●" } else { "*" };
        let mark = |i: usize, j: &Job| {
            let pointer = if Some(i) == sel { "▶" } else { " " };
            let marked = if app.nav.marks.contains_key(&j.id) { mark_glyph } else { " " };
            format!("{pointer}{marked}")
        };
        // Below 120 columns the fixed columns narrow (and their headings shorten) so that the
        // cause keeps room to be read: at 80 it had 18 cells.
        let narrow = area.width < 120;
        let (wire_w, queue_w, att_w) = if narrow { (14, 8, 5) } else { (18, 10, 8) };
        let att_h = if narrow { "ATT" } else { "ATTEMPTS" };
        let dl_widths = vec![len(2), len(8), len(wire_w), len(queue_w), len(att_w), len(10), Constraint::Fill(1)];
        let dl_fill = fill_width(area, &dl_widths);
        let (live_w, live_h) = if narrow { (9, "LIVE") } else { (12, "LIVE HANDLER") };
        let q_widths = vec![len(2), len(8), len(wire_w), len(19), len(live_w), len(10), Constraint::Fill(1)];
        let q_fill = fill_width(area, &q_widths);
        // Every list starts with the pointer and mark, the short id and the wire name.
        let rows = |rest: &dyn Fn(&Job) -> Vec<Cell<'static>>| -> Vec<TableRow> {
            jobs.iter()
                .enumerate()
                .map(|(i, j)| {
                    let mut row = vec![
                        Cell::from(mark(i, j)),
                        Cell::from(short_id(&j.id)),
                        Cell::from(clean(&j.wire_name, wire_w as usize)),
                    ];
                    row.extend(rest(j));
                    let row = TableRow::new(row);
                    if app.nav.marks.contains_key(&j.id) {
                        row.style(Style::default().add_modifier(Modifier::BOLD))
                    } else {
                        row
                    }
                })
                .collect()
        };
        let finished = |j: &Job| Cell::from(j.finished_at.map(|f| relative(now, f)).unwrap_or_default());
        let cause = |j: &Job, fill: usize| Cell::from(clean(j.terminal_cause.as_deref().unwrap_or(""), fill));
        let (header, widths, rows): (Vec<&str>, Vec<Constraint>, Vec<TableRow>) = match app.nav.view {
            View::DeadLettered => (
                vec!["", "ID", "WIRE NAME", "QUEUE", att_h, "FINISHED", "CAUSE"],
                dl_widths.clone(),
                rows(&|j| {
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(attempts(j)),
                        finished(j),
                        cause(j, dl_fill),
                    ]
                }),
            ),
            View::Quarantined => (
                vec!["", "ID", "WIRE NAME", "REASON", live_h, "SINCE", "CAUSE"],
                q_widths.clone(),
                rows(&|j| {
                    let n = live.and_then(|l| l.get(&j.wire_name)).copied().unwrap_or(0);
                    vec![
                        Cell::from(j.quarantine_reason.map(|r| r.as_str()).unwrap_or("")),
                        live_handlers(t, n),
                        finished(j),
                        cause(j, q_fill),
                    ]
                }),
            ),
            View::Running => (
                vec!["", "ID", "WIRE NAME", "QUEUE", att_h, "LEASE LEFT", "WORKER", "NOTE"],
                vec![
                    len(2),
                    len(8),
                    len(wire_w),
                    len(queue_w),
                    len(att_w),
                    len(10),
                    len(if narrow { 16 } else { 20 }),
                    Constraint::Fill(1),
                ],
                rows(&|j| {
                    let left = j.lease_expires_at.map(|e| e - now).unwrap_or(0);
                    let lease = if left > 0 {
                        compact_duration(std::time::Duration::from_millis(left as u64))
                    } else {
                        "lapsed".to_string()
                    };
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(attempts(j)),
                        Cell::from(lease).style(if left > 0 { Style::default() } else { t.error() }),
                        Cell::from(clean(j.lease_owner.as_deref().unwrap_or(""), if narrow { 16 } else { 20 })),
                        // An operator's cancel first; else what the handler last reported.
                        Cell::from(match (&j.cancel_requested_by, &j.progress) {
                            (Some(a), _) => format!("cancel asked by {}", clean(a, 20)),
                            (None, Some(p)) => clean(&p.to_string(), 60),
                            (None, None) => String::new(),
                        }),
                    ]
                }),
            ),
            _ => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "DUE", att_h, "BUDGET LEFT", "CREATED"],
                vec![len(2), len(8), len(wire_w), len(queue_w), len(9), len(att_w), len(11), Constraint::Fill(1)],
                rows(&|j| {
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(due(now, j.due_at)),
                        Cell::from(match j.attempt {
                            0 if narrow => "—".to_string(),
                            0 => "none yet".to_string(),
                            _ => attempts(j),
                        }),
                        Cell::from(match j.budget_left() {
                            Some(n) => format!("{n} more"),
                            None => "fresh".to_string(),
                        }),
                        Cell::from(relative(now, j.created_at)),
                    ]
                }),
            ),
        };
        app.table(t, area, buf, (&header, &widths), rows, sel);
    }
}
