//! Workflows on SQLite: enqueue a whole graph in one transaction, and read workflows, a
//! workflow's graph and a job's parents and children. Releasing a child is not here: the
//! schema's `jobs_release` trigger does it in the transaction that completes its last parent.

use rusqlite::{params, Connection, OptionalExtension};

use super::row::parse_id;
use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{JobId, JobState, Millis, NewJob};
use crate::store::ops::enqueue::{jitter_seed, validate_new_jobs};
use crate::workflow::{
    self, Edge, Needs, OnFailure, Parent, ParentCounts, Workflow, WorkflowGraph, WorkflowId, WorkflowJob,
    WorkflowSummary,
};

impl SqliteStore {
    /// Every job of `workflow` (its jobs given as `jobs`, trace context filled in), its edges,
    /// the workflow's row and each job's creation entry, in one write transaction.
    pub fn enqueue_workflow(&self, id: WorkflowId, workflow: &Workflow, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        validate_new_jobs(jobs)?;
        let now = self.now();
        self.write(|tx| {
            super::admin::check_new_payloads(jobs, super::admin::payload_limit(tx)?)?;
            tx.prepare_cached(
                "INSERT INTO workflows (id, name, jobs, created_at, on_failure) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                id.to_string(),
                workflow.name(),
                jobs.len() as i64,
                now,
                workflow.failure_policy().as_str()
            ])?;
            let waits = workflow.parent_counts();
            let ids: Vec<JobId> = jobs.iter().map(|_| JobId::new()).collect();
            let mut insert = tx.prepare_cached(
                "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at,
                                   updated_at, traceparent, workflow_id, priority)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12)",
            )?;
            let mut log = tx.prepare_cached(
                "INSERT INTO transitions (job_id, at, from_state, to_state, attempt) VALUES (?1, ?2, NULL, ?3, 0)",
            )?;
            let wf = id.to_string();
            for ((job, jid), waits) in jobs.iter().zip(&ids).zip(&waits) {
                let state = if *waits > 0 { JobState::Waiting } else { JobState::Scheduled };
                let labels = serde_json::to_string(&job.labels).map_err(Error::Encode)?;
                let seed = jitter_seed(jid);
                let jid = jid.to_string();
                insert.execute(params![
                    jid,
                    job.wire_name,
                    job.queue,
                    labels,
                    job.payload,
                    state.as_str(),
                    job.due_at.unwrap_or(now),
                    seed,
                    now,
                    job.traceparent,
                    wf,
                    job.priority,
                ])?;
                log.execute(params![jid, now, state.as_str()])?;
            }
            let mut edge = tx.prepare_cached("INSERT INTO job_edges (child, parent, needs) VALUES (?1, ?2, ?3)")?;
            for (child, parent, needs) in workflow.edges() {
                edge.execute(params![ids[*child].to_string(), ids[*parent].to_string(), needs.as_str()])?;
            }
            Ok(ids)
        })
    }

    pub fn workflows(&self, limit: usize) -> Result<Vec<WorkflowSummary>> {
        self.read(|tx| {
            let heads: Vec<Head> = tx
                .prepare_cached(
                    "SELECT id, name, created_at, jobs, on_failure FROM workflows ORDER BY created_at DESC, id DESC LIMIT ?1",
                )?
                .query_map([limit.min(i64::MAX as usize) as i64], head)?
                .collect::<rusqlite::Result<_>>()?;
            summaries(tx, heads)
        })
    }

    pub fn workflow(&self, id_or_prefix: &str) -> Result<Option<WorkflowGraph>> {
        let prefix = id_or_prefix.trim().to_ascii_lowercase();
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(Error::InvalidInput(format!("'{id_or_prefix}' is not a workflow id or a prefix of one")));
        }
        self.read(|tx| {
            let found: Vec<Head> = tx
                .prepare_cached(
                    "SELECT id, name, created_at, jobs, on_failure FROM workflows
                     WHERE id >= ?1 AND id < ?1 || 'g' ORDER BY id LIMIT 2",
                )?
                .query_map([&prefix], head)?
                .collect::<rusqlite::Result<_>>()?;
            let head = match found.len() {
                0 => return Ok(None),
                1 => found.into_iter().next().expect("one row"),
                _ => {
                    return Err(Error::InvalidInput(format!(
                        "the prefix '{id_or_prefix}' names more than one workflow ({} and {}): give more of the id",
                        found[0].0, found[1].0
                    )))
                }
            };
            let id = head.0.clone();
            let summary = summaries(tx, vec![head])?.pop().expect("one summary a head");
            let mut graph: Vec<WorkflowJob> = tx
                .prepare_cached(
                    "SELECT id, wire_name, queue, state, attempt FROM jobs WHERE workflow_id = ?1 ORDER BY created_at, id",
                )?
                .query_map([&id], |r| {
                    Ok(WorkflowJob {
                        id: parse_id(r, 0)?,
                        wire_name: r.get(1)?,
                        queue: r.get(2)?,
                        state: super::row::parse_state(r, 3)?,
                        attempt: r.get(4)?,
                        parents: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            // Every edge of the workflow in one read, handed to its child.
            let mut parents: std::collections::HashMap<JobId, Vec<Edge>> = std::collections::HashMap::new();
            let mut all = tx.prepare_cached(GRAPH_EDGES_SQL)?;
            let mut rows = all.query([&id])?;
            while let Some(r) = rows.next()? {
                let child = parse_id(r, 0)?;
                let state: Option<String> = r.get(3)?;
                parents.entry(child).or_default().push(Edge {
                    job: parse_id(r, 1)?,
                    wire_name: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    state: state.and_then(|s| s.parse().ok()),
                    needs: Needs::parse(&r.get::<_, String>(4)?),
                    met: r.get(5)?,
                });
            }
            for job in &mut graph {
                job.parents = parents.remove(&job.id).unwrap_or_default();
            }
            Ok(Some(WorkflowGraph { summary, graph: workflow::topological(graph) }))
        })
    }

    pub fn parents(&self, job: JobId) -> Result<Vec<Parent>> {
        self.read(|tx| {
            Ok(tx
                .prepare_cached(
                    "SELECT e.parent, j.wire_name, j.state, e.needs, j.output, e.met
                     FROM job_edges e LEFT JOIN jobs j ON j.id = e.parent WHERE e.child = ?1 ORDER BY e.parent",
                )?
                .query_map([job.to_string()], |r| {
                    let state: Option<String> = r.get(2)?;
                    Ok(Parent {
                        id: parse_id(r, 0)?,
                        wire_name: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                        state: state.and_then(|s| s.parse().ok()),
                        needs: Needs::parse(&r.get::<_, String>(3)?),
                        output: r.get(4)?,
                        met: r.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?)
        })
    }

    pub fn parent_counts(&self, job: JobId) -> Result<ParentCounts> {
        self.read(|tx| {
            let mut counts = ParentCounts::default();
            let mut rows = tx.prepare_cached(PARENT_COUNTS_SQL)?;
            let mut rows = rows.query([job.to_string()])?;
            while let Some(r) = rows.next()? {
                let (state, n): (Option<String>, i64) = (r.get(0)?, r.get(1)?);
                workflow::count_parent(&mut counts, state.as_deref(), n)?;
            }
            Ok(counts)
        })
    }

    pub fn children(&self, job: JobId) -> Result<Vec<Edge>> {
        self.read(|tx| children(tx, job))
    }

    pub fn workflow_of(&self, job: JobId) -> Result<Option<WorkflowId>> {
        self.read(|tx| {
            let id: Option<Option<String>> = tx
                .prepare_cached("SELECT workflow_id FROM jobs WHERE id = ?1")?
                .query_row([job.to_string()], |r| r.get(0))
                .optional()?;
            id.flatten().map(|s| s.parse()).transpose()
        })
    }
}

/// Every edge into a job of workflow `?1`: child, then the parent's side.
const GRAPH_EDGES_SQL: &str = "SELECT e.child, e.parent, j.wire_name, j.state, e.needs, e.met
     FROM jobs c INDEXED BY jobs_workflow JOIN job_edges e ON e.child = c.id LEFT JOIN jobs j ON j.id = e.parent
     WHERE c.workflow_id = ?1 ORDER BY e.child, e.parent";
/// A job's parents by state (NULL: deleted).
const PARENT_COUNTS_SQL: &str = "SELECT j.state, count(*) FROM job_edges e LEFT JOIN jobs j ON j.id = e.parent
     WHERE e.child = ?1 GROUP BY j.state";
/// A job's children.
const CHILDREN_SQL: &str = "SELECT e.child, j.wire_name, j.state, e.needs, e.met
     FROM job_edges e JOIN jobs j ON j.id = e.child WHERE e.parent = ?1 ORDER BY e.child";

fn children(tx: &Connection, job: JobId) -> Result<Vec<Edge>> {
    Ok(tx
        .prepare_cached(CHILDREN_SQL)?
        .query_map([job.to_string()], |r| {
            let state: Option<String> = r.get(2)?;
            Ok(Edge {
                job: parse_id(r, 0)?,
                wire_name: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                state: state.and_then(|s| s.parse().ok()),
                needs: Needs::parse(&r.get::<_, String>(3)?),
                met: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?)
}

/// A `workflows` row: id, name, created_at, jobs, on_failure.
type Head = (String, String, Millis, i64, String);

fn head(r: &rusqlite::Row<'_>) -> rusqlite::Result<Head> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

/// The summaries of `heads`: their jobs counted by state, and their stuck jobs, in one
/// statement each for the whole set.
fn summaries(tx: &Connection, heads: Vec<Head>) -> Result<Vec<WorkflowSummary>> {
    let ids = serde_json::to_string(&heads.iter().map(|h| h.0.as_str()).collect::<Vec<_>>()).map_err(Error::Encode)?;
    let mut counts = Vec::new();
    let mut by_state = tx.prepare_cached(
        "SELECT workflow_id, state, count(*), min(updated_at) FROM jobs INDEXED BY jobs_workflow
         WHERE workflow_id IN (SELECT value FROM json_each(?1)) GROUP BY workflow_id, state",
    )?;
    let mut rows = by_state.query([&ids])?;
    while let Some(r) = rows.next()? {
        let state: JobState = r.get::<_, String>(1)?.parse()?;
        counts.push((r.get::<_, String>(0)?.parse()?, state, r.get::<_, i64>(2)? as u64, r.get(3)?));
    }
    let mut stuck = Vec::new();
    let mut stuck_rows = tx.prepare_cached(STUCK_SQL)?;
    let mut rows = stuck_rows.query([&ids])?;
    while let Some(r) = rows.next()? {
        stuck.push((r.get::<_, String>(0)?.parse()?, r.get::<_, i64>(1)? as u64));
    }
    let heads = heads
        .into_iter()
        .map(|(id, name, created_at, jobs, on_failure)| {
            Ok(workflow::Head { id: id.parse()?, name, created_at, jobs, on_failure: OnFailure::parse(&on_failure) })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(workflow::summaries(heads, counts, stuck))
}

/// Per workflow of the JSON array `?1`, its Waiting jobs with an unmet edge to a parent that
/// ended without succeeding: they wait for an operator.
const STUCK_SQL: &str = "SELECT c.workflow_id, count(DISTINCT c.id) FROM jobs c INDEXED BY jobs_workflow
     JOIN job_edges e ON e.child = c.id AND e.met = 0
     JOIN jobs p ON p.id = e.parent AND p.state IN ('dead-lettered', 'quarantined', 'cancelled')
     WHERE c.workflow_id IN (SELECT value FROM json_each(?1)) AND c.state = 'waiting'
     GROUP BY c.workflow_id";
