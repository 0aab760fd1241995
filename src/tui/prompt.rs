//! The `/` prompt's line: a [`tui_input::Input`] (Ctrl-U, Ctrl-W, Ctrl-A/E, arrows, Home/End,
//! Delete) and the history of filters applied, newest last. Keys reach it only as
//! [`InputRequest`]s from the keymap; no key typed here is ever a command.

use tui_input::Input;
pub use tui_input::InputRequest;

/// Filters kept for Up/Down in the prompt.
pub const HISTORY_KEEP: usize = 50;

/// The text being typed and where the cursor is in it.
#[derive(Clone, Debug, Default)]
pub struct Prompt {
    input: Input,
    /// Which history entry Up/Down reached (`None`: the line being typed, kept in `draft`).
    recalled: Option<usize>,
    draft: String,
}

impl PartialEq for Prompt {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value() && self.cursor() == other.cursor()
    }
}

impl Prompt {
    /// A prompt holding `text`, the cursor at its end.
    pub fn new(text: &str) -> Prompt {
        Prompt { input: Input::new(text.to_string()), recalled: None, draft: String::new() }
    }

    pub fn value(&self) -> &str {
        self.input.value()
    }

    /// The cursor, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.input.cursor()
    }

    /// The cursor in terminal cells, and the first cell to show so that it stays in `width`.
    pub fn visual(&self, width: usize) -> (usize, usize) {
        (self.input.visual_cursor(), self.input.visual_scroll(width))
    }

    pub fn edit(&mut self, request: InputRequest) {
        self.input.handle(request);
    }

    /// Up (`older`) or Down through `history` (oldest first); past the newest entry, the line
    /// that was being typed comes back.
    pub fn recall(&mut self, history: &[String], older: bool) {
        if history.is_empty() {
            return;
        }
        let next = match (self.recalled, older) {
            (None, true) => {
                self.draft = self.value().to_string();
                Some(history.len() - 1)
            }
            (None, false) => return,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i + 1 < history.len() => Some(i + 1),
            (Some(_), false) => None,
        };
        self.recalled = next;
        let text = match next {
            Some(i) => history[i].clone(),
            None => std::mem::take(&mut self.draft),
        };
        self.input = Input::new(text);
    }
}

/// Remember `text` as the newest entry (once: an entry already there moves to the end).
pub fn remember(history: &mut Vec<String>, text: &str) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    history.retain(|h| h != text);
    history.push(text.to_string());
    if history.len() > HISTORY_KEEP {
        history.remove(0);
    }
}
