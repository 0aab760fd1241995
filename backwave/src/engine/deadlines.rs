//! A small set of named deadlines for a loop that sleeps until the earliest of them: set one,
//! clear one, ask whether one is due and when the next falls. The dispatcher keeps one for its
//! own steps and the maintenance unit one for its chores; neither juggles instants by hand.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct Deadlines<K> {
    at: Vec<(K, Instant)>,
}

impl<K: Copy + PartialEq> Deadlines<K> {
    pub fn new() -> Self {
        Deadlines { at: Vec::new() }
    }

    pub fn set(&mut self, key: K, at: Instant) {
        match self.at.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = at,
            None => self.at.push((key, at)),
        }
    }

    pub fn clear(&mut self, key: K) {
        self.at.retain(|(k, _)| *k != key);
    }

    pub fn get(&self, key: K) -> Option<Instant> {
        self.at.iter().find(|(k, _)| *k == key).map(|(_, at)| *at)
    }

    /// Set and not in the future.
    pub fn is_due(&self, key: K, now: Instant) -> bool {
        self.get(key).is_some_and(|at| at <= now)
    }

    /// The earliest deadline among those `counts` keeps.
    pub fn next(&self, counts: impl Fn(K) -> bool) -> Option<Instant> {
        self.at.iter().filter(|(k, _)| counts(*k)).map(|(_, at)| *at).min()
    }
}

/// `t + d` for a duration the application chose: one too long for an `Instant` (a
/// `Duration::MAX` poll interval, sweep interval or grace period) means "not for a century",
/// never a panic.
pub(super) fn later(t: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    t.checked_add(d).or_else(|| t.checked_add(CENTURY)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum T {
        A,
        B,
        C,
    }

    #[test]
    fn the_next_deadline_is_the_earliest_of_those_asked_about_and_a_cleared_one_never_falls_due() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Deadlines::new();
        assert_eq!(d.next(|_| true), None);
        d.set(T::A, t0 + ms(30));
        d.set(T::B, t0 + ms(10));
        d.set(T::C, t0 + ms(20));
        assert_eq!(d.next(|_| true), Some(t0 + ms(10)));
        assert_eq!(d.next(|k| k != T::B), Some(t0 + ms(20)));
        d.set(T::B, t0 + ms(40));
        assert_eq!(d.get(T::B), Some(t0 + ms(40)), "set again moves it");
        assert!(d.is_due(T::C, t0 + ms(20)) && !d.is_due(T::A, t0 + ms(20)));
        d.clear(T::C);
        assert!(!d.is_due(T::C, t0 + ms(100)));
        assert_eq!(d.next(|_| true), Some(t0 + ms(30)));
    }
}
