//! `bw demo` in a real terminal: tmux runs it, we read the dashboard while the workers run, quit
//! it, and check the summary, the store and that the terminal came back.

use std::process::Command;
use std::time::{Duration, Instant};

use backwave::{JobState, Store};

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(name: &str) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.map(|o| o.status.success()).unwrap_or(false),
            "tmux is needed for the demo's terminal test (CI installs it: apt-get install tmux)"
        );
        let session = format!("bwdemo-{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session, "-x", "120", "-y", "40"])
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

    fn alternate_screen_on(&self) -> bool {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.session, "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    fn wait_for(&self, text: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited {secs}s for {text:?}; the screen shows:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.session]).status();
    }
}

/// Regression: the dashboard ran in the demo's process, and its panic hook (which puts the
/// terminal back) also fired for handler panics the engine catches: every `resize-image` panic
/// left the alternate screen and the dashboard went on drawing over the shell.
#[test]
fn demo_dashboard_stays_whole_while_handlers_panic_and_quitting_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tty-demo.db");
    let bin = env!("CARGO_BIN_EXE_bw");
    let t = Tmux::start("top");
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
