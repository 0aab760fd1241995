//! Everything the CLI and the dashboard print goes through here: escaping text that came from
//! the database, relative times, durations, numbers, and cutting text to a width. Nothing stored
//! in a job may move the operator's cursor, set the terminal title, or hide text.

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::Duration;

use crate::Millis;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Escape every control character (C0, DEL, C1) and the Unicode bidi and zero-width format
/// controls, so text from the database prints as inert characters on one line.
/// `\n` becomes `⏎`-free `\n` escape text; use [`sanitize_multiline`] where lines are wanted.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Like [`sanitize`], but keeps newlines and tabs (stack traces, failure detail).
pub fn sanitize_multiline(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// Bytes that may not be UTF-8 (payloads): valid UTF-8 is sanitized, the rest shown as `\xNN`.
pub fn sanitize_bytes(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.utf8_chunks() {
        out.push_str(&sanitize(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

fn needs_escape(c: char, keep_lines: bool) -> bool {
    if keep_lines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control() || is_format_control(c)
}

/// Bidi overrides and isolates, zero-width joiners and the like: invisible characters that can
/// reorder or hide what an operator reads.
fn is_format_control(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}' | '\u{061C}' | '\u{FFF9}'..='\u{FFFB}')
}

fn escape(s: &str, keep_lines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c, keep_lines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c, keep_lines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// Display width in terminal cells.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// Cut `s` to at most `max` cells, ending in `…` when cut. Wide characters are never split.
pub fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    Cow::Owned(out)
}

/// `2m ago`, `in 4s`, `now`, relative to `now`.
pub fn relative(now: Millis, at: Millis) -> String {
    let delta = now - at;
    if delta.abs() < 1000 {
        return "now".into();
    }
    let text = compact_duration(Duration::from_millis(delta.unsigned_abs()));
    if delta > 0 {
        format!("{text} ago")
    } else {
        format!("in {text}")
    }
}

/// The largest one or two units: `1m4s`, `2h5m`, `3d`, `500ms`.
pub fn compact_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let mut out = String::new();
    let mut rest = s;
    let mut parts = 0;
    for (size, name) in units {
        if rest >= size || (parts > 0 && parts < 2) {
            let n = rest / size;
            rest %= size;
            if n > 0 {
                out.push_str(&format!("{n}{name}"));
            }
            if n > 0 || parts > 0 {
                parts += 1;
            }
            if parts == 2 {
                break;
            }
        }
    }
    if out.is_empty() {
        out = format!("{s}s");
    }
    out
}

/// Like [`compact_duration`] but keeps tenths of a second under a minute (`1.5s`), for delay
/// tables where 500 ms steps matter.
pub fn precise_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if (1000..60_000).contains(&ms) && ms % 1000 != 0 {
        let text = format!("{:.1}", ms as f64 / 1000.0);
        return format!("{}s", text.trim_end_matches('0').trim_end_matches('.'));
    }
    compact_duration(d)
}

/// RFC 3339 in UTC with milliseconds: `2026-11-30T14:02:12.301Z`.
pub fn rfc3339(at: Millis) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(at.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// `14:02:12.301` (UTC), for log lines.
pub fn clock_time(at: Millis) -> String {
    let full = rfc3339(at);
    full.get(11..23).unwrap_or(&full).to_string()
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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

/// serde_json escapes C0 controls but writes DEL, C1 controls and bidi/zero-width characters
/// raw. Those only ever occur inside JSON strings, so writing them as `\uXXXX` keeps the
/// document's meaning while making it inert on a terminal.
pub fn json_terminal_safe(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c == '\u{7f}' || c.is_control() || is_format_control(c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c == '\u{7f}' || (c.is_control() && c != '\n') || is_format_control(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A colour for one cell; applied after padding so widths stay right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Plain,
    Red,
    Yellow,
    Green,
    Cyan,
    Dim,
    Bold,
}

impl Style {
    fn code(self) -> Option<&'static str> {
        match self {
            Style::Plain => None,
            Style::Red => Some("31"),
            Style::Yellow => Some("33"),
            Style::Green => Some("32"),
            Style::Cyan => Some("36"),
            Style::Dim => Some("2"),
            Style::Bold => Some("1"),
        }
    }

    /// `text` in this style when colour is on.
    pub fn paint(self, text: &str, color: bool) -> String {
        match (color, self.code()) {
            (true, Some(code)) => format!("\x1b[{code}m{text}\x1b[0m"),
            _ => text.to_string(),
        }
    }
}

/// The colour of a state's name.
pub fn state_style(state: crate::JobState) -> Style {
    use crate::JobState::*;
    match state {
        DeadLettered => Style::Red,
        Quarantined => Style::Yellow,
        Succeeded => Style::Green,
        Running => Style::Cyan,
        Cancelled => Style::Dim,
        Scheduled => Style::Plain,
    }
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

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn write(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(width(&c.text));
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
        // The line is cut cell by cell, before colouring: cutting the painted line was skipped
        // in colour, so at a terminal (where colour is on) long rows wrapped.
        let limit = term.width.filter(|_| self.flex.is_some());
        let line = |out: &mut dyn Write, cells: Vec<(String, Style)>| -> io::Result<()> {
            let mut text = String::new();
            let mut used = 0;
            for (i, (t, style)) in cells.iter().enumerate() {
                let mut cut = truncate(t, widths[i]);
                let left = limit.map_or(usize::MAX, |w| w.saturating_sub(used));
                let overflows = width(&cut) > left;
                if overflows {
                    cut = Cow::Owned(truncate(&cut, left).into_owned());
                }
                let last = i + 1 == cells.len() || overflows;
                let pad = if last { 0 } else { widths[i] - width(&cut) };
                text.push_str(&style.paint(&cut, term.color));
                text.push_str(&" ".repeat(pad));
                used += width(&cut) + pad;
                if last {
                    break;
                }
                text.push_str("  ");
                used += 2;
            }
            writeln!(out, "{}", text.trim_end())
        };
        line(
            out,
            self.headers.iter().map(|h| (h.clone(), if term.color { Style::Bold } else { Style::Plain })).collect(),
        )?;
        for row in &self.rows {
            line(out, row.iter().take(n).map(|c| (c.text.clone(), c.style)).collect())?;
        }
        Ok(())
    }
}

/// `key  value` lines with the keys aligned, for `jobs show` and friends.
pub fn write_fields(out: &mut dyn Write, fields: &[(&str, String)]) -> io::Result<()> {
    let w = fields.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
    for (k, v) in fields {
        writeln!(out, "  {k:<w$}  {v}")?;
    }
    Ok(())
}

/// `1.2 KiB`, `57 B`.
pub fn bytes(n: usize) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// Single-quote `s` for a shell when it needs it, so a printed command can be pasted back.
pub fn shell_quote(s: &str) -> Cow<'_, str> {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', "'\\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_escapes_every_control() {
        assert_eq!(sanitize("a\u{1b}]0;title\u{7}b"), "a\\e]0;title\\x07b");
        assert_eq!(sanitize("x\u{9b}31m\u{7f}"), "x\\x9b31m\\x7f");
        assert_eq!(sanitize("line1\nline2"), "line1\\nline2");
        assert_eq!(sanitize_multiline("line1\nline2\t!"), "line1\nline2\t!");
        assert_eq!(sanitize("rtl \u{202E}evil"), "rtl \\u{202e}evil");
        assert_eq!(sanitize("plain ünïcödé 漢字"), "plain ünïcödé 漢字");
        assert_eq!(sanitize_bytes(b"ok\xff\x1b"), "ok\\xff\\e");
    }

    #[test]
    fn truncate_respects_wide_characters() {
        assert_eq!(truncate("hello world", 5), "hell…");
        assert_eq!(truncate("漢字漢字", 5), "漢字…");
        assert_eq!(truncate("short", 10), "short");
    }

    #[test]
    fn durations_read_like_the_design() {
        assert_eq!(compact_duration(Duration::from_secs(64)), "1m4s");
        assert_eq!(compact_duration(Duration::from_secs(300)), "5m");
        assert_eq!(compact_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(compact_duration(Duration::from_secs(2)), "2s");
        assert_eq!(compact_duration(Duration::from_secs(3 * 86400 + 7200)), "3d2h");
        assert_eq!(relative(10_000, 8_000), "2s ago");
        assert_eq!(relative(10_000, 14_000), "in 4s");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(clock_time(1_000), "00:00:01.000");
    }
}
