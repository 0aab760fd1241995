//! The real `bw top` in a real terminal: tmux runs it at 120x32, we type into it and read the
//! screen back, then check the store and that the terminal came back to the shell.

use std::process::Command;
use std::time::{Duration, Instant};

use super::harness::{Fixture, T0};
use backwave::store::current_actor;
use backwave::{JobState, Permission};

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(name: &str, width: u16, height: u16) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.map(|o| o.status.success()).unwrap_or(false),
            "tmux is needed for the end-to-end dashboard test (CI installs it: apt-get install tmux)"
        );
        let session = format!("bwtop-{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session, "-x", &width.to_string(), "-y", &height.to_string()])
            .args(["env", "PS1=READY$ ", "TERM=xterm-256color", "bash", "--norc", "--noprofile"])
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session");
        Tmux { session }
    }

    fn send(&self, keys: &[&str]) {
        let status = Command::new("tmux").args(["send-keys", "-t", &self.session]).args(keys).status().unwrap();
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.session]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The process the pane's shell is running in the foreground (`bw top`).
    fn child_of_shell(&self) -> i32 {
        let out =
            Command::new("tmux").args(["display-message", "-p", "-t", &self.session, "#{pane_pid}"]).output().unwrap();
        let shell: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        children.split_whitespace().next().expect("the shell runs bw top").parse().unwrap()
    }

    fn alternate_screen_on(&self) -> bool {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.session, "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Wait until the screen shows `text` (the dashboard refreshes every second).
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited 10s for {text:?}; the screen shows:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.session]).status();
    }
}

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
    t.wait_for("READY$");
    t.send(&[&format!("BW_NOW={T0} {bin} --db {} top; echo TOP_EXITED_$?", path.display()), "Enter"]);
    let s = t.wait_for("1 Dead-Lettered 4");
    assert!(s.contains(&mail.short()), "the newest Dead-Lettered job is listed first:\n{s}");
    assert!(t.alternate_screen_on());

    t.send(&["Enter"]);
    t.wait_for(&format!("job {mail}"));
    t.wait_for("smtp 550 mailbox 'bob' unavailable");
    t.send(&["r"]);
    t.wait_for("Requeue 1 job?");
    t.send(&["y"]);
    let s = t.wait_for("Requeued 1 of 1");
    assert!(s.contains("requeued (was Dead-Lettered)"), "{s}");
    t.send(&["q"]); // closes the results
    t.wait_for("1 Dead-Lettered 3");
    t.send(&["q"]); // leaves the detail pane
    t.send(&["q"]); // quits
    let s = t.wait_for("TOP_EXITED_0");
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
    t.wait_for("READY$");
    t.send(&[&format!("{bin} --db {} top; echo TOP_EXITED_$?", path.display()), "Enter"]);
    t.wait_for("1 Dead-Lettered 4");
    assert!(t.alternate_screen_on());
    let top = t.child_of_shell();
    // SAFETY: kill(2) sends a signal to a process this test started; nothing else.
    assert_eq!(unsafe { libc::kill(top, libc::SIGTERM) }, 0);
    let s = t.wait_for("TOP_EXITED_");
    assert!(!t.alternate_screen_on(), "SIGTERM left the alternate screen:\n{s}");
    assert!(s.contains("READY$"));
}

#[test]
fn e2e_ctrl_c_quits_from_a_dialog_and_restores_the_terminal() {
    let f = Fixture::with_jobs();
    let path = f.store.path().to_path_buf();
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("ctrlc", 80, 24);
    t.wait_for("READY$");
    t.send(&[&format!("NO_COLOR=1 {bin} --db {} top --read-only; echo TOP_EXITED_$?", path.display()), "Enter"]);
    t.wait_for("1 Dead-Lettered");
    t.send(&["?"]);
    t.wait_for("this help");
    t.send(&["C-c"]);
    let s = t.wait_for("TOP_EXITED_0");
    assert!(!t.alternate_screen_on(), "Ctrl-C left the alternate screen:\n{s}");
    assert_eq!(f.store.counts().unwrap().total(JobState::DeadLettered), 4, "read-only changed nothing");
}
