//! A real terminal for end-to-end tests: tmux runs a bare shell at a given size, tests type into
//! it and read the screen back. Shared by the `tui` and `demo` test binaries.
#![allow(dead_code)] // each binary uses the part it needs

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    session: String,
}

impl Tmux {
    pub fn start(name: &str, width: u16, height: u16) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.map(|o| o.status.success()).unwrap_or(false),
            "tmux is needed for the end-to-end terminal tests (CI installs it: apt-get install tmux)"
        );
        let session = format!("bw-{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session, "-x", &width.to_string(), "-y", &height.to_string()])
            .args(["env", "PS1=READY$ ", "TERM=xterm-256color", "bash", "--norc", "--noprofile"])
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session");
        Tmux { session }
    }

    pub fn send(&self, keys: &[&str]) {
        let status = Command::new("tmux").args(["send-keys", "-t", &self.session]).args(keys).status().unwrap();
        assert!(status.success());
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.session]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The process the pane's shell is running in the foreground.
    pub fn child_of_shell(&self) -> i32 {
        let out =
            Command::new("tmux").args(["display-message", "-p", "-t", &self.session, "#{pane_pid}"]).output().unwrap();
        let shell: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        children.split_whitespace().next().expect("the shell runs a program").parse().unwrap()
    }

    pub fn alternate_screen_on(&self) -> bool {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.session, "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Wait up to `secs` until the screen shows `text`.
    pub fn wait_for(&self, text: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited {secs}s for {text:?}; the screen shows:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.session]).status();
    }
}
