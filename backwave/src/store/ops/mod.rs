//! The store's operator policy, written once above the two SQL dialects: what each action
//! checks and in which order, what it decides per job or name, and what it audits and logs.
//! Each backend supplies only statements, through a small transaction trait per area (as
//! `store/health`'s `HealthRead`, `schedules.rs`'s `ScheduleTx` and `limits.rs`'s `LimitTx`).

pub(crate) mod access;
pub(crate) mod bulk;
pub(crate) mod claim;
pub(crate) mod columns;
pub(crate) mod demo;
pub(crate) mod enqueue;
pub(crate) mod groups;
pub(crate) mod jobs;
pub(crate) mod limits;
pub(crate) mod names;
pub(crate) mod outcome;
pub(crate) mod preview;
pub(crate) mod schedules;
pub(crate) mod settings;
pub(crate) mod workers;

use serde::Serialize;

use crate::error::Result;
use crate::model::{JobId, Millis, Permission};

/// What every audited operator action asks of a backend's transaction, whatever it acts on:
/// its time, the actor's permission, an audit row, and the payload limit. Each backend writes
/// it once; the per-area traits ([`jobs::OperatorTx`], the schedules' `ScheduleTx`) build on it.
pub(crate) trait StoreTx {
    /// The time the transaction decides at.
    fn now(&mut self) -> Result<Millis>;
    /// `PermissionDenied` unless the actor (on PostgreSQL, the one the server vouches for)
    /// holds `permission`.
    fn require(&mut self, actor: &str, permission: Permission) -> Result<()>;
    /// Append one row to the audit trail.
    fn audit(&mut self, now: Millis, actor: &str, action: AuditAction, job: Option<JobId>, detail: &str) -> Result<()>;
    /// The store's payload limit as this transaction reads it.
    fn payload_limit(&mut self) -> Result<u64>;
}

/// One audited operator action, as [`Store::audit_entries`](crate::Store::audit_entries) reads
/// the audit trail: who did what, when, to which job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEntry {
    /// The entry's number, in the order entries were written.
    pub seq: i64,
    /// When.
    pub at: Millis,
    /// Who (an operating-system user, a PostgreSQL role, or the name an application passed).
    pub actor: String,
    /// What, as stored: `pause`, `run-now`, `edit-payload`, `grant`, `reveal-failure-detail`, …
    /// (requeues and cancels are in the transition log, with their actor).
    pub action: String,
    /// The job acted on, when the action was on one job.
    pub job_id: Option<JobId>,
    /// The action's particulars (a pause's name and expiry, a payload edit's old payload).
    pub detail: Option<String>,
}

/// The audit actions and their stored spellings, written once: the enum, `as_str` and `ALL`.
macro_rules! audit_actions {
    ($($variant:ident => $text:literal,)*) => {
        /// What an audit row records as its `action`: one name per operator action. Serialised
        /// and stored exactly as the strings these were before they had a type, so stored rows
        /// and the audit trail's JSON are unchanged.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        pub(crate) enum AuditAction {
            $(#[serde(rename = $text)] $variant,)*
        }

        impl AuditAction {
            /// Every action, in declaration order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [AuditAction] = &[$(AuditAction::$variant,)*];

            /// The spelling in `audit.action`.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(AuditAction::$variant => $text,)*
                }
            }
        }
    };
}

audit_actions! {
    Grant => "grant",
    Revoke => "revoke",
    Config => "config",
    RevealFailureDetail => "reveal-failure-detail",
    Purge => "purge",
    CancelRequested => "cancel-requested",
    RunNow => "run-now",
    EditPayload => "edit-payload",
    Pause => "pause",
    Resume => "resume",
    Limit => "limit",
    Unlimit => "unlimit",
    Quiet => "quiet",
    ResumeWorker => "resume-worker",
    ScheduleDeclare => "schedule-declare",
    ScheduleUpdate => "schedule-update",
    SchedulePause => "schedule-pause",
    ScheduleResume => "schedule-resume",
    ScheduleTrigger => "schedule-trigger",
    SetPriority => "set-priority",
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::AuditAction;

    #[test]
    fn audit_actions_serialise_as_the_strings_stored() {
        let texts: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            texts.join(" "),
            "grant revoke config reveal-failure-detail purge cancel-requested run-now edit-payload pause resume \
             limit unlimit quiet resume-worker schedule-declare schedule-update schedule-pause schedule-resume \
             schedule-trigger set-priority"
        );
        for a in AuditAction::ALL {
            assert_eq!(serde_json::to_value(a).unwrap(), serde_json::Value::String(a.as_str().into()));
        }
    }
}
