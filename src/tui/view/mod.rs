//! Drawing: `impl Widget for &App`. It only reads the app; every string that came from the
//! database passes through `text::sanitize` here, at the last moment, so no stored byte
//! can move the cursor or restyle the screen. This file lays out the frame (title, counts, tabs,
//! footer) and holds the shared cell helpers; the detail pane, the chart and the popups have a
//! file each, and each screen's body is drawn by its screen (`tui::screens`).

mod chart;
mod detail;
mod popups;

use popups::{confirm, help, payload_edit, popup};

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
    compact_duration, relative, rfc3339, sanitize, sanitize_bytes, sanitize_multiline, thousands, truncate, width,
};
use backwave::{DetailStatus, Job, JobState, Millis};

/// The smallest terminal the dashboard draws in; below it, a message says so.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Whether a terminal of `width`×`height` is large enough for the dashboard.
pub fn fits(width: u16, height: u16) -> bool {
    width >= MIN_WIDTH && height >= MIN_HEIGHT
}
/// Rows above the body: title, counts, two chart rows, tabs.
const HEADER_ROWS: u16 = 5;

/// Rows the job list has at terminal height `height` (the app pages the store by this).
pub fn list_rows(height: u16, filter_line: bool) -> usize {
    height.saturating_sub(HEADER_ROWS + 1 + 1 + filter_line as u16) as usize
}

/// Colours, or none (NO_COLOR, --no-color): then selection and emphasis use reverse and bold.
pub(crate) struct Theme {
    pub(crate) color: bool,
}

impl Theme {
    pub(crate) fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub(crate) fn state(&self, s: JobState) -> Style {
        self.fg(state_color(s))
    }

    /// A [`Tone`] of the text layer (the colour `bw` prints the same text in).
    pub(crate) fn tone(&self, tone: Tone) -> Style {
        match tone {
            Tone::Bold => self.heading(),
            Tone::Plain => Style::default(),
            _ => self.fg(tone_color(tone)),
        }
    }

    pub(crate) fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    pub(crate) fn error(&self) -> Style {
        if self.color {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }

    pub(crate) fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub(crate) fn heading(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
}

/// A state's colour on screen: [`crate::text::state_tone`], the table `bw` paints from too.
pub fn state_color(s: JobState) -> Color {
    tone_color(crate::text::state_tone(s))
}

/// A [`Tone`]'s colour on screen.
fn tone_color(tone: Tone) -> Color {
    match tone {
        Tone::Plain => Color::Reset,
        Tone::Red => Color::Red,
        Tone::Yellow => Color::Yellow,
        Tone::Green => Color::Green,
        Tone::Cyan => Color::Cyan,
        Tone::Blue => Color::Blue,
        Tone::Dim => Color::DarkGray,
        Tone::Bold => Color::Reset,
    }
}

/// A job id in a table: [`backwave::JobId::short`], the random tail the CLI prints and resolves.
pub fn short_id(id: &backwave::JobId) -> String {
    id.short()
}

/// Sanitized, then cut to `max` cells with an ellipsis.
pub(crate) fn clean(s: &str, max: usize) -> String {
    truncate(&sanitize(s), max).into_owned()
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let theme = Theme { color: self.cfg.color };
        if !fits(area.width, area.height) {
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
        if self.nav.detail.is_some() {
            self.detail_pane(&theme, body, buf);
        } else {
            self.body(&theme, body, buf);
        }
        self.footer(&theme, row(area.height - 1), buf);
        match &self.mode {
            Mode::Help => help(&theme, area, buf),
            Mode::Confirm(p) => confirm(&theme, p, area, buf),
            Mode::Editing { .. } | Mode::SaveEdit { .. } | Mode::EditInvalid { .. } => {
                payload_edit(&theme, &self.mode, area, buf)
            }
            Mode::Preparing { op } => {
                popup(&theme, area, buf, op.verb(), vec![Line::from("counting what this would change…")], None)
            }
            Mode::ConfirmQuit => popup(
                &theme,
                area,
                buf,
                "Quit, and stop the demo?",
                vec![
                    Line::from("bw demo started this dashboard: quitting it stops the demo's workers"),
                    Line::from("(running handlers get a short grace, then the demo prints its summary)"),
                    Line::from(""),
                    Line::from(vec![
                        Span::styled("[y]", theme.heading()),
                        Span::raw(" quit    "),
                        Span::styled("[n]", theme.heading()),
                        Span::raw(" stay"),
                    ]),
                ],
                None,
            ),
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
            spans.push(Span::styled("─ FROZEN (p) ", t.error()));
        }
        if self.cfg.read_only {
            spans.push(Span::styled("─ READ-ONLY ", t.heading()));
        }
        // What stops work, then how late it is: an incident's two first questions.
        if let Some(s) = &self.snapshot {
            let paused: Vec<String> = s
                .pauses
                .iter()
                .filter(|p| p.until.is_none_or(|u| u > self.now))
                .map(|p| match p.until {
                    Some(u) => format!("{} {} until {}", p.kind, clean(&p.name, 24), hh_mm(u)),
                    None => format!("{} {}", p.kind, clean(&p.name, 24)),
                })
                .collect();
            if !paused.is_empty() {
                spans.push(Span::styled(format!("─ PAUSED: {} ", paused.join(", ")), t.error()));
            }
            // Limits whose budget is spent hold jobs back; the others only say what they allow.
            let limited: Vec<String> = s
                .limits
                .iter()
                .map(|l| {
                    let full = if l.budget == 0 { " full" } else { "" };
                    format!("{} {} {}{full}", l.kind, clean(&l.name, 24), l.effective)
                })
                .collect();
            if !limited.is_empty() {
                spans.push(Span::styled(format!("─ LIMITED: {} ", limited.join(", ")), t.fg(Color::Yellow)));
            }
            let quiet = s.quiet_workers.iter().filter(|w| w.stopping_at.is_none()).count();
            let stopping = s.quiet_workers.len() - quiet;
            if quiet + stopping > 0 {
                let running: u64 = s.quiet_workers.iter().map(|w| w.running).sum();
                spans.push(Span::styled(
                    format!("─ QUIET {quiet}, STOPPING {stopping} workers ({running} running) "),
                    t.fg(Color::Yellow),
                ));
            }
            let worst = s
                .latency
                .iter()
                .filter(|l| l.due_now > 0)
                .filter_map(|l| Some((l.oldest_due_at?, &l.queue)))
                .min_by_key(|(due, _)| *due);
            if let Some((due, queue)) = worst {
                spans.push(Span::styled(
                    format!("─ oldest due {} in {} ", compact_duration(ms(self.now - due)), clean(queue, 20)),
                    t.fg(Color::Yellow),
                ));
            }
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
            JobState::Waiting => "Wait",
        };
        let states = crate::text::states_shown(n(JobState::Waiting) > 0);
        type Name<'a> = &'a dyn Fn(JobState) -> &'static str;
        type Figure<'a> = &'a dyn Fn(u64) -> String;
        let width = |gap: usize, name: Name, figure: Figure| -> usize {
            states.iter().map(|s| name(*s).len() + 1 + figure(n(*s)).len() + gap).sum::<usize>() + 1
        };
        let full = |s: JobState| s.title();
        let exact = |v: u64| thousands(v);
        let compact = |v: u64| compact_count(v);
        // Full names when they fit, then tighter spacing, then short names, then counts in the
        // millions as `99.2M`: every state's count stays on screen at 80 columns.
        let choices: [(usize, Name, Figure); 4] = [
            (3, &full as Name, &exact as Figure),
            (2, &full as Name, &exact as Figure),
            (2, &short as Name, &exact as Figure),
            (2, &short as Name, &compact as Figure),
        ];
        let (gap, name, figure) = choices
            .into_iter()
            .find(|(gap, name, figure)| width(*gap, *name, *figure) <= area.width as usize)
            .unwrap_or((1, &short as Name, &compact as Figure));
        let mut spans = vec![Span::raw(" ")];
        for &s in &states {
            spans.push(Span::styled(format!("{} ", name(s)), t.state(s)));
            spans.push(Span::styled(figure(n(s)), t.state(s).add_modifier(Modifier::BOLD)));
            spans.push(Span::raw(" ".repeat(gap)));
        }
        Line::from(spans).render(area, buf);
    }

    /// Each tab's label and the columns it covers (from, to exclusive) at `width`: drawn by
    /// the tab row, and read by a mouse click to find the tab under it.
    pub fn tab_labels(&self, width: u16) -> Vec<(View, String, u16, u16)> {
        let count = |v: View| -> Option<u64> {
            let s = self.snapshot.as_ref()?;
            v.state().map(|st| s.counts.total(st))
        };
        // Full titles with exact counts; then the views that list no state's jobs by their short
        // titles; then full titles without counts (the counts row has them); then short titles
        // (but the current view's) with compact counts, then without; then those without the
        // space between tabs; at last one space between tabs and no padding but the current
        // view's: all nine tabs at 80 columns, the view on screen under its full title.
        let label = |v: View, level: usize| {
            let short = match level {
                0 | 2 => false,
                1 => v.state().is_none() && v != self.nav.view,
                _ => v != self.nav.view,
            };
            let title = if short { v.info().short } else { v.title() };
            let counted = matches!(level, 0 | 1 | 3);
            match (counted, count(v)) {
                (true, Some(n)) => {
                    format!(" {} {title} {} ", v.index() + 1, if level < 3 { thousands(n) } else { compact_count(n) })
                }
                _ if level == 6 && v != self.nav.view => format!("{} {title}", v.index() + 1),
                _ => format!(" {} {title} ", v.index() + 1),
            }
        };
        let gap = |level: usize| usize::from(level != 5);
        let fits = |level: usize| {
            let labels: usize = View::ALL.iter().map(|v| width_of(&label(*v, level))).sum();
            labels + gap(level) * (View::ALL.len() - 1) <= width as usize
        };
        let level = (0..6).find(|l| fits(*l)).unwrap_or(6);
        let mut x = 0u16;
        View::ALL
            .iter()
            .map(|v| {
                let text = label(*v, level);
                let w = width_of(&text) as u16;
                let out = (*v, text, x, x + w);
                x += w + gap(level) as u16;
                out
            })
            .collect()
    }

    fn tabs(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let mut spans = Vec::new();
        let mut x = 0;
        for (v, text, from, to) in self.tab_labels(area.width) {
            let style = if v == self.nav.view {
                t.selected().add_modifier(Modifier::BOLD)
            } else {
                v.state().map(|s| t.state(s)).unwrap_or_default()
            };
            if from > x {
                spans.push(Span::raw(" "));
            }
            spans.push(Span::styled(text, style));
            x = to;
        }
        Line::from(spans).render(area, buf);
    }

    /// The screen row of the first list row (under the column headings) at the current size.
    pub fn first_list_row(&self) -> u16 {
        HEADER_ROWS + self.filter_line_shown() as u16 + 1
    }

    fn filter_line(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let line = match &self.mode {
            Mode::Filter { input } => prompt_line(t, input, area.width as usize),
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
        self.screen().render(self, t, area, buf);
    }

    pub(crate) fn empty(&self, t: &Theme, area: Rect, buf: &mut Buffer, what: &str) {
        let text = match (&self.snapshot, &self.db) {
            (None, DbStatus::Failed { error }) => format!("cannot read the store: {}", clean(error, 200)),
            (None, _) => "reading the store…".to_string(),
            (Some(s), _) if !s.unknown_names.is_empty() => {
                format!("no {what} match the filter: {} (/ to change it)", s.unknown_names.join("; "))
            }
            _ if !self.vs().filter_text.is_empty() => format!("no {what} match the filter (/ to change it)"),
            _ => format!("no {what} — nothing to do here"),
        };
        Paragraph::new(Line::styled(text, t.dim()))
            .render(Rect { y: area.y + 1, height: 1, x: area.x + 2, width: area.width - 2 }, buf);
    }

    /// A table whose rows are already cut to fit; `selected` is the row index on screen.
    pub(crate) fn table(
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

    pub(crate) fn selected_on_screen(&self) -> Option<usize> {
        let vs = self.vs();
        let first = self.snapshot.as_ref().map(|s| s.page_offset).unwrap_or(0);
        vs.selected.checked_sub(first).map(|i| i as usize)
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
            + if self.nav.marks.is_empty() { 0 } else { format!("{} marked  ", self.nav.marks.len()).len() };
        let left_width = (area.width as usize).saturating_sub(right_len);
        let left: Line = if let Some(e) = &self.error {
            Line::styled(format!(" {}", clean(e, left_width.saturating_sub(1))), t.error())
        } else if let Some(n) = &self.notice {
            Line::from(format!(" {}", clean(n, left_width.saturating_sub(1))))
        } else {
            let keys = keymap::footer_keys(keymap::Place {
                view: self.nav.view,
                grouped: self.nav.grouped(),
                detail: self.nav.detail.is_some(),
                read_only: self.cfg.read_only,
            });
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
        if !self.nav.marks.is_empty() {
            right.push(Span::styled(format!("{} marked  ", self.nav.marks.len()), t.heading()));
        }
        right.push(status);
        Line::from(right)
            .alignment(ratatui::layout::Alignment::Right)
            .render(Rect { x: area.x + left_width as u16, width: area.width - left_width as u16, ..area }, buf);
    }
}

/// The `/` prompt: the part of the line around the cursor that fits, the cursor as a reversed
/// cell, and the keys when there is room after the text.
fn prompt_line(t: &Theme, input: &crate::tui::prompt::Prompt, cols: usize) -> Line<'static> {
    const HINT: &str = "   Enter apply · Esc cancel · ↑↓ history · Ctrl-U clear · wire: queue: cause: since: text";
    const SHORT: &str = "   Enter apply · Esc cancel · ↑↓ history";
    let room = cols.saturating_sub(4).max(1);
    let (_, scroll) = input.visual(room);
    // Typed text is shown as typed, but a control character must not reach the terminal.
    let cells: Vec<String> =
        input.value().chars().map(|c| if c.is_control() { "�".to_string() } else { c.to_string() }).collect();
    let mut spans = vec![Span::styled(" / ", t.heading())];
    let (mut before, mut at, mut after) = (String::new(), " ".to_string(), String::new());
    let mut cell = 0;
    for (i, c) in cells.iter().enumerate() {
        let w = width(c);
        if cell >= scroll && cell + w <= scroll + room {
            match i.cmp(&input.cursor()) {
                std::cmp::Ordering::Less => before.push_str(c),
                std::cmp::Ordering::Equal => at = c.clone(),
                std::cmp::Ordering::Greater => after.push_str(c),
            }
        }
        cell += w;
    }
    let used = 3 + cell.min(room) + 1;
    spans.push(Span::raw(before));
    spans.push(Span::styled(at, Style::default().add_modifier(Modifier::REVERSED)));
    spans.push(Span::raw(after));
    if let Some(hint) = [HINT, SHORT].into_iter().find(|h| used + h.chars().count() <= cols) {
        spans.push(Span::styled(hint, t.dim()));
    }
    Line::from(spans)
}

/// `HH:MM` (UTC) of an instant, for pause expiries in the header.
fn hh_mm(at: Millis) -> String {
    let full = rfc3339(at);
    full.get(11..16).map_or(full.clone(), |t| format!("{t}Z"))
}

pub(crate) fn ms(v: Millis) -> std::time::Duration {
    std::time::Duration::from_millis(v.max(0) as u64)
}

pub(crate) fn pointer(selected: bool) -> &'static str {
    if selected {
        "▶"
    } else {
        " "
    }
}

pub(crate) fn len(n: u16) -> Constraint {
    Constraint::Length(n)
}

/// Cells left for a table's one `Fill` column once its fixed columns and 1-cell gaps are laid
/// out: the width to cut a cause to, so that a cut cause ends in `…` instead of being clipped
/// silently by the table (an operator read a clipped cause as the whole message).
pub(crate) fn fill_width(area: Rect, widths: &[Constraint]) -> usize {
    let fixed: u16 = widths.iter().map(|c| if let Constraint::Length(n) = c { *n } else { 0 }).sum();
    let gaps = widths.len().saturating_sub(1) as u16;
    area.width.saturating_sub(fixed + gaps) as usize
}

/// A count in at most six cells: `9,999`, then `12.3k`, `999k`, `1.2M`, `99.2M`, `1.2B`. For
/// the dashboard at widths where exact counts in the millions would not fit their columns.
pub fn compact_count(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")];
    if n < 10_000 {
        return thousands(n);
    }
    for (unit, suffix) in UNITS {
        if n >= unit {
            let v = n as f64 / unit as f64;
            // Cut, never rounded up: 999,999 is not "1000k".
            return if v < 100.0 {
                format!("{:.1}{suffix}", (v * 10.0).floor() / 10.0)
            } else {
                format!("{}{suffix}", v.floor() as u64)
            };
        }
    }
    thousands(n)
}

fn width_of(s: &str) -> usize {
    width(s)
}

fn handlers(n: u64) -> String {
    match n {
        0 => "none".to_string(),
        1 => "1 worker".to_string(),
        n => format!("{n} workers"),
    }
}

/// A list with no rows: its headings' place says so.
pub(crate) fn header_only(t: &Theme, area: Rect, buf: &mut Buffer) {
    Line::styled(" (empty)", t.heading()).render(Rect { height: 1, ..area }, buf);
}

/// When a Scheduled job is due: `due` once it is, else `in 4m` (`in <1s` for the last second:
/// the column read `due` and `now` side by side, two words for one thing).
pub(crate) fn due(now: Millis, due_at: Millis) -> String {
    match due_at - now {
        d if d <= 0 => "due".to_string(),
        d if d < 1000 => "in <1s".to_string(),
        _ => relative(now, due_at),
    }
}

/// A figure right-aligned in a column `w` cells wide.
pub(crate) fn right(text: &str, w: u16) -> Cell<'static> {
    Cell::from(format!("{text:>w$}", w = w as usize))
}

/// How many live workers handle a wire name: red when none does (it would quarantine again).
pub(crate) fn live_handlers(t: &Theme, n: u64) -> Cell<'static> {
    Cell::from(handlers(n)).style(if n == 0 { t.error() } else { t.state(JobState::Succeeded) })
}
