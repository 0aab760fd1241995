//! Unique jobs, decided once above the two SQL dialects: a [`UniqueRule`] checked and turned into
//! the three columns the `jobs_unique` index enforces (key, state mask, window), and the SQL both
//! backends share to name the job that holds a key. The index is the only enforcement: nothing
//! here locks or reads before a write.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::{validate_name, JobId, Millis, NewJob, UniqueBy, UniqueRule};

/// What the `jobs_unique` index compares: the rule's key, its state mask, and the start of its
/// period window (0 without a period).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UniqueColumns {
    pub key: String,
    pub states: i64,
    pub window: i64,
}

/// Refuse a rule the store could not keep, before anything is written: a key that is empty or
/// holds control characters, a state set without Scheduled and Running (a claim or a retry
/// moves a job between them without an insert, so a rule that left one out would be broken by
/// the engine, not by an enqueue), or a period of zero.
pub fn validate(rule: &UniqueRule) -> Result<()> {
    if let UniqueBy::Key(key) = &rule.by {
        validate_name("unique key", key)?;
    }
    for needed in UniqueRule::DEFAULT_STATES {
        if !rule.states.contains(&needed) {
            let given: Vec<&str> = rule.states.iter().map(|s| s.as_str()).collect();
            return Err(Error::InvalidInput(format!(
                "unique states '{}' leave out {}: a unique job holds its key while scheduled and running \
                 (add terminal states to keep it longer)",
                given.join(","),
                needed.as_str()
            )));
        }
    }
    if let Some(p) = rule.period.filter(|p| p.as_millis() == 0) {
        return Err(Error::InvalidInput(format!(
            "the unique period '{}' is shorter than 1ms",
            humantime::format_duration(p)
        )));
    }
    Ok(())
}

/// [`validate`] for the rule of each job that has one.
pub(crate) fn validate_all(jobs: &[NewJob]) -> Result<()> {
    jobs.iter().filter_map(|j| j.unique.as_ref()).try_for_each(validate)
}

/// The columns of `job` enqueued at `now` (None for a job without a rule). Call [`validate`] first.
pub(crate) fn columns(job: &NewJob, now: Millis) -> Option<UniqueColumns> {
    let rule = job.unique.as_ref()?;
    let key = match &rule.by {
        UniqueBy::Key(key) => key.clone(),
        UniqueBy::Payload => payload_key(&job.wire_name, &job.payload),
    };
    let window = match rule.period {
        Some(p) => {
            let ms = Millis::try_from(p.as_millis()).unwrap_or(Millis::MAX).max(1);
            now - now.rem_euclid(ms)
        }
        None => 0,
    };
    Some(UniqueColumns { key, states: rule.state_bits(), window })
}

/// The key of a rule by payload: `<wire name>:<sha256 of the payload, hex>`. A repaired payload
/// gets the key recomputed (see [`edited_key`]).
pub(crate) fn payload_key(wire_name: &str, payload: &[u8]) -> String {
    let digest = Sha256::digest(payload);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{wire_name}:{hex}")
}

/// The key a job keeps after its payload changes from `old` to `new`: a key made from the old
/// payload follows the payload, an explicit key stays as it is.
pub(crate) fn edited_key(key: &str, wire_name: &str, old: &[u8], new: &[u8]) -> Option<String> {
    (key == payload_key(wire_name, old)).then(|| payload_key(wire_name, new))
}

/// Whether the job `alias` holds its key in its present state: the `jobs_unique` index's own
/// predicate, written the same way so that each dialect's planner answers it from that index.
/// The same text on SQLite and PostgreSQL.
pub(crate) fn holds(alias: &str) -> String {
    format!(
        "{alias}.unique_key IS NOT NULL AND ({alias}.unique_states & (CASE {alias}.state \
         WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8 \
         WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0"
    )
}

/// The id of the job other than `?1`/`$1` that holds the key of job `?1`/`$1`: `param` is the
/// dialect's placeholder for that id.
pub(crate) fn holder_of_sql(param: &str) -> String {
    format!(
        "SELECT h.id FROM jobs j JOIN jobs h ON h.unique_key = j.unique_key AND h.unique_window = j.unique_window
         WHERE j.id = {param} AND h.id <> j.id AND {}",
        holds("h")
    )
}

/// The id of the job holding `(key, window)` given as two placeholders.
pub(crate) fn holder_sql(key: &str, window: &str) -> String {
    format!("SELECT h.id FROM jobs h WHERE h.unique_key = {key} AND h.unique_window = {window} AND {}", holds("h"))
}

/// How many of the jobs `scope` (a WHERE clause over `jobs`) matches a bulk requeue would leave
/// as they are because of their unique key: all of a key's jobs when a job outside the scope
/// holds it, else all but the first one requeued. Exact for the moment it is counted.
pub(crate) fn conflicts_sql(scope: &str) -> String {
    format!(
        "WITH s AS MATERIALIZED (SELECT id, unique_key, unique_window FROM jobs WHERE ({scope}) AND unique_key IS NOT NULL),
              k AS (SELECT unique_key, unique_window, count(*) AS n FROM s GROUP BY unique_key, unique_window)
         SELECT CAST(coalesce(sum(CASE WHEN EXISTS (
                    SELECT 1 FROM jobs h WHERE h.unique_key = k.unique_key AND h.unique_window = k.unique_window
                    AND {} AND h.id NOT IN (SELECT id FROM s)) THEN n ELSE n - 1 END), 0) AS BIGINT)
         FROM k",
        holds("h")
    )
}

/// The error when a job that should hold a key is not found: only a program that rewrote the
/// key columns behind the library's back gets here.
pub(crate) fn holder_missing(what: &str) -> Error {
    Error::InvalidInput(format!("the unique key {what} is taken, but no job holding it was found; try again"))
}

/// A repaired payload whose key (a rule by payload, kept in the job's terminal state) another
/// job holds: the edit is refused whole.
pub(crate) fn edit_collides(id: JobId) -> Error {
    Error::InvalidInput(format!(
        "the new payload gives job {id} the unique key of another job that holds it; nothing changed"
    ))
}
