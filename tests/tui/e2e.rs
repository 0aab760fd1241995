//! The real `bw top` on a real terminal: it runs on a pty (tests/common/pty.rs), we type into it
//! and read the screen back, then check the store and that the terminal came back as a shell
//! expects it: main screen, cursor shown, canonical input with echo.

use std::time::Duration;

use super::harness::{Fixture, T0};
use crate::backend::both_backends;
use backwave::store::current_actor;
use backwave::{JobState, Permission};

use super::pty::{keys, Pty, Term};

const WAIT: Duration = Duration::from_secs(10);

fn bw_top(f: &Fixture, term: Term, args: &[&str]) -> Pty {
    let mut argv = vec!["--db".to_string(), f.db.arg().to_string(), "top".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    term.spawn(env!("CARGO_BIN_EXE_bw"), &argv)
}

fn assert_terminal_restored(t: &Pty, how: &str) {
    let s = t.screen();
    assert!(!t.alternate_screen(), "{how} left the alternate screen on:\n{s}");
    assert!(!t.cursor_hidden(), "{how} left the cursor hidden");
    assert!(t.cooked(), "{how} left the terminal in raw mode");
    assert!(!s.contains("BackWave ─"), "{how}: the dashboard is gone from the screen:\n{s}");
}

both_backends! {
    fn e2e_open_requeue_and_quit_in_a_real_terminal() {
        let f = Fixture::with_jobs();
        let me = current_actor();
        if me != "root" {
            f.store.grant("root", &me, Permission::Operate).unwrap();
        }
        let mail = f.ids[3];
        let mut t = bw_top(&f, Term::new(120, 32).env("BW_NOW", T0.to_string()), &[]);
        let s = t.wait_for("1 Dead-Lettered 4", WAIT);
        assert!(s.contains(&mail.short()), "the newest Dead-Lettered job is listed first:\n{s}");
        assert!(t.alternate_screen() && t.cursor_hidden() && !t.cooked(), "a full-screen raw terminal");

        t.send(keys::ENTER);
        t.wait_for(&format!("job {mail}"), WAIT);
        t.wait_for("smtp 550 mailbox 'bob' unavailable", WAIT);
        t.send("r");
        t.wait_for("Requeue 1 job?", WAIT);
        t.send("y");
        let s = t.wait_for("Requeued 1 of 1", WAIT);
        assert!(s.contains("requeued (was Dead-Lettered)"), "{s}");
        t.send("q"); // closes the results
        t.wait_for("1 Dead-Lettered 3", WAIT);
        t.send("q"); // leaves the detail pane
        t.send("q"); // quits
        assert_eq!(t.wait_exit(WAIT), 0);
        assert_terminal_restored(&t, "q");

        let job = f.store.job(mail).unwrap().unwrap();
        assert_eq!((job.state, job.attempt), (JobState::Scheduled, 0), "a fresh budget");
        let last = f.store.history(mail).unwrap().pop().unwrap();
        assert_eq!(last.actor.as_deref(), Some(me.as_str()), "the actor is in the log");
        assert_eq!(last.from, Some(JobState::DeadLettered));
    }
}

both_backends! {
    fn e2e_resize_redraws_and_sigterm_restores_the_terminal() {
        let f = Fixture::with_jobs();
        let mut t = bw_top(&f, Term::new(100, 30), &[]);
        t.wait_for("1 Dead-Lettered 4", WAIT);
        assert!(t.alternate_screen());
        // Too small, then big enough again: the dashboard follows the window.
        t.resize(60, 15);
        t.wait_for("this one is 60×15", WAIT);
        t.resize(100, 30);
        t.wait_for("1 Dead-Lettered 4", WAIT);
        t.signal(libc::SIGTERM);
        let code = t.wait_exit(WAIT);
        assert_terminal_restored(&t, "SIGTERM");
        assert_eq!(code, 0, "SIGTERM quits like q");
    }
}

both_backends! {
    fn e2e_ctrl_c_quits_from_a_dialog_and_restores_the_terminal() {
        let f = Fixture::with_jobs();
        let mut t = bw_top(&f, Term::new(80, 24).env("NO_COLOR", "1"), &["--read-only"]);
        t.wait_for("1 Dead-Lettered", WAIT);
        t.send("?");
        t.wait_for("this help", WAIT);
        t.send(keys::CTRL_C);
        assert_eq!(t.wait_exit(WAIT), 0);
        assert_terminal_restored(&t, "Ctrl-C");
        assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 4, "read-only changed nothing");
    }
}

both_backends! {
    /// `E` hands the terminal to `$EDITOR` (here a script that writes a new payload) and takes it
    /// back: the dashboard asks to save, saves through the store, and the terminal is restored on
    /// quit as always.
    fn e2e_e_opens_the_editor_on_the_payload_and_saves_what_it_wrote() {
        let f = Fixture::with_jobs();
        let me = current_actor();
        if me != "root" {
            f.store.grant("root", &me, Permission::Operate).unwrap();
        }
        // The inner shell keeps the quotes of the JSON because they are escaped.
        let editor = r#"sh -c 'echo {\"amount\":5} > "$1"' --"#;
        let term = Term::new(120, 32).env("BW_NOW", T0.to_string()).env("VISUAL", "").env("EDITOR", editor);
        let mut t = bw_top(&f, term, &[]);
        t.wait_for("1 Dead-Lettered 4", WAIT);
        // Quarantined opens grouped: Enter lists the group's jobs, E edits the selected one.
        t.send("2");
        t.wait_for("LAST SEEN", WAIT);
        t.send(crate::pty::keys::ENTER);
        t.wait_for("LIVE HANDLER SINCE", WAIT);
        t.send("E");
        let s = t.wait_for("Save the new payload of", WAIT);
        assert!(s.contains("{\"amount\":5}") && s.contains("[r] save and requeue"), "{s}");
        assert!(t.alternate_screen() && !t.cooked(), "the dashboard has the terminal again");
        t.send("y");
        t.wait_for("payload replaced", WAIT);
        t.send("q"); // closes the results
        t.send(keys::CTRL_C);
        assert_eq!(t.wait_exit(WAIT), 0);
        assert_terminal_restored(&t, "quit after editing");

        let edited: Vec<_> = f.ids[4..6].iter().map(|id| f.store.job(*id).unwrap().unwrap()).collect();
        let changed: Vec<_> = edited.iter().filter(|j| j.payload == b"{\"amount\":5}\n").collect();
        assert_eq!(changed.len(), 1, "one payload saved: {edited:?}");
        assert_eq!(changed[0].state, JobState::Quarantined, "y saves without requeueing");
        let audit = f.store.audit_entries(0, 100).unwrap();
        let entry = audit.iter().find(|a| a.action == "edit-payload").expect("audited");
        assert_eq!((entry.actor.as_str(), entry.job_id), (me.as_str(), Some(changed[0].id)));
    }
}

both_backends! {
    /// Ctrl-C in the editor sends SIGINT to the whole foreground group, the dashboard included:
    /// it quit the dashboard as soon as the editor closed. It is the editor's key while it runs.
    fn e2e_ctrl_c_inside_the_editor_does_not_quit_the_dashboard() {
        let f = Fixture::with_jobs();
        let me = current_actor();
        if me != "root" {
            f.store.grant("root", &me, Permission::Operate).unwrap();
        }
        // The editor interrupts its own process group (as Ctrl-C would), survives it, and saves.
        let editor = r#"sh -c 'trap "" INT; kill -INT 0; sleep 0.2; echo "[1]" > "$1"' --"#;
        let term = Term::new(120, 32).env("BW_NOW", T0.to_string()).env("VISUAL", editor);
        let mut t = bw_top(&f, term, &[]);
        t.wait_for("1 Dead-Lettered 4", WAIT);
        t.send("E");
        t.wait_for("Save the new payload of", WAIT);
        std::thread::sleep(Duration::from_millis(300));
        assert!(t.screen().contains("[r] save and requeue"), "still running:\n{}", t.screen());
        t.send("n");
        t.wait_for("payload edit discarded: nothing changed", WAIT);
        t.send(keys::CTRL_C);
        assert_eq!(t.wait_exit(WAIT), 0);
        assert_terminal_restored(&t, "Ctrl-C after the editor");
    }
}

both_backends! {
    /// Issue 19 on a real terminal: Esc after a filter kept the dashboard open (it quit it),
    /// Ctrl-U in the `/` prompt clears the line instead of closing it (what was typed next ran
    /// as commands), and a click on a tab shows its view.
    fn e2e_esc_never_quits_ctrl_u_only_clears_the_prompt_and_a_click_shows_a_tab() {
        let f = Fixture::with_jobs();
        let mut t = bw_top(&f, Term::new(120, 32).env("BW_NOW", T0.to_string()), &[]);
        t.wait_for("1 Dead-Lettered 4", WAIT);
        t.send("/wire:send-email");
        t.send(keys::ENTER);
        t.wait_for("filter: wire:send-email", WAIT);
        // Esc with the filter applied and nothing open: it says so and keeps the dashboard (the
        // next key goes only once it has: keys read together can parse as one, Esc / as Alt-/).
        t.send(keys::ESC);
        t.wait_for("nothing to close here: q quits", WAIT);
        t.send("/");
        t.wait_for("Enter apply", WAIT);
        t.send("\x15"); // Ctrl-U
        t.send("3");
        let s = t.wait_for(" / 3", WAIT);
        assert!(s.contains("Enter apply") && s.contains("1 Dead-Lettered 4"), "still in the prompt, same view:\n{s}");
        t.send(keys::ESC);
        let s = t.wait_for("filter: wire:send-email", WAIT);
        let tabs = s.lines().nth(4).unwrap().to_string();
        // A left click (SGR mouse report, 1-based columns) on the Queues tab.
        let at = tabs.find("5 Queues").unwrap_or_else(|| panic!("the tabs: {tabs}"));
        let col = tabs[..at].chars().count() + 2;
        t.send(&format!("\x1b[<0;{col};5M\x1b[<0;{col};5m"));
        t.wait_for("DONE/MIN", WAIT);
        t.send("q");
        assert_eq!(t.wait_exit(WAIT), 0);
        assert_terminal_restored(&t, "q after Esc");
    }
}
