//! Naming a job by a prefix of its id, or by the tail the short id tables show: the rules both
//! backends follow (each finds the candidate ids its own way, then calls these).

use crate::error::{Error, Result};
use crate::model::JobId;

/// The id that `text` names, from the ids its prefix and tail matched (sorted, at most six):
/// none is [`Error::JobNotFound`], several [`Error::AmbiguousId`] listing the first five.
pub(crate) fn one_id(text: &str, found: Vec<String>) -> Result<JobId> {
    match found.len() {
        0 => Err(Error::JobNotFound(text.to_string())),
        1 => found[0].parse(),
        n => {
            let mut candidates = found;
            if n > 5 {
                candidates.truncate(5);
                candidates.push("…".into());
            }
            Err(Error::AmbiguousId { prefix: text.to_string(), candidates })
        }
    }
}

/// The hex digits of a normalised prefix when they are few enough to be tried as the tail of
/// an id too (the short id tables show): a tail match scans the whole primary key.
pub(crate) fn id_tail(prefix: &str) -> Option<String> {
    let hex: String = prefix.chars().filter(|c| *c != '-').collect();
    (hex.len() <= 12).then_some(hex)
}

/// Whether `text` has the form of a job id or an id prefix ([`Store::resolve_id`] takes one:
/// hex digits, hyphens anywhere, 32 digits at most), read without any store: a tool can refuse a
/// malformed id before it opens one, or checks who may act.
///
/// [`Store::resolve_id`]: crate::Store::resolve_id
pub fn check_id_text(text: &str) -> Result<()> {
    normalize_prefix(text).map(|_| ())
}

/// Lower-case, hyphens where a UUID has them, hex only.
pub(crate) fn normalize_prefix(text: &str) -> Result<String> {
    let t = text.trim();
    let hex: String = t.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    if hex.is_empty() || hex.len() > 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::InvalidInput(format!(
            "'{text}' is not a job id or id prefix (expected hex digits, e.g. 0192f3a1 or a full UUID)"
        )));
    }
    let mut out = String::with_capacity(36);
    for (i, c) in hex.chars().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_normalise_to_uuid_layout() {
        assert_eq!(normalize_prefix("0192F3A1").unwrap(), "0192f3a1");
        assert_eq!(normalize_prefix("0192f3a17c2e").unwrap(), "0192f3a1-7c2e");
        assert_eq!(normalize_prefix("0192f3a1-7c2e-7b").unwrap(), "0192f3a1-7c2e-7b");
        let err = normalize_prefix("zz;drop").unwrap_err().to_string();
        assert!(err.contains("'zz;drop'"), "{err}");
        assert!(normalize_prefix("").is_err());
    }
}
