//! The large-store generator behind the hidden `bw generate`: N jobs with a realistic mix and
//! about five transition entries each, deterministic for a seed and an instant, written in one
//! transaction so that a million jobs take seconds. The file it leaves follows `schema.sql`
//! exactly: the indexes and triggers it drops for the load are recreated from their own SQL.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, Statement};

use crate::error::{Error, Result};
use crate::model::{cause_fingerprint, FailureDetail, JobState, Millis};
use crate::store::Store;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub jobs: u64,
    /// Same seed and same `now`: the same store, row for row.
    pub seed: u64,
    /// The instant the store is generated "at": the newest job is about 2 minutes old, the oldest
    /// about 7 days, running leases lapse around it and delayed jobs are due after it.
    pub now: Millis,
}

/// What was generated, for the summary line.
#[derive(Clone, Debug, Default)]
pub struct GenerateReport {
    pub jobs: u64,
    pub transitions: u64,
    /// Jobs per state, in [`JobState::ALL`] order.
    pub by_state: [u64; 6],
    pub elapsed: Duration,
}

/// Progress is reported every this many jobs.
pub const PROGRESS_EVERY: u64 = 100_000;

/// Generate a store at `path`, which must not exist. `progress` gets the number of jobs written.
pub fn generate(path: &Path, opts: &GenerateOptions, mut progress: impl FnMut(u64)) -> Result<GenerateReport> {
    let started = Instant::now();
    if path.exists() {
        return Err(Error::InvalidInput(format!("'{}' already exists: generate refuses to touch it", path.display())));
    }
    let store = Store::create(path)?;
    let conn = store.connection();
    // One writer, a new file: a rollback journal writes each page once where WAL would write it
    // twice (log, then checkpoint); the store goes back to WAL before it is handed over.
    conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))?;
    // The foreign key and CHECK constraints cost a lookup or a GLOB per row: the generator's rows
    // keep them by construction, and tests/demo.rs runs integrity and foreign-key checks on its
    // output. A page cache that holds the whole new file (about 1.3 KB a job) means each page is
    // written once, at commit.
    let cache_kib = (opts.jobs.saturating_mul(3) / 2).clamp(64 * 1024, 2 * 1024 * 1024);
    conn.execute_batch(&format!(
        "PRAGMA synchronous = OFF; PRAGMA cache_size = -{cache_kib}; PRAGMA temp_store = MEMORY;
         PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;"
    ))?;

    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = load(conn, opts, &mut progress);
    let mut report = match result {
        Ok(r) => {
            conn.execute_batch("COMMIT")?;
            r
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA ignore_check_constraints = OFF;
         PRAGMA cache_size = -2000;",
    )?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Pragma { name: "journal_mode", wanted: "wal".into(), actual: mode });
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The whole load, inside the caller's transaction.
fn load(conn: &Connection, opts: &GenerateOptions, progress: &mut dyn FnMut(u64)) -> Result<GenerateReport> {
    // Secondary indexes and the job_counts triggers cost more than the rows themselves during a
    // bulk load: drop them, and recreate them from the very SQL schema.sql gave them.
    let derived: Vec<(String, String, String)> = conn
        .prepare(
            "SELECT type, name, sql FROM sqlite_schema
             WHERE type IN ('index', 'trigger') AND sql IS NOT NULL AND tbl_name IN ('jobs', 'transitions')",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (kind, name, _) in &derived {
        conn.execute_batch(&format!("DROP {} \"{name}\"", kind.to_uppercase()))?;
    }

    let mut gen = Generator::new(opts);
    let workers = gen.workers.clone();
    let tables: Vec<String> = GROUPS.iter().map(Group::table_json).collect();
    let mut jobs = Batch::new(conn, JOB_INSERT, 20, 32)?;
    let mut log = Batch::new(conn, LOG_INSERT, 10, 64)?;
    let mut report = GenerateReport { jobs: opts.jobs, ..Default::default() };
    // The log is appended in time order, as commits would have appended it: entries wait in a
    // heap until no later job can produce an earlier one (jobs are created in strictly
    // increasing time, and every entry of a job comes at or after its creation).
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut order = 0u64;
    let bind_job = |st: &mut Statement<'_>, base: usize, job: &GenJob| -> rusqlite::Result<()> {
        let fingerprint = job.terminal_cause.as_deref().map(cause_fingerprint);
        st.raw_bind_parameter(base + 1, &*job.id)?;
        st.raw_bind_parameter(base + 2, job.wire_name)?;
        st.raw_bind_parameter(base + 3, job.queue)?;
        st.raw_bind_parameter(base + 4, job.labels)?;
        st.raw_bind_parameter(base + 5, job.payload.as_bytes())?;
        st.raw_bind_parameter(base + 6, job.state.as_str())?;
        st.raw_bind_parameter(base + 7, job.attempt)?;
        st.raw_bind_parameter(base + 8, job.max_attempts)?;
        st.raw_bind_parameter(base + 9, job.due_at)?;
        st.raw_bind_parameter(base + 10, job.lease_owner.map(|w| workers[w].id.as_str()))?;
        st.raw_bind_parameter(base + 11, job.lease_expires_at)?;
        st.raw_bind_parameter(base + 12, job.group.map(|g| GROUPS[g].name))?;
        st.raw_bind_parameter(base + 13, job.group.map(|g| tables[g].as_str()))?;
        st.raw_bind_parameter(base + 14, job.cancel_requested_by)?;
        st.raw_bind_parameter(base + 15, job.terminal_cause.as_deref())?;
        st.raw_bind_parameter(base + 16, fingerprint)?;
        st.raw_bind_parameter(base + 17, job.quarantine_reason)?;
        st.raw_bind_parameter(base + 18, job.created_at)?;
        st.raw_bind_parameter(base + 19, job.updated_at)?;
        st.raw_bind_parameter(base + 20, job.finished_at)
    };
    let bind_log = |st: &mut Statement<'_>, base: usize, p: &Pending| -> rusqlite::Result<()> {
        let e = &p.entry;
        st.raw_bind_parameter(base + 1, &*e.job_id)?;
        st.raw_bind_parameter(base + 2, p.at)?;
        st.raw_bind_parameter(base + 3, e.from.map(JobState::as_str))?;
        st.raw_bind_parameter(base + 4, e.to.as_str())?;
        st.raw_bind_parameter(base + 5, e.attempt)?;
        st.raw_bind_parameter(base + 6, e.worker.map(|w| workers[w].id.as_str()))?;
        st.raw_bind_parameter(base + 7, e.actor)?;
        st.raw_bind_parameter(base + 8, e.reason.as_deref())?;
        st.raw_bind_parameter(base + 9, e.detail.as_deref())?;
        st.raw_bind_parameter(base + 10, e.detail_status)
    };

    for i in 0..opts.jobs {
        let mut job = gen.job(i);
        report.by_state[JobState::ALL.iter().position(|s| *s == job.state).unwrap_or(0)] += 1;
        let created = job.created_at;
        for entry in std::mem::take(&mut job.log) {
            order += 1;
            pending.push(Reverse(Pending { at: entry.at, order, entry }));
        }
        jobs.push(job, &bind_job)?;
        while pending.peek().is_some_and(|p| p.0.at <= created) {
            let Reverse(p) = pending.pop().expect("peeked");
            debug_assert!(p.at <= opts.now, "a log entry after the generation instant");
            report.transitions += 1;
            log.push(p, &bind_log)?;
        }
        if (i + 1) % PROGRESS_EVERY == 0 {
            progress(i + 1);
        }
    }
    while let Some(Reverse(p)) = pending.pop() {
        report.transitions += 1;
        log.push(p, &bind_log)?;
    }
    jobs.finish(&bind_job)?;
    log.finish(&bind_log)?;

    let mut insert_worker = conn.prepare(
        "INSERT INTO workers (id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at, stale_after_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 30000)",
    )?;
    for w in gen.workers.iter() {
        let group = &GROUPS[w.group];
        let wires: Vec<&str> = KINDS.iter().filter(|k| group.queues.contains(&k.queue)).map(|k| k.wire).collect();
        insert_worker.execute(params![
            w.id,
            group.name,
            w.host,
            w.pid,
            serde_json::to_string(&wires).map_err(Error::Encode)?,
            serde_json::to_string(&group.queues).map_err(Error::Encode)?,
            opts.now - 86_400_000,
            w.last_heartbeat,
        ])?;
    }

    // Indexes before triggers (the order schema.sql has them in), then the counts the triggers
    // would have kept, from one scan.
    for (kind, _, sql) in &derived {
        if kind == "index" {
            conn.execute_batch(sql)?;
        }
    }
    for (kind, _, sql) in &derived {
        if kind == "trigger" {
            conn.execute_batch(sql)?;
        }
    }
    conn.execute_batch(
        "DELETE FROM job_counts;
         INSERT INTO job_counts (queue, state, n) SELECT queue, state, count(*) FROM jobs GROUP BY queue, state;",
    )?;
    Ok(report)
}

const JOB_INSERT: &str = "INSERT INTO jobs (id, wire_name, queue, labels, payload, state, attempt, max_attempts,
    due_at, lease_owner, lease_expires_at, worker_group, delay_table, cancel_requested_by, terminal_cause,
    cause_fingerprint, quarantine_reason, created_at, updated_at, finished_at) VALUES ";
const LOG_INSERT: &str = "INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, actor,
    reason, failure_detail, detail_status) VALUES ";

/// Rows inserted `size` at a time through one multi-row INSERT: a statement per row costs
/// more than the row itself (and the log's AUTOINCREMENT touches sqlite_sequence once per
/// statement). The remainder goes through the one-row statement.
struct Batch<'c, T> {
    many: Statement<'c>,
    one: Statement<'c>,
    columns: usize,
    size: usize,
    rows: Vec<T>,
}

impl<'c, T> Batch<'c, T> {
    fn new(conn: &'c Connection, insert: &str, columns: usize, size: usize) -> rusqlite::Result<Self> {
        let tuple = |row: usize| {
            let marks: Vec<String> = (1..=columns).map(|c| format!("?{}", row * columns + c)).collect();
            format!("({})", marks.join(", "))
        };
        let many = (0..size).map(tuple).collect::<Vec<_>>().join(", ");
        Ok(Batch {
            many: conn.prepare(&format!("{insert}{many}"))?,
            one: conn.prepare(&format!("{insert}{}", tuple(0)))?,
            columns,
            size,
            rows: Vec::with_capacity(size),
        })
    }

    fn push(
        &mut self,
        row: T,
        bind: &impl Fn(&mut Statement<'c>, usize, &T) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<()> {
        self.rows.push(row);
        if self.rows.len() == self.size {
            for (i, r) in self.rows.iter().enumerate() {
                bind(&mut self.many, i * self.columns, r)?;
            }
            self.many.raw_execute()?;
            self.rows.clear();
        }
        Ok(())
    }

    fn finish(
        &mut self,
        bind: &impl Fn(&mut Statement<'c>, usize, &T) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<()> {
        for r in self.rows.drain(..) {
            bind(&mut self.one, 0, &r)?;
            self.one.raw_execute()?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The world the jobs come from: seed 000's two worker groups plus a maintenance group on the
// default policy, the handlers each serves, and the causes each handler fails with.

struct Group {
    name: &'static str,
    queues: &'static [&'static str],
    max_attempts: u32,
    /// Wait after failed attempt n, at n-1.
    delays_ms: &'static [i64],
}

impl Group {
    fn table_json(&self) -> String {
        let parts: Vec<String> = self.delays_ms.iter().map(|d| d.to_string()).collect();
        format!("[{}]", parts.join(","))
    }
}

const STRICT: usize = 0;
const WEIGHTED: usize = 1;
const MAINTENANCE: usize = 2;

const GROUPS: [Group; 3] = [
    Group {
        name: "strict-priority",
        queues: &["critical", "bulk", "limited"],
        max_attempts: 5,
        delays_ms: &[500, 500, 500, 500],
    },
    Group { name: "weighted-fair", queues: &["high", "low"], max_attempts: 3, delays_ms: &[500, 500] },
    // RetryPolicy::default(): 10 attempts, 2^n s capped at 300 s.
    Group {
        name: "maintenance",
        queues: &["default"],
        max_attempts: 10,
        delays_ms: &[2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000],
    },
];

/// A handler: its wire name, queue, share of the traffic, how long it runs, the payload it
/// takes and the causes it fails with (indexes into [`CAUSES`]).
struct Kind {
    wire: &'static str,
    queue: &'static str,
    group: usize,
    weight: u32,
    run_ms: (i64, i64),
    payload: &'static str,
    causes: &'static [usize],
    error_type: &'static str,
}

const LEASE_CAUSE: usize = 20;

const KINDS: [Kind; 13] = [
    Kind {
        wire: "charge-card",
        queue: "critical",
        group: STRICT,
        weight: 12,
        run_ms: (40, 900),
        payload: r#"{"card_token":"tok_{hex}","amount_cents":{n}}"#,
        causes: &[1, 2, 3, 4, 33],
        error_type: "billing::GatewayError",
    },
    Kind {
        wire: "refund-payment",
        queue: "critical",
        group: STRICT,
        weight: 3,
        run_ms: (40, 600),
        payload: r#"{"charge":"ch_{hex}","amount_cents":{n}}"#,
        causes: &[34, 3, 5],
        error_type: "billing::RefundError",
    },
    Kind {
        wire: "resize-image",
        queue: "bulk",
        group: STRICT,
        weight: 14,
        run_ms: (100, 3000),
        payload: r#"{"image":"img-{n}.png","width":640}"#,
        causes: &[8, 9, 10, 11, 32],
        error_type: "media::ImageError",
    },
    Kind {
        wire: "ingest-batch",
        queue: "bulk",
        group: STRICT,
        weight: 6,
        run_ms: (500, 8000),
        payload: r#"{"batch":"b-{n}","rows":{n}}"#,
        causes: &[35, 12, 32, LEASE_CAUSE],
        error_type: "ingest::IngestError",
    },
    Kind {
        wire: "export-report",
        queue: "limited",
        group: STRICT,
        weight: 5,
        run_ms: (1000, 20000),
        payload: r#"{"report":"r-{n}"}"#,
        causes: &[18, 19, LEASE_CAUSE, 16],
        error_type: "reports::ExportError",
    },
    Kind {
        wire: "slow-export",
        queue: "limited",
        group: STRICT,
        weight: 2,
        run_ms: (5000, 40000),
        payload: r#"{"rows":{n}}"#,
        causes: &[LEASE_CAUSE, 7],
        error_type: "reports::ExportError",
    },
    Kind {
        wire: "send-email",
        queue: "high",
        group: WEIGHTED,
        weight: 22,
        run_ms: (20, 700),
        payload: r#"{"to":"user{n}@example.com","template":"receipt"}"#,
        causes: &[13, 14, 15, 23, 24],
        error_type: "mail::SmtpError",
    },
    Kind {
        wire: "sync-inventory",
        queue: "high",
        group: WEIGHTED,
        weight: 8,
        run_ms: (50, 1500),
        payload: r#"{"warehouse":"wh-{n}","sku_count":{n}}"#,
        causes: &[6, 25, 26, 27, 5],
        error_type: "inventory::SyncError",
    },
    Kind {
        wire: "notify-user",
        queue: "high",
        group: WEIGHTED,
        weight: 8,
        run_ms: (10, 400),
        payload: r#"{"device":"{hex}","message":"your order shipped"}"#,
        causes: &[28, 29, 22],
        error_type: "push::PushError",
    },
    Kind {
        wire: "flaky",
        queue: "low",
        group: WEIGHTED,
        weight: 3,
        run_ms: (5, 50),
        payload: r#""{label}""#,
        causes: &[0],
        error_type: "demo::FlakyError",
    },
    Kind {
        wire: "cleanup-temp",
        queue: "low",
        group: WEIGHTED,
        weight: 7,
        run_ms: (10, 2000),
        payload: r#"{"older_than":"7d"}"#,
        causes: &[30],
        error_type: "std::io::Error",
    },
    Kind {
        wire: "send-digest",
        queue: "default",
        group: MAINTENANCE,
        weight: 6,
        run_ms: (200, 5000),
        payload: r#"{"period":"daily","user":{n}}"#,
        causes: &[13, 15, 7],
        error_type: "mail::SmtpError",
    },
    Kind {
        wire: "reindex-search",
        queue: "default",
        group: MAINTENANCE,
        weight: 4,
        run_ms: (1000, 30000),
        payload: r#"{"index":"products","shard":{n}}"#,
        causes: &[21, 31, 17],
        error_type: "search::IndexError",
    },
];

/// A few dozen causes shaped like seed 000's messages. `{attempt}`, `{n}`, `{hex}`, `{host}`,
/// `{label}` and `{file}` are filled per failure, so each cause is a group of similar texts
/// that fingerprint together.
const CAUSES: [&str; 36] = [
    "flaky '{label}' always fails (attempt {attempt})",
    "gateway timeout (attempt {attempt})",
    "card declined: insufficient funds (decline code {n})",
    "payment provider returned 502 Bad Gateway",
    "idempotency ledger conflict for key 'charge:{hex}'",
    "connection refused (os error 111)",
    "upstream returned 503 Service Unavailable",
    "timeout after {n}ms waiting for {host}",
    "panicked at src/handlers/{file}.rs:{n}:{n}: called `Option::unwrap()` on a `None` value",
    "panicked at src/handlers/{file}.rs:{n}:{n}: index out of bounds: the len is {n} but the index is {n}",
    "invalid image header in '{label}.png'",
    "image too large: {n}x{n} exceeds the 16384 px limit",
    "S3 PutObject failed: SlowDown (request id {hex})",
    "smtp: 421 too many connections from {host}",
    "smtp: 550 mailbox unavailable for '{label}@example.com'",
    "template 'weekly-digest' not found",
    "deadlock detected while updating order {n}",
    "unique constraint violated: orders.external_id = '{hex}'",
    "disk quota exceeded writing /var/exports/{label}.csv",
    "export exceeded 10000000 rows",
    crate::store::LEASE_EXPIRED,
    "search cluster red: shard {n} unassigned",
    "rate limited by {host}: retry after {n}s",
    "TLS handshake with {host} failed: certificate has expired",
    "DNS lookup for {host} failed: no such host",
    "inventory API sent invalid JSON at line {n} column {n}",
    "warehouse '{label}' is not configured",
    "sku {n} not found",
    "push token for device {hex} is no longer valid",
    "APNs returned 410 Unregistered",
    "cleanup of /tmp/backwave/{hex} failed: Permission denied (os error 13)",
    "reindex aborted: mapping conflict on field 'price'",
    "memory allocation of {n} bytes failed",
    "operation timed out after {n}ms (the handler's own deadline)",
    "refund exceeds the original charge ({n} > {n} cents)",
    "ingest row {n}: expected 12 columns, found {n}",
];

/// Wire names that no worker handles, with the queue they were sent to.
const UNKNOWN_WIRES: [(&str, &str); 4] =
    [("legacy-report", "low"), ("send-sms", "high"), ("charge-card-v0", "critical"), ("export-pdf", "limited")];

const TENANTS: [&str; 6] = [
    r#"{"tenant":"acme"}"#,
    r#"{"tenant":"globex"}"#,
    r#"{"tenant":"initech"}"#,
    r#"{"tenant":"umbrella"}"#,
    r#"{"tenant":"acme","priority":"vip"}"#,
    "{}",
];
const LABEL_WORDS: [&str; 8] = ["nightly", "daily", "hourly", "acme", "globex", "cat", "invoice", "weekly"];
const HOSTS: [&str; 5] = [
    "smtp1.example.net",
    "smtp2.example.net",
    "api.payments.example",
    "inventory.internal",
    "s3.eu-west-1.amazonaws.com",
];
const FILES: [&str; 4] = ["images", "billing", "ingest", "search"];
const OPERATORS: [&str; 3] = ["alice", "bob", "carol"];

const MINUTE: Millis = 60_000;
const DAY: Millis = 86_400_000;
const LEASE_MS: Millis = 60_000;

// ---------------------------------------------------------------------------------------------

/// A SplitMix64: tiny, fast and the same on every platform, so a seed names one store.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
    pub(crate) fn range(&mut self, (lo, hi): (i64, i64)) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// Index `i` with weight 1/(i+1): a few causes dominate, as in real failure data.
    pub(crate) fn zipf(&mut self, n: usize) -> usize {
        let total: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
        let mut x = self.unit() * total;
        for i in 0..n {
            x -= 1.0 / (i + 1) as f64;
            if x < 0.0 {
                return i;
            }
        }
        n - 1
    }
}

struct Worker {
    id: String,
    group: usize,
    host: &'static str,
    pid: u32,
    last_heartbeat: Millis,
    live: bool,
}

struct Generator {
    rng: Rng,
    now: Millis,
    jobs: u64,
    /// Jobs from this index on are the last few minutes' traffic, where the active ones are.
    recent_from: u64,
    workers: Rc<Vec<Worker>>,
    kind_weights: u32,
}

/// One generated job and its log.
struct GenJob {
    id: Rc<str>,
    wire_name: &'static str,
    queue: &'static str,
    labels: &'static str,
    payload: String,
    state: JobState,
    attempt: u32,
    max_attempts: Option<u32>,
    due_at: Millis,
    lease_owner: Option<usize>,
    lease_expires_at: Option<Millis>,
    group: Option<usize>,
    cancel_requested_by: Option<&'static str>,
    terminal_cause: Option<String>,
    quarantine_reason: Option<&'static str>,
    created_at: Millis,
    updated_at: Millis,
    finished_at: Option<Millis>,
    log: Vec<Entry>,
}

struct Entry {
    job_id: Rc<str>,
    at: Millis,
    from: Option<JobState>,
    to: JobState,
    attempt: u32,
    worker: Option<usize>,
    actor: Option<&'static str>,
    reason: Option<Rc<str>>,
    detail: Option<String>,
    detail_status: Option<&'static str>,
}

struct Pending {
    at: Millis,
    order: u64,
    entry: Entry,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// How a job's life ends, decided before its times are laid out.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Succeeded {
        failures: u32,
    },
    DeadLettered,
    Quarantined {
        no_handler: bool,
    },
    CancelledScheduled,
    CancelledRunning {
        failures: u32,
    },
    /// Enqueued with a due time after `now`, never claimed.
    Delayed,
    /// Due, waiting in the backlog, never claimed.
    Backlog,
    RetryPending {
        failures: u32,
    },
    Running {
        failures: u32,
        lapsed: bool,
    },
}

impl Generator {
    fn new(opts: &GenerateOptions) -> Self {
        let mut rng = Rng(opts.seed ^ 0x6261_636b_7761_7665);
        let recent = (opts.jobs / 200).clamp(100.min(opts.jobs), 2000);
        let mut workers = Vec::new();
        let hosts: [(&str, u32); 2] = [("gen-host-1", 1001), ("gen-host-2", 2002)];
        for (host, pid) in hosts {
            for group in [STRICT, WEIGHTED, MAINTENANCE] {
                workers.push(Worker {
                    id: worker_id(&mut rng, host, pid, group),
                    group,
                    host,
                    pid,
                    last_heartbeat: opts.now - rng.range((0, 3000)),
                    live: true,
                });
            }
        }
        // A process that died: its heartbeat is 20 minutes old and some leases are still its.
        workers.push(Worker {
            id: worker_id(&mut rng, "gen-host-3", 3003, STRICT),
            group: STRICT,
            host: "gen-host-3",
            pid: 3003,
            last_heartbeat: opts.now - 20 * MINUTE,
            live: false,
        });
        Generator {
            rng,
            now: opts.now,
            jobs: opts.jobs,
            recent_from: opts.jobs - recent,
            workers: Rc::new(workers),
            kind_weights: KINDS.iter().map(|k| k.weight).sum(),
        }
    }

    /// Creation time of job `i`: strictly increasing; the old traffic spread over 7 days up to
    /// 30 minutes ago, the recent traffic over 6 to 2 minutes ago (two minutes leave room for
    /// the retries of the slowest handler before `now`).
    fn created_at(&self, i: u64) -> Millis {
        let old_start = self.now - 7 * DAY;
        let old_end = self.now - 30 * MINUTE;
        let recent_start = self.now - 6 * MINUTE;
        let recent_end = self.now - 2 * MINUTE;
        if i < self.recent_from {
            old_start + ((old_end - old_start) as u128 * i as u128 / self.recent_from.max(1) as u128) as Millis
        } else {
            let n = (self.jobs - self.recent_from).max(1);
            recent_start + ((recent_end - recent_start) as u128 * (i - self.recent_from) as u128 / n as u128) as Millis
        }
    }

    fn fate(&mut self, recent: bool, group: usize) -> Fate {
        let r = self.rng.unit();
        let failures_before_success = |rng: &mut Rng, max: u32| {
            let f = match rng.unit() {
                x if x < 0.6 => 0,
                x if x < 0.85 => 1,
                _ => 2,
            };
            f.min(max - 1)
        };
        let max = GROUPS[group].max_attempts;
        if !recent {
            match r {
                x if x < 0.85 => Fate::Succeeded { failures: failures_before_success(&mut self.rng, max) },
                x if x < 0.93 => Fate::DeadLettered,
                x if x < 0.95 => Fate::Quarantined { no_handler: self.rng.unit() < 0.6 },
                x if x < 0.953 => Fate::CancelledScheduled,
                x if x < 0.955 => Fate::CancelledRunning { failures: 0 },
                x if x < 0.965 => Fate::Delayed,
                _ => Fate::Succeeded { failures: 0 },
            }
        } else {
            let small = (max - 1).min(2);
            match r {
                x if x < 0.35 => Fate::Succeeded { failures: failures_before_success(&mut self.rng, max) },
                // A dead-letter on the default policy takes minutes: only the quick groups here.
                x if x < 0.40 && group != MAINTENANCE => Fate::DeadLettered,
                x if x < 0.42 => Fate::Quarantined { no_handler: self.rng.unit() < 0.6 },
                x if x < 0.57 => Fate::Backlog,
                x if x < 0.72 => Fate::RetryPending { failures: 1 + self.rng.below(small as u64) as u32 },
                x if x < 0.97 => {
                    Fate::Running { failures: self.rng.below(small as u64 + 1) as u32, lapsed: self.rng.unit() < 0.1 }
                }
                _ => Fate::CancelledRunning { failures: 0 },
            }
        }
    }

    fn job(&mut self, i: u64) -> GenJob {
        let created = self.created_at(i);
        let recent = i >= self.recent_from;
        let mut pick = self.rng.below(self.kind_weights as u64) as u32;
        let kind = KINDS
            .iter()
            .find(|k| {
                if pick < k.weight {
                    true
                } else {
                    pick -= k.weight;
                    false
                }
            })
            .unwrap_or(&KINDS[0]);
        let fate = self.fate(recent, kind.group);
        let (wire, queue) = match fate {
            Fate::Quarantined { no_handler: true } => self.rng.pick(&UNKNOWN_WIRES),
            _ => (kind.wire, kind.queue),
        };
        let group_ix = GROUPS.iter().position(|g| g.queues.contains(&queue)).unwrap_or(kind.group);
        let group = &GROUPS[group_ix];
        let id: Rc<str> = uuid_from(&mut self.rng, created).into();
        let payload = match fate {
            Fate::Quarantined { no_handler: false } => r#"{"v":1,"legacy":true}"#.to_string(),
            _ => self.fill(kind.payload, 0),
        };
        // 10% of jobs ran on hosts with failure detail switched off.
        let capture = self.rng.unit() >= 0.1;
        let mut cause_ix = kind.causes[self.rng.zipf(kind.causes.len())];
        if recent && cause_ix == LEASE_CAUSE {
            // A lapsed lease takes a minute to notice: too slow for the last minutes' traffic.
            cause_ix = kind.causes.iter().copied().find(|&c| c != LEASE_CAUSE).unwrap_or(7);
        }
        let mut job = GenJob {
            id: id.clone(),
            wire_name: wire,
            queue,
            labels: self.rng.pick(&TENANTS),
            payload,
            state: JobState::Scheduled,
            attempt: 0,
            max_attempts: None,
            due_at: created,
            lease_owner: None,
            lease_expires_at: None,
            group: None,
            cancel_requested_by: None,
            terminal_cause: None,
            quarantine_reason: None,
            created_at: created,
            updated_at: created,
            finished_at: None,
            log: Vec::with_capacity(8),
        };
        job.log.push(self.entry(&id, created, None, JobState::Scheduled, 0));

        // 2% of old terminal jobs were dead-lettered once before and requeued by an operator:
        // the log keeps that first life, the row only the second.
        let mut t = created;
        if created < self.now - DAY
            && matches!(fate, Fate::Succeeded { .. } | Fate::DeadLettered)
            && self.rng.unit() < 0.02
        {
            let first = self.run_attempts(&mut job, kind, group_ix, t, group.max_attempts, cause_ix, capture, true);
            let actor = self.rng.pick(&OPERATORS);
            t = first + self.rng.range((MINUTE, 3 * 3_600_000));
            let mut e = self.entry(&id, t, Some(JobState::DeadLettered), JobState::Scheduled, 0);
            e.actor = Some(actor);
            e.reason = Some("requeued by operator: attempt budget reset".into());
            job.log.push(e);
            job.attempt = 0;
            job.state = JobState::Scheduled;
            job.terminal_cause = None;
            job.finished_at = None;
            job.due_at = t;
        }

        match fate {
            Fate::Succeeded { failures } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                let done = claim + self.rng.range(kind.run_ms);
                let w = job.log.last().and_then(|e| e.worker);
                job.log.push(self.entry_w(&id, done, JobState::Running, JobState::Succeeded, job.attempt, w));
                self.finish(&mut job, JobState::Succeeded, done);
            }
            Fate::DeadLettered => {
                self.run_attempts(&mut job, kind, group_ix, t, group.max_attempts, cause_ix, capture, true);
            }
            Fate::Quarantined { no_handler } => {
                let claim = self.claim(&mut job, group_ix, t);
                let (reason, cause) = if no_handler {
                    ("no-handler", format!("no handler registered for wire name '{wire}'"))
                } else {
                    (
                        "undecodable-payload",
                        format!(
                            "payload does not decode into {}: unknown field `legacy`, expected one of `{}`",
                            kind.wire,
                            kind.payload.split('"').nth(1).unwrap_or("value")
                        ),
                    )
                };
                let at = claim + 1;
                let w = job.log.last().and_then(|e| e.worker);
                let mut e = self.entry_w(&id, at, JobState::Running, JobState::Quarantined, 1, w);
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.quarantine_reason = Some(reason);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Quarantined, at);
            }
            Fate::CancelledScheduled => {
                let actor = self.rng.pick(&OPERATORS);
                job.due_at = created + self.rng.range((MINUTE, DAY));
                let at = created + self.rng.range((1000, 10 * MINUTE));
                let mut e = self.entry(&id, at, Some(JobState::Scheduled), JobState::Cancelled, 0);
                e.actor = Some(actor);
                let cause = format!("cancelled by {actor}");
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.cancel_requested_by = Some(actor);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Cancelled, at);
            }
            Fate::CancelledRunning { failures } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                let actor = self.rng.pick(&OPERATORS);
                let at = claim + self.rng.range((500, 20_000));
                let w = job.log.last().and_then(|e| e.worker);
                let mut e = self.entry_w(&id, at, JobState::Running, JobState::Cancelled, job.attempt, w);
                let cause = format!("cancelled by {actor}");
                e.actor = Some(actor);
                e.reason = Some(cause.as_str().into());
                job.log.push(e);
                job.cancel_requested_by = Some(actor);
                job.terminal_cause = Some(cause);
                self.finish(&mut job, JobState::Cancelled, at);
            }
            Fate::Delayed => {
                job.due_at = self.now + self.rng.range((MINUTE, 3 * DAY));
            }
            Fate::Backlog => {
                job.due_at = created;
            }
            Fate::RetryPending { failures } => {
                let due = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                job.due_at = due;
            }
            Fate::Running { failures, lapsed } => {
                let end = self.run_attempts(&mut job, kind, group_ix, t, failures, cause_ix, capture, false);
                let claim = self.claim(&mut job, group_ix, end);
                job.state = JobState::Running;
                job.updated_at = claim;
                let owner = if lapsed && group_ix == STRICT {
                    self.workers.iter().position(|w| !w.live).unwrap_or(0)
                } else {
                    job.log.last().and_then(|e| e.worker).unwrap_or(0)
                };
                if let Some(last) = job.log.last_mut() {
                    last.worker = Some(owner);
                }
                job.lease_owner = Some(owner);
                job.lease_expires_at = Some(if lapsed {
                    self.now - self.rng.range((1000, 30_000))
                } else {
                    self.now + self.rng.range((5_000, LEASE_MS))
                });
            }
        }
        job
    }

    /// Claim the job at (about) `due` for its group; returns the claim time.
    fn claim(&mut self, job: &mut GenJob, group: usize, due: Millis) -> Millis {
        let at = due + self.rng.range((1, 250));
        let worker = self.worker_of(group);
        job.attempt += 1;
        job.max_attempts = Some(GROUPS[group].max_attempts);
        job.group = Some(group);
        job.updated_at = at;
        let id = job.id.clone();
        let e = self.entry_w(&id, at, JobState::Scheduled, JobState::Running, job.attempt, Some(worker));
        job.log.push(e);
        at
    }

    /// Run `failures` failed attempts from `t`; when `dead_letter`, `failures` is the whole
    /// budget and the last one dead-letters the job. Returns when the next attempt is due (or
    /// when the job dead-lettered).
    #[allow(clippy::too_many_arguments)]
    fn run_attempts(
        &mut self,
        job: &mut GenJob,
        kind: &Kind,
        group: usize,
        mut t: Millis,
        failures: u32,
        cause: usize,
        capture: bool,
        dead_letter: bool,
    ) -> Millis {
        let label = self.rng.pick(&LABEL_WORDS);
        let g = &GROUPS[group];
        for k in 0..failures {
            let claim = self.claim(job, group, t);
            let lease = cause == LEASE_CAUSE;
            let at =
                if lease { claim + LEASE_MS + self.rng.range((10, 2000)) } else { claim + self.rng.range(kind.run_ms) };
            let last = dead_letter && k + 1 == failures;
            let message = self.fill_cause(CAUSES[cause], job.attempt, label);
            let w = job.log.last().and_then(|e| e.worker);
            let to = if last { JobState::DeadLettered } else { JobState::Scheduled };
            let mut e = self.entry_w(&job.id, at, JobState::Running, to, job.attempt, w);
            if !lease {
                if capture {
                    let panic = CAUSES[cause].starts_with("panicked");
                    let detail = FailureDetail {
                        kind: if panic { "panic".into() } else { kind.error_type.into() },
                        message: message.clone(),
                        chain: if panic { vec![] } else { vec![format!("{} failed", kind.wire)] },
                        backtrace: last.then(|| backtrace(kind.wire)),
                    };
                    e.detail = serde_json::to_string(&detail).ok();
                    e.detail_status = Some("captured");
                } else {
                    e.detail_status = Some("not-captured");
                }
            }
            e.reason = Some(message.as_str().into());
            job.log.push(e);
            job.updated_at = at;
            if last {
                job.terminal_cause = Some(message);
                self.finish(job, JobState::DeadLettered, at);
                return at;
            }
            t = at + g.delays_ms[(job.attempt as usize - 1).min(g.delays_ms.len() - 1)];
            job.due_at = t;
        }
        t
    }

    fn finish(&mut self, job: &mut GenJob, state: JobState, at: Millis) {
        job.state = state;
        job.updated_at = at;
        job.finished_at = Some(at);
    }

    fn worker_of(&mut self, group: usize) -> usize {
        let candidates: Vec<usize> = (0..self.workers.len()).filter(|&w| self.workers[w].group == group).collect();
        self.rng.pick(&candidates)
    }

    fn entry(&self, id: &Rc<str>, at: Millis, from: Option<JobState>, to: JobState, attempt: u32) -> Entry {
        Entry {
            job_id: id.clone(),
            at,
            from,
            to,
            attempt,
            worker: None,
            actor: None,
            reason: None,
            detail: None,
            detail_status: None,
        }
    }

    fn entry_w(
        &self,
        id: &Rc<str>,
        at: Millis,
        from: JobState,
        to: JobState,
        attempt: u32,
        worker: Option<usize>,
    ) -> Entry {
        let mut e = self.entry(id, at, Some(from), to, attempt);
        e.worker = worker;
        e
    }

    fn fill(&mut self, template: &str, attempt: u32) -> String {
        let label = self.rng.pick(&LABEL_WORDS);
        self.fill_cause(template, attempt, label)
    }

    fn fill_cause(&mut self, template: &str, attempt: u32, label: &str) -> String {
        if !template.contains('{') {
            return template.to_string();
        }
        let mut out = String::with_capacity(template.len() + 16);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else { break };
            match &rest[open + 1..open + close] {
                "attempt" => out.push_str(&attempt.to_string()),
                "n" => out.push_str(&self.rng.range((2, 99_999)).to_string()),
                "hex" => out.push_str(&format!("{:012x}", self.rng.next() >> 16)),
                "host" => out.push_str(self.rng.pick(&HOSTS)),
                "label" => out.push_str(label),
                "file" => out.push_str(self.rng.pick(&FILES)),
                other => {
                    out.push('{');
                    out.push_str(other);
                    out.push('}');
                }
            }
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// A worker id as the engine writes it: `host/pid/group#tail`.
fn worker_id(rng: &mut Rng, host: &str, pid: u32, group: usize) -> String {
    format!("{host}/{pid}/{}#{:04x}", GROUPS[group].name, rng.next() & 0xffff)
}

/// A time-ordered (v7) id for `at`, its random bits from the generator's stream.
fn uuid_from(rng: &mut Rng, at: Millis) -> String {
    let a = rng.next().to_le_bytes();
    let b = rng.next().to_le_bytes();
    let bytes = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1]];
    uuid::Builder::from_unix_timestamp_millis(at.max(0) as u64, &bytes).into_uuid().hyphenated().to_string()
}

fn backtrace(wire: &str) -> String {
    let f = wire.replace('-', "_");
    format!(
        "   0: handlers::{f}::run\n             at ./src/handlers/{f}.rs:42:9\n   1: backwave::engine::runtime::run_attempt\n             at ./src/engine/runtime.rs:210:17\n   2: std::panicking::try\n   3: std::thread::spawn::{{{{closure}}}}"
    )
}
