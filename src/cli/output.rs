//! Everything the CLI and the dashboard print goes through here: escaping text that came from
//! the database, relative times, durations, numbers, and cutting text to a width. Nothing stored
//! in a job may move the operator's cursor, set the terminal title, or hide text.

use std::borrow::Cow;
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
