//! The demo's and the generator's random numbers: a SplitMix64 stream (the one mixer of
//! [`backwave::retry`]), tiny, fast and the same on every platform, so a seed names one store.

/// A seeded stream of draws.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        backwave::retry::splitmix64(&mut self.0)
    }
    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
    pub(crate) fn range(&mut self, (lo, hi): (i64, i64)) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// Index `i` with weight 1/(i+1): a few causes dominate, as in real failure data.
    pub(crate) fn zipf(&mut self, n: usize) -> usize {
        let total: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
        let mut x = self.unit() * total;
        for i in 0..n {
            x -= 1.0 / (i + 1) as f64;
            if x < 0.0 {
                return i;
            }
        }
        n - 1
    }
}
