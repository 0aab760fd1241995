//! "Did you mean …?": the known name closest to what an operator typed, when it is close
//! enough to be a typo. Used for queues, wire names, states and store files alike, so every
//! command suggests the same way.

/// The candidate `typed` most likely meant: one it is a prefix of (`dead` → `dead-lettered`),
/// or one within a small edit distance (transpositions count as one: `lwo` → `low`, `bluk` →
/// `bulk`), nearest first. None when nothing is close, or `typed` is itself a candidate.
pub fn did_you_mean<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let t = typed.trim().to_lowercase();
    if t.is_empty() {
        return None;
    }
    // About one edit in three characters, at least one: `critcal` → `critical`, but `low` is
    // not a typo of `high`.
    let budget = (t.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let lc = c.to_lowercase();
        if lc == t {
            return None;
        }
        let d = if t.chars().count() >= 3 && lc.starts_with(&t) { 1 } else { strsim::damerau_levenshtein(&t, &lc) };
        if d <= budget && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// What a filter's queue and wire name would tell an operator who typed one that nothing has
/// (`no job or worker has queue 'critcal'; did you mean 'critical'?`), one line each, sanitized;
/// none for names the store knows. `bw jobs list`, the bulk commands and `bw top`'s `/` filter
/// all say it this way. Reads the known names, so call it when a filter matched nothing.
pub fn unknown_filter_names(
    store: &backwave::Store,
    filter: &backwave::store::JobFilter,
) -> backwave::Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(q) = &filter.queue {
        out.extend(unknown_name(q, "queue", &store.queue_names()?));
    }
    if let Some(w) = &filter.wire_name {
        out.extend(unknown_name(w, "wire name", &store.known_wire_names()?));
    }
    if let Some(w) = &filter.workflow {
        if store.workflow(&w.to_string())?.is_none() {
            out.push(format!("no workflow has the id '{w}' (`bw workflows` lists them)"));
        }
    }
    Ok(out)
}

/// `no job or worker has {what} '{name}'; {hint}`, unless `name` is among `known`.
fn unknown_name(name: &str, what: &str, known: &[String]) -> Option<String> {
    use super::sanitize;
    if known.iter().any(|k| k == name) {
        return None;
    }
    let hint = match did_you_mean(name, known.iter().map(String::as_str)) {
        Some(m) => format!("did you mean '{}'?", sanitize(m)),
        None if known.is_empty() => "the store has no jobs yet".to_string(),
        None => format!(
            "known: {}{}",
            known.iter().take(8).map(|k| format!("'{}'", sanitize(k))).collect::<Vec<_>>().join(", "),
            if known.len() > 8 { ", …" } else { "" }
        ),
    };
    Some(format!("no job or worker has {what} '{}'; {hint}", sanitize(name)))
}

/// A state name as people say it, for the ones that are not our words: `failed` and `dead`
/// are Dead-Lettered, `done` is Succeeded, `queued` is Scheduled.
pub fn state_alias(typed: &str) -> Option<&'static str> {
    Some(match typed.trim().to_ascii_lowercase().as_str() {
        "failed" | "failure" | "failing" | "dead" | "dlq" | "dead-letter" | "error" | "errored" => "dead-lettered",
        "done" | "ok" | "success" | "successful" | "completed" | "complete" | "finished" => "succeeded",
        "queued" | "pending" | "waiting" | "ready" | "enqueued" | "retrying" | "retry" => "scheduled",
        "active" | "busy" | "in-progress" | "working" => "running",
        "canceled" => "cancelled",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_the_name_meant() {
        let queues = ["critical", "default", "low", "bulk"];
        assert_eq!(did_you_mean("critcal", queues), Some("critical"));
        assert_eq!(did_you_mean("lwo", queues), Some("low"));
        assert_eq!(did_you_mean("bluk", queues), Some("bulk"));
        assert_eq!(did_you_mean("flakey", ["flaky", "send-email"]), Some("flaky"));
        assert_eq!(did_you_mean("dead", ["scheduled", "dead-lettered"]), Some("dead-lettered"));
    }

    #[test]
    fn nothing_close_suggests_nothing() {
        assert_eq!(did_you_mean("payments", ["critical", "default", "low"]), None);
        assert_eq!(did_you_mean("low", ["low", "high"]), None);
        assert_eq!(did_you_mean("", ["low"]), None);
    }
}
