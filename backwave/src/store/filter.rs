//! The job filter written once for both SQL dialects: [`JobFilter`] becomes a list of typed
//! [`Predicate`]s and a [`SortOrder`] (with its keyset [`Cursor`]); a [`Dialect`] only renders
//! them (placeholders, its substring and JSON functions, which indexes it has). No SQL runs here.

use crate::error::{Error, Result};
use crate::model::{Job, JobId, JobState, Millis, QuarantineReason};

/// Which jobs a list, a count or a bulk action covers. Empty fields match everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobFilter {
    /// Jobs in any of these states.
    pub states: Vec<JobState>,
    /// Jobs of this queue (exact name).
    pub queue: Option<String>,
    /// Jobs of this wire name (exact name).
    pub wire_name: Option<String>,
    /// Every pair must match.
    pub labels: Vec<(String, String)>,
    /// Case-insensitive (ASCII letters) substring of the terminal cause.
    pub cause: Option<String>,
    /// Case-insensitive (ASCII letters) substring of any of: id, wire name, queue, labels,
    /// terminal cause.
    pub text: Option<String>,
    /// Exact cause fingerprint (a dead-letter group).
    pub fingerprint: Option<String>,
    /// Quarantined jobs for this reason.
    pub quarantine_reason: Option<QuarantineReason>,
    /// Jobs whose reference time (finished for terminal jobs, created otherwise) is at or after.
    pub since: Option<Millis>,
    /// … and strictly before.
    pub before: Option<Millis>,
    /// Terminal jobs that finished strictly before this (bulk actions fix their set this way).
    pub finished_before: Option<Millis>,
    /// Jobs of this workflow ([`Workflow`](crate::Workflow)).
    pub workflow: Option<crate::WorkflowId>,
}

impl JobFilter {
    /// Every job in one state, e.g. `JobFilter::state(JobState::DeadLettered)`.
    pub fn state(state: JobState) -> Self {
        JobFilter { states: vec![state], ..Default::default() }
    }

    /// The one state and the partial index of a filter that names one failure group: a
    /// dead-letter cause (`jobs_dead_causes`) or a quarantine reason (`jobs_quarantine`) of one
    /// wire name. Their index ranges hold the group's jobs in `finished_at` order.
    pub(crate) fn failure_group(&self) -> Option<(JobState, &'static str)> {
        let index = self.failed_name_index()?;
        match (self.states.as_slice(), &self.fingerprint, &self.quarantine_reason) {
            ([JobState::DeadLettered], Some(_), _) | ([JobState::Quarantined], _, Some(_)) => {
                Some((self.states[0], index))
            }
            _ => None,
        }
    }

    /// The partial index over one failed state that leads with the wire name, for a filter of
    /// that state and one wire name: its range holds exactly the name's jobs in that state (in
    /// `finished_at` order only within one cause or reason).
    pub(crate) fn failed_name_index(&self) -> Option<&'static str> {
        match (self.states.as_slice(), &self.wire_name) {
            ([JobState::DeadLettered], Some(_)) => Some("jobs_dead_causes"),
            ([JobState::Quarantined], Some(_)) => Some("jobs_quarantine"),
            _ => None,
        }
    }

    /// The order a listing of this filter follows.
    pub fn order(&self) -> SortOrder {
        if !self.states.is_empty() && self.states.iter().all(|s| s.is_terminal()) {
            SortOrder::FinishedDesc
        } else if !self.states.is_empty() && self.states.iter().all(|s| !s.is_terminal()) {
            SortOrder::DueAsc
        } else {
            SortOrder::UpdatedDesc
        }
    }

    /// What the filter matches, as predicates every one of which a job must meet. The one
    /// place that reads the filter's fields: the destructuring names every field, so a new one
    /// does not compile until it is matched here (and so on both backends).
    pub(crate) fn predicates(&self) -> Vec<Predicate> {
        let JobFilter {
            states,
            queue,
            wire_name,
            labels,
            cause,
            text,
            fingerprint,
            quarantine_reason,
            since,
            before,
            finished_before,
            workflow,
        } = self;
        let order = self.order();
        let mut out = Vec::new();
        if !states.is_empty() {
            out.push(Predicate::StateIn(states.clone()));
            match order {
                // Implied by a terminal state; spelled out so jobs_finished (a partial index on
                // finished_at IS NOT NULL) is usable.
                SortOrder::FinishedDesc => {
                    out.push(Predicate::NotNull(Column::FinishedAt));
                    if states.iter().all(|s| matches!(s, JobState::DeadLettered | JobState::Quarantined)) {
                        out.push(Predicate::ForIndex(
                            Index::FailedList,
                            Box::new(Predicate::StateIn(vec![JobState::DeadLettered, JobState::Quarantined])),
                        ));
                    }
                }
                // Implied by an active state; spelled out so jobs_active (a partial index on
                // state IN ('scheduled', 'running')) is usable: without it the Running and
                // Scheduled listings scanned every job (500 ms at 1M jobs).
                // (Not with Waiting, which that index leaves out.)
                SortOrder::DueAsc => {
                    if states.iter().all(|s| matches!(s, JobState::Scheduled | JobState::Running)) {
                        out.push(Predicate::StateIn(vec![JobState::Scheduled, JobState::Running]));
                    }
                }
                SortOrder::UpdatedDesc => {}
            }
        }
        let text_eq = |col: Column, v: &Option<String>| v.as_ref().map(|v| Predicate::Eq(col, Arg::Text(v.clone())));
        out.extend(text_eq(Column::Queue, queue));
        out.extend(text_eq(Column::WireName, wire_name));
        // A uuid on both sides: bound as a job id is (text on SQLite, uuid on PostgreSQL).
        out.extend(workflow.map(|w| Predicate::Eq(Column::WorkflowId, Arg::Id(JobId(w.0)))));
        out.extend(text_eq(Column::CauseFingerprint, fingerprint));
        out.extend(text_eq(Column::QuarantineReason, &quarantine_reason.map(|q| q.as_str().to_string())));
        out.extend(labels.iter().map(|(key, value)| Predicate::Label { key: key.clone(), value: value.clone() }));
        if let Some(c) = cause {
            out.push(Predicate::Contains(Haystack::Cause, c.clone()));
        }
        if let Some(t) = text {
            out.push(Predicate::Contains(Haystack::Text, t.clone()));
        }
        let time = match order {
            SortOrder::FinishedDesc => Column::FinishedAt,
            _ => Column::CreatedAt,
        };
        out.extend(since.map(|t| Predicate::Cmp(time, Cmp::AtOrAfter, t)));
        out.extend(before.map(|t| Predicate::Cmp(time, Cmp::Before, t)));
        out.extend(finished_before.map(|t| Predicate::Cmp(Column::FinishedAt, Cmp::Before, t)));
        out
    }
}

/// How a listing is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortOrder {
    /// Terminal jobs: the most recently finished first.
    FinishedDesc,
    /// Scheduled and running jobs: the next due first.
    DueAsc,
    /// Mixed states: the most recently changed first.
    UpdatedDesc,
}

impl SortOrder {
    pub(crate) fn column(self) -> &'static str {
        self.key().name()
    }

    fn key(self) -> Column {
        match self {
            SortOrder::FinishedDesc => Column::FinishedAt,
            SortOrder::DueAsc => Column::DueAt,
            SortOrder::UpdatedDesc => Column::UpdatedAt,
        }
    }

    pub(crate) fn descending(self) -> bool {
        !matches!(self, SortOrder::DueAsc)
    }

    /// The rows after `cursor` in this order (ties broken by id, as [`SortOrder::order_by`]).
    pub(crate) fn after(self, cursor: &Cursor) -> Predicate {
        Predicate::After { key: self.key(), descending: self.descending(), cursor: cursor.clone() }
    }

    /// `ORDER BY …` for this order, the id breaking ties so that a cursor is exact.
    pub(crate) fn order_by(self) -> String {
        let dir = if self.descending() { "DESC" } else { "ASC" };
        format!("ORDER BY {} {dir}, id {dir}", self.column())
    }
}

/// The sort key of `job` in a listing ordered by `order`: what a [`Cursor`] holds.
pub(crate) fn sort_key(job: &Job, order: SortOrder) -> Millis {
    match order {
        SortOrder::FinishedDesc => job.finished_at.unwrap_or(0),
        SortOrder::DueAsc => job.due_at,
        SortOrder::UpdatedDesc => job.updated_at,
    }
}

/// Where the next page starts: the sort key and id of the last row shown. Printed as
/// `<key>.<id>`, it survives new jobs arriving between pages (unlike an offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The last row's sort key (the time its [`SortOrder`] orders by).
    pub key: Millis,
    /// The last row's id, which breaks ties between equal keys.
    pub id: JobId,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.key, self.id)
    }
}

impl std::str::FromStr for Cursor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad =
            || Error::InvalidInput(format!("'{s}' is not a page cursor (copy it from the footer of a previous page)"));
        let (key, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(Cursor { key: key.parse().map_err(|_| bad())?, id: id.parse().map_err(|_| bad())? })
    }
}

/// The statement that reads one page of `filter`'s jobs (`columns` of them), from `offset` or
/// after `after`, in `D`'s SQL, with its values: one row more than `limit`, to know whether
/// another page follows ([`page_of`]). LIMIT and OFFSET are literals: numbers we computed,
/// clamped because neither dialect reads an integer past i64::MAX (`usize::MAX` means "all").
pub(crate) fn page_statement<D: Dialect>(
    filter: &JobFilter,
    columns: &str,
    limit: usize,
    offset: Option<u64>,
    after: Option<&Cursor>,
) -> Where {
    let order = filter.order();
    let mut predicates = filter.predicates();
    predicates.extend(after.map(|c| order.after(c)));
    let (limit, offset) = (limit.saturating_add(1).min(i64::MAX as usize), offset.unwrap_or(0).min(i64::MAX as u64));
    if let Some((state, group_index)) = filter.failure_group().filter(|_| D::has(Index::FailedList)) {
        // One failure group (a dead-letter cause or a quarantine reason of one wire name),
        // where the dialect has `jobs_failed_list`: the page's keys come from the group's own
        // index range (`jobs_dead_causes`, `jobs_quarantine`: already in `finished_at` order,
        // and only the id, the row's first column, is read from the table), and its columns
        // from `jobs_failed_list`, which holds them all. Read from `jobs_failed_list` alone, a
        // small group's page walked every failed job newest first (12-26 ms on 1,000,000 jobs,
        // on every refresh of `bw top`'s group view); from the group's index alone, it walked
        // each row's payload overflow pages to reach the columns after it (25 ms for 50 jobs
        // of 1 MiB).
        predicates.retain(|p| !matches!(p, Predicate::ForIndex(..)));
        let w = render::<D>(&predicates, 1);
        let outer = render::<D>(
            &[Predicate::StateIn(vec![state]), Predicate::StateIn(vec![JobState::DeadLettered, JobState::Quarantined])],
            1,
        );
        let order_by = order.order_by();
        let sql = format!(
            "SELECT {columns} FROM jobs INDEXED BY jobs_failed_list WHERE {} AND (finished_at, id) IN (
                 SELECT finished_at, id FROM jobs INDEXED BY {group_index} WHERE {} {order_by} LIMIT {limit} OFFSET {offset}
             ) {order_by}",
            outer.sql, w.sql
        );
        return Where { sql, args: w.args };
    }
    let w = render::<D>(&predicates, 1);
    let sql = format!("SELECT {columns} FROM jobs WHERE {} {} LIMIT {limit} OFFSET {offset}", w.sql, order.order_by());
    Where { sql, args: w.args }
}

/// A page from the rows a [`page_statement`] read: at most `limit` jobs, and the
/// cursor of the next page when there was one row more.
pub(crate) fn page_of(mut jobs: Vec<Job>, limit: usize, order: SortOrder) -> (Vec<Job>, Option<Cursor>) {
    let more = jobs.len() > limit;
    jobs.truncate(limit);
    let next = match (more, jobs.last()) {
        (true, Some(last)) => Some(Cursor { key: sort_key(last, order), id: last.id }),
        _ => None,
    };
    (jobs, next)
}

/// A column of `jobs` a predicate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Column {
    Queue,
    WireName,
    CauseFingerprint,
    QuarantineReason,
    WorkflowId,
    CreatedAt,
    DueAt,
    UpdatedAt,
    FinishedAt,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Queue => "queue",
            Column::WireName => "wire_name",
            Column::CauseFingerprint => "cause_fingerprint",
            Column::QuarantineReason => "quarantine_reason",
            Column::WorkflowId => "workflow_id",
            Column::CreatedAt => "created_at",
            Column::DueAt => "due_at",
            Column::UpdatedAt => "updated_at",
            Column::FinishedAt => "finished_at",
        }
    }
}

/// A value bound as a parameter (never written into the SQL text).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    Text(String),
    Int(i64),
    /// A job id: text on SQLite, a uuid on PostgreSQL.
    Id(JobId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    AtOrAfter,
    Before,
}

/// The text a case-insensitive substring match searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Haystack {
    /// The terminal cause.
    Cause,
    /// Id, wire name, queue, labels (as JSON text) and terminal cause, separated by spaces.
    Text,
}

/// An index that only some dialects have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Index {
    /// SQLite's `jobs_failed_list` (schema 10): every listed column of dead-lettered and
    /// quarantined jobs, so that a page never walks a large payload's overflow pages.
    FailedList,
}

/// One condition a job must meet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Predicate {
    /// The state is one of these. Written as literals (our own fixed spellings, never user
    /// text): a planner picks a partial index only when it sees the value at prepare time.
    StateIn(Vec<JobState>),
    NotNull(Column),
    Eq(Column, Arg),
    /// The label `key` is `value`.
    Label {
        key: String,
        value: String,
    },
    /// The needle is a substring of the haystack, ignoring the case of ASCII letters (what
    /// SQLite's `lower` folds; PostgreSQL folds the same under the "C" collation, whatever
    /// the database's locale).
    Contains(Haystack, String),
    Cmp(Column, Cmp, Millis),
    /// Keyset paging: `(key, id)` strictly after the cursor in the order.
    After {
        key: Column,
        descending: bool,
        cursor: Cursor,
    },
    /// Implied by the others, spelled out only where the dialect has `Index` to use it.
    ForIndex(Index, Box<Predicate>),
}

/// What differs between the SQL dialects in a filter: no more than SQL spelling.
pub(crate) trait Dialect {
    /// The condition that holds for every row (an empty filter).
    const ALWAYS: &'static str;
    /// The placeholder of the `n`th parameter (1-based) of the statement.
    fn placeholder(n: usize) -> String;
    /// The row's label `key` is `value`, both bound through `bind` in the order their
    /// placeholders stand in the text (SQLite's `?` are numbered by where they stand).
    fn label(key: &str, value: &str, bind: &mut dyn FnMut(Arg) -> String) -> String;
    /// The [`Haystack`] as one text expression.
    fn haystack(h: Haystack) -> &'static str;
    /// The needle bound at `needle` is in `haystack`, ignoring the case of ASCII letters.
    fn contains(haystack: &str, needle: &str) -> String;
    fn has(index: Index) -> bool;
}

/// A rendered `WHERE` condition and the values of its placeholders, in order.
pub(crate) struct Where {
    pub sql: String,
    pub args: Vec<Arg>,
}

/// `predicates` as `D`'s SQL, every one to hold; placeholders numbered from `first` so that a
/// caller can bind its own before them.
pub(crate) fn render<D: Dialect>(predicates: &[Predicate], first: usize) -> Where {
    let mut args = Vec::new();
    let mut bind = |arg: Arg| {
        args.push(arg);
        D::placeholder(first + args.len() - 1)
    };
    let sql: Vec<String> = predicates.iter().filter_map(|p| render_one::<D>(p, &mut bind)).collect();
    let sql = if sql.is_empty() { D::ALWAYS.to_string() } else { sql.join(" AND ") };
    Where { sql, args }
}

fn render_one<D: Dialect>(p: &Predicate, bind: &mut dyn FnMut(Arg) -> String) -> Option<String> {
    Some(match p {
        // One state as `=`: SQLite reads `state IN ('x')` as `state = +'x'`, which does not
        // imply a partial index's `WHERE state = 'x'`, so a filter could never use
        // `jobs_dead_causes`, `jobs_quarantine`, `jobs_claim` or `jobs_claim_wire` (the count of
        // one dead-letter cause group on 1,000,000 jobs: 13-20 ms walking every dead-lettered
        // job, against 0.005 ms). No listing's plan got slower (every shape measured).
        Predicate::StateIn(states) if states.len() == 1 => format!("state = '{}'", states[0].as_str()),
        Predicate::StateIn(states) => {
            let names = states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
            format!("state IN ({names})")
        }
        Predicate::NotNull(col) => format!("{} IS NOT NULL", col.name()),
        Predicate::Eq(col, v) => format!("{} = {}", col.name(), bind(v.clone())),
        Predicate::Label { key, value } => D::label(key, value, bind),
        Predicate::Contains(h, needle) => D::contains(D::haystack(*h), &bind(Arg::Text(needle.clone()))),
        Predicate::Cmp(col, cmp, t) => {
            let op = match cmp {
                Cmp::AtOrAfter => ">=",
                Cmp::Before => "<",
            };
            format!("{} {op} {}", col.name(), bind(Arg::Int(*t)))
        }
        Predicate::After { key, descending, cursor } => {
            let cmp = if *descending { "<" } else { ">" };
            let (k, id) = (bind(Arg::Int(cursor.key)), bind(Arg::Id(cursor.id)));
            format!("({}, id) {cmp} ({k}, {id})", key.name())
        }
        Predicate::ForIndex(index, p) => return D::has(*index).then(|| render_one::<D>(p, bind)).flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dialect of one-letter functions, so the tests show what `render` decides (order,
    /// numbering, what is left out) and not any real dialect's spelling.
    struct Toy;
    impl Dialect for Toy {
        const ALWAYS: &'static str = "T";
        fn placeholder(n: usize) -> String {
            format!(":{n}")
        }
        fn label(key: &str, value: &str, bind: &mut dyn FnMut(Arg) -> String) -> String {
            let k = bind(Arg::Text(key.into()));
            let v = bind(Arg::Text(value.into()));
            format!("L({k}, {v})")
        }
        fn haystack(h: Haystack) -> &'static str {
            ["c", "t"][h as usize]
        }
        fn contains(h: &str, n: &str) -> String {
            format!("C({h}, {n})")
        }
        fn has(_: Index) -> bool {
            false
        }
    }

    #[test]
    fn placeholders_number_from_first_in_the_order_of_their_values() {
        let f = JobFilter {
            queue: Some("q".into()),
            labels: vec![("k".into(), "v".into())],
            since: Some(5),
            ..JobFilter::state(JobState::Succeeded)
        };
        let w = render::<Toy>(&f.predicates(), 2);
        assert_eq!(
            w.sql,
            "state = 'succeeded' AND finished_at IS NOT NULL AND queue = :2 AND L(:3, :4) AND finished_at >= :5"
        );
        assert_eq!(w.args, vec![Arg::Text("q".into()), Arg::Text("k".into()), Arg::Text("v".into()), Arg::Int(5)]);
    }

    #[test]
    fn an_empty_filter_matches_every_row() {
        let w = render::<Toy>(&JobFilter::default().predicates(), 1);
        assert_eq!((w.sql.as_str(), w.args.len()), ("T", 0));
    }

    #[test]
    fn an_index_only_predicate_is_left_out_where_the_dialect_lacks_the_index() {
        let w = render::<Toy>(&JobFilter::state(JobState::DeadLettered).predicates(), 1);
        assert_eq!(w.sql, "state = 'dead-lettered' AND finished_at IS NOT NULL");
    }

    #[test]
    fn a_cursor_continues_after_its_key_and_id_in_the_direction_of_the_order() {
        let id: JobId = "0192f3a1-7c2e-7b1d-9f0a-2f1e5d8c4b10".parse().unwrap();
        let cursor = Cursor { key: 7, id };
        for (f, sql, order_by) in [
            (JobFilter::state(JobState::Scheduled), "(due_at, id) > (:1, :2)", "ORDER BY due_at ASC, id ASC"),
            (JobFilter::default(), "(updated_at, id) < (:1, :2)", "ORDER BY updated_at DESC, id DESC"),
        ] {
            let w = render::<Toy>(&[f.order().after(&cursor)], 1);
            assert_eq!(w.sql, sql);
            assert_eq!(w.args, vec![Arg::Int(7), Arg::Id(id)]);
            assert_eq!(f.order().order_by(), order_by);
        }
    }
}
