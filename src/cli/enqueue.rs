//! bw enqueue: put one job on a queue by hand (a retry of something lost, a smoke test). Prints
//! the new job's id on stdout so scripts can capture it.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{Render, Term};
use super::{parse_duration, parse_label, CliError, Ctx};
use crate::{Error, Millis, NewJob, Permission};

/// Enqueue a job (needs operate); prints its id.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wire name a handler is registered under.
    pub wire_name: String,
    /// The queue to put it on.
    #[arg(long, default_value = "default", value_name = "QUEUE")]
    pub queue: String,
    /// The payload, as JSON.
    #[arg(long, default_value = "{}", value_name = "JSON")]
    pub payload: String,
    /// A label (repeat for several).
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Run no earlier than this long from now.
    #[arg(long = "in", value_name = "DUR", value_parser = parse_duration)]
    pub delay: Option<Duration>,
}

#[derive(Serialize)]
struct Enqueued {
    id: String,
}

impl Render for Enqueued {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(out, "{}", self.id)
    }
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&a.payload) {
        return Err(CliError::Usage(format!("--payload is not valid JSON ({e}): '{}'", a.payload)));
    }
    let store = ctx.open()?;
    if !store.permissions(ctx.actor())?.contains(&Permission::Operate) {
        return Err(Error::PermissionDenied { actor: ctx.actor().to_string(), permission: Permission::Operate }.into());
    }
    let mut job = NewJob::new(a.wire_name.clone(), a.queue.clone(), a.payload.as_bytes().to_vec());
    for (k, v) in &a.labels {
        job = job.label(k.clone(), v.clone());
    }
    if let Some(d) = a.delay {
        job = job.due_at(store.now() + d.as_millis() as Millis);
    }
    let id = store.enqueue(&job)?;
    ctx.printer()?.print(&Enqueued { id: id.to_string() })?;
    Ok(ExitCode::SUCCESS)
}
