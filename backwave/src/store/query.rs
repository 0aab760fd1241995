//! What reading the store answers on both backends: a page of jobs and where it stands in the
//! whole list, and the counts of jobs by queue and state. The job filter is `filter.rs`; the
//! queries, the dialects' `query.rs`.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::filter::{Cursor, JobFilter, SortOrder};
use crate::model::{Job, JobState};

/// One page of jobs and where it stands in the whole list.
#[derive(Clone, Debug, Serialize)]
pub struct JobPage {
    /// The jobs, each with an empty `payload`: a list never reads payloads, which may be large
    /// and are not shown; [`Store::job`](crate::Store::job) reads one job whole.
    pub jobs: Vec<Job>,
    /// Rows matching the filter in all.
    pub total: u64,
    /// 0-based position of the first row of this page, when paging by offset.
    pub offset: Option<u64>,
    /// Pass to [`Store::list_jobs_after`](crate::Store::list_jobs_after) for the next page;
    /// `None` on the last page.
    #[serde(skip)]
    pub next: Option<Cursor>,
}

/// Counts of jobs by queue and state, kept exact by the schema's triggers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StateCounts {
    /// Queue name -> state -> number of jobs (states with none may be absent).
    pub by_queue: BTreeMap<String, BTreeMap<JobState, u64>>,
}

impl StateCounts {
    /// Jobs in `state` across every queue.
    pub fn total(&self, state: JobState) -> u64 {
        self.by_queue.values().filter_map(|m| m.get(&state)).sum()
    }

    /// Jobs of `queue` in every state (0 for a queue with none).
    pub fn queue_total(&self, queue: &str) -> u64 {
        self.by_queue.get(queue).map(|m| m.values().sum()).unwrap_or(0)
    }
}
