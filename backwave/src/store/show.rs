//! What `bw jobs show` reads of one job (the row, its history, the live handlers of its wire
//! name, whether failure detail is on), read together in one snapshot, with as few statements as
//! it can.

use crate::error::{Error, Result};
use crate::model::{Job, JobId, Transition};

use super::id_prefix::normalize_prefix;
use super::Store;

/// One job with everything about it, read at one moment: its row, its history, who handles it.
#[derive(Debug)]
pub struct JobView {
    /// The job's row.
    pub job: Job,
    /// Every transition of the job, oldest first.
    pub history: Vec<Transition>,
    /// Live workers whose handlers serve the job's wire name.
    pub live_handlers: u64,
    /// Whether failure detail is captured in this store ([`Store::failure_detail_enabled`]).
    pub failure_detail: bool,
}

impl Store {
    /// The job that `text` names (a full id, a unique prefix or a short id, as
    /// [`Store::resolve_id`] takes them) with what is shown beside it, or the error
    /// [`Store::resolve_id`] gives. The same answers as [`Store::resolve_id`], [`Store::job`],
    /// [`Store::history`], [`Store::live_handlers`] and [`Store::failure_detail_enabled`] in turn,
    /// read in one [`Store::snapshot`]. A full id is looked up by the primary key alone: the
    /// prefix search `resolve_id` would run first can only find that same row.
    pub fn job_view(&self, text: &str) -> Result<JobView> {
        self.snapshot(|s| {
            let full = normalize_prefix(text).ok().filter(|p| p.len() == 36).and_then(|p| p.parse::<JobId>().ok());
            let id = match full {
                Some(id) => id,
                None => s.resolve_id(text)?,
            };
            let job = s.job(id)?.ok_or_else(|| Error::JobNotFound(text.to_string()))?;
            let live_handlers = s.live_handlers()?.get(&job.wire_name).copied().unwrap_or(0);
            Ok(JobView { history: s.history(id)?, failure_detail: s.failure_detail_enabled()?, live_handlers, job })
        })
    }
}
