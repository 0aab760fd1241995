//! Limits on a queue or a wire name, written once for both backends: the types, which row wins,
//! what budget is left, what a claim charges, and `set_limit`/`clear_limit`/`declare_limits` on
//! [`Store`]. Each backend only counts and writes in its SQL (`sqlite/limit.rs`, `postgres/limit.rs`).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::names::{check_name, decide_name_action, NameAction, PauseRead};
use super::AuditAction;
use crate::error::{Error, Result};
use crate::model::{Millis, Permission};
use crate::store::{Backend, PauseKind, Store};

/// At most `n` claims per `per`: fixed windows aligned on multiples of `per` since the epoch,
/// so every host agrees on where a window starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Claims allowed per window (at least 1).
    pub n: u32,
    /// The window's length (at least 1 ms).
    pub per: Duration,
}

impl Rate {
    /// `50/s`, `10/1m`, `3/500ms`: a count, a slash, and a duration (a bare unit means one of it).
    pub fn parse(text: &str) -> Result<Rate> {
        let bad = |why: &str| Error::InvalidInput(format!("'{text}' is not a rate ({why}; e.g. 50/s or 10/1m)"));
        let (n, per) = text.split_once('/').ok_or_else(|| bad("no '/'"))?;
        let n: u32 = n.trim().parse().map_err(|_| bad("the count is not a whole number"))?;
        if n == 0 {
            return Err(bad("the count must be at least 1: to stop claims, pause it"));
        }
        let per = per.trim();
        let per = if per.starts_with(|c: char| c.is_ascii_digit()) { per.to_string() } else { format!("1{per}") };
        let per = humantime::parse_duration(&per).map_err(|_| bad("the window is not a duration"))?;
        if per.as_millis() == 0 {
            return Err(bad("the window must be at least 1ms"));
        }
        Ok(Rate { n, per })
    }

    pub(crate) fn window_ms(&self) -> Millis {
        self.per.as_millis().min(i64::MAX as u128) as Millis
    }
}

impl fmt::Display for Rate {
    /// `50/s`, `600/m`, `10/5m`: as [`Rate::parse`] takes it (one of a unit is the unit alone).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = humantime::format_duration(self.per).to_string();
        let per = match per.strip_prefix('1') {
            Some(unit) if unit.chars().all(|c| c.is_ascii_alphabetic()) => unit.to_string(),
            _ => per,
        };
        write!(f, "{}/{per}", self.n)
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct R {
            n: u32,
            window_ms: Millis,
        }
        R { n: self.n, window_ms: self.window_ms() }.serialize(s)
    }
}

/// What a limit allows; at least one of the two is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LimitSpec {
    /// At most this many Running under a live lease at once, across every host.
    pub concurrency: Option<u32>,
    /// At most this many claimed per window.
    pub rate: Option<Rate>,
}

impl LimitSpec {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.concurrency == Some(0) {
            return Err(Error::InvalidInput(
                "a concurrency of 0 would stop every claim: pause it instead (`Store::pause`)".into(),
            ));
        }
        if self.concurrency.is_none() && self.rate.is_none() {
            return Err(Error::InvalidInput("a limit needs a concurrency, a rate, or both".into()));
        }
        Ok(())
    }
}

impl fmt::Display for LimitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.concurrency, self.rate) {
            (Some(c), Some(r)) => write!(f, "concurrency {c}, rate {r}"),
            (Some(c), None) => write!(f, "concurrency {c}"),
            (None, Some(r)) => write!(f, "rate {r}"),
            (None, None) => f.write_str("none"),
        }
    }
}

/// Who set a limit: an operator ([`Store::set_limit`], audited) or the application's default in
/// code ([`Engine::limit`](crate::Engine::limit)). The operator's wins while it is in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitSource {
    /// Set by an operator through the store.
    Operator,
    /// Declared by an application's engine.
    Application,
}

impl LimitSource {
    /// The spelling in the store and in JSON: `operator`, `application`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitSource::Operator => "operator",
            LimitSource::Application => "application",
        }
    }

    fn parse(s: &str) -> Option<LimitSource> {
        match s {
            "operator" => Some(LimitSource::Operator),
            "application" => Some(LimitSource::Application),
            _ => None,
        }
    }
}

/// One stored limit (a row of the store's `limits` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Limit {
    /// A queue or a wire name.
    pub kind: PauseKind,
    /// The queue's or wire name's name.
    pub name: String,
    /// Who set it.
    pub source: LimitSource,
    /// What it allows.
    #[serde(flatten)]
    pub spec: LimitSpec,
    /// The operator, or the declaring process (`host/pid`).
    pub set_by: String,
    /// When it was set.
    pub set_at: Millis,
    /// When it lapses by itself; `None` until cleared.
    pub until: Option<Millis>,
}

/// An application's default limit, declared in code (see
/// [`Engine::limit`](crate::Engine::limit)): written to the store when the engine starts, where
/// an operator's limit overrides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitDefault {
    /// A queue or a wire name.
    pub kind: PauseKind,
    /// The queue's or wire name's name.
    pub name: String,
    /// What it allows.
    pub spec: LimitSpec,
}

/// A limited name as [`Store::limits`] reports it: both sources side by side, the limit in
/// force, and what runs under it now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LimitStatus {
    /// A queue or a wire name.
    pub kind: PauseKind,
    /// The queue's or wire name's name.
    pub name: String,
    /// The operator's limit in force, if any.
    pub operator: Option<Limit>,
    /// The application's default in force, if any.
    pub application: Option<Limit>,
    /// What claims honour now: the operator's when set, else the application's.
    pub effective: LimitSpec,
    /// Running under a live lease now.
    pub running: u64,
    /// Claims in the current rate window (0 without a rate).
    pub window_claimed: u64,
    /// How many more a claim may take now: 0 means its due jobs wait on this limit.
    pub budget: u64,
    /// Scheduled jobs due now that it holds back (only counted when the budget is 0).
    pub held_back: u64,
}

/// The result of [`Store::set_limit`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum LimitResult {
    /// No operator limit was in force; now it is.
    Limited,
    /// An operator limit was in force and was replaced.
    Changed {
        /// What it allowed before.
        previous: LimitSpec,
    },
}

/// The start of the fixed window holding `now`.
pub(crate) fn window_start(now: Millis, window_ms: Millis) -> Millis {
    now - now.rem_euclid(window_ms.max(1))
}

/// How many more jobs a limit allows now, given `running` (live leases) and the current window's
/// row `(window_start, claimed)`.
pub(crate) fn budget(spec: &LimitSpec, running: u64, window: Option<(Millis, u64)>, now: Millis) -> u64 {
    let by_concurrency = spec.concurrency.map_or(u64::MAX, |c| u64::from(c).saturating_sub(running));
    let by_rate = spec.rate.map_or(u64::MAX, |r| {
        let start = window_start(now, r.window_ms());
        // A window later than ours was charged by a claim that committed first: ours is really
        // that one (our `now` was read before we got the lock), so its count is ours too.
        let used = window.filter(|(s, _)| *s >= start).map_or(0, |(_, n)| n);
        u64::from(r.n).saturating_sub(used)
    });
    by_concurrency.min(by_rate)
}

/// The rows in force at `now` folded to one per name: the operator's wins over the application's.
pub(crate) fn fold(rows: Vec<Limit>) -> Vec<(PauseKind, String, Option<Limit>, Option<Limit>)> {
    let mut by_name: HashMap<(PauseKind, String), (Option<Limit>, Option<Limit>)> = HashMap::new();
    for l in rows {
        let e = by_name.entry((l.kind, l.name.clone())).or_default();
        match l.source {
            LimitSource::Operator => e.0 = Some(l),
            LimitSource::Application => e.1 = Some(l),
        }
    }
    let mut out: Vec<_> = by_name.into_iter().map(|((k, n), (o, a))| (k, n, o, a)).collect();
    out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    out
}

/// One limit a claim honours, with what is left of it in this transaction.
#[derive(Debug)]
pub(crate) struct Active {
    pub kind: PauseKind,
    pub name: String,
    pub spec: LimitSpec,
    /// Jobs this claim may still take.
    pub left: u64,
    /// Jobs this claim took (charged to the rate window at the end).
    pub taken: u64,
}

/// The limits one claim transaction honours.
#[derive(Debug, Default)]
pub(crate) struct ClaimLimits {
    pub active: Vec<Active>,
}

/// What one queue's claim may take: at most `want`, none of `excluded` (paused, or with no budget
/// left, or, on PostgreSQL, limited by a name another claim holds), and at most the given number
/// of each `capped` wire name.
#[derive(Debug, Default)]
pub(crate) struct QueuePlan {
    pub want: usize,
    pub excluded: Vec<String>,
    pub capped: Vec<(String, usize)>,
}

impl ClaimLimits {
    pub(crate) fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// The plan for claiming up to `want` from `queue` with `paused` wire names.
    pub(crate) fn plan(&self, queue: &str, want: usize, paused: &[String]) -> QueuePlan {
        let mut want = want;
        if let Some(q) = self.active.iter().find(|a| a.kind == PauseKind::Queue && a.name == queue) {
            want = want.min(q.left.min(usize::MAX as u64) as usize);
        }
        let mut plan = QueuePlan { want, excluded: paused.to_vec(), capped: Vec::new() };
        for a in self.active.iter().filter(|a| a.kind == PauseKind::WireName) {
            if paused.contains(&a.name) {
                continue;
            }
            match a.left {
                0 => plan.excluded.push(a.name.clone()),
                n if (n as usize) < want => plan.capped.push((a.name.clone(), n as usize)),
                _ => {}
            }
        }
        plan
    }

    /// Count `n` claimed jobs of `queue` with `wire_name` against the limits they fall under.
    pub(crate) fn charge(&mut self, queue: &str, wire_name: &str) {
        for a in &mut self.active {
            let hit = match a.kind {
                PauseKind::Queue => a.name == queue,
                PauseKind::WireName => a.name == wire_name,
            };
            if hit {
                a.left = a.left.saturating_sub(1);
                a.taken += 1;
            }
        }
    }

    /// The rate windows to add to at the end of the claim: `(kind, name, window_start, taken)`.
    pub(crate) fn window_charges(&self, now: Millis) -> Vec<(PauseKind, String, Millis, i64)> {
        self.active
            .iter()
            .filter(|a| a.taken > 0)
            .filter_map(|a| {
                a.spec.rate.map(|r| (a.kind, a.name.clone(), window_start(now, r.window_ms()), a.taken as i64))
            })
            .collect()
    }
}

/// Adds a claim's count to a rate window: a later window starts the count over, and the window
/// never moves back (a claim whose `now` was read before another's committed charges the later
/// window, as [`budget`] counted it). The same text on both backends.
pub(crate) const CHARGE_WINDOW_SQL: &str = "INSERT INTO limit_windows (kind, name, window_start, claimed)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (kind, name) DO UPDATE SET
         claimed = CASE WHEN limit_windows.window_start >= excluded.window_start
                        THEN limit_windows.claimed + excluded.claimed ELSE excluded.claimed END,
         window_start = CASE WHEN limit_windows.window_start >= excluded.window_start
                             THEN limit_windows.window_start ELSE excluded.window_start END";

/// The limit rows in force at `?1`/`$1`, in the order [`limit_from_parts`] reads.
pub(crate) const LIMITS_IN_FORCE_SQL: &str =
    "SELECT kind, name, source, concurrency, rate, rate_window_ms, set_by, set_at, until FROM limits
     WHERE until IS NULL OR until > $1 ORDER BY kind, name, source";

/// A row of [`LIMITS_IN_FORCE_SQL`]; `None` for a kind or source this build does not know.
#[allow(clippy::too_many_arguments)]
pub(crate) fn limit_from_parts(
    kind: &str,
    name: String,
    source: &str,
    concurrency: Option<i64>,
    rate: Option<i64>,
    window_ms: Option<i64>,
    set_by: String,
    set_at: Millis,
    until: Option<Millis>,
) -> Option<Limit> {
    let spec = LimitSpec {
        concurrency: concurrency.map(|c| c.clamp(1, i64::from(u32::MAX)) as u32),
        rate: match (rate, window_ms) {
            (Some(n), Some(w)) => {
                Some(Rate { n: n.clamp(1, i64::from(u32::MAX)) as u32, per: Duration::from_millis(w.max(1) as u64) })
            }
            _ => None,
        },
    };
    Some(Limit {
        kind: PauseKind::parse(kind)?,
        name,
        source: LimitSource::parse(source)?,
        spec,
        set_by,
        set_at,
        until,
    })
}

/// The audit detail of a limit.
pub(crate) fn limit_detail(kind: PauseKind, name: &str, spec: &LimitSpec, until: Option<Millis>) -> String {
    let until_text = until.map_or_else(|| "until cleared".to_string(), |u| format!("until {u}"));
    format!("{kind} {name} {spec} {until_text}")
}

/// The operator's new limit: the fields given replace those of the limit in force, the others
/// stay (so a rate can be added to a concurrency limit).
pub(crate) fn merged(previous: Option<&LimitSpec>, change: &LimitSpec) -> LimitSpec {
    LimitSpec {
        concurrency: change.concurrency.or(previous.and_then(|p| p.concurrency)),
        rate: change.rate.or(previous.and_then(|p| p.rate)),
    }
}

/// What each backend counts for a limit's status, in one snapshot.
pub(crate) trait LimitCounts {
    /// Running under a live lease at `now`.
    fn running(&mut self, kind: PauseKind, name: &str) -> Result<u64>;
    /// The rate window row: `(window_start, claimed)`.
    fn window(&mut self, kind: PauseKind, name: &str) -> Result<Option<(Millis, u64)>>;
    /// Scheduled jobs due at `now`.
    fn due(&mut self, kind: PauseKind, name: &str) -> Result<u64>;
    /// Whether a claim may spend this limit's budget: on PostgreSQL, where claims run side by
    /// side, only the claim that holds the limit's lock (never waited for) does.
    fn take(&mut self, _kind: PauseKind, _name: &str) -> Result<bool> {
        Ok(true)
    }
}

/// What runs under a limit now and its rate window (each counted only where the limit has that
/// part), and the budget left from them.
struct Counted {
    running: u64,
    window: Option<(Millis, u64)>,
    budget: u64,
}

fn counted(
    counts: &mut dyn LimitCounts,
    kind: PauseKind,
    name: &str,
    spec: &LimitSpec,
    now: Millis,
) -> Result<Counted> {
    let running = if spec.concurrency.is_some() { counts.running(kind, name)? } else { 0 };
    let window = if spec.rate.is_some() { counts.window(kind, name)? } else { None };
    Ok(Counted { running, window, budget: budget(spec, running, window, now) })
}

/// The limits one claim honours, from the rows in force: those of `queues` (every queue's when
/// `None`) and every wire name's, each with the budget it has left for this claim.
pub(crate) fn claim_limits(
    rows: Vec<Limit>,
    now: Millis,
    queues: Option<&[String]>,
    counts: &mut dyn LimitCounts,
) -> Result<ClaimLimits> {
    let mut out = ClaimLimits::default();
    for (kind, name, operator, application) in fold(rows) {
        if kind == PauseKind::Queue && queues.is_some_and(|q| !q.contains(&name)) {
            continue;
        }
        let Some(spec) = operator.or(application).map(|l| l.spec) else { continue };
        let left = if counts.take(kind, &name)? { counted(counts, kind, &name, &spec, now)?.budget } else { 0 };
        out.active.push(Active { kind, name, spec, left, taken: 0 });
    }
    Ok(out)
}

/// The statuses of every limit in force from its rows and the counts read beside them.
pub(crate) fn statuses(rows: Vec<Limit>, now: Millis, counts: &mut dyn LimitCounts) -> Result<Vec<LimitStatus>> {
    let mut out = Vec::new();
    for (kind, name, operator, application) in fold(rows) {
        let Some(effective) = operator.as_ref().or(application.as_ref()).map(|l| l.spec) else { continue };
        let Counted { running: running_now, window: win, budget } = counted(counts, kind, &name, &effective, now)?;
        let window_claimed = effective
            .rate
            .and_then(|r| win.filter(|(s, _)| *s >= window_start(now, r.window_ms())))
            .map_or(0, |(_, n)| n);
        let held_back = if budget == 0 { counts.due(kind, &name)? } else { 0 };
        out.push(LimitStatus {
            kind,
            name,
            operator,
            application,
            effective,
            running: running_now,
            window_claimed,
            budget,
            held_back,
        });
    }
    Ok(out)
}

/// What the limit policy below asks of a backend in one write transaction, beside the
/// permission and name reads a pause asks too ([`PauseRead`]): statements, no decisions.
/// SQLite's is in `store/sqlite/limit.rs`, PostgreSQL's in `store/postgres/limit.rs`.
pub(crate) trait LimitTx: PauseRead {
    /// The time the transaction decides at.
    fn now(&mut self) -> Result<Millis>;
    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, detail: &str) -> Result<()>;
    /// Decide one name's changes one at a time, so that two operators' changes merge in order
    /// (PostgreSQL's writers run side by side; SQLite has one writer).
    fn lock_name(&mut self, kind: PauseKind, name: &str) -> Result<()>;
    /// The limit rows in force at `now`.
    fn rows(&mut self, now: Millis) -> Result<Vec<Limit>>;
    /// Insert or replace the row of the limit's kind, name and source.
    fn write_row(&mut self, limit: &Limit) -> Result<()>;
    /// Delete the operator's limit on a name: `Some(whether it was in force at now)` if one was.
    fn delete_operator(&mut self, kind: PauseKind, name: &str, now: Millis) -> Result<Option<bool>>;
}

impl Store {
    /// Limit a queue or a wire name (needs `operate`; audited): the fields of `change` that are
    /// set replace those of the operator's limit in force, the others stay. `until`: it lapses
    /// then by itself. Enforced by every claim from the next one, on every host. A name no job
    /// or worker mentions is refused as a likely typo unless `force`, as [`Store::pause`] does.
    pub fn set_limit(
        &self,
        actor: &str,
        kind: PauseKind,
        name: &str,
        change: &LimitSpec,
        until: Option<Millis>,
        force: bool,
    ) -> Result<LimitResult> {
        self.check_name_first(NameAction::Limit, actor, kind, name, until, force)?;
        self.limits_write(|tx| {
            let now = tx.now()?;
            // `true`: the name was checked (or forced) above, outside the write lock.
            decide_name_action(&mut *tx, NameAction::Limit, actor, kind, name, Some((until, now)), true)?;
            tx.lock_name(kind, name)?;
            let previous = tx
                .rows(now)?
                .into_iter()
                .find(|l| l.kind == kind && l.name == name && l.source == LimitSource::Operator)
                .map(|l| l.spec);
            let spec = merged(previous.as_ref(), change);
            spec.validate()?;
            let (source, set_by) = (LimitSource::Operator, actor.to_string());
            tx.write_row(&Limit { kind, name: name.to_string(), source, spec, set_by, set_at: now, until })?;
            tx.audit(now, actor, AuditAction::Limit, &limit_detail(kind, name, &spec, until))?;
            Ok(match previous {
                Some(previous) => LimitResult::Changed { previous },
                None => LimitResult::Limited,
            })
        })
    }

    /// Remove the operator's limit (needs `operate`; audited); the application's default, if
    /// any, applies again. Returns whether one was in force.
    pub fn clear_limit(&self, actor: &str, kind: PauseKind, name: &str) -> Result<bool> {
        self.limits_write(|tx| {
            let now = tx.now()?;
            tx.require(actor, Permission::Operate)?;
            if tx.delete_operator(kind, name, now)? != Some(true) {
                return Ok(false);
            }
            tx.audit(now, actor, AuditAction::Unlimit, &format!("{kind} {name}"))?;
            Ok(true)
        })
    }

    /// Write an application's default limits (by the engine at start; no permission needed, not
    /// audited): each replaces the application's earlier default for its name.
    pub fn declare_limits(&self, declared_by: &str, defaults: &[LimitDefault]) -> Result<()> {
        for d in defaults {
            check_name(d.kind, &d.name)?;
            d.spec.validate()?;
        }
        if defaults.is_empty() {
            return Ok(());
        }
        self.limits_write(|tx| {
            let now = tx.now()?;
            for d in defaults {
                let (kind, name, spec, source) = (d.kind, d.name.clone(), d.spec, LimitSource::Application);
                let set_by = declared_by.to_string();
                tx.write_row(&Limit { kind, name, source, spec, set_by, set_at: now, until: None })?;
            }
            Ok(())
        })
    }

    /// Run `f` in one write transaction of this store's backend, for a limit.
    fn limits_write<T>(&self, mut f: impl FnMut(&mut dyn LimitTx) -> Result<T>) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(s) => s.names_write(|tx| f(tx)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.write(|tx| f(tx)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_or_without_a_count_of_units() {
        assert_eq!(Rate::parse("50/s").unwrap(), Rate { n: 50, per: Duration::from_secs(1) });
        assert_eq!(Rate::parse("10/5m").unwrap(), Rate { n: 10, per: Duration::from_secs(300) });
        for text in ["50/s", "600/m", "10/5m", "3/500ms", "7/1h 30m"] {
            assert_eq!(Rate::parse(text).unwrap().to_string(), text, "shown as it is typed");
        }
        for bad in ["50", "0/s", "x/s", "5/lots", "5/0s"] {
            assert!(Rate::parse(bad).unwrap_err().to_string().contains(&format!("'{bad}'")), "{bad}");
        }
    }

    #[test]
    fn the_budget_is_the_smaller_of_the_free_slots_and_the_window_left() {
        let spec = LimitSpec { concurrency: Some(3), rate: Some(Rate { n: 5, per: Duration::from_secs(1) }) };
        assert_eq!(budget(&spec, 1, None, 10_500), 2);
        assert_eq!(budget(&spec, 0, Some((10_000, 4)), 10_500), 1);
        // A window that has passed counts for nothing; a later one counts in full.
        assert_eq!(budget(&spec, 0, Some((9_000, 5)), 10_500), 3);
        assert_eq!(budget(&spec, 0, Some((11_000, 4)), 10_500), 1);
        assert_eq!(budget(&spec, 4, None, 10_500), 0);
    }

    #[test]
    fn a_capped_wire_name_is_planned_apart_and_an_exhausted_one_excluded() {
        let mut limits = ClaimLimits {
            active: vec![
                Active { kind: PauseKind::WireName, name: "a".into(), spec: LimitSpec::default(), left: 2, taken: 0 },
                Active { kind: PauseKind::WireName, name: "b".into(), spec: LimitSpec::default(), left: 0, taken: 0 },
                Active { kind: PauseKind::Queue, name: "q".into(), spec: LimitSpec::default(), left: 5, taken: 0 },
            ],
        };
        let plan = limits.plan("q", 10, &["p".to_string()]);
        assert_eq!(plan.want, 5);
        assert_eq!(plan.excluded, vec!["p".to_string(), "b".to_string()]);
        assert_eq!(plan.capped, vec![("a".to_string(), 2)]);
        limits.charge("q", "a");
        assert_eq!(limits.plan("q", 10, &[]).capped, vec![("a".to_string(), 1)]);
        assert_eq!(limits.plan("q", 10, &[]).want, 4);
    }
}
