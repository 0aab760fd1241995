//! Backoff and RetryPolicy: how long to wait after a failed attempt, and how many attempts a
//! worker group allows. Pure functions of the attempt number (and a jitter seed kept with the
//! job): no clock, no randomness of their own, so a written delay table never changes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// How a wait grows from one failed attempt to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// d, d, d, …
    Fixed,
    /// d, 2d, 3d, …
    Linear,
    /// d, 2d, 4d, …
    Exponential,
}

/// A retry curve you can hold: the wait before the next attempt after attempt `n` failed.
///
/// ```
/// use std::time::Duration;
/// use backwave::Backoff;
/// let b = Backoff::exponential(Duration::from_secs(2)).cap(Duration::from_secs(300));
/// assert_eq!(b.delay(9), Duration::from_secs(300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    shape: Shape,
    interval: Duration,
    max_attempts: Option<u32>,
    cap: Option<Duration>,
    jitter: f64,
}

impl Backoff {
    /// The same wait after every failed attempt: `interval`, `interval`, … For a dependency
    /// that recovers on its own schedule (a nightly batch window, a polled resource).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = backwave::Backoff::fixed(Duration::from_secs(30));
    /// assert_eq!((b.delay(1), b.delay(7)), (Duration::from_secs(30), Duration::from_secs(30)));
    /// ```
    pub fn fixed(interval: Duration) -> Self {
        Self::new(Shape::Fixed, interval)
    }

    /// A wait that grows by `interval` per failed attempt: `interval`, 2×, 3×, …
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = backwave::Backoff::linear(Duration::from_secs(10));
    /// assert_eq!(b.delay(3), Duration::from_secs(30));
    /// ```
    pub fn linear(interval: Duration) -> Self {
        Self::new(Shape::Linear, interval)
    }

    /// A wait that doubles per failed attempt: `interval`, 2×, 4×, 8×, … The usual choice for a
    /// remote service under load; bound it with [`Backoff::cap`] and spread a crowd of retries
    /// with [`Backoff::jitter`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = backwave::Backoff::exponential(Duration::from_secs(1));
    /// assert_eq!(b.delay(4), Duration::from_secs(8));
    /// ```
    pub fn exponential(interval: Duration) -> Self {
        Self::new(Shape::Exponential, interval)
    }

    fn new(shape: Shape, interval: Duration) -> Self {
        Backoff { shape, interval, max_attempts: None, cap: None, jitter: 0.0 }
    }

    /// How many attempts in TOTAL, the first one included. Checked by [`Backoff::validate`].
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// No single wait may exceed `cap` (jitter included).
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = Some(cap);
        self
    }

    /// Spread each wait uniformly ± `fraction` of itself. Opt-in: the default is exact.
    /// Checked by [`Backoff::validate`]: `fraction` must be a number in 0..=1.
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// How the wait grows.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The first wait, and the step the shape grows by.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The attempt budget set with [`Backoff::max_attempts`], if any.
    pub fn max_attempts_value(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The longest single wait set with [`Backoff::cap`], if any.
    pub fn cap_value(&self) -> Option<Duration> {
        self.cap
    }

    /// The jitter fraction set with [`Backoff::jitter`] (0 when exact).
    pub fn jitter_value(&self) -> f64 {
        self.jitter
    }

    /// Check the curve's values: a jitter outside 0..=1 (or not a number) and a budget of 0
    /// attempts are [`Error::InvalidPolicy`]. Out-of-range values are errors, never panics;
    /// [`RetryPolicy::new`] calls this.
    pub fn validate(&self) -> Result<()> {
        if !self.jitter.is_finite() || !(0.0..=1.0).contains(&self.jitter) {
            return Err(Error::InvalidPolicy(format!("jitter must be a fraction from 0 to 1, got {}", self.jitter)));
        }
        if self.max_attempts == Some(0) {
            return Err(Error::InvalidPolicy("max attempts must be at least 1 (it counts the first attempt)".into()));
        }
        Ok(())
    }

    /// The exact wait after failed attempt `n` (1-based), before jitter. Saturates instead of
    /// overflowing.
    pub fn delay(&self, n: u32) -> Duration {
        let n = n.max(1);
        let base = match self.shape {
            Shape::Fixed => self.interval,
            Shape::Linear => self.interval.saturating_mul(n),
            Shape::Exponential => {
                // d·2^(n-1) by doubling: at most ~94 doublings take 1 ns to Duration::MAX, so
                // this stops early for any n (a factor capped at u32::MAX stopped growing at 33).
                let mut d = self.interval;
                for _ in 1..n {
                    if d.is_zero() || d == Duration::MAX {
                        break;
                    }
                    d = d.saturating_mul(2);
                }
                d
            }
        };
        self.capped(base)
    }

    /// The wait after failed attempt `n` with this curve's jitter drawn from `seed`.
    /// The same `(n, seed)` gives the same wait, always.
    pub fn delay_with_seed(&self, n: u32, seed: u64) -> Duration {
        let exact = self.delay(n);
        if self.jitter == 0.0 || !self.jitter.is_finite() {
            return exact;
        }
        let unit = unit_interval(seed, n); // [0, 1)
        let factor = 1.0 + self.jitter.clamp(0.0, 1.0) * (2.0 * unit - 1.0);
        // `from_secs_f64` panics past Duration::MAX; a saturated curve times 1 + jitter gets there.
        let spread = Duration::try_from_secs_f64((exact.as_secs_f64() * factor).max(0.0)).unwrap_or(Duration::MAX);
        self.capped(spread)
    }

    fn capped(&self, d: Duration) -> Duration {
        match self.cap {
            Some(cap) => d.min(cap),
            None => d,
        }
    }
}

/// A plain duration is a fixed policy.
impl From<Duration> for Backoff {
    fn from(d: Duration) -> Self {
        Backoff::fixed(d)
    }
}

/// A uniform draw in [0, 1) from a seed and an attempt number (SplitMix64).
fn unit_interval(seed: u64, n: u32) -> f64 {
    let mut state = seed ^ (n as u64).wrapping_mul(SPLITMIX_GAMMA);
    (splitmix64(&mut state) >> 11) as f64 / (1u64 << 53) as f64
}

const SPLITMIX_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// One step of SplitMix64: advance `state` and return the next 64 random bits. Tiny, fast and
/// the same on every platform, so a seed names one jitter curve (here) or one generated store
/// (the operator tool's demo). The one copy of the mixer in the workspace.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(SPLITMIX_GAMMA);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The curve a retry policy evaluates: a [`Backoff`] value or any pure `Fn(attempt) -> Duration`.
#[derive(Clone)]
pub enum BackoffFn {
    /// A [`Backoff`] curve (a plain `Duration` converts into a fixed one).
    Curve(Backoff),
    /// A function of the failed attempt's number (1-based) to the wait after it. It must be
    /// pure: it is evaluated at every claim to write the job's delay table.
    Func(Arc<dyn Fn(u32) -> Duration + Send + Sync>),
}

impl fmt::Debug for BackoffFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackoffFn::Curve(b) => b.fmt(f),
            BackoffFn::Func(_) => f.write_str("Func(..)"),
        }
    }
}

impl From<Backoff> for BackoffFn {
    fn from(b: Backoff) -> Self {
        BackoffFn::Curve(b)
    }
}

impl From<Duration> for BackoffFn {
    fn from(d: Duration) -> Self {
        BackoffFn::Curve(Backoff::fixed(d))
    }
}

impl<F> From<F> for BackoffFn
where
    F: Fn(u32) -> Duration + Send + Sync + 'static,
{
    fn from(f: F) -> Self {
        BackoffFn::Func(Arc::new(f))
    }
}

/// The largest attempt budget a [`RetryPolicy`] takes. Every claim writes `max_attempts - 1`
/// delays into the job row, so the budget is the table's size: `u32::MAX` attempts would ask
/// for a 34 GB table per claim. Ten thousand attempts at a 5-minute cap is five weeks of
/// retrying, in a table of about 70 KB.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

/// A retry policy: how many attempts in total, and how long to wait after each failed one. A
/// worker group has one ([`WorkerGroup::retry_policy`](crate::WorkerGroup::retry_policy)) for
/// the jobs it claims; a handler may carry its own instead
/// ([`Registration::retry`](crate::engine::Registration::retry)). The policy is written into
/// the job at each claim (its budget and its delay table), so the wait after a failed attempt
/// is the one the claiming policy chose, and a changed policy applies from a job's next claim.
///
/// ```
/// use std::time::Duration;
/// use backwave::{Backoff, RetryPolicy};
///
/// // Five attempts in all, waiting 1 s, 2 s, 4 s, 8 s between them.
/// let policy = RetryPolicy::new(5, Backoff::exponential(Duration::from_secs(1)))?;
/// assert_eq!(policy.delay_table(0).len(), 4);
/// // Any pure function of the failed attempt's number works too.
/// let flat = RetryPolicy::new(3, |_attempt| Duration::from_millis(500))?;
/// assert_eq!(flat.delay(2, 0), Duration::from_millis(500));
/// assert!(RetryPolicy::new(0, Duration::from_secs(1)).is_err());
/// # Ok::<(), backwave::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: BackoffFn,
}

impl RetryPolicy {
    /// `RetryPolicy::new(5, |_| Duration::from_millis(500))` reads like the seed's
    /// `new RetryPolicy { MaxAttempts = 5, Backoff = _ => TimeSpan.FromMilliseconds(500) }`.
    ///
    /// Errors ([`Error::InvalidPolicy`]): `max_attempts` of 0 or over [`MAX_ATTEMPTS_LIMIT`]; a
    /// curve [`Backoff::validate`] refuses; a function that panics for one of the attempts (it
    /// is evaluated once here, since a panic at claim time would stop the worker group); and a
    /// curve that carries its own `.max_attempts(m)` with `m` different from `max_attempts`: two
    /// budgets for one thing, and no silent preference between them.
    pub fn new(max_attempts: u32, backoff: impl Into<BackoffFn>) -> Result<Self> {
        let backoff = backoff.into();
        if max_attempts == 0 {
            return Err(Error::InvalidPolicy("max attempts must be at least 1 (it counts the first attempt)".into()));
        }
        if max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(Error::InvalidPolicy(format!(
                "max attempts {max_attempts} is too many: at most {MAX_ATTEMPTS_LIMIT} (each claim writes a delay per attempt into the job)"
            )));
        }
        if let BackoffFn::Func(f) = &backoff {
            // Every claim evaluates the table on the group's dispatcher thread, where a panic
            // stops the group for good: evaluate it once here and refuse a curve that panics.
            for n in 1..max_attempts {
                if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(n))) {
                    let why = crate::error::panic_message(&*panic);
                    return Err(Error::InvalidPolicy(format!(
                        "the backoff function panicked for failed attempt {n} of {max_attempts}: {why}"
                    )));
                }
            }
        }
        if let BackoffFn::Curve(b) = &backoff {
            b.validate()?;
            if let Some(m) = b.max_attempts.filter(|m| *m != max_attempts) {
                return Err(Error::InvalidPolicy(format!(
                    "the policy allows {max_attempts} attempts but its backoff says .max_attempts({m}): \
                     keep one budget (both count attempts in total, the first included)"
                )));
            }
        }
        Ok(RetryPolicy { max_attempts, backoff })
    }

    /// A policy from a curve that carries its own `.max_attempts(n)`.
    pub fn from_backoff(backoff: Backoff) -> Result<Self> {
        backoff.validate()?;
        let n = backoff.max_attempts.ok_or_else(|| {
            Error::InvalidPolicy("the backoff has no .max_attempts(n): a retry policy needs an attempt budget".into())
        })?;
        Self::new(n, backoff)
    }

    /// The attempt budget, the first attempt included: the failure of this attempt
    /// dead-letters the job.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The curve the waits come from.
    pub fn backoff(&self) -> &BackoffFn {
        &self.backoff
    }

    /// The wait after failed attempt `n`, jitter drawn from `seed`.
    pub fn delay(&self, n: u32, seed: u64) -> Duration {
        match &self.backoff {
            BackoffFn::Curve(b) => b.delay_with_seed(n, seed),
            BackoffFn::Func(f) => f(n),
        }
    }

    /// The delay table written into a job at claim: element `n-1` is the wait after failed
    /// attempt `n`, for attempts 1 to `max_attempts - 1` (the last failure dead-letters).
    pub fn delay_table(&self, seed: u64) -> Vec<Duration> {
        (1..self.max_attempts).map(|n| self.delay(n, seed)).collect()
    }

    /// [`RetryPolicy::delay_table`] in the store's unit, milliseconds, each clamped to what a
    /// time in the store can hold (so a saturated curve never wraps into a negative wait).
    pub fn delay_table_ms(&self, seed: u64) -> Vec<u64> {
        (1..self.max_attempts).map(|n| duration_ms(self.delay(n, seed))).collect()
    }
}

/// A duration in whole milliseconds, clamped to `i64::MAX` (the store's times are `i64`).
pub fn duration_ms(d: Duration) -> u64 {
    d.as_millis().min(i64::MAX as u128) as u64
}

impl TryFrom<Backoff> for RetryPolicy {
    type Error = Error;
    /// A curve with `.max_attempts(n)` is a whole retry policy.
    fn try_from(b: Backoff) -> Result<Self> {
        RetryPolicy::from_backoff(b)
    }
}

impl Default for RetryPolicy {
    /// 10 attempts; after failed attempt n wait 2^n seconds, capped at 300 s. No jitter.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            backoff: BackoffFn::Curve(Backoff::exponential(Duration::from_secs(2)).cap(Duration::from_secs(300))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_is_repeatable() {
        let b = Backoff::fixed(Duration::from_secs(10)).jitter(0.2);
        for seed in 0..200u64 {
            let d = b.delay_with_seed(1, seed);
            assert!(d >= Duration::from_secs(8) && d <= Duration::from_secs(12), "{d:?}");
            assert_eq!(d, b.delay_with_seed(1, seed));
        }
    }

    #[test]
    fn exponential_saturates_instead_of_overflowing() {
        let b = Backoff::exponential(Duration::from_secs(2));
        assert_eq!(b.delay(200), Duration::MAX);
        assert_eq!(secs(&[2, 4, 8]), (1..=3).map(|n| b.delay(n)).collect::<Vec<_>>());
    }
}
