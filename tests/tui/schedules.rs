//! The Schedules view of `bw top` (issue 20): drawn on TestBackend, and pause, resume and trigger
//! from it through the same library calls `bw schedule` makes; then the real binary on a pty.

use std::time::Duration;

use backwave::schedule::Schedule;
use backwave::store::current_actor;
use backwave::Permission;
use bw::tui::data::{Op, Request, Response, Target};
use bw::tui::{keymap, Mode, View};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::harness::*;
use super::pty::{Pty, Term};
use crate::backend::both_backends;

/// Two schedules declared ten minutes ago: `heartbeat` every minute, fired once; `nightly-export`
/// in Berlin time. The fired job is the fixture's newest id.
fn with_schedules() -> Fixture {
    let mut f = Fixture::with_jobs();
    let now = f.clock.now();
    f.clock.set(now - 600_000);
    let defs = [
        Schedule::new("heartbeat", "* * * * *", "send-email", "default", "{}"),
        Schedule::new("nightly-export", "0 2 * * *", "export", "bulk", "{}").zone("Europe/Berlin"),
    ];
    f.store.declare_schedules("app", &defs).unwrap();
    f.clock.set(now - 30_000);
    let (fired, _) = f.store.fire_due_schedules(&["heartbeat".to_string()]).unwrap();
    f.ids.push(fired[0].fired[0].1);
    f.clock.set(now);
    f.store.touch_schedules(&["heartbeat".to_string(), "nightly-export".to_string()]).unwrap();
    f
}

fn press_key(app: &mut bw::tui::App, f: &Fixture, c: char) {
    let a = keymap::action_for(&app.mode, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
        .unwrap_or_else(|| panic!("'{c}' has an action"));
    f.press(app, [a]);
}

/// A screen snapshot in tests/snapshots, beside every other `tui__` one.
fn snapshot(name: &str, text: &str) {
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, text);
    });
}

both_backends! {
    fn the_schedules_view_lists_each_schedule_and_pauses_resumes_and_triggers_through_the_store() {
        let f = with_schedules();
        let mut app = f.app(120, 24);
        f.refresh(&mut app);
        press_key(&mut app, &f, '8');
        assert_eq!(app.nav.view, View::Schedules);
        snapshot("tui__schedules_view", &f.redact(&render(&app)));

        // P on the selected schedule (heartbeat): the dialog, then the store's pause.
        press_key(&mut app, &f, 'P');
        let Mode::Confirm(p) = &app.mode else { panic!("no dialog: {:?}", app.mode) };
        assert_eq!((p.op, &p.target), (Op::Pause, &Target::Schedule { name: "heartbeat".into() }));
        snapshot("tui__schedules_pause_dialog", &f.redact(&render(&app)));
        press_key(&mut app, &f, 'y');
        assert!(f.store.schedule("heartbeat").unwrap().paused);
        let audit = f.store.audit_entries(0, 50).unwrap();
        let pause = audit.iter().find(|a| a.action == "schedule-pause").unwrap();
        assert_eq!(pause.actor, ACTOR, "the dashboard's actor, as bw would record it");
        press_key(&mut app, &f, 'q');
        f.refresh(&mut app);
        assert!(render(&app).contains("PAUSED"), "{}", render(&app));

        // P again resumes it.
        press_key(&mut app, &f, 'P');
        let Mode::Confirm(p) = &app.mode else { panic!("no dialog: {:?}", app.mode) };
        assert_eq!(p.op, Op::Resume);
        press_key(&mut app, &f, 'y');
        assert!(!f.store.schedule("heartbeat").unwrap().paused);
        press_key(&mut app, &f, 'q');

        // The dialog's durations hold for a schedule too: 2 pauses it for an hour.
        press_key(&mut app, &f, 'P');
        press_key(&mut app, &f, '2');
        let Mode::Results(r) = &app.mode else { panic!("no results: {:?}", app.mode) };
        assert_eq!(r.title, "Paused schedule heartbeat for 1h");
        let row = f.store.schedule("heartbeat").unwrap().row;
        assert_eq!(row.paused_until, Some(f.clock.now() + 3_600_000));
        press_key(&mut app, &f, 'q');
        f.store.resume_schedule(ACTOR, "heartbeat").unwrap();

        // t triggers the selected one: one job now, the cursor left where it was.
        let before = f.store.schedule("heartbeat").unwrap().row;
        press_key(&mut app, &f, 't');
        let Mode::Confirm(p) = &app.mode else { panic!("no dialog: {:?}", app.mode) };
        assert_eq!(p.op, Op::Trigger);
        press_key(&mut app, &f, 'y');
        let Mode::Results(r) = &app.mode else { panic!("no results: {:?}", app.mode) };
        assert_eq!(r.title, "Triggered schedule heartbeat");
        let after = f.store.schedule("heartbeat").unwrap().row;
        assert_ne!(after.last_job_id, before.last_job_id);
        assert_eq!(after.last_tick, before.last_tick);
        let job = f.store.job(after.last_job_id.unwrap()).unwrap().unwrap();
        assert_eq!(job.labels["triggered-by"], ACTOR);
    }

    fn a_read_only_actor_is_told_it_cannot_trigger_and_nothing_is_asked() {
        let f = with_schedules();
        f.store.revoke("root", ACTOR, Permission::Operate).unwrap();
        let mut app = f.app(120, 24);
        f.refresh(&mut app);
        press_key(&mut app, &f, '8');
        press_key(&mut app, &f, 't');
        assert_eq!(app.mode, Mode::Normal);
        assert!(app.error.as_deref().unwrap_or("").contains("needs the operate permission"), "{:?}", app.error);
        assert_eq!(f.store.schedule("heartbeat").unwrap().row.last_job_id, Some(*f.ids.last().unwrap()));
    }

    fn the_schedules_view_shows_a_unique_schedules_skipped_ticks() {
        // Only `bw schedules`, its JSON and the metrics told them: the view said "ok".
        let mut f = Fixture::with_jobs();
        let now = f.clock.now();
        f.clock.set(now - 600_000);
        let sync = Schedule::new("sync", "* * * * *", "send-email", "default", "{}").unique();
        f.store.declare_schedules("app", &[sync]).unwrap();
        // The first tick's job is still Scheduled when the next three come: all are skipped.
        for ago in [300_000, 240_000, 180_000, 0] {
            f.clock.set(now - ago);
            let (fired, _) = f.store.fire_due_schedules(&["sync".to_string()]).unwrap();
            // The one job made: the fixture's newest id, so that the screen redacts it.
            f.ids.extend(fired.iter().flat_map(|t| t.fired.iter().map(|(_, id)| *id)));
        }
        f.store.touch_schedules(&["sync".to_string()]).unwrap();
        assert_eq!(f.store.schedule("sync").unwrap().row.skipped_ticks, 3);
        let mut app = f.app(120, 24);
        f.refresh(&mut app);
        press_key(&mut app, &f, '8');
        let screen = f.redact(&render(&app));
        assert!(screen.contains("3 ticks skipped"), "{screen}");
        snapshot("tui__schedules_view_skipped_ticks", &screen);
    }

    fn a_preview_asks_for_the_permission_before_it_reads_the_store() {
        // The preview read the schedule (and told a stranger it did not exist) before the store
        // was asked whether the actor may act; `bw schedule trigger nosuch` refuses the
        // permission first.
        let f = with_schedules();
        f.store.revoke("root", ACTOR, Permission::Operate).unwrap();
        let preview = |target: Target| bw::tui::data::serve(&f.store, ACTOR, &Request::Preview { op: Op::Trigger, target });
        for target in [Target::Schedule { name: "nosuch".into() }, Target::Schedule { name: "heartbeat".into() }] {
            let Response::PreviewFailed(why) = preview(target) else { panic!("a preview for a stranger") };
            assert!(why.contains("lacks the 'operate' permission"), "{why}");
        }
        let missing: backwave::JobId = "a00000ff-0000-7000-8000-0000000000ff".parse().unwrap();
        let Response::PreviewFailed(why) =
            bw::tui::data::serve(&f.store, ACTOR, &Request::Preview { op: Op::Requeue, target: Target::Jobs(vec![missing]) })
        else {
            panic!("a requeue preview for a stranger")
        };
        assert!(why.contains("lacks the 'operate' permission"), "{why}");
    }

    fn e2e_the_schedules_view_triggers_a_schedule_in_a_real_terminal() {
        let f = with_schedules();
        let me = current_actor();
        if me != "root" {
            f.store.grant("root", &me, Permission::Operate).unwrap();
        }
        let argv = ["--db".to_string(), f.db.arg().to_string(), "top".to_string()];
        let mut t: Pty = Term::new(120, 32).env("BW_NOW", f.clock.now().to_string()).spawn(env!("CARGO_BIN_EXE_bw"), &argv);
        let wait = Duration::from_secs(10);
        t.wait_for("1 Dead-Lettered", wait);
        t.send("8");
        let s = t.wait_for("nightly-export", wait);
        assert!(s.contains("heartbeat") && s.contains("Europe/Berlin"), "{s}");
        t.send("t");
        t.wait_for("Trigger schedule heartbeat?", wait);
        t.send("y");
        t.wait_for("Triggered schedule heartbeat", wait);
        t.send("q");
        t.send("q");
        assert_eq!(t.wait_exit(wait), 0);
        let row = f.store.schedule("heartbeat").unwrap().row;
        let job = f.store.job(row.last_job_id.unwrap()).unwrap().unwrap();
        assert_eq!(job.labels["triggered-by"], me);
        let audit = f.store.audit_entries(0, 50).unwrap();
        assert!(audit.iter().any(|a| a.action == "schedule-trigger" && a.actor == me), "{audit:?}");
    }
}
