//! Dead-letter cause groups as a health read needs them, on both backends: every group read in
//! one pass (the dialects' `health/groups.rs`), and an example cause looked up only for the
//! groups shown.

use crate::error::Result;
use crate::model::Millis;
use crate::store::ops::groups::CauseGroup;

/// A dead-letter cause group before its example is looked up.
pub(crate) struct Group {
    pub(crate) wire_name: String,
    pub(crate) fingerprint: Option<String>,
    pub(crate) count: u64,
    pub(crate) first_seen: Millis,
    pub(crate) last_seen: Millis,
}

/// The groups as [`CauseGroup`]s, each with its latest real cause: one indexed lookup a group
/// (`example`). Both backends.
pub(crate) fn with_examples<'a>(
    mut example: impl FnMut(&str, Option<&str>) -> Result<Option<String>>,
    groups: impl Iterator<Item = &'a Group>,
) -> Result<Vec<CauseGroup>> {
    let mut out = Vec::new();
    for g in groups {
        let example = example(&g.wire_name, g.fingerprint.as_deref())?.unwrap_or_default();
        out.push(CauseGroup {
            wire_name: g.wire_name.clone(),
            // As `bw stats` shows it: a job written without a fingerprint groups by its cause.
            fingerprint: g.fingerprint.clone().unwrap_or_else(|| example.clone()),
            example,
            count: g.count,
            first_seen: g.first_seen,
            last_seen: g.last_seen,
        });
    }
    Ok(out)
}
