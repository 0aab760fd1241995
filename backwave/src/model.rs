//! The plain data of BackWave: ids, states, jobs, transitions, causes. No I/O and no clock here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::Error;
pub use crate::states::{JobState, Permission};

/// Milliseconds since the Unix epoch, UTC: the store's unit of time.
pub type Millis = i64;

/// A job's id: a time-ordered UUID (v7), so ids sort roughly by creation. Displayed hyphenated;
/// parsed from the same text (`"0192f3a1-…".parse::<JobId>()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub Uuid);

impl JobId {
    /// A fresh id: the current millisecond and random bits drawn from the operating system.
    /// The store makes one for every enqueued job; an application rarely needs its own.
    pub fn new() -> Self {
        JobId(Uuid::now_v7())
    }

    /// The last 8 hex digits: what tables show, and what [`Store::resolve_id`] takes back.
    ///
    /// Not the first 8: ids are time-ordered (v7), so their first 8 hex digits are the top of a
    /// millisecond timestamp, the same for every job made in the same ~65 seconds. The tail is
    /// random: two jobs share it about once in four billion pairs, and then
    /// [`Store::resolve_id`] answers [`Error::AmbiguousId`] listing both.
    ///
    /// [`Store::resolve_id`]: crate::Store::resolve_id
    pub fn short(&self) -> String {
        self.0.simple().to_string()[24..].to_string()
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for JobId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Uuid::parse_str(s.trim()).map(JobId).map_err(|_| {
            Error::InvalidInput(format!(
                "'{s}' is not a job id (expected a UUID such as 0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10)"
            ))
        })
    }
}

impl FromStr for JobState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        // The exact spelling first (every stored row, most input): no copy.
        if let Some(state) = JobState::ALL.into_iter().find(|st| st.as_str() == s) {
            return Ok(state);
        }
        let norm = s.trim().to_ascii_lowercase().replace(['_', ' '], "-");
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == norm || (norm == "deadlettered" && *st == JobState::DeadLettered))
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown state '{s}': expected one of {}",
                    JobState::ALL.map(|s| s.as_str()).join(", ")
                ))
            })
    }
}

/// Why a job was quarantined: it never ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuarantineReason {
    /// No handler is registered for the job's wire name in the claiming process.
    NoHandler,
    /// The payload does not decode into the handler's type.
    UndecodablePayload,
}

impl QuarantineReason {
    /// The spelling in the store and in JSON: `no-handler`, `undecodable-payload`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuarantineReason::NoHandler => "no-handler",
            QuarantineReason::UndecodablePayload => "undecodable-payload",
        }
    }
}

impl fmt::Display for QuarantineReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for QuarantineReason {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "no-handler" => Ok(QuarantineReason::NoHandler),
            "undecodable-payload" => Ok(QuarantineReason::UndecodablePayload),
            _ => Err(Error::InvalidInput(format!(
                "unknown quarantine reason '{s}': expected no-handler or undecodable-payload"
            ))),
        }
    }
}

impl FromStr for Permission {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s.trim()).ok_or_else(|| {
            Error::InvalidInput(format!(
                "unknown permission '{s}': expected one of view-failure-detail, operate, admin"
            ))
        })
    }
}

/// Longer than any store will live. Every duration is subtracted from or added to "now" in i64
/// milliseconds; past about 292 million years that wraps, and a wrapped purge cutoff once
/// deleted every terminal job. [`parse_duration`] refuses anything longer.
pub const LONGEST_DURATION: Duration = Duration::from_secs(1_000 * 366 * 24 * 3_600);

/// The one parser for a duration an operator or a setting gives (`500ms`, `90s`, `2h`, `14d`):
/// humantime, at most [`LONGEST_DURATION`]. The store's `retention` setting is read through it,
/// so an application that takes durations from its users accepts the same spellings.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(backwave::model::parse_duration("90s")?, Duration::from_secs(90));
/// assert!(backwave::model::parse_duration("soon").is_err());
/// # Ok::<(), backwave::Error>(())
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, Error> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| Error::InvalidInput(format!("'{s}' is not a duration ({e}); use e.g. 500ms, 90s, 2h, 14d")))?;
    if d > LONGEST_DURATION {
        return Err(Error::InvalidInput(format!("'{s}' is too long a duration: at most 1000 years")));
    }
    Ok(d)
}

/// The instant `d` before `now`, never wrapping: a duration past i64 milliseconds (written by
/// another program into the store, say) gives the earliest instant, so a sweep at this cutoff
/// deletes nothing rather than everything.
pub fn millis_before(now: Millis, d: Duration) -> Millis {
    now.saturating_sub(Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX))
}

/// The system clock in milliseconds since the Unix epoch (0 before 1970).
pub fn system_now() -> Millis {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0)
}

/// A name the store keeps (a wire name, a queue, a unique key, a workflow's name) is neither
/// empty nor holds control characters; `what` names it in the error. Checked by every insert
/// path and by the declarations (schedules, workflows) before they reach a store.
pub(crate) fn validate_name(what: &str, value: &str) -> Result<(), Error> {
    if value.trim().is_empty() {
        return Err(Error::InvalidInput(format!("the {what} must not be empty")));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!("the {what} {value:?} contains control characters")));
    }
    Ok(())
}

/// One job row, as stored: what [`Store::job`](crate::Store::job) and the listings return.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    /// The job's id.
    pub id: JobId,
    /// The name its handler is registered under.
    pub wire_name: String,
    /// The queue it waits in.
    pub queue: String,
    /// Its labels (`tenant=acme`), as enqueued.
    pub labels: BTreeMap<String, String>,
    /// The payload's bytes: JSON for jobs enqueued through the registry.
    pub payload: Vec<u8>,
    /// Where it is now.
    pub state: JobState,
    /// The attempts begun so far (1 while the first runs; 0 before the first claim).
    pub attempt: u32,
    /// The attempt budget, written at each claim from the claiming retry policy (`None` before
    /// the first claim): the failure of attempt `max_attempts` dead-letters.
    pub max_attempts: Option<u32>,
    /// When it may next be claimed (Scheduled), milliseconds since the Unix epoch.
    pub due_at: Millis,
    /// The worker holding it while Running.
    pub lease_owner: Option<String>,
    /// When the lease lapses unless renewed by a heartbeat; a lapsed lease is reaped as a
    /// failed attempt.
    pub lease_expires_at: Option<Millis>,
    /// The worker group that claimed it last (set at each claim).
    pub worker_group: Option<String>,
    /// Milliseconds to wait after failed attempt n, at index n-1.
    pub delay_table: Option<Vec<u64>>,
    /// The operator who asked this running job to stop.
    pub cancel_requested_by: Option<String>,
    /// Why a terminal job ended as it did, in one line (the last failure's message, `no handler
    /// registered for 'x'`, `cancelled by alice`); `None` while it is not terminal.
    pub terminal_cause: Option<String>,
    /// The cause with its values masked ([`cause_fingerprint`]), so that like failures group.
    pub cause_fingerprint: Option<String>,
    /// Why a Quarantined job never ran.
    pub quarantine_reason: Option<QuarantineReason>,
    /// When it was enqueued.
    pub created_at: Millis,
    /// When its row last changed.
    pub updated_at: Millis,
    /// When it became terminal.
    pub finished_at: Option<Millis>,
    /// The W3C trace context the job was enqueued in (see [`NewJob::traceparent`]); `None` in
    /// lists, and for a job enqueued outside any trace.
    pub traceparent: Option<String>,
    /// What the handler of the succeeded attempt recorded
    /// ([`JobContext::set_output`](crate::JobContext::set_output)): JSON bytes, `None` when it
    /// recorded nothing, for every job not Succeeded, and in lists (read it with
    /// [`Store::output`](crate::Store::output) or [`Store::job`](crate::Store::job)).
    pub output: Option<Vec<u8>>,
    /// What the latest attempt last reported of its progress
    /// ([`JobContext::progress`](crate::JobContext::progress)); `None` before it reports, and in
    /// lists of jobs that are not all Running.
    pub progress: Option<Progress>,
    /// Its priority within its queue, 0 ([`PRIORITY_FIRST`], the default) to 9
    /// ([`PRIORITY_LAST`]): the lower number is claimed first (see [`NewJob::priority`]).
    pub priority: u8,
}

impl Job {
    /// The output decoded as `T`: `None` when there is none, else the decoding's result.
    pub fn output_as<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.output.as_deref().map(serde_json::from_slice)
    }

    /// The trace id (32 hex digits) of the trace the job was enqueued in, if any.
    pub fn trace_id(&self) -> Option<&str> {
        self.traceparent.as_deref().and_then(trace_id_of)
    }

    /// Attempts left before the job dead-letters, when the budget is known.
    pub fn budget_left(&self) -> Option<u32> {
        self.max_attempts.map(|m| m.saturating_sub(self.attempt))
    }

    /// The wait that follows a failure of the current attempt, from the job's own delay table.
    pub fn next_delay_ms(&self) -> Option<u64> {
        let table = self.delay_table.as_ref()?;
        table.get((self.attempt as usize).checked_sub(1)?).copied()
    }
}

/// A reader's position in the transition log: entries are delivered in `(xid, seq)` order, and
/// a reader continues strictly after the last cursor it saw.
///
/// On SQLite `xid` is always 0: one writer at a time assigns `seq` in commit order, so `seq`
/// alone is the order. On PostgreSQL `seq` comes from a sequence, which is not commit order (a
/// transaction can take a later `seq` and commit first); `xid` is the writing transaction's id,
/// and entries are delivered in `(xid, seq)` order only once every transaction below them has
/// ended, so an entry not yet visible always sorts after every cursor already handed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogCursor {
    /// The id of the transaction that appended the entry (0 on SQLite). Compared first.
    pub xid: i64,
    /// The entry's sequence number ([`Transition::seq`]).
    pub seq: i64,
}

/// One entry of the transition log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transition {
    /// Unique per entry and printed as the entry's number; its order is commit order on
    /// SQLite only (see [`LogCursor`]).
    pub seq: i64,
    /// The id of the transaction that appended the entry: 0 on SQLite (see [`LogCursor`]).
    pub xid: i64,
    /// The job that moved.
    pub job_id: JobId,
    /// When, by the store's clock.
    pub at: Millis,
    /// The state it left; `None` for the enqueue that created it.
    pub from: Option<JobState>,
    /// The state it entered.
    pub to: JobState,
    /// The job's attempt at the time.
    pub attempt: u32,
    /// The worker that made the move (a claim, an outcome, a reap), if a worker did.
    pub worker_id: Option<String>,
    /// The operator who made the move (a requeue, a cancel), if one did.
    pub actor: Option<String>,
    /// Why, in one line: a failure's message, `lease expired`, a quarantine reason.
    pub reason: Option<String>,
    /// The failed attempt's failure detail, as much of it as the reader may see.
    pub detail: DetailStatus,
}

impl Transition {
    /// The entry's position in the log: a reader that saw it continues after it.
    pub fn cursor(&self) -> LogCursor {
        LogCursor { xid: self.xid, seq: self.seq }
    }
}

/// What a log entry holds of failure detail, without its text unless it was revealed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum DetailStatus {
    /// The entry is not a failure.
    None,
    /// A failure whose detail was switched off on the host or the store.
    NotCaptured,
    /// Captured detail, hidden: its error type and size only.
    Hidden {
        /// The error's type name ([`FailureDetail::kind`]).
        kind: String,
        /// The detail's size.
        bytes: usize,
    },
    /// Captured detail, revealed to a permitted actor.
    Revealed(FailureDetail),
}

/// The failure detail of a failed attempt: diagnostic only, the engine never reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureDetail {
    /// The error's type name, e.g. `std::io::Error` or `panic`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The error's message.
    pub message: String,
    /// The `source()` chain, outermost first, the message itself excluded.
    #[serde(default)]
    pub chain: Vec<String>,
    /// The application's frames of the backtrace, when one was captured (`RUST_BACKTRACE` or
    /// `RUST_LIB_BACKTRACE` set, or a panic).
    #[serde(default)]
    pub backtrace: Option<String>,
}

/// A job to enqueue, by wire name and payload bytes: what [`Store::insert`](crate::Store::insert),
/// [`Store::enqueue`](crate::Store::enqueue) and the in-transaction enqueues take. Most
/// applications build one through their [`Registry`](crate::Registry) instead ([`Registry::job`]
/// checks the payload against the handler's type); `NewJob` is for a wire name another process
/// handles, or a payload that is already bytes.
///
/// [`Registry::job`]: crate::Registry::job
///
/// ```
/// use backwave::{NewJob, Store, UniqueRule};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::create(dir.path().join("jobs.db"))?;
/// let job = NewJob::new("send-invoice", "billing", br#"{"invoice":42}"#.to_vec())
///     .label("tenant", "acme")
///     .unique(UniqueRule::key("invoice:42"));
/// let first = store.insert(&job)?;
/// assert!(!first.is_duplicate());
/// assert_eq!(store.insert(&job)?, backwave::Enqueued::Duplicate(first.id()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    /// The name its handler is registered under.
    pub wire_name: String,
    /// The queue it waits in.
    pub queue: String,
    /// Labels to filter and group by (`tenant=acme`).
    pub labels: BTreeMap<String, String>,
    /// The payload's bytes, given to the handler (JSON for a [`Registry`](crate::Registry)
    /// handler, which decodes it into its type).
    pub payload: Vec<u8>,
    /// When the job may first run; `None` is now.
    pub due_at: Option<Millis>,
    /// At most one job per key in the rule's states: see [`UniqueRule`].
    pub unique: Option<UniqueRule>,
    /// The W3C `traceparent` of the trace this job continues (its attempts' spans are children
    /// of it). Left `None`, an enqueue with the `opentelemetry` feature fills it from the
    /// enqueue's own span when that span is in a trace; set it to carry a trace the application
    /// propagates itself.
    pub traceparent: Option<String>,
    /// Its priority within its queue: see [`NewJob::priority`].
    pub priority: u8,
}

impl NewJob {
    /// A job for `wire_name` on `queue` with these payload bytes, due now, no labels, not
    /// unique. Names are checked when it is enqueued: an empty or overlong wire name or queue is
    /// [`Error::InvalidInput`], a payload over the store's limit [`Error::PayloadTooLarge`].
    pub fn new(wire_name: impl Into<String>, queue: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        NewJob {
            wire_name: wire_name.into(),
            queue: queue.into(),
            labels: BTreeMap::new(),
            payload: payload.into(),
            due_at: None,
            unique: None,
            traceparent: None,
            priority: PRIORITY_FIRST,
        }
    }

    /// Its priority within its queue, [`PRIORITY_FIRST`] (0, the default) to [`PRIORITY_LAST`]
    /// (9): a claim takes a queue's due jobs of priority 0 first, then 1, and so on, each by
    /// due time (jobs due at the same instant in the order they were stored). Across queues it
    /// changes nothing: the worker group's dispatch policy
    /// picks the queue first. A steady stream of due jobs of a lower number starves the higher
    /// numbers of the same queue for as long as it lasts; give those a queue of their own when
    /// that must not happen. A value above 9 is refused at enqueue
    /// ([`Error::InvalidInput`]), and nothing is enqueued.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Continue the trace of a W3C `traceparent` header (`00-<trace id>-<parent id>-<flags>`):
    /// checked at enqueue ([`InvalidInput`](crate::Error::InvalidInput) when malformed).
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Make the job unique under `rule`: enqueued while another job holds the same key, it is
    /// not stored and the enqueue answers [`Enqueued::Duplicate`] with that job's id.
    pub fn unique(mut self, rule: UniqueRule) -> Self {
        self.unique = Some(rule);
        self
    }

    /// Add a label (a later value for the same key replaces an earlier one).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// First claimable at this instant (milliseconds since the Unix epoch); a time in the past
    /// is now.
    pub fn due_at(mut self, at: Millis) -> Self {
        self.due_at = Some(at);
        self
    }
}

/// What a uniqueness rule compares jobs by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UniqueBy {
    /// A key the application chooses (`report:2026-12-01`), whatever the wire name or payload.
    Key(String),
    /// The wire name and the payload's bytes: the same call twice is one job.
    Payload,
}

/// At most one job per key among the jobs in `states`, optionally per `period`.
///
/// Enforced by a unique index in the store (never a lock or a read before the write), so it
/// holds across every process and host. `states` must include Scheduled and Running (the
/// default): a job moves between those two without an insert that could check the rule, so a
/// rule that left one out could be broken by a claim or a retry. Add terminal states to keep a
/// finished job's key too (e.g. Succeeded: "once only"). With a `period`, the key is held per
/// window of that length (counted from the Unix epoch, by the store's clock at enqueue): the
/// same key enqueued in the next window is a new job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UniqueRule {
    /// What jobs are compared by.
    pub by: UniqueBy,
    /// The states in which a job holds its key (at least Scheduled and Running).
    pub states: Vec<JobState>,
    /// The window the key is held per, if any.
    #[serde(serialize_with = "period_ms")]
    pub period: Option<Duration>,
}

fn period_ms<S: serde::Serializer>(p: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    p.map(|d| d.as_millis() as u64).serialize(s)
}

impl UniqueRule {
    /// The states a rule holds in unless it says otherwise.
    pub const DEFAULT_STATES: [JobState; 2] = [JobState::Scheduled, JobState::Running];

    /// Unique by an explicit key, in the default states, without a period.
    pub fn key(key: impl Into<String>) -> Self {
        UniqueRule { by: UniqueBy::Key(key.into()), states: Self::DEFAULT_STATES.to_vec(), period: None }
    }

    /// Unique by wire name and payload, in the default states, without a period.
    pub fn by_payload() -> Self {
        UniqueRule { by: UniqueBy::Payload, states: Self::DEFAULT_STATES.to_vec(), period: None }
    }

    /// Hold the key in these states (which must include Scheduled and Running).
    pub fn states(mut self, states: &[JobState]) -> Self {
        self.states = states.to_vec();
        self
    }

    /// Hold the key per window of `period`.
    pub fn period(mut self, period: Duration) -> Self {
        self.period = Some(period);
        self
    }

    /// The states as the store's bitmask: bit n for `JobState::ALL[n]`.
    pub fn state_bits(&self) -> i64 {
        self.states.iter().fold(0, |bits, s| bits | s.unique_bit())
    }
}

/// What an enqueue did with one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "result", content = "id", rename_all = "kebab-case")]
pub enum Enqueued {
    /// Stored as a new job with this id.
    Created(JobId),
    /// Not stored: the job with this id holds the same unique key.
    Duplicate(JobId),
}

impl Enqueued {
    /// The new job's id, or the id of the job that holds the key.
    pub fn id(self) -> JobId {
        match self {
            Enqueued::Created(id) | Enqueued::Duplicate(id) => id,
        }
    }

    /// Whether nothing was stored because another job holds the same unique key.
    pub fn is_duplicate(self) -> bool {
        matches!(self, Enqueued::Duplicate(_))
    }
}

/// A registered worker (one worker group of one process), as the store's worker registry holds
/// it: each running group writes its row at start and heartbeats it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerInfo {
    /// The worker's id, `host/pid/group#tail`: the lease owner of the jobs it runs.
    pub id: String,
    /// Its worker group's name.
    pub group: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The wire names its process's registry handles.
    pub wire_names: Vec<String>,
    /// The queues its dispatch policy claims from.
    pub queues: Vec<String>,
    /// When it started.
    pub started_at: Millis,
    /// Its last heartbeat.
    pub last_heartbeat_at: Millis,
    /// How long after its last heartbeat it counts as gone.
    pub stale_after_ms: i64,
}

impl WorkerInfo {
    /// Whether it heartbeat within `stale_after_ms` of `now`.
    pub fn is_live(&self, now: Millis) -> bool {
        // Saturating: another program may write any integer as the heartbeat time.
        now.saturating_sub(self.last_heartbeat_at) <= self.stale_after_ms
    }
}

/// Whether a run of hex digits without a decimal digit is an id rather than a word: 8 or more
/// letters `a`-`f`, all one case. A random hex id has no decimal digit once in 2,600 at 8
/// characters and 133,000 at 12, so ids like `cdfabdfdebcd` do turn up; no English word is
/// that long in those six letters (the longest, `defaced`, `effaced`, `acceded`, have 7), and a
/// mixed-case run (`Fabaceae`) is a name. `deadbeef` and its kin are masked: they are ids.
fn letters_only_hex(run: &str) -> bool {
    run.len() >= 8 && (run.bytes().all(|b| matches!(b, b'a'..=b'f')) || run.bytes().all(|b| matches!(b, b'A'..=b'F')))
}

/// Normalise a cause for grouping: quoted values, ids, hex and digits are masked so that
/// `flaky 'nightly' always fails (attempt 3)` and `flaky 'daily' always fails (attempt 2)` group
/// together as `flaky '*' always fails (attempt #)`. Computed once, when a job turns terminal.
pub fn cause_fingerprint(cause: &str) -> String {
    let mut out = String::with_capacity(cause.len());
    let chars: Vec<char> = cause.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Quoted values: 'x' "x" `x`
        if matches!(c, '\'' | '"' | '`') {
            if let Some(len) = chars[i + 1..].iter().take(200).position(|&d| d == c) {
                out.push(c);
                out.push('*');
                out.push(c);
                i += len + 2;
                continue;
            }
        }
        // A UUID (the hyphenated 36 characters) is masked whole.
        if c.is_ascii_hexdigit() && (i == 0 || !chars[i - 1].is_ascii_alphanumeric()) && i + 36 <= chars.len() {
            let candidate: String = chars[i..i + 36].iter().collect();
            let bounded = chars.get(i + 36).is_none_or(|d| !d.is_ascii_alphanumeric());
            if bounded && candidate.as_bytes()[8] == b'-' && uuid::Uuid::parse_str(&candidate).is_ok() {
                out.push_str("<id>");
                i += 36;
                continue;
            }
        }
        // A run of letters and digits: a number or a hex blob is masked as a whole; hyphens,
        // dots and slashes split runs, so `backwave-54a46e2b4aa2` masks its hex tail too.
        if c.is_ascii_alphanumeric() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let bare = word.strip_prefix("0x").unwrap_or(&word);
            let hexish = !bare.is_empty() && bare.chars().all(|d| d.is_ascii_hexdigit());
            let has_digit = word.chars().any(|d| d.is_ascii_digit());
            if word.chars().all(|d| d.is_ascii_digit()) {
                out.push('#');
            } else if hexish && ((has_digit && word.len() >= 6) || letters_only_hex(bare)) {
                out.push_str("<hex>");
            } else {
                // A word with digits inside (e.g. `host3`) keeps its letters.
                let mut last_digit = false;
                for d in word.chars() {
                    if d.is_ascii_digit() {
                        if !last_digit {
                            out.push('#');
                        }
                        last_digit = true;
                    } else {
                        out.push(d);
                        last_digit = false;
                    }
                }
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The priority claimed first within a queue, and every job's default.
pub const PRIORITY_FIRST: u8 = 0;
/// The priority claimed last within a queue.
pub const PRIORITY_LAST: u8 = 9;

/// A priority as given to the API (`what` names where it came from, `the priority` for a job):
/// [`Error::InvalidInput`] quoting it when it is outside 0-9.
pub fn check_priority(what: &str, priority: impl Into<i64>) -> crate::error::Result<u8> {
    let p: i64 = priority.into();
    match u8::try_from(p) {
        Ok(p) if p <= PRIORITY_LAST => Ok(p),
        _ => Err(crate::error::Error::InvalidInput(format!(
            "{what} {p} is out of range: a priority is {PRIORITY_FIRST} (claimed first) to {PRIORITY_LAST} (claimed last)"
        ))),
    }
}

/// Whether `s` is a W3C `traceparent` as the store keeps it: `vv-<32 hex>-<16 hex>-ff`, lower-case.
pub fn is_traceparent(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 55
        && [2, 35, 52].iter().all(|&i| b[i] == b'-')
        && b.iter().enumerate().all(|(i, c)| [2, 35, 52].contains(&i) || matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The trace id of a W3C `traceparent`, if it is one.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    is_traceparent(traceparent).then(|| &traceparent[3..35])
}

/// How far a running attempt says it has got: a fraction from 0 to 1 and a short message, as
/// its handler last reported through [`JobContext::progress`](crate::JobContext::progress).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// From 0 (started) to 1 (done).
    pub fraction: f64,
    /// A short message (`resizing 3 of 8`), at most [`Progress::MAX_MESSAGE_CHARS`] characters.
    pub message: String,
}

impl Progress {
    /// The longest message kept, in characters; a longer one is cut there, ending in `…`.
    pub const MAX_MESSAGE_CHARS: usize = 200;

    /// A report of `fraction` (0 to 1) with `message`: a fraction outside 0..=1, or not a number,
    /// is [`Error::InvalidInput`] quoting it; a message longer than
    /// [`MAX_MESSAGE_CHARS`](Progress::MAX_MESSAGE_CHARS) is cut there.
    pub fn new(fraction: f64, message: impl Into<String>) -> Result<Self, Error> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(Error::InvalidInput(format!(
                "progress fraction {fraction} is not between 0 and 1 (0.42 is 42%): nothing was reported"
            )));
        }
        let mut message = message.into();
        if let Some((at, _)) = message.char_indices().nth(Self::MAX_MESSAGE_CHARS) {
            let cut = message[..at].char_indices().last().map_or(0, |(i, _)| i);
            message.truncate(cut);
            message.push('…');
        }
        Ok(Progress { fraction, message })
    }

    /// The fraction as a whole percentage, rounded down (`0.999` is 99: not done until 1).
    pub fn percent(&self) -> u32 {
        (self.fraction * 100.0).floor().clamp(0.0, 100.0) as u32
    }
}

impl fmt::Display for Progress {
    /// `42% resizing`, or `42%` without a message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent())?;
        if !self.message.is_empty() {
            write!(f, " {}", self.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_group_like_causes() {
        assert_eq!(cause_fingerprint("flaky 'nightly' always fails (attempt 3)"), "flaky '*' always fails (attempt #)");
        assert_eq!(cause_fingerprint("gateway timeout (attempt 12)"), "gateway timeout (attempt #)");
        assert_eq!(
            cause_fingerprint("job 0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10 failed at 0xdeadbeef12"),
            "job <id> failed at <hex>"
        );
        assert_eq!(cause_fingerprint("lease expired"), "lease expired");
        // Regression: hex after a word and a hyphen kept its letters, so every temp dir was a group.
        assert_eq!(
            cause_fingerprint("cleanup of /tmp/backwave-54a46e2b4aa2 failed"),
            "cleanup of /tmp/backwave-<hex> failed"
        );
        assert_eq!(cause_fingerprint("smtp1.example.net refused"), "smtp#.example.net refused");
        assert_eq!(cause_fingerprint("s3.eu-west-1 down"), "s#.eu-west-# down");
        assert_eq!(cause_fingerprint(""), "");
    }

    #[test]
    fn hex_ids_without_a_digit_are_masked_and_words_in_hex_letters_are_not() {
        // Regression: `cdfabdfdebcd` has no digit, so each such cause was a group of its own.
        assert_eq!(cause_fingerprint("upload cdfabdfdebcd failed"), "upload <hex> failed");
        assert_eq!(cause_fingerprint("upload fedcbafedcba failed"), "upload <hex> failed");
        assert_eq!(cause_fingerprint("object CDFABDFDEBCD missing"), "object <hex> missing");
        assert_eq!(cause_fingerprint("/tmp/backwave-deadbeef gone"), "/tmp/backwave-<hex> gone");
        assert_eq!(cause_fingerprint("token 0xabcdefab expired"), "token <hex> expired");
        // Words made of a-f letters are at most 7 long; mixed case is a name.
        assert_eq!(cause_fingerprint("account defaced by a faded decade"), "account defaced by a faded decade");
        assert_eq!(cause_fingerprint("effaced acceded Fabaceae"), "effaced acceded Fabaceae");
        assert_eq!(cause_fingerprint("cafe abcdefa"), "cafe abcdefa");
    }

    #[test]
    fn states_parse_from_the_command_line_spelling() {
        for s in JobState::ALL {
            assert_eq!(s.as_str().parse::<JobState>().unwrap(), s);
        }
        assert_eq!("Dead-Lettered".parse::<JobState>().unwrap(), JobState::DeadLettered);
        let err = "dead".parse::<JobState>().unwrap_err().to_string();
        assert!(err.contains("'dead'") && err.contains("dead-lettered"), "{err}");
    }
}
