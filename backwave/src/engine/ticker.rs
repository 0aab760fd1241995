//! The schedule ticker: one thread per engine that declares schedules. It sleeps until the next
//! tick of any of them, then asks the store to fire what is due (`Store::fire_due_schedules`).
//! It holds no lock and elects no leader: every engine of every host runs one, and the store's
//! compare-and-swap on each schedule's cursor gives each tick exactly one job.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::events::{Event, Hooks};
use super::outage::Watch;
use crate::schedule::SCHEDULE_TOUCH_EVERY;
use crate::store::{Clock, Store};

/// What the ticker counts and the engine handle reads.
#[derive(Default)]
pub(super) struct TickerStats {
    pub fired: AtomicU64,
    pub skipped: AtomicU64,
    pub errors: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

pub(super) struct Ticker {
    pub store: Store,
    pub names: Vec<String>,
    /// The longest sleep between looks at the store: a bound on how late a schedule changed by
    /// another process (paused, redeclared) is noticed, and the pace under a manual clock.
    pub max_sleep: Duration,
    pub stats: Arc<TickerStats>,
    /// A message or a hang-up ends the loop.
    pub stop: Receiver<()>,
    /// The ticker's view of the store, for the engine's once-per-outage events.
    pub watch: Watch,
    pub hooks: Arc<Hooks>,
}

impl Ticker {
    pub fn run(mut self) {
        let mut touched = Instant::now();
        loop {
            let began = Instant::now();
            let sleep = match self.store.fire_due_schedules(&self.names) {
                Ok((fired, next)) => {
                    self.watch.worked();
                    for f in &fired {
                        tell(f, &self.hooks);
                    }
                    let jobs: usize = fired.iter().map(|f| f.fired.len()).sum();
                    let skipped: usize = fired.iter().map(|f| f.skipped.len()).sum();
                    self.stats.fired.fetch_add(jobs as u64, Ordering::Relaxed);
                    self.stats.skipped.fetch_add(skipped as u64, Ordering::Relaxed);
                    self.until(next)
                }
                Err(e) => {
                    self.error(&e.to_string());
                    self.watch.failed(&e.to_string(), began);
                    self.max_sleep
                }
            };
            if touched.elapsed() >= SCHEDULE_TOUCH_EVERY {
                match self.store.touch_schedules(&self.names) {
                    Ok(()) => touched = Instant::now(),
                    Err(e) => self.error(&e.to_string()),
                }
            }
            match self.stop.recv_timeout(sleep) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        }
    }

    /// How long to sleep before the tick at `next`: on the system clock until then (at most
    /// `max_sleep`); a manual clock moves by the test's hand, so it is looked at every `max_sleep`.
    fn until(&self, next: Option<crate::Millis>) -> Duration {
        match (self.store.clock(), next) {
            (Clock::System, Some(at)) => {
                let ms = at.saturating_sub(self.store.now()).max(1) as u64;
                Duration::from_millis(ms).min(self.max_sleep)
            }
            _ => self.max_sleep,
        }
    }

    fn error(&self, why: &str) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        *self.stats.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
    }
}

/// One event per tick this engine fired (with its job) or skipped (a unique schedule whose last
/// job still held its key).
fn tell(f: &crate::store::TickFire, hooks: &Hooks) {
    for &(tick, job) in &f.fired {
        tracing::info!(backwave.schedule = %f.name, backwave.tick = tick, messaging.message.id = %job, "schedule tick fired");
        hooks.tell(&Event::ScheduleFired { schedule: f.name.clone(), tick, job });
    }
    for (tick, holder) in &f.skipped {
        tracing::info!(
            backwave.schedule = %f.name,
            backwave.tick = tick,
            backwave.held_by = %holder,
            "schedule tick skipped: the schedule's previous job is still pending"
        );
        hooks.tell(&Event::ScheduleSkipped { schedule: f.name.clone(), tick: *tick, held_by: *holder });
    }
}
