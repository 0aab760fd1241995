//! The body of each view: the job lists, the cause and quarantine groups, the queues and the
//! log. Each reads the latest snapshot the data thread sent, and nothing else.

use std::collections::BTreeMap;

use super::*;
use crate::tui::data::Snapshot;
use backwave::store::{CauseGroup, PauseKind, QuarantineGroup};

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
        // A marked row is bold and its mark a plain `*` without colour: a `●` told apart from
        // the selection by its colour alone disappeared under NO_COLOR.
        let mark_glyph = if self.cfg.color { "●" } else { "*" };
        let mark = |i: usize, j: &Job| {
            let pointer = if Some(i) == sel { "▶" } else { " " };
            let marked = if self.marks.contains_key(&j.id) { mark_glyph } else { " " };
            format!("{pointer}{marked}")
        };
        // Below 120 columns the fixed columns narrow (and their headings shorten) so that the
        // cause keeps room to be read: at 80 it had 18 cells.
        let narrow = area.width < 120;
        let (wire_w, queue_w, att_w) = if narrow { (14, 8, 5) } else { (18, 10, 8) };
        let att_h = if narrow { "ATT" } else { "ATTEMPTS" };
        let dl_widths = vec![len(2), len(8), len(wire_w), len(queue_w), len(att_w), len(10), Constraint::Fill(1)];
        let dl_fill = fill_width(area, &dl_widths);
        let (live_w, live_h) = if narrow { (9, "LIVE") } else { (12, "LIVE HANDLER") };
        let q_widths = vec![len(2), len(8), len(wire_w), len(19), len(live_w), len(10), Constraint::Fill(1)];
        let q_fill = fill_width(area, &q_widths);
        // Every list starts with the pointer and mark, the short id and the wire name.
        let rows = |rest: &dyn Fn(&Job) -> Vec<Cell<'static>>| -> Vec<Row> {
            jobs.iter()
                .enumerate()
                .map(|(i, j)| {
                    let mut row = vec![
                        Cell::from(mark(i, j)),
                        Cell::from(short_id(&j.id)),
                        Cell::from(clean(&j.wire_name, wire_w as usize)),
                    ];
                    row.extend(rest(j));
                    let row = Row::new(row);
                    if self.marks.contains_key(&j.id) {
                        row.style(Style::default().add_modifier(Modifier::BOLD))
                    } else {
                        row
                    }
                })
                .collect()
        };
        let finished = |j: &Job| Cell::from(j.finished_at.map(|f| relative(now, f)).unwrap_or_default());
        let cause = |j: &Job, fill: usize| Cell::from(clean(j.terminal_cause.as_deref().unwrap_or(""), fill));
        let (header, widths, rows): (Vec<&str>, Vec<Constraint>, Vec<Row>) = match self.view {
            View::DeadLettered => (
                vec!["", "ID", "WIRE NAME", "QUEUE", att_h, "FINISHED", "CAUSE"],
                dl_widths.clone(),
                rows(&|j| {
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(attempts(j)),
                        finished(j),
                        cause(j, dl_fill),
                    ]
                }),
            ),
            View::Quarantined => (
                vec!["", "ID", "WIRE NAME", "REASON", live_h, "SINCE", "CAUSE"],
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
                vec!["", "ID", "WIRE NAME", "QUEUE", att_h, "LEASE LEFT", "WORKER", "NOTE"],
                vec![
                    len(2),
                    len(8),
                    len(wire_w),
                    len(queue_w),
                    len(att_w),
                    len(10),
                    len(if narrow { 16 } else { 20 }),
                    Constraint::Fill(1),
                ],
                rows(&|j| {
                    let left = j.lease_expires_at.map(|e| e - now).unwrap_or(0);
                    let lease = if left > 0 {
                        compact_duration(std::time::Duration::from_millis(left as u64))
                    } else {
                        "lapsed".to_string()
                    };
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(attempts(j)),
                        Cell::from(lease).style(if left > 0 { Style::default() } else { t.error() }),
                        Cell::from(clean(j.lease_owner.as_deref().unwrap_or(""), if narrow { 16 } else { 20 })),
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
                vec!["", "ID", "WIRE NAME", "QUEUE", "DUE", att_h, "BUDGET LEFT", "CREATED"],
                vec![len(2), len(8), len(wire_w), len(queue_w), len(9), len(att_w), len(11), Constraint::Fill(1)],
                rows(&|j| {
                    vec![
                        Cell::from(clean(&j.queue, queue_w as usize)),
                        Cell::from(due(now, j.due_at)),
                        Cell::from(match j.attempt {
                            0 if narrow => "—".to_string(),
                            0 => "none yet".to_string(),
                            _ => attempts(j),
                        }),
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
        let wire_w = if area.width < 120 { 14 } else { 18 };
        let count = self.count_width::<CauseGroup>();
        let widths = [len(count), len(10), len(10), len(wire_w), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let count_h = format!("{:>w$}", "COUNT", w = count as usize);
        let header = [count_h.as_str(), "FIRST SEEN", "LAST SEEN", "WIRE NAME", "CAUSE (normalised)"];
        self.groups(t, area, buf, (&header, &widths), |g: &CauseGroup| {
            vec![
                Cell::from(relative(now, g.first_seen)),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.wire_name, wire_w as usize)),
                Cell::from(clean(&g.fingerprint, fill)),
            ]
        });
    }

    pub(super) fn quarantine_groups(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let now = self.now;
        let narrow = area.width < 120;
        let (wire_w, live_w, live_h) = if narrow { (14, 9, "LIVE") } else { (18, 12, "LIVE HANDLER") };
        let count = self.count_width::<QuarantineGroup>();
        let widths = [len(count), len(wire_w), len(19), len(live_w), len(10), Constraint::Fill(1)];
        let fill = fill_width(area, &widths);
        let count_h = format!("{:>w$}", "COUNT", w = count as usize);
        let header = [count_h.as_str(), "WIRE NAME", "REASON", live_h, "LAST SEEN", "CAUSE (latest)"];
        self.groups(t, area, buf, (&header, &widths), |g: &QuarantineGroup| {
            vec![
                Cell::from(clean(&g.wire_name, wire_w as usize)),
                Cell::from(g.reason.as_str()),
                live_handlers(t, g.live_handlers),
                Cell::from(relative(now, g.last_seen)),
                Cell::from(clean(&g.example, fill)),
            ]
        });
    }

    /// The COUNT column: the pointer, a space and the largest count (`▶ 1,234,567`); six
    /// cells held counts up to 999,999 and a larger one ran into FIRST SEEN.
    fn count_width<G: Grouped>(&self) -> u16 {
        let widest = self
            .snapshot
            .as_ref()
            .map(|s| G::of(s).iter().map(|g| thousands(g.count()).len()).max().unwrap_or(0))
            .unwrap_or(0);
        (2 + widest.max(5)) as u16
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
                let w = columns.1.first().map_or(7, |c| if let Constraint::Length(n) = c { *n } else { 7 });
                let count = thousands(g.count());
                let mut row = vec![Cell::from(format!(
                    "{} {count:>w$}",
                    pointer(sel == Some(i)),
                    w = (w as usize).saturating_sub(2)
                ))];
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
        const BAR: usize = 20;
        const STATES: [&str; 6] = ["SCHED", "RUN", "OK", "DEAD", "QUAR", "CANC"];
        let sel = (self.vs().selected as usize).checked_sub(self.vs().offset as usize);
        let shown: Vec<(&String, &std::collections::BTreeMap<JobState, u64>)> =
            s.counts.by_queue.iter().skip(self.vs().offset as usize).take(area.height as usize).collect();
        // Every figure of a row as text, exact (`99,177,229`) or compact (`99.2M`): exact when
        // the columns fit the width with them, since a cut number reads as another number.
        let figures = |compact: bool| -> Vec<Vec<String>> {
            let n = |v: u64| if compact { compact_count(v) } else { thousands(v) };
            shown
                .iter()
                .map(|(queue, m)| {
                    let mut row = vec![n(m.values().sum())];
                    row.extend(JobState::ALL.iter().map(|st| n(m.get(st).copied().unwrap_or(0))));
                    row.push(match self.throughput.get(*queue) {
                        Some(r) if compact || *r >= 100.0 => format!("{}/min", n(r.round() as u64)),
                        Some(r) => format!("{r:.1}/min"),
                        None => "—".into(),
                    });
                    let latency = s.latency.iter().find(|l| &l.queue == *queue);
                    row.push(n(latency.map_or(0, |l| l.due_now)));
                    row
                })
                .collect()
        };
        let headers: Vec<&str> = ["TOTAL"].into_iter().chain(STATES).chain(["DONE/MIN", "DUE NOW"]).collect();
        let widths_of = |rows: &[Vec<String>]| -> Vec<u16> {
            headers
                .iter()
                .enumerate()
                .map(|(i, h)| rows.iter().map(|r| width(&r[i])).chain([width(h)]).max().unwrap_or(0) as u16)
                .collect()
        };
        let name_width = shown.iter().map(|(q, _)| width(&sanitize(q))).max().unwrap_or(0).clamp(5, 16) as u16;
        // What the row needs besides the figures: pointer and name, the gaps, and the oldest wait.
        let fixed = |w: &[u16]| -> u16 { 2 + name_width + w.iter().sum::<u16>() + w.len() as u16 + 1 + 8 };
        let (mut compact, mut figures_now) = (false, figures(false));
        let mut widths = widths_of(&figures_now);
        if fixed(&widths) > area.width {
            compact = true;
            figures_now = figures(true);
            widths = widths_of(&figures_now);
        }
        // The bar is the first thing to go: the figures say more.
        let bar_shown = fixed(&widths) + (BAR as u16) < area.width;
        let rows = shown
            .iter()
            .zip(&figures_now)
            .enumerate()
            .map(|(i, ((queue, m), figs))| {
                let mut bar_spans = Vec::new();
                let mut used = 0;
                for (k, st) in JobState::ALL.iter().enumerate() {
                    let n = m.get(st).copied().unwrap_or(0);
                    let cells = if n == 0 { 0 } else { ((n as f64 / biggest as f64) * BAR as f64).ceil() as usize };
                    let cells = cells.min(BAR - used);
                    used += cells;
                    let glyph = if self.cfg.color { "█" } else { ["S", "R", "=", "D", "Q", "C"][k] };
                    bar_spans.push(Span::styled(glyph.repeat(cells), t.state(*st)));
                }
                // Store::queue_latency, the figures `bw stats` and `bw check` read.
                let latency = s.latency.iter().find(|l| &l.queue == *queue);
                let due_now = latency.map_or(0, |l| l.due_now);
                let waited = match latency.and_then(|l| l.oldest_due_at) {
                    Some(due) if due_now > 0 => compact_duration(ms(now - due)),
                    _ => "—".to_string(),
                };
                // Due jobs a pause holds are not waiting for a worker: they are counted apart, so
                // a paused queue reads "PAUSED 312 held" instead of a latency nobody can fix.
                let held = latency.map_or(0, |l| l.held_by_pause);
                let held = if held > 0 {
                    format!(" {} held", if compact { compact_count(held) } else { thousands(held) })
                } else {
                    String::new()
                };
                // Its expiry is in the header: the row only has room for the mark.
                // A queue whose own limit is full waits on it, not on a worker: marked like a pause.
                let limit_full =
                    s.limits.iter().any(|l| l.kind == PauseKind::Queue && l.name == **queue && l.budget == 0);
                let waited = match self.paused_until(PauseKind::Queue, queue) {
                    Some(_) => Line::from(vec![Span::styled("PAUSED", t.error()), Span::raw(held)]),
                    None if limit_full => {
                        Line::from(vec![Span::styled("LIMIT ", t.fg(Color::Yellow)), Span::raw(waited)])
                    }
                    None => Line::from(format!("{waited}{held}")),
                };
                let mut cells =
                    vec![Cell::from(format!("{} {}", pointer(sel == Some(i)), clean(queue, name_width as usize)))];
                cells.push(right(&figs[0], widths[0]));
                if bar_shown {
                    cells.push(Cell::from(Line::from(bar_spans)));
                }
                for (k, st) in JobState::ALL.iter().enumerate() {
                    cells.push(right(&figs[1 + k], widths[1 + k]).style(if m.get(st).copied().unwrap_or(0) > 0 {
                        t.state(*st)
                    } else {
                        t.dim()
                    }));
                }
                cells.push(right(&figs[7], widths[7]));
                cells.push(right(&figs[8], widths[8]));
                cells.push(Cell::from(waited));
                Row::new(cells)
            })
            .collect();
        let mut header: Vec<String> = vec![format!("  {:<w$}", "QUEUE", w = name_width as usize)];
        let mut constraints = vec![len(2 + name_width)];
        header.push(format!("{:>w$}", "TOTAL", w = widths[0] as usize));
        constraints.push(len(widths[0]));
        if bar_shown {
            header.push("BY STATE".into());
            constraints.push(len(BAR as u16));
        }
        for (k, h) in headers.iter().enumerate().skip(1) {
            header.push(format!("{:>w$}", h, w = widths[k] as usize));
            constraints.push(len(widths[k]));
        }
        header.push(if area.width >= 100 { "OLDEST WAITED".into() } else { "WAITED".into() });
        constraints.push(Constraint::Fill(1));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        self.table(t, area, buf, (&header, &constraints), rows, sel);
    }

    pub(super) fn log_view(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let rows = self.log_rows();
        if rows.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "log entries");
        }
        let offset = self.vs().offset as usize;
        // Every time carries its date: a tail spans midnight, and today's 11:10 followed
        // yesterday's 11:59 with nothing to tell them apart. Below 120 columns the FROM and
        // WORKER / ACTOR columns go (the job's history has them) so the wire name and the
        // reason keep their room.
        let wide = area.width >= 120;
        let widths: Vec<Constraint> = if wide {
            vec![len(18), len(8), len(18), len(13), len(15), len(3), len(19), Constraint::Fill(1)]
        } else {
            vec![len(14), len(8), len(14), len(15), len(3), Constraint::Fill(1)]
        };
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
                let when = rfc3339(e.at);
                let when = if wide { when.get(5..23) } else { when.get(5..19) }.unwrap_or(&when).replacen('T', " ", 1);
                let wire = match self.log_wire_names.get(&e.job_id) {
                    Some(w) => Cell::from(clean(w, if wide { 18 } else { 14 })),
                    None => Cell::from("…").style(t.dim()),
                };
                let mut cells = vec![Cell::from(when), Cell::from(short_id(&e.job_id)), wire];
                if wide {
                    cells.push(Cell::from(e.from.map(|s| s.title()).unwrap_or("(new)")));
                }
                cells.push(Cell::from(format!("→ {}", e.to.title())).style(to_style));
                cells.push(Cell::from(format!("{:>3}", e.attempt)));
                let reason = clean(e.reason.as_deref().unwrap_or(""), fill);
                if wide {
                    cells.push(Cell::from(who));
                    cells.push(Cell::from(reason));
                } else if reason.is_empty() {
                    cells.push(Cell::from(clean(&who, fill)).style(t.dim()));
                } else {
                    cells.push(Cell::from(reason));
                }
                Row::new(cells)
            })
            .collect();
        let sel = (self.vs().selected as usize).checked_sub(offset);
        let header: &[&str] = if wide {
            &["TIME (UTC)", "JOB", "WIRE NAME", "FROM", "TO", "ATT", "WORKER / ACTOR", "REASON"]
        } else {
            &["TIME (UTC)", "JOB", "WIRE NAME", "TO", "ATT", "REASON (or who)"]
        };
        self.table(t, area, buf, (header, &widths), visible, sel);
    }

    /// Every registered worker, as Sidekiq's Busy tab: where it runs, its group, whether its
    /// heartbeat is fresh, since when it runs, and the jobs it holds now.
    pub(super) fn workers_view(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = self.snapshot.as_ref().filter(|s| s.query.as_ref().is_some_and(|q| q.view == View::Workers))
        else {
            return self.empty(t, area, buf, "workers");
        };
        if s.workers.is_empty() {
            self.header_only(t, area, buf);
            return self.empty(t, area, buf, "workers registered");
        }
        let now = self.now;
        let wide = area.width >= 120;
        let widths: Vec<Constraint> = if wide {
            vec![len(24), len(16), len(6), len(9), len(9), len(7), len(8), Constraint::Fill(1)]
        } else {
            vec![len(18), len(12), len(5), len(8), len(8), len(7), Constraint::Fill(1)]
        };
        let fill = fill_width(area, &widths);
        let offset = self.vs().offset as usize;
        let sel = (self.vs().selected as usize).checked_sub(offset);
        let rows = s
            .workers
            .iter()
            .skip(offset)
            .take(area.height as usize)
            .enumerate()
            .map(|(i, w)| {
                let live = w.is_live(now);
                let running = s.running_by_worker.get(&w.id).map(Vec::as_slice).unwrap_or(&[]);
                // What it runs, by wire name, most first: `charge-card ×3, send-email`.
                let mut by_wire: BTreeMap<&str, u64> = BTreeMap::new();
                for j in running {
                    *by_wire.entry(j.wire_name.as_str()).or_default() += 1;
                }
                let mut by_wire: Vec<(&str, u64)> = by_wire.into_iter().collect();
                by_wire.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                let what = by_wire
                    .iter()
                    .map(|(w, n)| if *n == 1 { sanitize(w).into_owned() } else { format!("{} ×{n}", sanitize(w)) })
                    .collect::<Vec<_>>()
                    .join(", ");
                let oldest = running.iter().map(|j| j.updated_at).min();
                let what = match (what.is_empty(), oldest) {
                    (true, _) | (_, None) => "idle".to_string(),
                    (false, Some(since)) => format!("{what} (longest {})", compact_duration(ms(now - since))),
                };
                let host = format!("{} {}/{}", pointer(sel == Some(i)), w.host, w.pid);
                let mut cells = vec![
                    Cell::from(clean(&host, if wide { 24 } else { 18 })),
                    Cell::from(clean(&w.group, if wide { 16 } else { 12 })),
                    Cell::from(if live { "live" } else { "stale" }).style(if live {
                        t.state(JobState::Succeeded)
                    } else {
                        t.error()
                    }),
                    Cell::from(relative(now, w.started_at)),
                    Cell::from(relative(now, w.last_heartbeat_at)),
                    Cell::from(format!("{:>7}", thousands(running.len() as u64))),
                ];
                if wide {
                    cells.push(Cell::from(clean(&w.queues.join(","), 8)));
                }
                cells.push(Cell::from(clean(&what, fill)));
                Row::new(cells)
            })
            .collect();
        let header: &[&str] = if wide {
            &["  HOST/PID", "GROUP", "STATE", "STARTED", "HEARTBEAT", "RUNNING", "QUEUES", "RUNS NOW (WIRE NAME ×JOBS)"]
        } else {
            &["  HOST/PID", "GROUP", "STATE", "STARTED", "BEAT", "RUNNING", "RUNS NOW"]
        };
        self.table(t, area, buf, (header, &widths), rows, sel);
    }
}

/// When a Scheduled job is due: `due` once it is, else `in 4m` (`in <1s` for the last second:
/// the column read `due` and `now` side by side, two words for one thing).
fn due(now: Millis, due_at: Millis) -> String {
    match due_at - now {
        d if d <= 0 => "due".to_string(),
        d if d < 1000 => "in <1s".to_string(),
        _ => relative(now, due_at),
    }
}

/// A figure right-aligned in a column `w` cells wide.
fn right(text: &str, w: u16) -> Cell<'static> {
    Cell::from(format!("{text:>w$}", w = w as usize))
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
