//! The two chart rows under the counts: successes and failures per minute over the last hour,
//! one bar a minute, scaled to the busiest minute.

use super::*;

impl App {
    pub(super) fn chart_rows(&self, t: &Theme, ok_row: Rect, failed_row: Rect, buf: &mut Buffer) {
        const LABEL: usize = 15;
        const TAIL: usize = 27;
        let room = (ok_row.width as usize).saturating_sub(LABEL + TAIL + 1);
        // One cell per minute when there is room for the hour, else one per two (or more).
        let per_cell = (CHART_MINUTES as usize).div_ceil(room.max(1)).max(1) as i64;
        let cells = CHART_MINUTES / per_cell;
        let now_minute = self.now.div_euclid(60_000);
        let series: Vec<(u64, u64)> = (0..cells)
            .rev()
            .map(|back| {
                (0..per_cell).fold((0, 0), |(a, b), k| {
                    let (x, y) = self.feed.chart.get(&(now_minute - back * per_cell - k)).copied().unwrap_or((0, 0));
                    (a + x, b + y)
                })
            })
            .collect();
        let max = series.iter().map(|(a, b)| (*a).max(*b)).max().unwrap_or(0);
        let (ok_total, failed_total): (u64, u64) =
            self.feed.chart.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        // On a busy store the chart counts the hour back a batch per refresh: until it has
        // caught up with the log, its totals are a partial count, not the last hour's.
        let span_label = if self.feed.chart_cursor < self.feed.log_cursor {
            "so far, counting…".to_string()
        } else if per_cell == 1 {
            "last hour".to_string()
        } else {
            format!("last hour, {per_cell}m/bar")
        };
        let bars = |pick: fn(&(u64, u64)) -> u64| -> String { series.iter().map(|v| bar(pick(v), max)).collect() };
        let line = |label: &str, bars: String, total: u64, style: Style| {
            Line::from(vec![
                Span::raw(format!(" {label:<width$}", width = LABEL - 1)),
                Span::styled(bars, style),
                Span::raw(format!(" {:>8} {span_label}", thousands(total))),
            ])
        };
        line("succeeded/min", bars(|v| v.0), ok_total, t.state(JobState::Succeeded)).render(ok_row, buf);
        line("failed/min", bars(|v| v.1), failed_total, t.state(JobState::DeadLettered)).render(failed_row, buf);
    }
}

pub(super) fn bar(v: u64, max: u64) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if v == 0 || max == 0 {
        return ' ';
    }
    let i = ((v as f64 / max as f64) * 7.0).round() as usize;
    BARS[i.min(7)]
}
