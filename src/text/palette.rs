//! The one table of state colours. `bw` paints a [`Tone`] as an ANSI code and `bw top` as a
//! ratatui colour, so a state reads the same colour in both (they disagreed: Quarantined was
//! yellow in `bw` and magenta in `bw top`, Cancelled dim in one and yellow in the other).

use crate::JobState;

/// A colour named once for both painters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Red,
    Yellow,
    Green,
    Cyan,
    Blue,
    Dim,
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
    }
}
