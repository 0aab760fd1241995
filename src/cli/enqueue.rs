//! bw enqueue: put one job on a queue by hand (a retry of something lost, a smoke test). Prints
//! the new job's id on stdout so scripts can capture it; with a unique key, the id of the job
//! that already holds the key when there is one (and says so on stderr).

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{sanitize, Render, Term};
use super::{eprint_quiet, parse_duration, parse_label, parse_priority, parse_state, CliError, Ctx};
use backwave::{Enqueued, Error, JobState, Millis, NewJob, Permission, UniqueRule};

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
    /// Its priority within the queue: 0 (claimed first, the default) to 9 (claimed last).
    #[arg(long, value_name = "N", value_parser = parse_priority, allow_negative_numbers = true)]
    pub priority: Option<u8>,
    /// Enqueue only if no job holds this key (scheduled or running, by default); else print the
    /// id of the job that does.
    #[arg(long, value_name = "KEY")]
    pub unique_key: Option<String>,
    /// The states in which a job holds its unique key (comma-separated; must include scheduled
    /// and running), e.g. scheduled,running,succeeded for "once only".
    #[arg(long, value_name = "STATES", value_parser = parse_state, value_delimiter = ',', requires = "unique_key")]
    pub unique_states: Vec<JobState>,
    /// Hold the unique key per window of this length (e.g. 1h: one job per key per hour).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "unique_key")]
    pub unique_for: Option<Duration>,
}

#[derive(Serialize)]
struct View {
    id: String,
    /// `created`, or `duplicate` when a job already held the unique key (`id` is that job).
    result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    unique_key: Option<String>,
}

impl Render for View {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        writeln!(out, "{}", self.id)
    }
}

pub fn run(a: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&a.payload) {
        return Err(CliError::Usage(format!("--payload is not valid JSON ({e}): '{}'", a.payload)));
    }
    let rule = a.unique_key.as_ref().map(|key| {
        let mut rule = UniqueRule::key(key.clone());
        if !a.unique_states.is_empty() {
            rule = rule.states(&a.unique_states);
        }
        if let Some(period) = a.unique_for {
            rule = rule.period(period);
        }
        rule
    });
    // Bad input is a usage error whoever runs it: checked before the store and the permission.
    if let Some(rule) = &rule {
        backwave::store::validate_unique_rule(rule)?;
    }
    // A label given twice: the second value would silently replace the first.
    for (i, (k, _)) in a.labels.iter().enumerate() {
        if a.labels[..i].iter().any(|(seen, _)| seen == k) {
            return Err(CliError::Usage(format!("--label '{k}' is given twice: a job has one value per label")));
        }
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
    if let Some(p) = a.priority {
        job = job.priority(p);
    }
    if let Some(rule) = rule {
        job = job.unique(rule);
    }
    let done = store.insert(&job)?;
    if let Enqueued::Duplicate(id) = done {
        eprint_quiet(format_args!(
            "bw: job {id} already holds unique key '{}': nothing enqueued\n",
            sanitize(a.unique_key.as_deref().unwrap_or_default())
        ));
    }
    if !done.is_duplicate() {
        for warning in unhandled_warnings(&store, &a.wire_name, &job.queue)? {
            eprint_quiet(format_args!("bw: {warning}\n"));
        }
    }
    let result = if done.is_duplicate() { "duplicate" } else { "created" };
    let view = View { id: done.id().to_string(), result, unique_key: a.unique_key.clone() };
    let printed = ctx.printer().and_then(|p| Ok(p.print(&view)?));
    if let Err(e) = printed {
        // The job is committed: its id goes to stderr, or a retry of the command enqueues it twice.
        if !done.is_duplicate() {
            eprint_quiet(format_args!("bw: enqueued job {}, but its output could not be written\n", done.id()));
        }
        return Err(e);
    }
    Ok(ExitCode::SUCCESS)
}

/// When workers are live but none handles `wire_name`, or none claims from `queue`: most
/// likely a typo (a worker of its queue quarantines the job as unhandled within a poll: `bw
/// enqueue send-emial` printed only an id; a job in queue `hgh` waits for a worker that never
/// comes), said with the nearest name they do handle or serve. Nothing when no worker is live
/// (enqueueing ahead of a deploy is normal). Reads the worker registry only, never the jobs.
fn unhandled_warnings(store: &backwave::Store, wire_name: &str, queue: &str) -> Result<Vec<String>, CliError> {
    let now = store.now();
    let live: Vec<_> = store.workers()?.into_iter().filter(|w| w.is_live(now)).collect();
    if live.is_empty() {
        return Ok(Vec::new());
    }
    let hint = |name: &str, known: std::collections::BTreeSet<&str>| match crate::text::did_you_mean(name, known) {
        Some(m) => format!("; did you mean '{}'?", sanitize(m)),
        None => String::new(),
    };
    let mut warnings = Vec::new();
    if !live.iter().any(|w| w.wire_names.iter().any(|n| n == wire_name)) {
        let handled = live.iter().flat_map(|w| w.wire_names.iter().map(String::as_str)).collect();
        warnings.push(format!(
            "warning: no live worker handles wire name '{}'{} (enqueued; a worker that claims it without a \
             handler quarantines it)",
            sanitize(wire_name),
            hint(wire_name, handled)
        ));
    }
    if !live.iter().any(|w| w.queues.iter().any(|q| q == queue)) {
        let served = live.iter().flat_map(|w| w.queues.iter().map(String::as_str)).collect();
        warnings.push(format!(
            "warning: no live worker claims from queue '{}'{} (enqueued; it waits until one does)",
            sanitize(queue),
            hint(queue, served)
        ));
    }
    Ok(warnings)
}
