//! Progress of a long command, on stderr and written one way: at a terminal one line rewritten
//! in place; into a pipe or a file the first step and then a line at each tenth, so a log stays
//! short and a supervisor (or the fault tests) still sees the first committed batch. Work too
//! small to need it prints nothing. Never on stdout, which carries the command's data.

use std::io::IsTerminal;

use super::ctx::eprint_quiet;
use crate::text::thousands;

/// Below this many items a command finishes before a progress line would help.
pub const WORTH_SHOWING: u64 = 2_000;

/// One progress line: `requeued 40,000 of 100,000 (40%)`.
pub struct Progress {
    verb: &'static str,
    tty: bool,
    shown: bool,
    last_tenth: Option<u64>,
}

impl Progress {
    /// Progress of items that get `verb` done to them (`deleted`).
    pub fn new(verb: &'static str) -> Self {
        Progress { verb, tty: std::io::stderr().is_terminal(), shown: false, last_tenth: None }
    }

    /// `done` of `total` are finished.
    pub fn update(&mut self, done: u64, total: u64) {
        if total < WORTH_SHOWING {
            return;
        }
        let pct = done.min(total) * 100 / total;
        let line = format!("{} {} of {} ({pct}%)", self.verb, thousands(done), thousands(total));
        if self.tty {
            eprint_quiet(format_args!("\r{line}"));
            self.shown = true;
        } else if self.last_tenth != Some(pct / 10) {
            eprint_quiet(format_args!("{line}\n"));
            self.last_tenth = Some(pct / 10);
        }
    }
}

impl Drop for Progress {
    /// End the line rewritten in place, so what follows starts on its own line.
    fn drop(&mut self) {
        if self.shown {
            eprint_quiet(format_args!("\n"));
        }
    }
}
