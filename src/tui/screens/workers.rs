//! The Workers view: every registered worker ([`Store::workers`]) with the Running jobs it
//! holds, as Sidekiq's Busy tab. Nothing to open or filter.

use std::collections::{BTreeMap, HashMap};

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row as TableRow};

use super::{App, Info, Open, Query, Row, Screen, Snapshot, View};
use crate::text::{compact_duration, relative, sanitize, thousands};
use crate::tui::data::WORKERS_RUNNING_LIMIT;
use crate::tui::view::{clean, fill_width, header_only, len, ms, pointer, Theme};
use backwave::store::JobFilter;
use backwave::{Job, JobState, Store};

pub(super) const VIEW: Info = Info::of("Workers", "Wrk", &Workers);

pub(crate) struct Workers;

impl Screen for Workers {
    fn read(&self, store: &Store, _q: &Query, s: &mut Snapshot) -> backwave::Result<()> {
        s.workers = store.workers()?;
        // What each runs: the Running jobs by lease owner (the worker's id). Capped: a store
        // with more jobs running than this has the Running view to page through them.
        let running = store.list_jobs(&JobFilter::state(JobState::Running), WORKERS_RUNNING_LIMIT, 0)?;
        let mut by_worker: HashMap<String, Vec<Job>> = HashMap::new();
        for j in running.jobs {
            if let Some(owner) = j.lease_owner.clone() {
                by_worker.entry(owner).or_default().push(j);
            }
        }
        s.running_by_worker = by_worker;
        Ok(())
    }

    fn len(&self, app: &App) -> u64 {
        app.snapshot_for_view().map_or(0, |s| s.workers.len() as u64)
    }

    fn row(&self, app: &App, index: u64) -> Option<Row> {
        let s = app.snapshot_for_view()?;
        s.workers.get(index as usize).map(|w| Row::Worker(w.id.clone()))
    }

    fn find(&self, app: &App, row: &Row) -> Option<u64> {
        let Row::Worker(id) = row else { return None };
        let s = app.snapshot_for_view()?;
        s.workers.iter().position(|w| w.id == *id).map(|i| i as u64)
    }

    fn open(&self, _app: &App, _index: u64) -> Option<Open> {
        None
    }

    fn unfiltered(&self) -> Option<&'static str> {
        Some("the Workers view lists every worker: / filters the job lists and the Log")
    }

    /// Every registered worker, as Sidekiq's Busy tab: where it runs, its group, whether its
    /// heartbeat is fresh, since when it runs, and the jobs it holds now.
    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(s) = app.snapshot.as_ref().filter(|s| s.query.as_ref().is_some_and(|q| q.view == View::Workers))
        else {
            return app.empty(t, area, buf, "workers");
        };
        if s.workers.is_empty() {
            header_only(t, area, buf);
            return app.empty(t, area, buf, "workers registered");
        }
        let now = app.now;
        let wide = area.width >= 120;
        let widths: Vec<Constraint> = if wide {
            vec![len(24), len(16), len(6), len(9), len(9), len(7), len(8), Constraint::Fill(1)]
        } else {
            vec![len(18), len(12), len(5), len(8), len(8), len(7), Constraint::Fill(1)]
        };
        let fill = fill_width(area, &widths);
        let offset = app.vs().offset as usize;
        let sel = (app.vs().selected as usize).checked_sub(offset);
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
                TableRow::new(cells)
            })
            .collect();
        let header: &[&str] = if wide {
            &["  HOST/PID", "GROUP", "STATE", "STARTED", "HEARTBEAT", "RUNNING", "QUEUES", "RUNS NOW (WIRE NAME ×JOBS)"]
        } else {
            &["  HOST/PID", "GROUP", "STATE", "STARTED", "BEAT", "RUNNING", "RUNS NOW"]
        };
        app.table(t, area, buf, (header, &widths), rows, sel);
    }
}
