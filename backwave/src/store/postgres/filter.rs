//! [`JobFilter`] as a PostgreSQL `WHERE` clause: the same matches as SQLite's
//! (`JobFilter::where_clause` in `store/query.rs`), with numbered parameters.

use postgres::types::ToSql;

use crate::store::{JobFilter, SortOrder};

/// A clause and its parameters; the parameters are numbered from `first` (`$first`, …) so that a
/// caller can bind its own before them.
pub(crate) struct Where {
    pub sql: String,
    pub params: Vec<Box<dyn ToSql + Sync>>,
}

impl Where {
    /// The parameters as the driver takes them, after `before` (the caller's own, `$1`…).
    pub(crate) fn params<'a>(&'a self, before: &[&'a (dyn ToSql + Sync)]) -> Vec<&'a (dyn ToSql + Sync)> {
        before.iter().copied().chain(self.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync))).collect()
    }
}

pub(crate) fn where_clause(f: &JobFilter, first: usize) -> Where {
    let mut sql = vec!["true".to_string()];
    let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let next = |params: &mut Vec<Box<dyn ToSql + Sync>>, value: Box<dyn ToSql + Sync>| {
        params.push(value);
        format!("${}", first + params.len() - 1)
    };
    if !f.states.is_empty() {
        // Our own fixed spellings, as literals: the planner matches a partial index only
        // against predicates it can see.
        let names = f.states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
        sql.push(format!("state IN ({names})"));
        match f.order() {
            SortOrder::FinishedDesc => sql.push("finished_at IS NOT NULL".into()),
            SortOrder::DueAsc => sql.push("state IN ('scheduled', 'running')".into()),
            SortOrder::UpdatedDesc => {}
        }
    }
    for (col, v) in [
        ("queue", &f.queue),
        ("wire_name", &f.wire_name),
        ("cause_fingerprint", &f.fingerprint),
        ("quarantine_reason", &f.quarantine_reason.map(|q| q.as_str().to_string())),
    ] {
        if let Some(v) = v {
            let p = next(&mut params, Box::new(v.clone()));
            sql.push(format!("{col} = {p}"));
        }
    }
    for (k, v) in &f.labels {
        let key = next(&mut params, Box::new(k.clone()));
        let value = next(&mut params, Box::new(v.clone()));
        sql.push(format!("labels ->> {key} = {value}"));
    }
    if let Some(c) = &f.cause {
        let p = next(&mut params, Box::new(c.clone()));
        sql.push(format!("strpos(lower(terminal_cause), lower({p})) > 0"));
    }
    if let Some(t) = &f.text {
        let p = next(&mut params, Box::new(t.clone()));
        sql.push(format!(
            "strpos(lower(id::text || ' ' || wire_name || ' ' || queue || ' ' || labels::text || ' ' || \
             coalesce(terminal_cause, '')), lower({p})) > 0"
        ));
    }
    let time = match f.order() {
        SortOrder::FinishedDesc => "finished_at",
        _ => "created_at",
    };
    if let Some(t) = f.since {
        let p = next(&mut params, Box::new(t));
        sql.push(format!("{time} >= {p}"));
    }
    if let Some(t) = f.before {
        let p = next(&mut params, Box::new(t));
        sql.push(format!("{time} < {p}"));
    }
    if let Some(t) = f.finished_before {
        let p = next(&mut params, Box::new(t));
        sql.push(format!("finished_at < {p}"));
    }
    Where { sql: sql.join(" AND "), params }
}
