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
    let group = p.target.group_filter().is_some();
    // A group requeue leaves the jobs no live worker handles alone unless forced (`f`), like
    // `bw requeue --state …` without `--force`: the dialog counts both parts.
    let left_alone = if p.op == Op::Requeue && group { p.would_requarantine } else { 0 };
    let schedule = matches!(p.target, crate::tui::data::Target::Schedule { .. });
    let title = match p.op {
        Op::Pause | Op::Resume | Op::Trigger if schedule => match &p.target {
            crate::tui::data::Target::Schedule { name } => format!("{} schedule {}?", p.op.verb(), clean(name, 40)),
            _ => unreachable!("a schedule target"),
        },
        Op::Pause | Op::Resume => format!("{} {}?", p.op.verb(), clean(&p.what, 50)),
        _ if left_alone > 0 => {
            format!("{} {} of {}?", p.op.verb(), thousands(p.affected - left_alone), jobs(p.affected))
        }
        _ => format!("{} {}?", p.op.verb(), jobs(p.affected)),
    };
    let mut lines = vec![Line::from(clean(&p.what, 70))];
    // A live worker is no reason to expect success for these: their payloads did not decode into
    // its type, and "0 would re-quarantine" once sent them all back to quarantine.
    let undecodable = (p.undecodable > 0).then(|| {
        Line::styled(
            match p.undecodable {
                1 => "1: payload did not decode; it quarantines again unless the handler now accepts it".to_string(),
                n => format!(
                    "{}: payload did not decode; they quarantine again unless the handler now accepts them",
                    thousands(n)
                ),
            },
            t.error(),
        )
    });
    let mut force_offered = false;
    match p.op {
        Op::Requeue if left_alone > 0 => {
            let unhandled = p.unhandled.iter().map(|w| clean(w, 30)).collect::<Vec<_>>().join(", ");
            lines.push(Line::from(format!(
                "{} will be Scheduled now with a fresh attempt budget;",
                thousands(p.affected - left_alone)
            )));
            lines.push(Line::styled(
                match left_alone {
                    1 => format!("1 has no live worker ({unhandled}) and is left alone: it would quarantine again"),
                    n => format!(
                        "{} have no live worker ({unhandled}) and are left alone: they would quarantine again",
                        thousands(n)
                    ),
                },
                t.error(),
            ));
            lines.extend(undecodable);
            force_offered = true;
        }
        Op::Requeue => {
            lines.push(Line::from(format!("{} will be Scheduled now with a fresh attempt budget", jobs(p.affected))));
            lines.extend(undecodable);
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
            let at_once = p.affected - p.running;
            lines.push(Line::from(format!("{} Scheduled will end Cancelled at once", thousands(at_once))));
            lines.push(Line::from(format!(
                "{} Running will be asked to stop (Cancelled when the handler stops)",
                thousands(p.running)
            )));
        }
        Op::RunNow => {
            let later = p.affected - p.already_due;
            lines.push(Line::from(format!(
                "{} will be due now: the next free worker runs them, attempt and budget unchanged",
                thousands(later)
            )));
            if p.already_due > 0 {
                let text = match p.already_due {
                    1 => "1 already due: left as it is".to_string(),
                    n => format!("{} already due: left as they are", thousands(n)),
                };
                lines.push(Line::styled(text, t.dim()));
            }
        }
        Op::Pause if schedule => {
            lines.push(Line::from("its ticks are dropped until resumed (never fired later); audited"));
        }
        Op::Resume if schedule => lines.push(Line::from("its next tick fires")),
        Op::Trigger => {
            lines.push(Line::from("one job now, outside the tick sequence (the next tick still fires); audited"))
        }
        Op::Pause => {
            lines.push(Line::from(format!(
                "{} Scheduled will wait: no worker of any process claims them while paused",
                thousands(p.affected)
            )));
            lines.push(Line::from(format!("{} Running finish normally; new jobs still enqueue", thousands(p.running))));
        }
        Op::Resume => {
            lines.push(Line::from(format!(
                "{} Scheduled become claimable again at the workers' next poll",
                thousands(p.affected)
            )));
        }
        Op::Reveal => {
            lines.push(Line::from("the failure detail will be shown, and the reveal recorded in the audit log"))
        }
        Op::EditPayload => {}
    }
    for s in p.skipped.iter().take(5) {
        lines.push(Line::styled(format!("skipped: {}", clean(s, 60)), t.dim()));
    }
    if p.skipped.len() > 5 {
        lines.push(Line::styled(format!("… and {} more skipped", p.skipped.len() - 5), t.dim()));
    }
    lines.push(Line::from(""));
    let mut answer = vec![Span::styled("[y]", t.heading())];
    if p.op == Op::Pause {
        // The CLI's `--for`: a pause that ends by itself, so a forgotten one cannot hold a
        // queue overnight.
        answer.push(Span::raw(" until resumed   "));
        for (i, d) in crate::tui::app::PAUSE_FOR.iter().enumerate() {
            answer.push(Span::styled(format!("[{}]", i + 1), t.heading()));
            answer.push(Span::raw(format!(" for {}   ", compact_duration(*d))));
        }
    } else {
        answer.push(Span::raw(" yes    "));
    }
    if force_offered {
        answer.extend([Span::styled("[f]", t.heading()), Span::raw(" include them anyway    ")]);
    }
    answer.extend([Span::styled("[n]", t.heading()), Span::raw(" no")]);
    lines.push(Line::from(answer));
    popup(t, area, buf, &title, lines, None);
}

/// After `E`: the edited payload, and what to do with it; or why it cannot be saved.
pub(super) fn payload_edit(t: &Theme, mode: &Mode, area: Rect, buf: &mut Buffer) {
    let shown =
        |bytes: &[u8]| clean(&String::from_utf8_lossy(bytes).split_whitespace().collect::<Vec<_>>().join(" "), 66);
    let key = |k: &'static str, what: &'static str| [Span::styled(k, t.heading()), Span::raw(what)];
    match mode {
        Mode::Editing { id, .. } => popup(
            t,
            area,
            buf,
            &format!("Editing the payload of {}", id.short()),
            vec![Line::from("the editor is open; save and quit it to come back")],
            None,
        ),
        Mode::SaveEdit { id, original, payload } => {
            let mut answer = Vec::new();
            answer.extend(key("[y]", " save    "));
            answer.extend(key("[r]", " save and requeue    "));
            answer.extend(key("[e]", " edit again    "));
            answer.extend(key("[n]", " discard"));
            let lines = vec![
                Line::from(vec![Span::styled("was  ", t.dim()), Span::raw(shown(original))]),
                Line::from(vec![Span::styled("now  ", t.heading()), Span::raw(shown(payload))]),
                Line::styled("valid JSON; the old payload is kept in the audit log", t.dim()),
                Line::from(""),
                Line::from(answer),
            ];
            popup(t, area, buf, &format!("Save the new payload of {}?", id.short()), lines, None);
        }
        Mode::EditInvalid { id, error, .. } => {
            let mut answer = Vec::new();
            answer.extend(key("[e]", " edit again    "));
            answer.extend(key("[n]", " discard"));
            let lines = vec![
                Line::styled(clean(error, 200), t.error()),
                Line::from("nothing was saved"),
                Line::from(""),
                Line::from(answer),
            ];
            popup(t, area, buf, &format!("The payload of {} is not valid JSON", id.short()), lines, Some(t.error()));
        }
        _ => {}
    }
}

pub(super) fn help(t: &Theme, area: Rect, buf: &mut Buffer) {
    // Every key fits an 80x24 terminal, a line each (the keymap test keeps them short): `?` (the
    // key that opened this) and Ctrl-C are said in the last line instead of lines of their own,
    // and the blank line before it goes where it would push keys off (found at 3 a.m.: P, t, E
    // and p were cut off at 80x24, and any key closed the help).
    let mut lines: Vec<Line> = keymap::HELP
        .iter()
        .filter(|(k, _)| !matches!(*k, "?" | "Ctrl-C"))
        .map(|(k, what)| Line::from(vec![Span::styled(format!("{k:<19}"), t.heading()), Span::raw(*what)]))
        .collect();
    if area.height as usize >= lines.len() + 6 {
        lines.push(Line::from(""));
    }
    lines.push(Line::styled("Ctrl-C quits. --read-only disables r x e n P t E. Any key closes this help.", t.dim()));
    popup(t, area, buf, "keys", lines, None);
}
