//! The Queues view: per queue its jobs by state, throughput, due-now and the oldest wait (with
//! pauses and full limits marked), from the counts every refresh reads. Enter lists the
//! queue's Scheduled jobs; `P` pauses or resumes the queue.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Filter, Info, Open, Query, Row, Screen, Snapshot, View};
use crate::text::{compact_duration, sanitize, thousands, width};
use crate::tui::view::{clean, compact_count, header_only, len, ms, pointer, right, Theme};
use backwave::store::PauseKind;
use backwave::{JobState, Store};

pub(super) const VIEW: Info = Info::of("Queues", "Queues", &Queues);

pub(crate) struct Queues;

impl Screen for Queues {
    /// Nothing more: the counts, latency, pauses and limits are read for the header.
    fn read(&self, _store: &Store, _q: &Query, _s: &mut Snapshot) -> backwave::Result<()> {
        Ok(())
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().map_or(0, |s| s.counts.by_queue.len() as u64)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        let s = app.snapshot.as_ref()?;
        s.counts.by_queue.keys().nth(index as usize).map(|q| Row::Queue(q.clone()))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Queue(queue) = row else { return None };
        let s = app.snapshot.as_ref()?;
        s.counts.by_queue.keys().position(|q| q == queue).map(|i| i as u64)
    }

    fn open(&self, app: &App, index: u64) -> Option<Open> {
        let Row::Queue(queue) = self.row(app, index)? else { return None };
        // The filter is set, not parsed from text: a queue named with a space or a quote
        // ("night shift") was split into a queue and a word, or refused as a bad filter.
        let shown = if queue.contains(char::is_whitespace) { format!("\"{queue}\"") } else { queue.clone() };
        Some(Open::List {
            view: View::Scheduled,
            text: format!("queue:{shown}"),
            filter: Filter { queue: Some(queue), ..Filter::default() },
            back_to: Some(View::Queues),
        })
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &app.snapshot else { return app.empty(t, area, buf, "queues") };
        if s.counts.by_queue.is_empty() {
            header_only(t, area, buf);
            return app.empty(t, area, buf, "queues");
        }
        let now = app.now;
        let biggest = s.counts.by_queue.values().map(|m| m.values().sum::<u64>()).max().unwrap_or(1).max(1);
        const BAR: usize = 20;
        let states = crate::text::states_shown(s.counts.total(JobState::Waiting) > 0);
        let sel = (app.vs().selected as usize).checked_sub(app.vs().offset as usize);
        let shown: Vec<(&String, &std::collections::BTreeMap<JobState, u64>)> =
            s.counts.by_queue.iter().skip(app.vs().offset as usize).take(area.height as usize).collect();
        // Every figure of a row as text, exact (`99,177,229`) or compact (`99.2M`): exact when
        // the columns fit the width with them, since a cut number reads as another number.
        let figures = |compact: bool| -> Vec<Vec<String>> {
            let n = |v: u64| if compact { compact_count(v) } else { thousands(v) };
            shown
                .iter()
                .map(|(queue, m)| {
                    let mut row = vec![n(m.values().sum())];
                    row.extend(states.iter().map(|st| n(m.get(st).copied().unwrap_or(0))));
                    row.push(match app.feed.throughput.get(*queue) {
                        Some(r) if compact || *r >= 100.0 => format!("{}/min", n(r.round() as u64)),
                        Some(r) => format!("{r:.1}/min"),
                        None => "—".into(),
                    });
                    let latency = s.latency.iter().find(|l| &l.queue == *queue);
                    row.push(n(latency.map_or(0, |l| l.due_now)));
                    row
                })
                .collect()
        };
        let headers: Vec<&str> = ["TOTAL"]
            .into_iter()
            .chain(states.iter().map(|st| crate::text::state_short(*st)))
            .chain(["DONE/MIN", "DUE NOW"])
            .collect();
        let widths_of = |rows: &[Vec<String>]| -> Vec<u16> {
            headers
                .iter()
                .enumerate()
                .map(|(i, h)| rows.iter().map(|r| width(&r[i])).chain([width(h)]).max().unwrap_or(0) as u16)
                .collect()
        };
        let name_width = shown.iter().map(|(q, _)| width(&sanitize(q))).max().unwrap_or(0).clamp(5, 16) as u16;
        // What the row needs besides the figures: pointer and name, the gaps, and the oldest wait.
        let fixed = |w: &[u16]| -> u16 { 2 + name_width + w.iter().sum::<u16>() + w.len() as u16 + 1 + 8 };
        let (mut compact, mut figures_now) = (false, figures(false));
        let mut widths = widths_of(&figures_now);
        if fixed(&widths) > area.width {
            compact = true;
            figures_now = figures(true);
            widths = widths_of(&figures_now);
        }
        // The bar is the first thing to go: the figures say more.
        let bar_shown = fixed(&widths) + (BAR as u16) < area.width;
        let rows = shown
            .iter()
            .zip(&figures_now)
            .enumerate()
            .map(|(i, ((queue, m), figs))| {
                let mut bar_spans = Vec::new();
                let mut used = 0;
                for st in &states {
                    let n = m.get(st).copied().unwrap_or(0);
                    let cells = if n == 0 { 0 } else { ((n as f64 / biggest as f64) * BAR as f64).ceil() as usize };
                    let cells = cells.min(BAR - used);
                    used += cells;
                    let glyph = if app.cfg.color {
                        "█"
                    } else {
                        match st {
                            JobState::Scheduled => "S",
                            JobState::Running => "R",
                            JobState::Succeeded => "=",
                            JobState::DeadLettered => "D",
                            JobState::Quarantined => "Q",
                            JobState::Cancelled => "C",
                            JobState::Waiting => "W",
                        }
                    };
                    bar_spans.push(Span::styled(glyph.repeat(cells), t.state(*st)));
                }
                // Store::queue_latency, the figures `bw stats` and `bw check` read.
                let latency = s.latency.iter().find(|l| &l.queue == *queue);
                let due_now = latency.map_or(0, |l| l.due_now);
                let waited = match latency.and_then(|l| l.oldest_due_at) {
                    Some(due) if due_now > 0 => compact_duration(ms(now - due)),
                    _ => "—".to_string(),
                };
                // Due jobs a pause holds are not waiting for a worker: they are counted apart, so
                // a paused queue reads "PAUSED 312 held" instead of a latency nobody can fix.
                let held = latency.map_or(0, |l| l.held_by_pause);
                let held = if held > 0 {
                    format!(" {} held", if compact { compact_count(held) } else { thousands(held) })
                } else {
                    String::new()
                };
                // Its expiry is in the header: the row only has room for the mark.
                // A queue whose own limit is full waits on it, not on a worker: marked like a pause.
                let limit_full =
                    s.limits.iter().any(|l| l.kind == PauseKind::Queue && l.name == **queue && l.budget == 0);
                let waited = match app.paused_until(PauseKind::Queue, queue) {
                    Some(_) => Line::from(vec![Span::styled("PAUSED", t.error()), Span::raw(held)]),
                    None if limit_full => {
                        Line::from(vec![Span::styled("LIMIT ", t.fg(Color::Yellow)), Span::raw(waited)])
                    }
                    None => Line::from(format!("{waited}{held}")),
                };
                let mut cells =
                    vec![Cell::from(format!("{} {}", pointer(sel == Some(i)), clean(queue, name_width as usize)))];
                cells.push(right(&figs[0], widths[0]));
                if bar_shown {
                    cells.push(Cell::from(Line::from(bar_spans)));
                }
                for (k, st) in states.iter().enumerate() {
                    cells.push(right(&figs[1 + k], widths[1 + k]).style(if m.get(st).copied().unwrap_or(0) > 0 {
                        t.state(*st)
                    } else {
                        t.dim()
                    }));
                }
                let last = states.len() + 1;
                cells.push(right(&figs[last], widths[last]));
                cells.push(right(&figs[last + 1], widths[last + 1]));
                cells.push(Cell::from(waited));
                TableRow::new(cells)
            })
            .collect();
        let mut header: Vec<String> = vec![format!("  {:<w$}", "QUEUE", w = name_width as usize)];
        let mut constraints = vec![len(2 + name_width)];
        header.push(format!("{:>w$}", "TOTAL", w = widths[0] as usize));
        constraints.push(len(widths[0]));
        if bar_shown {
            header.push("BY STATE".into());
            constraints.push(len(BAR as u16));
        }
        for (k, h) in headers.iter().enumerate().skip(1) {
            header.push(format!("{:>w$}", h, w = widths[k] as usize));
            constraints.push(len(widths[k]));
        }
        header.push(if area.width >= 100 { "OLDEST WAITED".into() } else { "WAITED".into() });
        constraints.push(Constraint::Fill(1));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        app.table(t, area, buf, (&header, &constraints), rows, sel);
    }
}
