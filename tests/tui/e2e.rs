//! The real `bw top` in a real terminal: tmux runs it at 120x32, we type into it and read the
//! screen back, then check the store and that the terminal came back to the shell.

use super::harness::{Fixture, T0};
use backwave::store::current_actor;
use backwave::{JobState, Permission};

use super::tmux::Tmux;

#[test]
fn e2e_open_requeue_and_quit_in_a_real_terminal() {
    let f = Fixture::with_jobs();
    let me = current_actor();
    if me != "root" {
        f.store.grant("root", &me, Permission::Operate).unwrap();
    }
    let mail = f.ids[3];
    let path = f.store.path().to_path_buf();
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("requeue", 120, 32);
    t.wait_for("READY$", 10);
    t.send(&[&format!("BW_NOW={T0} {bin} --db {} top; echo TOP_EXITED_$?", path.display()), "Enter"]);
    let s = t.wait_for("1 Dead-Lettered 4", 10);
    assert!(s.contains(&mail.short()), "the newest Dead-Lettered job is listed first:\n{s}");
    assert!(t.alternate_screen_on());

    t.send(&["Enter"]);
    t.wait_for(&format!("job {mail}"), 10);
    t.wait_for("smtp 550 mailbox 'bob' unavailable", 10);
    t.send(&["r"]);
    t.wait_for("Requeue 1 job?", 10);
    t.send(&["y"]);
    let s = t.wait_for("Requeued 1 of 1", 10);
    assert!(s.contains("requeued (was Dead-Lettered)"), "{s}");
    t.send(&["q"]); // closes the results
    t.wait_for("1 Dead-Lettered 3", 10);
    t.send(&["q"]); // leaves the detail pane
    t.send(&["q"]); // quits
    let s = t.wait_for("TOP_EXITED_0", 10);
    assert!(!t.alternate_screen_on(), "the alternate screen was left");
    assert!(!s.contains("BackWave ─"), "the dashboard is gone from the screen:\n{s}");
    assert!(s.contains("READY$"), "the shell prompt is back:\n{s}");

    let job = f.store.job(mail).unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Scheduled, 0), "a fresh budget");
    let last = f.store.history(mail).unwrap().pop().unwrap();
    assert_eq!(last.actor.as_deref(), Some(me.as_str()), "the actor is in the log");
    assert_eq!(last.from, Some(JobState::DeadLettered));
}

#[test]
fn e2e_sigterm_restores_the_terminal() {
    let f = Fixture::with_jobs();
    let path = f.store.path().to_path_buf();
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("sigterm", 100, 30);
    t.wait_for("READY$", 10);
    t.send(&[&format!("{bin} --db {} top; echo TOP_EXITED_$?", path.display()), "Enter"]);
    t.wait_for("1 Dead-Lettered 4", 10);
    assert!(t.alternate_screen_on());
    let top = t.child_of_shell();
    // SAFETY: kill(2) sends a signal to a process this test started; nothing else.
    assert_eq!(unsafe { libc::kill(top, libc::SIGTERM) }, 0);
    let s = t.wait_for("TOP_EXITED_", 10);
    assert!(!t.alternate_screen_on(), "SIGTERM left the alternate screen:\n{s}");
    assert!(s.contains("READY$"));
}

#[test]
fn e2e_ctrl_c_quits_from_a_dialog_and_restores_the_terminal() {
    let f = Fixture::with_jobs();
    let path = f.store.path().to_path_buf();
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("ctrlc", 80, 24);
    t.wait_for("READY$", 10);
    t.send(&[&format!("NO_COLOR=1 {bin} --db {} top --read-only; echo TOP_EXITED_$?", path.display()), "Enter"]);
    t.wait_for("1 Dead-Lettered", 10);
    t.send(&["?"]);
    t.wait_for("this help", 10);
    t.send(&["C-c"]);
    let s = t.wait_for("TOP_EXITED_0", 10);
    assert!(!t.alternate_screen_on(), "Ctrl-C left the alternate screen:\n{s}");
    assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 4, "read-only changed nothing");
}
