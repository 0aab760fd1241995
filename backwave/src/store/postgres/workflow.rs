//! Workflows on PostgreSQL: the same operations as `sqlite/workflow.rs`. The release of a
//! child is the schema's `jobs_release` trigger (`bw_release_children`), in the transaction
//! that completes its last parent; since schema 21 it is queued only for a statement that ended
//! a workflow job (`jobs_release_mark` marks the transaction), so other claims and completions
//! never call it.

use super::{PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{JobId, JobState, NewJob};
use crate::store::ops::enqueue::{jitter_seed, validate_new_jobs};
use crate::store::ops::settings::check_new_payloads;
use crate::workflow::{
    self, Edge, Needs, OnFailure, Parent, ParentCounts, Workflow, WorkflowGraph, WorkflowId, WorkflowJob,
    WorkflowSummary,
};

impl PgStore {
    pub fn enqueue_workflow(&self, id: WorkflowId, workflow: &Workflow, jobs: &[NewJob]) -> Result<Vec<JobId>> {
        validate_new_jobs(jobs)?;
        let waits = workflow.parent_counts();
        let ids: Vec<JobId> = jobs.iter().map(|_| JobId::new()).collect();
        let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| id.0).collect();
        let wire_names: Vec<&str> = jobs.iter().map(|j| j.wire_name.as_str()).collect();
        let queues: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
        let labels: Vec<String> =
            jobs.iter().map(|j| serde_json::to_string(&j.labels).map_err(Error::Encode)).collect::<Result<_>>()?;
        let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload.as_slice()).collect();
        let due: Vec<Option<i64>> = jobs.iter().map(|j| j.due_at).collect();
        let seeds: Vec<i64> = ids.iter().map(jitter_seed).collect();
        let traceparents: Vec<Option<&str>> = jobs.iter().map(|j| j.traceparent.as_deref()).collect();
        let states: Vec<&str> = waits
            .iter()
            .map(|w| if *w > 0 { JobState::Waiting.as_str() } else { JobState::Scheduled.as_str() })
            .collect();
        let children: Vec<uuid::Uuid> = workflow.edges().iter().map(|(c, _, _)| ids[*c].0).collect();
        let parents: Vec<uuid::Uuid> = workflow.edges().iter().map(|(_, p, _)| ids[*p].0).collect();
        let needs: Vec<&str> = workflow.edges().iter().map(|(_, _, n)| n.as_str()).collect();
        let priorities: Vec<i64> = jobs.iter().map(|j| i64::from(j.priority)).collect();
        self.write(|tx| {
            check_new_payloads(jobs, super::admin::payload_limit(tx)?)?;
            let now = tx.now()?;
            tx.execute(
                "INSERT INTO workflows (id, name, jobs, created_at, on_failure) VALUES ($1, $2, $3, $4, $5)",
                &[&id.0, &workflow.name(), &(jobs.len() as i64), &now, &workflow.failure_policy().as_str()],
            )?;
            let inserted = tx.execute(
                "WITH logged AS (
                     INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
                     SELECT o.id, $9, NULL, o.st, 0 FROM unnest($1::uuid[], $10::text[]) AS o(id, st)
                 )
                 INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at,
                                   updated_at, traceparent, workflow_id, priority)
                 SELECT id, w, q, l::jsonb, p, st, coalesce(d, $9), s, $9, $9, tp, $11, pr
                 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[],
                             $7::bigint[], $8::text[], $10::text[], $12::bigint[])
                      AS n(id, w, q, l, p, d, s, tp, st, pr)",
                &[
                    &uuids,
                    &wire_names,
                    &queues,
                    &labels,
                    &payloads,
                    &due,
                    &seeds,
                    &traceparents,
                    &now,
                    &states,
                    &id.0,
                    &priorities,
                ],
            )?;
            if inserted != jobs.len() as u64 {
                return Err(Error::InvalidInput(format!(
                    "{inserted} of {} jobs were stored; nothing was enqueued",
                    jobs.len()
                )));
            }
            tx.execute(
                "INSERT INTO job_edges (child, parent, needs)
                 SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[])",
                &[&children, &parents, &needs],
            )?;
            Ok(ids.clone())
        })
    }

    pub fn workflows(&self, limit: usize) -> Result<Vec<WorkflowSummary>> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(|tx| {
            let rows = tx.query(
                "SELECT id, name, created_at, jobs, on_failure FROM workflows ORDER BY created_at DESC, id DESC LIMIT $1",
                &[&limit],
            )?;
            summaries(tx, &rows)
        })
    }

    pub fn workflow(&self, id_or_prefix: &str) -> Result<Option<WorkflowGraph>> {
        let prefix = id_or_prefix.trim().to_ascii_lowercase();
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(Error::InvalidInput(format!("'{id_or_prefix}' is not a workflow id or a prefix of one")));
        }
        self.read(|tx| {
            let found = tx.query(
                "SELECT id, name, created_at, jobs, on_failure FROM workflows WHERE id::text LIKE $1 || '%' ORDER BY id LIMIT 2",
                &[&prefix],
            )?;
            let row = match found.len() {
                0 => return Ok(None),
                1 => &found[0],
                _ => {
                    let a: uuid::Uuid = found[0].try_get(0)?;
                    let b: uuid::Uuid = found[1].try_get(0)?;
                    return Err(Error::InvalidInput(format!(
                        "the prefix '{id_or_prefix}' names more than one workflow ({a} and {b}): give more of the id"
                    )));
                }
            };
            let id: uuid::Uuid = row.try_get(0)?;
            let summary = summaries(tx, std::slice::from_ref(row))?.pop().expect("one summary a row");
            let mut graph = Vec::new();
            for r in tx.query(
                "SELECT id, wire_name, queue, state, attempt FROM jobs WHERE workflow_id = $1 ORDER BY created_at, id",
                &[&id],
            )? {
                let state: String = r.try_get(3)?;
                let attempt: i64 = r.try_get(4)?;
                graph.push(WorkflowJob {
                    id: JobId(r.try_get(0)?),
                    wire_name: r.try_get(1)?,
                    queue: r.try_get(2)?,
                    state: state.parse()?,
                    attempt: attempt.clamp(0, u32::MAX as i64) as u32,
                    parents: Vec::new(),
                });
            }
            // Every edge of the workflow in one read, handed to its child.
            let mut parents: std::collections::HashMap<JobId, Vec<Edge>> = std::collections::HashMap::new();
            for r in tx.query(
                "SELECT e.child, e.parent, j.wire_name, j.state, e.needs, e.met
                 FROM jobs c JOIN job_edges e ON e.child = c.id LEFT JOIN jobs j ON j.id = e.parent
                 WHERE c.workflow_id = $1 ORDER BY e.child, e.parent",
                &[&id],
            )? {
                let state: Option<String> = r.try_get(3)?;
                parents.entry(JobId(r.try_get(0)?)).or_default().push(Edge {
                    job: JobId(r.try_get(1)?),
                    wire_name: r.try_get::<_, Option<String>>(2)?.unwrap_or_default(),
                    state: state.and_then(|s| s.parse().ok()),
                    needs: Needs::parse(r.try_get(4)?),
                    met: r.try_get(5)?,
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
            tx.query(
                "SELECT e.parent, j.wire_name, j.state, e.needs, j.output, e.met
                 FROM job_edges e LEFT JOIN jobs j ON j.id = e.parent WHERE e.child = $1 ORDER BY e.parent",
                &[&job.0],
            )?
            .iter()
            .map(|r| {
                let state: Option<String> = r.try_get(2)?;
                Ok(Parent {
                    id: JobId(r.try_get(0)?),
                    wire_name: r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                    state: state.and_then(|s| s.parse().ok()),
                    needs: Needs::parse(r.try_get(3)?),
                    output: r.try_get(4)?,
                    met: r.try_get(5)?,
                })
            })
            .collect()
        })
    }

    pub fn parent_counts(&self, job: JobId) -> Result<ParentCounts> {
        self.read_one(|tx| {
            let mut counts = ParentCounts::default();
            for r in tx.query(
                "SELECT j.state, count(*) FROM job_edges e LEFT JOIN jobs j ON j.id = e.parent
                 WHERE e.child = $1 GROUP BY j.state",
                &[&job.0],
            )? {
                let (state, n): (Option<String>, i64) = (r.try_get(0)?, r.try_get(1)?);
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
            let row = tx.query_opt("SELECT workflow_id FROM jobs WHERE id = $1", &[&job.0])?;
            Ok(match row {
                Some(r) => r.try_get::<_, Option<uuid::Uuid>>(0)?.map(WorkflowId),
                None => None,
            })
        })
    }
}

const CHILDREN_SQL: &str = "SELECT e.child, j.wire_name, j.state, e.needs, e.met
     FROM job_edges e JOIN jobs j ON j.id = e.child WHERE e.parent = $1 ORDER BY e.child";

fn children(tx: &mut Tx<'_>, job: JobId) -> Result<Vec<Edge>> {
    tx.query(CHILDREN_SQL, &[&job.0])?
        .iter()
        .map(|r| {
            let state: Option<String> = r.try_get(2)?;
            Ok(Edge {
                job: JobId(r.try_get(0)?),
                wire_name: r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                state: state.and_then(|s| s.parse().ok()),
                needs: Needs::parse(r.try_get(3)?),
                met: r.try_get(4)?,
            })
        })
        .collect()
}

/// The summaries of `workflows` rows (id, name, created_at, jobs, on_failure): their jobs
/// counted by state, and their stuck jobs, in one statement each for the whole set (a round trip
/// per workflow was two for each row of a page).
fn summaries(tx: &mut Tx<'_>, rows: &[postgres::Row]) -> Result<Vec<WorkflowSummary>> {
    let heads = rows
        .iter()
        .map(|r| {
            Ok(workflow::Head {
                id: WorkflowId(r.try_get(0)?),
                name: r.try_get(1)?,
                created_at: r.try_get(2)?,
                jobs: r.try_get(3)?,
                on_failure: OnFailure::parse(r.try_get(4)?),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ids: Vec<uuid::Uuid> = heads.iter().map(|h| h.id.0).collect();
    let mut counts = Vec::new();
    for r in tx.query(
        "SELECT workflow_id, state, count(*), min(updated_at) FROM jobs WHERE workflow_id = ANY ($1)
         GROUP BY workflow_id, state",
        &[&ids],
    )? {
        let state: JobState = r.try_get::<_, String>(1)?.parse()?;
        counts.push((WorkflowId(r.try_get(0)?), state, r.try_get::<_, i64>(2)? as u64, r.try_get(3)?));
    }
    let mut stuck = Vec::new();
    for r in tx.query(
        "SELECT c.workflow_id, count(DISTINCT c.id) FROM jobs c
         JOIN job_edges e ON e.child = c.id AND NOT e.met
         JOIN jobs p ON p.id = e.parent AND p.state IN ('dead-lettered', 'quarantined', 'cancelled')
         WHERE c.workflow_id = ANY ($1) AND c.state = 'waiting'
         GROUP BY c.workflow_id",
        &[&ids],
    )? {
        stuck.push((WorkflowId(r.try_get(0)?), r.try_get::<_, i64>(1)? as u64));
    }
    Ok(workflow::summaries(heads, counts, stuck))
}
