//! bw init: create a store (readable by its owner and group only) or migrate an existing one,
//! and make the user running it `admin` when the store has no admin yet.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;

use serde::Serialize;

use super::output::{sanitize, Render, Term};
use super::{eprint_quiet, CliError, Ctx};
use backwave::store::{StoreTarget, SCHEMA_VERSION};
use backwave::Store;

#[derive(Debug, clap::Args)]
pub struct Args {}

#[derive(Serialize)]
struct Init {
    path: String,
    created: bool,
    schema_version: i64,
    /// The file's permission bits, octal (`640`); none on a database server, whose grants
    /// decide who may read and write.
    mode: Option<String>,
    admin: String,
    made_admin: bool,
}

pub fn run(_args: &Args, ctx: &Ctx) -> Result<ExitCode, CliError> {
    let path = match &ctx.global.db {
        StoreTarget::File(path) => path,
        StoreTarget::Postgres(_) => return init_server(ctx),
    };
    let existed = path.exists();
    let store = Store::create(path)?.with_clock(ctx.clock()?);
    store.set_busy_timeout(ctx.global.busy_timeout)?;
    let made_admin = store.bootstrap_admin(ctx.actor())?;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if mode & 0o007 != 0 {
        eprint_quiet(format_args!(
            "bw: warning: '{}' is accessible to every user (mode {mode:o}); anyone who can write it can change grants: \
             chmod o-rwx it\n",
            sanitize(&path.display().to_string())
        ));
    }
    let view = Init {
        path: path.display().to_string(),
        created: !existed,
        schema_version: SCHEMA_VERSION,
        mode: Some(format!("{mode:o}")),
        admin: ctx.actor().to_string(),
        made_admin,
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

/// `bw init` on a PostgreSQL URL: create the schema in the URL's database (or open the store
/// there), and make the user admin when nobody is.
fn init_server(ctx: &Ctx) -> Result<ExitCode, CliError> {
    let store = Store::open(&ctx.global.db);
    let created = store.is_err();
    let store = match store {
        Ok(store) => store,
        Err(backwave::Error::NotAStore { .. }) => Store::create(&ctx.global.db)?,
        Err(e) => return Err(e.into()),
    }
    .with_clock(ctx.clock()?);
    store.set_busy_timeout(ctx.global.busy_timeout)?;
    let made_admin = store.bootstrap_admin(ctx.actor())?;
    let view = Init {
        path: ctx.global.db.to_string(),
        created,
        schema_version: SCHEMA_VERSION,
        mode: None,
        admin: ctx.actor().to_string(),
        made_admin,
    };
    ctx.printer()?.print(&view)?;
    Ok(ExitCode::SUCCESS)
}

impl Render for Init {
    fn table(&self, out: &mut dyn Write, _term: &Term) -> io::Result<()> {
        let path = sanitize(&self.path);
        let mode = self.mode.as_ref().map_or(String::new(), |m| format!(", mode {m}"));
        if self.created {
            writeln!(out, "Created store {path} (schema version {}{mode}).", self.schema_version)?;
        } else {
            writeln!(out, "Store {path} is ready (schema version {}{mode}).", self.schema_version)?;
        }
        if self.made_admin {
            writeln!(out, "{} is admin: grant others with `bw grant USER operate`.", sanitize(&self.admin))?;
        }
        Ok(())
    }
}
