//! The live feed: the log tail, the per-minute chart and the per-queue throughput, accumulated
//! from each refresh whatever screen is on show. It knows nothing of screens or selection, so
//! it is tested alone (below); the Log screen and the header chart only read it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::data::{Snapshot, CHART_MINUTES};
use super::filter::Filter;
use backwave::{JobId, LogCursor, Millis, Transition};

/// Log entries kept for the Log view.
pub const LOG_KEEP: usize = 2_000;

/// Two refreshes at least this far apart give a throughput figure.
pub const THROUGHPUT_SPAN_MS: Millis = 10_000;

#[derive(Clone, Debug, Default)]
pub struct Feed {
    /// The newest [`LOG_KEEP`] log entries, oldest first.
    pub log: VecDeque<Transition>,
    /// The cursor of the newest entry in `log` (`None`: none yet).
    pub log_cursor: Option<LogCursor>,
    /// Succeeded and failed transitions per minute, the last hour.
    pub chart: BTreeMap<i64, (u64, u64)>,
    /// The cursor of the last entry counted into `chart` (`None`: none yet).
    pub chart_cursor: Option<LogCursor>,
    /// Jobs finished per minute per queue.
    pub throughput: BTreeMap<String, f64>,
    /// Per-queue terminal counts at an earlier refresh, for throughput.
    throughput_base: Option<(Millis, BTreeMap<String, u64>)>,
    /// Wire names of the jobs in the log (the log holds only ids), read as rows come on screen.
    pub wire_names: HashMap<JobId, String>,
}

impl Feed {
    /// Take in a refresh's new log entries, chart counts, wire names and counts. The wire
    /// names are moved out of `s`; the rest stays in it.
    pub fn absorb(&mut self, s: &mut Snapshot) {
        if s.log_reset {
            self.log.clear();
        }
        if let Some(last) = s.log.last() {
            self.log_cursor = Some(last.cursor());
        }
        self.log.extend(s.log.iter().cloned());
        while self.log.len() > LOG_KEEP {
            self.log.pop_front();
        }
        if self.wire_names.len() > 4 * LOG_KEEP {
            // Bounded: the names are read again for the rows on screen.
            self.wire_names.clear();
        }
        self.wire_names.extend(s.wire_names.drain());
        for (minute, (ok, failed)) in &s.chart {
            let e = self.chart.entry(*minute).or_default();
            e.0 += ok;
            e.1 += failed;
        }
        self.chart_cursor = self.chart_cursor.max(s.chart_cursor);
        let oldest = s.at.div_euclid(60_000) - CHART_MINUTES + 1;
        self.chart.retain(|m, _| *m >= oldest);
        self.update_throughput(s);
    }

    /// Entries that pass `filter`, newest first (the top of the Log view is now).
    pub fn rows(&self, filter: &Filter) -> Vec<&Transition> {
        self.log.iter().rev().filter(|t| filter.matches_log(t)).collect()
    }

    /// Jobs finished per minute per queue, from the trigger-kept counts of two refreshes at
    /// least [`THROUGHPUT_SPAN_MS`] apart: no log scan.
    fn update_throughput(&mut self, s: &Snapshot) {
        let finished: BTreeMap<String, u64> = s
            .counts
            .by_queue
            .iter()
            .map(|(q, m)| (q.clone(), m.iter().filter(|(st, _)| st.is_terminal()).map(|(_, n)| *n).sum()))
            .collect();
        match &self.throughput_base {
            Some((at, base)) if s.at - at >= THROUGHPUT_SPAN_MS => {
                let minutes = (s.at - at) as f64 / 60_000.0;
                self.throughput = finished
                    .iter()
                    .map(|(q, n)| (q.clone(), n.saturating_sub(base.get(q).copied().unwrap_or(0)) as f64 / minutes))
                    .collect();
                self.throughput_base = Some((s.at, finished));
            }
            Some(_) => {}
            None => self.throughput_base = Some((s.at, finished)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backwave::{DetailStatus, JobState};

    fn entry(seq: i64, at: Millis, to: JobState) -> Transition {
        Transition {
            seq,
            xid: 0,
            job_id: JobId::new(),
            at,
            from: Some(JobState::Running),
            to,
            attempt: 1,
            worker_id: None,
            actor: None,
            reason: None,
            detail: DetailStatus::None,
        }
    }

    fn snapshot(at: Millis, log: Vec<Transition>) -> Snapshot {
        Snapshot { at, log, ..Default::default() }
    }

    fn finished(at: Millis, queue: &str, n: u64) -> Snapshot {
        let mut s = snapshot(at, Vec::new());
        s.counts.by_queue.entry(queue.to_string()).or_default().insert(JobState::Succeeded, n);
        s
    }

    const AT: Millis = 1_796_040_000_000;

    #[test]
    fn new_entries_extend_the_tail_and_move_the_cursor() {
        let mut feed = Feed::default();
        feed.absorb(&mut snapshot(AT, vec![entry(1, AT, JobState::Succeeded), entry(2, AT, JobState::Succeeded)]));
        feed.absorb(&mut snapshot(AT + 1_000, vec![entry(3, AT + 1_000, JobState::DeadLettered)]));
        assert_eq!(feed.log.iter().map(|t| t.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(feed.log_cursor.map(|c| c.seq), Some(3));
        // A refresh with nothing new keeps the cursor where it was.
        feed.absorb(&mut snapshot(AT + 2_000, Vec::new()));
        assert_eq!(feed.log_cursor.map(|c| c.seq), Some(3));
    }

    #[test]
    fn a_reset_replaces_the_tail_instead_of_appending() {
        let mut feed = Feed::default();
        feed.absorb(&mut snapshot(AT, vec![entry(1, AT, JobState::Succeeded)]));
        let mut s = snapshot(AT, vec![entry(9_000, AT, JobState::Succeeded)]);
        s.log_reset = true;
        feed.absorb(&mut s);
        assert_eq!(feed.log.iter().map(|t| t.seq).collect::<Vec<_>>(), [9_000]);
    }

    #[test]
    fn the_tail_keeps_only_the_newest_entries() {
        let mut feed = Feed::default();
        let log: Vec<Transition> = (0..LOG_KEEP as i64 + 5).map(|i| entry(i, AT, JobState::Succeeded)).collect();
        feed.absorb(&mut snapshot(AT, log));
        assert_eq!(feed.log.len(), LOG_KEEP);
        assert_eq!(feed.log.front().map(|t| t.seq), Some(5), "the oldest five went");
    }

    #[test]
    fn rows_are_newest_first_and_filtered() {
        let mut feed = Feed::default();
        feed.absorb(&mut snapshot(AT, vec![entry(1, AT, JobState::Succeeded), entry(2, AT, JobState::DeadLettered)]));
        let all = Filter::default();
        assert_eq!(feed.rows(&all).iter().map(|t| t.seq).collect::<Vec<_>>(), [2, 1]);
        let one = feed.log[0].job_id;
        let only = Filter::parse(&format!("{one}"), AT).expect("an id filters the log");
        assert_eq!(feed.rows(&only).iter().map(|t| t.seq).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn chart_counts_add_up_per_minute_and_drop_out_after_the_hour() {
        let mut feed = Feed::default();
        let minute = AT.div_euclid(60_000);
        let mut s = snapshot(AT, Vec::new());
        s.chart.insert(minute, (2, 1));
        s.chart.insert(minute - CHART_MINUTES, (7, 7));
        s.chart_cursor = Some(entry(4, AT, JobState::Succeeded).cursor());
        feed.absorb(&mut s);
        let mut s = snapshot(AT, Vec::new());
        s.chart.insert(minute, (1, 0));
        // A refresh that did not read the chart leaves its cursor where it was.
        feed.absorb(&mut s);
        assert_eq!(feed.chart.get(&minute), Some(&(3, 1)));
        assert!(!feed.chart.contains_key(&(minute - CHART_MINUTES)), "older than the hour");
        assert_eq!(feed.chart_cursor.map(|c| c.seq), Some(4));
    }

    #[test]
    fn throughput_needs_two_refreshes_ten_seconds_apart() {
        let mut feed = Feed::default();
        feed.absorb(&mut finished(AT, "high", 100));
        assert!(feed.throughput.is_empty(), "one refresh is no rate");
        feed.absorb(&mut finished(AT + 5_000, "high", 150));
        assert!(feed.throughput.is_empty(), "5 s is too short a span");
        feed.absorb(&mut finished(AT + 30_000, "high", 130));
        assert_eq!(feed.throughput.get("high"), Some(&60.0), "30 jobs in half a minute");
        // Counts that went down (a purge) read as none finished, not as a negative rate.
        feed.absorb(&mut finished(AT + 90_000, "high", 10));
        assert_eq!(feed.throughput.get("high"), Some(&0.0));
    }

    #[test]
    fn wire_names_are_taken_from_the_snapshot() {
        let mut feed = Feed::default();
        let id = JobId::new();
        let mut s = snapshot(AT, Vec::new());
        s.wire_names.insert(id, "send-email".into());
        feed.absorb(&mut s);
        assert!(s.wire_names.is_empty());
        assert_eq!(feed.wire_names.get(&id).map(String::as_str), Some("send-email"));
    }
}
