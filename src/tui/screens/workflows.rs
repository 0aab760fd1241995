//! The Workflows view: each workflow an application enqueued (`Store::enqueue_workflow`), newest
//! first, with its jobs by state, its oldest waiting job and its status (done, stuck behind a
//! failed parent, in progress), from `Store::workflows`, the rows `bw workflows` prints. Enter
//! lists the workflow's jobs where they need the operator: its Dead-Lettered ones (a stuck
//! workflow waits for one of them to be requeued), else Quarantined, Running, Scheduled.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Filter, Info, Open, Query, Row, Screen, Snapshot, View};
use crate::text::{relative, thousands, workflow_counts_short, workflow_status};
use crate::tui::view::{clean, header_only, len, pointer, Theme};
use backwave::{JobState, Store, WorkflowSummary};

pub(super) const VIEW: Info = Info::of("Workflows", "Flows", &Workflows);

/// How many workflows the view reads at most, newest first.
const SHOWN: usize = 500;

/// How many to read for a page at `offset` of `rows` rows: up to the page after it, so that the
/// selection can move on while the next refresh reads further. Each workflow's counts are read
/// as it is listed (`Store::workflows`), so the view never reads hundreds it does not show.
fn wanted(offset: u64, rows: usize) -> usize {
    (offset as usize).saturating_add(rows.max(1).saturating_mul(2)).min(SHOWN)
}

pub(crate) struct Workflows;

/// The job list Enter opens for a workflow: where its jobs need the operator first.
fn list_for(w: &WorkflowSummary) -> Option<View> {
    [
        (JobState::DeadLettered, View::DeadLettered),
        (JobState::Quarantined, View::Quarantined),
        (JobState::Running, View::Running),
        (JobState::Scheduled, View::Scheduled),
    ]
    .into_iter()
    .find(|(st, _)| w.counts.get(st).is_some_and(|n| *n > 0))
    .map(|(_, v)| v)
}

impl Screen for Workflows {
    fn read(&self, store: &Store, q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        s.workflows = store.workflows(wanted(q.offset, q.limit))?;
        Ok(())
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().map_or(0, |s| s.workflows.len() as u64)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        let s = app.snapshot.as_ref()?;
        s.workflows.get(index as usize).map(|w| Row::Workflow(w.id))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Workflow(id) = row else { return None };
        let s = app.snapshot.as_ref()?;
        s.workflows.iter().position(|w| w.id == *id).map(|i| i as u64)
    }

    /// New workflows arrive at the top: the selection stays on the workflow chosen.
    fn pin(&self, app: &App, _same_list: bool) -> Option<Row> {
        self.row(app, app.vs().selected)
    }

    fn open(&self, app: &App, index: u64) -> Option<Open> {
        let s = app.snapshot.as_ref()?;
        let w = s.workflows.get(index as usize)?;
        Some(Open::List {
            view: list_for(w)?,
            text: format!("workflow:{}", w.id),
            filter: Filter { workflow: Some(w.id), ..Filter::default() },
            back_to: Some(View::Workflows),
        })
    }

    fn unfiltered(&self) -> Option<&'static str> {
        Some("the Workflows view lists every workflow: Enter opens one's jobs, which / filters")
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &app.snapshot else { return app.empty(t, area, buf, "workflows") };
        if s.workflows.is_empty() {
            header_only(t, area, buf);
            return app.empty(t, area, buf, "workflows (an application enqueues them in code)");
        }
        let now = app.now;
        let sel = (app.vs().selected as usize).checked_sub(app.vs().offset as usize);
        let rows = s
            .workflows
            .iter()
            .skip(app.vs().offset as usize)
            .take(area.height as usize)
            .enumerate()
            .map(|(i, w)| {
                let (status, tone) = workflow_status(w, false);
                TableRow::new(vec![
                    Cell::from(format!("{}{}", pointer(sel == Some(i)), w.id)),
                    Cell::from(clean(&w.name, 20)),
                    Cell::from(thousands(w.jobs)),
                    Cell::from(clean(&workflow_counts_short(w), 60)),
                    Cell::from(w.oldest_waiting_since.map_or_else(|| "—".to_string(), |at| relative(now, at))),
                    Cell::from(Line::styled(status, t.tone(tone))),
                ])
            })
            .collect();
        app.table(
            t,
            area,
            buf,
            (
                &[" WORKFLOW", "NAME", "JOBS", "STATES", "WAITING", "STATUS"],
                &[len(37), len(20), len(7), Constraint::Fill(2), len(9), Constraint::Fill(1)],
            ),
            rows,
            sel,
        );
    }
}
