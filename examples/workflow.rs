//! A workflow: fetch -> resize x3 -> publish, where publish reads the three resize outputs.
//! `cargo run --example workflow -- DB` (an SQLite path, created if missing, or a
//! `postgres://` URL); it exits once every job of the workflow is terminal, printing each one.
//! Then `bw --db DB workflows` lists it and `bw --db DB workflow show ID` prints its graph.
//!
//! The application's side of docs/embedding.md ("Workflows"): jobs are typed through the
//! registry (`Registry::job`), joined with edges in a `Workflow` and enqueued in one
//! transaction; a handler records what it produced (`JobContext::set_output`), reports progress
//! (`JobContext::progress`), and a child reads its parents' outputs (`JobContext::parents`).

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, HandlerError, Registry, WorkerGroup};
use backwave::{JobState, Store, Workflow};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Fetch {
    url: String,
}

#[derive(Serialize, Deserialize)]
struct Resize {
    width: u32,
}

/// What a resize produced: the publish step reads one per parent.
#[derive(Debug, Serialize, Deserialize)]
struct Rendition {
    width: u32,
    key: String,
    bytes: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = std::env::args().nth(1).ok_or("usage: workflow DB (an SQLite path or a postgres:// URL)")?;

    let mut registry = Registry::new();
    registry
        .handle::<Fetch>("fetch", |f, ctx| {
            ctx.progress(0.5, format!("downloading {}", f.url))?;
            ctx.set_output(&serde_json::json!({ "original": "s3://media/cat.png", "bytes": 482_113 }))
        })
        .queue("media");
    registry
        .handle::<Resize>("resize", |r, ctx| {
            ctx.progress(0.1, format!("resizing to {} px", r.width))?;
            std::thread::sleep(Duration::from_millis(20));
            ctx.set_output(&Rendition {
                width: r.width,
                key: format!("s3://media/cat-{}.png", r.width),
                bytes: u64::from(r.width) * 37,
            })
        })
        .queue("media");
    registry
        .handle::<serde_json::Value>("publish", |_, ctx| {
            let mut renditions: Vec<Rendition> = Vec::new();
            for parent in ctx.parents().map_err(HandlerError::msg)? {
                let r: Rendition = parent
                    .output_as()
                    .map_err(HandlerError::msg)?
                    .ok_or_else(|| HandlerError::msg(format!("parent {} recorded no output", parent.id)))?;
                renditions.push(r);
            }
            renditions.sort_by_key(|r| r.width);
            let keys: Vec<&str> = renditions.iter().map(|r| r.key.as_str()).collect();
            ctx.set_output(&serde_json::json!({ "published": keys }))
        })
        .queue("media");

    let store = Store::create(db.as_str())?;
    let mut wf = Workflow::new("thumbnails");
    let fetch = wf.add(registry.job("fetch", &Fetch { url: "https://example.com/cat.png".into() })?.into_new_job(0));
    let resizes = [64, 256, 1024]
        .into_iter()
        .map(|width| wf.add_after(registry.job("resize", &Resize { width })?.into_new_job(0), &[fetch]))
        .collect::<Result<Vec<_>, _>>()?;
    wf.add_after(registry.job("publish", &serde_json::json!({}))?.into_new_job(0), &resizes)?;
    let enqueued = store.enqueue_workflow(&wf)?;
    println!("workflow {} enqueued: {} jobs", enqueued.id, enqueued.jobs.len());

    let mut engine = Engine::new(db.as_str(), registry);
    engine.add_worker_group(WorkerGroup {
        name: "media".into(),
        policy: DispatchPolicy::strict(["media"]),
        concurrency: 3,
        ..WorkerGroup::default()
    });
    let running = engine.start()?;
    let started = Instant::now();
    let graph = loop {
        let graph = store.workflow(&enqueued.id.to_string())?.ok_or("the workflow is gone")?;
        if graph.summary.is_done() || started.elapsed() > Duration::from_secs(60) {
            break graph;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    running.shutdown(Duration::from_secs(5));

    for job in &graph.graph {
        let output = store.output(job.id)?.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        println!("{} {:<8} {:<10} {output}", job.id, job.wire_name, job.state.as_str());
    }
    if let Some(job) = graph.graph.iter().find(|j| j.state != JobState::Succeeded) {
        return Err(format!("job {} ({}) ended {}", job.id, job.wire_name, job.state).into());
    }
    println!("workflow {} done", enqueued.id);
    Ok(())
}
