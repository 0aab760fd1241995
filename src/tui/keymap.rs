//! Keys to actions, and the list of keys the help overlay and the footer show. The mapping
//! depends only on the mode (typing a filter, answering a dialog, or normal), so it is one
//! table to read and to test.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::{Action, Mode};
use super::data::View;

/// The action for a key in `mode`, if it has one.
pub fn action_for(mode: &Mode, key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
        return Some(Action::Quit);
    }
    match mode {
        Mode::Filter { .. } => match key.code {
            KeyCode::Enter => Some(Action::FilterSubmit),
            KeyCode::Esc => Some(Action::FilterCancel),
            KeyCode::Backspace => Some(Action::FilterBackspace),
            KeyCode::Char('u') if ctrl => Some(Action::FilterCancel),
            KeyCode::Char(c) if !ctrl => Some(Action::FilterChar(c)),
            _ => None,
        },
        Mode::Confirm(_) => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::Confirm),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => Some(Action::Decline),
            _ => None,
        },
        Mode::Help | Mode::Results(_) => Some(Action::Back),
        Mode::Preparing { .. } | Mode::Running { .. } => match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::Back),
            _ => None,
        },
        Mode::Normal => normal(key),
    }
}

fn normal(key: KeyEvent) -> Option<Action> {
    Some(match key.code {
        KeyCode::Char('q') | KeyCode::Esc => Action::Back,
        KeyCode::Tab | KeyCode::Char('l') | KeyCode::Right => Action::NextView,
        KeyCode::BackTab | KeyCode::Char('h') | KeyCode::Left => Action::PrevView,
        KeyCode::Char(c @ '1'..='6') => Action::ShowView(View::ALL[c as usize - '1' as usize]),
        KeyCode::Char('j') | KeyCode::Down => Action::Down,
        KeyCode::Char('k') | KeyCode::Up => Action::Up,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::Char('d') if key.modifiers.contains(KeyModifiers::CONTROL) => Action::PageDown,
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => Action::PageUp,
        KeyCode::Home => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Char('g') => Action::G,
        KeyCode::Enter => Action::Open,
        KeyCode::Char(' ') => Action::ToggleMark,
        KeyCode::Char('r') => Action::Requeue,
        KeyCode::Char('x') => Action::Cancel,
        KeyCode::Char('e') => Action::Reveal,
        KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Char('/') => Action::StartFilter,
        _ => return None,
    })
}

/// Every key, for the help overlay: (keys, what they do).
pub const HELP: &[(&str, &str)] = &[
    ("Tab Shift-Tab, l h", "next / previous view"),
    ("1 … 6", "Dead-Lettered Quarantined Running Scheduled Queues Log"),
    ("j k, ↓ ↑", "move the selection (scroll the detail pane)"),
    ("PgDn PgUp", "a page down / up (pages through the store)"),
    ("gg G, Home End", "first / last row"),
    ("Enter", "open the job; a group or queue opens as its jobs"),
    ("Esc, q", "back: pane, marks, group; quit at the top"),
    ("g", "group Dead-Lettered by cause, Quarantined by reason"),
    ("/", "filter: wire:W queue:Q cause:TEXT since:1h, or text"),
    ("Space", "mark / unmark the job and move down"),
    ("r", "requeue the open, marked or selected jobs, or group"),
    ("x", "cancel the open, marked or selected jobs"),
    ("e", "reveal failure detail (view-failure-detail; audited)"),
    ("p", "pause / resume refreshing"),
    ("?", "this help"),
    ("Ctrl-C", "quit"),
];

/// The keys that work in `view` now, for the footer.
pub fn footer_keys(view: View, grouped: bool, detail: bool, read_only: bool) -> Vec<(&'static str, &'static str)> {
    let mut keys = vec![];
    if detail {
        keys.extend([("j/k", "scroll"), ("Esc", "back")]);
        if !read_only {
            keys.extend([("r", "requeue"), ("x", "cancel"), ("e", "reveal")]);
        }
        keys.extend([("?", "help"), ("q", "back")]);
        return keys;
    }
    keys.push(("j/k", "move"));
    match view {
        View::DeadLettered | View::Quarantined => {
            keys.push(("Enter", "open"));
            if !read_only {
                keys.push(("r", "requeue"));
            }
            keys.push(("g", if grouped { "jobs" } else { "group" }));
        }
        View::Running | View::Scheduled => {
            keys.push(("Enter", "open"));
            if !read_only {
                keys.push(("x", "cancel"));
            }
        }
        View::Queues => keys.push(("Enter", "scheduled jobs")),
        View::Log => keys.push(("Enter", "open job")),
    }
    // The essentials before the rest: a narrow footer drops from the end.
    keys.extend([("/", "filter"), ("?", "help"), ("q", "quit")]);
    if !grouped && view.state().is_some() {
        keys.push(("Space", "mark"));
        if !read_only && view.state().is_some_and(|s| s.is_terminal()) {
            keys.push(("e", "reveal"));
        }
    }
    keys.extend([("p", "pause"), ("Tab", "view")]);
    keys
}
