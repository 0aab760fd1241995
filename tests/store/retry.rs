//! Backoff and RetryPolicy against the seeds' own tables (seed 000, "The default backoff
//! curve"; seed 001, "Signature" and ".Cap(…)").

use std::time::Duration;

use backwave::{Backoff, Error, RetryPolicy};

const S: fn(u64) -> Duration = Duration::from_secs;

/// The seeds write waits as `1m4s`, `2m8s`, `5m`.
fn compact(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
}

fn waits(b: &Backoff, n: u32) -> String {
    (1..=n).map(|i| compact(b.delay(i))).collect::<Vec<_>>().join(" ")
}

#[test]
fn default_policy_is_the_seed_table_ten_attempts_capped_at_300s() {
    let p = RetryPolicy::default();
    assert_eq!(p.max_attempts(), 10);
    let table: Vec<u64> = p.delay_table(0).iter().map(|d| d.as_secs()).collect();
    // "failed attempt 1..9 -> 2 4 8 16 32 64 128 256 300"; the 10th failure dead-letters.
    assert_eq!(table, [2, 4, 8, 16, 32, 64, 128, 256, 300]);
    // No jitter: every seed gives the same table.
    for seed in [1, 42, u64::MAX] {
        assert_eq!(p.delay_table(seed), p.delay_table(0));
    }
    assert_eq!(p.delay_table_ms(7), [2, 4, 8, 16, 32, 64, 128, 256, 300].map(|s| s * 1000));
}

#[test]
fn exponential_capped_at_five_minutes_matches_seed_001() {
    let b = Backoff::exponential(S(2)).cap(Duration::from_secs(5 * 60));
    assert_eq!(waits(&b, 10), "2s 4s 8s 16s 32s 1m4s 2m8s 4m16s 5m 5m");
}

#[test]
fn linear_fixed_and_uncapped_exponential_grow_as_named() {
    assert_eq!(waits(&Backoff::linear(S(2)), 4), "2s 4s 6s 8s");
    assert_eq!(waits(&Backoff::fixed(S(2)), 3), "2s 2s 2s");
    assert_eq!(waits(&Backoff::exponential(S(2)), 4), "2s 4s 8s 16s");
    // "Backoff.Exponential(2s) on its tenth attempt waits 17 minutes"
    assert_eq!(compact(Backoff::exponential(S(2)).delay(10)), "17m4s");
}

#[test]
fn a_plain_duration_is_a_fixed_policy() {
    let b: Backoff = S(30).into();
    assert_eq!(b, Backoff::fixed(S(30)));
    let p = RetryPolicy::new(4, S(30)).unwrap();
    assert_eq!(p.delay_table(0), [S(30), S(30), S(30)]);
}

#[test]
fn max_attempts_counts_attempts_in_total() {
    // .max_attempts(3): three attempts, so two waits between them.
    let p = RetryPolicy::from_backoff(Backoff::exponential(S(2)).max_attempts(3)).unwrap();
    assert_eq!(p.max_attempts(), 3);
    assert_eq!(p.delay_table(0), [S(2), S(4)]);
    let one = RetryPolicy::try_from(Backoff::fixed(S(1)).max_attempts(1)).unwrap();
    assert_eq!(one.max_attempts(), 1);
    assert!(one.delay_table(0).is_empty(), "one attempt in total: nothing to wait for");
}

#[test]
fn the_backoff_may_be_any_function_of_the_attempt() {
    // The seed's `Backoff = _ => TimeSpan.FromMilliseconds(500)`.
    let p = RetryPolicy::new(5, |_| Duration::from_millis(500)).unwrap();
    assert_eq!(p.delay_table_ms(0), [500, 500, 500, 500]);
    let p = RetryPolicy::new(4, |n: u32| Duration::from_secs(u64::from(n) * 10)).unwrap();
    assert_eq!(p.delay_table_ms(0), [10_000, 20_000, 30_000]);
}

#[test]
fn jitter_is_bounded_repeatable_and_spreads_jobs() {
    let b = Backoff::exponential(S(10)).jitter(0.2);
    let mut distinct = std::collections::BTreeSet::new();
    for seed in 0..500u64 {
        for n in 1..=4 {
            let exact = Backoff::exponential(S(10)).delay(n).as_secs_f64();
            let d = b.delay_with_seed(n, seed).as_secs_f64();
            assert!(d >= exact * 0.8 - 1e-9 && d <= exact * 1.2 + 1e-9, "attempt {n} seed {seed}: {d} vs {exact}");
            assert_eq!(b.delay_with_seed(n, seed), b.delay_with_seed(n, seed), "same seed, same wait");
        }
        distinct.insert(b.delay_with_seed(1, seed));
    }
    assert!(distinct.len() > 400, "jitter should spread waits, got {} distinct of 500", distinct.len());
    // The cap bounds the jittered wait too.
    let capped = Backoff::fixed(S(100)).jitter(0.5).cap(S(110));
    assert!((0..200).all(|seed| capped.delay_with_seed(1, seed) <= S(110)));
    // A policy's table is a pure function of its seed.
    let p = RetryPolicy::new(6, b).unwrap();
    assert_eq!(p.delay_table(99), p.delay_table(99));
    assert_ne!(p.delay_table(99), p.delay_table(100));
}

#[test]
fn out_of_range_values_are_errors_not_panics() {
    let invalid = |r: Result<RetryPolicy, Error>| match r {
        Err(Error::InvalidPolicy(msg)) => msg,
        other => panic!("expected InvalidPolicy, got {other:?}"),
    };
    let msg = invalid(RetryPolicy::new(0, S(1)));
    assert!(msg.contains("at least 1"), "{msg}");
    invalid(RetryPolicy::from_backoff(Backoff::fixed(S(1)).max_attempts(0)));
    for bad in [1.5, -0.1, f64::NAN, f64::INFINITY] {
        let msg = invalid(RetryPolicy::new(3, Backoff::fixed(S(1)).jitter(bad)));
        assert!(msg.contains(&bad.to_string()), "the message quotes the bad value: {msg}");
        assert!(Backoff::fixed(S(1)).jitter(bad).validate().is_err());
    }
    // A curve without an attempt budget cannot be a whole policy on its own.
    invalid(RetryPolicy::from_backoff(Backoff::fixed(S(1))));
    // Two budgets that disagree: refused rather than silently preferring one (seed 001).
    let msg = invalid(RetryPolicy::new(5, Backoff::fixed(S(1)).max_attempts(3)));
    assert!(msg.contains('5') && msg.contains("max_attempts(3)"), "{msg}");
    assert!(RetryPolicy::new(3, Backoff::fixed(S(1)).max_attempts(3)).is_ok());
}

#[test]
fn huge_curves_saturate_instead_of_panicking() {
    let b = Backoff::exponential(Duration::MAX).jitter(1.0);
    for n in [1, 2, 40, u32::MAX] {
        let _ = b.delay(n);
        let _ = b.delay_with_seed(n, 12345);
    }
    let p = RetryPolicy::new(70, Backoff::exponential(Duration::from_secs(u64::MAX / 4))).unwrap();
    assert!(p.delay_table_ms(1).iter().all(|&ms| ms <= i64::MAX as u64));
}

#[test]
fn exponential_keeps_doubling_past_32_attempts_until_duration_max() {
    // d, 2d, 4d, …: the wait after failed attempt n is d·2^(n-1), whatever n, until it no
    // longer fits a Duration. It used to stop growing at d·(2^32 - 1) from attempt 33 on.
    let b = Backoff::exponential(Duration::from_millis(1));
    assert_eq!(b.delay(33), Duration::from_millis(1 << 32));
    assert_eq!(b.delay(34), Duration::from_millis(1 << 33));
    assert_eq!(b.delay(50), Duration::from_millis(1 << 49));
    assert_eq!(b.delay(200), Duration::MAX);
    assert_eq!(Backoff::exponential(Duration::ZERO).delay(u32::MAX), Duration::ZERO);
    let p = RetryPolicy::new(60, b).unwrap();
    let table = p.delay_table_ms(0);
    assert!(table.windows(2).all(|w| w[1] == w[0] * 2), "each wait doubles the one before");
}

#[test]
fn an_attempt_budget_too_large_for_a_delay_table_is_an_error_not_an_out_of_memory_abort() {
    // Every claim writes max_attempts - 1 delays into the job row: u32::MAX attempts asked
    // for a 34 GB table per claim, and the process died. Refused up front, quoting the value.
    for n in [u32::MAX, 1_000_000] {
        match RetryPolicy::new(n, S(1)) {
            Err(Error::InvalidPolicy(msg)) => assert!(msg.contains(&n.to_string()), "{msg}"),
            other => panic!("expected InvalidPolicy for {n} attempts, got {other:?}"),
        }
        assert!(RetryPolicy::from_backoff(Backoff::fixed(S(1)).max_attempts(n)).is_err());
    }
    let most = RetryPolicy::new(backwave::retry::MAX_ATTEMPTS_LIMIT, S(1)).unwrap();
    assert_eq!(most.delay_table_ms(0).len() as u32, backwave::retry::MAX_ATTEMPTS_LIMIT - 1);
}

#[test]
fn a_backoff_function_that_panics_within_the_budget_is_refused_when_the_policy_is_made() {
    // The table is evaluated at every claim, on the worker group's dispatcher thread: a curve
    // that panics there stopped the whole group for good. It is found out up front instead.
    let curve = |n: u32| {
        assert!(n < 33, "2^{n} overflows");
        Duration::from_millis(500) * 2u32.pow(n - 1)
    };
    match RetryPolicy::new(40, curve) {
        Err(Error::InvalidPolicy(msg)) => assert!(msg.contains("33") && msg.contains("2^33 overflows"), "{msg}"),
        other => panic!("expected InvalidPolicy, got {other:?}"),
    }
    let ok = RetryPolicy::new(33, curve).unwrap();
    assert_eq!(ok.delay_table(0).len(), 32);
}
