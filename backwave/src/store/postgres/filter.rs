//! PostgreSQL's spelling of the job filter that `store/filter.rs` describes once for both
//! backends: numbered parameters, `->>` on the jsonb labels, `strpos`, and no index of its own
//! to hint at.

use postgres::types::ToSql;

use crate::store::filter::{self, render, Arg, Dialect, Haystack, Index};
use crate::store::JobFilter;

pub(crate) struct Postgres;

impl Dialect for Postgres {
    const ALWAYS: &'static str = "true";

    fn placeholder(n: usize) -> String {
        format!("${n}")
    }

    fn label(key: &str, value: &str, bind: &mut dyn FnMut(Arg) -> String) -> String {
        let key = bind(Arg::Text(key.to_string()));
        format!("labels ->> {key} = {}", bind(Arg::Text(value.to_string())))
    }

    fn haystack(h: Haystack) -> &'static str {
        match h {
            Haystack::Cause => "terminal_cause",
            Haystack::Text => {
                "id::text || ' ' || wire_name || ' ' || queue || ' ' || labels::text || ' ' || \
                 coalesce(terminal_cause, '')"
            }
        }
    }

    fn contains(haystack: &str, needle: &str) -> String {
        // Under "C", `lower` folds ASCII letters only, as SQLite's does: the same jobs match
        // whatever locale the database was created with.
        format!("strpos(lower(({haystack}) COLLATE \"C\"), lower({needle}::text COLLATE \"C\")) > 0")
    }

    fn has(index: Index) -> bool {
        match index {
            // A PostgreSQL page reads listed columns from the heap, which keeps a large
            // payload out of line (TOAST): no covering index is needed.
            Index::FailedList => false,
        }
    }
}

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

impl From<filter::Where> for Where {
    /// The rendered values as the driver binds them.
    fn from(w: filter::Where) -> Self {
        let params = w
            .args
            .into_iter()
            .map(|a| -> Box<dyn ToSql + Sync> {
                match a {
                    Arg::Text(t) => Box::new(t),
                    Arg::Int(i) => Box::new(i),
                    Arg::Id(id) => Box::new(id.0),
                }
            })
            .collect();
        Where { sql: w.sql, params }
    }
}

/// The filter as a PostgreSQL condition, its parameters numbered from `first`.
pub(crate) fn where_clause(f: &JobFilter, first: usize) -> Where {
    render::<Postgres>(&f.predicates(), first).into()
}
