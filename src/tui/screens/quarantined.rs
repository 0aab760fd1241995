//! The Quarantined view: the jobs set aside without retrying (the job list of `jobs.rs`, with
//! how many live workers handle each); `g` groups them by wire name and reason (`groups.rs`).

use super::{groups, Info};
use backwave::JobState;

pub(super) const VIEW: Info =
    Info::jobs("Quarantined", "Quar", JobState::Quarantined, Some(&groups::QUARANTINE_GROUPS));
