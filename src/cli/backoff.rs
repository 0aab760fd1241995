//! bw backoff: print a retry schedule (attempt, wait, time since the first try) so an operator
//! can check a policy before deploying it. Pure arithmetic over `retry::Backoff`: no store.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{precise_duration, Cell, Render, Style, Table, Term};
use super::{parse_duration, CliError, Ctx};
use backwave::{Backoff, BackoffFn, RetryPolicy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShapeArg {
    Fixed,
    Linear,
    Exponential,
    /// RetryPolicy::default(): 10 attempts, 2s doubling, capped at 5m.
    Default,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// fixed (d, d, d…), linear (d, 2d, 3d…), exponential (d, 2d, 4d…), or default.
    #[arg(value_enum)]
    pub shape: ShapeArg,
    /// The first wait (`2s`, `500ms`); not for `default`.
    #[arg(value_parser = parse_duration, required_if_eq_any([("shape", "fixed"), ("shape", "linear"), ("shape", "exponential")]))]
    pub interval: Option<Duration>,
    /// No single wait above this.
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub cap: Option<Duration>,
    /// Total attempts, the first included (default 10; at most 10,000, as for a RetryPolicy).
    // Bounded like RetryPolicy::new: 4,000,000,000 built a 288 GB table and aborted.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(backwave::retry::MAX_ATTEMPTS_LIMIT)))]
    pub max_attempts: Option<u32>,
    /// Spread each wait uniformly ± this fraction of itself (0 to 1).
    #[arg(long, value_name = "F")]
    pub jitter: Option<f64>,
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let (backoff, max) = match a.shape {
        ShapeArg::Default => {
            if a.interval.is_some() || a.cap.is_some() || a.max_attempts.is_some() || a.jitter.is_some() {
                return Err(CliError::Usage(
                    "`bw backoff default` takes no interval or flags: it prints RetryPolicy::default()".into(),
                ));
            }
            let p = RetryPolicy::default();
            match p.backoff() {
                BackoffFn::Curve(b) => (*b, p.max_attempts()),
                BackoffFn::Func(_) => unreachable!("the default policy is a curve"),
            }
        }
        shape => {
            let d = a.interval.expect("clap requires the interval");
            let mut b = match shape {
                ShapeArg::Fixed => Backoff::fixed(d),
                ShapeArg::Linear => Backoff::linear(d),
                _ => Backoff::exponential(d),
            };
            if let Some(c) = a.cap {
                b = b.cap(c);
            }
            if let Some(j) = a.jitter {
                b = b.jitter(j);
            }
            let max = a.max_attempts.unwrap_or(10);
            b = b.max_attempts(max);
            b.validate().map_err(|e| CliError::Usage(e.to_string()))?;
            (b, max)
        }
    };
    let view = Schedule::new(&backoff, max);
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Step {
    attempt: u32,
    /// The wait after this attempt fails; null for the last attempt (it dead-letters).
    wait_ms: Option<u64>,
    /// With jitter: the range a wait falls in.
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_min_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_max_ms: Option<u64>,
    /// When the next attempt starts, counted from the first try (waits only, no run time).
    next_attempt_after_ms: Option<u64>,
}

#[derive(Serialize)]
struct Schedule {
    shape: &'static str,
    interval_ms: u64,
    cap_ms: Option<u64>,
    jitter: f64,
    max_attempts: u32,
    steps: Vec<Step>,
}

/// Milliseconds, saturating: `as u64` wrapped a capped-at-`Duration::MAX` delay into nonsense.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Schedule {
    fn new(b: &Backoff, max: u32) -> Self {
        let j = b.jitter_value();
        let mut since = 0u64;
        let steps = (1..=max)
            .map(|n| {
                if n == max {
                    return Step {
                        attempt: n,
                        wait_ms: None,
                        wait_min_ms: None,
                        wait_max_ms: None,
                        next_attempt_after_ms: None,
                    };
                }
                let exact = b.delay(n);
                since = since.saturating_add(millis(exact));
                let (lo, hi) = if j > 0.0 {
                    let cap = b.cap_value().unwrap_or(Duration::MAX);
                    let lo = exact.mul_f64(1.0 - j).min(cap);
                    let hi = exact.mul_f64(1.0 + j).min(cap);
                    (Some(millis(lo)), Some(millis(hi)))
                } else {
                    (None, None)
                };
                Step {
                    attempt: n,
                    wait_ms: Some(millis(exact)),
                    wait_min_ms: lo,
                    wait_max_ms: hi,
                    next_attempt_after_ms: Some(since),
                }
            })
            .collect();
        Schedule {
            shape: match b.shape() {
                backwave::Shape::Fixed => "fixed",
                backwave::Shape::Linear => "linear",
                backwave::Shape::Exponential => "exponential",
            },
            interval_ms: b.interval().as_millis() as u64,
            cap_ms: b.cap_value().map(|c| c.as_millis() as u64),
            jitter: j,
            max_attempts: max,
            steps,
        }
    }
}

impl Render for Schedule {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        let ms = |v: u64| precise_duration(Duration::from_millis(v));
        let mut t = Table::new(&["ATTEMPT", "FAILS, THEN WAITS", "NEXT ATTEMPT AT (since first try)"]);
        for s in &self.steps {
            let (wait, at) = match (s.wait_ms, s.next_attempt_after_ms) {
                (Some(w), Some(at)) => {
                    let wait = match (s.wait_min_ms, s.wait_max_ms) {
                        (Some(lo), Some(hi)) => format!("{} ({}–{})", ms(w), ms(lo), ms(hi)),
                        _ => ms(w),
                    };
                    let at = if s.wait_min_ms.is_some() { format!("~{}", ms(at)) } else { ms(at) };
                    (Cell::from(wait), Cell::from(at))
                }
                _ => (Cell::from("—"), Cell::styled("dead-lettered on failure", Style::Red)),
            };
            t.row(vec![s.attempt.to_string().into(), wait, at]);
        }
        t.write(out, term)?;
        // Saturating: a long linear curve over many attempts overflowed u64 and panicked.
        let total = self.steps.iter().filter_map(|s| s.wait_ms).fold(0, u64::saturating_add);
        let note = format!(
            "{} attempts in total; a job that keeps failing is dead-lettered after {} of waiting (plus its run time).",
            self.max_attempts,
            ms(total)
        );
        writeln!(out, "{}", Style::Dim.paint(&note, term.color))
    }
}
