//! Recurring schedules as an application declares them: a cron expression read in an IANA time
//! zone, the job each tick makes, and what happens to ticks nobody was there to fire. Pure: which
//! ticks are due is a function of the stored cursor and a time handed in. The store keeps and
//! fires them (`store/ops/schedules.rs`); the engine's ticker calls it (`engine/ticker.rs`).
//!
//! Daylight saving (the OCPS rule, which is Vixie cron's): ticks are instants, found by walking
//! real time. A fixed time of day (`30 2 * * *`) that a spring-forward gap skips fires once at the
//! first instant after the gap; one that a fall-back overlap repeats fires once, at its first
//! occurrence. An interval or wildcard pattern (`*/15 * * * *`, every second) fires at each real
//! instant that matches: none inside a gap, and in each pass of a repeated hour.

use std::collections::BTreeMap;
use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, Direction};
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::Millis;

/// How late a tick may be noticed and still count as on time: a tick the missed-tick policy
/// `Skip` still fires, and how long past a due tick the store's health waits before it reports
/// the schedule as overdue (nobody fires it).
pub const TICK_GRACE: Duration = Duration::from_secs(30);

/// A schedule nobody declared for this long is shown as orphaned: no running application
/// declares it any more (engines touch the schedules they declare every
/// [`SCHEDULE_TOUCH_EVERY`]).
pub const SCHEDULE_ORPHANED_AFTER: Duration = Duration::from_secs(60);

/// How often a running engine says it still declares its schedules.
pub const SCHEDULE_TOUCH_EVERY: Duration = Duration::from_secs(10);

/// The label every job a schedule makes carries, with the schedule's name.
pub const SCHEDULE_LABEL: &str = "schedule";
/// The label of a tick's job: the tick instant, RFC 3339 UTC.
pub const TICK_LABEL: &str = "tick";
/// The label of a job made by [`Store::trigger_schedule`](crate::Store::trigger_schedule): who
/// triggered it.
pub const TRIGGERED_BY_LABEL: &str = "triggered-by";

/// What happens to ticks that passed while no process ran the schedule (or while every process
/// was too late to fire them on time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum MissedTicks {
    /// Fire once, for the latest missed tick; the older ones are dropped.
    #[default]
    Latest,
    /// Fire every missed tick, up to the latest `max` of them (older ones beyond that dropped).
    CatchUp {
        /// How many of the latest missed ticks fire at most (at least 1).
        max: u32,
    },
    /// Fire no missed tick: only a tick noticed within [`TICK_GRACE`] of its time fires.
    Skip,
}

impl MissedTicks {
    /// The spelling in `schedules.missed`.
    pub fn as_str(self) -> &'static str {
        match self {
            MissedTicks::Latest => "latest",
            MissedTicks::CatchUp { .. } => "catch-up",
            MissedTicks::Skip => "skip",
        }
    }

    /// The bound of `CatchUp`, as `schedules.catch_up_max` keeps it.
    pub fn catch_up_max(self) -> Option<i64> {
        match self {
            MissedTicks::CatchUp { max } => Some(i64::from(max)),
            _ => None,
        }
    }

    /// Read back from the two columns.
    pub(crate) fn from_columns(missed: &str, max: Option<i64>) -> Result<MissedTicks> {
        match (missed, max) {
            ("latest", _) => Ok(MissedTicks::Latest),
            ("skip", _) => Ok(MissedTicks::Skip),
            ("catch-up", Some(m)) if m >= 1 => Ok(MissedTicks::CatchUp { max: u32::try_from(m).unwrap_or(u32::MAX) }),
            _ => Err(Error::InvalidInput(format!("'{missed}' (bound {max:?}) is not a missed-tick policy"))),
        }
    }
}

impl std::fmt::Display for MissedTicks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MissedTicks::CatchUp { max } => write!(f, "catch-up {max}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// A recurring job, declared in code: every tick of `cron` in `zone` enqueues one job with this
/// wire name, queue, payload and labels (plus the labels [`SCHEDULE_LABEL`] and [`TICK_LABEL`]).
///
/// Declare schedules on the [`Engine`](crate::Engine) ([`Engine::add_schedule`]): it stores them
/// when it starts (a changed definition is updated and audited) and its ticker fires their ticks.
/// Every engine that declares a schedule fires it, and each tick still makes exactly one job: the
/// store moves the schedule's cursor in the transaction that inserts the tick's job. Ticks that
/// passed while no engine ran are handled by the [`MissedTicks`] policy. An invalid schedule (a
/// bad cron expression or zone, an empty name, a payload its registered handler cannot decode)
/// makes [`Engine::start`] fail with [`Error::InvalidInput`] before anything is stored.
///
/// [`Engine::add_schedule`]: crate::Engine::add_schedule
/// [`Engine::start`]: crate::Engine::start
///
/// ```
/// use backwave::schedule::{MissedTicks, Schedule};
/// let nightly = Schedule::new("nightly-report", "0 2 * * *", "build-report", "low", br#"{"kind":"daily"}"#)
///     .zone("Europe/Berlin")
///     .label("team", "finance")
///     .missed(MissedTicks::CatchUp { max: 3 })
///     .unique();
/// assert!(nightly.validate().is_ok());
/// assert!(Schedule::new("typo", "0 25 * * *", "build-report", "low", "{}").validate().is_err());
/// ```
///
/// What the ticker does, step by step on a store whose clock the example moves:
///
/// ```
/// use std::time::Duration;
/// use backwave::schedule::Schedule;
/// use backwave::{Clock, Store};
///
/// let dir = tempfile::tempdir()?;
/// let clock = Clock::manual(1_767_225_600_000); // 2026-01-01T00:00:00Z
/// let store = Store::create(dir.path().join("jobs.db"))?.with_clock(clock.clone());
/// let every_minute = Schedule::new("heartbeat", "* * * * *", "ping", "default", "{}");
/// store.declare_schedules("my-app", &[every_minute])?;
///
/// clock.advance(Duration::from_secs(60));
/// let (fired, _next) = store.fire_due_schedules(&["heartbeat".to_string()])?;
/// assert_eq!(fired[0].fired.len(), 1); // one job for the tick at 00:01
/// let again = store.fire_due_schedules(&["heartbeat".to_string()])?;
/// assert!(again.0.iter().all(|f| f.fired.is_empty())); // that tick has its job
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// The schedule's name, unique in the store (the key a redeclaration updates).
    pub name: String,
    /// Five fields (minute hour day-of-month month day-of-week), or six with seconds first.
    pub cron: String,
    /// An IANA zone name; `UTC` unless set.
    pub zone: String,
    /// The wire name of each tick's job.
    pub wire_name: String,
    /// The queue of each tick's job.
    pub queue: String,
    /// The payload of each tick's job.
    #[serde(skip)]
    pub payload: Vec<u8>,
    /// Labels each tick's job carries, besides [`SCHEDULE_LABEL`] and [`TICK_LABEL`].
    pub labels: BTreeMap<String, String>,
    /// What happens to ticks nobody fired in time. Default [`MissedTicks::Latest`].
    pub missed: MissedTicks,
    /// One tick's job at a time: see [`Schedule::unique`].
    pub unique: bool,
    /// The priority of each tick's job within its queue: see [`Schedule::priority`].
    pub priority: u8,
}

impl Schedule {
    /// A schedule named `name` that enqueues a job of `wire_name` on `queue` with `payload` at
    /// every tick of `cron` (five fields, minute first, or six with seconds first), in UTC, missed
    /// ticks [`MissedTicks::Latest`], not unique. Nothing is checked until it is declared (or
    /// [`Schedule::validate`]d).
    pub fn new(
        name: impl Into<String>,
        cron: impl Into<String>,
        wire_name: impl Into<String>,
        queue: impl Into<String>,
        payload: impl Into<Vec<u8>>,
    ) -> Self {
        Schedule {
            name: name.into(),
            cron: cron.into(),
            zone: "UTC".into(),
            wire_name: wire_name.into(),
            queue: queue.into(),
            payload: payload.into(),
            labels: BTreeMap::new(),
            missed: MissedTicks::Latest,
            unique: false,
            priority: crate::model::PRIORITY_FIRST,
        }
    }

    /// The priority of every job this schedule enqueues (its ticks' and a trigger's), 0
    /// (claimed first within its queue, the default) to 9 (claimed last): see
    /// [`NewJob::priority`](crate::NewJob::priority). A value above 9 is refused when the
    /// schedule is declared.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Read the cron expression in this IANA zone (`Europe/Berlin`): `0 2 * * *` is 02:00 local
    /// time, across daylight-saving changes (see the module docs for gaps and overlaps). The zone
    /// database is compiled in, so every host computes the same ticks.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = zone.into();
        self
    }

    /// Add a label to every tick's job.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// What happens to ticks that passed while nobody fired them.
    pub fn missed(mut self, missed: MissedTicks) -> Self {
        self.missed = missed;
        self
    }

    /// Never start a tick's job while the previous tick's job is still scheduled or running (a
    /// slow nightly report is not started again by the next night's tick). Each tick's job holds
    /// the unique key [`unique_key`] while Scheduled or Running; a tick that comes meanwhile makes
    /// no job, and is consumed all the same: the schedule's cursor moves past it and its
    /// `skipped_ticks` counts it ([`Store::schedules`](crate::Store::schedules) shows it), so
    /// uniqueness can never hold the schedule back. Missed ticks caught up together make one job.
    /// Jobs made by [`Store::trigger_schedule`](crate::Store::trigger_schedule) are outside the
    /// tick sequence and hold no key.
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    /// Every check a declaration makes before anything is stored: the name, the cron expression,
    /// the zone, the wire name and queue, the catch-up bound.
    pub fn validate(&self) -> Result<Timetable> {
        check_schedule_name(&self.name)?;
        crate::model::validate_name("wire name", &self.wire_name)?;
        crate::model::validate_name("queue", &self.queue)?;
        crate::model::check_priority(&format!("schedule '{}': the priority", self.name), self.priority)?;
        if let MissedTicks::CatchUp { max: 0 } = self.missed {
            return Err(Error::InvalidInput(format!(
                "schedule '{}': catch-up needs a bound of at least 1 (use Skip to fire no missed tick)",
                self.name
            )));
        }
        Timetable::parse(&self.cron, &self.zone)
    }
}

/// The unique key the jobs of a [`Schedule::unique`] schedule's ticks hold.
pub fn unique_key(schedule: &str) -> String {
    format!("schedule:{schedule}")
}

/// A schedule name: not empty, no control characters (it is printed in tables and logs).
pub fn check_schedule_name(name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::InvalidInput("a schedule name must not be empty".into()));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!("the schedule name {name:?} contains control characters")));
    }
    Ok(())
}

/// A parsed cron expression in its zone: the tick instants.
#[derive(Clone, Debug)]
pub struct Timetable {
    cron: Cron,
    zone: TimeZone,
}

/// Which ticks to fire now and how far the schedule's cursor moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickPlan {
    /// The tick instants that each get a job, oldest first (may be empty: ticks dropped).
    pub fire: Vec<Millis>,
    /// The new cursor: the latest tick now due, fired or dropped.
    pub through: Millis,
}

impl Timetable {
    /// Parse `cron` (5 fields, or 6 with seconds first) in the IANA zone `zone`. An invalid
    /// expression, an unknown zone, or a pattern that never fires is refused quoting the value.
    pub fn parse(cron: &str, zone: &str) -> Result<Timetable> {
        let fields = cron.split_whitespace().count();
        if !(5..=6).contains(&fields) && !cron.trim_start().starts_with('@') {
            return Err(Error::InvalidInput(format!(
                "invalid cron expression '{cron}': it has {fields} fields, not 5 (minute hour day month weekday) or 6 \
                 (seconds first)"
            )));
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| Error::InvalidInput(format!("invalid cron expression '{cron}': {e}")))?;
        let tz = TimeZone::get(zone).map_err(|_| {
            Error::InvalidInput(format!("unknown time zone '{zone}': give an IANA name such as UTC or Europe/Berlin"))
        })?;
        let t = Timetable { cron: parsed, zone: tz };
        if t.next_after(crate::model::system_now()).is_none() {
            return Err(Error::InvalidInput(format!("the cron expression '{cron}' never fires")));
        }
        Ok(t)
    }

    fn zoned(&self, at: Millis) -> Option<Zoned> {
        // Ticks are whole seconds: search from the second `at` falls in (floored, also before 1970).
        let secs = at.div_euclid(1000);
        Some(Timestamp::from_second(secs).ok()?.to_zoned(self.zone.clone()))
    }

    /// The first tick strictly after `at`.
    pub fn next_after(&self, at: Millis) -> Option<Millis> {
        let z = self.zoned(at)?;
        let next = self.cron.find_next_occurrence(&z, false).ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The last tick at or before `at`.
    pub fn latest_at_or_before(&self, at: Millis) -> Option<Millis> {
        let z = self.zoned(at)?;
        let prev = self.cron.find_previous_occurrence(&z, true).ok()?;
        Some(prev.timestamp().as_millisecond())
    }

    /// Up to `n` ticks in `(after, upto]`, the latest ones, oldest first.
    fn latest_ticks(&self, after: Millis, upto: Millis, n: usize) -> Vec<Millis> {
        let Some(z) = self.zoned(upto) else { return Vec::new() };
        let mut out: Vec<Millis> = self
            .cron
            .iter_from(z, Direction::Backward)
            .map(|t| t.timestamp().as_millisecond())
            .take_while(|&t| t > after)
            .take(n)
            .collect();
        out.reverse();
        out
    }

    /// The ticks to fire at `now` for a schedule whose cursor is at `last` (the latest tick
    /// fired or dropped, or when it was first declared), under `missed`; `None` when no tick is
    /// due. A paused schedule drops its due ticks: give `paused`.
    pub fn due(&self, last: Millis, now: Millis, missed: MissedTicks, paused: bool) -> Option<TickPlan> {
        let latest = self.latest_at_or_before(now).filter(|&t| t > last)?;
        let on_time = now.saturating_sub(latest) <= TICK_GRACE.as_millis() as Millis;
        let fire = match missed {
            _ if paused => Vec::new(),
            MissedTicks::Latest => vec![latest],
            MissedTicks::Skip if on_time => vec![latest],
            MissedTicks::Skip => Vec::new(),
            MissedTicks::CatchUp { max } => self.latest_ticks(last, now, max.max(1) as usize),
        };
        Some(TickPlan { fire, through: latest })
    }

    /// How late the first tick after the cursor `last` is at `now`, if it is late by more than
    /// `grace` (nobody fired it).
    pub fn overdue(&self, last: Millis, now: Millis, grace: Duration) -> Option<Duration> {
        let next = self.next_after(last)?;
        let late = now.saturating_sub(next);
        (late > grace.as_millis() as Millis).then(|| Duration::from_millis(late as u64))
    }
}

/// A tick instant as its job's label shows it: RFC 3339, UTC, whole seconds.
pub fn tick_label(at: Millis) -> String {
    Timestamp::from_millisecond(at).map(|t| t.to_string()).unwrap_or_else(|_| at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(zone: &str, civil: &str) -> Millis {
        let dt: jiff::civil::DateTime = civil.parse().unwrap();
        dt.to_zoned(TimeZone::get(zone).unwrap()).unwrap().timestamp().as_millisecond()
    }

    #[test]
    fn five_and_six_fields_parse_and_seven_are_refused() {
        assert!(Timetable::parse("*/5 * * * *", "UTC").is_ok());
        assert!(Timetable::parse("* * * * * *", "UTC").is_ok());
        let e = Timetable::parse("* * * * * * 2030", "UTC").unwrap_err().to_string();
        assert!(e.contains("'* * * * * * 2030'") && e.contains("7 fields"), "{e}");
    }

    #[test]
    fn bad_cron_and_unknown_zone_quote_the_value() {
        let e = Timetable::parse("61 * * * *", "UTC").unwrap_err().to_string();
        assert!(e.starts_with("invalid cron expression '61 * * * *'"), "{e}");
        let e = Timetable::parse("* * * * *", "Mars/Olympus").unwrap_err().to_string();
        assert!(e.contains("'Mars/Olympus'"), "{e}");
        let e = Timetable::parse("0 0 30 2 *", "UTC").unwrap_err().to_string();
        assert!(e.contains("never fires"), "{e}");
    }

    #[test]
    fn latest_fires_once_catch_up_is_bounded_and_skip_drops_late_ticks() {
        let t = Timetable::parse("0 * * * *", "UTC").unwrap();
        let h = 3_600_000;
        // Down from 00:30 to 05:10: ticks 01:00..05:00 were missed.
        let (last, now) = (h / 2, 5 * h + 600_000);
        assert_eq!(t.due(last, now, MissedTicks::Latest, false), Some(TickPlan { fire: vec![5 * h], through: 5 * h }));
        assert_eq!(
            t.due(last, now, MissedTicks::CatchUp { max: 3 }, false),
            Some(TickPlan { fire: vec![3 * h, 4 * h, 5 * h], through: 5 * h })
        );
        assert_eq!(
            t.due(last, now, MissedTicks::CatchUp { max: 10 }, false).unwrap().fire,
            vec![h, 2 * h, 3 * h, 4 * h, 5 * h]
        );
        assert_eq!(t.due(last, now, MissedTicks::Skip, false), Some(TickPlan { fire: vec![], through: 5 * h }));
        // On time (within the grace) Skip fires.
        assert_eq!(t.due(last, 5 * h + 1000, MissedTicks::Skip, false).unwrap().fire, vec![5 * h]);
        // Paused: the tick is consumed, nothing fires; nothing due: None.
        assert_eq!(t.due(last, now, MissedTicks::Latest, true), Some(TickPlan { fire: vec![], through: 5 * h }));
        assert_eq!(t.due(5 * h, now, MissedTicks::Latest, false), None);
    }

    #[test]
    fn spring_forward_gap_fires_a_skipped_fixed_time_once_at_the_first_instant_after_it() {
        // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        let t = Timetable::parse("30 2 * * *", "Europe/Berlin").unwrap();
        let day_before = at("Europe/Berlin", "2026-03-28T02:30");
        let gap_tick = t.next_after(day_before).unwrap();
        assert_eq!(gap_tick, at("Europe/Berlin", "2026-03-29T03:00"));
        assert_eq!(t.next_after(gap_tick).unwrap(), at("Europe/Berlin", "2026-03-30T02:30"));
        // A worker polling through the gap fires it exactly once.
        let fired = poll_every_second(&t, day_before, gap_tick + 3_600_000);
        assert_eq!(fired, vec![gap_tick]);
    }

    #[test]
    fn fall_back_overlap_fires_a_repeated_fixed_time_once_and_intervals_in_each_pass() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        let t = Timetable::parse("30 2 * * *", "Europe/Berlin").unwrap();
        let start = at("Europe/Berlin", "2026-10-25T01:00");
        let first = start + 90 * 60_000; // 02:30 CEST, 00:30 UTC
        let fired = poll_every_second(&t, start, start + 4 * 3_600_000);
        assert_eq!(fired, vec![first], "02:30 fires once, in its first pass");
        // Every 30 minutes: 02:00 and 02:30 of both passes are real, distinct instants.
        let t = Timetable::parse("*/30 * * * *", "Europe/Berlin").unwrap();
        let fired = poll_every_second(&t, start, start + 4 * 3_600_000);
        assert_eq!(fired.len(), 8, "4 hours of real time after 01:00, half-hourly: {fired:?}");
        assert!(fired.windows(2).all(|w| w[1] - w[0] == 30 * 60_000));
    }

    /// What a ticker polling once a second from `from` to `to` fires, under `Latest`.
    fn poll_every_second(t: &Timetable, from: Millis, to: Millis) -> Vec<Millis> {
        let mut last = from;
        let mut fired = Vec::new();
        let mut now = from;
        while now <= to {
            if let Some(plan) = t.due(last, now, MissedTicks::Latest, false) {
                fired.extend(plan.fire);
                last = plan.through;
            }
            now += 1000;
        }
        fired
    }
}
