//! Who may do what, written once: the permissions a set of grants gives, the refusal of an
//! actor without one, who may be granted one, grant, revoke, the first admin and a changed
//! setting (checked, written and audited in one order), over a backend's [`AdminTx`].

use super::{AuditAction, StoreTx};
use crate::error::{Error, Result};
use crate::model::{FailureDetail, Millis, Permission};
use crate::store::SettingKey;

/// The statements grants and settings need, per dialect, in one write transaction.
pub(crate) trait AdminTx: StoreTx {
    /// Give `who` the permission, granted by `by` at `now` (nothing when `who` holds it).
    fn insert_grant(&mut self, who: &str, permission: Permission, by: &str, now: Millis) -> Result<()>;
    /// Take the permission from `who`: whether `who` held it.
    fn delete_grant(&mut self, who: &str, permission: Permission) -> Result<bool>;
    /// Decide the first admin one at a time: PostgreSQL's writers run side by side (SQLite has
    /// one writer), and two `bw init`s on one store must bootstrap exactly one.
    fn lock_bootstrap(&mut self) -> Result<()>;
    fn has_admin(&mut self) -> Result<bool>;
    /// Make `actor` (on PostgreSQL, the role the server names for it) the first admin.
    fn insert_first_admin(&mut self, actor: &str, now: Millis) -> Result<()>;
    /// Store a validated setting.
    fn write_setting(&mut self, key: SettingKey, value: &str) -> Result<()>;
}

/// `bw grant`: needs `admin`, checked before the grantee's name.
pub(crate) fn grant(tx: &mut (impl AdminTx + ?Sized), actor: &str, who: &str, permission: Permission) -> Result<()> {
    tx.require(actor, Permission::Admin)?;
    check_grantee(who)?;
    let now = tx.now()?;
    tx.insert_grant(who, permission, actor, now)?;
    tx.audit(now, actor, AuditAction::Grant, None, &grant_detail(who, permission))
}

/// `bw revoke`: needs `admin`. A revoke of what was not held changes nothing, so it leaves no
/// trail (as a resume of what is not paused). Returns whether `who` held it.
pub(crate) fn revoke(tx: &mut (impl AdminTx + ?Sized), actor: &str, who: &str, permission: Permission) -> Result<bool> {
    tx.require(actor, Permission::Admin)?;
    let now = tx.now()?;
    let held = tx.delete_grant(who, permission)?;
    if held {
        tx.audit(now, actor, AuditAction::Revoke, None, &grant_detail(who, permission))?;
    }
    Ok(held)
}

/// `bw init`: make `actor` admin when the store has none yet, decided under the bootstrap lock
/// (no permission needed: there is nobody to ask). Returns whether it did.
pub(crate) fn bootstrap_admin(tx: &mut (impl AdminTx + ?Sized), actor: &str) -> Result<bool> {
    tx.lock_bootstrap()?;
    if tx.has_admin()? {
        return Ok(false);
    }
    let now = tx.now()?;
    tx.insert_first_admin(actor, now)?;
    tx.audit(now, actor, AuditAction::Grant, None, &bootstrap_detail(actor))?;
    Ok(true)
}

/// `bw config KEY VALUE`: needs `admin`, checked before the value.
pub(crate) fn set_setting(tx: &mut (impl AdminTx + ?Sized), actor: &str, key: SettingKey, value: &str) -> Result<()> {
    tx.require(actor, Permission::Admin)?;
    let value = key.validate(value)?;
    let now = tx.now()?;
    tx.write_setting(key, &value)?;
    tx.audit(now, actor, AuditAction::Config, None, &config_detail(key, &value))
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
    // An operator is named as `bw` names them (their OS user name): never with a space, so a
    // grant to one would be held by nobody (found at 3 a.m.: `bw grant 'ali ce' operate` passed).
    if who.chars().any(char::is_whitespace) {
        return Err(Error::InvalidInput(format!(
            "'{who}' holds a space: operators are named by their user name (as `Store::audit_entries` shows them), which has none"
        )));
    }
    Ok(())
}

/// `PermissionDenied` unless `permission` is among the permissions `actor` holds. Both backends.
pub(crate) fn allowed(held: &[Permission], actor: &str, permission: Permission) -> Result<()> {
    if held.contains(&permission) {
        Ok(())
    } else {
        Err(Error::PermissionDenied { actor: actor.to_string(), permission })
    }
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

/// The operating-system user running this process, from its real uid (not from an
/// environment variable anyone can set). Falls back to `uid:N` when the user has no name.
pub fn current_actor() -> String {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => user.name,
        _ => format!("uid:{uid}"),
    }
}
