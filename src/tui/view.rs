//! Drawing: `impl Widget for &App`. It only reads the app; every string that came from the
//! database passes through `text::sanitize` here, at the last moment, so no stored byte
//! can move the cursor or restyle the screen.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Widget, Wrap};

use super::app::{App, DbStatus, Mode, Reveal};
use super::data::{Op, View, CHART_MINUTES};
use super::keymap;
use crate::text::Tone;
use crate::text::{
    attempts, clock_time, compact_duration, relative, rfc3339, sanitize, sanitize_bytes, sanitize_multiline, thousands,
    truncate,
};
use crate::{DetailStatus, Job, JobState, Millis};

/// The smallest terminal the dashboard draws in; below it, a message says so.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
/// Rows above the body: title, counts, two chart rows, tabs.
const HEADER_ROWS: u16 = 5;

/// Rows the job list has at terminal height `height` (the app pages the store by this).
pub fn list_rows(height: u16, filter_line: bool) -> usize {
    height.saturating_sub(HEADER_ROWS + 1 + 1 + filter_line as u16) as usize
}

/// Colours, or none (NO_COLOR, --no-color): then selection and emphasis use reverse and bold.
struct Theme {
    color: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    fn state(&self, s: JobState) -> Style {
        self.fg(state_color(s))
    }

    fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    fn error(&self) -> Style {
        if self.color {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }

    fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    fn heading(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
}

/// A state's colour on screen: [`crate::text::state_tone`], the table `bw` paints from too.
pub fn state_color(s: JobState) -> Color {
    match crate::text::state_tone(s) {
        Tone::Plain => Color::Reset,
        Tone::Red => Color::Red,
        Tone::Yellow => Color::Yellow,
        Tone::Green => Color::Green,
        Tone::Cyan => Color::Cyan,
        Tone::Blue => Color::Blue,
        Tone::Dim => Color::DarkGray,
    }
}

/// A job id in a table: [`crate::JobId::short`], the random tail the CLI prints and resolves.
pub fn short_id(id: &crate::JobId) -> String {
    id.short()
}

/// Sanitized, then cut to `max` cells with an ellipsis.
fn clean(s: &str, max: usize) -> String {
    truncate(&sanitize(s), max).into_owned()
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let theme = Theme { color: self.cfg.color };
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            too_small(area, buf);
            return;
        }
        let row = |y: u16| Rect { x: area.x, y: area.y + y, width: area.width, height: 1 };
        self.title(&theme, row(0), buf);
        self.counts(&theme, row(1), buf);
        self.chart_rows(&theme, row(2), row(3), buf);
        self.tabs(&theme, row(4), buf);
        let mut body =
            Rect { x: area.x, y: area.y + HEADER_ROWS, width: area.width, height: area.height - HEADER_ROWS - 1 };
        if self.filter_line_shown() {
            self.filter_line(&theme, Rect { height: 1, ..body }, buf);
            body.y += 1;
            body.height -= 1;
        }
        if self.detail.is_some() {
            self.detail_pane(&theme, body, buf);
        } else {
            self.body(&theme, body, buf);
        }
        self.footer(&theme, row(area.height - 1), buf);
        match &self.mode {
            Mode::Help => help(&theme, area, buf),
            Mode::Confirm(p) => confirm(&theme, p, area, buf),
            Mode::Preparing { op } => {
                popup(&theme, area, buf, op.verb(), vec![Line::from("counting what this would change…")], None)
            }
            Mode::Running { op } => {
                popup(&theme, area, buf, op.verb(), vec![Line::from("working: the store is changing the jobs…")], None)
            }
            Mode::Results(r) => {
                let mut lines: Vec<Line> = r.lines.iter().map(|l| Line::from(clean(l, 200))).collect();
                lines.push(Line::from(""));
                lines.push(Line::styled("any key: close", theme.dim()));
                let style = if r.refused { Some(theme.error()) } else { None };
                popup(&theme, area, buf, &r.title, lines, style);
            }
            _ => {}
        }
    }
}

fn too_small(area: Rect, buf: &mut Buffer) {
    let text = vec![
        Line::from("bw top needs a terminal of at least 80×24"),
        Line::from(format!("this one is {}×{}: enlarge it", area.width, area.height)),
        Line::from("(or use `bw jobs list`)  q: quit"),
    ];
    let y = area.y + area.height.saturating_sub(3) / 2;
    Paragraph::new(text)
        .alignment(ratatui::layout::Alignment::Center)
        .wrap(Wrap { trim: true })
        .render(Rect { y, height: area.height.clamp(1, 3), ..area }, buf);
}

impl App {
    fn title(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let perms = self
            .snapshot
            .as_ref()
            .map(|s| {
                if s.permissions.is_empty() {
                    "no permissions".to_string()
                } else {
                    s.permissions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
                }
            })
            .unwrap_or_else(|| "—".into());
        // PAUSED and READ-ONLY come first: at the end of the line an 80-column terminal cut
        // them off, and a paused dashboard's stale numbers looked live.
        let mut spans = vec![Span::styled(" BackWave ", t.heading())];
        if self.paused {
            spans.push(Span::styled("─ PAUSED (p) ", t.error()));
        }
        if self.cfg.read_only {
            spans.push(Span::styled("─ READ-ONLY ", t.heading()));
        }
        spans.extend([
            Span::raw("─ "),
            Span::raw(clean(&self.cfg.store, 40)),
            Span::raw(" ─ "),
            Span::raw(format!("{} ({perms})", clean(&self.cfg.actor, 20))),
            Span::raw(format!(" ─ every {}", compact_duration(self.cfg.interval))),
        ]);
        let style = Style::default().add_modifier(Modifier::REVERSED);
        buf.set_style(area, style);
        Line::from(spans).style(style).render(area, buf);
    }

    fn counts(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let n = |s: JobState| self.snapshot.as_ref().map(|snap| snap.counts.total(s)).unwrap_or(0);
        // Full names when they fit, then tighter spacing, then short names.
        let short = |s: JobState| match s {
            JobState::Scheduled => "Sched",
            JobState::Running => "Run",
            JobState::Succeeded => "OK",
            JobState::DeadLettered => "Dead",
            JobState::Quarantined => "Quar",
            JobState::Cancelled => "Canc",
        };
        let width = |gap: usize, name: &dyn Fn(JobState) -> &'static str| -> usize {
            JobState::ALL.iter().map(|s| name(*s).len() + 1 + thousands(n(*s)).len() + gap).sum::<usize>() + 1
        };
        let full = |s: JobState| s.title();
        let (gap, name): (usize, &dyn Fn(JobState) -> &'static str) = if width(3, &full) <= area.width as usize {
            (3, &full)
        } else if width(2, &full) <= area.width as usize {
            (2, &full)
        } else {
            (2, &short)
        };
        let mut spans = vec![Span::raw(" ")];
        for s in JobState::ALL {
            spans.push(Span::styled(format!("{} ", name(s)), t.state(s)));
            spans.push(Span::styled(thousands(n(s)), t.state(s).add_modifier(Modifier::BOLD)));
            spans.push(Span::raw(" ".repeat(gap)));
        }
        Line::from(spans).render(area, buf);
    }

    /// Two rows of one bar per minute, on one scale so that the rows compare.
    fn chart_rows(&self, t: &Theme, ok_row: Rect, failed_row: Rect, buf: &mut Buffer) {
        const LABEL: usize = 15;
        const TAIL: usize = 27;
        let room = (ok_row.width as usize).saturating_sub(LABEL + TAIL + 1);
        // One cell per minute when there is room for the hour, else one per two (or more).
        let per_cell = (CHART_MINUTES as usize).div_ceil(room.max(1)).max(1) as i64;
        let cells = CHART_MINUTES / per_cell;
        let now_minute = self.now.div_euclid(60_000);
        let series: Vec<(u64, u64)> = (0..cells)
            .rev()
            .map(|back| {
                (0..per_cell).fold((0, 0), |(a, b), k| {
                    let (x, y) = self.chart.get(&(now_minute - back * per_cell - k)).copied().unwrap_or((0, 0));
                    (a + x, b + y)
                })
            })
            .collect();
        let max = series.iter().map(|(a, b)| (*a).max(*b)).max().unwrap_or(0);
        let (ok_total, failed_total): (u64, u64) = self.chart.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        // On a busy store the chart counts the hour back a batch per refresh: until it has
        // caught up with the log, its totals are a partial count, not the last hour's.
        let span_label = if self.chart_seq < self.log_seq {
            "so far, counting…".to_string()
        } else if per_cell == 1 {
            "last hour".to_string()
        } else {
            format!("last hour, {per_cell}m/bar")
        };
        let bars = |pick: fn(&(u64, u64)) -> u64| -> String { series.iter().map(|v| bar(pick(v), max)).collect() };
        let line = |label: &str, bars: String, total: u64, style: Style| {
            Line::from(vec![
                Span::raw(format!(" {label:<width$}", width = LABEL - 1)),
                Span::styled(bars, style),
                Span::raw(format!(" {:>8} {span_label}", thousands(total))),
            ])
        };
        line("succeeded/min", bars(|v| v.0), ok_total, t.state(JobState::Succeeded)).render(ok_row, buf);
        line("failed/min", bars(|v| v.1), failed_total, t.state(JobState::DeadLettered)).render(failed_row, buf);
    }

    fn tabs(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let count = |v: View| -> Option<u64> {
            let s = self.snapshot.as_ref()?;
            v.state().map(|st| s.counts.total(st))
        };
        let label = |v: View, with_count: bool| match (with_count, count(v)) {
            (true, Some(n)) => format!(" {} {} {} ", v.index() + 1, v.title(), thousands(n)),
            _ => format!(" {} {} ", v.index() + 1, v.title()),
        };
        let fits = View::ALL.iter().map(|v| label(*v, true).chars().count() + 1).sum::<usize>() <= area.width as usize;
        let mut spans = Vec::new();
        for v in View::ALL {
            let style = if v == self.view {
                t.selected().add_modifier(Modifier::BOLD)
            } else {
                v.state().map(|s| t.state(s)).unwrap_or_default()
            };
            spans.push(Span::styled(label(v, fits), style));
            spans.push(Span::raw(" "));
        }
        Line::from(spans).render(area, buf);
    }

    fn filter_line(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let line = match &self.mode {
            Mode::Filter { input } => Line::from(vec![
                Span::styled(" / ", t.heading()),
                Span::raw(sanitize(input).into_owned()),
                Span::styled("█", t.dim()),
                Span::styled("   Enter apply · Esc cancel · wire: queue: cause: since: text", t.dim()),
            ]),
            _ => {
                let n = self.list_len();
                Line::from(vec![
                    Span::styled(" filter: ", t.heading()),
                    Span::raw(clean(&self.vs().filter_text, 60)),
                    Span::styled(format!("   {} matching · / edit", thousands(n)), t.dim()),
                ])
            }
        };
        line.render(area, buf);
    }

    fn body(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let grouped = self.query().grouped;
        match (self.view, grouped) {
            (View::DeadLettered, true) => self.cause_groups(t, area, buf),
            (View::Quarantined, true) => self.quarantine_groups(t, area, buf),
            (View::Queues, _) => self.queues(t, area, buf),
            (View::Log, _) => self.log_view(t, area, buf),
            _ => self.jobs(t, area, buf),
        }
    }

    fn empty(&self, t: &Theme, area: Rect, buf: &mut Buffer, what: &str) {
        let text = match (&self.snapshot, &self.db) {
            (None, DbStatus::Failed { error }) => format!("cannot read the store: {}", clean(error, 200)),
            (None, _) => "reading the store…".to_string(),
            _ if !self.vs().filter_text.is_empty() => format!("no {what} match the filter (/ to change it)"),
            _ => format!("no {what} — nothing to do here"),
        };
        Paragraph::new(Line::styled(text, t.dim()))
            .render(Rect { y: area.y + 1, height: 1, x: area.x + 2, width: area.width - 2 }, buf);
    }

    /// A table whose rows are already cut to fit; `selected` is the row index on screen.
    fn table(
        &self,
        t: &Theme,
        area: Rect,
        buf: &mut Buffer,
        (header, widths): (&[&str], &[Constraint]),
        rows: Vec<Row<'static>>,
        selected: Option<usize>,
    ) {
        let rows: Vec<Row> = rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| if Some(i) == selected { r.style(t.selected()) } else { r })
            .collect();
        Table::new(rows, widths.to_vec())
            .header(Row::new(header.iter().map(|h| Cell::from(*h))).style(t.heading()))
            .column_spacing(1)
            .render(area, buf);
    }

    fn selected_on_screen(&self) -> Option<usize> {
        let vs = self.vs();
        let first = self.snapshot.as_ref().map(|s| s.page_offset).unwrap_or(0);
        vs.selected.checked_sub(first).map(|i| i as usize)
    }

    fn jobs(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let jobs = self.page_jobs();
        let what = format!("{} jobs", self.view.title());
        if jobs.is_empty() {
            self.header_only(t, area, buf);
            self.empty(t, area, buf, &what);
            return;
        }
        let now = self.now;
        let live = self.snapshot.as_ref().map(|s| &s.live_handlers);
        let sel = self.selected_on_screen();
        let mark = |i: usize, j: &Job| {
            let pointer = if Some(i) == sel { "▶" } else { " " };
            let marked = if self.marks.contains_key(&j.id) { "●" } else { " " };
            format!("{pointer}{marked}")
        };
        let dl_widths = vec![len(2), len(8), len(18), len(10), len(8), len(10), Constraint::Fill(1)];
        let dl_fill = fill_width(area, &dl_widths);
        let q_widths = vec![len(2), len(8), len(18), len(19), len(12), len(10), Constraint::Fill(1)];
        let q_fill = fill_width(area, &q_widths);
        let (header, widths, rows): (Vec<&str>, Vec<Constraint>, Vec<Row>) = match self.view {
            View::DeadLettered => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "ATTEMPTS", "FINISHED", "CAUSE"],
                dl_widths.clone(),
                jobs.iter()
                    .enumerate()
                    .map(|(i, j)| {
                        Row::new(vec![
                            Cell::from(mark(i, j)),
                            Cell::from(short_id(&j.id)),
                            Cell::from(clean(&j.wire_name, 18)),
                            Cell::from(clean(&j.queue, 10)),
                            Cell::from(attempts(j)),
                            Cell::from(j.finished_at.map(|f| relative(now, f)).unwrap_or_default()),
                            Cell::from(clean(j.terminal_cause.as_deref().unwrap_or(""), dl_fill)),
                        ])
                    })
                    .collect(),
            ),
            View::Quarantined => (
                vec!["", "ID", "WIRE NAME", "REASON", "LIVE HANDLER", "SINCE", "CAUSE"],
                q_widths.clone(),
                jobs.iter()
                    .enumerate()
                    .map(|(i, j)| {
                        let n = live.and_then(|l| l.get(&j.wire_name)).copied().unwrap_or(0);
                        Row::new(vec![
                            Cell::from(mark(i, j)),
                            Cell::from(short_id(&j.id)),
                            Cell::from(clean(&j.wire_name, 18)),
                            Cell::from(j.quarantine_reason.map(|r| r.as_str()).unwrap_or("")),
                            Cell::from(handlers(n)).style(if n == 0 {
                                t.error()
                            } else {
                                t.state(JobState::Succeeded)
                            }),
                            Cell::from(j.finished_at.map(|f| relative(now, f)).unwrap_or_default()),
                            Cell::from(clean(j.terminal_cause.as_deref().unwrap_or(""), q_fill)),
                        ])
                    })
                    .collect(),
            ),
            View::Running => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "ATTEMPT", "LEASE LEFT", "WORKER", "NOTE"],
                vec![len(2), len(8), len(18), len(10), len(8), len(10), len(20), Constraint::Fill(1)],
                jobs.iter()
                    .enumerate()
                    .map(|(i, j)| {
                        let left = j.lease_expires_at.map(|e| e - now).unwrap_or(0);
                        let lease = if left > 0 {
                            compact_duration(std::time::Duration::from_millis(left as u64))
                        } else {
                            "lapsed".to_string()
                        };
                        Row::new(vec![
                            Cell::from(mark(i, j)),
                            Cell::from(short_id(&j.id)),
                            Cell::from(clean(&j.wire_name, 18)),
                            Cell::from(clean(&j.queue, 10)),
                            Cell::from(attempts(j)),
                            Cell::from(lease).style(if left > 0 { Style::default() } else { t.error() }),
                            Cell::from(clean(j.lease_owner.as_deref().unwrap_or(""), 20)),
                            Cell::from(
                                j.cancel_requested_by
                                    .as_deref()
                                    .map(|a| format!("cancel asked by {}", clean(a, 20)))
                                    .unwrap_or_default(),
                            ),
                        ])
                    })
                    .collect(),
            ),
            _ => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "DUE", "ATTEMPTS", "BUDGET LEFT", "CREATED"],
                vec![len(2), len(8), len(18), len(10), len(9), len(8), len(11), Constraint::Fill(1)],
                jobs.iter()
                    .enumerate()
                    .map(|(i, j)| {
                        Row::new(vec![
                            Cell::from(mark(i, j)),
                            Cell::from(short_id(&j.id)),
                            Cell::from(clean(&j.wire_name, 18)),
                            Cell::from(clean(&j.queue, 10)),
                            Cell::from(if j.due_at <= now { "due".to_string() } else { relative(now, j.due_at) }),
                            Cell::from(if j.attempt == 0 { "none yet".to_string() } else { attempts(j) }),
                            Cell::from(match j.budget_left() {
                                Some(n) => format!("{n} more"),
                                None => "fresh".to_string(),
                            }),
                            Cell::from(relative(now, j.created_at)),
                        ])
                    })
                    .collect(),
            ),
        };
        self.table(t, area, buf, (&header, &widths), rows, sel);
    }

    fn header_only(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        Line::styled(" (empty)", t.heading()).render(Rect { height: 1, ..area }, buf);
    }

    fn cause_groups(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = self.snapshot.as_ref().filter(|s| self.snapshot_is_for_view(s)) else {
            return self.empty(t, area, buf, "groups");
        };
        if s.cause_groups.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "Dead-Lettered jobs");
        }
        let now = self.now;
        let offset = self.vs().offset as usize;
        let sel = (self.vs().selected as usize).checked_sub(offset);
        let widths = [len(7), len(10), len(10), len(18), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let rows = s
            .cause_groups
            .iter()
            .skip(offset)
            .enumerate()
            .map(|(i, g)| {
                Row::new(vec![
                    Cell::from(format!("{}{:>6}", pointer(sel == Some(i)), thousands(g.count))),
                    Cell::from(relative(now, g.first_seen)),
                    Cell::from(relative(now, g.last_seen)),
                    Cell::from(clean(&g.wire_name, 18)),
                    Cell::from(clean(&g.fingerprint, fill)),
                ])
            })
            .collect();
        self.table(
            t,
            area,
            buf,
            (&["  COUNT", "FIRST SEEN", "LAST SEEN", "WIRE NAME", "CAUSE (normalised)"], &widths),
            rows,
            sel,
        );
    }

    fn quarantine_groups(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = self.snapshot.as_ref().filter(|s| self.snapshot_is_for_view(s)) else {
            return self.empty(t, area, buf, "groups");
        };
        if s.quarantine_groups.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "Quarantined jobs");
        }
        let now = self.now;
        let offset = self.vs().offset as usize;
        let sel = (self.vs().selected as usize).checked_sub(offset);
        let widths = [len(7), len(18), len(19), len(12), len(10), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let rows = s
            .quarantine_groups
            .iter()
            .skip(offset)
            .enumerate()
            .map(|(i, g)| {
                Row::new(vec![
                    Cell::from(format!("{}{:>6}", pointer(sel == Some(i)), thousands(g.count))),
                    Cell::from(clean(&g.wire_name, 18)),
                    Cell::from(g.reason.as_str()),
                    Cell::from(handlers(g.live_handlers)).style(if g.live_handlers == 0 {
                        t.error()
                    } else {
                        t.state(JobState::Succeeded)
                    }),
                    Cell::from(relative(now, g.last_seen)),
                    Cell::from(clean(&g.example, fill)),
                ])
            })
            .collect();
        self.table(
            t,
            area,
            buf,
            (&["  COUNT", "WIRE NAME", "REASON", "LIVE HANDLER", "LAST SEEN", "CAUSE (latest)"], &widths),
            rows,
            sel,
        );
    }

    fn queues(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &self.snapshot else { return self.empty(t, area, buf, "queues") };
        if s.counts.by_queue.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "queues");
        }
        let now = self.now;
        let biggest = s.counts.by_queue.values().map(|m| m.values().sum::<u64>()).max().unwrap_or(1).max(1);
        // Per-state numbers when there is room (120 columns); at 80 the coloured bar says it.
        let numbers_shown = area.width >= 110;
        const BAR: usize = 20;
        let sel = (self.vs().selected as usize).checked_sub(self.vs().offset as usize);
        let rows = s
            .counts
            .by_queue
            .iter()
            .skip(self.vs().offset as usize)
            .enumerate()
            .map(|(i, (queue, m))| {
                let total: u64 = m.values().sum();
                let mut bar_spans = Vec::new();
                let mut used = 0;
                for (i, st) in JobState::ALL.iter().enumerate() {
                    let n = m.get(st).copied().unwrap_or(0);
                    let cells = if n == 0 { 0 } else { ((n as f64 / biggest as f64) * BAR as f64).ceil() as usize };
                    let cells = cells.min(BAR - used);
                    used += cells;
                    let glyph = if self.cfg.color { "█" } else { ["S", "R", "=", "D", "Q", "C"][i] };
                    bar_spans.push(Span::styled(glyph.repeat(cells), t.state(*st)));
                }
                let numbers = JobState::ALL
                    .iter()
                    .map(|st| format!("{:>8}", thousands(m.get(st).copied().unwrap_or(0))))
                    .collect::<Vec<_>>()
                    .join("");
                let oldest = match s.oldest_due.get(queue) {
                    Some(due) if *due <= now => format!("waiting {}", relative(now, *due).trim_end_matches(" ago")),
                    Some(due) => relative(now, *due),
                    None => "—".to_string(),
                };
                let rate = self.throughput.get(queue).map(|r| format!("{r:.1}/min")).unwrap_or_else(|| "—".into());
                Row::new(vec![
                    Cell::from(format!("{}{}", pointer(sel == Some(i)), clean(queue, 11))),
                    Cell::from(format!("{:>9}", thousands(total))),
                    Cell::from(Line::from(bar_spans)),
                    Cell::from(if numbers_shown { numbers } else { String::new() }),
                    Cell::from(rate),
                    Cell::from(oldest),
                ])
            })
            .collect();
        self.table(
            t,
            area,
            buf,
            (
                &[
                    " QUEUE",
                    "    TOTAL",
                    "BY STATE",
                    if numbers_shown { "   SCHED     RUN      OK    DEAD   QUAR.    CANC" } else { "" },
                    "DONE/MIN",
                    "OLDEST DUE",
                ],
                &[
                    len(12),
                    len(9),
                    len(BAR as u16),
                    len(if numbers_shown { 48 } else { 0 }),
                    len(9),
                    Constraint::Fill(1),
                ],
            ),
            rows,
            sel,
        );
    }

    fn log_view(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let rows = self.log_rows();
        if rows.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "log entries");
        }
        let offset = self.vs().offset as usize;
        let widths = [len(12), len(8), len(13), len(15), len(3), len(19), Constraint::Fill(1)];
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
                Row::new(vec![
                    Cell::from(clock_time(e.at)),
                    Cell::from(short_id(&e.job_id)),
                    Cell::from(e.from.map(|s| s.title()).unwrap_or("(new)")),
                    Cell::from(format!("→ {}", e.to.title())).style(to_style),
                    Cell::from(format!("{:>3}", e.attempt)),
                    Cell::from(who),
                    Cell::from(clean(e.reason.as_deref().unwrap_or(""), fill)),
                ])
            })
            .collect();
        let sel = (self.vs().selected as usize).checked_sub(offset);
        self.table(
            t,
            area,
            buf,
            (&["TIME (UTC)", "JOB", "FROM", "TO", "ATT", "WORKER / ACTOR", "REASON"], &widths),
            visible,
            sel,
        );
    }

    fn detail_pane(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(d) = &self.detail else { return };
        let found = self.snapshot.as_ref().and_then(|s| s.detail.as_ref()).filter(|(j, _)| j.id == d.id);
        let block = Block::default().borders(Borders::TOP).title(Line::styled(format!(" job {} ", d.id), t.heading()));
        let inner = block.inner(area);
        block.render(area, buf);
        let Some((job, history)) = found else {
            let asked = self.snapshot.as_ref().and_then(|s| s.query.as_ref()).and_then(|q| q.detail) == Some(d.id);
            let text =
                if asked { "this job is gone (purged by retention or `bw purge`)" } else { "reading the job…" };
            Paragraph::new(text).render(inner, buf);
            return;
        };
        let now = self.now;
        let mut lines: Vec<Line> = Vec::new();
        let kv = |k: &str, v: String| Line::from(vec![Span::styled(format!("{k:<16}"), t.dim()), Span::raw(v)]);
        lines.push(Line::from(vec![
            Span::styled(clean(&job.wire_name, 40), t.heading()),
            Span::raw(format!(" · queue {} · ", clean(&job.queue, 20))),
            Span::styled(job.state.title(), t.state(job.state).add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                " {} · attempt {}{}",
                relative(now, job.finished_at.unwrap_or(job.updated_at)),
                job.attempt,
                job.max_attempts.map(|m| format!(" of {m}")).unwrap_or_default()
            )),
        ]));
        if let Some(cause) = &job.terminal_cause {
            lines.push(Line::from(vec![
                Span::styled(format!("{:<16}", "terminal cause"), t.dim()),
                Span::styled(clean(cause, 300), t.state(job.state)),
            ]));
        }
        if let Some(r) = job.quarantine_reason {
            lines.push(kv("quarantined", r.as_str().to_string()));
        }
        lines.push(kv("worker group", job.worker_group.as_deref().map(|g| clean(g, 40)).unwrap_or_else(|| "—".into())));
        lines.push(kv(
            "created",
            format!(
                "{} ({})  updated {}",
                rfc3339(job.created_at),
                relative(now, job.created_at),
                relative(now, job.updated_at)
            ),
        ));
        let due = if job.state == JobState::Scheduled { relative(now, job.due_at) } else { "—".into() };
        lines.push(kv("due", due));
        if let Some(f) = job.finished_at {
            lines.push(kv("finished", format!("{} ({})", rfc3339(f), relative(now, f))));
        }
        if let (Some(owner), Some(exp)) = (&job.lease_owner, job.lease_expires_at) {
            lines.push(kv("lease", format!("{} until {}", clean(owner, 40), relative(now, exp))));
        }
        if let Some(who) = &job.cancel_requested_by {
            lines.push(kv("cancel asked", clean(who, 40)));
        }
        if !job.labels.is_empty() {
            let labels =
                job.labels.iter().map(|(k, v)| format!("{}={}", clean(k, 30), clean(v, 60))).collect::<Vec<_>>();
            lines.push(kv("labels", labels.join(" ")));
        }
        let payload = sanitize_bytes(&job.payload[..job.payload.len().min(400)]);
        lines.push(kv("payload", format!("{} ({} bytes)", truncate(&payload, 200), job.payload.len())));
        lines.push(self.delay_line(t, job));
        lines.push(Line::from(""));
        // Failure detail: hidden until revealed (audited), with why when it cannot be shown.
        let failures: Vec<&DetailStatus> =
            history.iter().map(|h| &h.detail).filter(|d| **d != DetailStatus::None).collect();
        match &d.reveal {
            Reveal::Shown(details) => {
                lines.push(Line::styled(
                    format!("failure detail (revealed to {}, audited)", clean(&self.cfg.actor, 20)),
                    t.heading(),
                ));
                if details.is_empty() {
                    lines.push(Line::from("  no failure detail was captured for this job"));
                }
                for (seq, fd) in details {
                    lines.push(Line::from(format!("  #{seq} {}: {}", clean(&fd.kind, 60), clean(&fd.message, 300))));
                    for c in &fd.chain {
                        lines.push(Line::from(format!("    caused by: {}", clean(c, 300))));
                    }
                    if let Some(bt) = &fd.backtrace {
                        for l in sanitize_multiline(bt).lines().take(12) {
                            lines.push(Line::styled(format!("    {}", sanitize(l)), t.dim()));
                        }
                    }
                }
            }
            Reveal::Refused(e) => {
                lines.push(Line::styled(format!("failure detail not shown: {}", clean(e, 300)), t.error()));
            }
            Reveal::Asked => lines.push(Line::from("failure detail: asking the store…")),
            Reveal::Hidden => {
                let summary = failures
                    .iter()
                    .filter_map(|d| match d {
                        DetailStatus::Hidden { kind, bytes } => Some(format!("{}, {} B", clean(kind, 30), bytes)),
                        DetailStatus::NotCaptured => Some("not captured".into()),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                // Runs of the same kind and size read as one: `5 × panic, 5211 B`.
                let mut runs: Vec<(usize, String)> = Vec::new();
                for s in summary.iter() {
                    match runs.last_mut() {
                        Some((n, last)) if last == s => *n += 1,
                        _ => runs.push((1, s.clone())),
                    }
                }
                let runs: Vec<String> =
                    runs.into_iter().map(|(n, s)| if n == 1 { s } else { format!("{n} × {s}") }).collect();
                let text = if summary.is_empty() {
                    "failure detail: none recorded".to_string()
                } else {
                    format!("failure detail: hidden ({})", runs.join("; "))
                };
                let mut spans = vec![Span::raw(text)];
                if !summary.is_empty() && !self.cfg.read_only {
                    spans.push(Span::styled("   e: reveal (audited)", t.dim()));
                }
                lines.push(Line::from(spans));
            }
        }
        lines.push(Line::from(""));
        lines.push(Line::styled("history", t.heading()));
        for h in history {
            let who = match (&h.actor, &h.worker_id) {
                (Some(a), _) => format!("by {}", clean(a, 20)),
                (None, Some(w)) => format!("worker {}", clean(w, 20)),
                _ => String::new(),
            };
            lines.push(Line::from(vec![
                Span::raw(format!("  {}  ", clock_time(h.at))),
                Span::raw(format!("{:<13}", h.from.map(|s| s.title()).unwrap_or("(new)"))),
                Span::styled(format!("→ {:<14}", h.to.title()), t.state(h.to)),
                Span::raw(format!("attempt {:<3} {:<28} ", h.attempt, who)),
                Span::raw(clean(h.reason.as_deref().unwrap_or(""), 200)),
            ]));
        }
        // j/k and End may ask past the end: stop at the last screenful.
        let last = (lines.len() as u16).saturating_sub(inner.height);
        Paragraph::new(lines).scroll((d.scroll.min(last), 0)).render(inner, buf);
    }

    /// The job's delay table, the wait before its next attempt marked `[ ]`.
    fn delay_line(&self, t: &Theme, job: &Job) -> Line<'static> {
        let Some(table) = &job.delay_table else {
            return Line::from(vec![
                Span::styled(format!("{:<16}", "delays"), t.dim()),
                Span::raw("written at the first claim (the claiming worker group's retry policy)"),
            ]);
        };
        let mut spans = vec![Span::styled(format!("{:<16}", "delays"), t.dim())];
        if table.is_empty() {
            spans.push(Span::raw("none: a budget of one attempt, no retries"));
            return Line::from(spans);
        }
        // After failed attempt n the job waits table[n-1]; a Scheduled job with attempt n > 0
        // is waiting that one now.
        let next =
            if job.state == JobState::Scheduled && job.attempt > 0 { Some(job.attempt as usize - 1) } else { None };
        for (i, ms) in table.iter().enumerate() {
            let text = compact_duration(std::time::Duration::from_millis(*ms));
            if Some(i) == next {
                spans.push(Span::styled(format!("[{text}] "), t.heading().add_modifier(Modifier::UNDERLINED)));
            } else {
                spans.push(Span::raw(format!("{text} ")));
            }
        }
        if let Some(i) = next {
            spans.push(Span::styled(
                format!(" waiting after attempt {}; attempt {} {}", i + 1, i + 2, relative(self.now, job.due_at)),
                t.dim(),
            ));
        }
        Line::from(spans)
    }

    fn footer(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let status = match &self.db {
            DbStatus::Connecting => Span::styled("connecting…", t.dim()),
            DbStatus::Ok { query_ms } => match self.in_flight {
                Some(since) if self.now - since > 2 * self.cfg.interval.as_millis() as Millis => Span::styled(
                    format!("store slow: waiting {}", compact_duration(ms(self.now - since))),
                    t.fg(Color::Yellow),
                ),
                _ => Span::styled(format!("{query_ms:.0}ms"), t.dim()),
            },
            DbStatus::Busy { since } => Span::styled(
                format!("store locked by another process {}: retrying", compact_duration(ms(self.now - since))),
                t.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ),
            DbStatus::Failed { error } => {
                Span::styled(format!("store error: {}: retrying", clean(error, 60)), t.error())
            }
        };
        let right_len = status.content.chars().count()
            + 2
            + if self.marks.is_empty() { 0 } else { format!("{} marked  ", self.marks.len()).len() };
        let left_width = (area.width as usize).saturating_sub(right_len);
        let left: Line = if let Some(e) = &self.error {
            Line::styled(format!(" {}", clean(e, left_width.saturating_sub(1))), t.error())
        } else if let Some(n) = &self.notice {
            Line::from(format!(" {}", clean(n, left_width.saturating_sub(1))))
        } else {
            let keys = keymap::footer_keys(self.view, self.query().grouped, self.detail.is_some(), self.cfg.read_only);
            let mut spans = vec![Span::raw(" ")];
            let mut used = 1;
            for (k, what) in keys {
                let w = k.chars().count() + what.chars().count() + 3;
                if used + w > left_width {
                    break;
                }
                used += w;
                spans.push(Span::styled(k.to_string(), t.heading()));
                spans.push(Span::raw(format!(" {what}  ")));
            }
            Line::from(spans)
        };
        left.render(Rect { width: left_width as u16, ..area }, buf);
        let mut right = Vec::new();
        if !self.marks.is_empty() {
            right.push(Span::styled(format!("{} marked  ", self.marks.len()), t.heading()));
        }
        right.push(status);
        Line::from(right)
            .alignment(ratatui::layout::Alignment::Right)
            .render(Rect { x: area.x + left_width as u16, width: area.width - left_width as u16, ..area }, buf);
    }
}

fn ms(v: Millis) -> std::time::Duration {
    std::time::Duration::from_millis(v.max(0) as u64)
}

fn pointer(selected: bool) -> &'static str {
    if selected {
        "▶"
    } else {
        " "
    }
}

fn len(n: u16) -> Constraint {
    Constraint::Length(n)
}

/// Cells left for a table's one `Fill` column once its fixed columns and 1-cell gaps are laid
/// out: the width to cut a cause to, so that a cut cause ends in `…` instead of being clipped
/// silently by the table (an operator read a clipped cause as the whole message).
fn fill_width(area: Rect, widths: &[Constraint]) -> usize {
    let fixed: u16 = widths.iter().map(|c| if let Constraint::Length(n) = c { *n } else { 0 }).sum();
    let gaps = widths.len().saturating_sub(1) as u16;
    area.width.saturating_sub(fixed + gaps) as usize
}

fn handlers(n: u64) -> String {
    match n {
        0 => "none".to_string(),
        1 => "1 worker".to_string(),
        n => format!("{n} workers"),
    }
}

fn bar(v: u64, max: u64) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if v == 0 || max == 0 {
        return ' ';
    }
    let i = ((v as f64 / max as f64) * 7.0).round() as usize;
    BARS[i.min(7)]
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2));
    let h = height.min(area.height.saturating_sub(2));
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

/// A box in the middle of the screen. Its last line is the key that answers or closes it
/// ("[y] yes [n] no", "any key: close"): the box is sized for wrapped lines and that line is
/// pinned to its bottom row, because a box of one row per line lost the prompt whenever a line
/// above it wrapped on a narrow terminal.
fn popup(t: &Theme, area: Rect, buf: &mut Buffer, title: &str, mut lines: Vec<Line>, style: Option<Style>) {
    let width = (lines.iter().map(|l| l.width()).max().unwrap_or(0).max(title.chars().count() + 4) as u16 + 4).max(40);
    let inner_width = width.min(area.width.saturating_sub(2)).saturating_sub(2).max(1) as usize;
    // Word wrapping can leave a row short: one spare row per wrapped line.
    let rows = |w: usize| if w <= inner_width { 1 } else { w.div_ceil(inner_width) + 1 };
    let height: usize = lines.iter().map(|l| rows(l.width())).sum();
    let rect = centered(area, width, height as u16 + 2);
    Clear.render(rect, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::styled(format!(" {} ", clean(title, 70)), style.unwrap_or(t.heading())));
    let inner = block.inner(rect);
    block.render(rect, buf);
    let Some(last) = lines.pop() else { return };
    if inner.height == 0 {
        return;
    }
    let bottom = Rect { y: inner.y + inner.height - 1, height: 1, ..inner };
    Paragraph::new(lines).wrap(Wrap { trim: false }).render(Rect { height: inner.height - 1, ..inner }, buf);
    Paragraph::new(last).wrap(Wrap { trim: false }).render(bottom, buf);
}

fn confirm(t: &Theme, p: &super::data::Preview, area: Rect, buf: &mut Buffer) {
    let jobs = |n: u64| if n == 1 { "1 job".to_string() } else { format!("{} jobs", thousands(n)) };
    let title = format!("{} {}?", p.op.verb(), jobs(p.affected));
    let mut lines = vec![Line::from(clean(&p.what, 70))];
    match p.op {
        Op::Requeue => {
            lines.push(Line::from(format!("{} will be Scheduled now with a fresh attempt budget", jobs(p.affected))));
            if p.undecodable > 0 {
                // A live worker is no reason to expect success here: the payloads did not decode
                // into its type, and "0 would re-quarantine" sent them all back to quarantine.
                lines.push(Line::styled(
                    format!(
                        "{}: payload did not decode; they quarantine again unless the handler now accepts them",
                        thousands(p.undecodable)
                    ),
                    t.error(),
                ));
            }
            if p.would_requarantine == 0 {
                if p.undecodable == 0 {
                    lines.push(Line::from("0 would re-quarantine (every wire name has a live worker)"));
                }
            } else {
                lines.push(Line::styled(
                    format!(
                        "{} would re-quarantine: no live worker handles {}",
                        thousands(p.would_requarantine),
                        p.unhandled.iter().map(|w| clean(w, 30)).collect::<Vec<_>>().join(", ")
                    ),
                    t.error(),
                ));
            }
        }
        Op::Cancel => {
            lines.push(Line::from(format!("{} will be cancelled (a Running job is asked to stop)", jobs(p.affected))))
        }
        Op::Reveal => {
            lines.push(Line::from("the failure detail will be shown, and the reveal recorded in the audit log"))
        }
    }
    for s in p.skipped.iter().take(5) {
        lines.push(Line::styled(format!("skipped: {}", clean(s, 60)), t.dim()));
    }
    if p.skipped.len() > 5 {
        lines.push(Line::styled(format!("… and {} more skipped", p.skipped.len() - 5), t.dim()));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(vec![
        Span::styled("[y]", t.heading()),
        Span::raw(" yes    "),
        Span::styled("[n]", t.heading()),
        Span::raw(" no"),
    ]));
    popup(t, area, buf, &title, lines, None);
}

fn help(t: &Theme, area: Rect, buf: &mut Buffer) {
    let mut lines: Vec<Line> = keymap::HELP
        .iter()
        .map(|(k, what)| Line::from(vec![Span::styled(format!("{k:<20}"), t.heading()), Span::raw(*what)]))
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled("--read-only disables r, x and e. Any key closes this help.", t.dim()));
    popup(t, area, buf, "keys", lines, None);
}
