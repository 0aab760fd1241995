//! The store's settings as the policy reads them: the keys `bw config` may change, what each
//! value may be, and one rule per setting over a one-method read trait, so that a default or
//! the meaning of a value (the payload limit above all) is written once for both backends.

use crate::error::{Error, Result};
use crate::model::NewJob;

/// The store's settings, read with [`Store::setting`] and changed by an admin with
/// [`Store::set_setting`].
///
/// [`Store::setting`]: crate::Store::setting
/// [`Store::set_setting`]: crate::Store::set_setting
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingKey {
    /// `on` | `off`: capture failure detail at all.
    FailureDetail,
    /// A duration (`14d`): how long terminal jobs are kept.
    Retention,
    /// Bytes (`1MiB`, `262144`): the largest payload any enqueue or payload edit may store.
    PayloadLimit,
    /// Bytes (`32KiB`, `1MiB`): the largest output a handler may record; a larger one fails the
    /// attempt.
    OutputLimit,
}

/// The payload limit of a store whose settings name none: 1 MiB. Google Cloud Tasks takes 1 MB
/// a task (100 KB on App Engine queues), SQS 256 KiB a message, and Sidekiq's advice is ids,
/// not data. Larger data belongs in a file or object store the payload names.
pub const DEFAULT_PAYLOAD_LIMIT: u64 = 1 << 20;
/// The most `payload_limit` may be set to: the largest value either database stores (1 GB).
pub const MAX_PAYLOAD_LIMIT: u64 = 1_000_000_000;
/// The output limit of a store whose settings name none: 32 KiB, as Oban Pro's recorded output.
/// An output is a result to show and to hand to the jobs that depend on it; bulk data belongs
/// in a file or object store the output names.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 32 << 10;

impl SettingKey {
    /// Every setting.
    pub const ALL: [SettingKey; 4] =
        [SettingKey::FailureDetail, SettingKey::Retention, SettingKey::PayloadLimit, SettingKey::OutputLimit];

    /// The setting's name as stored: `failure_detail`, `retention`, `payload_limit`, `output_limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            SettingKey::FailureDetail => "failure_detail",
            SettingKey::Retention => "retention",
            SettingKey::PayloadLimit => "payload_limit",
            SettingKey::OutputLimit => "output_limit",
        }
    }

    /// The value a store that never set it has: `on`, `14d`, `1048576`, `32768`.
    pub fn default_value(self) -> &'static str {
        match self {
            SettingKey::FailureDetail => "on",
            SettingKey::Retention => "14d",
            SettingKey::PayloadLimit => "1048576",
            SettingKey::OutputLimit => "32768",
        }
    }

    /// The setting named `key` (`-` taken as `_`); any other name is [`Error::InvalidInput`].
    pub fn parse(key: &str) -> Result<Self> {
        let k = key.trim().replace('-', "_");
        SettingKey::ALL.into_iter().find(|s| s.as_str() == k).ok_or_else(|| {
            Error::InvalidInput(format!(
                "unknown setting '{key}': expected failure_detail, retention, payload_limit or output_limit"
            ))
        })
    }

    /// The value as stored, or an error naming what is wrong with it. Both backends.
    pub(crate) fn validate(self, value: &str) -> Result<String> {
        match self {
            SettingKey::FailureDetail => match value.trim() {
                "on" | "off" => Ok(value.trim().to_string()),
                _ => Err(Error::InvalidInput(format!("failure_detail is 'on' or 'off', not '{value}'"))),
            },
            SettingKey::Retention => match crate::model::parse_duration(value) {
                Ok(_) => Ok(value.trim().to_string()),
                Err(e) => Err(Error::InvalidInput(format!("retention: {e}"))),
            },
            // Stored as plain bytes: the schema's triggers read the same row.
            SettingKey::PayloadLimit => match parse_size(value) {
                Some(n) if (1..=MAX_PAYLOAD_LIMIT).contains(&n) => Ok(n.to_string()),
                _ => Err(Error::InvalidInput(format!(
                    "payload_limit is a size from 1 byte to 1GB (e.g. 1MiB, 256KiB, 65536), not '{value}'"
                ))),
            },
            SettingKey::OutputLimit => match parse_size(value) {
                Some(n) if (1..=MAX_PAYLOAD_LIMIT).contains(&n) => Ok(n.to_string()),
                _ => Err(Error::InvalidInput(format!(
                    "output_limit is a size from 1 byte to 1GB (e.g. 32KiB, 1MiB, 65536), not '{value}'"
                ))),
            },
        }
    }
}

/// A size in bytes: digits with an optional unit, `B`, `KiB`, `MiB`, `GiB` (powers of 1024) or
/// `KB`, `MB`, `GB` (powers of 1000), case-insensitive, a space allowed before the unit.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits].parse().ok()?;
    let factor: u64 = match t[digits..].trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

/// The payload limit from the stored setting (`None`: not set, the default): plain bytes, as
/// `validate` stores it and the schema's triggers read it. A value another program wrote that is
/// not is an error naming it, never a silent default. Both backends.
pub(crate) fn payload_limit_from(stored: Option<&str>) -> Result<u64> {
    match stored {
        None => Ok(DEFAULT_PAYLOAD_LIMIT),
        Some(text) => text.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::InvalidInput(format!("the store's payload_limit setting '{text}' is not a number of bytes"))
        }),
    }
}

/// Refuse a payload of `bytes` over `limit`, naming both. A payload edit of either backend calls
/// this in the transaction that writes it; enqueues call [`check_new_payloads`].
pub(crate) fn check_payload_size(bytes: usize, limit: u64, job: Option<usize>) -> Result<()> {
    if bytes as u64 > limit {
        return Err(Error::PayloadTooLarge { bytes: bytes as u64, limit, job });
    }
    Ok(())
}

/// Refuse a batch to enqueue if any payload is over `limit`, naming the first such job by its
/// place when the batch has several. Both backends, in the transaction that writes the batch.
pub(crate) fn check_new_payloads(jobs: &[NewJob], limit: u64) -> Result<()> {
    let many = jobs.len() > 1;
    for (i, job) in jobs.iter().enumerate() {
        check_payload_size(job.payload.len(), limit, many.then_some(i))?;
    }
    Ok(())
}

/// A setting as stored, per dialect: `None` when it was never set.
pub(crate) trait SettingRead {
    fn stored_setting(&mut self, key: SettingKey) -> Result<Option<String>>;
}

/// A setting's value, its default when it was never set.
pub(crate) fn setting(read: &mut (impl SettingRead + ?Sized), key: SettingKey) -> Result<String> {
    Ok(read.stored_setting(key)?.unwrap_or_else(|| key.default_value().to_string()))
}

/// Whether failure detail is captured (and may be revealed): on unless the setting says `off`.
pub(crate) fn detail_enabled(read: &mut (impl SettingRead + ?Sized)) -> Result<bool> {
    Ok(setting(read, SettingKey::FailureDetail)? != "off")
}

/// The store's payload limit, read inside the caller's transaction.
pub(crate) fn payload_limit(read: &mut (impl SettingRead + ?Sized)) -> Result<u64> {
    payload_limit_from(read.stored_setting(SettingKey::PayloadLimit)?.as_deref())
}

/// The store's output limit, read inside the caller's transaction: plain bytes, as `validate`
/// stores it; a value another program wrote that is not is an error naming it.
pub(crate) fn output_limit(read: &mut (impl SettingRead + ?Sized)) -> Result<u64> {
    match read.stored_setting(SettingKey::OutputLimit)? {
        None => Ok(DEFAULT_OUTPUT_LIMIT),
        Some(text) => text.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::InvalidInput(format!("the store's output_limit setting '{text}' is not a number of bytes"))
        }),
    }
}

/// The retention setting's text as a duration; a value another program wrote that is not one
/// is an error naming it. Both backends.
pub(crate) fn parse_retention(text: &str) -> Result<std::time::Duration> {
    humantime::parse_duration(text.trim())
        .map_err(|e| Error::InvalidInput(format!("the store's retention setting '{text}' is not a duration ({e})")))
}
