//! Keys to actions, and the keys the help overlay and the footer show, all from one table,
//! [`BINDINGS`]: a key added there is bound, documented and hinted at once (they were three
//! lists that could disagree). The mapping depends only on the mode (typing a filter,
//! answering a dialog, or normal).

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
        // The line editor's keys (tui-input's table: Ctrl-U, Ctrl-W, Ctrl-A/E, Ctrl-K, arrows,
        // Home/End, Delete); any other key does nothing: none reaches the command keys.
        Mode::Filter { .. } => match key.code {
            KeyCode::Enter => Some(Action::FilterSubmit),
            KeyCode::Esc => Some(Action::FilterCancel),
            KeyCode::Up => Some(Action::FilterRecall { older: true }),
            KeyCode::Down => Some(Action::FilterRecall { older: false }),
            _ => tui_input::backend::crossterm::to_input_request(&crossterm::event::Event::Key(key))
                .map(Action::FilterEdit),
        },
        Mode::ConfirmQuit => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Char('q') => Some(Action::Confirm),
            _ => Some(Action::Decline),
        },
        Mode::Confirm(_) => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::Confirm),
            KeyCode::Char('f') => Some(Action::ConfirmForced),
            KeyCode::Char(c @ '1'..='3') => Some(Action::ConfirmPauseFor(c as usize - '1' as usize)),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => Some(Action::Decline),
            _ => None,
        },
        Mode::SaveEdit { .. } => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::SaveEdit { requeue: false }),
            KeyCode::Char('r') => Some(Action::SaveEdit { requeue: true }),
            KeyCode::Char('e') => Some(Action::ReopenEditor),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => Some(Action::Decline),
            _ => None,
        },
        Mode::EditInvalid { .. } => match key.code {
            KeyCode::Char('e') | KeyCode::Enter => Some(Action::ReopenEditor),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => Some(Action::Decline),
            _ => None,
        },
        // The editor has the terminal.
        Mode::Editing { .. } => None,
        Mode::Help | Mode::Results(_) => Some(Action::Back),
        Mode::Preparing { .. } | Mode::Running { .. } => match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::Back),
            _ => None,
        },
        Mode::Normal => normal(key),
    }
}

/// The action for a key while the terminal is too small for the dashboard: its screen says only
/// how to enlarge it and that `q` quits, so `q` (and Ctrl-C) quit and every other key does
/// nothing. A key whose effect the operator cannot see must not act on jobs (a blind Enter, `r`,
/// `y` requeued a job behind that screen).
pub fn action_when_too_small(key: KeyEvent) -> Option<Action> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        _ if key.kind == KeyEventKind::Release => None,
        KeyCode::Char('c') | KeyCode::Char('C') if ctrl => Some(Action::Quit),
        KeyCode::Char('q') | KeyCode::Char('Q') => Some(Action::Quit),
        _ => None,
    }
}

/// A key of the normal mode: a key code, with Control or without (other modifiers are
/// ignored, so Shift-G is `G`).
#[derive(Clone, Copy, Debug)]
pub struct Key {
    code: KeyCode,
    ctrl: bool,
}

const fn key(c: char) -> Key {
    Key { code: KeyCode::Char(c), ctrl: false }
}

const fn code(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ctrl(c: char) -> Key {
    Key { code: KeyCode::Char(c), ctrl: true }
}

/// Where the footer is drawn, which decides the hints it shows.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub view: View,
    pub grouped: bool,
    /// The detail pane of one job is open.
    pub detail: bool,
    pub read_only: bool,
}

impl Place {
    /// A view of one state's jobs (not grouped): marks work there.
    fn job_list(self) -> bool {
        !self.grouped && self.view.state().is_some()
    }

    fn dead_or_quarantined(self) -> bool {
        matches!(self.view, View::DeadLettered | View::Quarantined)
    }

    fn running_or_scheduled(self) -> bool {
        matches!(self.view, View::Running | View::Scheduled)
    }
}

/// A footer hint: the key as the footer spells it, its word in a place (none: not shown there),
/// and its rank in the list footer and in the detail pane's footer. The essentials come first,
/// since a narrow footer drops hints from the end.
#[derive(Clone, Copy)]
pub struct Hint {
    key: &'static str,
    word: fn(Place) -> Option<&'static str>,
    rank: (u8, u8),
}

/// One row of the key table: the keys as the help overlay spells them, what they do, the
/// normal-mode keys and the action each gives, and the footer's hints. The keymap, the help
/// overlay and the footer are all read from [`BINDINGS`], so they cannot disagree.
#[derive(Clone, Copy)]
pub struct Binding {
    pub keys: &'static str,
    pub does: &'static str,
    acts: &'static [(Key, Action)],
    hints: &'static [Hint],
}

const NEVER: u8 = u8::MAX;

/// The views, in tab order: each one's digit, its name, and its file under `screens/` (whose
/// `VIEW` says its titles and screens). This row is what registers a view: `screens/mod.rs`
/// declares the file and makes the `View` enum from this list, and the digit row of
/// [`BINDINGS`] binds the digits (name the view in its help text too).
macro_rules! views {
    ($then:ident) => {
        $then! {
            '1' DeadLettered dead_lettered,
            '2' Quarantined quarantined,
            '3' Running running,
            '4' Scheduled scheduled,
            '5' Queues queues,
            '6' Log log,
            '7' Workers workers,
            '8' Schedules schedules,
            '9' Workflows workflows,
        }
    };
}
pub(crate) use views;

/// The digit row's keys, from [`views!`].
macro_rules! digits {
    ($($digit:literal $name:ident $file:ident,)*) => {
        &[$((key($digit), Action::ShowView(View::$name)),)*]
    };
}

/// Every key of the dashboard, in the order the help overlay lists them.
pub const BINDINGS: [Binding; 21] = [
    Binding {
        keys: "Tab Shift-Tab, l h",
        does: "next / previous view",
        acts: &[
            (code(KeyCode::Tab), Action::NextView),
            (key('l'), Action::NextView),
            (code(KeyCode::Right), Action::NextView),
            (code(KeyCode::BackTab), Action::PrevView),
            (key('h'), Action::PrevView),
            (code(KeyCode::Left), Action::PrevView),
        ],
        hints: &[Hint { key: "Tab", word: |p| (!p.detail).then_some("view"), rank: (11, NEVER) }],
    },
    Binding { keys: "1 … 9", does: "the views, in the order of their tabs", acts: views!(digits), hints: &[] },
    Binding {
        keys: "j k, ↓ ↑",
        does: "move the selection (scroll the detail pane)",
        acts: &[
            (key('j'), Action::Down),
            (code(KeyCode::Down), Action::Down),
            (key('k'), Action::Up),
            (code(KeyCode::Up), Action::Up),
        ],
        hints: &[Hint { key: "j/k", word: |p| Some(if p.detail { "scroll" } else { "move" }), rank: (0, 0) }],
    },
    Binding {
        keys: "PgDn PgUp",
        does: "a page down / up (pages through the store)",
        acts: &[
            (code(KeyCode::PageDown), Action::PageDown),
            (code(KeyCode::PageUp), Action::PageUp),
            (ctrl('d'), Action::PageDown),
            (ctrl('u'), Action::PageUp),
        ],
        hints: &[],
    },
    Binding {
        keys: "gg G, Home End",
        does: "first / last row",
        acts: &[(code(KeyCode::Home), Action::Top), (code(KeyCode::End), Action::Bottom), (key('G'), Action::Bottom)],
        hints: &[],
    },
    Binding {
        keys: "Enter",
        does: "open the job; a group or queue opens as its jobs",
        acts: &[(code(KeyCode::Enter), Action::Open)],
        hints: &[Hint {
            key: "Enter",
            word: |p| match p.view {
                _ if p.detail => None,
                View::Workers => None,
                View::Queues => Some("scheduled jobs"),
                View::Log => Some("open job"),
                _ => Some("open"),
            },
            rank: (1, NEVER),
        }],
    },
    Binding {
        keys: "Esc, q",
        does: "back (pane, marks, group); q quits at the top, Esc never",
        acts: &[(key('q'), Action::Back), (code(KeyCode::Esc), Action::Close)],
        hints: &[
            Hint { key: "Esc", word: |p| p.detail.then_some("back"), rank: (NEVER, 1) },
            Hint { key: "q", word: |p| Some(if p.detail { "back" } else { "quit" }), rank: (7, 6) },
        ],
    },
    Binding {
        keys: "g",
        does: "group Dead-Lettered by cause, Quarantined by reason",
        acts: &[(key('g'), Action::G)],
        hints: &[Hint {
            key: "g",
            word: |p| (!p.detail && p.dead_or_quarantined()).then_some(if p.grouped { "jobs" } else { "group" }),
            rank: (3, NEVER),
        }],
    },
    Binding {
        keys: "/",
        does: "filter: wire:W queue:Q cause:TEXT since:1h, or text",
        acts: &[(key('/'), Action::StartFilter)],
        hints: &[Hint {
            key: "/",
            word: |p| (!p.detail && p.view != View::Workers).then_some("filter"),
            rank: (5, NEVER),
        }],
    },
    Binding {
        keys: "Space",
        does: "mark / unmark the job and move down",
        acts: &[(key(' '), Action::ToggleMark)],
        hints: &[Hint { key: "Space", word: |p| (!p.detail && p.job_list()).then_some("mark"), rank: (8, NEVER) }],
    },
    Binding {
        keys: "r",
        does: "requeue the open, marked or selected jobs, or group",
        acts: &[(key('r'), Action::Requeue)],
        hints: &[Hint {
            key: "r",
            word: |p| (!p.read_only && (p.detail || p.dead_or_quarantined())).then_some("requeue"),
            rank: (2, 2),
        }],
    },
    Binding {
        keys: "x",
        does: "cancel the open, marked or selected jobs",
        acts: &[(key('x'), Action::Cancel)],
        hints: &[Hint {
            key: "x",
            word: |p| (!p.read_only && (p.detail || p.running_or_scheduled())).then_some("cancel"),
            rank: (4, 3),
        }],
    },
    Binding {
        keys: "e",
        does: "reveal failure detail (view-failure-detail; audited)",
        acts: &[(key('e'), Action::Reveal)],
        hints: &[Hint {
            key: "e",
            word: |p| {
                let terminal_list = p.job_list() && p.view.state().is_some_and(|s| s.is_terminal());
                (!p.read_only && (p.detail || terminal_list)).then_some("reveal")
            },
            rank: (9, 4),
        }],
    },
    Binding {
        keys: "X",
        does: "cancel all of the Scheduled or Running list, as filtered",
        acts: &[(key('X'), Action::CancelMatching)],
        hints: &[Hint {
            key: "X",
            word: |p| (!p.read_only && !p.detail && p.running_or_scheduled()).then_some("cancel all"),
            rank: (15, NEVER),
        }],
    },
    Binding {
        keys: "n",
        does: "run now: the open, marked or selected Scheduled jobs",
        acts: &[(key('n'), Action::RunNow)],
        hints: &[Hint {
            key: "n",
            word: |p| (!p.read_only && (p.detail || p.view == View::Scheduled)).then_some("run now"),
            rank: (12, 7),
        }],
    },
    Binding {
        keys: "P",
        does: "pause / resume the queue, schedule or job's wire name",
        acts: &[(key('P'), Action::PauseResume)],
        hints: &[Hint {
            key: "P",
            word: |p| {
                let here = p.detail || matches!(p.view, View::Queues | View::Schedules) || p.job_list();
                (!p.read_only && here).then_some("pause/resume")
            },
            rank: (13, 8),
        }],
    },
    Binding {
        keys: "t",
        does: "trigger the selected schedule: one job now (audited)",
        acts: &[(key('t'), Action::Trigger)],
        hints: &[Hint {
            key: "t",
            word: |p| (!p.read_only && !p.detail && p.view == View::Schedules).then_some("trigger"),
            rank: (2, NEVER),
        }],
    },
    Binding {
        keys: "E",
        does: "edit the payload in $EDITOR (Dead-Lettered, Quarantined)",
        acts: &[(key('E'), Action::EditPayload)],
        hints: &[Hint {
            key: "E",
            word: |p| (!p.read_only && (p.detail || (p.job_list() && p.dead_or_quarantined()))).then_some("edit"),
            rank: (14, 9),
        }],
    },
    Binding {
        keys: "p",
        does: "freeze / unfreeze the screen (stop refreshing)",
        acts: &[(key('p'), Action::TogglePause)],
        hints: &[Hint { key: "p", word: |p| (!p.detail).then_some("freeze"), rank: (10, NEVER) }],
    },
    Binding {
        keys: "?",
        does: "this help",
        acts: &[(key('?'), Action::Help)],
        hints: &[Hint { key: "?", word: |_| Some("help"), rank: (6, 5) }],
    },
    Binding { keys: "Ctrl-C", does: "quit", acts: &[(ctrl('c'), Action::Quit)], hints: &[] },
];

/// Every key, for the help overlay: (keys, what they do), read from [`BINDINGS`].
pub const HELP: [(&str, &str); BINDINGS.len()] = {
    let mut out = [("", ""); BINDINGS.len()];
    let mut i = 0;
    while i < BINDINGS.len() {
        out[i] = (BINDINGS[i].keys, BINDINGS[i].does);
        i += 1;
    }
    out
};

fn normal(key: KeyEvent) -> Option<Action> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    BINDINGS
        .iter()
        .flat_map(|b| b.acts)
        .find(|(k, _)| k.code == key.code && (!k.ctrl || ctrl))
        .map(|(_, action)| action.clone())
}

/// The hints for the footer in `place`, in its order, read from [`BINDINGS`].
pub fn footer_keys(place: Place) -> Vec<(&'static str, &'static str)> {
    let mut hints: Vec<(u8, &'static str, &'static str)> = BINDINGS
        .iter()
        .flat_map(|b| b.hints)
        .filter_map(|h| {
            let rank = if place.detail { h.rank.1 } else { h.rank.0 };
            let word = (h.word)(place)?;
            (rank != NEVER).then_some((rank, h.key, word))
        })
        .collect();
    hints.sort_by_key(|(rank, ..)| *rank);
    hints.into_iter().map(|(_, key, word)| (key, word)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every help line fits an 80-column terminal on one row (the overlay's inner width is 76:
    /// a key column of 19), so that all of them fit 24 rows.
    #[test]
    fn every_help_line_fits_80_columns() {
        for (k, what) in HELP {
            assert!(k.chars().count() < 19 && what.chars().count() <= 57, "{k}: {what}");
        }
    }

    /// A key listed twice would silently do only the first row's action while the help
    /// overlay promised the second.
    #[test]
    fn no_key_is_bound_twice() {
        for b in BINDINGS {
            for (k, action) in b.acts {
                let mods = if k.ctrl { KeyModifiers::CONTROL } else { KeyModifiers::NONE };
                let got = normal(KeyEvent::new(k.code, mods)).expect("a bound key has an action");
                assert_eq!(format!("{got:?}"), format!("{action:?}"), "{:?} in '{}'", k.code, b.keys);
            }
        }
    }

    /// The digit row's keys are written by hand: they span the digits bound, one per view in
    /// tab order (its text says so; the names would not fit an 80-column help).
    #[test]
    fn the_digit_row_binds_every_view_in_tab_order() {
        let row = BINDINGS.iter().find(|b| b.keys.starts_with("1 ")).expect("a digit row");
        assert_eq!(row.keys, format!("1 … {}", View::ALL.len()));
        assert_eq!(row.acts.len(), View::ALL.len());
        for (i, (k, action)) in row.acts.iter().enumerate() {
            assert_eq!(k.code, KeyCode::Char(char::from_digit(i as u32 + 1, 10).unwrap()));
            assert!(matches!(action, Action::ShowView(v) if *v == View::ALL[i]), "{action:?}");
        }
    }

    #[test]
    fn the_footer_only_hints_keys_the_help_lists() {
        let help: Vec<&str> = HELP.iter().flat_map(|(k, _)| k.split([' ', ','])).collect();
        for view in View::ALL {
            for (grouped, detail, read_only) in [(false, false, false), (true, false, true), (false, true, false)] {
                for (key, _) in footer_keys(Place { view, grouped, detail, read_only }) {
                    let first = key.split('/').next().unwrap_or(key);
                    assert!(help.contains(&first), "footer hint '{key}' is not in the help");
                }
            }
        }
    }
}
