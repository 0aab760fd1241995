//! The Scheduled view: the jobs waiting, with when each is due and its retry budget (the job
//! list of `jobs.rs`).

use super::Info;
use backwave::JobState;

pub(super) const VIEW: Info = Info::jobs("Scheduled", "Sched", JobState::Scheduled, None);
