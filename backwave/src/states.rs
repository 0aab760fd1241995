//! The words every part of BackWave shares about a job and an operator: the states a job can be
//! in and the permissions an actor can hold. They stand apart from `model` (which parses them
//! from text, its errors being [`Error`](crate::Error)s) so that an error can name a state or a
//! permission without the two files importing each other.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The seven states of a job. Four are terminal: a job in one never runs again unless an
/// operator requeues it (Dead-Lettered and Quarantined only). Waiting is a workflow job's
/// state until its parents are done (see [`Workflow`](crate::Workflow)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Waiting to be claimed, from its due time on (new, or retrying after a failed attempt).
    Scheduled,
    /// Claimed by a worker under a lease, its handler running.
    Running,
    /// Its handler returned `Ok(())`. Terminal.
    Succeeded,
    /// Its last allowed attempt failed (the retry policy's budget is spent). Terminal;
    /// requeueable.
    DeadLettered,
    /// It never ran: no handler for its wire name, or a payload that does not decode (see
    /// [`QuarantineReason`](crate::model::QuarantineReason)). Terminal; requeueable.
    Quarantined,
    /// An operator cancelled it, before it ran or while it ran. Terminal.
    Cancelled,
    /// A workflow job whose parents have not all done what its edges need (succeeded, or for a
    /// batch's callback, finished): never claimed; the completion of its last parent makes it
    /// Scheduled, once.
    Waiting,
}

impl JobState {
    /// Every state, in the order above (the order of [`JobState::unique_bit`]'s bits).
    pub const ALL: [JobState; 7] = [
        JobState::Scheduled,
        JobState::Running,
        JobState::Succeeded,
        JobState::DeadLettered,
        JobState::Quarantined,
        JobState::Cancelled,
        JobState::Waiting,
    ];

    /// The spelling in the store, in JSON and on the command line: `dead-lettered`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::DeadLettered => "dead-lettered",
            JobState::Quarantined => "quarantined",
            JobState::Cancelled => "cancelled",
            JobState::Waiting => "waiting",
        }
    }

    /// The spelling for people: `Dead-Lettered`.
    pub fn title(self) -> &'static str {
        match self {
            JobState::Scheduled => "Scheduled",
            JobState::Running => "Running",
            JobState::Succeeded => "Succeeded",
            JobState::DeadLettered => "Dead-Lettered",
            JobState::Quarantined => "Quarantined",
            JobState::Cancelled => "Cancelled",
            JobState::Waiting => "Waiting",
        }
    }

    /// Whether the job is finished: every state but Scheduled, Running and Waiting.
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobState::Scheduled | JobState::Running | JobState::Waiting)
    }

    /// This state's bit in a uniqueness rule's state mask (`jobs.unique_states`): its place in
    /// [`JobState::ALL`], so scheduled = 1, running = 2, succeeded = 4, dead-lettered = 8,
    /// quarantined = 16, cancelled = 32 (waiting = 64: a workflow job is never unique).
    pub fn unique_bit(self) -> i64 {
        1 << JobState::ALL.iter().position(|s| *s == self).unwrap_or(0)
    }

    /// Requeue applies to these two only.
    pub fn is_requeueable(self) -> bool {
        matches!(self, JobState::DeadLettered | JobState::Quarantined)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// Operator permissions, held per actor (an operating-system user name on SQLite, a role on
/// PostgreSQL). `Admin` implies the other two. Every operator call of the [`Store`] names its
/// actor and is refused with [`Error::PermissionDenied`](crate::Error::PermissionDenied) without the permission it needs;
/// [`Store::bootstrap_admin`] makes the first admin, who then grants ([`Store::grant`]).
///
/// [`Store`]: crate::Store
/// [`Store::bootstrap_admin`]: crate::Store::bootstrap_admin
/// [`Store::grant`]: crate::Store::grant
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Permission {
    /// Read failure detail (error chains, backtraces), which may hold personal data.
    ViewFailureDetail,
    /// Change jobs and what claims them: requeue, cancel, run now, edit payloads, purge, pause
    /// and limit queues and wire names, quiet workers, pause and trigger schedules.
    Operate,
    /// Everything, and change grants and store settings.
    Admin,
}

impl Permission {
    /// Every permission, weakest first.
    pub const ALL: [Permission; 3] = [Permission::ViewFailureDetail, Permission::Operate, Permission::Admin];

    /// The spelling in the store and in JSON: `view-failure-detail`, `operate`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::ViewFailureDetail => "view-failure-detail",
            Permission::Operate => "operate",
            Permission::Admin => "admin",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
