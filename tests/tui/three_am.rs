//! Issue 19, the dashboard half: what a tired operator tripped over in `bw top` at 3 a.m., one
//! test per finding (each failed before its fix), and every view at 80x24 and 200x50 on counts
//! in the millions.

use std::time::Duration;

use backwave::store::PauseKind;
use backwave::{JobState, NewJob, WorkerInfo};
use bw::tui::app::{PAUSE_FOR, TABS_ROW};
use bw::tui::data::Op;
use bw::tui::{keymap, Action, Mode, Response, View};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::harness::*;
use super::{code, keys, screen};
use crate::backend::both_backends;

/// A snapshot beside the others in tests/snapshots (this file is one folder down).
fn snap(name: impl Into<String>, screen: String) {
    let name: String = name.into();
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, screen);
    });
}

fn ctrl(app: &mut bw::tui::App, f: &Fixture, c: char) {
    let a = keymap::action_for(&app.mode, KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
        .unwrap_or_else(|| panic!("Ctrl-{c} has an action in {:?}", app.mode));
    f.press(app, [a]);
}

/// Clear the `/` prompt, type `filter`, apply it and refresh.
fn refilter(app: &mut bw::tui::App, f: &Fixture, filter: &str) {
    keys(app, f, "/");
    ctrl(app, f, 'u');
    keys(app, f, filter);
    code(app, f, KeyCode::Enter);
    f.refresh(app);
}

fn prompt(app: &bw::tui::App) -> (String, usize) {
    match &app.mode {
        Mode::Filter { input } => (input.value().to_string(), input.cursor()),
        other => panic!("not typing a filter: {other:?}"),
    }
}

// ---- 6. Typos answer with a did-you-mean, here as in `bw jobs list` ----

both_backends! {
    // Issue 19's note: `/queue:bluk` showed "no jobs match the filter", while `bw jobs list
    // --queue bluk` says on stderr that no job has that queue, and which one was meant.
    fn a_filter_naming_an_unknown_queue_or_wire_name_says_which_was_meant() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "/queue:bluk");
        code(&mut app, &f, KeyCode::Enter);
        f.refresh(&mut app);
        assert_eq!(app.list_len(), 0);
        let text = screen(&f, &app);
        assert!(text.contains("no job or worker has queue 'bluk'; did you mean 'bulk'?"), "{text}");
        refilter(&mut app, &f, "wire:resize-imag");
        let text = screen(&f, &app);
        assert!(text.contains("wire name 'resize-imag'; did you mean 'resize-image'?"), "{text}");
        // A known name that matches nothing in this view is just an empty list.
        refilter(&mut app, &f, "queue:critical wire:noop");
        let text = screen(&f, &app);
        assert!(text.contains("jobs match the filter (/ to change it)") && !text.contains("did you mean"), "{text}");
    }
}

both_backends! {
    // Found by a plan audit: the known wire names are a scan of every job (1-2 s at 1,000,000
    // jobs), and an empty filtered list read them on every refresh, so a typo in `/` kept the
    // dashboard scanning the store every second for as long as it was on screen.
    fn an_empty_filtered_list_checks_its_names_once_per_filter_not_every_refresh() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let checked_at = |app: &bw::tui::App| app.snapshot.as_ref().and_then(|s| s.names_checked.as_ref()).map(|c| c.1);
        keys(&mut app, &f, "/queue:bluk");
        code(&mut app, &f, KeyCode::Enter);
        f.refresh(&mut app);
        let text = screen(&f, &app);
        assert!(text.contains("no job or worker has queue 'bluk'; did you mean 'bulk'?"), "{text}");
        let first = checked_at(&app).expect("the empty list's names were checked");
        for _ in 0..3 {
            f.tick(1_000);
            assert!(!app.query().check_names, "the same filter within 10 s is not checked again");
            f.refresh(&mut app);
            assert_eq!(checked_at(&app), Some(first), "kept from the first check, not read again");
            let text = screen(&f, &app);
            assert!(text.contains("no job or worker has queue 'bluk'; did you mean 'bulk'?"), "{text}");
        }
        f.tick(bw::tui::data::NAMES_EVERY_MS as u64);
        f.refresh(&mut app);
        assert!(checked_at(&app) > Some(first), "checked again once 10 s have passed");
        refilter(&mut app, &f, "wire:resize-imag");
        let text = screen(&f, &app);
        assert!(
            text.contains("wire name 'resize-imag'; did you mean 'resize-image'?"),
            "another filter is checked at once: {text}"
        );
        assert!(!text.contains("'bluk'"), "{text}");
    }
}

// ---- 1. Esc never quits ----

both_backends! {
    fn esc_never_quits_not_even_after_a_filter_and_q_quits_from_the_top() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "/wire:send-email");
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.list_len(), 1);
        // The report: this Esc ended the dashboard (an active filter is no level to back out of).
        for _ in 0..3 {
            code(&mut app, &f, KeyCode::Esc);
            assert!(!app.quit, "Esc quit");
        }
        assert_eq!(app.list_len(), 1, "the filter stays");
        assert!(app.notice.as_deref().unwrap_or("").contains("q quits"), "{:?}", app.notice);
        // Esc still backs out of what is open.
        code(&mut app, &f, KeyCode::Enter);
        assert!(app.nav.detail.is_some());
        code(&mut app, &f, KeyCode::Esc);
        assert!(app.nav.detail.is_none() && !app.quit);
        keys(&mut app, &f, "q");
        assert!(app.quit, "q at the top quits");
    }
}

both_backends! {
    fn q_asks_before_quitting_a_dashboard_that_bw_demo_started() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        app.cfg.ask_before_quit = true;
        f.refresh(&mut app);
        keys(&mut app, &f, "q");
        assert_eq!(app.mode, Mode::ConfirmQuit);
        assert!(!app.quit);
        let s = screen(&f, &app);
        assert!(s.contains("Quit, and stop the demo?") && s.contains("[y] quit") && s.contains("[n] stay"), "{s}");
        snap("tui__confirm_quit_demo_80x24", s);
        code(&mut app, &f, KeyCode::Esc);
        assert_eq!((app.mode.clone(), app.quit), (Mode::Normal, false), "Esc answers no");
        keys(&mut app, &f, "qn");
        assert!(!app.quit);
        keys(&mut app, &f, "qy");
        assert!(app.quit);
    }
}

// ---- 2. The `/` prompt is a line editor ----

both_backends! {
    fn the_filter_prompt_edits_like_a_shell_line_and_no_key_typed_there_reaches_the_commands() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "/wire:flaky");
        // The report: Ctrl-U closed the prompt, and the 3 typed next switched the view.
        ctrl(&mut app, &f, 'u');
        assert_eq!(prompt(&app), (String::new(), 0), "Ctrl-U clears the line, the prompt stays");
        keys(&mut app, &f, "3 r x n P E X q j");
        assert_eq!(app.nav.view, View::DeadLettered, "no key typed in the prompt is a command");
        assert!(app.take_requests().is_empty());
        assert_eq!(prompt(&app).0, "3 r x n P E X q j");
        ctrl(&mut app, &f, 'u');
        keys(&mut app, &f, "wire:charge-card high");
        ctrl(&mut app, &f, 'w');
        assert_eq!(prompt(&app).0, "wire:charge-card ", "Ctrl-W deletes the word before the cursor");
        ctrl(&mut app, &f, 'a');
        keys(&mut app, &f, "cause:timeout ");
        assert_eq!(prompt(&app), ("cause:timeout wire:charge-card ".to_string(), 14), "Ctrl-A: typed at the start");
        ctrl(&mut app, &f, 'e');
        code(&mut app, &f, KeyCode::Left);
        code(&mut app, &f, KeyCode::Backspace);
        assert_eq!(prompt(&app).0, "cause:timeout wire:charge-car ");
        code(&mut app, &f, KeyCode::Home);
        code(&mut app, &f, KeyCode::Delete);
        code(&mut app, &f, KeyCode::End);
        keys(&mut app, &f, "d");
        assert_eq!(prompt(&app).0, "ause:timeout wire:charge-car d");
        ctrl(&mut app, &f, 'u');
        keys(&mut app, &f, "wire:charge-card");
        // The cursor is drawn where it is, in a line that says which keys edit.
        let s = screen(&f, &app);
        assert!(s.contains(" / wire:charge-card") && s.contains("Ctrl-U clear"), "{s}");
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.mode, Mode::Normal);
        assert_eq!(app.list_len(), 3);
        // History: Up brings back the filters applied, Down returns to the line being typed.
        keys(&mut app, &f, "/");
        ctrl(&mut app, &f, 'u');
        keys(&mut app, &f, "high");
        code(&mut app, &f, KeyCode::Up);
        assert_eq!(prompt(&app).0, "wire:charge-card");
        code(&mut app, &f, KeyCode::Down);
        assert_eq!(prompt(&app).0, "high");
        code(&mut app, &f, KeyCode::Esc);
        assert_eq!(app.mode, Mode::Normal);
        assert!(!app.quit, "Esc closed the prompt only");
        assert_eq!(app.vs().filter_text, "wire:charge-card", "Esc applies nothing");
    }
}

// ---- 3. Every view at 80x24 and 200x50 with counts in the millions ----

/// Counts in the millions on top of the fixture's real jobs: every per-queue count of the
/// last snapshot scaled up, the list totals with them, and a throughput per queue.
fn millions(app: &mut bw::tui::App) {
    let mut s = app.snapshot.clone().expect("a snapshot");
    for (i, m) in s.counts.by_queue.values_mut().enumerate() {
        for (k, n) in m.iter_mut() {
            let rank = JobState::ALL.iter().position(|s| s == k).unwrap() as u64;
            *n = *n * 99_177_229 / (rank + 1) + i as u64 * 1_234_567;
        }
    }
    if let Some(p) = s.page.as_mut() {
        p.total = p.total * 1_234_567 + 89;
    }
    // Taken as freshly read groups (the app keeps the groups it holds otherwise).
    if let Some(q) = s.query.as_mut() {
        q.read_groups = q.grouped;
    }
    for g in &mut s.cause_groups {
        g.count *= 1_234_567;
    }
    for g in &mut s.quarantine_groups {
        g.count *= 7_654_321;
    }
    for l in &mut s.latency {
        l.due_now *= 3_456_789;
    }
    app.feed.throughput =
        s.counts.by_queue.keys().enumerate().map(|(i, q)| (q.clone(), 237.04 * 37f64.powi(i as i32))).collect();
    app.update(Action::Store(Response::Snapshot(Box::new(s))));
}

/// Columns that ran together read as one number (`99177,229`): a comma followed by four digits.
fn assert_no_run_together_numbers(s: &str) {
    for line in s.lines() {
        let b = line.as_bytes();
        for i in 0..b.len().saturating_sub(4) {
            if b[i] == b',' && b[i + 1..i + 5].iter().all(u8::is_ascii_digit) {
                panic!("numbers run together in: {line}\n{s}");
            }
        }
    }
}

both_backends! {
    fn screen_every_view_at_80x24_and_200x50_with_counts_in_the_millions() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        // A registered worker that runs the fixture's Running job, for the Workers view.
        register_live_worker(&f);
        let names = ["dead_lettered", "quarantined", "running", "scheduled", "queues", "log", "workers"];
        for (w, h) in [(80, 24), (200, 50)] {
            app.update(Action::Resize(w, h));
            for (i, name) in names.iter().enumerate() {
                keys(&mut app, &f, &(i + 1).to_string());
                f.refresh(&mut app);
                millions(&mut app);
                let s = screen(&f, &app);
                assert_no_run_together_numbers(&s);
                let counts = s.lines().nth(1).unwrap();
                for state in ["Dead", "Quar", "Run", "Sched", "OK|Succeeded", "Canc"] {
                    let shown = state.split('|').any(|word| counts.contains(word));
                    assert!(shown, "{name} {w}x{h}: {state} missing from the counts row:\n{s}");
                }
                snap(format!("tui__millions_{name}_{w}x{h}"), s);
            }
        }
    }
}

both_backends! {
    fn the_queues_view_keeps_per_state_counts_and_a_spaced_cursor_at_80_columns() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        keys(&mut app, &f, "5");
        f.refresh(&mut app);
        millions(&mut app);
        let s = render(&app);
        let heading = s.lines().nth(5).unwrap();
        for h in ["QUEUE", "TOTAL", "SCHED", "RUN", "OK", "DEAD", "QUAR", "CANC", "DUE NOW", "DONE/MIN"] {
            assert!(heading.contains(h), "{h} missing at 80 columns: {heading}\n{s}");
        }
        let row = s.lines().find(|l| l.contains('▶')).expect("a selected queue");
        assert!(row.trim_start().starts_with("▶ bulk"), "the cursor is spaced from the name: {row}");
        assert!(row.contains("/min") && !row.contains("/mi "), "DONE/MIN whole: {row}");
        // At 200 columns the exact counts, with the bar.
        app.update(Action::Resize(200, 50));
        f.refresh(&mut app);
        millions(&mut app);
        let s = render(&app);
        assert!(s.contains("99,177,229") && s.contains("BY STATE"), "{s}");
        assert!(s.contains("237/min") || s.contains("237.0/min"), "{s}");
    }
}

// ---- 9. Text is never cut with no way to read it ----

both_backends! {
    fn the_detail_pane_wraps_a_long_cause_and_worker_id_instead_of_cutting_them_at_the_edge() {
        let mut f = Fixture::with_jobs();
        let cause = format!("upstream said: {} END-OF-CAUSE", "gateway refused the charge, retry later; ".repeat(5));
        let id = f.enqueue(NewJob::new("charge-card", "arrivals", "{}"));
        let policy = backwave::RetryPolicy::new(1, Duration::from_secs(2)).unwrap();
        let queues = vec!["arrivals".to_string()];
        let worker = "a-very-long-host-name.eu-west-1.compute.internal/4242/strict-priority#WORKER-TAIL";
        let claim = backwave::store::ClaimRequest {
            worker_id: worker,
            group: "default",
            queues: &queues,
            limit: 1,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        };
        assert_eq!(f.store.claim(&claim).unwrap().len(), 1);
        f.store
            .complete(&backwave::store::Completion {
                job_id: id,
                worker_id: worker.into(),
                attempt: 1,
                outcome: backwave::store::Outcome::Failed { message: cause.clone(), detail: None, retry_in: None },
            })
            .unwrap();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        assert_eq!(app.selected_job().unwrap().id, id);
        code(&mut app, &f, KeyCode::Enter);
        let s = render(&app);
        assert!(s.contains("END-OF-CAUSE"), "the whole cause, wrapped:\n{s}");
        // The history is further down: j scrolls by wrapped rows until the worker id shows.
        let mut seen = false;
        for _ in 0..40 {
            // Wrapped: the id may be split across rows, never cut.
            if render(&app).replace('\n', "").contains("strict-priority#WORKER-TAIL") {
                seen = true;
                break;
            }
            keys(&mut app, &f, "j");
        }
        assert!(seen, "the worker id is readable:\n{}", render(&app));
        // End stops at the last screenful: one k shows something new at once.
        code(&mut app, &f, KeyCode::End);
        let bottom = render(&app);
        keys(&mut app, &f, "k");
        assert_ne!(render(&app), bottom, "End scrolled past the end");
    }
}

both_backends! {
    fn the_list_cause_has_room_at_80_columns() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        let s = render(&app);
        let row = s.lines().find(|l| l.contains("smtp 550")).expect("the send-email row");
        let cause = &row[row.find("smtp").unwrap()..];
        assert!(cause.chars().count() >= 25, "CAUSE is {} cells at 80 columns: {row}", cause.chars().count());
    }
}

// ---- 8. Bulk actions act on the set the operator confirmed ----

both_backends! {
    fn x_cancels_only_the_jobs_its_plan_counted_and_says_how_many_arrived_after() {
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "4/wire:resize-image");
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "X");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?} {:?}", app.mode, app.error) };
        assert_eq!((p.op, p.affected), (Op::Cancel, 1));
        // Two more arrive while the operator reads the plan.
        f.tick(1);
        let late = [
            f.enqueue(NewJob::new("resize-image", "bulk", "{\"w\":1}")),
            f.enqueue(NewJob::new("resize-image", "bulk", "{\"w\":2}")),
        ];
        keys(&mut app, &f, "y");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Cancelled 1", "{r:?}");
        assert!(r.lines.iter().any(|l| l.starts_with("2 jobs were enqueued after the plan: left alone")), "{r:?}");
        for id in late {
            assert_eq!(f.store.job(id).unwrap().unwrap().state, JobState::Scheduled, "an arrival was cancelled");
        }
    }
}

both_backends! {
    fn a_group_requeue_requeues_only_what_its_plan_counted() {
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        f.press(&mut app, [Action::ToggleGroup]);
        let group = app.snapshot.as_ref().unwrap().cause_groups.iter().position(|g| g.wire_name == "charge-card").unwrap();
        for _ in 0..group {
            keys(&mut app, &f, "j");
        }
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?} {:?}", app.mode, app.error) };
        assert_eq!(p.affected, 3);
        // One more charge-card job fails the same way while the dialog is open.
        f.tick(1);
        let late = f.enqueue(NewJob::new("charge-card", "high", "{\"amount\":1}"));
        let queues = vec!["high".to_string()];
        let policy = backwave::RetryPolicy::new(1, Duration::from_secs(2)).unwrap();
        let claim = backwave::store::ClaimRequest {
            worker_id: "w",
            group: "default",
            queues: &queues,
            limit: 1,
            lease: Duration::from_secs(60),
            policy: &policy,
            handler_policies: &[],
        };
        assert_eq!(f.store.claim(&claim).unwrap().len(), 1);
        f.tick(10);
        f.store
            .complete(&backwave::store::Completion {
                job_id: late,
                worker_id: "w".into(),
                attempt: 1,
                outcome: backwave::store::Outcome::Failed { message: "gateway timeout (attempt 1)".into(), detail: None, retry_in: None },
            })
            .unwrap();
        keys(&mut app, &f, "y");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Requeued 3 jobs", "{r:?}");
        assert!(r.lines.iter().any(|l| l.starts_with("1 job joined the group after the plan")), "{r:?}");
        assert_eq!(f.store.job(late).unwrap().unwrap().state, JobState::DeadLettered);
    }
}

// ---- 10. The Log view: wire names and dates ----

both_backends! {
    fn the_log_view_shows_each_entrys_wire_name_and_date() {
        let f = Fixture::with_jobs();
        for (w, h) in [(80, 24), (120, 32)] {
            let mut app = f.app(w, h);
            keys(&mut app, &f, "6");
            f.refresh(&mut app);
            let s = render(&app);
            assert!(s.lines().nth(5).unwrap().contains("WIRE NAME"), "{s}");
            let entries: Vec<&str> = s.lines().skip(6).take_while(|l| l.contains('→')).collect();
            assert!(entries.len() >= 15, "{s}");
            for row in &entries {
                // 2026-11-30: every time carries its date; every entry its job's wire name.
                assert!(row.starts_with("11-30 11:"), "{w}x{h}: {row}");
                let named = ["charge-card", "send-email", "invoice.render", "noop", "resize-image"];
                assert!(named.iter().any(|n| row.contains(n)), "{w}x{h}: no wire name in: {row}\n{s}");
            }
        }
    }
}

// ---- 5, the dashboard's side: refuse before the plan ----

both_backends! {
    fn requeue_and_cancel_are_refused_before_any_plan_without_operate() {
        let f = Fixture::with_jobs();
        f.store.revoke("root", ACTOR, backwave::Permission::Operate).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        for (view, key) in [("1", "r"), ("2", "r"), ("4", "x"), ("4", "X")] {
            keys(&mut app, &f, view);
            app.take_requests();
            keys(&mut app, &f, key);
            assert_eq!(app.mode, Mode::Normal, "{view}{key}: {:?}", app.mode);
            let e = app.error.clone().unwrap_or_default();
            assert!(e.contains("needs the operate permission"), "{view}{key}: {e}");
        }
        assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 4);
    }
}

// ---- smaller ----

both_backends! {
    fn due_never_reads_now_beside_due() {
        let mut f = Fixture::with_jobs();
        f.enqueue(NewJob::new("resize-image", "bulk", "{}").due_at(f.clock.now() + 500));
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "4");
        f.refresh(&mut app);
        let s = render(&app);
        assert!(s.contains("in <1s"), "{s}");
        let due_column: Vec<&str> = s.lines().skip(6).filter(|l| l.contains("resize-image")).collect();
        assert!(due_column.iter().all(|l| !l.contains(" now ")), "{s}");
    }
}

both_backends! {
    fn p_offers_a_pause_for_a_while_that_ends_by_itself() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        keys(&mut app, &f, "5P");
        let s = render(&app);
        assert!(s.contains("[y] until resumed") && s.contains("[2] for 1h"), "{s}");
        keys(&mut app, &f, "2");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Paused queue bulk for 1h");
        let pauses = f.store.pauses().unwrap();
        assert_eq!(pauses.len(), 1);
        assert_eq!((pauses[0].kind, pauses[0].until), (PauseKind::Queue, Some(f.clock.now() + PAUSE_FOR[1].as_millis() as i64)));
        keys(&mut app, &f, "q");
        f.refresh(&mut app);
        assert!(render(&app).lines().next().unwrap().contains("PAUSED: queue bulk until 13:00Z"));
    }
}

both_backends! {
    fn marks_show_without_colour() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        app.cfg.color = false;
        f.refresh(&mut app);
        keys(&mut app, &f, " ");
        let buf = render_buffer(&app);
        let s = render(&app);
        let (y, row) = s.lines().enumerate().find(|(_, l)| l.starts_with(" *")).expect("a marked row shows `*`");
        assert!(row.contains("smtp 550") || row.contains("charge-card"), "{row}");
        let bold = (0..buf.area.width).any(|x| buf[(x, y as u16)].modifier.contains(ratatui::style::Modifier::BOLD));
        assert!(bold, "a marked row is bold");
    }
}

both_backends! {
    fn a_group_requeue_of_one_unhandled_job_speaks_in_the_singular() {
        // One Quarantined job whose wire name no live worker handles, while a worker runs (with
        // no worker at all, the job would wait for one rather than quarantine again).
        let mut f = Fixture::empty();
        f.store.grant("root", ACTOR, backwave::Permission::Operate).unwrap();
        f.quarantine_no_handler_now("invoice.render");
        register_live_worker(&f);
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "2");
        f.refresh(&mut app);
        keys(&mut app, &f, "r");
        let s = render(&app);
        assert!(s.contains("1 has no live worker (invoice.render) and is left alone: it would quarantine again"), "{s}");
    }
}

// ---- Also expected: Workers view, mouse ----

both_backends! {
    fn the_workers_view_lists_each_worker_with_what_it_runs() {
        let f = Fixture::with_jobs();
        register_live_worker(&f);
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "7");
        assert_eq!(app.nav.view, View::Workers);
        f.refresh(&mut app);
        assert_eq!(app.list_len(), 2);
        let s = render(&app);
        let busy = s.lines().find(|l| l.contains("demo-host/4242")).expect("the worker running a job");
        assert!(busy.contains("strict-priority") && busy.contains("live") && busy.contains("resize-image"), "{busy}");
        assert!(busy.contains("1h ago"), "since when it runs: {busy}");
        let idle = s.lines().find(|l| l.contains("host-a/4411")).expect("the fixture's worker");
        assert!(idle.contains("idle"), "{idle}");
        assert!(!s.lines().last().unwrap().contains("/ filter"), "nothing to filter here: {s}");
        keys(&mut app, &f, "/");
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.notice.as_deref().unwrap_or("").contains("lists every worker"), "{:?}", app.notice);
        snap("tui__view_workers", screen(&f, &app));
    }
}

both_backends! {
    fn a_click_shows_a_tab_selects_a_row_and_opens_it_and_the_wheel_moves() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let queues = app.tab_labels(120).into_iter().find(|(v, ..)| *v == View::Queues).unwrap();
        f.press(&mut app, [Action::Click { column: queues.2 + 1, row: TABS_ROW }]);
        assert_eq!(app.nav.view, View::Queues);
        let dead = app.tab_labels(120).into_iter().find(|(v, ..)| *v == View::DeadLettered).unwrap();
        f.press(&mut app, [Action::Click { column: dead.3 - 1, row: TABS_ROW }]);
        assert_eq!(app.nav.view, View::DeadLettered);
        let first = app.first_list_row();
        f.press(&mut app, [Action::Click { column: 30, row: first + 2 }]);
        assert_eq!(app.vs().selected, 2);
        assert!(app.nav.detail.is_none());
        f.press(&mut app, [Action::Click { column: 30, row: first + 2 }]);
        assert_eq!(app.nav.detail.as_ref().map(|d| d.id), Some(app.page_jobs()[2].id), "a click on the selected row opens it");
        keys(&mut app, &f, "q");
        f.press(&mut app, [Action::Wheel { down: false }]);
        assert_eq!(app.vs().selected, 0);
        f.press(&mut app, [Action::Wheel { down: true }]);
        assert_eq!(app.vs().selected, 3);
        // A click below the list does nothing.
        f.press(&mut app, [Action::Click { column: 30, row: 31 }]);
        assert_eq!(app.vs().selected, 3);
    }
}

both_backends! {
    // Found in a 3 a.m. walkthrough: in a 60x20 terminal the dashboard shows only "needs a
    // terminal of at least 80x24 ... q: quit", yet Enter, `r`, `y` typed there requeued the
    // selected Dead-Lettered job, which the operator saw only after enlarging the window.
    fn behind_the_too_small_screen_no_key_acts_and_q_quits() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        f.press(&mut app, [Action::ShowView(View::DeadLettered)]);
        assert!(app.list_len() > 0);
        let dead = || f.store.counts().unwrap().total(JobState::DeadLettered);
        let before = dead();
        f.press(&mut app, [Action::Resize(60, 20)]);
        assert!(screen(&f, &app).contains("needs a terminal of at least 80×24"));
        for k in [KeyCode::Enter, KeyCode::Char('r'), KeyCode::Char('y'), KeyCode::Char('c'), KeyCode::Char('y')] {
            let key = KeyEvent::new(k, KeyModifiers::NONE);
            assert!(app.action_for_key(key).is_none(), "{k:?} acts behind the too-small screen");
            // Nor does the action the key has at a usable size, however it arrives (a mouse click).
            if let Some(a) = keymap::action_for(&app.mode, key) {
                f.press(&mut app, [a]);
            }
        }
        assert!(matches!(app.mode, Mode::Normal), "{:?}", app.mode);
        assert_eq!(dead(), before, "a job was acted on behind the too-small screen");
        // Enlarged again: the same keys work as before.
        f.press(&mut app, [Action::Resize(120, 32)]);
        let r = app.action_for_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE)).unwrap();
        f.press(&mut app, [r]);
        assert!(matches!(app.mode, Mode::Confirm(_)), "{:?}", app.mode);
        f.press(&mut app, [Action::Decline]);
        // And small again, `q` quits at once, as the screen says.
        f.press(&mut app, [Action::Resize(60, 20)]);
        let q = app.action_for_key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)).unwrap();
        f.press(&mut app, [q]);
        assert!(app.quit);
    }
}

/// A live worker of group `strict-priority` (it runs the fixture's Running job and handles only
/// `resize-image`), registered an hour ago and heartbeating.
fn register_live_worker(f: &Fixture) {
    f.store
        .register_worker(&WorkerInfo {
            id: "demo-host/4242/strict-priority#0001".into(),
            group: "strict-priority".into(),
            host: "demo-host".into(),
            pid: 4242,
            wire_names: vec!["resize-image".into()],
            queues: vec!["bulk".into()],
            started_at: T0 - 3_600_000,
            last_heartbeat_at: T0 - 2_000,
            stale_after_ms: 30_000,
        })
        .unwrap();
}
