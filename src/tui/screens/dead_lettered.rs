//! The Dead-Lettered view: the jobs that spent their attempts, newest first (the job list of
//! `jobs.rs`); `g` groups them by cause (`groups.rs`).

use super::{groups, Info};
use backwave::JobState;

pub(super) const VIEW: Info = Info::jobs("Dead-Lettered", "Dead", JobState::DeadLettered, Some(&groups::CAUSE_GROUPS));
