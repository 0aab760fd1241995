//! Who may do what, and what is not a job: grants, settings, the audit trail, the live worker
//! registry, and revealing failure detail (which needs a permission and is always audited).

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::ops::settings::{self, SettingRead};
use super::ops::AuditAction;
use super::row::parse_id;
use super::SqliteStore;
use crate::error::{Error, Result};
use crate::model::{FailureDetail, JobId, Millis, NewJob, Permission, WorkerInfo};

/// Settings `bw config` may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingKey {
    /// `on` | `off`: capture failure detail at all.
    FailureDetail,
    /// A duration (`14d`): how long terminal jobs are kept.
    Retention,
    /// Bytes (`1MiB`, `262144`): the largest payload any enqueue or payload edit may store.
    PayloadLimit,
}

/// The payload limit of a store whose settings name none: 1 MiB. Google Cloud Tasks takes 1 MB
/// a task (100 KB on App Engine queues), SQS 256 KiB a message, and Sidekiq's advice is ids,
/// not data; `bw top` with 50 jobs of 1 MiB in its list stays at 16 MB, within its 50 MB
/// (README, Benchmarks). Larger data belongs in a file or object store the payload names.
pub const DEFAULT_PAYLOAD_LIMIT: u64 = 1 << 20;
/// The most `payload_limit` may be set to: the largest value either database stores (1 GB).
pub const MAX_PAYLOAD_LIMIT: u64 = 1_000_000_000;

impl SettingKey {
    pub const ALL: [SettingKey; 3] = [SettingKey::FailureDetail, SettingKey::Retention, SettingKey::PayloadLimit];

    pub fn as_str(self) -> &'static str {
        match self {
            SettingKey::FailureDetail => "failure_detail",
            SettingKey::Retention => "retention",
            SettingKey::PayloadLimit => "payload_limit",
        }
    }

    pub fn default_value(self) -> &'static str {
        match self {
            SettingKey::FailureDetail => "on",
            SettingKey::Retention => "14d",
            SettingKey::PayloadLimit => "1048576",
        }
    }

    pub fn parse(key: &str) -> Result<Self> {
        let k = key.trim().replace('-', "_");
        SettingKey::ALL.into_iter().find(|s| s.as_str() == k).ok_or_else(|| {
            Error::InvalidInput(format!("unknown setting '{key}': expected failure_detail, retention or payload_limit"))
        })
    }

    /// The value as stored, or an error naming what is wrong with it. Both backends.
    pub(crate) fn validate(self, value: &str) -> Result<String> {
        match self {
            SettingKey::FailureDetail => match value.trim() {
                "on" | "off" => Ok(value.trim().to_string()),
                _ => Err(Error::InvalidInput(format!("failure_detail is 'on' or 'off', not '{value}'"))),
            },
            SettingKey::Retention => match crate::model::parse_duration(value) {
                Ok(_) => Ok(value.trim().to_string()),
                Err(e) => Err(Error::InvalidInput(format!("retention: {e}"))),
            },
            // Stored as plain bytes: the schema's triggers read the same row.
            SettingKey::PayloadLimit => match parse_size(value) {
                Some(n) if (1..=MAX_PAYLOAD_LIMIT).contains(&n) => Ok(n.to_string()),
                _ => Err(Error::InvalidInput(format!(
                    "payload_limit is a size from 1 byte to 1GB (e.g. 1MiB, 256KiB, 65536), not '{value}'"
                ))),
            },
        }
    }
}

/// A size in bytes: digits with an optional unit, `B`, `KiB`, `MiB`, `GiB` (powers of 1024) or
/// `KB`, `MB`, `GB` (powers of 1000), case-insensitive, a space allowed before the unit.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits].parse().ok()?;
    let factor: u64 = match t[digits..].trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

/// The payload limit from the stored setting (`None`: not set, the default): plain bytes, as
/// `validate` stores it and the schema's triggers read it. A value another program wrote that is
/// not is an error naming it, never a silent default. Both backends.
pub(crate) fn payload_limit_from(stored: Option<&str>) -> Result<u64> {
    match stored {
        None => Ok(DEFAULT_PAYLOAD_LIMIT),
        Some(text) => text.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::InvalidInput(format!("the store's payload_limit setting '{text}' is not a number of bytes"))
        }),
    }
}

/// Refuse a payload of `bytes` over `limit`, naming both. A payload edit of either backend calls
/// this in the transaction that writes it; enqueues call [`check_new_payloads`].
pub(crate) fn check_payload_size(bytes: usize, limit: u64, job: Option<usize>) -> Result<()> {
    if bytes as u64 > limit {
        return Err(Error::PayloadTooLarge { bytes: bytes as u64, limit, job });
    }
    Ok(())
}

/// Refuse a batch to enqueue if any payload is over `limit`, naming the first such job by its
/// place when the batch has several. Both backends, in the transaction that writes the batch.
pub(crate) fn check_new_payloads(jobs: &[NewJob], limit: u64) -> Result<()> {
    let many = jobs.len() > 1;
    for (i, job) in jobs.iter().enumerate() {
        check_payload_size(job.payload.len(), limit, many.then_some(i))?;
    }
    Ok(())
}

/// The store's payload limit, read inside the caller's transaction.
pub(crate) fn payload_limit(conn: &Connection) -> Result<u64> {
    let stored: Option<String> = conn
        .prepare_cached("SELECT value FROM settings WHERE key = 'payload_limit'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    payload_limit_from(stored.as_deref())
}

/// One audited operator action.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: Millis,
    pub actor: String,
    pub action: String,
    pub job_id: Option<JobId>,
    pub detail: Option<String>,
}

impl SqliteStore {
    pub fn permissions(&self, actor: &str) -> Result<Vec<Permission>> {
        permissions_of(&self.conn, actor)
    }

    pub fn grant(&self, actor: &str, who: &str, permission: Permission) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            require(tx, actor, Permission::Admin)?;
            check_grantee(who)?;
            tx.execute(
                "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (actor, permission) DO NOTHING",
                params![who, permission.as_str(), actor, now],
            )?;
            audit(tx, now, actor, AuditAction::Grant, None, &grant_detail(who, permission))
        })
    }

    pub fn revoke(&self, actor: &str, who: &str, permission: Permission) -> Result<bool> {
        let now = self.now();
        self.write(|tx| {
            require(tx, actor, Permission::Admin)?;
            let n = tx.execute(
                "DELETE FROM grants WHERE actor = ?1 AND permission = ?2",
                params![who, permission.as_str()],
            )?;
            // A revoke of what was not held changes nothing, so it leaves no trail (as a resume of
            // what is not paused).
            if n > 0 {
                audit(tx, now, actor, AuditAction::Revoke, None, &grant_detail(who, permission))?;
            }
            Ok(n > 0)
        })
    }

    pub fn has_admin(&self) -> Result<bool> {
        self.read(|c| {
            Ok(c.query_row("SELECT EXISTS (SELECT 1 FROM grants WHERE permission = 'admin')", [], |r| r.get(0))?)
        })
    }

    pub fn bootstrap_admin(&self, actor: &str) -> Result<bool> {
        let now = self.now();
        self.write(|tx| {
            let has_admin: bool =
                tx.query_row("SELECT EXISTS (SELECT 1 FROM grants WHERE permission = 'admin')", [], |r| r.get(0))?;
            if has_admin {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (?1, 'admin', ?1, ?2)",
                params![actor, now],
            )?;
            audit(tx, now, actor, AuditAction::Grant, None, &bootstrap_detail(actor))?;
            Ok(true)
        })
    }

    pub fn setting(&self, key: SettingKey) -> Result<String> {
        settings::setting(&mut &self.conn, key)
    }

    pub fn set_setting(&self, actor: &str, key: SettingKey, value: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            require(tx, actor, Permission::Admin)?;
            let value = key.validate(value)?;
            tx.execute(
                "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
                params![key.as_str(), value],
            )?;
            audit(tx, now, actor, AuditAction::Config, None, &config_detail(key, &value))
        })
    }

    pub fn retention(&self) -> Result<std::time::Duration> {
        parse_retention(&self.setting(SettingKey::Retention)?)
    }

    pub fn payload_limit(&self) -> Result<u64> {
        payload_limit(&self.conn)
    }

    pub fn failure_detail_enabled(&self) -> Result<bool> {
        settings::detail_enabled(&mut &self.conn)
    }

    pub fn mark_demo(&self) -> Result<()> {
        self.write(|tx| {
            tx.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('store_kind', 'demo')", [])?;
            Ok(())
        })
    }

    pub fn is_demo(&self) -> Result<bool> {
        let v: Option<String> =
            self.conn.query_row("SELECT value FROM settings WHERE key = 'store_kind'", [], |r| r.get(0)).optional()?;
        Ok(v.as_deref() == Some("demo"))
    }

    pub fn reveal_failure_detail(&self, actor: &str, job: JobId) -> Result<Vec<(i64, FailureDetail)>> {
        let now = self.now();
        self.write(|tx| {
            // The permission comes first: without it, not even whether detail exists is told.
            require(tx, actor, Permission::ViewFailureDetail)?;
            let rows: Vec<(i64, String)> = tx
                .prepare_cached(
                    "SELECT seq, failure_detail FROM transitions
                     WHERE job_id = ?1 AND failure_detail IS NOT NULL ORDER BY seq",
                )?
                .query_map([job.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            if !settings::detail_enabled(&mut { tx })? {
                return Err(Error::FailureDetailOff);
            }
            audit(tx, now, actor, AuditAction::RevealFailureDetail, Some(job), &revealed(rows.len()))?;
            Ok(parse_details(rows))
        })
    }

    pub fn audit_entries(&self, since: Millis, limit: usize) -> Result<Vec<AuditEntry>> {
        let mut rows: Vec<AuditEntry> = self
            .conn
            .prepare_cached(
                "SELECT seq, at, actor, action, job_id, detail FROM audit WHERE at >= ?1 ORDER BY seq DESC LIMIT ?2",
            )?
            .query_map(params![since, limit as i64], |r| {
                Ok(AuditEntry {
                    seq: r.get(0)?,
                    at: r.get(1)?,
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    job_id: match r.get::<_, Option<String>>(4)? {
                        Some(_) => Some(parse_id(r, 4)?),
                        None => None,
                    },
                    detail: r.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    pub fn register_worker(&self, w: &WorkerInfo) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO workers (id, worker_group, host, pid, wire_names, queues, started_at,
                                                 last_heartbeat_at, stale_after_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    w.id,
                    w.group,
                    w.host,
                    w.pid,
                    serde_json::to_string(&w.wire_names).map_err(Error::Encode)?,
                    serde_json::to_string(&w.queues).map_err(Error::Encode)?,
                    w.started_at,
                    w.last_heartbeat_at,
                    w.stale_after_ms
                ],
            )?;
            Ok(())
        })
    }

    pub fn worker_heartbeat(&self, id: &str) -> Result<bool> {
        let now = self.now();
        self.write(
            |tx| Ok(tx.execute("UPDATE workers SET last_heartbeat_at = ?2 WHERE id = ?1", params![id, now])? > 0),
        )
    }

    pub fn unregister_worker(&self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM workers WHERE id = ?1", [id])?;
            Ok(())
        })
    }

    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id, worker_group, host, pid, wire_names, queues, started_at, last_heartbeat_at, stale_after_ms
                 FROM workers ORDER BY last_heartbeat_at DESC, id",
            )?
            .query_map([], |r| {
                Ok(WorkerInfo {
                    id: r.get(0)?,
                    group: r.get(1)?,
                    host: r.get(2)?,
                    pid: r.get(3)?,
                    wire_names: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                    queues: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
                    started_at: r.get(6)?,
                    last_heartbeat_at: r.get(7)?,
                    stale_after_ms: r.get(8)?,
                })
            })?
            .collect::<Result<_, _>>()?)
    }
}

pub(crate) fn permissions_of(conn: &Connection, actor: &str) -> Result<Vec<Permission>> {
    let held: Vec<String> = conn
        .prepare_cached("SELECT permission FROM grants WHERE actor = ?1")?
        .query_map([actor], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(permissions_from(&held))
}

/// The permissions granted by the `grants` rows `held` (their spellings; unknown ones are
/// ignored): all of them with `admin`, else the ones held, sorted. Both backends.
pub(crate) fn permissions_from(held: &[String]) -> Vec<Permission> {
    let mut held: Vec<Permission> = held.iter().filter_map(|p| p.parse().ok()).collect();
    if held.contains(&Permission::Admin) {
        return Permission::ALL.to_vec();
    }
    held.sort();
    held
}

/// A name a permission may be granted to: not blank, no control characters (a name with an
/// escape sequence would act on the terminal of whoever lists the grants). Checked after the
/// granter's permission, on both backends; a revoke takes any stored name, to clean one up.
pub(crate) fn check_grantee(who: &str) -> Result<()> {
    if who.trim().is_empty() || who.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!("{who:?} is not a name to grant a permission to")));
    }
    Ok(())
}

/// Fail with `PermissionDenied` unless `actor` holds `permission` (admin implies all).
pub(crate) fn require(conn: &Connection, actor: &str, permission: Permission) -> Result<()> {
    allowed(&permissions_of(conn, actor)?, actor, permission)
}

/// `PermissionDenied` unless `permission` is among the permissions `actor` holds. Both backends.
pub(crate) fn allowed(held: &[Permission], actor: &str, permission: Permission) -> Result<()> {
    if held.contains(&permission) {
        Ok(())
    } else {
        Err(Error::PermissionDenied { actor: actor.to_string(), permission })
    }
}

/// The retention setting's text as a duration; a value another program wrote that is not one
/// is an error naming it. Both backends.
pub(crate) fn parse_retention(text: &str) -> Result<std::time::Duration> {
    humantime::parse_duration(text.trim())
        .map_err(|e| Error::InvalidInput(format!("the store's retention setting '{text}' is not a duration ({e})")))
}

/// The audit detail of a reveal of `n` entries (on PostgreSQL, `bw_reveal_failure_detail` in
/// schema-postgres.sql words it the same: there the server writes the audit row).
pub(crate) fn revealed(n: usize) -> String {
    format!("{n} entries")
}

/// The stored failure detail of each entry, by log sequence number: the JSON a worker wrote, or,
/// when another program stored something that does not parse, the text itself as an `unparsed`
/// detail (shown, never dropped). Both backends.
pub(crate) fn parse_details(rows: Vec<(i64, String)>) -> Vec<(i64, FailureDetail)> {
    rows.into_iter()
        .map(|(seq, json)| {
            let detail = serde_json::from_str(&json).unwrap_or_else(|_| FailureDetail {
                kind: "unparsed".into(),
                message: json,
                ..Default::default()
            });
            (seq, detail)
        })
        .collect()
}

/// The audit detail of a grant or revoke. Both backends.
pub(crate) fn grant_detail(who: &str, permission: Permission) -> String {
    format!("{who} {permission}")
}

/// The audit detail of a changed setting. Both backends.
pub(crate) fn config_detail(key: SettingKey, value: &str) -> String {
    format!("{} = {value}", key.as_str())
}

/// The audit detail of the grant `bw init` makes to the store's first admin. Both backends.
pub(crate) fn bootstrap_detail(actor: &str) -> String {
    format!("{actor} admin (store initialised)")
}

pub(crate) fn audit(
    conn: &Connection,
    at: Millis,
    actor: &str,
    action: AuditAction,
    job: Option<JobId>,
    detail: &str,
) -> Result<()> {
    conn.prepare_cached("INSERT INTO audit (at, actor, action, job_id, detail) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![at, actor, action.as_str(), job.map(|j| j.to_string()), detail])?;
    Ok(())
}

impl SettingRead for &Connection {
    fn stored_setting(&mut self, key: SettingKey) -> Result<Option<String>> {
        Ok(self
            .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
            .query_row([key.as_str()], |r| r.get(0))
            .optional()?)
    }
}

/// The operating-system user running this process, from its real uid (not from an
/// environment variable anyone can set). Falls back to `uid:N` when the user has no name.
pub fn current_actor() -> String {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => user.name,
        _ => format!("uid:{uid}"),
    }
}
