//! Who may do what, and what is not a job, on SQLite: grants, settings, the audit trail, and
//! revealing failure detail (which needs a permission and is always audited); the checks and
//! audit rows every write transaction ([`SqliteOps`]) makes under the shared policy.

use rusqlite::{params, Connection, OptionalExtension};

use super::row::parse_id;
use super::{SqliteOps, SqliteStore};
use crate::error::{Error, Result};
use crate::model::{FailureDetail, JobId, Millis, Permission};
use crate::store::ops::access::{self, allowed, parse_details, permissions_from, AdminTx};
pub(crate) use crate::store::ops::settings::check_new_payloads;
use crate::store::ops::settings::{self, parse_retention, SettingRead};
use crate::store::ops::{AuditAction, StoreTx};
use crate::store::{AuditEntry, SettingKey};

/// The store's payload limit, read inside the caller's transaction.
pub(crate) fn payload_limit(conn: &Connection) -> Result<u64> {
    settings::payload_limit(&mut { conn })
}

impl SqliteStore {
    pub fn permissions(&self, actor: &str) -> Result<Vec<Permission>> {
        permissions_of(&self.conn, actor)
    }

    pub fn grant(&self, actor: &str, who: &str, permission: Permission) -> Result<()> {
        let now = self.now();
        self.write(|c| access::grant(&mut SqliteOps { c, now }, actor, who, permission))
    }

    pub fn revoke(&self, actor: &str, who: &str, permission: Permission) -> Result<bool> {
        let now = self.now();
        self.write(|c| access::revoke(&mut SqliteOps { c, now }, actor, who, permission))
    }

    pub fn has_admin(&self) -> Result<bool> {
        self.read(has_admin)
    }

    pub fn bootstrap_admin(&self, actor: &str) -> Result<bool> {
        let now = self.now();
        self.write(|c| access::bootstrap_admin(&mut SqliteOps { c, now }, actor))
    }

    pub fn setting(&self, key: SettingKey) -> Result<String> {
        settings::setting(&mut &self.conn, key)
    }

    pub fn set_setting(&self, actor: &str, key: SettingKey, value: &str) -> Result<()> {
        let now = self.now();
        self.write(|c| access::set_setting(&mut SqliteOps { c, now }, actor, key, value))
    }

    pub fn retention(&self) -> Result<std::time::Duration> {
        parse_retention(&self.setting(SettingKey::Retention)?)
    }

    pub fn payload_limit(&self) -> Result<u64> {
        payload_limit(&self.conn)
    }

    pub fn output_limit(&self) -> Result<u64> {
        self.read(|c| settings::output_limit(&mut { c }))
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
}

pub(crate) fn permissions_of(conn: &Connection, actor: &str) -> Result<Vec<Permission>> {
    let held: Vec<String> = conn
        .prepare_cached("SELECT permission FROM grants WHERE actor = ?1")?
        .query_map([actor], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(permissions_from(&held))
}

/// Fail with `PermissionDenied` unless `actor` holds `permission` (admin implies all).
pub(crate) fn require(conn: &Connection, actor: &str, permission: Permission) -> Result<()> {
    allowed(&permissions_of(conn, actor)?, actor, permission)
}

/// The audit detail of a reveal of `n` entries (on PostgreSQL, `bw_reveal_failure_detail` in
/// schema-postgres.sql words it the same: there the server writes the audit row).
pub(crate) fn revealed(n: usize) -> String {
    format!("{n} entries")
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

fn has_admin(c: &Connection) -> Result<bool> {
    Ok(c.query_row("SELECT EXISTS (SELECT 1 FROM grants WHERE permission = 'admin')", [], |r| r.get(0))?)
}

/// SQLite's statements for grants and settings (one writer: the bootstrap needs no lock).
impl StoreTx for SqliteOps<'_> {
    fn now(&mut self) -> Result<Millis> {
        Ok(self.now)
    }

    fn require(&mut self, actor: &str, permission: Permission) -> Result<()> {
        require(self.c, actor, permission)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, job: Option<JobId>, detail: &str) -> Result<()> {
        audit(self.c, now, actor, action, job, detail)
    }

    fn payload_limit(&mut self) -> Result<u64> {
        payload_limit(self.c)
    }
}

impl AdminTx for SqliteOps<'_> {
    fn insert_grant(&mut self, who: &str, permission: Permission, by: &str, now: Millis) -> Result<()> {
        self.c
            .prepare_cached(
                "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (actor, permission) DO NOTHING",
            )?
            .execute(params![who, permission.as_str(), by, now])?;
        Ok(())
    }

    fn delete_grant(&mut self, who: &str, permission: Permission) -> Result<bool> {
        let sql = "DELETE FROM grants WHERE actor = ?1 AND permission = ?2";
        Ok(self.c.prepare_cached(sql)?.execute(params![who, permission.as_str()])? > 0)
    }

    fn lock_bootstrap(&mut self) -> Result<()> {
        Ok(())
    }

    fn has_admin(&mut self) -> Result<bool> {
        has_admin(self.c)
    }

    fn insert_first_admin(&mut self, actor: &str, now: Millis) -> Result<()> {
        let sql = "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (?1, 'admin', ?1, ?2)";
        self.c.prepare_cached(sql)?.execute(params![actor, now])?;
        Ok(())
    }

    fn write_setting(&mut self, key: SettingKey, value: &str) -> Result<()> {
        let sql = "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2";
        self.c.prepare_cached(sql)?.execute(params![key.as_str(), value])?;
        Ok(())
    }
}

impl SettingRead for &Connection {
    fn stored_setting(&mut self, key: SettingKey) -> Result<Option<String>> {
        Ok(self
            .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
            .query_row([key.as_str()], |r| r.get(0))
            .optional()?)
    }
}
