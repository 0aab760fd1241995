//! One trace from a request to the job it enqueues, exported through the OpenTelemetry SDK:
//! `cargo run --example traced -- DB` (an SQLite path or a `postgres://` URL).
//!
//! The application's side of docs/embedding.md ("Tracing and OpenTelemetry"): `tracing` spans go
//! to OpenTelemetry through `tracing-opentelemetry`, `backwave` is built with its
//! `opentelemetry` feature, and a "request" span enqueues one job. The enqueue stores the trace
//! with the job; the worker's attempt span continues it, and the handler's own span sits inside
//! the attempt. Each span is printed as the SDK exports it: its name, trace id (32 hex digits),
//! span id, parent and kind, then its attributes, one per line.

use std::time::{Duration, Instant};

use backwave::engine::{DispatchPolicy, Engine, Registry, WorkerGroup};
use backwave::{JobState, Store};
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
    let id = {
        let _request = tracing::info_span!("request", http.route = "/greet").entered();
        registry.job("greet", &"ann".to_string())?.enqueue(&store)?
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
    let job = loop {
        let job = store.job(id)?.ok_or("the job is gone")?;
        if job.state.is_terminal() || started.elapsed() > Duration::from_secs(30) {
            break job;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    running.shutdown(Duration::from_secs(5));
    provider.force_flush()?;
    println!("job {id} {} trace={}", job.state, job.trace_id().unwrap_or("none"));
    if job.state != JobState::Succeeded {
        return Err(format!("job {id} ended {}", job.state).into());
    }
    provider.shutdown()?;
    Ok(())
}
