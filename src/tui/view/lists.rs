//! The body of each view: the job lists, the cause and quarantine groups, the queues and the
//! log. Each reads the latest snapshot the data thread sent, and nothing else.

use super::*;
use crate::store::{CauseGroup, PauseKind, QuarantineGroup};
use crate::tui::data::Snapshot;

impl App {
    pub(super) fn jobs(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let jobs = self.page_jobs();
        let what = format!("{} jobs", self.view.title());
        if jobs.is_empty() {
            self.header_only(t, area, buf);
            self.empty(t, area, buf, &what);
            return;
        }
        let now = self.now;
        let live = self.snapshot.as_ref().map(|s| &s.live_handlers);
        let sel = self.selected_on_screen();
        let mark = |i: usize, j: &Job| {
            let pointer = if Some(i) == sel { "▶" } else { " " };
            let marked = if self.marks.contains_key(&j.id) { "●" } else { " " };
            format!("{pointer}{marked}")
        };
        let dl_widths = vec![len(2), len(8), len(18), len(10), len(8), len(10), Constraint::Fill(1)];
        let dl_fill = fill_width(area, &dl_widths);
        let q_widths = vec![len(2), len(8), len(18), len(19), len(12), len(10), Constraint::Fill(1)];
        let q_fill = fill_width(area, &q_widths);
        // Every list starts with the pointer and mark, the short id and the wire name.
        let rows = |rest: &dyn Fn(&Job) -> Vec<Cell<'static>>| -> Vec<Row> {
            jobs.iter()
                .enumerate()
                .map(|(i, j)| {
                    let mut row =
                        vec![Cell::from(mark(i, j)), Cell::from(short_id(&j.id)), Cell::from(clean(&j.wire_name, 18))];
                    row.extend(rest(j));
                    Row::new(row)
                })
                .collect()
        };
        let finished = |j: &Job| Cell::from(j.finished_at.map(|f| relative(now, f)).unwrap_or_default());
        let cause = |j: &Job, fill: usize| Cell::from(clean(j.terminal_cause.as_deref().unwrap_or(""), fill));
        let (header, widths, rows): (Vec<&str>, Vec<Constraint>, Vec<Row>) = match self.view {
            View::DeadLettered => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "ATTEMPTS", "FINISHED", "CAUSE"],
                dl_widths.clone(),
                rows(&|j| {
                    vec![Cell::from(clean(&j.queue, 10)), Cell::from(attempts(j)), finished(j), cause(j, dl_fill)]
                }),
            ),
            View::Quarantined => (
                vec!["", "ID", "WIRE NAME", "REASON", "LIVE HANDLER", "SINCE", "CAUSE"],
                q_widths.clone(),
                rows(&|j| {
                    let n = live.and_then(|l| l.get(&j.wire_name)).copied().unwrap_or(0);
                    vec![
                        Cell::from(j.quarantine_reason.map(|r| r.as_str()).unwrap_or("")),
                        live_handlers(t, n),
                        finished(j),
                        cause(j, q_fill),
                    ]
                }),
            ),
            View::Running => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "ATTEMPT", "LEASE LEFT", "WORKER", "NOTE"],
                vec![len(2), len(8), len(18), len(10), len(8), len(10), len(20), Constraint::Fill(1)],
                rows(&|j| {
                    let left = j.lease_expires_at.map(|e| e - now).unwrap_or(0);
                    let lease = if left > 0 {
                        compact_duration(std::time::Duration::from_millis(left as u64))
                    } else {
                        "lapsed".to_string()
                    };
                    vec![
                        Cell::from(clean(&j.queue, 10)),
                        Cell::from(attempts(j)),
                        Cell::from(lease).style(if left > 0 { Style::default() } else { t.error() }),
                        Cell::from(clean(j.lease_owner.as_deref().unwrap_or(""), 20)),
                        Cell::from(
                            j.cancel_requested_by
                                .as_deref()
                                .map(|a| format!("cancel asked by {}", clean(a, 20)))
                                .unwrap_or_default(),
                        ),
                    ]
                }),
            ),
            _ => (
                vec!["", "ID", "WIRE NAME", "QUEUE", "DUE", "ATTEMPTS", "BUDGET LEFT", "CREATED"],
                vec![len(2), len(8), len(18), len(10), len(9), len(8), len(11), Constraint::Fill(1)],
                rows(&|j| {
                    vec![
                        Cell::from(clean(&j.queue, 10)),
                        Cell::from(if j.due_at <= now { "due".to_string() } else { relative(now, j.due_at) }),
                        Cell::from(if j.attempt == 0 { "none yet".to_string() } else { attempts(j) }),
                        Cell::from(match j.budget_left() {
                            Some(n) => format!("{n} more"),
                            None => "fresh".to_string(),
                        }),
                        Cell::from(relative(now, j.created_at)),
                    ]
                }),
            ),
        };
        self.table(t, area, buf, (&header, &widths), rows, sel);
    }

    pub(super) fn header_only(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        Line::styled(" (empty)", t.heading()).render(Rect { height: 1, ..area }, buf);
    }

    pub(super) fn cause_groups(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let now = self.now;
        let widths = [len(7), len(10), len(10), len(18), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let header = ["  COUNT", "FIRST SEEN", "LAST SEEN", "WIRE NAME", "CAUSE (normalised)"];
        self.groups(t, area, buf, (&header, &widths), |g: &CauseGroup| {
            vec![
                Cell::from(relative(now, g.first_seen)),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.wire_name, 18)),
                Cell::from(clean(&g.fingerprint, fill)),
            ]
        });
    }

    pub(super) fn quarantine_groups(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let now = self.now;
        let widths = [len(7), len(18), len(19), len(12), len(10), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let header = ["  COUNT", "WIRE NAME", "REASON", "LIVE HANDLER", "LAST SEEN", "CAUSE (latest)"];
        self.groups(t, area, buf, (&header, &widths), |g: &QuarantineGroup| {
            vec![
                Cell::from(clean(&g.wire_name, 18)),
                Cell::from(g.reason.as_str()),
                live_handlers(t, g.live_handlers),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.example, fill)),
            ]
        });
    }

    /// A grouped view: one row a group, its count first (under the pointer), paged like the
    /// job lists, from the snapshot of this view only.
    fn groups<G: Grouped>(
        &self,
        t: &Theme,
        area: Rect,
        buf: &mut Buffer,
        columns: (&[&str], &[Constraint]),
        cells: impl Fn(&G) -> Vec<Cell<'static>>,
    ) {
        let Some(s) = self.snapshot.as_ref().filter(|s| self.snapshot_is_for_view(s)) else {
            return self.empty(t, area, buf, "groups");
        };
        let groups = G::of(s);
        if groups.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, G::JOBS);
        }
        let offset = self.vs().offset as usize;
        let sel = (self.vs().selected as usize).checked_sub(offset);
        let rows = groups
            .iter()
            .skip(offset)
            .enumerate()
            .map(|(i, g)| {
                let mut row = vec![Cell::from(format!("{}{:>6}", pointer(sel == Some(i)), thousands(g.count())))];
                row.extend(cells(g));
                Row::new(row)
            })
            .collect();
        self.table(t, area, buf, columns, rows, sel);
    }

    pub(super) fn queues(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = &self.snapshot else { return self.empty(t, area, buf, "queues") };
        if s.counts.by_queue.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "queues");
        }
        let now = self.now;
        let biggest = s.counts.by_queue.values().map(|m| m.values().sum::<u64>()).max().unwrap_or(1).max(1);
        // Per-state numbers when there is room (120 columns); at 80 the coloured bar says it.
        let numbers_shown = area.width >= 110;
        const BAR: usize = 20;
        let sel = (self.vs().selected as usize).checked_sub(self.vs().offset as usize);
        let rows = s
            .counts
            .by_queue
            .iter()
            .skip(self.vs().offset as usize)
            .enumerate()
            .map(|(i, (queue, m))| {
                let total: u64 = m.values().sum();
                let mut bar_spans = Vec::new();
                let mut used = 0;
                for (i, st) in JobState::ALL.iter().enumerate() {
                    let n = m.get(st).copied().unwrap_or(0);
                    let cells = if n == 0 { 0 } else { ((n as f64 / biggest as f64) * BAR as f64).ceil() as usize };
                    let cells = cells.min(BAR - used);
                    used += cells;
                    let glyph = if self.cfg.color { "█" } else { ["S", "R", "=", "D", "Q", "C"][i] };
                    bar_spans.push(Span::styled(glyph.repeat(cells), t.state(*st)));
                }
                let numbers = JobState::ALL
                    .iter()
                    .map(|st| format!("{:>7}", thousands(m.get(st).copied().unwrap_or(0))))
                    .collect::<Vec<_>>()
                    .join("");
                // Store::queue_latency, the figures `bw stats` and `bw check` read.
                let latency = s.latency.iter().find(|l| &l.queue == queue);
                let due_now = latency.map_or(0, |l| l.due_now);
                let waited = match latency.and_then(|l| l.oldest_due_at) {
                    Some(due) if due_now > 0 => compact_duration(ms(now - due)),
                    _ => "—".to_string(),
                };
                // Due jobs a pause holds are not waiting for a worker: they are counted apart, so
                // a paused queue reads "PAUSED 312 held" instead of a latency nobody can fix.
                let held = latency.map_or(0, |l| l.held_by_pause);
                let held = if held > 0 { format!(" {} held", thousands(held)) } else { String::new() };
                // Its expiry is in the header: the row only has room for the mark.
                // A queue whose own limit is full waits on it, not on a worker: marked like a pause.
                let limit_full =
                    s.limits.iter().any(|l| l.kind == PauseKind::Queue && &l.name == queue && l.budget == 0);
                let waited = match self.paused_until(PauseKind::Queue, queue) {
                    Some(_) => Line::from(vec![Span::styled("PAUSED", t.error()), Span::raw(held)]),
                    None if limit_full => {
                        Line::from(vec![Span::styled("LIMIT ", t.fg(Color::Yellow)), Span::raw(waited)])
                    }
                    None => Line::from(format!("{waited}{held}")),
                };
                let rate = self.throughput.get(queue).map(|r| format!("{r:.1}/min")).unwrap_or_else(|| "—".into());
                Row::new(vec![
                    Cell::from(format!("{}{}", pointer(sel == Some(i)), clean(queue, 11))),
                    Cell::from(format!("{:>9}", thousands(total))),
                    Cell::from(Line::from(bar_spans)),
                    Cell::from(if numbers_shown { numbers } else { String::new() }),
                    Cell::from(rate),
                    Cell::from(format!("{:>7}", thousands(due_now))),
                    Cell::from(waited),
                ])
            })
            .collect();
        self.table(
            t,
            area,
            buf,
            (
                &[
                    " QUEUE",
                    "    TOTAL",
                    "BY STATE",
                    if numbers_shown { "  SCHED    RUN     OK   DEAD  QUAR.   CANC" } else { "" },
                    "DONE/MIN",
                    "DUE NOW",
                    "OLDEST WAITED",
                ],
                &[
                    len(12),
                    len(9),
                    len(BAR as u16),
                    len(if numbers_shown { 42 } else { 0 }),
                    len(8),
                    len(7),
                    Constraint::Fill(1),
                ],
            ),
            rows,
            sel,
        );
    }

    pub(super) fn log_view(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let rows = self.log_rows();
        if rows.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "log entries");
        }
        let offset = self.vs().offset as usize;
        let widths = [len(12), len(8), len(13), len(15), len(3), len(19), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let visible = rows
            .iter()
            .skip(offset)
            .take(area.height as usize)
            .map(|e| {
                let to_style = t.state(e.to);
                let who = match (&e.actor, &e.worker_id) {
                    (Some(a), _) => format!("by {}", clean(a, 16)),
                    (None, Some(w)) => clean(w, 19),
                    _ => String::new(),
                };
                Row::new(vec![
                    Cell::from(clock_time(e.at)),
                    Cell::from(short_id(&e.job_id)),
                    Cell::from(e.from.map(|s| s.title()).unwrap_or("(new)")),
                    Cell::from(format!("→ {}", e.to.title())).style(to_style),
                    Cell::from(format!("{:>3}", e.attempt)),
                    Cell::from(who),
                    Cell::from(clean(e.reason.as_deref().unwrap_or(""), fill)),
                ])
            })
            .collect();
        let sel = (self.vs().selected as usize).checked_sub(offset);
        self.table(
            t,
            area,
            buf,
            (&["TIME (UTC)", "JOB", "FROM", "TO", "ATT", "WORKER / ACTOR", "REASON"], &widths),
            visible,
            sel,
        );
    }
}

/// How many live workers handle a wire name: red when none does (it would quarantine again).
fn live_handlers(t: &Theme, n: u64) -> Cell<'static> {
    Cell::from(handlers(n)).style(if n == 0 { t.error() } else { t.state(JobState::Succeeded) })
}

/// A kind of group a grouped view lists.
trait Grouped: Sized {
    /// What the groups are made of, for the empty view.
    const JOBS: &'static str;
    fn of(s: &Snapshot) -> &[Self];
    fn count(&self) -> u64;
}

impl Grouped for CauseGroup {
    const JOBS: &'static str = "Dead-Lettered jobs";
    fn of(s: &Snapshot) -> &[Self] {
        &s.cause_groups
    }
    fn count(&self) -> u64 {
        self.count
    }
}

impl Grouped for QuarantineGroup {
    const JOBS: &'static str = "Quarantined jobs";
    fn of(s: &Snapshot) -> &[Self] {
        &s.quarantine_groups
    }
    fn count(&self) -> u64 {
        self.count
    }
}
