//! The Running view: the jobs under a lease now, with its time left, the worker holding it and
//! any cancel asked for (the job list of `jobs.rs`).

use super::Info;
use backwave::JobState;

pub(super) const VIEW: Info = Info::jobs("Running", "Run", JobState::Running, None);
