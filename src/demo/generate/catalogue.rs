//! The world generated jobs come from: seed 000's two worker groups plus a maintenance group on
//! the default policy, the handlers each serves, the causes each handler fails with, and the
//! tenants, hosts and operators that appear in them. Data only.

use crate::model::Millis;

pub(super) struct Group {
    pub(super) name: &'static str,
    pub(super) queues: &'static [&'static str],
    pub(super) max_attempts: u32,
    /// Wait after failed attempt n, at n-1.
    pub(super) delays_ms: &'static [i64],
}

impl Group {
    pub(super) fn table_json(&self) -> String {
        let parts: Vec<String> = self.delays_ms.iter().map(|d| d.to_string()).collect();
        format!("[{}]", parts.join(","))
    }
}

pub(super) const STRICT: usize = 0;
pub(super) const WEIGHTED: usize = 1;
pub(super) const MAINTENANCE: usize = 2;

pub(super) const GROUPS: [Group; 3] = [
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
pub(super) struct Kind {
    pub(super) wire: &'static str,
    pub(super) queue: &'static str,
    pub(super) group: usize,
    pub(super) weight: u32,
    pub(super) run_ms: (i64, i64),
    pub(super) payload: &'static str,
    pub(super) causes: &'static [usize],
    pub(super) error_type: &'static str,
}

pub(super) const LEASE_CAUSE: usize = 20;

pub(super) const KINDS: [Kind; 13] = [
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
pub(super) const CAUSES: [&str; 36] = [
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
pub(super) const UNKNOWN_WIRES: [(&str, &str); 4] =
    [("legacy-report", "low"), ("send-sms", "high"), ("charge-card-v0", "critical"), ("export-pdf", "limited")];

pub(super) const TENANTS: [&str; 6] = [
    r#"{"tenant":"acme"}"#,
    r#"{"tenant":"globex"}"#,
    r#"{"tenant":"initech"}"#,
    r#"{"tenant":"umbrella"}"#,
    r#"{"tenant":"acme","priority":"vip"}"#,
    "{}",
];
pub(super) const LABEL_WORDS: [&str; 8] = ["nightly", "daily", "hourly", "acme", "globex", "cat", "invoice", "weekly"];
pub(super) const HOSTS: [&str; 5] = [
    "smtp1.example.net",
    "smtp2.example.net",
    "api.payments.example",
    "inventory.internal",
    "s3.eu-west-1.amazonaws.com",
];
pub(super) const FILES: [&str; 4] = ["images", "billing", "ingest", "search"];
pub(super) const OPERATORS: [&str; 3] = ["alice", "bob", "carol"];

pub(super) const MINUTE: Millis = 60_000;
pub(super) const DAY: Millis = 86_400_000;
pub(super) const LEASE_MS: Millis = 60_000;
