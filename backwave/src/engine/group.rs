//! Worker group configuration and the dispatch policies that decide which queue each free slot
//! is claimed from. Pure data and arithmetic: no store here.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::retry::RetryPolicy;

/// Which queue a group serves next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DispatchPolicy {
    /// Always the first queue, in order, that has a due job.
    Strict(Vec<String>),
    /// Queues served in proportion to their weights while they all have due work; an empty
    /// queue's share goes to the others.
    Weighted(Vec<(String, u32)>),
}

impl DispatchPolicy {
    /// `DispatchPolicy::strict(["critical", "bulk", "limited"])`
    pub fn strict<S: Into<String>>(queues: impl IntoIterator<Item = S>) -> Self {
        DispatchPolicy::Strict(queues.into_iter().map(Into::into).collect())
    }

    /// `DispatchPolicy::weighted([("high", 6), ("low", 1)])`
    pub fn weighted<S: Into<String>>(queues: impl IntoIterator<Item = (S, u32)>) -> Self {
        DispatchPolicy::Weighted(queues.into_iter().map(|(q, w)| (q.into(), w)).collect())
    }

    /// The queues this policy serves, in its order.
    pub fn queues(&self) -> Vec<String> {
        match self {
            DispatchPolicy::Strict(qs) => qs.clone(),
            DispatchPolicy::Weighted(qs) => qs.iter().map(|(q, _)| q.clone()).collect(),
        }
    }

    fn validate(&self, group: &str) -> Result<()> {
        let queues = self.queues();
        if queues.is_empty() {
            return Err(Error::InvalidInput(format!("worker group '{group}' has a dispatch policy with no queues")));
        }
        for (i, q) in queues.iter().enumerate() {
            if q.trim().is_empty() {
                return Err(Error::InvalidInput(format!("worker group '{group}' names an empty queue")));
            }
            if queues[..i].contains(q) {
                return Err(Error::InvalidInput(format!("worker group '{group}' names queue '{q}' twice")));
            }
        }
        if let DispatchPolicy::Weighted(qs) = self {
            if let Some((q, _)) = qs.iter().find(|(_, w)| *w == 0) {
                return Err(Error::InvalidInput(format!(
                    "worker group '{group}' gives queue '{q}' weight 0 (weights must be at least 1)"
                )));
            }
        }
        Ok(())
    }
}

/// One worker group: a set of handler slots that claim from some queues under one dispatch
/// policy and one retry policy, with its own lease and poll interval. An [`Engine`] runs one or
/// more ([`Engine::add_worker_group`]); several groups let one process give urgent queues slots
/// that bulk work cannot take, or retry one kind of job differently from another. Each group is
/// a worker of its own in the store's registry, with its own dispatcher thread.
///
/// Set the fields you need and take the rest from [`WorkerGroup::default`] (or
/// [`WorkerGroup::new`]). [`Engine::start`] checks every group and refuses, with
/// [`Error::InvalidInput`], an empty name, a policy without queues
/// (or with an empty or repeated queue, or a weight of 0), a concurrency of 0, a poll interval
/// of 0 and a lease under 30 ms.
///
/// ```
/// # use std::time::Duration;
/// # use backwave::{Backoff, RetryPolicy, engine::{DispatchPolicy, WorkerGroup}};
/// // Mail first, reports when no mail is due, each on 8 handler threads.
/// let group = WorkerGroup {
///     name: "front".into(),
///     policy: DispatchPolicy::strict(["mail", "reports"]),
///     concurrency: 8,
///     retry_policy: RetryPolicy::new(5, Backoff::exponential(Duration::from_secs(1)))?,
///     ..WorkerGroup::default()
/// };
/// // Six claims from `high` for each from `low` while both have due jobs.
/// let fair = WorkerGroup {
///     policy: DispatchPolicy::weighted([("high", 6), ("low", 1)]),
///     poll_interval: Duration::from_millis(100),
///     ..WorkerGroup::new("weighted-fair")
/// };
/// assert_eq!(fair.policy.queues(), ["high", "low"]);
/// # Ok::<(), backwave::Error>(())
/// ```
///
/// [`Engine`]: crate::Engine
/// [`Engine::add_worker_group`]: crate::Engine::add_worker_group
/// [`Engine::start`]: crate::Engine::start
#[derive(Clone, Debug)]
pub struct WorkerGroup {
    /// The group's name, unique within one engine: part of its worker id, and written on every
    /// job it claims.
    pub name: String,
    /// Which queues it claims from, and in what order or proportion.
    pub policy: DispatchPolicy,
    /// How long an idle group waits before looking for due jobs again (and reaping lapsed
    /// leases). A busy group claims again as soon as a slot frees.
    pub poll_interval: Duration,
    /// Attempts and backoff for every job this group claims. Default: [`RetryPolicy::default`].
    pub retry_policy: RetryPolicy,
    /// Handlers running at once, each on its own thread (or, when the registry has an async
    /// handler, as tasks on the runtime). Default 4.
    pub concurrency: usize,
    /// How long a claim holds a job without a heartbeat (default 60 s). Heartbeats renew it
    /// every third of it; a process that dies leaves its jobs to be reaped as failed attempts
    /// once their leases lapse.
    pub lease: Duration,
    /// Capture failure detail (error type, message, chain, backtrace) on this host. When off,
    /// failing log entries say it was not captured; the terminal cause is kept either way.
    pub capture_failure_detail: bool,
}

impl Default for WorkerGroup {
    fn default() -> Self {
        WorkerGroup {
            name: "default".into(),
            policy: DispatchPolicy::strict([super::DEFAULT_QUEUE]),
            poll_interval: Duration::from_millis(250),
            retry_policy: RetryPolicy::default(),
            concurrency: 4,
            lease: Duration::from_secs(60),
            capture_failure_detail: true,
        }
    }
}

impl WorkerGroup {
    /// A group with defaults: queue `default`, strict, 4 handlers, 60 s lease.
    pub fn new(name: &str) -> Self {
        WorkerGroup { name: name.into(), ..Default::default() }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(Error::InvalidInput("a worker group needs a name".into()));
        }
        self.policy.validate(&self.name)?;
        if self.concurrency == 0 {
            return Err(Error::InvalidInput(format!("worker group '{}' has concurrency 0", self.name)));
        }
        if self.lease < Duration::from_millis(30) {
            return Err(Error::InvalidInput(format!(
                "worker group '{}' has a lease of {:?}: too short to heartbeat (at least 30ms)",
                self.name, self.lease
            )));
        }
        if self.poll_interval.is_zero() {
            return Err(Error::InvalidInput(format!("worker group '{}' has a poll interval of 0", self.name)));
        }
        Ok(())
    }
}

/// Turns a number of free slots into claims per queue. Strict: one claim over all queues in
/// order. Weighted: smooth weighted round-robin (the nginx algorithm), so that even one slot at
/// a time follows the weights exactly (6:1 is H H H L H H H in every 7 claims) and the
/// state carries over between claims.
#[derive(Debug)]
pub(crate) struct Planner {
    policy: DispatchPolicy,
    current: Vec<i64>,
}

impl Planner {
    pub(crate) fn new(policy: DispatchPolicy) -> Self {
        let n = policy.queues().len();
        Planner { policy, current: vec![0; n] }
    }

    /// The most jobs one round of claims should take. Strict: no limit. Weighted: four turns
    /// of the weights: each round's claims commit queue by queue (all of one queue's share,
    /// then the next's), so a wide round would serve the queues in long runs, and any window of
    /// claims shorter than a round would stray from the weights; four turns keep every window
    /// within a few jobs of them.
    pub(crate) fn widest_round(&self) -> usize {
        match &self.policy {
            DispatchPolicy::Strict(_) => usize::MAX,
            DispatchPolicy::Weighted(qs) => 4 * qs.iter().map(|(_, w)| *w as usize).sum::<usize>(),
        }
    }

    /// Claims to make for `slots` free slots: each is (queues in try order, limit).
    pub(crate) fn plan(&mut self, slots: usize) -> Vec<(Vec<String>, usize)> {
        match &self.policy {
            DispatchPolicy::Strict(qs) => vec![(qs.clone(), slots)],
            DispatchPolicy::Weighted(qs) => {
                let total: i64 = qs.iter().map(|(_, w)| *w as i64).sum();
                let mut counts = vec![0usize; qs.len()];
                let mut first_pick = None;
                for _ in 0..slots {
                    for (c, (_, w)) in self.current.iter_mut().zip(qs) {
                        *c += *w as i64;
                    }
                    let best = (0..qs.len()).max_by_key(|&i| (self.current[i], std::cmp::Reverse(i))).unwrap_or(0);
                    self.current[best] -= total;
                    counts[best] += 1;
                    first_pick.get_or_insert(best);
                }
                // Each queue is tried for its share first; a queue with fewer due jobs than
                // its share leaves the rest to the others (falling through in weight order).
                let mut order: Vec<usize> = (0..qs.len()).collect();
                order.sort_by_key(|&i| (std::cmp::Reverse(qs[i].1), i));
                let mut plans = Vec::new();
                let mut picks: Vec<usize> = (0..qs.len()).filter(|&i| counts[i] > 0).collect();
                picks.sort_by_key(|&i| (Some(i) != first_pick, std::cmp::Reverse(counts[i])));
                for i in picks {
                    let mut try_order = vec![qs[i].0.clone()];
                    try_order.extend(order.iter().filter(|&&j| j != i).map(|&j| qs[j].0.clone()));
                    plans.push((try_order, counts[i]));
                }
                plans
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_six_to_one_one_slot_at_a_time() {
        let mut p = Planner::new(DispatchPolicy::weighted([("high", 6), ("low", 1)]));
        let picks: Vec<String> = (0..700).map(|_| p.plan(1)[0].0[0].clone()).collect();
        assert_eq!(picks.iter().filter(|q| *q == "high").count(), 600);
        // An empty first choice falls through to the other queue.
        assert_eq!(p.plan(1)[0].0, vec!["high".to_string(), "low".to_string()]);
    }

    #[test]
    fn weighted_batches_split_by_weight() {
        let mut p = Planner::new(DispatchPolicy::weighted([("high", 6), ("low", 1)]));
        let plan = p.plan(14);
        assert_eq!(plan.iter().map(|(_, n)| n).sum::<usize>(), 14);
        assert!(plan.contains(&(vec!["high".into(), "low".into()], 12)));
        assert!(plan.contains(&(vec!["low".into(), "high".into()], 2)));
    }

    #[test]
    fn bad_groups_are_refused_with_the_bad_value() {
        let g = WorkerGroup { policy: DispatchPolicy::weighted([("high", 0)]), ..WorkerGroup::new("w") };
        assert!(g.validate().unwrap_err().to_string().contains("'high' weight 0"));
        let g = WorkerGroup { policy: DispatchPolicy::strict(["a", "a"]), ..WorkerGroup::new("s") };
        assert!(g.validate().unwrap_err().to_string().contains("'a' twice"));
    }
}
