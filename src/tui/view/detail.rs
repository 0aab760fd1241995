//! The detail pane of one job: every field, the delay table with the next attempt, the live
//! handlers and the history, with failure detail only once it was revealed.

use super::*;

/// Text the detail pane shows whole (wrapped), up to this many characters: a multi-KB cause
/// is cut with an ellipsis rather than filling screens.
const LONG: usize = 2_000;

impl App {
    pub(super) fn detail_pane(&self, t: &Theme, area: Rect, buf: &mut Buffer) {
        let Some(d) = &self.nav.detail else { return };
        let block = Block::default().borders(Borders::TOP).title(Line::styled(format!(" job {} ", d.id), t.heading()));
        let inner = block.inner(area);
        block.render(area, buf);
        let Some(lines) = self.detail_lines(t) else {
            let asked = self.snapshot.as_ref().and_then(|s| s.query.as_ref()).and_then(|q| q.detail) == Some(d.id);
            let text =
                if asked { "this job is gone (purged by retention or `bw purge`)" } else { "reading the job…" };
            Paragraph::new(text).render(inner, buf);
            return;
        };
        // Long lines wrap instead of running off the edge (a cause, a reason or a worker id
        // cut at the border could not be read at all); j/k scroll by wrapped rows, and End
        // and j stop at the last screenful (see `detail_max_scroll`).
        let text = Paragraph::new(lines).wrap(Wrap { trim: false });
        let last = (text.line_count(inner.width) as u16).saturating_sub(inner.height);
        text.scroll((d.scroll.min(last), 0)).render(inner, buf);
    }

    /// How far the detail pane scrolls at the current size: its wrapped rows past one screen.
    /// The app clamps `j`/`k`/End to it, so `k` after End moves at once.
    pub fn detail_max_scroll(&self) -> u16 {
        let t = Theme { color: self.cfg.color };
        let Some(lines) = self.detail_lines(&t) else { return 0 };
        // The body under the header (and the filter line), less the footer and the pane's title.
        let rows = self.height.saturating_sub(HEADER_ROWS + 1 + self.filter_line_shown() as u16 + 1);
        let wrapped = Paragraph::new(lines).wrap(Wrap { trim: false }).line_count(self.width);
        (wrapped as u16).saturating_sub(rows)
    }

    /// The detail pane's lines, unwrapped; `None` until the open job has been read.
    fn detail_lines(&self, t: &Theme) -> Option<Vec<Line<'static>>> {
        let d = self.nav.detail.as_ref()?;
        let (job, history) = self.snapshot.as_ref().and_then(|s| s.detail.as_ref()).filter(|(j, _)| j.id == d.id)?;
        let now = self.now;
        let mut lines: Vec<Line<'static>> = Vec::new();
        let kv = |k: &str, v: String| Line::from(vec![Span::styled(format!("{k:<16}"), t.dim()), Span::raw(v)]);
        lines.push(Line::from(vec![
            Span::styled(clean(&job.wire_name, 40), t.heading()),
            Span::raw(format!(" · queue {} · ", clean(&job.queue, 20))),
            Span::styled(job.state.title(), t.state(job.state).add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                " {} · attempt {}{}",
                relative(now, job.finished_at.unwrap_or(job.updated_at)),
                job.attempt,
                job.max_attempts.map(|m| format!(" of {m}")).unwrap_or_default()
            )),
        ]));
        if let Some(cause) = &job.terminal_cause {
            lines.push(Line::from(vec![
                Span::styled(format!("{:<16}", "terminal cause"), t.dim()),
                Span::styled(clean(cause, LONG), t.state(job.state)),
            ]));
        }
        if let Some(r) = job.quarantine_reason {
            lines.push(kv("quarantined", r.as_str().to_string()));
        }
        lines.push(kv("worker group", job.worker_group.as_deref().map(|g| clean(g, 40)).unwrap_or_else(|| "—".into())));
        lines.push(kv(
            "created",
            format!(
                "{} ({})  updated {}",
                rfc3339(job.created_at),
                relative(now, job.created_at),
                relative(now, job.updated_at)
            ),
        ));
        let due = if job.state == JobState::Scheduled { relative(now, job.due_at) } else { "—".into() };
        lines.push(kv("due", due));
        lines.push(kv("priority", crate::text::priority_text(job.priority)));
        if let Some(f) = job.finished_at {
            lines.push(kv("finished", format!("{} ({})", rfc3339(f), relative(now, f))));
        }
        if let (Some(owner), Some(exp)) = (&job.lease_owner, job.lease_expires_at) {
            lines.push(kv("lease", format!("{} until {}", clean(owner, LONG), relative(now, exp))));
        }
        if let Some(who) = &job.cancel_requested_by {
            lines.push(kv("cancel asked", clean(who, 40)));
        }
        if !job.labels.is_empty() {
            let labels =
                job.labels.iter().map(|(k, v)| format!("{}={}", clean(k, 30), clean(v, 60))).collect::<Vec<_>>();
            lines.push(kv("labels", labels.join(" ")));
        }
        let payload = sanitize_bytes(&job.payload[..job.payload.len().min(400)]);
        lines.push(kv("payload", format!("{} ({} bytes)", truncate(&payload, 200), job.payload.len())));
        if let Some(p) = &job.progress {
            let when = if job.state == JobState::Running { String::new() } else { " (last reported)".into() };
            lines.push(kv("progress", format!("{}{when}", clean(&p.to_string(), 80))));
        }
        if let Some(o) = &job.output {
            let output = sanitize_bytes(&o[..o.len().min(400)]);
            lines.push(kv("output", format!("{} ({} bytes)", truncate(&output, 200), o.len())));
        }
        if let Some((wf, parents, children)) = self.snapshot.as_ref().and_then(|s| s.detail_workflow.as_ref()) {
            let edge = |id: &backwave::JobId, name: &str, state: Option<JobState>| {
                format!("{} {} {}", id.short(), clean(name, 30), state.map_or("deleted", |s| s.as_str()))
            };
            let list = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(", ") };
            lines.push(kv("workflow", wf.to_string()));
            lines.push(kv("parents", list(parents.iter().map(|p| edge(&p.id, &p.wire_name, p.state)).collect())));
            lines.push(kv("children", list(children.iter().map(|c| edge(&c.job, &c.wire_name, c.state)).collect())));
        }
        lines.push(self.delay_line(t, job));
        lines.push(Line::from(""));
        // Failure detail: hidden until revealed (audited), with why when it cannot be shown.
        let failures: Vec<&DetailStatus> =
            history.iter().map(|h| &h.detail).filter(|d| **d != DetailStatus::None).collect();
        match &d.reveal {
            Reveal::Shown(details) => {
                lines.push(Line::styled(
                    format!("failure detail (revealed to {}, audited)", clean(&self.cfg.actor, 20)),
                    t.heading(),
                ));
                if details.is_empty() {
                    lines.push(Line::from("  no failure detail was captured for this job"));
                }
                for (seq, fd) in details {
                    lines.push(Line::from(format!("  #{seq} {}: {}", clean(&fd.kind, 60), clean(&fd.message, LONG))));
                    for c in &fd.chain {
                        lines.push(Line::from(format!("    caused by: {}", clean(c, LONG))));
                    }
                    if let Some(bt) = &fd.backtrace {
                        // Traces are trimmed to the application's frames when captured (see
                        // engine::handler); older ones may still hold std's, hence the cap.
                        for l in sanitize_multiline(bt).lines().take(40) {
                            lines.push(Line::styled(format!("    {}", sanitize(l)), t.dim()));
                        }
                    }
                }
            }
            Reveal::Refused(e) => {
                lines.push(Line::styled(format!("failure detail not shown: {}", clean(e, 300)), t.error()));
            }
            Reveal::Asked => lines.push(Line::from("failure detail: asking the store…")),
            Reveal::Hidden => {
                let summary = failures
                    .iter()
                    .filter_map(|d| match d {
                        DetailStatus::Hidden { kind, bytes } => Some(format!("{}, {} B", clean(kind, 30), bytes)),
                        DetailStatus::NotCaptured => Some("not captured".into()),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                // Runs of the same kind and size read as one: `5 × panic, 5211 B`.
                let mut runs: Vec<(usize, String)> = Vec::new();
                for s in summary.iter() {
                    match runs.last_mut() {
                        Some((n, last)) if last == s => *n += 1,
                        _ => runs.push((1, s.clone())),
                    }
                }
                let runs: Vec<String> =
                    runs.into_iter().map(|(n, s)| if n == 1 { s } else { format!("{n} × {s}") }).collect();
                let text = if summary.is_empty() {
                    "failure detail: none recorded".to_string()
                } else {
                    format!("failure detail: hidden ({})", runs.join("; "))
                };
                let mut spans = vec![Span::raw(text)];
                if !summary.is_empty() && !self.cfg.read_only {
                    spans.push(Span::styled("   e: reveal (audited)", t.dim()));
                }
                lines.push(Line::from(spans));
            }
        }
        lines.push(Line::from(""));
        lines.push(Line::styled("history", t.heading()));
        for h in history {
            let who = match (&h.actor, &h.worker_id) {
                (Some(a), _) => format!("by {}", clean(a, 20)),
                (None, Some(w)) => format!("worker {}", clean(w, LONG)),
                _ => String::new(),
            };
            let when = rfc3339(h.at);
            let when = when.get(5..23).unwrap_or(&when).replacen('T', " ", 1);
            lines.push(Line::from(vec![
                Span::raw(format!("  {when}  ")),
                Span::raw(format!("{:<13}", h.from.map(|s| s.title()).unwrap_or("(new)"))),
                Span::styled(format!("→ {:<14}", h.to.title()), t.state(h.to)),
                Span::raw(match h.reason.as_deref() {
                    // Padded only when a reason follows: trailing blanks wrapped into empty rows.
                    Some(reason) if !reason.is_empty() => {
                        format!("attempt {:<3} {who:<28} {}", h.attempt, clean(reason, LONG))
                    }
                    _ => format!("attempt {:<3} {who}", h.attempt).trim_end().to_string(),
                }),
            ]));
        }
        Some(lines)
    }

    /// The job's delay table, the wait before its next attempt marked `[ ]`.
    pub(super) fn delay_line(&self, t: &Theme, job: &Job) -> Line<'static> {
        let Some(table) = &job.delay_table else {
            return Line::from(vec![
                Span::styled(format!("{:<16}", "delays"), t.dim()),
                Span::raw("written at the first claim (the claiming worker group's retry policy)"),
            ]);
        };
        let mut spans = vec![Span::styled(format!("{:<16}", "delays"), t.dim())];
        if table.is_empty() {
            spans.push(Span::raw("none: a budget of one attempt, no retries"));
            return Line::from(spans);
        }
        // After failed attempt n the job waits table[n-1]; a Scheduled job with attempt n > 0
        // is waiting that one now.
        let next =
            if job.state == JobState::Scheduled && job.attempt > 0 { Some(job.attempt as usize - 1) } else { None };
        for (i, ms) in table.iter().enumerate() {
            let text = compact_duration(std::time::Duration::from_millis(*ms));
            if Some(i) == next {
                spans.push(Span::styled(format!("[{text}] "), t.heading().add_modifier(Modifier::UNDERLINED)));
            } else {
                spans.push(Span::raw(format!("{text} ")));
            }
        }
        if let Some(i) = next {
            spans.push(Span::styled(
                format!(" waiting after attempt {}; attempt {} {}", i + 1, i + 2, relative(self.now, job.due_at)),
                t.dim(),
            ));
        }
        Line::from(spans)
    }
}
