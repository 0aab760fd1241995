//! Making text from the database inert: every control character (C0, DEL, C1) and the Unicode
//! bidi and zero-width format controls become visible escapes. Nothing stored in a job may move
//! the operator's cursor, set the terminal title, or hide text, in `bw` or in `bw top`.

use std::borrow::Cow;

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
}
