//! A real terminal for end-to-end tests, with nothing installed: the program runs on a pty of a
//! given size (portable-pty) and everything it writes goes through a vt100 screen parser, so a
//! test reads what a person would see. Shared by the `tui`, `demo` and `cli` test binaries.
//! It never shells out: a test that needs a terminal needs only this file.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

/// Keys as a terminal sends them.
pub mod keys {
    pub const ENTER: &str = "\r";
    pub const CTRL_C: &str = "\x03";
    pub const ESC: &str = "\x1b";
}

/// How to start a program on a pty: its size and environment.
pub struct Term {
    size: PtySize,
    env: Vec<(String, Option<String>)>,
    cwd: Option<std::path::PathBuf>,
}

impl Term {
    /// A `cols` x `rows` xterm. COLUMNS, LINES and NO_COLOR from the test's own environment are
    /// removed, so the program sizes and colours itself from the terminal as it would for a person.
    pub fn new(cols: u16, rows: u16) -> Term {
        let env = vec![
            ("TERM".into(), Some("xterm-256color".into())),
            ("COLUMNS".into(), None),
            ("LINES".into(), None),
            ("NO_COLOR".into(), None),
        ];
        Term { size: PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }, env, cwd: None }
    }

    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Term {
        self.env.push((key.into(), Some(value.as_ref().to_string_lossy().into_owned())));
        self
    }

    pub fn cwd(mut self, dir: &Path) -> Term {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Start `program` with `args`; the screen fills from a reader thread from then on.
    pub fn spawn<S: AsRef<OsStr>>(self, program: impl AsRef<OsStr>, args: &[S]) -> Pty {
        let pair = native_pty_system().openpty(self.size).expect("open a pty");
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            }
        }
        // Without a cwd portable-pty starts in $HOME; the test's own folder is what a test means.
        cmd.cwd(self.cwd.clone().unwrap_or_else(|| std::env::current_dir().unwrap()));
        let child = pair.slave.spawn_command(cmd).expect("spawn on the pty");
        // Our copy of the slave must go, or the reader never sees the end when the program exits.
        drop(pair.slave);

        let shared = Arc::new(Mutex::new(Shared {
            parser: vt100::Parser::new(self.size.rows, self.size.cols, 0),
            transcript: Vec::new(),
            closed: false,
        }));
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let feed = Arc::clone(&shared);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                // EOF, or EIO on Linux once every slave descriptor is closed: the program is gone.
                let n = match reader.read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    read => read.unwrap_or(0),
                };
                let mut s = feed.lock().unwrap();
                if n == 0 {
                    s.closed = true;
                    return;
                }
                s.parser.process(&buf[..n]);
                s.transcript.extend_from_slice(&buf[..n]);
            }
        });
        let writer = pair.master.take_writer().expect("pty writer");
        Pty { child, master: pair.master, writer, shared }
    }
}

struct Shared {
    parser: vt100::Parser,
    /// Every byte the program wrote, escapes included.
    transcript: Vec<u8>,
    closed: bool,
}

/// A program running on a pty.
pub struct Pty {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    shared: Arc<Mutex<Shared>>,
}

impl Pty {
    /// Type `keys` (see [`keys`] for Enter, Ctrl-C, …).
    pub fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("write to the pty");
        self.writer.flush().unwrap();
    }

    /// The screen's text, one line per row, trailing blanks trimmed.
    pub fn screen(&self) -> String {
        self.shared.lock().unwrap().parser.screen().contents()
    }

    /// Wait up to `timeout` until the screen shows `text`; on failure the panic shows the screen.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited {timeout:?} for {text:?}; the screen shows:\n{s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait up to `timeout` until the screen no longer shows `text`: what a key that closes
    /// something did, so that the next key is sent only once the program has read this one (two
    /// keys read together can parse as one: Esc then q is Alt-q).
    pub fn wait_gone(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if !s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "waited {timeout:?} for {text:?} to go; the screen shows:\n{s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alternate_screen(&self) -> bool {
        self.shared.lock().unwrap().parser.screen().alternate_screen()
    }

    pub fn cursor_hidden(&self) -> bool {
        self.shared.lock().unwrap().parser.screen().hide_cursor()
    }

    /// Whether the line discipline is back to what a shell expects: canonical input with echo
    /// (raw mode clears both).
    pub fn cooked(&self) -> bool {
        let fd = self.master.as_raw_fd().expect("the pty's descriptor");
        // SAFETY: tcgetattr fills the zeroed struct from a descriptor we own and keep open.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(fd, &mut termios) }, 0, "tcgetattr on the pty");
        termios.c_lflag & libc::ICANON != 0 && termios.c_lflag & libc::ECHO != 0
    }

    /// The program (and the screen) take a new size, as when a person resizes the window.
    /// Resize the window as a terminal does: the screen first, then the program is told
    /// (SIGWINCH). The screen's lock is held across both, so every byte the program writes for
    /// its new size is read at the new size; resizing the pty first let a fast redraw be parsed
    /// at the old size and then never repainted (a flaky `e2e_resize_…`).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let mut shared = self.shared.lock().unwrap();
        shared.parser.set_size(rows, cols);
        self.master.resize(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("resize the pty");
        drop(shared);
    }

    pub fn pid(&self) -> i32 {
        self.child.process_id().expect("the program's pid") as i32
    }

    /// Send `signal` (libc::SIGTERM, …) to the program.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of the child this test spawned and has not yet reaped.
        let r = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(r, 0, "kill({}, {signal}): {}", self.pid(), std::io::Error::last_os_error());
    }

    /// Wait up to `timeout` for the program to exit and for the last of its output to reach the
    /// screen; its exit code. Panics, showing the screen, on timeout or when a signal killed it
    /// (`bw` handles the signals it is sent: dying of one is a failure in every test).
    pub fn wait_exit(&mut self, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the program") {
                if let Some(signal) = status.signal() {
                    panic!("the program was killed by {signal}; the screen shows:\n{}", self.screen());
                }
                break status;
            }
            if Instant::now() >= deadline {
                panic!("the program did not exit within {timeout:?}; the screen shows:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while !self.shared.lock().unwrap().closed {
            assert!(Instant::now() < deadline, "the pty stayed open after the program exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        status.exit_code()
    }

    /// Every byte the program wrote so far, escape sequences included.
    pub fn transcript(&self) -> Vec<u8> {
        self.shared.lock().unwrap().transcript.clone()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        // A test that failed part-way must not leave the program running.
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own, still unreaped child.
            unsafe { libc::kill(self.pid(), libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}
