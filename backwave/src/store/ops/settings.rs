//! The store's settings as the policy reads them: one rule per setting over a one-method read
//! trait, so that a default or the meaning of a value is written once for both backends.

use crate::error::Result;
use crate::store::SettingKey;

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
