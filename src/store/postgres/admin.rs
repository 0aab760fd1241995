//! admin: not yet on PostgreSQL (stubs that answer an error).

#![allow(unused_imports)]

use std::collections::HashMap;
use std::time::Duration;

use super::PgStore;
use crate::error::Result;
use crate::model::*;
use crate::store::*;

impl PgStore {
    pub fn permissions(&self, _actor: &str) -> Result<Vec<Permission>> {
        Err(super::not_yet("permissions"))
    }

    pub fn grant(&self, _actor: &str, _who: &str, _permission: Permission) -> Result<()> {
        Err(super::not_yet("grant"))
    }

    pub fn revoke(&self, _actor: &str, _who: &str, _permission: Permission) -> Result<bool> {
        Err(super::not_yet("revoke"))
    }

    pub fn has_admin(&self) -> Result<bool> {
        Err(super::not_yet("has_admin"))
    }

    pub fn bootstrap_admin(&self, _actor: &str) -> Result<bool> {
        Err(super::not_yet("bootstrap_admin"))
    }

    pub fn setting(&self, _key: SettingKey) -> Result<String> {
        Err(super::not_yet("setting"))
    }

    pub fn set_setting(&self, _actor: &str, _key: SettingKey, _value: &str) -> Result<()> {
        Err(super::not_yet("set_setting"))
    }

    pub fn retention(&self) -> Result<std::time::Duration> {
        Err(super::not_yet("retention"))
    }

    pub fn failure_detail_enabled(&self) -> Result<bool> {
        Err(super::not_yet("failure_detail_enabled"))
    }

    pub fn mark_demo(&self) -> Result<()> {
        Err(super::not_yet("mark_demo"))
    }

    pub fn is_demo(&self) -> Result<bool> {
        Err(super::not_yet("is_demo"))
    }

    pub fn reveal_failure_detail(&self, _actor: &str, _job: JobId) -> Result<Vec<(i64, FailureDetail)>> {
        Err(super::not_yet("reveal_failure_detail"))
    }

    pub fn audit_entries(&self, _since: Millis, _limit: usize) -> Result<Vec<AuditEntry>> {
        Err(super::not_yet("audit_entries"))
    }
}
