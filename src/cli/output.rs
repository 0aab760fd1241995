//! How `bw` prints: the two printers (table and JSON) behind one [`Render`] interface, plain
//! padded tables, aligned fields and ANSI colours. The text itself (escaping what came from the
//! database, times, numbers, widths) is [`crate::text`], shared with `bw top`; it is re-exported
//! here so a subcommand imports its printing from one place.

use std::borrow::Cow;
use std::io::{self, Write};

use backwave::Millis;

pub use crate::text::{
    bytes, clock_time, compact_duration, json_terminal_safe, precise_duration, relative, rfc3339, sanitize,
    sanitize_bytes, sanitize_multiline, shell_quote, thousands, truncate, truncate_keeping_tail, width,
};

/// How table output is laid out: the width to fit (`None`: unlimited, e.g. into a pipe),
/// whether to colour, and the instant relative times are measured from.
#[derive(Clone, Debug)]
pub struct Term {
    pub width: Option<usize>,
    pub color: bool,
    pub now: Millis,
}

/// `$COLUMNS` when set (so scripts and tests can pin it), else the terminal's width when stdout
/// is a terminal, else unlimited.
pub fn terminal_width() -> Option<usize> {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&c| c > 0) {
        return Some(c);
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return crossterm::terminal::size().ok().map(|(w, _)| w as usize).filter(|&w| w > 0);
    }
    None
}

/// A command's result, printable by both printers: `Serialize` is the JSON contract, `table`
/// the text for people. A command builds one value and hands it to [`Printer::print`].
pub trait Render: serde::Serialize {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()>;
}

/// The two printers, chosen once from `--format`.
#[derive(Clone, Debug)]
pub enum Printer {
    Table(Term),
    Json,
}

impl Printer {
    pub fn is_json(&self) -> bool {
        matches!(self, Printer::Json)
    }

    /// Print one result to stdout: a whole JSON document, or the table.
    pub fn print<R: Render>(&self, r: &R) -> io::Result<()> {
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        match self {
            Printer::Json => {
                let text = serde_json::to_string_pretty(r).map_err(io::Error::other)?;
                writeln!(out, "{}", json_terminal_safe(&text))?;
            }
            Printer::Table(term) => r.table(&mut out, term)?,
        }
        out.flush()
    }

    /// One JSON value on one line (`--follow` streams JSON Lines).
    pub fn print_json_line<T: serde::Serialize>(out: &mut dyn Write, v: &T) -> io::Result<()> {
        let text = serde_json::to_string(v).map_err(io::Error::other)?;
        writeln!(out, "{}", json_terminal_safe(&text))
    }
}

/// A cell's colour: the text layer's [`Tone`] (one palette for `bw` and `bw top`).
pub use crate::text::Tone as Style;

/// The colour of a state's name ([`crate::text::state_tone`], the table `bw top` uses too).
pub fn state_style(state: backwave::JobState) -> Style {
    crate::text::state_tone(state)
}

/// One cell: already-sanitized text and its colour.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub text: String,
    pub style: Style,
}

impl Cell {
    pub fn styled(text: impl Into<String>, style: Style) -> Self {
        Cell { text: text.into(), style }
    }
}

impl<T: Into<String>> From<T> for Cell {
    fn from(t: T) -> Self {
        Cell { text: t.into(), style: Style::Plain }
    }
}

/// Plain padded columns (two spaces apart, no borders: easy to read and to `grep`). One column
/// may be *flexible*: it takes the width left over and its cells are cut with `…`. Other
/// columns may have a maximum width.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    max: Vec<Option<usize>>,
    /// Cells of column `i` cut to fit keep their last `tails[i]` cells (0: cut at the end).
    tails: Vec<usize>,
    rows: Vec<Vec<Cell>>,
    flex: Option<usize>,
}

/// The narrowest a flexible column is squeezed to before the line is allowed to wrap.
const FLEX_MIN: usize = 16;

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            max: vec![None; headers.len()],
            tails: vec![0; headers.len()],
            rows: Vec::new(),
            flex: None,
        }
    }

    /// Column `i` takes the room left on the line.
    pub fn flex(mut self, i: usize) -> Self {
        self.flex = Some(i);
        self
    }

    /// Column `i` is never wider than `w` cells.
    pub fn max_width(mut self, i: usize, w: usize) -> Self {
        self.max[i] = Some(w);
        self
    }

    /// Column `i`'s cells, when cut to fit, keep their last `tail` cells after the `…`: for ids
    /// whose end tells them apart (`demo-host/42…#0002`).
    pub fn keep_tail(mut self, i: usize, tail: usize) -> Self {
        self.tails[i] = tail;
        self
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn write(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let n = self.headers.len();
        // Every cell's text and width, measured once (the header first).
        let heading = if term.color { Style::Bold } else { Style::Plain };
        let cells: Vec<Vec<(&str, usize, Style)>> =
            std::iter::once(self.headers.iter().map(|h| (h.as_str(), width(h), heading)).collect())
                .chain(
                    self.rows
                        .iter()
                        .map(|r| r.iter().take(n).map(|c| (c.text.as_str(), width(&c.text), c.style)).collect()),
                )
                .collect();
        let mut widths = vec![0; n];
        for row in &cells {
            for (i, (_, w, _)) in row.iter().enumerate() {
                widths[i] = widths[i].max(*w);
            }
        }
        for (w, max) in widths.iter_mut().zip(&self.max) {
            if let Some(m) = max {
                *w = (*w).min(*m);
            }
        }
        if let (Some(f), Some(total)) = (self.flex, term.width) {
            let room = |widths: &[usize]| {
                let others: usize = widths.iter().enumerate().filter(|(i, _)| *i != f).map(|(_, w)| w).sum();
                total.saturating_sub(others + 2 * (n - 1))
            };
            // A narrow terminal: squeeze the capped columns (names) before the flexible one.
            while room(&widths) < FLEX_MIN.min(widths[f]) {
                let widest =
                    (0..n).filter(|i| *i != f && self.max[*i].is_some() && widths[*i] > 8).max_by_key(|i| widths[*i]);
                match widest {
                    Some(i) => widths[i] -= 1,
                    None => break,
                }
            }
            widths[f] = widths[f].min(room(&widths).max(FLEX_MIN.min(widths[f])));
        }
        // Last resort on a very narrow terminal: a table with a flexible column never wraps.
        // Every cell is cut to its column, and a row that still overflows the line is cut cell
        // by cell, before colouring: cutting the painted line was skipped in colour, so at a
        // terminal (where colour is on) long rows wrapped.
        let limit = term.width.filter(|_| self.flex.is_some());
        let rows: Vec<Vec<(Cow<'_, str>, Style)>> =
            cells.iter().map(|row| cut_row(row, &widths, &self.tails, limit)).collect();

        // comfy-table lays the cut cells out: no borders or separators, columns of exactly these
        // widths plus two spaces of right padding. Nothing is wider than its column, so nothing
        // wraps.
        let mut table = comfy_table::Table::new();
        table
            .load_preset(comfy_table::presets::NOTHING)
            .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
        for row in &rows {
            table.add_row(row.iter().map(|(text, _)| text.as_ref()));
        }
        for (column, w) in table.column_iter_mut().zip(&widths) {
            column.set_padding((0, 2));
            column.set_constraint(comfy_table::ColumnConstraint::Absolute(comfy_table::Width::Fixed(*w as u16 + 2)));
        }
        for (line, row) in table.lines().zip(&rows) {
            let line = line.trim_end();
            if term.color {
                writeln!(out, "{}", paint_cells(line, row, &widths))?;
            } else {
                writeln!(out, "{line}")?;
            }
        }
        Ok(())
    }
}

/// One row's cells cut to their columns' `widths`, and the row cut where it would overflow a
/// line of `limit` cells. A cell that fits is borrowed as is.
fn cut_row<'a>(
    row: &[(&'a str, usize, Style)],
    widths: &[usize],
    tails: &[usize],
    limit: Option<usize>,
) -> Vec<(Cow<'a, str>, Style)> {
    let mut out = Vec::with_capacity(row.len());
    let mut used = 0;
    for (i, &(text, w, style)) in row.iter().enumerate() {
        let (mut cut, cut_w) = if w <= widths[i] {
            (Cow::Borrowed(text), w)
        } else {
            let cut = truncate_keeping_tail(text, widths[i], tails[i]);
            let cut_w = width(&cut);
            (cut, cut_w)
        };
        let left = limit.map_or(usize::MAX, |w| w.saturating_sub(used));
        let overflows = cut_w > left;
        if overflows {
            cut = Cow::Owned(truncate(&cut, left).into_owned());
        }
        out.push((cut, style));
        if overflows {
            break;
        }
        used += widths[i] + 2;
    }
    out
}

/// Colour the cells of one laid-out line. Colour goes on after layout, so escape codes never
/// count towards a column's width: cell `i` starts at the sum of the widths before it and the
/// two-space gaps, and is exactly the cut text it was given.
fn paint_cells(line: &str, row: &[(Cow<'_, str>, Style)], widths: &[usize]) -> String {
    let mut out = String::with_capacity(line.len() + 16 * row.len());
    let mut rest = line;
    for (i, (text, style)) in row.iter().enumerate() {
        let start = widths[..i].iter().sum::<usize>() + 2 * i;
        let consumed = width(line) - width(rest);
        let (before, cell) = split_at_width(rest, start.saturating_sub(consumed));
        out.push_str(before);
        match cell.strip_prefix(text.as_ref()) {
            Some(after) if !text.is_empty() => {
                out.push_str(&style.paint(text, true));
                rest = after;
            }
            _ => rest = cell,
        }
    }
    out.push_str(rest);
    out
}

/// `s` split after `cells` terminal cells.
fn split_at_width(s: &str, cells: usize) -> (&str, &str) {
    let mut used = 0;
    for (at, c) in s.char_indices() {
        if used >= cells {
            return s.split_at(at);
        }
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
    }
    (s, "")
}

/// `key  value` lines with the keys aligned, for `jobs show` and friends.
pub fn write_fields(out: &mut dyn Write, fields: &[(&str, String)]) -> io::Result<()> {
    let w = fields.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
    for (k, v) in fields {
        writeln!(out, "  {k:<w$}  {v}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(table: &Table, width: Option<usize>, color: bool) -> String {
        let mut out = Vec::new();
        table.write(&mut out, &Term { width, color, now: 0 }).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                chars.by_ref().find(|c| *c == 'm');
            } else {
                out.push(c);
            }
        }
        out
    }

    fn sample() -> Table {
        let mut t = Table::new(&["ID", "STATE", "WIRE NAME", "CAUSE"]).max_width(2, 12).flex(3);
        t.row(vec![
            "a0000004".into(),
            Cell::styled("Dead-Lettered", Style::Red),
            "发送邮件".into(),
            "x".repeat(90).into(),
        ]);
        t.row(vec!["a0000019".into(), Cell::styled("Scheduled", Style::Blue), "send-email".into(), "".into()]);
        t
    }

    /// Colour went into the cells before they were measured once, and coloured rows wrapped at
    /// a terminal: painting must never move a column.
    #[test]
    fn colour_never_changes_the_layout() {
        for width in [None, Some(80), Some(40), Some(20)] {
            let plain = render(&sample(), width, false);
            let coloured = render(&sample(), width, true);
            assert_eq!(strip_ansi(&coloured), plain, "at {width:?}");
        }
        let coloured = render(&sample(), None, true);
        assert!(coloured.contains("\u{1b}[31mDead-Lettered\u{1b}[0m  发送邮件"), "{coloured}");
    }

    #[test]
    fn a_row_never_outgrows_the_terminal() {
        for w in [80, 40, 20] {
            for line in render(&sample(), Some(w), false).lines() {
                assert!(width(line) <= w, "{} cells at {w}: {line}", width(line));
            }
        }
        let wide = render(&sample(), None, false);
        assert!(wide.lines().nth(1).unwrap().ends_with(&"x".repeat(90)), "{wide}");
        assert!(wide.starts_with("ID        STATE          WIRE NAME   CAUSE\n"), "{wide}");
    }
}
