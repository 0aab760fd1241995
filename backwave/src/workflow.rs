//! Workflows: jobs enqueued together, in one transaction, with edges between them. A child job
//! waits (state [`Waiting`](crate::JobState::Waiting): never claimed, out of queue latency)
//! until every parent has done what its edge needs, and is made Scheduled, exactly once, by the
//! transaction that completes its last parent: the store's `jobs_release` trigger, so the
//! release cannot be lost between a parent's completion and its children's, whatever process
//! or program completes the parent.
//!
//! Two kinds of edge:
//! - a **dependency** ([`Workflow::add_after`]): the child runs once its parents *succeeded*.
//!   A parent that ends Dead-Lettered, Quarantined or Cancelled leaves its children waiting; if
//!   an operator requeues it and it succeeds, they go on.
//! - a **batch callback** ([`Workflow::add_when_finished`]): the callback runs once every member
//!   is terminal, whatever its end, and reads how each ended ([`Store::parents`](crate::Store::parents)).
//!
//! A child reads its parents (their states and outputs) with [`Store::parents`](crate::Store::parents).
//!
//! ```
//! use backwave::{NewJob, Store, Workflow};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::create(dir.path().join("jobs.db"))?;
//! let mut wf = Workflow::new("thumbnails");
//! let fetch = wf.add(NewJob::new("fetch", "media", br#"{"url":"https://example.com/a.png"}"#.to_vec()));
//! let small = wf.add_after(NewJob::new("resize", "media", br#"{"width":64}"#.to_vec()), &[fetch])?;
//! let large = wf.add_after(NewJob::new("resize", "media", br#"{"width":512}"#.to_vec()), &[fetch])?;
//! wf.add_after(NewJob::new("publish", "media", b"{}".to_vec()), &[small, large])?;
//! let enqueued = store.enqueue_workflow(&wf)?;
//! assert_eq!(store.job(enqueued.job(fetch))?.unwrap().state, backwave::JobState::Scheduled);
//! assert_eq!(store.job(enqueued.job(large))?.unwrap().state, backwave::JobState::Waiting);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::{JobId, JobState, Millis, NewJob};

/// The most jobs one workflow may hold: a larger one is refused before anything is written.
pub const MAX_WORKFLOW_JOBS: usize = 100_000;

/// A workflow's id: a UUID, like a job's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkflowId(pub Uuid);

impl WorkflowId {
    /// A new time-ordered id.
    pub fn new() -> Self {
        WorkflowId(Uuid::now_v7())
    }
}

impl Default for WorkflowId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for WorkflowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for WorkflowId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Uuid::parse_str(s.trim())
            .map(WorkflowId)
            .map_err(|_| Error::InvalidInput(format!("'{s}' is not a workflow id (expected a UUID)")))
    }
}

/// What a child's edge waits for its parent to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Needs {
    /// The parent succeeded: a dependency.
    Succeeded,
    /// The parent is terminal, however it ended: a batch's callback.
    Finished,
}

impl Needs {
    /// The spelling in the store and in JSON: `succeeded`, `finished`.
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::Succeeded => "succeeded",
            Needs::Finished => "finished",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        if s == "finished" {
            Needs::Finished
        } else {
            Needs::Succeeded
        }
    }
}

/// What a workflow does when one of its jobs ends Dead-Lettered, Quarantined or Cancelled
/// ([`Workflow::on_failure`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// The jobs that need it to succeed keep waiting, and go on if an operator requeues it and
    /// it succeeds (the default: nothing is thrown away while someone can still mend it).
    #[default]
    Wait,
    /// The jobs that need it to succeed are cancelled at once, and the jobs that need those,
    /// and so on down the graph, in the transaction that ends the job. A batch's callback
    /// ([`Workflow::add_when_finished`]) still runs: a cancelled member is finished too.
    Cancel,
}

impl OnFailure {
    /// The spelling in the store and in JSON: `wait`, `cancel`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Wait => "wait",
            OnFailure::Cancel => "cancel",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        if s == "cancel" {
            OnFailure::Cancel
        } else {
            OnFailure::Wait
        }
    }
}

/// A job's place in the [`Workflow`] that [`Workflow::add`] returned it from; turned into its
/// [`JobId`] by [`EnqueuedWorkflow::job`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    workflow: u64,
    index: usize,
}

impl Step {
    /// Its position among the workflow's jobs, from 0 in the order they were added.
    pub fn index(self) -> usize {
        self.index
    }
}

static NEXT_WORKFLOW: AtomicU64 = AtomicU64::new(1);

/// A set of jobs and the edges between them, enqueued at once by [`Store::enqueue_workflow`](crate::Store::enqueue_workflow)
/// (one transaction: all of it or nothing).
#[derive(Clone, Debug)]
pub struct Workflow {
    name: String,
    token: u64,
    jobs: Vec<NewJob>,
    /// (child, parent, needs), as indexes into `jobs`.
    edges: Vec<(usize, usize, Needs)>,
    on_failure: OnFailure,
}

impl Workflow {
    /// An empty workflow; `name` is what operators see it by (`thumbnails`), not unique.
    pub fn new(name: impl Into<String>) -> Self {
        Workflow {
            name: name.into(),
            token: NEXT_WORKFLOW.fetch_add(1, Ordering::Relaxed),
            jobs: Vec::new(),
            edges: Vec::new(),
            on_failure: OnFailure::Wait,
        }
    }

    /// What happens to the jobs that need a job to succeed when it ends Dead-Lettered,
    /// Quarantined or Cancelled: they wait for an operator ([`OnFailure::Wait`], the default) or
    /// are cancelled at once ([`OnFailure::Cancel`]).
    ///
    /// ```
    /// use backwave::{NewJob, Workflow};
    /// use backwave::workflow::OnFailure;
    ///
    /// let mut wf = Workflow::new("nightly-export");
    /// wf.on_failure(OnFailure::Cancel);
    /// let dump = wf.add(NewJob::new("dump", "exports", "{}"));
    /// wf.add_after(NewJob::new("upload", "exports", "{}"), &[dump])?;
    /// # Ok::<(), backwave::Error>(())
    /// ```
    pub fn on_failure(&mut self, on: OnFailure) -> &mut Self {
        self.on_failure = on;
        self
    }

    /// What it does when one of its jobs fails for good ([`Workflow::on_failure`]).
    pub fn failure_policy(&self) -> OnFailure {
        self.on_failure
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many jobs it holds.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether it holds no job yet.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Add a job that depends on nothing (yet): it is Scheduled at enqueue unless an edge to it
    /// is added with [`Workflow::depends_on`].
    pub fn add(&mut self, job: NewJob) -> Step {
        self.jobs.push(job);
        Step { workflow: self.token, index: self.jobs.len() - 1 }
    }

    /// Add a job that runs once each of `parents` succeeded.
    pub fn add_after(&mut self, job: NewJob, parents: &[Step]) -> Result<Step> {
        self.add_with(job, parents, Needs::Succeeded)
    }

    /// Add a batch's callback: a job that runs once each of `members` is terminal, however it
    /// ended (it reads how with [`Store::parents`](crate::Store::parents)).
    pub fn add_when_finished(&mut self, job: NewJob, members: &[Step]) -> Result<Step> {
        self.add_with(job, members, Needs::Finished)
    }

    /// An edge between two jobs already added: `child` runs once `parent` succeeded.
    pub fn depends_on(&mut self, child: Step, parent: Step) -> Result<()> {
        self.edge(child, parent, Needs::Succeeded)
    }

    fn add_with(&mut self, job: NewJob, parents: &[Step], needs: Needs) -> Result<Step> {
        for p in parents {
            self.own(*p)?;
        }
        let child = self.add(job);
        for p in parents {
            if let Err(e) = self.edge(child, *p, needs) {
                // Nothing half-added: the job goes with its edges.
                self.edges.retain(|(c, _, _)| *c != child.index);
                self.jobs.pop();
                return Err(e);
            }
        }
        Ok(child)
    }

    fn own(&self, step: Step) -> Result<()> {
        if step.workflow != self.token || step.index >= self.jobs.len() {
            return Err(Error::InvalidInput(format!(
                "job {} of another workflow is not a job of workflow '{}': an edge must join two of its own jobs",
                step.index, self.name
            )));
        }
        Ok(())
    }

    fn edge(&mut self, child: Step, parent: Step, needs: Needs) -> Result<()> {
        self.own(child)?;
        self.own(parent)?;
        if child == parent {
            return Err(Error::InvalidInput(format!(
                "job {} ({}) cannot depend on itself",
                child.index,
                self.label(child.index)
            )));
        }
        if self.edges.iter().any(|(c, p, _)| *c == child.index && *p == parent.index) {
            return Err(Error::InvalidInput(format!(
                "the edge {} -> {} is given twice",
                self.label(parent.index),
                self.label(child.index)
            )));
        }
        self.edges.push((child.index, parent.index, needs));
        Ok(())
    }

    /// `#2 resize`: a job as errors quote it.
    fn label(&self, i: usize) -> String {
        format!("#{i} {}", self.jobs[i].wire_name)
    }

    /// The whole workflow's checks, before anything is written: a name, between 1 and
    /// [`MAX_WORKFLOW_JOBS`] jobs, no unique job, no cycle.
    pub(crate) fn validate(&self) -> Result<()> {
        crate::model::validate_name("workflow name", &self.name)?;
        if self.jobs.is_empty() {
            return Err(Error::InvalidInput(format!("workflow '{}' has no job", self.name)));
        }
        if self.jobs.len() > MAX_WORKFLOW_JOBS {
            return Err(Error::InvalidInput(format!(
                "workflow '{}' has {} jobs: at most {MAX_WORKFLOW_JOBS} may be enqueued as one workflow",
                self.name,
                self.jobs.len()
            )));
        }
        if let Some(i) = self.jobs.iter().position(|j| j.unique.is_some()) {
            return Err(Error::InvalidInput(format!(
                "job {} of workflow '{}' has a unique rule: a workflow's jobs cannot be unique (a duplicate would leave a hole in the graph)",
                self.label(i),
                self.name
            )));
        }
        if let Some(cycle) = self.cycle() {
            let path: Vec<String> = cycle.iter().map(|i| self.label(*i)).collect();
            return Err(Error::InvalidInput(format!(
                "workflow '{}' has a cycle: {}; nothing was enqueued",
                self.name,
                path.join(" -> ")
            )));
        }
        Ok(())
    }

    /// A cycle among the edges, as the jobs along it (first repeated at the end), if any.
    fn cycle(&self) -> Option<Vec<usize>> {
        let n = self.jobs.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (c, p, _) in &self.edges {
            children[*p].push(*c);
        }
        // Depth-first, iterative: 0 unvisited, 1 on the path, 2 done.
        let mut mark = vec![0u8; n];
        let mut parent_of = vec![usize::MAX; n];
        for root in 0..n {
            if mark[root] != 0 {
                continue;
            }
            let mut stack = vec![(root, 0usize)];
            mark[root] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = children[node].get(*next) {
                    *next += 1;
                    match mark[child] {
                        0 => {
                            mark[child] = 1;
                            parent_of[child] = node;
                            stack.push((child, 0));
                        }
                        1 => {
                            let mut path = vec![child];
                            let mut at = node;
                            while at != child {
                                path.push(at);
                                at = parent_of[at];
                            }
                            path.push(child);
                            path.reverse();
                            return Some(path);
                        }
                        _ => {}
                    }
                } else {
                    mark[node] = 2;
                    stack.pop();
                }
            }
        }
        None
    }

    pub(crate) fn jobs(&self) -> &[NewJob] {
        &self.jobs
    }

    pub(crate) fn edges(&self) -> &[(usize, usize, Needs)] {
        &self.edges
    }

    /// How many edges wait on each job's parents: the jobs with none start Scheduled.
    pub(crate) fn parent_counts(&self) -> Vec<usize> {
        let mut n = vec![0; self.jobs.len()];
        for (c, _, _) in &self.edges {
            n[*c] += 1;
        }
        n
    }
}

/// What [`Store::enqueue_workflow`](crate::Store::enqueue_workflow) stored: the workflow's id and each job's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnqueuedWorkflow {
    /// The workflow's id.
    pub id: WorkflowId,
    /// Every job's id, in the order the jobs were added.
    pub jobs: Vec<JobId>,
}

impl EnqueuedWorkflow {
    /// The id the job added as `step` was stored under.
    pub fn job(&self, step: Step) -> JobId {
        self.jobs[step.index]
    }
}

/// A workflow as [`Store::workflows`](crate::Store::workflows) lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowSummary {
    /// Its id.
    pub id: WorkflowId,
    /// Its name.
    pub name: String,
    /// When it was enqueued.
    pub created_at: Millis,
    /// How many jobs it was enqueued with (retention may have deleted some since).
    pub jobs: u64,
    /// Its jobs still in the store, by state.
    pub counts: BTreeMap<JobState, u64>,
    /// When its longest-waiting Waiting job was enqueued, if one waits.
    pub oldest_waiting_since: Option<Millis>,
    /// Waiting jobs with a parent that ended Dead-Lettered, Quarantined or Cancelled: they wait
    /// until an operator requeues that parent.
    pub stuck: u64,
    /// What it does when one of its jobs fails for good.
    pub on_failure: OnFailure,
}

/// A `workflows` row as a store reads it, before its jobs are counted.
pub(crate) struct Head {
    pub id: WorkflowId,
    pub name: String,
    pub created_at: Millis,
    pub jobs: i64,
    pub on_failure: OnFailure,
}

/// One workflow's jobs in one state, as read for a set of workflows at once: (workflow, state,
/// how many, the earliest `updated_at` among them).
pub(crate) type StateCount = (WorkflowId, JobState, u64, Option<Millis>);

/// The summaries of `heads`, in their order, from their jobs counted by state and their stuck
/// jobs counted, each read once for the whole set (two statements however many workflows a
/// page lists, not two per workflow).
pub(crate) fn summaries(
    heads: Vec<Head>,
    counts: Vec<StateCount>,
    stuck: Vec<(WorkflowId, u64)>,
) -> Vec<WorkflowSummary> {
    let mut by_workflow: std::collections::HashMap<WorkflowId, Vec<StateCount>> = std::collections::HashMap::new();
    for c in counts {
        by_workflow.entry(c.0).or_default().push(c);
    }
    let stuck: std::collections::HashMap<WorkflowId, u64> = stuck.into_iter().collect();
    heads
        .into_iter()
        .map(|h| {
            let mine = by_workflow.remove(&h.id).unwrap_or_default();
            WorkflowSummary {
                counts: mine.iter().map(|c| (c.1, c.2)).collect(),
                oldest_waiting_since: mine.iter().find(|c| c.1 == JobState::Waiting).and_then(|c| c.3),
                stuck: stuck.get(&h.id).copied().unwrap_or(0),
                id: h.id,
                name: h.name,
                created_at: h.created_at,
                jobs: h.jobs as u64,
                on_failure: h.on_failure,
            }
        })
        .collect()
}

impl WorkflowSummary {
    /// Whether every job still in the store is terminal.
    pub fn is_done(&self) -> bool {
        self.counts.iter().all(|(s, n)| *n == 0 || s.is_terminal())
    }
}

/// One edge as a job's reader sees it: the job at the other end, its state and the edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// The job at the other end.
    pub job: JobId,
    /// Its wire name.
    pub wire_name: String,
    /// Its state (`None` once retention deleted it).
    pub state: Option<JobState>,
    /// What the child waits for the parent to do.
    pub needs: Needs,
    /// Whether the parent did it.
    pub met: bool,
}

/// One job of a workflow, as [`Store::workflow`](crate::Store::workflow) shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowJob {
    /// Its id.
    pub id: JobId,
    /// Its wire name.
    pub wire_name: String,
    /// Its queue.
    pub queue: String,
    /// Its state.
    pub state: JobState,
    /// Its attempt counter.
    pub attempt: u32,
    /// Its parents.
    pub parents: Vec<Edge>,
}

/// A workflow and its graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowGraph {
    /// The workflow's counts.
    #[serde(flatten)]
    pub summary: WorkflowSummary,
    /// Its jobs still in the store, parents before children (then by id).
    pub graph: Vec<WorkflowJob>,
}

/// How a workflow job's parents stand, counted by state without reading their outputs
/// ([`Store::parent_counts`](crate::Store::parent_counts)): what the callback of a batch of
/// many members reads to learn how many succeeded, where [`Store::parents`](crate::Store::parents)
/// reads every member and its output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ParentCounts {
    /// The parents still in the store, by their state now.
    pub by_state: BTreeMap<JobState, u64>,
    /// Parents retention has deleted since (their edges stay as they were).
    pub deleted: u64,
}

impl ParentCounts {
    /// The parents in `state` now.
    pub fn get(&self, state: JobState) -> u64 {
        self.by_state.get(&state).copied().unwrap_or(0)
    }

    /// Every parent, deleted ones included.
    pub fn total(&self) -> u64 {
        self.by_state.values().sum::<u64>() + self.deleted
    }
}

/// Add `n` parents in `state` (`None`: deleted) to `counts`, as both backends read them.
pub(crate) fn count_parent(counts: &mut ParentCounts, state: Option<&str>, n: i64) -> Result<()> {
    let n = u64::try_from(n).unwrap_or(0);
    match state {
        None => counts.deleted += n,
        Some(s) => *counts.by_state.entry(s.parse()?).or_default() += n,
    }
    Ok(())
}

/// A job's parent, as its child reads it with [`Store::parents`](crate::Store::parents).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Parent {
    /// The parent's id.
    pub id: JobId,
    /// Its wire name.
    pub wire_name: String,
    /// Its state (`None` once retention deleted it).
    pub state: Option<JobState>,
    /// What the edge needed of it.
    pub needs: Needs,
    /// Whether it did it (an edge stays met when retention later deletes the parent).
    pub met: bool,
    /// The output its succeeded attempt recorded (JSON bytes), if any
    /// ([`JobContext::set_output`](crate::engine::JobContext::set_output)).
    #[serde(skip)]
    pub output: Option<Vec<u8>>,
}

impl Parent {
    /// Its output decoded into `T`: `None` when it recorded none (or has not succeeded), an
    /// [`Error::Decode`](crate::Error) when the bytes are not a `T`.
    pub fn output_as<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        self.output
            .as_deref()
            .map(|b| {
                serde_json::from_slice(b).map_err(|e| {
                    Error::InvalidInput(format!(
                        "the output of parent {} ({}) is not the type asked for: {e}",
                        self.id, self.wire_name
                    ))
                })
            })
            .transpose()
    }
}

/// Parents before children, then by id: the order `bw workflow show` prints jobs in.
pub(crate) fn topological(mut jobs: Vec<WorkflowJob>) -> Vec<WorkflowJob> {
    jobs.sort_by_key(|j| j.id);
    let ids: HashSet<JobId> = jobs.iter().map(|j| j.id).collect();
    let mut placed: HashSet<JobId> = HashSet::new();
    let mut out = Vec::with_capacity(jobs.len());
    while !jobs.is_empty() {
        let before = jobs.len();
        let mut rest = Vec::new();
        for j in jobs {
            if j.parents.iter().all(|p| placed.contains(&p.job) || !ids.contains(&p.job)) {
                out.push(j);
            } else {
                rest.push(j);
            }
        }
        for j in &out[out.len() - (before - rest.len())..] {
            placed.insert(j.id);
        }
        if rest.len() == before {
            // A cycle written by another program: the rest as they are.
            out.extend(rest);
            break;
        }
        jobs = rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> NewJob {
        NewJob::new(name, "q", b"{}".to_vec())
    }

    #[test]
    fn parent_counts_add_up_states_and_deleted_parents() {
        let mut counts = ParentCounts::default();
        count_parent(&mut counts, Some("succeeded"), 3).unwrap();
        count_parent(&mut counts, Some("dead-lettered"), 1).unwrap();
        count_parent(&mut counts, None, 2).unwrap();
        assert_eq!((counts.get(JobState::Succeeded), counts.get(JobState::Cancelled)), (3, 0));
        assert_eq!((counts.deleted, counts.total()), (2, 6));
        let err = count_parent(&mut counts, Some("exploded"), 1).unwrap_err().to_string();
        assert!(err.contains("exploded"), "{err}");
    }

    #[test]
    fn a_cycle_is_refused_quoting_it() {
        let mut wf = Workflow::new("w");
        let a = wf.add(job("a"));
        let b = wf.add_after(job("b"), &[a]).unwrap();
        let c = wf.add_after(job("c"), &[b]).unwrap();
        wf.depends_on(a, c).unwrap();
        let e = wf.validate().unwrap_err().to_string();
        assert!(e.contains("cycle: #0 a -> #1 b -> #2 c -> #0 a"), "{e}");
    }

    #[test]
    fn duplicate_self_and_foreign_edges_are_refused() {
        let mut wf = Workflow::new("w");
        let a = wf.add(job("a"));
        let b = wf.add_after(job("b"), &[a]).unwrap();
        assert!(wf.depends_on(b, a).unwrap_err().to_string().contains("given twice"));
        assert!(wf.depends_on(a, a).unwrap_err().to_string().contains("itself"));
        let mut other = Workflow::new("other");
        let x = other.add(job("x"));
        let e = wf.add_after(job("c"), &[x]).unwrap_err().to_string();
        assert!(e.contains("another workflow"), "{e}");
        assert_eq!(wf.len(), 2, "a refused job is not added");
        assert!(wf.validate().is_ok());
    }

    #[test]
    fn empty_oversized_and_unique_workflows_are_refused() {
        assert!(Workflow::new("w").validate().unwrap_err().to_string().contains("no job"));
        let mut wf = Workflow::new("w");
        wf.add(job("a").unique(crate::UniqueRule::key("k")));
        assert!(wf.validate().unwrap_err().to_string().contains("cannot be unique"));
    }
}
