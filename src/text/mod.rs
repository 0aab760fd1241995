//! The text layer `bw` and `bw top` share, in the `backwave-cli` package: escaping what came
//! from the database, numbers, times and widths as people read them, the state colours, and
//! parsing what an operator types. It depends on the library only; `cli` and `tui` import it, never each other's
//! helpers (library <- text <- tui <- cli). It never writes to a terminal itself.

mod errors;
mod escape;
mod format;
mod palette;
mod parse;
mod suggest;
mod workflow;

pub use errors::error_text;
pub use escape::{json_terminal_safe, sanitize, sanitize_bytes, sanitize_multiline};
pub use format::{
    attempts, bytes, clock_time, compact_duration, precise_duration, priority_text, relative, rfc3339, shell_quote,
    thousands, truncate, truncate_keeping_tail, width,
};
pub use palette::{state_short, state_tone, states_shown, Tone};
pub use parse::{
    parse_busy_timeout, parse_cause, parse_duration, parse_instant, parse_label, parse_priority, parse_state,
    parse_when, When,
};
pub use suggest::{did_you_mean, state_alias, unknown_filter_names};
pub use workflow::{workflow_counts, workflow_counts_short, workflow_status};
