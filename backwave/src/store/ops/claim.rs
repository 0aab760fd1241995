//! A claim, written once for both backends: the quiet worker that takes nothing, the paused
//! queue skipped, the limits plan (a capped wire name taken apart, an exhausted one left out),
//! the claim around paused wire names, each job's delay table and handler policy, and the rate
//! windows charged. A backend supplies the statements ([`ClaimTx`]) and keeps its plan choices
//! in them; it decides nothing of this. One test suite runs every claim on both backends
//! (`both_backends!`).

use std::collections::HashSet;

use crate::error::Result;
use crate::model::{Job, JobId, JobState, Millis};
use crate::store::ops::enqueue::{effective_seed, seed_independent, DelayTable};
use crate::store::ops::limits::ClaimLimits;
use crate::store::ClaimRequest;

/// A claimed job's own attempts and delay table (JSON), when its handler's retry policy
/// replaces the group's: `(id, max_attempts, delay_table)`, written after the claim.
pub(crate) type OwnPolicy = (JobId, u32, String);

/// A job a take returned, as claimed (see [`ClaimTx::take_due`]), and the jitter seed stored
/// with it.
pub(crate) type Taken = (Job, i64);

/// What holds jobs back at the claim's instant, read before anything is taken.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// The claim's time: every lease, log entry and limit window of the claim is reckoned from it.
    pub now: Millis,
    /// The claiming worker is quiet: it takes nothing, and nothing else need have been read.
    pub quiet: bool,
    pub paused_queues: HashSet<String>,
    pub paused_names: Vec<String>,
    /// Whether a limit may be in force; when not, the limits are not read.
    pub limited: bool,
}

/// What every job a claim takes gets, as the move to Running writes it.
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    pub worker_id: &'a str,
    pub group: &'a str,
    pub now: Millis,
    pub until: Millis,
    pub max_attempts: u32,
    /// The group's delay table (JSON) when every job shares it (no jitter); `None` when each job
    /// draws its own, which [`ClaimTx::write_claimed`] writes.
    pub shared_table: Option<&'a str>,
}

impl Lease<'_> {
    /// `job`, read as it was Scheduled, as the move to Running leaves it: for a backend whose
    /// takes only read and which writes the move afterwards ([`ClaimTx::write_claimed`]).
    pub(crate) fn claimed(&self, job: &mut Job) {
        job.attempt += 1;
        self.running(job);
    }

    /// `job`, its attempt already counted, as the move to Running leaves the rest: what a claim
    /// writes of every job it takes (the backend that returns only what it did not write,
    /// PostgreSQL's, fills the rest in from here).
    pub(crate) fn running(&self, job: &mut Job) {
        job.state = JobState::Running;
        job.max_attempts = Some(self.max_attempts);
        job.lease_owner = Some(self.worker_id.to_string());
        job.lease_expires_at = Some(self.until);
        job.worker_group = Some(self.group.to_string());
        job.updated_at = self.now;
    }
}

/// What a claim asks of a backend, in one write transaction: statements, no decisions. On
/// PostgreSQL, whose claim latency is its round trips, each is one statement; SQLite's, in
/// process, are a few where its plan wants them (the quiet flag before the pauses, the walk of
/// the wire names around paused ones, the move and its log). Every take returns jobs in the
/// claim order within a queue, as claimed (Running under `lease`, the attempt counted; the delay
/// table is the caller's to set), passing over any another claim holds. The claim order is
/// priority 0 first, then 1, … 9, each by due time, then in the order the jobs were stored (the
/// index's order among equal due times); only due jobs count, so a job due
/// later at priority 0 holds back no due job at 9. Each backend reads it from its `(queue,
/// priority, due_at)` index one priority at a time (a range per priority, each ending at its
/// first future job), so the order costs no sort and no walk over future retries. The takes of
/// one wire name ([`ClaimTx::take_name`], and each name's part of [`ClaimTx::take_around`])
/// read that name's jobs by due time alone (their index has no priority); `take_around` puts
/// what it keeps in the claim order.
pub(crate) trait ClaimTx {
    /// What holds jobs back now. A quiet worker's answer need carry nothing else.
    fn holds(&mut self, worker_id: &str) -> Result<Holds>;
    /// The limits a claim from `queues` honours at `now`: those of these queues and every wire
    /// name's, each with the budget this claim may spend.
    fn limits(&mut self, now: Millis, queues: &[String]) -> Result<ClaimLimits>;
    /// Take up to `n` due jobs of the wire name `name` in `queue`.
    fn take_name(&mut self, lease: &Lease<'_>, queue: &str, name: &str, n: usize) -> Result<Vec<Taken>>;
    /// Whether any of the wire names `names` has a due job in `queue` at `now`.
    fn names_due(&mut self, queue: &str, now: Millis, names: &[String]) -> Result<bool>;
    /// Take up to `n` due jobs of `queue`, in the claim order (priority, due time, id). None of
    /// `skipping`'s wire names had a due job when [`ClaimTx::names_due`] looked; a backend whose
    /// claims run side by side with other writers leaves them out again.
    fn take_due(&mut self, lease: &Lease<'_>, queue: &str, n: usize, skipping: &[String]) -> Result<Vec<Taken>>;
    /// Take up to `n` due jobs of `queue` whose head holds due jobs of `skipping`'s wire names,
    /// without stepping over those: the cost follows the wire names waiting, not the backlog.
    fn take_around(&mut self, lease: &Lease<'_>, queue: &str, n: usize, skipping: &[String]) -> Result<Vec<Taken>>;
    /// Write what the takes of one queue left unwritten for `jobs` (claim order; none empty):
    /// the move to Running and its log entries where the takes only read, and each job's own
    /// delay table, `tables[i]` for `jobs[i]` (`None`: the shared one, or its handler's).
    fn write_claimed(&mut self, lease: &Lease<'_>, jobs: &[Job], tables: &[Option<String>]) -> Result<()>;
    /// Write the handler policies that replace the group's (`own`, none empty).
    fn write_handler_policies(&mut self, own: &[OwnPolicy]) -> Result<()>;
    /// Charge the claim's rate windows.
    fn charge_windows(&mut self, limits: &ClaimLimits, now: Millis) -> Result<()>;
}

impl ClaimRequest<'_> {
    /// The group's delay table when it is the same for every job (no jitter): computed and
    /// encoded once per call, before the transaction (which may run again), not once per job.
    pub(crate) fn shared_table(&self) -> Option<DelayTable> {
        seed_independent(self.policy).then(|| DelayTable::new(self.policy, 0))
    }

    /// Give `job`, just claimed, its handler's own retry policy if it has one: its attempts and
    /// a delay table drawn from its seed (`stored_seed`) replace the group's in the job, and
    /// are kept in `own` for the store to write. Returns whether it did.
    pub(crate) fn apply_handler_policy(&self, job: &mut Job, stored_seed: i64, own: &mut Vec<OwnPolicy>) -> bool {
        let Some((_, policy)) = self.handler_policies.iter().find(|(name, _)| *name == job.wire_name) else {
            return false;
        };
        let table = DelayTable::new(policy, effective_seed(stored_seed, &job.id));
        job.max_attempts = Some(policy.max_attempts());
        job.delay_table = Some(table.ms);
        own.push((job.id, policy.max_attempts(), table.json));
        true
    }

    /// Set `job`'s delay table and return the one to write for it alone, if any. The handler's
    /// policy is decided first: a job it covers never draws the group's table, which would be
    /// computed (with jitter, once per job), written, and overwritten in the same transaction.
    fn delay_table(
        &self,
        shared: Option<&DelayTable>,
        job: &mut Job,
        seed: i64,
        own: &mut Vec<OwnPolicy>,
    ) -> Option<String> {
        if self.apply_handler_policy(job, seed, own) {
            return None;
        }
        match shared {
            Some(t) => {
                job.delay_table = Some(t.ms.clone());
                None
            }
            None => {
                let t = DelayTable::new(self.policy, effective_seed(seed, &job.id));
                job.delay_table = Some(t.ms);
                Some(t.json)
            }
        }
    }
}

/// Claim up to `req.limit` due jobs from `req.queues`, in order, under a lease. `shared` is
/// [`ClaimRequest::shared_table`].
pub(crate) fn claim(tx: &mut impl ClaimTx, req: &ClaimRequest<'_>, shared: Option<&DelayTable>) -> Result<Vec<Job>> {
    let holds = tx.holds(req.worker_id)?;
    claim_held(tx, req, shared, &holds)
}

/// Whether a claim under `holds` is at most one take ([`ClaimTx::take_due`] of one queue) and
/// writes nothing after it: no limit may be in force (no windows to charge, no wire name taken
/// apart), no wire name paused (no look before the take), at most one queue not paused, every
/// job sharing the group's delay table and no handler's policy replacing it. A backend whose
/// take is one statement that moves and logs may then run the claim without a transaction of
/// its own (PostgreSQL: the server commits the statement by itself, two round trips fewer), its
/// holds read just before.
// Only PostgreSQL, whose round trips are its latency, runs these apart.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn one_take(req: &ClaimRequest<'_>, shared: Option<&DelayTable>, holds: &Holds) -> bool {
    holds.quiet
        || (!holds.limited
            && holds.paused_names.is_empty()
            && shared.is_some()
            && req.handler_policies.is_empty()
            && req.queues.iter().filter(|q| !holds.paused_queues.contains(*q)).count() <= 1)
}

/// [`claim`] with its holds read already, by `tx` or just before it began.
pub(crate) fn claim_held(
    tx: &mut impl ClaimTx,
    req: &ClaimRequest<'_>,
    shared: Option<&DelayTable>,
    holds: &Holds,
) -> Result<Vec<Job>> {
    let mut claimed = Vec::with_capacity(req.limit.min(1024));
    if holds.quiet {
        return Ok(claimed);
    }
    let now = holds.now;
    let mut limits = if holds.limited { tx.limits(now, req.queues)? } else { ClaimLimits::default() };
    let lease = Lease {
        worker_id: req.worker_id,
        group: req.group,
        now,
        until: now.saturating_add(req.lease.as_millis().min(i64::MAX as u128) as Millis),
        max_attempts: req.policy.max_attempts(),
        shared_table: shared.map(|t| t.json.as_str()),
    };
    let mut own = Vec::new();
    for queue in req.queues {
        let want = req.limit.saturating_sub(claimed.len());
        if want == 0 {
            break;
        }
        if holds.paused_queues.contains(queue) {
            continue;
        }
        let plan = limits.plan(queue, want, &holds.paused_names);
        let mut taken = Vec::new();
        let mut skipping = plan.excluded;
        // A wire name with fewer slots left than this claim wants is taken apart, up to its
        // budget, then left out of the rest of the queue's claim.
        for (name, cap) in plan.capped {
            let n = cap.min(plan.want - taken.len());
            if n > 0 {
                taken.extend(tx.take_name(&lease, queue, &name, n)?);
            }
            skipping.push(name);
        }
        let want = plan.want - taken.len();
        if want > 0 {
            if skipping.is_empty() || !tx.names_due(queue, now, &skipping)? {
                taken.extend(tx.take_due(&lease, queue, want, &skipping)?);
            } else {
                taken.extend(tx.take_around(&lease, queue, want, &skipping)?);
            }
        }
        if taken.is_empty() {
            continue;
        }
        let first = claimed.len();
        let mut tables = Vec::with_capacity(taken.len());
        for (mut job, seed) in taken {
            tables.push(req.delay_table(shared, &mut job, seed, &mut own));
            if !limits.is_empty() {
                limits.charge(queue, &job.wire_name);
            }
            claimed.push(job);
        }
        tx.write_claimed(&lease, &claimed[first..], &tables)?;
    }
    if !own.is_empty() {
        tx.write_handler_policies(&own)?;
    }
    if !limits.is_empty() {
        tx.charge_windows(&limits, now)?;
    }
    Ok(claimed)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::retry::{Backoff, RetryPolicy};

    fn request<'a>(
        queues: &'a [String],
        policy: &'a RetryPolicy,
        own: &'a [(String, RetryPolicy)],
    ) -> ClaimRequest<'a> {
        ClaimRequest {
            worker_id: "w",
            group: "g",
            queues,
            limit: 4,
            lease: Duration::from_secs(60),
            policy,
            handler_policies: own,
        }
    }

    #[test]
    fn only_a_claim_of_one_take_writing_nothing_after_it_is_one_take() {
        let one = vec!["default".to_string()];
        let two = vec!["high".to_string(), "low".to_string()];
        let plain = RetryPolicy::default();
        let jittered = RetryPolicy::new(3, Backoff::exponential(Duration::from_secs(1)).jitter(0.5)).unwrap();
        let own = vec![("mail".to_string(), RetryPolicy::default())];
        let clear = Holds::default();
        let is_one = |req: &ClaimRequest<'_>, holds: &Holds| one_take(req, req.shared_table().as_ref(), holds);

        assert!(is_one(&request(&one, &plain, &[]), &clear));
        // Every reason for a second statement, one at a time.
        assert!(!is_one(&request(&two, &plain, &[]), &clear), "two queues: two takes");
        assert!(!is_one(&request(&one, &jittered, &[]), &clear), "each job's own delay table is written after");
        assert!(!is_one(&request(&one, &plain, &own), &clear), "a handler's policy is written after");
        let limited = Holds { limited: true, ..Holds::default() };
        assert!(!is_one(&request(&one, &plain, &[]), &limited), "a limit's windows are charged after");
        let names = Holds { paused_names: vec!["mail".into()], ..Holds::default() };
        assert!(!is_one(&request(&one, &plain, &[]), &names), "a paused wire name is looked for first");
        // Two queues, one of them paused: one take.
        let paused = Holds { paused_queues: ["high".to_string()].into(), ..Holds::default() };
        assert!(is_one(&request(&two, &plain, &[]), &paused));
        // A quiet worker takes nothing at all.
        let quiet = Holds { quiet: true, limited: true, ..Holds::default() };
        assert!(is_one(&request(&two, &jittered, &own), &quiet));
    }
}
