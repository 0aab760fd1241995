//! What an operator types, read the same way by `bw` flags and `bw top`'s `/` filter: durations
//! (`90s`, `2h`, `14d`), instants (RFC 3339 or epoch milliseconds), `--before` (either), labels
//! and states. Every error is one line that quotes the input and says what is accepted.

use std::time::Duration;

use backwave::{JobState, Millis};

/// humantime durations everywhere: `90s`, `2h`, `14d`; at most 1000 years
/// ([`backwave::model::parse_duration`], the library's one rule).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    backwave::model::parse_duration(s).map_err(|e| e.to_string())
}

/// `--busy-timeout`: a duration the store can wait, at most [`backwave::store::MAX_BUSY_TIMEOUT`].
pub fn parse_busy_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    match d <= backwave::store::MAX_BUSY_TIMEOUT {
        true => Ok(d),
        false => Err(format!("'{s}' is too long a wait: at most 24 days")),
    }
}

/// An instant: RFC 3339 (`2026-11-30T14:02:12Z`) or milliseconds since the Unix epoch.
pub fn parse_instant(s: &str) -> Result<Millis, String> {
    if let Ok(ms) = s.trim().parse::<Millis>() {
        return Ok(ms);
    }
    humantime::parse_rfc3339_weak(s.trim())
        .map(|t| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0))
        .map_err(|_| format!("'{s}' is not a time: use RFC 3339 (2026-11-30T14:02:12Z) or epoch milliseconds"))
}

/// `--state` values: the command-line spelling (`dead-lettered`), with the accepted list in the error.
pub fn parse_state(s: &str) -> Result<JobState, String> {
    s.parse::<JobState>().map_err(|e| {
        let names = JobState::ALL.map(|s| s.as_str());
        let meant = super::state_alias(s).or_else(|| super::did_you_mean(s, names));
        match meant {
            Some(m) => format!("unknown state '{s}': did you mean '{m}'? (the states are {})", names.join(", ")),
            None => e.to_string(),
        }
    })
}

/// `--priority N`: 0 (claimed first within a queue) to 9 (claimed last), by the library's rule
/// ([`backwave::model::check_priority`]), quoting what was typed.
pub fn parse_priority(s: &str) -> Result<u8, String> {
    let n: i64 = s.trim().parse().map_err(|_| {
        format!("'{s}' is not a priority: use a whole number from 0 (claimed first) to 9 (claimed last)")
    })?;
    backwave::model::check_priority("the priority", n).map_err(|e| match e {
        backwave::Error::InvalidInput(m) => m,
        other => other.to_string(),
    })
}

/// `--cause TEXT`: not empty, which every cause contains (an unset shell variable would turn a
/// bulk action on one cause into one on every job its other filters match).
pub fn parse_cause(s: &str) -> Result<String, String> {
    match s.trim() {
        "" => Err(format!("--cause '{s}' is empty: give the text the causes to match contain")),
        _ => Ok(s.to_string()),
    }
}

/// `--label K=V`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not a label: use KEY=VALUE, e.g. tenant=acme")),
    }
}

/// `--before`: a duration back from now (`2h`) or an instant (RFC 3339, epoch ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Ago(Duration),
    At(Millis),
}

impl When {
    pub fn resolve(self, now: Millis) -> Millis {
        match self {
            When::Ago(d) => now - d.as_millis() as Millis,
            When::At(t) => t,
        }
    }
}

pub fn parse_when(s: &str) -> Result<When, String> {
    if humantime::parse_duration(s.trim()).is_ok() {
        return parse_duration(s).map(When::Ago);
    }
    parse_instant(s)
        .map(When::At)
        .map_err(|_| format!("'{s}' is neither a duration (90s, 2h, 14d) nor a time (2026-11-30T14:02:12Z, epoch ms)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_past_1000_years_is_refused_not_wrapped() {
        assert_eq!(parse_duration("14d"), Ok(Duration::from_secs(14 * 86_400)));
        let err = parse_duration("300000000y").unwrap_err();
        assert!(err.contains("'300000000y'") && err.contains("1000 years"), "{err}");
    }

    #[test]
    fn before_takes_a_duration_or_an_instant() {
        assert_eq!(parse_when("2h"), Ok(When::Ago(Duration::from_secs(7_200))));
        assert_eq!(parse_when("1764500000000"), Ok(When::At(1_764_500_000_000)));
        assert_eq!(When::Ago(Duration::from_secs(1)).resolve(5_000), 4_000);
        assert!(parse_when("yesterday-ish").unwrap_err().contains("'yesterday-ish'"));
    }
}
