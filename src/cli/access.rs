//! bw grant | revoke | audit: permissions and the audit trail

use std::process::ExitCode;

use super::{CliError, Ctx};

/// Give an actor a permission (admin).
#[derive(Debug, clap::Args)]
pub struct GrantArgs {}
/// Take a permission away (admin).
#[derive(Debug, clap::Args)]
pub struct RevokeArgs {}
/// Operator actions that are not state changes.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {}

pub fn grant(_a: &GrantArgs, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw grant` is being built".into()))
}
pub fn revoke(_a: &RevokeArgs, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw revoke` is being built".into()))
}
pub fn audit(_a: &AuditArgs, _ctx: &Ctx) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("`bw audit` is being built".into()))
}
