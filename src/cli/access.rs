//! bw grant | revoke | audit: who may do what, and the trail of operator actions that are not
//! state changes (grants, settings, reveals of failure detail, purges). Grants live in the
//! store, so anyone who can write the database file can change them: the file's permissions
//! are the outer wall.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use super::output::{rfc3339, sanitize, Render, Table, Term};
use super::{eprint_quiet, exit, parse_duration, CliError, Ctx};
use backwave::store::AuditEntry;
use backwave::{Millis, Permission};

fn parse_permission(s: &str) -> Result<Permission, String> {
    s.parse::<Permission>().map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
pub struct GrantArgs {
    pub actor: String,
    #[arg(value_parser = parse_permission)]
    pub permission: Permission,
}

#[derive(Debug, clap::Args)]
pub struct RevokeArgs {
    pub actor: String,
    #[arg(value_parser = parse_permission)]
    pub permission: Permission,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only entries from the last DUR.
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub since: Option<Duration>,
    /// At most this many (the most recent).
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
}

#[derive(Serialize)]
struct Changed {
    action: &'static str,
    actor: String,
    permission: &'static str,
    changed: bool,
    /// What the actor holds now (admin implies the others).
    permissions: Vec<&'static str>,
}

impl Render for Changed {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let who = sanitize(&self.actor);
        let now = if self.permissions.is_empty() { "nothing".to_string() } else { self.permissions.join(", ") };
        match (self.action, self.changed) {
            ("grant", _) => writeln!(out, "Granted {} to {who}. {who} now holds: {now}.", self.permission),
            (_, true) => writeln!(out, "Revoked {} from {who}. {who} now holds: {now}.", self.permission),
            (_, false) => writeln!(out, "{who} did not hold {}; nothing changed. {who} holds: {now}.", self.permission),
        }
    }
}

pub fn grant(a: &GrantArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    store.grant(ctx.actor(), &a.actor, a.permission)?;
    let permissions = store.permissions(&a.actor)?.iter().map(|p| p.as_str()).collect();
    let view = Changed {
        action: "grant",
        actor: a.actor.clone(),
        permission: a.permission.as_str(),
        changed: true,
        permissions,
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(a: &RevokeArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let changed = store.revoke(ctx.actor(), &a.actor, a.permission)?;
    let permissions = store.permissions(&a.actor)?.iter().map(|p| p.as_str()).collect();
    let view =
        Changed { action: "revoke", actor: a.actor.clone(), permission: a.permission.as_str(), changed, permissions };
    ctx.printer()?.print(&view)?;
    // Revoking the last admin left nobody able to grant or change settings, and said nothing
    // about how to get an admin back.
    if changed && a.permission == Permission::Admin && !store.has_admin()? {
        eprint_quiet(format_args!(
            "bw: warning: this store has no admin now: nobody can grant, revoke or change settings until \
             someone who can write the store runs `bw init` on it (that makes them admin)\n"
        ));
    }
    // Nothing to undo is not done, as a resume of what is not paused (docs/reference.md, exit codes).
    if !changed {
        return Err(exit::not_all_done(format!(
            "{} did not hold {}: nothing revoked",
            sanitize(&a.actor),
            a.permission.as_str()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Audit {
    entries: Vec<AuditJson>,
}

#[derive(Serialize)]
struct AuditJson {
    seq: i64,
    at: String,
    actor: String,
    action: String,
    job_id: Option<String>,
    detail: Option<String>,
}

impl From<AuditEntry> for AuditJson {
    fn from(e: AuditEntry) -> Self {
        AuditJson {
            seq: e.seq,
            at: rfc3339(e.at),
            actor: e.actor,
            action: e.action,
            job_id: e.job_id.map(|j| j.to_string()),
            detail: e.detail,
        }
    }
}

impl Render for Audit {
    fn table(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if self.entries.is_empty() {
            return writeln!(out, "No audit entries.");
        }
        let mut t = Table::new(&["SEQ", "AT", "ACTOR", "ACTION", "JOB", "DETAIL"]).flex(5);
        for e in &self.entries {
            t.row(vec![
                e.seq.to_string().into(),
                e.at.clone().into(),
                sanitize(&e.actor).into_owned().into(),
                sanitize(&e.action).into_owned().into(),
                e.job_id
                    .as_deref()
                    .and_then(|j| j.parse::<backwave::JobId>().ok())
                    .map(|j| j.short())
                    .unwrap_or_default()
                    .into(),
                sanitize(e.detail.as_deref().unwrap_or("")).into_owned().into(),
            ]);
        }
        t.write(out, term)
    }
}

pub fn audit(a: &AuditArgs, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = ctx.open()?;
    let since = a.since.map_or(0, |d| store.now() - d.as_millis() as Millis);
    let entries = store.audit_entries(since, a.limit)?.into_iter().map(AuditJson::from).collect();
    ctx.printer()?.print(&Audit { entries })?;
    Ok(ExitCode::SUCCESS)
}
