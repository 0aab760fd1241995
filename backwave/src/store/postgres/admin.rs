//! Who may do what, and what is not a job, on PostgreSQL: grants, settings, the audit trail, and
//! revealing failure detail (which needs a permission and is always audited, in the same
//! transaction that reads it). The same rows and the same answers as `sqlite/admin.rs`; the
//! non-SQL parts (permission arithmetic, validation, audit wording) are `store/ops`'s.
//!
//! Also what every audited PostgreSQL operation uses inside its own write: [`require`], and the
//! transaction as the shared policy takes it (`StoreTx`: time, permission, audit row).
//!
//! The `actor` these take is the client's claim; the server decides who acts (`bw_actor()` in
//! schema-postgres.sql): the authenticated role, unless that role owns the store. Permissions
//! are looked up, and refused, under the server's answer; its triggers stamp it on every row.

use std::time::Duration;

use super::{PgStore, Tx};
use crate::error::{Error, Result};
use crate::model::{FailureDetail, JobId, Millis, Permission};
use crate::store::ops::access::{self, allowed, parse_details, permissions_from, AdminTx};
use crate::store::ops::settings::{self, parse_retention, SettingRead};
use crate::store::ops::{AuditAction, StoreTx};
use crate::store::{AuditEntry, SettingKey};

/// Whoever holds this advisory lock (for its transaction) decides whether the store has an admin
/// yet: two `bw init`s racing on one store bootstrap exactly one.
const BOOTSTRAP_LOCK: &str = ":bootstrap-admin";

impl PgStore {
    pub fn permissions(&self, actor: &str) -> Result<Vec<Permission>> {
        self.read(|tx| Ok(permissions_of(tx, actor)?.1))
    }

    /// Refuse unless the actor the server vouches for holds `permission`, naming that actor.
    pub fn require(&self, actor: &str, permission: Permission) -> Result<()> {
        self.read(|tx| require(tx, actor, permission))
    }

    pub fn grant(&self, actor: &str, who: &str, permission: Permission) -> Result<()> {
        self.write(|tx| access::grant(tx, actor, who, permission))
    }

    pub fn revoke(&self, actor: &str, who: &str, permission: Permission) -> Result<bool> {
        self.write(|tx| access::revoke(tx, actor, who, permission))
    }

    pub fn has_admin(&self) -> Result<bool> {
        self.read(has_admin)
    }

    pub fn bootstrap_admin(&self, actor: &str) -> Result<bool> {
        self.write(|tx| access::bootstrap_admin(tx, actor))
    }

    pub fn setting(&self, key: SettingKey) -> Result<String> {
        self.read(|tx| settings::setting(tx, key))
    }

    pub fn set_setting(&self, actor: &str, key: SettingKey, value: &str) -> Result<()> {
        self.write(|tx| access::set_setting(tx, actor, key, value))
    }

    pub fn retention(&self) -> Result<Duration> {
        parse_retention(&self.setting(SettingKey::Retention)?)
    }

    pub fn payload_limit(&self) -> Result<u64> {
        self.read(payload_limit)
    }

    pub fn output_limit(&self) -> Result<u64> {
        self.read(|tx| settings::output_limit(tx))
    }

    pub fn failure_detail_enabled(&self) -> Result<bool> {
        self.read(|tx| settings::detail_enabled(tx))
    }

    pub fn mark_demo(&self) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO settings (key, value) VALUES ('store_kind', 'demo')
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[],
            )?;
            Ok(())
        })
    }

    pub fn is_demo(&self) -> Result<bool> {
        self.read(|tx| {
            let v: Option<String> =
                tx.query_opt("SELECT value FROM settings WHERE key = 'store_kind'", &[])?.map(|r| r.get(0));
            Ok(v.as_deref() == Some("demo"))
        })
    }

    pub fn reveal_failure_detail(&self, actor: &str, job: JobId) -> Result<Vec<(i64, FailureDetail)>> {
        // Through `bw_reveal_failure_detail`, the only way to the detail for a role other than
        // the owner: it checks the permission and writes the audit row itself, so a role that
        // may not update jobs (opened read-only) reveals too, and no reveal by SQL goes
        // unaudited.
        self.write_anyway(|tx| {
            // The permission comes first: without it, not even whether detail exists is told.
            // The function checks it again; this check names the refusal as `bw` words it.
            require(tx, actor, Permission::ViewFailureDetail)?;
            if !settings::detail_enabled(tx)? {
                return Err(Error::FailureDetailOff);
            }
            let now = tx.now()?;
            // As text, byte for byte as the worker wrote it (the column is `json`, not `jsonb`).
            let rows: Vec<(i64, String)> = tx
                .query("SELECT seq, detail FROM bw_reveal_failure_detail($1, $2, $3)", &[&job.0, &now, &actor])?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            Ok(parse_details(rows))
        })
    }

    pub fn audit_entries(&self, since: Millis, limit: usize) -> Result<Vec<AuditEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|tx| {
            let mut rows: Vec<AuditEntry> = tx
                .query(
                    "SELECT seq, at, actor, action, job_id, detail FROM audit WHERE at >= $1
                     ORDER BY seq DESC LIMIT $2",
                    &[&since, &limit],
                )?
                .iter()
                .map(|r| -> Result<AuditEntry> {
                    Ok(AuditEntry {
                        seq: r.try_get(0)?,
                        at: r.try_get(1)?,
                        actor: r.try_get(2)?,
                        action: r.try_get(3)?,
                        job_id: r.try_get::<_, Option<uuid::Uuid>>(4)?.map(JobId),
                        detail: r.try_get(5)?,
                    })
                })
                .collect::<Result<_>>()?;
            rows.reverse();
            Ok(rows)
        })
    }
}

/// Who the server says acts for the claimed `actor` (see the module doc), and the permissions
/// that one holds, as of `tx`.
pub(super) fn permissions_of(tx: &mut Tx<'_>, actor: &str) -> Result<(String, Vec<Permission>)> {
    let r = tx.query_one(
        "SELECT w.a, ARRAY(SELECT g.permission FROM grants g WHERE g.actor = w.a) FROM bw_actor($1) AS w(a)",
        &[&actor],
    )?;
    let held: Vec<String> = r.try_get(1)?;
    Ok((r.try_get(0)?, permissions_from(&held)))
}

/// Fail with `PermissionDenied` unless the actor holds `permission` (admin implies all): the
/// first statement of every audited write, so a refused actor changes nothing. The server's
/// triggers check again, by the same name, whatever a client sends.
pub(super) fn require(tx: &mut Tx<'_>, actor: &str, permission: Permission) -> Result<()> {
    let (who, held) = permissions_of(tx, actor)?;
    allowed(&held, &who, permission)
}

/// The store's payload limit, read inside the caller's transaction.
pub(super) fn payload_limit(tx: &mut Tx<'_>) -> Result<u64> {
    settings::payload_limit(tx)
}

/// The transaction every audited PostgreSQL action runs in, as the shared policy asks for it.
impl StoreTx for Tx<'_> {
    fn now(&mut self) -> Result<Millis> {
        Tx::now(self)
    }

    fn require(&mut self, actor: &str, permission: Permission) -> Result<()> {
        require(self, actor, permission)
    }

    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, job: Option<JobId>, detail: &str) -> Result<()> {
        self.execute(
            "INSERT INTO audit (at, actor, action, job_id, detail) VALUES ($1, $2, $3, $4, $5)",
            &[&now, &actor, &action.as_str(), &job.map(|j| j.0), &detail],
        )?;
        Ok(())
    }

    fn payload_limit(&mut self) -> Result<u64> {
        payload_limit(self)
    }
}

/// PostgreSQL's statements for grants and settings.
impl AdminTx for Tx<'_> {
    fn insert_grant(&mut self, who: &str, permission: Permission, by: &str, now: Millis) -> Result<()> {
        self.execute(
            "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (actor, permission) DO NOTHING",
            &[&who, &permission.as_str(), &by, &now],
        )?;
        Ok(())
    }

    fn delete_grant(&mut self, who: &str, permission: Permission) -> Result<bool> {
        let sql = "DELETE FROM grants WHERE actor = $1 AND permission = $2";
        Ok(self.execute(sql, &[&who, &permission.as_str()])? > 0)
    }

    /// READ COMMITTED lets two transactions both see no admin and both insert one (their rows
    /// differ, so no key conflict stops the second): decide under a lock, and read again once
    /// it is ours, when any earlier bootstrap has committed.
    fn lock_bootstrap(&mut self) -> Result<()> {
        self.query_one("SELECT pg_advisory_xact_lock(hashtext(current_schema() || $1))", &[&BOOTSTRAP_LOCK])?;
        Ok(())
    }

    fn has_admin(&mut self) -> Result<bool> {
        has_admin(self)
    }

    /// The first admin is the role the server names (for the store's owner, its claim).
    fn insert_first_admin(&mut self, actor: &str, now: Millis) -> Result<()> {
        self.execute(
            "INSERT INTO grants (actor, permission, granted_by, granted_at) VALUES (bw_actor($1), 'admin', $1, $2)",
            &[&actor, &now],
        )?;
        Ok(())
    }

    fn write_setting(&mut self, key: SettingKey, value: &str) -> Result<()> {
        self.execute(
            "INSERT INTO settings (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key.as_str(), &value],
        )?;
        Ok(())
    }
}

impl SettingRead for Tx<'_> {
    fn stored_setting(&mut self, key: SettingKey) -> Result<Option<String>> {
        Ok(self.query_opt("SELECT value FROM settings WHERE key = $1", &[&key.as_str()])?.map(|r| r.get(0)))
    }
}

fn has_admin(tx: &mut Tx<'_>) -> Result<bool> {
    Ok(tx.query_one("SELECT EXISTS (SELECT 1 FROM grants WHERE permission = 'admin')", &[])?.get(0))
}
