//! Boxes over the screen: the confirmation of an action (with its preview) and the help overlay.

use super::*;

pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2));
    let h = height.min(area.height.saturating_sub(2));
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

/// A box in the middle of the screen. Its last line is the key that answers or closes it
/// ("[y] yes [n] no", "any key: close"): the box is sized for wrapped lines and that line is
/// pinned to its bottom row, because a box of one row per line lost the prompt whenever a line
/// above it wrapped on a narrow terminal.
pub(super) fn popup(t: &Theme, area: Rect, buf: &mut Buffer, title: &str, mut lines: Vec<Line>, style: Option<Style>) {
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

pub(super) fn confirm(t: &Theme, p: &crate::tui::data::Preview, area: Rect, buf: &mut Buffer) {
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

pub(super) fn help(t: &Theme, area: Rect, buf: &mut Buffer) {
    let mut lines: Vec<Line> = keymap::HELP
        .iter()
        .map(|(k, what)| Line::from(vec![Span::styled(format!("{k:<20}"), t.heading()), Span::raw(*what)]))
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled("--read-only disables r, x and e. Any key closes this help.", t.dim()));
    popup(t, area, buf, "keys", lines, None);
}
