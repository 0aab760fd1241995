//! The transition log as both backends read it: which entries a tail shows ([`LogFilter`]),
//! and the binary search for the cursor at an instant over the log's primary key. The reads are
//! the dialects' `log.rs`.

use crate::error::Result;
use crate::model::{JobId, JobState, Millis};

/// The least seq in the log and one past the greatest ((1, 1) when it is empty), where
/// [`first_seq_at`] searches. Two subqueries, not min and max in one SELECT: SQLite answers a lone
/// min() or max() from the key's ends, but both together scan the whole log (1 s at 4.6M).
pub(crate) const SEQ_BOUNDS_SQL: &str =
    "SELECT coalesce((SELECT min(seq) FROM transitions), 1), coalesce((SELECT max(seq) FROM transitions), 0) + 1";

/// The seq where the log splits at `at`, by binary search over its primary key between `lo` and
/// `hi` ([`SEQ_BOUNDS_SQL`]): the entries before it are older than `at` and the first one from it
/// is not; `hi` when no entry is that recent.
/// `probe(seq)` reads the first entry at or after `seq`: its seq and time. Entries are appended in
/// time order (on PostgreSQL nearly: an entry's time is its transaction's start, and seqs are
/// handed out as transactions write, so entries of transactions running side by side at `at`
/// may fall on either side), so no index on time is needed. Both backends search with this.
pub(crate) fn first_seq_at(
    mut lo: i64,
    mut hi: i64,
    at: Millis,
    mut probe: impl FnMut(i64) -> Result<Option<(i64, Millis)>>,
) -> Result<i64> {
    while lo < hi {
        // In i128: another program may have written a negative seq, and `hi - lo` across the
        // whole i64 range overflows.
        let mid = lo + ((hi as i128 - lo as i128) / 2) as i64;
        match probe(mid)? {
            Some((seq, t)) if t < at => lo = seq + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// Which log entries a tail shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFilter {
    /// Only this job's entries.
    pub job: Option<JobId>,
    /// Entries that moved a job into one of these states.
    pub to_states: Vec<JobState>,
}

#[cfg(test)]
mod tests {
    use super::first_seq_at;

    /// The search over a log with gaps in its seqs (rolled-back writers, the retention sweep):
    /// `entries` as (seq, time), the probe answering as the `seq >= ?` query does.
    fn split(entries: &[(i64, i64)], at: i64) -> i64 {
        let (lo, hi) = (entries[0].0, entries[entries.len() - 1].0 + 1);
        first_seq_at(lo, hi, at, |seq| Ok(entries.iter().find(|(s, _)| *s >= seq).copied())).unwrap()
    }

    #[test]
    fn the_split_falls_just_after_the_last_older_entry_across_gaps_in_the_seqs() {
        let log = [(5, 10), (9, 20), (20, 30), (21, 40)];
        assert_eq!(split(&log, 10), 5, "every entry is that recent: from the first");
        // Any seq in 10..=20 splits the log at 25; the search stops just after the older entry.
        assert_eq!(split(&log, 25), 10);
        assert_eq!(split(&log, 30), 10);
        assert_eq!(split(&log, 31), 21);
        assert_eq!(split(&log, 41), 22, "none that recent: one past the newest");
    }
}
