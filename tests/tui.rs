//! `bw top`, met the way an operator meets it: keys become actions and actions change the
//! dashboard (no terminal), every view drawn on ratatui's TestBackend and snapshotted with time
//! pinned and ids named by creation order, and the real binary driven on a pty.

use crate::backend;
#[path = "tui/e2e.rs"]
mod e2e;
#[path = "tui/harness.rs"]
mod harness;
use crate::pty;
#[path = "tui/schedules.rs"]
mod schedules;
#[path = "tui/snapshot.rs"]
mod snapshot;
#[path = "tui/three_am.rs"]
mod three_am;

use backend::both_backends;
use backwave::{JobState, Permission};
use bw::tui::app::{DbStatus, Reveal};
use bw::tui::data::{Op, Target};
use bw::tui::{keymap, Action, Mode, Request, Response, View};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use harness::*;

pub(crate) fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

pub(crate) fn keys(app: &mut bw::tui::App, f: &Fixture, text: &str) {
    for c in text.chars() {
        let a = keymap::action_for(&app.mode, key(c)).unwrap_or_else(|| panic!("'{c}' has an action"));
        f.press(app, [a]);
    }
}

pub(crate) fn code(app: &mut bw::tui::App, f: &Fixture, code: KeyCode) {
    let a = keymap::action_for(&app.mode, KeyEvent::new(code, KeyModifiers::NONE)).expect("key has an action");
    f.press(app, [a]);
}

// ---- keys -> actions -> state, no terminal ----

#[test]
fn keys_map_to_actions_by_mode() {
    use bw::tui::app::Mode as M;
    let n = M::Normal;
    assert!(matches!(keymap::action_for(&n, key('j')), Some(Action::Down)));
    assert!(matches!(keymap::action_for(&n, KeyEvent::new(KeyCode::Up, KeyModifiers::NONE)), Some(Action::Up)));
    assert!(matches!(keymap::action_for(&n, key('3')), Some(Action::ShowView(View::Running))));
    assert!(matches!(keymap::action_for(&n, key('G')), Some(Action::Bottom)));
    assert!(matches!(
        keymap::action_for(&n, KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT)),
        Some(Action::PrevView)
    ));
    // Ctrl-C quits from anywhere, even while typing a filter.
    let typing = M::Filter { input: bw::tui::prompt::Prompt::new("") };
    assert!(matches!(
        keymap::action_for(&typing, KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Action::Quit)
    ));
    // While typing, q and j are text.
    assert!(matches!(
        keymap::action_for(&typing, key('q')),
        Some(Action::FilterEdit(bw::tui::prompt::InputRequest::InsertChar('q')))
    ));
    // A dialog listens to y and n only.
    assert!(keymap::action_for(&M::Help, key('z')).is_some());
}

both_backends! {
    fn views_switch_with_tab_h_l_and_digits() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        assert_eq!(app.nav.view, View::DeadLettered);
        code(&mut app, &f, KeyCode::Tab);
        assert_eq!(app.nav.view, View::Quarantined);
        keys(&mut app, &f, "l");
        assert_eq!(app.nav.view, View::Running);
        keys(&mut app, &f, "h");
        code(&mut app, &f, KeyCode::BackTab);
        assert_eq!(app.nav.view, View::DeadLettered);
        code(&mut app, &f, KeyCode::BackTab);
        assert_eq!(app.nav.view, View::Workflows, "Shift-Tab wraps around");
        keys(&mut app, &f, "4");
        assert_eq!(app.nav.view, View::Scheduled);
        // The refresh that followed asked for the view's state.
        let q = app.query();
        assert_eq!(q.filter.unwrap().states, vec![JobState::Scheduled]);
        assert_eq!(app.page_jobs().len(), 2);
    }
}

both_backends! {
    fn gg_goes_to_the_top_and_a_lone_g_groups_by_cause() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "jjj");
        assert_eq!(app.vs().selected, 3);
        keys(&mut app, &f, "gg");
        assert_eq!(app.vs().selected, 0);
        assert!(!app.vs().grouped, "gg is not a group toggle");
        keys(&mut app, &f, "G");
        assert_eq!(app.vs().selected, 3, "four Dead-Lettered jobs: the last is index 3");
        // A lone g: after the timeout it means "group by cause".
        keys(&mut app, &f, "g");
        f.press(&mut app, [Action::Tick(f.clock.now() + bw::tui::app::G_TIMEOUT_MS)]);
        assert!(app.vs().grouped);
        let groups = &app.snapshot.as_ref().unwrap().cause_groups;
        assert_eq!(groups.len(), 2);
        assert_eq!((groups[0].wire_name.as_str(), groups[0].count), ("charge-card", 3));
        assert_eq!(groups[0].fingerprint, "gateway timeout (attempt #)");
        // Enter opens the group as its jobs; q goes back to the groups.
        code(&mut app, &f, KeyCode::Enter);
        assert!(!app.vs().grouped);
        assert_eq!(app.list_len(), 3);
        assert!(app.page_jobs().iter().all(|j| j.wire_name == "charge-card"));
        keys(&mut app, &f, "q");
        assert!(app.vs().grouped && !app.quit);
    }
}

both_backends! {
    fn a_view_left_grouped_comes_back_ungrouped_so_r_asks_about_one_job() {
        // Found on a walk: Dead-Lettered grouped, a trip through views 5-8, and back in view 1
        // `r` offered to requeue a whole group to an operator who expected the job under the
        // cursor.
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "g");
        f.press(&mut app, [Action::Tick(f.clock.now() + bw::tui::app::G_TIMEOUT_MS)]);
        assert!(app.nav.grouped());
        for view in ["5", "6", "7", "8", "1"] {
            keys(&mut app, &f, view);
        }
        assert_eq!(app.nav.view, View::DeadLettered);
        assert!(!app.nav.grouped(), "back to its default: one row per job");
        let id = app.selected_job().expect("the jobs are listed again").id;
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("a confirmation, got {:?}", app.mode) };
        assert_eq!((p.target.clone(), p.affected), (Target::Jobs(vec![id]), 1));
        // Quarantined opens grouped and comes back grouped: that is its default.
        keys(&mut app, &f, "n2");
        assert!(app.nav.grouped());
        keys(&mut app, &f, "g");
        f.press(&mut app, [Action::Tick(f.clock.now() + bw::tui::app::G_TIMEOUT_MS)]);
        assert!(!app.nav.grouped());
        keys(&mut app, &f, "52");
        assert!(app.nav.grouped());
    }
}

both_backends! {
    fn paging_moves_through_the_store_a_page_at_a_time() {
        let mut f = Fixture::empty();
        for i in 0..60 {
            f.enqueue(backwave::NewJob::new("bulk-job", "bulk", format!("{{\"n\":{i}}}")));
        }
        let mut app = f.app(80, 24);
        keys(&mut app, &f, "4");
        let rows = app.page_rows();
        assert_eq!(rows, 17, "80x24 leaves 17 rows for jobs");
        assert_eq!(app.page_jobs().len(), rows, "one page is loaded, not every row");
        assert_eq!(app.list_len(), 60);
        code(&mut app, &f, KeyCode::PageDown);
        assert_eq!(app.vs().selected, rows as u64);
        assert_eq!(app.snapshot.as_ref().unwrap().page_offset, 1, "scrolled just enough to show the selection");
        assert_eq!(app.selected_job().unwrap().id, f.ids[rows], "the selected row is the job at that position");
        code(&mut app, &f, KeyCode::End);
        assert_eq!(app.vs().selected, 59);
        assert_eq!(app.selected_job().unwrap().id, f.ids[59]);
        assert_eq!(app.query().offset, 60 - rows as u64);
        code(&mut app, &f, KeyCode::Home);
        assert_eq!(app.selected_job().unwrap().id, f.ids[0]);
    }
}

both_backends! {
    fn filters_apply_qualifiers_and_bad_ones_say_why_without_applying() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "/wire:send-email");
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.mode, Mode::Normal);
        assert_eq!(app.list_len(), 1);
        assert_eq!(app.page_jobs()[0].wire_name, "send-email");
        // Plain text that names a queue filters by queue.
        keys(&mut app, &f, "/");
        for _ in 0.."wire:send-email".len() {
            code(&mut app, &f, KeyCode::Backspace);
        }
        keys(&mut app, &f, "high");
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.list_len(), 3);
        // A bad filter: a one-line error quoting it, the old filter still applied, still typing.
        keys(&mut app, &f, "/");
        keys(&mut app, &f, " colour:red");
        code(&mut app, &f, KeyCode::Enter);
        let err = app.error.clone().expect("an error");
        assert!(err.contains("'colour:'"), "{err}");
        assert!(matches!(app.mode, Mode::Filter { .. }));
        assert_eq!(app.list_len(), 3, "the previous filter still holds");
        code(&mut app, &f, KeyCode::Esc);
        keys(&mut app, &f, "/");
        keys(&mut app, &f, " since:soon");
        code(&mut app, &f, KeyCode::Enter);
        assert!(app.error.clone().unwrap().contains("'soon'"));
        let screen = render(&app);
        assert!(screen.contains("'soon' in since:"), "the error is on screen:\n{screen}");
    }
}

both_backends! {
    fn read_only_disables_every_action() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        app.cfg.read_only = true;
        f.refresh(&mut app);
        for c in ['r', 'x', 'e'] {
            keys(&mut app, &f, &c.to_string());
            assert_eq!(app.mode, Mode::Normal);
            let err = app.error.clone().unwrap();
            assert!(err.contains("--read-only"), "{c}: {err}");
            assert!(app.take_requests().is_empty());
        }
        let dead = f.store.counts().unwrap().total(JobState::DeadLettered);
        assert_eq!(dead, 4, "nothing changed");
    }
}

both_backends! {
    fn requeue_of_the_selected_job_asks_then_reports_per_job() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let id = app.selected_job().unwrap().id;
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("a confirmation, got {:?}", app.mode) };
        assert_eq!((p.op, p.affected, p.would_requarantine), (Op::Requeue, 1, 0));
        assert_eq!(p.target, Target::Jobs(vec![id]));
        assert_eq!(f.store.job(id).unwrap().unwrap().state, JobState::DeadLettered, "nothing before y");
        keys(&mut app, &f, "y");
        let Mode::Results(report) = &app.mode else { panic!("results, got {:?}", app.mode) };
        assert_eq!(report.title, "Requeued 1 of 1");
        assert!(report.lines[0].contains("requeued (was Dead-Lettered)"), "{:?}", report.lines);
        let job = f.store.job(id).unwrap().unwrap();
        assert_eq!((job.state, job.attempt), (JobState::Scheduled, 0));
        let last = f.store.history(id).unwrap().pop().unwrap();
        assert_eq!(last.actor.as_deref(), Some(ACTOR));
        keys(&mut app, &f, "n");
        assert_eq!(app.mode, Mode::Normal);
    }
}

both_backends! {
    fn declining_changes_nothing() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "r");
        assert!(matches!(app.mode, Mode::Confirm(_)));
        keys(&mut app, &f, "n");
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.notice.clone().unwrap().contains("nothing changed"));
        assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 4);
    }
}

both_backends! {
    fn the_selection_stays_on_its_job_when_new_failures_arrive_above_it() {
        // New Dead-Lettered jobs push the list down; the selection stayed on the row, so Enter or
        // r acted on whichever job had slid under it.
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "j");
        let chosen = app.selected_job().unwrap().id;
        f.dead_letter_now("charge-card");
        f.dead_letter_now("charge-card");
        f.refresh(&mut app);
        assert_eq!(app.page_jobs().len(), 6, "both new failures are listed");
        assert_eq!(app.selected_job().unwrap().id, chosen);
        assert_eq!(app.vs().selected, 3);
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("a confirmation, got {:?}", app.mode) };
        assert_eq!(p.target, Target::Jobs(vec![chosen]));
        // On the top row the dashboard keeps watching the newest failure.
        keys(&mut app, &f, "ngg");
        let newest = f.dead_letter_now("charge-card");
        f.refresh(&mut app);
        assert_eq!(app.selected_job().unwrap().id, newest);
    }
}

both_backends! {
    fn a_cause_too_long_for_the_screen_ends_in_an_ellipsis_instead_of_being_clipped() {
        // The table clipped the last column silently: "gateway timeout (a" read as a whole cause.
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        let screen = render(&app);
        let line = screen.lines().find(|l| l.contains("send-email")).expect("a send-email row");
        assert!(line.trim_end().ends_with('…'), "{line}");
        let mut wide = f.app(160, 32);
        f.refresh(&mut wide);
        let screen = render(&wide);
        let line = screen.lines().find(|l| l.contains("charge-card")).expect("a charge-card row");
        assert!(line.trim_end().ends_with("(attempt 3)"), "the whole cause when it fits: {line}");
    }
}

both_backends! {
    fn the_chart_says_it_is_still_counting_until_it_has_caught_up_with_the_hour() {
        // On a busy store the first refreshes count the hour a batch at a time, and the header
        // showed the partial sums as "N last hour", well under the real count.
        let f = Fixture::empty();
        let jobs: Vec<backwave::NewJob> =
            (0..2_500).map(|i| backwave::NewJob::new("send-email", "high", format!("{{\"n\":{i}}}"))).collect();
        f.store.enqueue_many(&jobs).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let screen = render(&app);
        assert!(screen.contains("so far, counting…") && !screen.contains("last hour"), "{screen}");
        f.refresh(&mut app);
        let screen = render(&app);
        assert!(screen.contains("last hour") && !screen.contains("counting"), "{screen}");
    }
}

both_backends! {
    fn q_from_a_queues_scheduled_jobs_goes_back_to_queues_instead_of_quitting() {
        // Enter on a queue opened its scheduled jobs, and the next q quit the dashboard.
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "5");
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.nav.view, View::Scheduled);
        assert!(app.vs().filter.queue.is_some(), "{:?}", app.vs().filter);
        keys(&mut app, &f, "q");
        assert!(!app.quit);
        assert_eq!(app.nav.view, View::Queues);
        // The Scheduled view is whole again when visited, and q at the top still quits.
        keys(&mut app, &f, "4");
        assert!(app.vs().filter.is_empty());
        keys(&mut app, &f, "q");
        assert!(app.quit);
    }
}

both_backends! {
    fn enter_on_a_queue_named_with_a_space_or_quote_lists_exactly_its_jobs() {
        // "queue:night shift" was parsed as queue "night" plus the word "shift": nothing matched;
        // a quote in the name was refused as an unclosed quote.
        let mut f = Fixture::empty();
        for q in ["night shift", "o\"brien"] {
            f.enqueue(backwave::NewJob::new("send-email", q, "{}"));
        }
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "5");
        for (i, q) in ["night shift", "o\"brien"].iter().enumerate() {
            if i > 0 {
                keys(&mut app, &f, "5j");
            }
            code(&mut app, &f, KeyCode::Enter);
            assert_eq!(app.mode, Mode::Normal, "{:?}", app.error);
            assert_eq!(app.vs().filter.queue.as_deref(), Some(*q));
            assert_eq!(app.page_jobs().len(), 1, "the job of queue {q}");
            keys(&mut app, &f, "q");
            assert_eq!(app.nav.view, View::Queues);
        }
    }
}

both_backends! {
    fn paused_and_read_only_stay_visible_at_80_columns_with_a_long_store_path() {
        // They ended the title line, past the 80th column: a paused dashboard looked live.
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        app.cfg.store = "/var/lib/backwave/production/shared/backwave.db".into();
        app.cfg.read_only = true;
        f.refresh(&mut app);
        keys(&mut app, &f, "p");
        let title = render(&app).lines().next().unwrap().to_string();
        assert!(title.contains("FROZEN (p)") && title.contains("READ-ONLY"), "{title}");
    }
}

both_backends! {
    fn requeueing_a_group_of_one_says_one_job() {
        // The report read "Requeued 1 jobs" / "1 Dead-Lettered send-email jobs ... are Scheduled".
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        f.press(&mut app, [Action::ToggleGroup]);
        let one = app.snapshot.as_ref().unwrap().cause_groups.iter().position(|g| g.count == 1).expect("a group of one");
        for _ in 0..one {
            keys(&mut app, &f, "j");
        }
        keys(&mut app, &f, "ry");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Requeued 1 job");
        assert!(r.lines[0].starts_with("1 Dead-Lettered") && r.lines[0].contains(" job with cause"), "{:?}", r.lines);
        assert!(r.lines[0].ends_with("is Scheduled now"), "{:?}", r.lines);
    }
}

both_backends! {
    fn a_confirmation_whose_text_wraps_still_shows_its_y_n_prompt() {
        // The dialog was sized one row per line: a wrapped line pushed "[y] yes [n] no" out of it.
        let mut f = Fixture::with_jobs();
        for name in ["invoice.render-monthly", "legacy-report-nightly", "export-quarterly-ledger"] {
            f.dead_letter_now(name);
        }
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        keys(&mut app, &f, "   r");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(p.unhandled.len(), 3, "{p:?}");
        let screen = render(&app);
        assert!(screen.contains("[y] yes    [n] no"), "{screen}");
        assert!(screen.contains("export-quarterly-ledger"), "the wrapped part is shown too: {screen}");
        // The marked jobs are named (found at 3 a.m.: "2 marked jobs" hid one never looked at).
        let Target::Jobs(ids) = &p.target else { panic!("{:?}", p.target) };
        let named = format!("3 marked jobs: {}", ids.iter().map(|id| id.short()).collect::<Vec<_>>().join(" "));
        assert!(screen.contains(&named), "{named} in {screen}");
    }
}

both_backends! {
    fn requeueing_an_undecodable_payload_group_does_not_promise_it_will_not_quarantine_again() {
        // charge-card has a live worker, so the dialog said "0 would re-quarantine": but payloads
        // that did not decode quarantine again unless the handler changed.
        let mut f = Fixture::with_jobs();
        f.quarantine_undecodable_now();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "2");
        let i = app.snapshot.as_ref().unwrap().quarantine_groups.iter().position(|g| g.wire_name == "charge-card").unwrap();
        for _ in 0..i {
            keys(&mut app, &f, "j");
        }
        keys(&mut app, &f, "r");
        assert!(matches!(&app.mode, Mode::Confirm(_)), "{:?}", app.mode);
        let screen = render(&app);
        assert!(!screen.contains("0 would re-quarantine"), "{screen}");
        assert!(screen.contains("1: payload did not decode; it quarantines again unless the handler now accepts it"), "{screen}");
        // The same for the job itself, opened and requeued on its own.
        keys(&mut app, &f, "n");
        code(&mut app, &f, KeyCode::Enter);
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!((p.affected, p.undecodable), (1, 1));
        let screen = render(&app);
        assert!(!screen.contains("0 would re-quarantine"), "{screen}");
        assert!(screen.contains("1: payload did not decode"), "{screen}");
    }
}

both_backends! {
    fn the_selected_group_stays_selected_when_groups_are_re_read_in_a_new_order() {
        // Groups come back re-sorted every ten seconds; the selection stayed on the row, so Enter
        // opened, and r requeued, a different group than the one chosen.
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        f.press(&mut app, [Action::ToggleGroup]);
        let before = app.snapshot.as_ref().unwrap().cause_groups.clone();
        assert!(before.len() >= 2, "{before:?}");
        keys(&mut app, &f, "j");
        let chosen = (before[1].wire_name.clone(), before[1].fingerprint.clone());
        for _ in 0..5 {
            f.dead_letter_now("bulk-import");
        }
        f.tick(11_000);
        f.refresh(&mut app);
        let after = &app.snapshot.as_ref().unwrap().cause_groups;
        assert_eq!(after.len(), before.len() + 1, "re-read: {after:?}");
        assert_eq!(after[0].wire_name, "bulk-import", "the new, largest group sorts first: {after:?}");
        let g = &after[app.vs().selected as usize];
        assert_eq!((g.wire_name.clone(), g.fingerprint.clone()), chosen);
    }
}

both_backends! {
    fn groups_are_re_read_within_seconds_once_the_header_count_moves() {
        // Found at 3 a.m.: the header said 43 Dead-Lettered while the groups summed to 39 for
        // ten seconds. Unchanged counts keep the ten-second rhythm (the grouping reads every
        // failed job); a moved count re-reads them after two seconds.
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        f.press(&mut app, [Action::ToggleGroup]);
        let sum = |app: &bw::tui::App| app.snapshot.as_ref().unwrap().cause_groups.iter().map(|g| g.count).sum::<u64>();
        let header = |app: &bw::tui::App| app.snapshot.as_ref().unwrap().counts.total(JobState::DeadLettered);
        assert_eq!(sum(&app), header(&app));
        f.dead_letter_now("bulk-import");
        f.refresh(&mut app);
        assert_eq!(sum(&app) + 1, header(&app), "within two seconds the groups are kept");
        f.tick(2_000);
        f.refresh(&mut app);
        assert_eq!(sum(&app), header(&app), "re-read once the count moved");
    }
}

both_backends! {
    fn the_log_selection_stays_on_its_entry_when_new_entries_arrive() {
        // New entries pushed the log down under a fixed row: Enter opened another job.
        let mut f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "6jj");
        let chosen = app.log_rows()[2].clone();
        f.dead_letter_now("bulk-import");
        f.refresh(&mut app);
        assert_eq!(app.log_rows()[0].job_id, *f.ids.last().unwrap(), "the new entries are on top");
        assert_eq!(app.log_rows()[app.vs().selected as usize].seq, chosen.seq);
        code(&mut app, &f, KeyCode::Enter);
        assert_eq!(app.nav.detail.as_ref().unwrap().id, chosen.job_id);
    }
}

both_backends! {
    fn declining_a_reveal_or_cancel_says_so_in_plain_words() {
        // It read "Reveal failure detail of cancelled: nothing changed" and "Cancel cancelled".
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "en");
        assert_eq!(app.notice.as_deref(), Some("Reveal declined: nothing changed"));
        keys(&mut app, &f, "q4x");
        assert!(matches!(&app.mode, Mode::Confirm(p) if p.op == Op::Cancel), "{:?}", app.mode);
        keys(&mut app, &f, "n");
        assert_eq!(app.notice.as_deref(), Some("Cancel declined: nothing changed"));
    }
}

both_backends! {
    fn marked_jobs_are_requeued_together_and_cancel_reports_each() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "  ");
        assert_eq!(app.nav.marks.len(), 2);
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!() };
        assert_eq!(p.affected, 2);
        keys(&mut app, &f, "y");
        assert!(matches!(&app.mode, Mode::Results(r) if r.title == "Requeued 2 of 2"));
        assert!(app.nav.marks.is_empty());
        assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 2);
        // Cancel in Scheduled: the selected job, reported job by job.
        keys(&mut app, &f, "q4");
        keys(&mut app, &f, "x");
        assert!(matches!(&app.mode, Mode::Confirm(p) if p.op == Op::Cancel && p.affected == 1));
        keys(&mut app, &f, "y");
        let Mode::Results(r) = &app.mode else { panic!() };
        assert!(r.lines[0].ends_with("cancelled"), "{:?}", r.lines);
    }
}

both_backends! {
    fn group_requeue_counts_exactly_and_says_how_many_would_requarantine() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        // Dead-Lettered by cause: charge-card has a live worker.
        f.press(&mut app, [Action::ToggleGroup]);
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!((p.affected, p.would_requarantine), (3, 0));
        let screen = render(&app);
        assert!(screen.contains("Requeue 3 jobs?") && screen.contains("0 would re-quarantine"), "{screen}");
        keys(&mut app, &f, "n");
        // Quarantined (grouped by default): nobody handles invoice.render.
        keys(&mut app, &f, "2");
        keys(&mut app, &f, "r");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!((p.affected, p.would_requarantine), (2, 2));
        assert_eq!(p.unhandled, vec!["invoice.render".to_string()]);
        keys(&mut app, &f, "y");
        // Like `bw requeue --state quarantined` without --force (#13): jobs no live worker handles
        // are left alone instead of being requeued only to quarantine again.
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Requeued 0 jobs");
        assert!(r.refused && r.lines.iter().any(|l| l.contains("no live worker handles invoice.render")), "{r:?}");
        assert_eq!(f.store.counts().unwrap().total(JobState::Quarantined), 2);
    }
}

both_backends! {
    /// #13 / #10: the group requeue skips jobs no live worker handles unless forced, like the
    /// CLI; the dialog says so in words and offers forcing as its own key, never the default.
    fn a_group_requeue_leaves_unhandled_jobs_alone_unless_f_includes_them() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        // Every charge-card job has a live worker: nothing to force, so f is not offered and does
        // nothing.
        f.press(&mut app, [Action::ToggleGroup]);
        keys(&mut app, &f, "r");
        assert!(!render(&app).contains("[f]"), "{}", render(&app));
        keys(&mut app, &f, "f");
        assert!(matches!(&app.mode, Mode::Confirm(p) if !p.force), "{:?}", app.mode);
        keys(&mut app, &f, "n");
        // invoice.render has no worker: y would requeue none of the two, f includes them.
        keys(&mut app, &f, "2r");
        let screen = render(&app);
        assert!(screen.contains("Requeue 0 of 2 jobs?"), "{screen}");
        assert!(screen.contains("0 will be Scheduled now with a fresh attempt budget;"), "{screen}");
        assert!(screen.contains("2 have no live worker (invoice.render) and are left alone"), "{screen}");
        assert!(screen.contains("[f] include them anyway"), "{screen}");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert!(!p.force, "force is never the default");
        keys(&mut app, &f, "f");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Requeued 2 jobs");
        assert!(!r.refused, "{r:?}");
        let counts = f.store.counts().unwrap();
        assert_eq!((counts.total(JobState::Quarantined), counts.total(JobState::Scheduled)), (0, 4));
    }
}

both_backends! {
    fn p_in_the_queues_view_pauses_the_selected_queue_after_showing_the_plan_and_resumes_it() {
        use backwave::store::PauseKind;
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "5P");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(p.op, Op::Pause);
        assert_eq!(p.target, Target::Paused { kind: PauseKind::Queue, name: "bulk".into() });
        assert_eq!((p.affected, p.running), (1, 1), "bulk holds one Scheduled and one Running job");
        insta::assert_snapshot!("tui__confirm_pause_queue", screen(&f, &app));
        keys(&mut app, &f, "y");
        assert!(matches!(&app.mode, Mode::Results(r) if r.title == "Paused queue bulk" && !r.refused), "{:?}", app.mode);
        let pauses = f.store.pauses().unwrap();
        assert_eq!((pauses.len(), pauses[0].kind, pauses[0].paused_by.as_str()), (1, PauseKind::Queue, ACTOR));
        keys(&mut app, &f, "q");
        f.refresh(&mut app);
        let s = screen(&f, &app);
        assert!(s.lines().next().unwrap().contains("PAUSED: queue bulk"), "{s}");
        assert!(s.lines().any(|l| l.starts_with("▶ bulk") && l.contains("PAUSED")), "{s}");
        assert!(!s.lines().any(|l| l.contains("critical") && l.contains("PAUSED")), "{s}");
        insta::assert_snapshot!("tui__view_queues_paused", s);
        // Paused now, so the same key resumes.
        keys(&mut app, &f, "P");
        assert!(matches!(&app.mode, Mode::Confirm(p) if p.op == Op::Resume && p.affected == 1), "{:?}", app.mode);
        keys(&mut app, &f, "y");
        assert!(matches!(&app.mode, Mode::Results(r) if r.title == "Resumed queue bulk"), "{:?}", app.mode);
        assert!(f.store.pauses().unwrap().is_empty());
        keys(&mut app, &f, "q");
        f.refresh(&mut app);
        assert!(!render(&app).contains("PAUSED"));
    }
}

both_backends! {
    fn p_on_a_job_pauses_its_wire_name_and_the_header_shows_each_pause_with_its_expiry() {
        use backwave::store::PauseKind;
        let f = Fixture::with_jobs();
        f.store.pause(ACTOR, PauseKind::Queue, "critical", Some(T0 + 30 * 60_000), false).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let wire = app.selected_job().unwrap().wire_name.clone();
        keys(&mut app, &f, "P");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?} {:?}", app.mode, app.error) };
        assert_eq!(p.target, Target::Paused { kind: PauseKind::WireName, name: wire.clone() });
        keys(&mut app, &f, "y");
        keys(&mut app, &f, "q");
        f.refresh(&mut app);
        let title = render(&app).lines().next().unwrap().to_string();
        assert!(title.contains(&format!("PAUSED: queue critical until 12:30Z, wire-name {wire}")), "{title}");
        assert!(f.store.pauses().unwrap().iter().any(|p| p.kind == PauseKind::WireName && p.name == wire));
    }
}

both_backends! {
    fn pause_run_now_and_edit_are_refused_before_any_dialog_without_operate() {
        let f = Fixture::with_jobs();
        f.store.revoke("root", ACTOR, Permission::Operate).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        for (view, key) in [("5", "P"), ("1", "E"), ("4", "n")] {
            keys(&mut app, &f, view);
            keys(&mut app, &f, key);
            assert_eq!(app.mode, Mode::Normal, "{key}");
            let e = app.error.clone().unwrap_or_default();
            assert!(e.contains("needs the operate permission") && e.contains("alice"), "{key}: {e}");
            assert!(app.take_requests().is_empty() && app.take_editor().is_none());
        }
        assert!(f.store.pauses().unwrap().is_empty());
    }
}

both_backends! {
    fn run_now_previews_then_makes_marked_scheduled_jobs_due_and_reports_each() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        // On a Dead-Lettered job there is nothing to run now: requeue is the verb for those.
        keys(&mut app, &f, "n");
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.error.as_deref().unwrap_or("").contains("is Dead-Lettered"), "{:?}", app.error);
        keys(&mut app, &f, "4  n");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!((p.op, p.affected, p.already_due), (Op::RunNow, 2, 1));
        let s = render(&app);
        assert!(s.contains("1 will be due now") && s.contains("1 already due: left as it is"), "{s}");
        keys(&mut app, &f, "y");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Due now: 2 of 2");
        assert!(r.lines.iter().any(|l| l.ends_with("attempt and budget unchanged")), "{:?}", r.lines);
        assert!(r.lines.iter().any(|l| l.ends_with("(it already was)")), "{:?}", r.lines);
        let later = f.store.job(f.ids[12]).unwrap().unwrap();
        assert_eq!((later.state, later.due_at, later.attempt), (JobState::Scheduled, f.clock.now(), 0));
    }
}

both_backends! {
    fn cancel_of_marked_jobs_counts_what_ends_at_once_and_what_is_asked_to_stop() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "4 3 x");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!((p.op, p.affected, p.running), (Op::Cancel, 2, 1));
        let s = render(&app);
        assert!(s.contains("1 Scheduled will end Cancelled at once"), "{s}");
        assert!(s.contains("1 Running will be asked to stop"), "{s}");
        keys(&mut app, &f, "y");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert_eq!(r.title, "Cancelled 2 of 2");
        assert!(r.lines.iter().any(|l| l.ends_with("cancelled")) && r.lines.iter().any(|l| l.contains("asked to stop")));
        assert_eq!(f.store.counts().unwrap().total(JobState::Cancelled), 1);
    }
}

both_backends! {
    /// `X`: the filtered Scheduled list cancelled in bulk, through the plan and the call of
    /// `bw cancel --state scheduled --wire-name …`.
    fn x_upper_cancels_the_filtered_scheduled_list_after_its_exact_plan() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "4/wire:charge-card");
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "X");
        let Mode::Confirm(p) = &app.mode else { panic!("{:?} {:?}", app.mode, app.error) };
        assert_eq!((p.op, p.affected, p.running), (Op::Cancel, 1, 0));
        let s = screen(&f, &app);
        assert!(s.contains("every Scheduled job matching wire:charge-card"), "{s}");
        assert!(s.contains("1 Scheduled will end Cancelled at once"), "{s}");
        insta::assert_snapshot!("tui__confirm_cancel_matching", s);
        keys(&mut app, &f, "y");
        assert!(matches!(&app.mode, Mode::Results(r) if r.title == "Cancelled 1"), "{:?}", app.mode);
        let counts = f.store.counts().unwrap();
        assert_eq!((counts.total(JobState::Cancelled), counts.total(JobState::Scheduled)), (1, 1), "resize-image stays");
        // Not on a terminal list.
        keys(&mut app, &f, "q1X");
        assert!(app.error.as_deref().unwrap_or("").contains("Scheduled or Running list"), "{:?}", app.error);
    }
}

both_backends! {
    fn the_new_dialogs_keep_their_answers_on_screen_at_80x24() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        keys(&mut app, &f, "2r");
        let s = render(&app);
        assert!(s.contains("[f] include them anyway") && s.contains("[n] no"), "{s}");
        assert!(s.contains("are left alone"), "{s}");
        insta::assert_snapshot!("tui__confirm_requeue_force_80x24", screen(&f, &app));
        keys(&mut app, &f, "n5P");
        let s = render(&app);
        assert!(s.contains("Pause queue bulk?") && s.contains("[y] until resumed"), "{s}");
        keys(&mut app, &f, "n2");
        f.press(&mut app, [Action::ToggleGroup]);
        keys(&mut app, &f, "E");
        app.take_editor().unwrap();
        app.update(Action::Edited(Ok(
            b"{\"card_token\":\"tok_1\",\"amount\":100,\"currency\":\"EUR\",\"note\":\"long\"}".to_vec()
        )));
        let s = render(&app);
        assert!(s.contains("[r] save and requeue") && s.contains("[n] discard") && s.contains("now  {"), "{s}");
    }
}

both_backends! {
    /// `E`, the editor's answer fed back as the terminal loop would: a bad edit says why in one
    /// line and saves nothing; e re-opens the editor on the text as it was left; r saves and
    /// requeues in one call.
    fn e_edits_a_quarantined_payload_refuses_bad_json_reopens_and_saves_with_requeue() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        // Scheduled jobs are not edited.
        keys(&mut app, &f, "4E");
        assert!(app.error.as_deref().unwrap_or("").contains("Dead-Lettered or Quarantined"), "{:?}", app.error);
        assert!(app.take_editor().is_none());
        keys(&mut app, &f, "2");
        f.press(&mut app, [Action::ToggleGroup]);
        let job = app.selected_job().unwrap().clone();
        keys(&mut app, &f, "E");
        let edit = app.take_editor().expect("the editor is asked for");
        assert_eq!((edit.id, edit.payload.as_slice()), (job.id, b"{}".as_slice()));
        assert!(matches!(app.mode, Mode::Editing { .. }));
        assert!(keymap::action_for(&app.mode, key('y')).is_none(), "keys belong to the editor");
        app.update(Action::Edited(Ok(b"{\"amount\":\n".to_vec())));
        let Mode::EditInvalid { error, .. } = &app.mode else { panic!("{:?}", app.mode) };
        assert!(error.starts_with("'{\"amount\":' is not valid JSON: EOF"), "{error}");
        insta::assert_snapshot!("tui__edit_invalid", screen(&f, &app));
        keys(&mut app, &f, "e");
        assert_eq!(app.take_editor().unwrap().payload, b"{\"amount\":\n", "re-opened on the text as left");
        app.update(Action::Edited(Ok(b"{\"amount\":5}\n".to_vec())));
        assert!(matches!(app.mode, Mode::SaveEdit { .. }), "{:?}", app.mode);
        insta::assert_snapshot!("tui__edit_save", screen(&f, &app));
        assert_eq!(f.store.job(job.id).unwrap().unwrap().payload, b"{}", "nothing saved before the answer");
        keys(&mut app, &f, "r");
        let Mode::Results(r) = &app.mode else { panic!("{:?}", app.mode) };
        assert!(!r.refused && r.lines[1].contains("requeued (was Quarantined)"), "{r:?}");
        let saved = f.store.job(job.id).unwrap().unwrap();
        assert_eq!((saved.payload.as_slice(), saved.state), (b"{\"amount\":5}\n".as_slice(), JobState::Scheduled));
        // The other one: edited, then discarded; and an editor that fails changes nothing either.
        keys(&mut app, &f, "q");
        f.refresh(&mut app);
        let other = app.selected_job().unwrap().id;
        keys(&mut app, &f, "E");
        app.take_editor().unwrap();
        app.update(Action::Edited(Ok(b"[1]".to_vec())));
        keys(&mut app, &f, "n");
        assert_eq!(app.notice.as_deref(), Some("payload edit discarded: nothing changed"));
        keys(&mut app, &f, "E");
        app.update(Action::Edited(Err("the editor 'false' exited with exit status: 1: nothing changed".into())));
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.error.as_deref().unwrap().contains("exited with"));
        assert_eq!(f.store.job(other).unwrap().unwrap().payload, b"{}");
    }
}

both_backends! {
    fn the_queues_view_and_header_show_latency_from_queue_latency() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        let latency = f.store.queue_latency().unwrap();
        let bulk = latency.iter().find(|l| l.queue == "bulk").unwrap();
        assert_eq!(bulk.due_now, 1);
        keys(&mut app, &f, "5");
        let s = render(&app);
        assert!(s.lines().next().unwrap().contains("oldest due 45m31s in bulk"), "{s}");
        // At 80 columns the heading is WAITED, the exact counts kept.
        assert!(s.contains("DUE NOW") && s.contains("WAITED"), "{s}");
        let row = s.lines().find(|l| l.starts_with("▶ bulk")).unwrap();
        assert!(row.ends_with("1 45m31s"), "{row}");
    }
}

both_backends! {
    fn reveal_needs_the_permission_and_is_audited() {
        let f = Fixture::with_jobs();
        f.store.revoke("root", ACTOR, Permission::ViewFailureDetail).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "e");
        assert!(matches!(&app.mode, Mode::Confirm(p) if p.op == Op::Reveal));
        keys(&mut app, &f, "y");
        let d = app.nav.detail.clone().unwrap();
        let Reveal::Refused(why) = &d.reveal else { panic!("{:?}", d.reveal) };
        assert!(why.contains("view-failure-detail"), "{why}");
        assert!(render(&app).contains("failure detail not shown: alice lacks the 'view-failure-detail'"));
        f.store.grant("root", ACTOR, Permission::ViewFailureDetail).unwrap();
        keys(&mut app, &f, "ey");
        assert!(matches!(&app.nav.detail.as_ref().unwrap().reveal, Reveal::Shown(d) if d.len() == 1));
        let audit = f.store.audit_entries(0, 100).unwrap();
        let reveals: Vec<_> = audit.iter().filter(|a| a.action == "reveal-failure-detail").collect();
        assert_eq!(reveals.len(), 1, "only the permitted reveal is audited");
        assert_eq!(reveals[0].actor, ACTOR);
        assert_eq!(reveals[0].job_id, Some(d.id));
    }
}

both_backends! {
    fn a_locked_store_shows_in_the_footer_and_keys_still_work() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        app.update(Action::Tick(f.clock.now() + 5_000));
        assert!(matches!(app.take_requests().as_slice(), [Request::Refresh(_)]));
        app.update(Action::Store(Response::RefreshFailed { error: "locked".into(), busy: true }));
        app.update(Action::Tick(f.clock.now() + 9_000));
        assert!(matches!(app.take_requests().as_slice(), [Request::Refresh(_)]), "it retries by itself");
        assert!(matches!(app.db, DbStatus::Busy { .. }));
        // Keys move the selection while the store is away.
        app.update(Action::Down);
        assert_eq!(app.vs().selected, 1);
        let screen = render(&app);
        assert!(screen.contains("store locked by another process 4s: retrying"), "{screen}");
    }
}

both_backends! {
    fn groups_are_read_every_ten_seconds_not_every_refresh() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "2");
        assert_eq!(app.snapshot.as_ref().unwrap().quarantine_groups.len(), 1);
        let base = f.clock.now();
        for (after, expect_read) in [(1_000, false), (5_000, false), (10_500, true), (11_500, false)] {
            f.clock.set(base + after);
            app.update(Action::Tick(base + after));
            let reqs = app.take_requests();
            let [Request::Refresh(q)] = reqs.as_slice() else { panic!("one refresh at +{after}ms: {reqs:?}") };
            assert_eq!(q.read_groups, expect_read, "at +{after}ms");
            app.update(Action::Store(bw::tui::serve(&f.store, ACTOR, &reqs[0])));
            assert_eq!(app.snapshot.as_ref().unwrap().quarantine_groups.len(), 1, "groups kept between reads");
        }
        // A change (here: a requeue of the group) reads them again at once.
        keys(&mut app, &f, "ry");
        keys(&mut app, &f, "q");
        let s = app.snapshot.as_ref().unwrap();
        assert!(s.query.as_ref().unwrap().read_groups, "the refresh after the requeue read the groups");
        // Nobody handles the group's wire name, so the requeue left it as it was (as `bw requeue`).
        assert_eq!(s.quarantine_groups.len(), 1);
    }
}

both_backends! {
    fn pause_stops_refreshing_until_resumed() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "p");
        app.update(Action::Tick(f.clock.now() + 60_000));
        assert!(app.take_requests().is_empty());
        assert!(render(&app).contains("FROZEN"));
        keys(&mut app, &f, "p");
        app.update(Action::Tick(f.clock.now() + 61_000));
        assert_eq!(app.take_requests().len(), 1);
    }
}

both_backends! {
    fn q_backs_out_step_by_step_then_quits() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        code(&mut app, &f, KeyCode::Enter);
        keys(&mut app, &f, "?");
        assert_eq!(app.mode, Mode::Help);
        keys(&mut app, &f, "q");
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.nav.detail.is_some());
        code(&mut app, &f, KeyCode::Esc);
        assert!(app.nav.detail.is_none() && !app.quit);
        keys(&mut app, &f, "q");
        assert!(app.quit);
    }
}

both_backends! {
    fn the_log_view_reads_only_new_entries() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "6");
        let held = app.feed.log.len();
        let seen = app.feed.log_cursor.expect("the Log view holds entries");
        assert!(held > 20);
        f.store.enqueue(&backwave::NewJob::new("late", "low", "{}")).unwrap();
        f.refresh(&mut app);
        let Some(q) = app.snapshot.as_ref().unwrap().query.clone() else { panic!() };
        assert_eq!(q.log_cursor, Some(seen), "the refresh asked only for entries after the last seen");
        assert_eq!(app.feed.log.len(), held + 1);
        let newest = app.feed.log.back().unwrap();
        assert_eq!(newest.seq, seen.seq + 1);
        assert_eq!(app.feed.log_cursor, Some(newest.cursor()), "the next refresh asks after the new entry");
        // The chart counted the same hour once, not twice.
        let (ok, _failed) = app.feed.chart.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        assert_eq!(ok, 4);
    }
}

// ---- screens on TestBackend ----

pub(crate) fn screen(f: &Fixture, app: &bw::tui::App) -> String {
    f.redact(&render(app))
}

both_backends! {
    fn screen_empty_store() {
        let f = Fixture::empty();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        insta::assert_snapshot!("tui__screen_empty_store", screen(&f, &app));
    }
}

both_backends! {
    fn screen_each_view_with_data() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        for (i, name) in ["dead_lettered", "quarantined", "running", "scheduled", "queues", "log"].iter().enumerate() {
            keys(&mut app, &f, &(i + 1).to_string());
            insta::assert_snapshot!(format!("tui__view_{name}"), screen(&f, &app));
        }
        keys(&mut app, &f, "1");
        f.press(&mut app, [Action::ToggleGroup]);
        insta::assert_snapshot!("tui__view_dead_lettered_by_cause", screen(&f, &app));
        keys(&mut app, &f, "2g");
        f.press(&mut app, [Action::Tick(f.clock.now() + 1_000)]);
        insta::assert_snapshot!("tui__view_quarantined_jobs", screen(&f, &app));
    }
}

both_backends! {
    fn screen_detail_pane_hidden_then_revealed() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "j");
        code(&mut app, &f, KeyCode::Enter);
        insta::assert_snapshot!("tui__detail_hidden", screen(&f, &app));
        keys(&mut app, &f, "e");
        insta::assert_snapshot!("tui__confirm_reveal", screen(&f, &app));
        keys(&mut app, &f, "y");
        insta::assert_snapshot!("tui__detail_revealed", screen(&f, &app));
    }
}

both_backends! {
    fn screen_detail_of_a_retrying_job_marks_the_next_delay() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        keys(&mut app, &f, "4");
        code(&mut app, &f, KeyCode::Enter);
        let s = screen(&f, &app);
        assert!(s.contains("[2s]") && s.contains("waiting after attempt 1; attempt 2"), "{s}");
    }
}

both_backends! {
    fn screen_confirmation_dialog_and_results() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "2r");
        insta::assert_snapshot!("tui__confirm_requeue_group", screen(&f, &app));
        keys(&mut app, &f, "y");
        insta::assert_snapshot!("tui__results_requeue_group", screen(&f, &app));
    }
}

both_backends! {
    fn screen_help_overlay_lists_every_key() {
        // Over an empty store: the overlay covers half an id column otherwise.
        let f = Fixture::empty();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "?");
        let s = screen(&f, &app);
        for (k, _) in keymap::HELP {
            assert!(s.contains(k), "help lists {k}");
        }
        insta::assert_snapshot!("tui__help", s);
    }
}

both_backends! {
    fn screen_help_overlay_shows_every_key_at_80x24() {
        // Found at 3 a.m.: at 80x24 the help ended after `n run now` (P, t, E and p cut off).
        let f = Fixture::empty();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        keys(&mut app, &f, "?");
        let s = screen(&f, &app);
        for (k, what) in keymap::HELP.iter().filter(|(k, _)| !matches!(*k, "?" | "Ctrl-C")) {
            assert!(s.contains(k) && s.contains(what), "help lists {k} ({what}):\n{s}");
        }
        assert!(s.contains("Ctrl-C quits. --read-only disables r x e n P t E. Any key closes this help."), "{s}");
    }
}

both_backends! {
    fn screen_80x24_is_usable_and_60x15_says_why_not() {
        let f = Fixture::with_jobs();
        let mut app = f.app(80, 24);
        f.refresh(&mut app);
        insta::assert_snapshot!("tui__size_80x24", screen(&f, &app));
        app.update(Action::Resize(60, 15));
        let s = screen(&f, &app);
        assert!(s.contains("at least 80×24") && s.contains("60×15"), "{s}");
        insta::assert_snapshot!("tui__size_60x15", s);
        // And back: a resize never loses the place.
        app.update(Action::Resize(80, 24));
        assert!(screen(&f, &app).contains("Dead-Lettered"));
        // Every view at 80x24 keeps its first column and the footer's essentials.
        for (v, first_column) in [(1, "ID"), (2, "COUNT"), (3, "ID"), (4, "ID"), (5, "QUEUE"), (6, "TIME (UTC)")] {
            keys(&mut app, &f, &v.to_string());
            let s = screen(&f, &app);
            let lines: Vec<&str> = s.lines().collect();
            assert_eq!(lines.len(), 24);
            assert!(lines[5].trim_start().starts_with(first_column), "view {v}:\n{s}");
            assert!(lines[23].contains("? help") && lines[23].contains("q quit"), "view {v}:\n{s}");
        }
    }
}

both_backends! {
    fn screen_no_color_has_no_colours_but_shows_selection() {
        let f = Fixture::with_jobs();
        let mut app = f.app(120, 32);
        app.cfg.color = false;
        f.refresh(&mut app);
        let buf = render_buffer(&app);
        let mut reversed = 0;
        for cell in buf.content() {
            assert_eq!(cell.fg, ratatui::style::Color::Reset, "no foreground colour at '{}'", cell.symbol());
            assert_eq!(cell.bg, ratatui::style::Color::Reset);
            reversed += cell.modifier.contains(ratatui::style::Modifier::REVERSED) as usize;
        }
        assert!(reversed > 100, "the title bar, the tab and the selected row are reversed");
    }
}

both_backends! {
    /// Regression guard for the hostile fixture: escape sequences, bidi overrides and zero-width
    /// characters in every field must reach the screen only as inert escaped text.
    fn hostile_text_never_reaches_the_screen_as_control_characters() {
        let f = Fixture::hostile();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        let check = |app: &bw::tui::App, what: &str| {
            let buf = render_buffer(app);
            for cell in buf.content() {
                for c in cell.symbol().chars() {
                    let format = matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
                        | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{061C}');
                    assert!(!c.is_control() && !format, "{what}: U+{:04X} reached the screen", c as u32);
                }
            }
        };
        for v in 1..=6 {
            keys(&mut app, &f, &v.to_string());
            if v == 2 {
                // Quarantined opens grouped: look at the jobs too.
                f.press(&mut app, [Action::ToggleGroup]);
            }
            check(&app, &format!("view {v}"));
            if v == 5 {
                continue;
            }
            let n = app.list_len().min(12);
            for i in 0..n {
                f.press(&mut app, [Action::Top]);
                for _ in 0..i {
                    app.update(Action::Down);
                }
                code(&mut app, &f, KeyCode::Enter);
                check(&app, &format!("view {v} row {i} detail"));
                keys(&mut app, &f, "ey");
                check(&app, &format!("view {v} row {i} revealed"));
                code(&mut app, &f, KeyCode::Esc);
            }
        }
        keys(&mut app, &f, "1");
        f.press(&mut app, [Action::ToggleGroup]);
        check(&app, "dead-letter groups");
        keys(&mut app, &f, "2");
        check(&app, "quarantine groups");
    }
}

both_backends! {
    fn bad_invocations_fail_before_the_screen_changes() {
        let f = Fixture::with_jobs();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.db");
        assert_cmd::Command::cargo_bin("bw")
            .unwrap()
            .args(["--db", missing.to_str().unwrap(), "top"])
            .assert()
            .code(3)
            .stderr(predicates::str::contains("no BackWave store at"));
        assert!(!missing.exists(), "a missing store is never created");
        assert_cmd::Command::cargo_bin("bw")
            .unwrap()
            .args(["--db", f.db.arg(), "top", "--interval", "10ms"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains("--interval 10ms is too short"));
        // Not a terminal (a pipe): a one-line pointer to the scriptable commands.
        assert_cmd::Command::cargo_bin("bw")
            .unwrap()
            .args(["--db", f.db.arg(), "top"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains("bw top needs a terminal"));
    }
}

#[test]
fn a_job_handed_back_unstarted_is_not_counted_as_a_failed_attempt_in_the_chart() {
    use backwave::{DetailStatus, JobId, Transition};
    use bw::tui::data::classify;
    let entry = |reason: &str| Transition {
        seq: 1,
        xid: 0,
        job_id: JobId::new(),
        at: 0,
        from: Some(JobState::Running),
        to: JobState::Scheduled,
        attempt: 0,
        worker_id: Some("host/1/g#0001".into()),
        actor: None,
        reason: Some(reason.into()),
        detail: DetailStatus::None,
    };
    assert_eq!(classify(&entry(backwave::store::HANDED_BACK)), None, "a hand-back ran nothing");
    assert_eq!(classify(&entry("gateway timeout (attempt 1)")), Some(false), "a retry is a failed attempt");
}

#[test]
fn a_log_entry_at_the_lowest_sequence_number_is_charted_instead_of_overflowing_the_start() {
    // The chart started one before the first entry of the hour, by subtraction: another
    // program's entry at seq i64::MIN overflowed it (a panic in debug builds).
    let mut f = Fixture::empty();
    let id = f.enqueue(backwave::NewJob::new("send-email", "high", "{}"));
    f.store
        .raw_execute(
            "INSERT INTO transitions (seq, job_id, at, from_state, to_state, attempt)
             VALUES (-9223372036854775808, ?1, ?2, 'running', 'succeeded', 1)",
            &[id.to_string().into(), f.clock.now().into()],
        )
        .unwrap();
    let mut app = f.app(120, 32);
    f.refresh(&mut app);
    let (ok, failed) = app.feed.chart.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
    assert_eq!((ok, failed), (1, 0), "the entry is in the hour's count");
    assert_eq!(app.feed.chart_cursor.map(|c| c.seq), Some(1), "counted up to the enqueue entry");
    assert_eq!(app.feed.log.iter().map(|t| t.seq).collect::<Vec<_>>(), [i64::MIN, 1]);
}

both_backends! {
    fn the_header_shows_limits_and_quiet_workers_and_a_queue_whose_limit_is_full_reads_limit() {
        use backwave::store::{LimitSpec, PauseKind, Rate, WorkerSelector};
        let f = Fixture::with_jobs();
        // bulk's Scheduled job claimed now under a concurrency of 1: the limit is full.
        let full = LimitSpec { concurrency: Some(1), rate: None };
        f.store.set_limit(ACTOR, PauseKind::Queue, "bulk", &full, None, true).unwrap();
        let policy = backwave::RetryPolicy::default();
        let bulk = ["bulk".to_string()];
        let req = backwave::store::ClaimRequest {
            worker_id: "another-host/1/default#0001",
            group: "default",
            queues: &bulk,
            limit: 5,
            lease: std::time::Duration::from_secs(600),
            policy: &policy,
            handler_policies: &[],
        };
        assert_eq!(f.store.claim(&req).unwrap().len(), 1, "the limit lets one run");
        let rate = LimitSpec { concurrency: None, rate: Some(Rate::parse("50/s").unwrap()) };
        f.store.set_limit(ACTOR, PauseKind::WireName, "send-email", &rate, None, true).unwrap();
        let worker = f.store.workers().unwrap()[0].id.clone();
        f.store.quiet_workers(ACTOR, &WorkerSelector::Id(worker)).unwrap();
        let mut app = f.app(200, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "5");
        let s = screen(&f, &app);
        let title = s.lines().next().unwrap();
        assert!(title.contains("LIMITED: queue bulk concurrency 1 full, wire-name send-email rate 50/s"), "{title}");
        assert!(title.contains("QUIET 1, STOPPING 0 workers (0 running)"), "{title}");
        assert!(s.lines().any(|l| l.contains("bulk") && l.contains("LIMIT")), "{s}");
        assert!(!s.lines().any(|l| l.contains("critical") && l.contains("LIMIT ")), "{s}");
    }
}

both_backends! {
    /// The Running view's NOTE column shows what a running job last reported of its progress
    /// (written by its heartbeat), and the detail pane shows it too; once the job succeeds with
    /// an output, the detail pane (opened from the log) shows the output.
    fn the_running_view_shows_progress_and_the_detail_pane_progress_and_output() {
        let f = Fixture::with_jobs();
        let running = f.ids[11];
        let worker = "demo-host/4242/strict-priority#0001";
        let progress = backwave::Progress::new(0.42, "resizing 3 of 8").unwrap();
        let held = f
            .store
            .heartbeat_with_progress(worker, &[(running, 1)], &[Some(progress)], std::time::Duration::from_secs(60))
            .unwrap();
        assert_eq!(held, [backwave::store::LeaseStatus::Held { cancel_requested: false }]);
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "3");
        insta::assert_snapshot!("tui__view_running_progress", screen(&f, &app));
        code(&mut app, &f, KeyCode::Enter);
        insta::assert_snapshot!("tui__detail_running_progress", screen(&f, &app));

        let done = backwave::store::Completion {
            job_id: running,
            worker_id: worker.into(),
            attempt: 1,
            outcome: backwave::store::Outcome::SucceededWith { output: br#"{"width":320,"bytes":48213}"#.to_vec() },
        };
        f.store.complete(&done).unwrap();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "6");
        code(&mut app, &f, KeyCode::Enter);
        insta::assert_snapshot!("tui__detail_output", screen(&f, &app));
    }
}

both_backends! {
    /// A workflow job in the detail pane names its workflow, parents and children; the counts
    /// row shows the Waiting jobs once there are some.
    fn the_detail_pane_names_a_workflow_job_s_parents_and_children() {
        let mut f = Fixture::empty();
        let mut wf = backwave::Workflow::new("thumbnails");
        let fetch = wf.add(backwave::NewJob::new("fetch", "media", "{}"));
        let resize = wf.add_after(backwave::NewJob::new("resize", "media", "{}"), &[fetch]).unwrap();
        let e = f.store.enqueue_workflow(&wf).unwrap();
        f.ids = vec![e.job(fetch), e.job(resize)];
        let wf_id = e.id.to_string();
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "4");
        code(&mut app, &f, KeyCode::Enter);
        f.refresh(&mut app);
        let shown = screen(&f, &app).replace(&wf_id, "wwwwwwww-wwww-wwww-wwww-wwwwwwwwwwww");
        insta::assert_snapshot!("tui__detail_workflow", shown);
    }
}

both_backends! {
    fn the_workflows_view_lists_each_workflow_and_enter_opens_the_jobs_that_need_the_operator() {
        let mut f = Fixture::empty();
        let mut wf = backwave::Workflow::new("thumbnails");
        let fetch = wf.add(backwave::NewJob::new("fetch", "arrivals", "{}"));
        let resize = wf.add_after(backwave::NewJob::new("resize", "media", "{}"), &[fetch]).unwrap();
        let stuck = f.store.enqueue_workflow(&wf).unwrap();
        f.ids = vec![stuck.job(fetch), stuck.job(resize)];
        f.tick(1_000);
        let mut report = backwave::Workflow::new("nightly-report");
        let one = report.add(backwave::NewJob::new("report", "media", "{}"));
        let running = f.store.enqueue_workflow(&report).unwrap();
        f.ids.push(running.job(one));
        f.tick(1_000);
        f.dead_letter_enqueued(stuck.job(fetch), "arrivals");
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "9");
        f.refresh(&mut app);
        let shown = screen(&f, &app)
            .replace(&stuck.id.to_string(), "wwwwwwww-wwww-wwww-wwww-wwwwwwwwwww1")
            .replace(&running.id.to_string(), "wwwwwwww-wwww-wwww-wwww-wwwwwwwwwww2");
        insta::assert_snapshot!("tui__view_workflows", shown);
        // Newest first: the stuck one is the second row. Enter lists its Dead-Lettered job, the
        // one to requeue; q comes back here.
        keys(&mut app, &f, "j");
        code(&mut app, &f, KeyCode::Enter);
        f.refresh(&mut app);
        assert_eq!(app.nav.view, View::DeadLettered);
        assert_eq!(app.vs().filter_text, format!("workflow:{}", stuck.id));
        assert_eq!(app.page_jobs().iter().map(|j| j.id).collect::<Vec<_>>(), vec![stuck.job(fetch)]);
        keys(&mut app, &f, "q");
        assert_eq!(app.nav.view, View::Workflows);
        // The filter is one an operator can type too, and a bad id is refused quoting it.
        let typed = bw::tui::filter::Filter::parse(&format!("workflow:{}", stuck.id), 0).unwrap();
        assert_eq!(typed.job_filter(JobState::DeadLettered).workflow, Some(stuck.id));
        let e = bw::tui::filter::Filter::parse("workflow:nope", 0).unwrap_err();
        assert!(e.contains("'nope'"), "{e}");
    }
}

both_backends! {
    fn the_workflows_view_reads_the_page_on_screen_and_the_next_one_not_every_workflow() {
        let f = Fixture::empty();
        for i in 0..70 {
            let mut wf = backwave::Workflow::new(format!("nightly-{i:02}"));
            wf.add(backwave::NewJob::new("report", "media", "{}"));
            f.store.enqueue_workflow(&wf).unwrap();
        }
        let mut app = f.app(120, 32);
        f.refresh(&mut app);
        keys(&mut app, &f, "9");
        f.refresh(&mut app);
        let first = app.list_len();
        assert!(first < 70 && first >= 2 * app.page_rows() as u64, "read {first} for a page of {}", app.page_rows());
        // Going down reads further, until every workflow is listed.
        for _ in 0..4 {
            keys(&mut app, &f, "G");
            f.refresh(&mut app);
        }
        assert_eq!(app.list_len(), 70);
        let s = app.snapshot.as_ref().unwrap();
        assert_eq!(s.workflows.last().map(|w| w.name.as_str()), Some("nightly-00"), "newest first");
    }
}
