//! The `/` filter: `wire:` `queue:` `cause:` `since:` `workflow:` qualifiers and plain text, parsed into what
//! the store's [`JobFilter`] understands. A bad filter is a one-line error quoting the bad part;
//! it never panics and never half-applies.

use backwave::store::JobFilter;
use backwave::{Millis, Transition};

/// A parsed filter line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub wire: Option<String>,
    pub queue: Option<String>,
    pub cause: Option<String>,
    /// As typed (`1h`, or an instant), and the instant it means.
    pub since: Option<(String, Millis)>,
    /// Plain words, joined by one space.
    pub text: Option<String>,
    /// Set when a group is opened (never typed): its exact cause fingerprint or quarantine
    /// reason.
    pub fingerprint: Option<String>,
    pub reason: Option<backwave::QuarantineReason>,
    /// `workflow:ID`: the jobs of one workflow (set when the Workflows view opens one).
    pub workflow: Option<backwave::WorkflowId>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// The filter of an opened group.
    pub fn is_group(&self) -> bool {
        self.fingerprint.is_some() || self.reason.is_some()
    }

    /// Parse `input` at time `now` (for `since:1h`).
    pub fn parse(input: &str, now: Millis) -> Result<Filter, String> {
        let mut f = Filter::default();
        let mut words = Vec::new();
        for token in tokens(input)? {
            let Some((key, value)) = token.split_once(':').filter(|(k, _)| is_qualifier_like(k)) else {
                words.push(token);
                continue;
            };
            if value.is_empty() {
                return Err(format!("'{token}' has no value: write e.g. {key}:something"));
            }
            let slot = match key.to_ascii_lowercase().as_str() {
                "wire" => &mut f.wire,
                "queue" => &mut f.queue,
                "cause" => &mut f.cause,
                "workflow" => {
                    let id = value.parse().map_err(|_| format!("'{value}' in workflow: is not a workflow id"))?;
                    f.workflow = Some(id);
                    continue;
                }
                "since" => {
                    let refused =
                        || format!("'{value}' in since: is neither a duration (30m, 2h, 3d) nor a time (RFC 3339)");
                    let at = match crate::text::parse_duration(value) {
                        Ok(d) => now - d.as_millis() as Millis,
                        // A bare number is a duration without its unit (`since:5`), not an
                        // instant in 1970 that matches every job.
                        Err(_) if value.trim().chars().all(|c| c.is_ascii_digit()) => return Err(refused()),
                        Err(_) => crate::text::parse_instant(value).map_err(|_| refused())?,
                    };
                    f.since = Some((value.to_string(), at));
                    continue;
                }
                _ => {
                    return Err(format!(
                        "unknown qualifier '{key}:' in '{token}': use wire:, queue:, cause:, since:, workflow: or plain text"
                    ))
                }
            };
            *slot = Some(value.to_string());
        }
        if !words.is_empty() {
            f.text = Some(words.join(" "));
        }
        Ok(f)
    }

    /// The store filter for a job list of `state`. Plain text matches any of the job's id,
    /// wire name, queue, labels and terminal cause (the store's [`JobFilter::text`]).
    pub fn job_filter(&self, state: backwave::JobState) -> JobFilter {
        let mut jf = JobFilter::state(state);
        jf.wire_name = self.wire.clone();
        jf.queue = self.queue.clone();
        jf.cause = self.cause.clone();
        jf.since = self.since.as_ref().map(|(_, at)| *at);
        jf.fingerprint = self.fingerprint.clone();
        jf.quarantine_reason = self.reason;
        jf.text = self.text.clone();
        jf.workflow = self.workflow;
        jf
    }

    /// The Log view filters the entries it holds: `cause:` and plain text match any text of
    /// the entry (job id, states, worker, actor, reason); `since:` its time. Wire name and queue
    /// are not in the log: those qualifiers are refused by [`Filter::check_log`].
    pub fn matches_log(&self, t: &Transition) -> bool {
        if let Some((_, at)) = &self.since {
            if t.at < *at {
                return false;
            }
        }
        let hay = || {
            format!(
                "{} {} {} {} {} {}",
                t.job_id,
                t.from.map(|s| s.as_str()).unwrap_or(""),
                t.to.as_str(),
                t.worker_id.as_deref().unwrap_or(""),
                t.actor.as_deref().unwrap_or(""),
                t.reason.as_deref().unwrap_or("")
            )
            .to_lowercase()
        };
        [&self.text, &self.cause].into_iter().flatten().all(|needle| hay().contains(&needle.to_lowercase()))
    }

    pub fn check_log(&self) -> Result<(), String> {
        if self.wire.is_some() || self.queue.is_some() || self.workflow.is_some() {
            return Err("the Log view holds transitions only: filter it by cause:, since: or plain text".into());
        }
        Ok(())
    }
}

/// A token that looks like `key:value`, as opposed to text that merely contains a colon
/// (`12:30`, `http://`): the key is a word of letters.
fn is_qualifier_like(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic())
}

/// Split on spaces, keeping double-quoted runs together: `cause:"gateway timeout"`.
fn tokens(input: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in input.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if quoted {
        return Err(format!("unclosed quote in '{input}'"));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backwave::JobState;

    #[test]
    fn qualifiers_and_text_parse() {
        let f =
            Filter::parse("wire:charge-card queue:high cause:\"gateway timeout\" since:1h oops", 7_200_000).unwrap();
        assert_eq!(f.wire.as_deref(), Some("charge-card"));
        assert_eq!(f.queue.as_deref(), Some("high"));
        assert_eq!(f.cause.as_deref(), Some("gateway timeout"));
        assert_eq!(f.since, Some(("1h".into(), 3_600_000)));
        assert_eq!(f.text.as_deref(), Some("oops"));
    }

    #[test]
    fn bad_filters_are_one_line_errors_quoting_the_value() {
        let e = Filter::parse("colour:red", 0).unwrap_err();
        assert!(e.contains("'colour:'"), "{e}");
        let e = Filter::parse("since:yesterdayish", 0).unwrap_err();
        assert!(e.contains("'yesterdayish'"), "{e}");
        // A number without its unit matched every job (epoch milliseconds, 1970), while `bw jobs
        // list --since 5` refuses it.
        let e = Filter::parse("since:5 wire:flaky", 1_800_000_000_000).unwrap_err();
        assert!(e.contains("'5' in since: is neither a duration"), "{e}");
        let at = Filter::parse("since:2026-11-30T12:00:00Z", 0).unwrap().since.unwrap().1;
        assert_eq!(at, 1_796_040_000_000);
        let e = Filter::parse("wire:", 0).unwrap_err();
        assert!(e.contains("'wire:'"), "{e}");
        assert!(Filter::parse("cause:\"open", 0).unwrap_err().contains("unclosed"));
        // Text with a colon that is not a qualifier is plain text.
        assert_eq!(Filter::parse("12:30", 0).unwrap().text.as_deref(), Some("12:30"));
    }

    #[test]
    fn plain_text_is_matched_against_any_field() {
        let f = Filter::parse("high wire:charge-card", 0).unwrap();
        let jf = f.job_filter(JobState::DeadLettered);
        assert_eq!(jf.text.as_deref(), Some("high"));
        assert_eq!(jf.wire_name.as_deref(), Some("charge-card"));
        assert_eq!((jf.queue, jf.cause), (None, None));
    }
}
