//! The grouped views: Dead-Lettered by cause, Quarantined by wire name and reason. A group is a
//! row; Enter lists its jobs, `r` requeues it whole. Groups are re-read every
//! [`GROUPS_EVERY_MS`](crate::tui::data::GROUPS_EVERY_MS), and kept between.

use std::marker::PhantomData;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Filter, Open, Query, Row, Screen, Snapshot, Target};
use crate::text::{relative, thousands};
use crate::tui::data::GROUP_LIMIT;
use crate::tui::view::{clean, fill_width, header_only, len, live_handlers, pointer, Theme};
use backwave::store::{CauseGroup, QuarantineGroup};
use backwave::Store;

/// The screen of one kind of group.
pub(crate) struct Groups<G>(PhantomData<G>);

pub(crate) static CAUSE_GROUPS: Groups<CauseGroup> = Groups(PhantomData);
pub(crate) static QUARANTINE_GROUPS: Groups<QuarantineGroup> = Groups(PhantomData);

/// A kind of group a grouped view lists.
pub(crate) trait Grouped: Sized + Sync + Clone {
    /// What the groups are made of, for the empty view.
    const JOBS: &'static str;
    fn read(store: &Store) -> backwave::Result<Vec<Self>>;
    fn of(s: &Snapshot) -> &[Self];
    fn of_mut(s: &mut Snapshot) -> &mut Vec<Self>;
    fn count(&self) -> u64;
    /// The group as the store's actions name it.
    fn target(&self) -> Target;
    /// The job list of the group: its filter and the filter line's text.
    fn jobs(&self) -> (Filter, String);
    fn render(app: &App, t: &Theme, area: Rect, buf: &mut Buffer);
}

impl<G: Grouped> Screen for Groups<G> {
    fn read(&self, store: &Store, q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        if q.read_groups {
            *G::of_mut(s) = G::read(store)?;
        }
        if q.view == super::View::Quarantined {
            s.live_handlers = store.live_handlers()?;
        }
        Ok(())
    }

    fn carry(&self, prev: &Snapshot, next: &mut Snapshot) {
        // Not re-read this time: keep the groups already shown.
        *G::of_mut(next) = G::of(prev).to_vec();
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().map_or(0, |s| G::of(s).len() as u64)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        // Read as the actions read it: from the snapshot held, whichever view it answers.
        let s = app.snapshot.as_ref()?;
        G::of(s).get(index as usize).map(|g| Row::Group(g.target()))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Group(target) = row else { return None };
        let s = app.snapshot.as_ref()?;
        G::of(s).iter().position(|g| g.target() == *target).map(|i| i as u64)
    }

    /// Groups re-read every few seconds come back in a new order (by last seen): the selection
    /// follows the group, which Enter opens and r requeues whole.
    fn pin(&self, app: &App, same_list: bool) -> Option<Row> {
        same_list.then(|| self.row(app, app.vs().selected)).flatten()
    }

    fn open(&self, app: &App, index: u64) -> Option<Open> {
        // A group opens as the list of its jobs; q goes back to the groups.
        let s = app.snapshot.as_ref()?;
        let (filter, text) = G::of(s).get(index as usize)?.jobs();
        Some(Open::List { view: app.nav.view, filter, text, back_to: None })
    }

    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        G::render(app, t, area, buf)
    }
}

impl Grouped for CauseGroup {
    const JOBS: &'static str = "Dead-Lettered jobs";

    fn read(store: &Store) -> backwave::Result<Vec<Self>> {
        store.cause_groups(GROUP_LIMIT)
    }

    fn of(s: &Snapshot) -> &[Self] {
        &s.cause_groups
    }

    fn of_mut(s: &mut Snapshot) -> &mut Vec<Self> {
        &mut s.cause_groups
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn target(&self) -> Target {
        Target::CauseGroup { wire_name: self.wire_name.clone(), fingerprint: self.fingerprint.clone() }
    }

    fn jobs(&self) -> (Filter, String) {
        let text = format!("wire:{} group:\"{}\"", self.wire_name, self.fingerprint);
        let f = Filter {
            wire: Some(self.wire_name.clone()),
            fingerprint: Some(self.fingerprint.clone()),
            ..Filter::default()
        };
        (f, text)
    }

    fn render(app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let now = app.now;
        let wire_w = if area.width < 120 { 14 } else { 18 };
        let count = count_width::<CauseGroup>(app);
        let widths = [len(count), len(10), len(10), len(wire_w), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let count_h = format!("{:>w$}", "COUNT", w = count as usize);
        let header = [count_h.as_str(), "FIRST SEEN", "LAST SEEN", "WIRE NAME", "CAUSE (normalised)"];
        groups(app, t, area, buf, (&header, &widths), |g: &CauseGroup| {
            vec![
                Cell::from(relative(now, g.first_seen)),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.wire_name, wire_w as usize)),
                Cell::from(clean(&g.fingerprint, fill)),
            ]
        });
    }
}

impl Grouped for QuarantineGroup {
    const JOBS: &'static str = "Quarantined jobs";

    fn read(store: &Store) -> backwave::Result<Vec<Self>> {
        store.quarantine_groups()
    }

    fn of(s: &Snapshot) -> &[Self] {
        &s.quarantine_groups
    }

    fn of_mut(s: &mut Snapshot) -> &mut Vec<Self> {
        &mut s.quarantine_groups
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn target(&self) -> Target {
        Target::QuarantineGroup { wire_name: self.wire_name.clone(), reason: self.reason }
    }

    fn jobs(&self) -> (Filter, String) {
        let text = format!("wire:{} group:{}", self.wire_name, self.reason);
        let f = Filter { wire: Some(self.wire_name.clone()), reason: Some(self.reason), ..Filter::default() };
        (f, text)
    }

    fn render(app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let now = app.now;
        let narrow = area.width < 120;
        let (wire_w, live_w, live_h) = if narrow { (14, 9, "LIVE") } else { (18, 12, "LIVE HANDLER") };
        let count = count_width::<QuarantineGroup>(app);
        let widths = [len(count), len(wire_w), len(19), len(live_w), len(10), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let count_h = format!("{:>w$}", "COUNT", w = count as usize);
        let header = [count_h.as_str(), "WIRE NAME", "REASON", live_h, "LAST SEEN", "CAUSE (latest)"];
        groups(app, t, area, buf, (&header, &widths), |g: &QuarantineGroup| {
            vec![
                Cell::from(clean(&g.wire_name, wire_w as usize)),
                Cell::from(g.reason.as_str()),
                live_handlers(t, g.live_handlers),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.example, fill)),
            ]
        });
    }
}

/// The COUNT column: the pointer, a space and the largest count (`▶ 1,234,567`); six
/// cells held counts up to 999,999 and a larger one ran into FIRST SEEN.
fn count_width<G: Grouped>(app: &App) -> u16 {
    let widest = app
        .snapshot
        .as_ref()
        .map(|s| G::of(s).iter().map(|g| thousands(g.count()).len()).max().unwrap_or(0))
        .unwrap_or(0);
    (2 + widest.max(5)) as u16
}

/// A grouped view: one row a group, its count first (under the pointer), paged like the
/// job lists, from the snapshot of this view only.
fn groups<G: Grouped>(
    app: &App,
    t: &Theme,
    area: Rect,
    buf: &mut Buffer,
    columns: (&[&str], &[Constraint]),
    cells: impl Fn(&G) -> Vec<Cell<'static>>,
) {
    let Some(s) = app.snapshot_for_view() else {
        return app.empty(t, area, buf, "groups");
    };
    let groups = G::of(s);
    if groups.is_empty() {
        header_only(t, area, buf);
        return app.empty(t, area, buf, G::JOBS);
    }
    let offset = app.vs().offset as usize;
    let sel = (app.vs().selected as usize).checked_sub(offset);
    let rows = groups
        .iter()
        .skip(offset)
        .enumerate()
        .map(|(i, g)| {
            let w = columns.1.first().map_or(7, |c| if let Constraint::Length(n) = c { *n } else { 7 });
            let count = thousands(g.count());
            let mut row = vec![Cell::from(format!(
                "{} {count:>w$}",
                pointer(sel == Some(i)),
                w = (w as usize).saturating_sub(2)
            ))];
            row.extend(cells(g));
            TableRow::new(row)
        })
        .collect();
    app.table(t, area, buf, columns, rows, sel);
}
