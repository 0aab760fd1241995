//! The counter of transitions by state that `bw metrics --listen` exports: each count reads
//! only the entries appended since the last, by cursor (the dialects' `log.rs` read them).

use std::collections::BTreeMap;

use crate::model::{JobState, LogCursor};

/// Transitions by the state they moved a job into, counted from the log as it grows. A
/// reader keeps one and passes it to [`Store::count_transitions`](crate::Store::count_transitions)
/// each time; each call reads only the entries after the last one counted, up to the log's end
/// ([`Store::log_end`](crate::Store::log_end)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransitionCounter {
    /// The cursor counted up to; `None` until the first call, which sets the baseline.
    pub last: Option<LogCursor>,
    /// Transitions into each state since the baseline (a state none moved into is absent).
    pub by_state: BTreeMap<JobState, u64>,
}
