//! The one table of state colours, and the colours themselves. `bw` paints a [`Tone`] as an ANSI
//! code ([`Tone::paint`]) and `bw top` as a ratatui colour, so a state reads the same in both (they disagreed: Quarantined was
//! yellow in `bw` and magenta in `bw top`, Cancelled dim in one and yellow in the other).

use backwave::JobState;

/// A colour (or emphasis) named once for both painters; applied after padding so widths stay
/// right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tone {
    #[default]
    Plain,
    Red,
    Yellow,
    Green,
    Cyan,
    Blue,
    Dim,
    Bold,
}

impl Tone {
    /// The ANSI SGR parameter, or none for plain text.
    pub fn sgr(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Red => Some("31"),
            Tone::Yellow => Some("33"),
            Tone::Green => Some("32"),
            Tone::Cyan => Some("36"),
            Tone::Blue => Some("34"),
            Tone::Dim => Some("2"),
            Tone::Bold => Some("1"),
        }
    }

    /// `text` in this tone as ANSI when colour is on, else unchanged.
    pub fn paint(self, text: &str, color: bool) -> String {
        self.painted(text, color).to_string()
    }

    /// [`Tone::paint`] without a copy: written straight into a line (`bw log tail`).
    pub fn painted(self, text: &str, color: bool) -> Painted<'_> {
        Painted { code: if color { self.sgr() } else { None }, text }
    }
}

/// `text` as [`Tone::painted`] shows it.
pub struct Painted<'a> {
    code: Option<&'static str>,
    text: &'a str,
}

impl std::fmt::Display for Painted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) => write!(f, "\x1b[{code}m{}\x1b[0m", self.text),
            None => f.write_str(self.text),
        }
    }
}

/// The colour of a state's name: red for what failed, yellow for deploy drift, green for done,
/// cyan for in flight, blue for waiting, dim for what an operator ended.
pub fn state_tone(state: JobState) -> Tone {
    match state {
        JobState::DeadLettered => Tone::Red,
        JobState::Quarantined => Tone::Yellow,
        JobState::Succeeded => Tone::Green,
        JobState::Running => Tone::Cyan,
        JobState::Scheduled => Tone::Blue,
        JobState::Cancelled => Tone::Dim,
        JobState::Waiting => Tone::Plain,
    }
}

/// The states a table of counts has a column for: every state, but Waiting only when some job
/// waits (a store without workflows keeps the six columns its operators know).
pub fn states_shown(any_waiting: bool) -> Vec<JobState> {
    JobState::ALL.into_iter().filter(|s| any_waiting || *s != JobState::Waiting).collect()
}

/// A state's name in four or five letters, for tables at 80 columns: `DEAD`, `QUAR`.
pub fn state_short(state: JobState) -> &'static str {
    match state {
        JobState::Scheduled => "SCHED",
        JobState::Running => "RUN",
        JobState::Succeeded => "OK",
        JobState::DeadLettered => "DEAD",
        JobState::Quarantined => "QUAR",
        JobState::Cancelled => "CANC",
        JobState::Waiting => "WAIT",
    }
}
