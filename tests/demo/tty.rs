//! `bw demo` in a real terminal: tmux runs it, we read the dashboard while the workers run, quit
//! it, and check the summary, the store and that the terminal came back.

use std::time::Duration;

use backwave::{JobState, Store};

use super::tmux::Tmux;

/// Regression: the dashboard ran in the demo's process, and its panic hook (which puts the
/// terminal back) also fired for handler panics the engine catches: every `resize-image` panic
/// left the alternate screen and the dashboard went on drawing over the shell.
#[test]
fn demo_dashboard_stays_whole_while_handlers_panic_and_quitting_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tty-demo.db");
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("top", 120, 40);
    t.wait_for("READY$", 10);
    t.send(&[&format!("NO_COLOR=1 {bin} --db {} demo; echo DEMO_EXITED_$?", db.display()), "Enter"]);
    t.wait_for("BackWave ─", 20);
    // A panicking handler has dead-lettered by the time its cause is listed.
    let s = t.wait_for("attempt to divide by zero", 20);
    std::thread::sleep(Duration::from_millis(1500));
    let s2 = t.screen();
    assert!(t.alternate_screen_on(), "the dashboard left the alternate screen:\n{s2}");
    for screen in [&s, &s2] {
        let title = screen.lines().next().unwrap_or_default();
        assert!(title.contains("BackWave ─") && title.contains("tty-demo.db"), "title line damaged:\n{screen}");
        assert!(screen.contains("Dead-Lettered") && screen.contains("Quarantined"), "{screen}");
    }

    t.send(&["q"]);
    let s = t.wait_for("DEMO_EXITED_0", 20);
    assert!(!t.alternate_screen_on());
    assert!(s.contains("Explore the result") && s.contains("DEAD-LETTERED"), "the summary follows:\n{s}");

    let store = Store::open(&db).unwrap();
    assert!(store.is_demo().unwrap());
    let counts = store.counts().unwrap();
    assert!(counts.total(JobState::Succeeded) > 0 && counts.total(JobState::DeadLettered) > 0);
    assert!(store.workers().unwrap().is_empty(), "every worker left the registry on quit");
}
