//! `bw demo` on a real terminal: it runs on a pty (tests/common/pty.rs), we read the dashboard
//! while the workers run, quit it, and check the summary, the store and that the terminal came
//! back.

use std::time::Duration;

use backwave::{JobState, Store};

use super::pty::Term;

/// Regression: the dashboard ran in the demo's process, and its panic hook (which puts the
/// terminal back) also fired for handler panics the engine catches: every `resize-image` panic
/// left the alternate screen and the dashboard went on drawing over the shell.
#[test]
fn demo_dashboard_stays_whole_while_handlers_panic_and_quitting_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tty-demo.db");
    let wait = Duration::from_secs(20);
    let mut t = Term::new(120, 40)
        .env("NO_COLOR", "1")
        .cwd(dir.path())
        .spawn(env!("CARGO_BIN_EXE_bw"), &["--db", db.to_str().unwrap(), "demo"]);
    t.wait_for("BackWave ─", wait);
    // A panicking handler has dead-lettered by the time its cause is listed.
    let s = t.wait_for("attempt to divide by zero", wait);
    std::thread::sleep(Duration::from_millis(1500));
    let s2 = t.screen();
    assert!(t.alternate_screen(), "the dashboard left the alternate screen:\n{s2}");
    for screen in [&s, &s2] {
        let title = screen.lines().next().unwrap_or_default();
        assert!(title.contains("BackWave ─") && title.contains("tty-demo.db"), "title line damaged:\n{screen}");
        assert!(screen.contains("Dead-Lettered") && screen.contains("Quarantined"), "{screen}");
    }

    // q asks first here: quitting stops the demo's workers (issue 19); Esc never quits.
    t.send("q");
    t.wait_for("Quit, and stop the demo?", wait);
    t.send("n");
    t.wait_gone("Quit, and stop the demo?", wait);
    // Esc once n was read, and q once Esc was: keys read together can parse as one (Esc q is
    // Alt-q).
    t.send("\x1b");
    let s = t.wait_for("nothing to close here: q quits", wait);
    assert!(s.contains("BackWave ─"), "n and Esc keep the demo running:\n{s}");
    t.send("q");
    t.wait_for("Quit, and stop the demo?", wait);
    t.send("y");
    assert_eq!(t.wait_exit(wait), 0);
    let s = t.screen();
    assert!(!t.alternate_screen() && !t.cursor_hidden() && t.cooked(), "the terminal came back:\n{s}");
    assert!(s.contains("Explore the result") && s.contains("DEAD-LETTERED"), "the summary follows:\n{s}");

    let store = Store::open(&db).unwrap();
    assert!(store.is_demo().unwrap());
    let counts = store.counts().unwrap();
    assert!(counts.total(JobState::Succeeded) > 0 && counts.total(JobState::DeadLettered) > 0);
    assert!(store.workers().unwrap().is_empty(), "every worker left the registry on quit");
}
