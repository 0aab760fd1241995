//! A workflow summed up in words, as `bw workflows`, `bw workflow show` and `bw top`'s Workflows
//! view print it: its jobs' states, most advanced first, and its status (done, stuck, in
//! progress) with the tone to paint it in.

use backwave::{JobState, WorkflowSummary};

use super::{state_short, thousands, Tone};

/// The states of a workflow's jobs, most advanced first.
const STATE_ORDER: [JobState; 7] = [
    JobState::Succeeded,
    JobState::Running,
    JobState::Scheduled,
    JobState::Waiting,
    JobState::DeadLettered,
    JobState::Quarantined,
    JobState::Cancelled,
];

fn counts(s: &WorkflowSummary, name: fn(JobState) -> &'static str) -> Vec<String> {
    STATE_ORDER
        .iter()
        .filter_map(|st| s.counts.get(st).filter(|n| **n > 0).map(|n| format!("{} {}", thousands(*n), name(*st))))
        .collect()
}

/// `2 OK, 1 SCHED, 1 WAIT, 1 DEAD`: a list's compact form of [`workflow_counts`].
pub fn workflow_counts_short(s: &WorkflowSummary) -> String {
    let parts = counts(s, state_short);
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// `3 succeeded, 1 running, 5 waiting`: the states a workflow's jobs are in, most advanced first.
pub fn workflow_counts(s: &WorkflowSummary) -> String {
    let parts = counts(s, JobState::as_str);
    if parts.is_empty() {
        "no jobs left (retention)".into()
    } else {
        parts.join(", ")
    }
}

/// `done`, `stuck: 2 wait behind a failed parent` (`stuck: 2` when not `long`), or
/// `in progress`, and its tone.
pub fn workflow_status(s: &WorkflowSummary, long: bool) -> (String, Tone) {
    if s.stuck > 0 {
        let why = if long { " wait behind a failed parent" } else { "" };
        return (format!("stuck: {}{why}", thousands(s.stuck)), Tone::Red);
    }
    if s.is_done() {
        let failed: u64 = [JobState::DeadLettered, JobState::Quarantined, JobState::Cancelled]
            .iter()
            .filter_map(|st| s.counts.get(st))
            .sum();
        return match failed {
            0 => ("done".into(), Tone::Green),
            n => (format!("done, {} not succeeded", thousands(n)), Tone::Yellow),
        };
    }
    ("in progress".into(), Tone::Plain)
}
