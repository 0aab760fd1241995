//! Progress of a long command, on stderr and written one way: at a terminal one line rewritten
//! in place; into a pipe or a file the first step and then a line at each tenth, so a log stays
//! short and a supervisor (or the fault tests) still sees the first committed batch. Work too
//! small to need it prints nothing. Never on stdout, which carries the command's data. An
//! interruptible run ([`Progress::interruptible`]) stops at a batch boundary on Ctrl-C and says
//! what was done.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::ctx::eprint_quiet;
use crate::text::thousands;

/// Below this many items a command finishes before a progress line would help.
pub const WORTH_SHOWING: u64 = 2_000;

/// The exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const INTERRUPTED: i32 = 130;

/// One progress line: `requeued 40,000 of 100,000 (40%)`.
pub struct Progress {
    verb: &'static str,
    tty: bool,
    shown: bool,
    last_tenth: Option<u64>,
    /// Set by SIGINT/SIGTERM on an interruptible run, with what to tell the operator to rerun.
    stop: Option<(Arc<AtomicBool>, &'static str)>,
}

impl Progress {
    /// Progress of items that get `verb` done to them (`deleted`).
    pub fn new(verb: &'static str) -> Self {
        Progress { verb, tty: std::io::stderr().is_terminal(), shown: false, last_tenth: None, stop: None }
    }

    /// Progress of a bulk action that a first Ctrl-C (or SIGTERM) stops at the next committed
    /// batch: [`Progress::update`] is called between batches, with no transaction open, so it
    /// prints what was done, that rerunning the command `to_finish` (`requeue the rest`), and
    /// exits 130. A second Ctrl-C exits at once (the batch in flight rolls back whole).
    /// Installed only once the operator has confirmed: a Ctrl-C at the prompt still just quits.
    pub fn interruptible(verb: &'static str, to_finish: &'static str) -> std::io::Result<Self> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Registered before the flag, so it sees the flag as the previous signal left it.
            signal_hook::flag::register_conditional_shutdown(sig, INTERRUPTED, Arc::clone(&flag))?;
            signal_hook::flag::register(sig, Arc::clone(&flag))?;
        }
        Ok(Progress { stop: Some((flag, to_finish)), ..Progress::new(verb) })
    }

    /// `done` of `total` are finished.
    pub fn update(&mut self, done: u64, total: u64) {
        self.show(done, total);
        if let Some((flag, to_finish)) = &self.stop {
            if flag.load(Ordering::SeqCst) {
                if self.shown {
                    eprint_quiet(format_args!("\n"));
                }
                eprint_quiet(format_args!(
                    "bw: interrupted: {} {} of {}; every batch is committed whole, nothing is half-done. Run the \
                     same command again to {to_finish}.\n",
                    self.verb,
                    thousands(done),
                    thousands(total)
                ));
                std::process::exit(INTERRUPTED);
            }
        }
    }

    fn show(&mut self, done: u64, total: u64) {
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
