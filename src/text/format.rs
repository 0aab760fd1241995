//! Numbers, times and widths as people read them: relative times (`2m ago`), compact durations
//! (`1m4s`), `1,234,567`, and cutting text to a number of terminal cells. Pure functions of their
//! arguments: the instant "now" is always passed in.

use std::borrow::Cow;
use std::time::Duration;

use backwave::{Job, Millis};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

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

/// [`truncate`], keeping the last `tail` cells of `s` after the `…` (`demo-host/42…#0002`): for
/// names whose end tells them apart. Plain [`truncate`] when `max` leaves no room for a head.
pub fn truncate_keeping_tail(s: &str, max: usize, tail: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if tail == 0 || max < tail + 2 {
        return truncate(s, max);
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for c in s.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > tail {
            break;
        }
        kept.push(c);
        used += w;
    }
    let end: String = kept.into_iter().rev().collect();
    Cow::Owned(format!("{}{end}", truncate(s, max - used)))
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

/// A priority with which end it is: `0 (claimed first)`, `9 (claimed last)`, `4`.
pub fn priority_text(p: u8) -> String {
    match p {
        backwave::PRIORITY_FIRST => format!("{p} (claimed first)"),
        backwave::PRIORITY_LAST => format!("{p} (claimed last)"),
        _ => p.to_string(),
    }
}

/// `3/5`: the attempt and the budget, or just the attempt when the budget is not known yet.
pub fn attempts(j: &Job) -> String {
    match j.max_attempts {
        Some(m) => format!("{}/{m}", j.attempt),
        None => j.attempt.to_string(),
    }
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
