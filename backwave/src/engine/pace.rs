//! How far a worker group claims ahead of its handler threads: from the pace at which its
//! handlers have been finishing jobs. Pure arithmetic over the instants it is given; the
//! dispatcher feeds it and asks it, nothing else.

use std::time::{Duration, Instant};

/// The group holds, beyond one job per handler thread, what its handlers finish in this long at
/// their recent pace: long enough to cover a claim and a completion transaction, during which
/// the handlers would otherwise run dry. Slow handlers get nothing ahead, so jobs are not held
/// from other workers that could start them sooner; quick ones get batches as wide as the store
/// likes (a claim transaction of a thousand jobs costs little more than one of a hundred).
const AHEAD_HORIZON: Duration = Duration::from_millis(50);
/// Never more than this many ahead, however quick the handlers.
pub(super) const MAX_AHEAD: usize = 1024;
/// How often the pace is re-measured (and decays when slower).
const PACE_WINDOW: Duration = Duration::from_millis(50);
/// A window this far along already raises the pace when it is faster, so that a group coming
/// out of idle into a backlog reaches full width within a few milliseconds, not windows.
const EARLY_RISE: Duration = Duration::from_millis(5);

/// The pace at which a group's handlers finish jobs (jobs/s): it rises at once (within a few
/// milliseconds), decays by half per slower window, and drops to nothing after a window in
/// which no job finished (every handler busy with a slow job, or idle): a burst is met at once,
/// and a stalled group stops claiming ahead of its threads within one window.
#[derive(Debug)]
pub(super) struct Pace {
    since: Instant,
    finished: u64,
    rate: f64,
}

impl Pace {
    pub fn new(now: Instant) -> Self {
        Pace { since: now, finished: 0, rate: 0.0 }
    }

    /// `finished` more jobs have finished, as of `now`.
    pub fn record(&mut self, finished: usize, now: Instant) {
        self.finished += finished as u64;
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= PACE_WINDOW {
            let rate = self.finished as f64 / elapsed.as_secs_f64();
            self.rate = match self.finished {
                0 => 0.0,
                _ if rate >= self.rate => rate,
                _ => (self.rate + rate) / 2.0,
            };
            self.since = now;
            self.finished = 0;
        } else if elapsed >= EARLY_RISE {
            self.rate = self.rate.max(self.finished as f64 / elapsed.as_secs_f64());
        }
    }

    /// Jobs to hold claimed beyond one per handler thread (none below one job per horizon).
    pub fn ahead(&self) -> usize {
        ((self.rate * AHEAD_HORIZON.as_secs_f64()) as usize).min(MAX_AHEAD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = PACE_WINDOW;

    #[test]
    fn quick_handlers_get_their_horizon_ahead_at_once_and_never_more_than_the_cap() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        assert_eq!(pace.ahead(), 0, "nothing measured yet: no claim-ahead");
        // 500 jobs in one 50 ms window: 10,000 jobs/s, so 500 in the next 50 ms.
        pace.record(500, t0 + WINDOW);
        assert_eq!(pace.ahead(), 500);
        pace.record(1_000_000, t0 + 2 * WINDOW);
        assert_eq!(pace.ahead(), MAX_AHEAD);
    }

    #[test]
    fn a_slower_group_decays_and_a_stalled_one_claims_nothing_ahead_after_one_window() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        pace.record(800, t0 + WINDOW);
        assert_eq!(pace.ahead(), 800);
        pace.record(400, t0 + 2 * WINDOW);
        assert_eq!(pace.ahead(), 600, "halfway down to a window of 400");
        pace.record(0, t0 + 3 * WINDOW);
        assert_eq!(pace.ahead(), 0, "a window in which nothing finished");
        let mut t = t0 + 3 * WINDOW;
        // Four threads running 100 ms jobs: 40 jobs/s, 2 in a horizon.
        for _ in 0..40 {
            t += WINDOW;
            pace.record(2, t);
        }
        assert_eq!(pace.ahead(), 2);
    }

    #[test]
    fn a_faster_pace_counts_early_in_a_window_and_a_slower_one_only_at_its_end() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0);
        pace.record(10, t0 + EARLY_RISE / 2);
        assert_eq!(pace.ahead(), 0, "too early in the window to tell");
        // 100 jobs in 10 ms: 10,000 jobs/s already.
        pace.record(90, t0 + 2 * EARLY_RISE);
        assert_eq!(pace.ahead(), 500);
        pace.record(0, t0 + WINDOW - EARLY_RISE);
        assert_eq!(pace.ahead(), 500, "a slowdown waits for the window's end");
        // 100 in the whole window: 2,000 jobs/s, so halfway down from 10,000: 6,000.
        pace.record(0, t0 + WINDOW);
        assert_eq!(pace.ahead(), 300);
    }
}
