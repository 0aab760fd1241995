//! The store's operator policy, written once above the two SQL dialects: what each action
//! checks and in which order, what it decides per job or name, and what it audits and logs.
//! Each backend supplies only statements, through a small transaction trait per area (as
//! `store/health`'s `HealthRead`, `schedules.rs`'s `ScheduleTx` and `limit.rs`'s `LimitTx`).

pub(crate) mod enqueue;
pub(crate) mod jobs;
pub(crate) mod names;
pub(crate) mod outcome;
pub(crate) mod settings;

use serde::Serialize;

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
             schedule-trigger"
        );
        for a in AuditAction::ALL {
            assert_eq!(serde_json::to_value(a).unwrap(), serde_json::Value::String(a.as_str().into()));
        }
    }
}
