//! One trace from a request to the job it enqueues, exported through the OpenTelemetry SDK:
//! `cargo run --example traced -- DB` (an SQLite path or a `postgres://` URL).
//!
//! The application's side of docs/embedding.md ("Tracing and OpenTelemetry"): `tracing` spans go
//! to OpenTelemetry through `tracing-opentelemetry`, `backwave` is built with its
//! `opentelemetry` feature, and a "request" span enqueues two jobs, one from sync code and one
//! through `AsyncStore`. Each enqueue stores the trace with its job; the worker's attempt span continues it, and the handler's own span sits inside
//! the attempt. Each span is printed as the SDK exports it: its name, trace id (32 hex digits),
//! span id, parent and kind, then its attributes, one per line.

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::{AsyncStore, JobState, Store};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt;

/// The SDK's exporter interface, printing to stdout: the SDK hands each span over as it ends.
#[derive(Debug)]
struct Stdout;

impl SpanExporter for Stdout {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        for span in batch {
            let sc = &span.span_context;
            println!(
                "span {} trace={} id={} parent={} kind={:?}",
                span.name,
                sc.trace_id(),
                sc.span_id(),
                span.parent_span_id,
                span.span_kind
            );
            let mut attributes: Vec<String> =
                span.attributes.iter().map(|kv| format!("  {} = {}", kv.key, kv.value)).collect();
            attributes.sort();
            for a in attributes {
                println!("{a}");
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = std::env::args().nth(1).ok_or("usage: traced DB (an SQLite path or a postgres:// URL)")?;

    // The application's telemetry: an SDK provider with its exporter, under `tracing`.
    let provider = SdkTracerProvider::builder().with_simple_exporter(Stdout).build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("traced"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(otel))?;

    let mut registry = Registry::new();
    registry
        .handle::<String>("greet", |name, _ctx| {
            // The handler's own span: a child of the attempt's.
            let _render = tracing::info_span!("render-greeting", greeting.name = %name).entered();
            tracing::info!("hello, {name}");
            Ok(())
        })
        .queue("traced");
    let store = Store::create(db.as_str())?;
    // Async code enqueues through `AsyncStore`, whose calls may run on tokio's blocking pool (on
    // a current-thread runtime they do): the request's span goes along.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let async_store = rt.block_on(AsyncStore::open(db.as_str()))?;
    let ids = {
        let _request = tracing::info_span!("request", http.route = "/greet").entered();
        let sync = registry.job("greet", &"ann".to_string())?.enqueue(&store)?;
        let from_async = rt.block_on(registry.job("greet", &"bob".to_string())?.enqueue_async(&async_store))?;
        [sync, from_async]
    };

    let mut engine = Engine::new(db.as_str(), registry);
    engine.add_worker_group(WorkerGroup {
        name: "traced".into(),
        policy: DispatchPolicy::strict(["traced"]),
        poll_interval: Duration::from_millis(50),
        ..WorkerGroup::default()
    });
    let running = engine.start()?;
    let started = Instant::now();
    let mut jobs = Vec::new();
    for id in ids {
        let job = loop {
            let job = store.job(id)?.ok_or("the job is gone")?;
            if job.state.is_terminal() || started.elapsed() > Duration::from_secs(30) {
                break job;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        jobs.push(job);
    }
    running.shutdown(Duration::from_secs(5));
    drop(async_store);
    provider.force_flush()?;
    for job in &jobs {
        println!("job {} {} trace={}", job.id, job.state, job.trace_id().unwrap_or("none"));
    }
    if let Some(job) = jobs.iter().find(|j| j.state != JobState::Succeeded) {
        return Err(format!("job {} ended {}", job.id, job.state).into());
    }
    provider.shutdown()?;
    Ok(())
}
