//! The world generated jobs come from: seed 000's two worker groups plus a maintenance group on
//! the default policy, the handlers each serves, the causes each handler fails with, and the
//! tenants, hosts and operators that appear in them. Data only.

use backwave::model::Millis;

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

// One line a handler, read as a table: wire name, queue, group, weight, run time (ms), payload,
// causes, error type.
#[rustfmt::skip]
pub(super) const KINDS: [Kind; 13] = [
    kind("charge-card",    "critical", STRICT,      12, (40, 900),     r#"{"card_token":"tok_{hex}","amount_cents":{n}}"#,     &[1, 2, 3, 4, 33],          "billing::GatewayError"),
    kind("refund-payment", "critical", STRICT,      3,  (40, 600),     r#"{"charge":"ch_{hex}","amount_cents":{n}}"#,          &[34, 3, 5],                "billing::RefundError"),
    kind("resize-image",   "bulk",     STRICT,      14, (100, 3000),   r#"{"image":"img-{n}.png","width":640}"#,               &[8, 9, 10, 11, 32],        "media::ImageError"),
    kind("ingest-batch",   "bulk",     STRICT,      6,  (500, 8000),   r#"{"batch":"b-{n}","rows":{n}}"#,                      &[35, 12, 32, LEASE_CAUSE], "ingest::IngestError"),
    kind("export-report",  "limited",  STRICT,      5,  (1000, 20000), r#"{"report":"r-{n}"}"#,                                &[18, 19, LEASE_CAUSE, 16], "reports::ExportError"),
    kind("slow-export",    "limited",  STRICT,      2,  (5000, 40000), r#"{"rows":{n}}"#,                                      &[LEASE_CAUSE, 7],          "reports::ExportError"),
    kind("send-email",     "high",     WEIGHTED,    22, (20, 700),     r#"{"to":"user{n}@example.com","template":"receipt"}"#, &[13, 14, 15, 23, 24],      "mail::SmtpError"),
    kind("sync-inventory", "high",     WEIGHTED,    8,  (50, 1500),    r#"{"warehouse":"wh-{n}","sku_count":{n}}"#,            &[6, 25, 26, 27, 5],        "inventory::SyncError"),
    kind("notify-user",    "high",     WEIGHTED,    8,  (10, 400),     r#"{"device":"{hex}","message":"your order shipped"}"#, &[28, 29, 22],              "push::PushError"),
    kind("flaky",          "low",      WEIGHTED,    3,  (5, 50),       r#""{label}""#,                                         &[0],                       "demo::FlakyError"),
    kind("cleanup-temp",   "low",      WEIGHTED,    7,  (10, 2000),    r#"{"older_than":"7d"}"#,                               &[30],                      "std::io::Error"),
    kind("send-digest",    "default",  MAINTENANCE, 6,  (200, 5000),   r#"{"period":"daily","user":{n}}"#,                     &[13, 15, 7],               "mail::SmtpError"),
    kind("reindex-search", "default",  MAINTENANCE, 4,  (1000, 30000), r#"{"index":"products","shard":{n}}"#,                  &[21, 31, 17],              "search::IndexError"),
];

#[allow(clippy::too_many_arguments)]
const fn kind(
    wire: &'static str,
    queue: &'static str,
    group: usize,
    weight: u32,
    run_ms: (i64, i64),
    payload: &'static str,
    causes: &'static [usize],
    error_type: &'static str,
) -> Kind {
    Kind { wire, queue, group, weight, run_ms, payload, causes, error_type }
}

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
    backwave::store::LEASE_EXPIRED,
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
