//! The terminal side: raw mode and the alternate screen in, and always back out (on quit,
//! Ctrl-C, a panic, SIGTERM/SIGHUP/SIGINT); and the event loop that turns keys, resizes, signals,
//! store answers and ticks into actions. Keys never wait for the store: it answers on a channel.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crossterm::event::{self, Event};
use crossterm::{cursor, execute};

use super::app::{Action, App, EditorRequest};
use super::data::{self, Request, Response};
use backwave::{Clock, Store};

/// What wakes the loop.
enum Wake {
    Key(event::KeyEvent),
    Mouse(Action),
    Resize(u16, u16),
    Store(Response),
    Signal,
    InputGone,
}

/// How often the loop wakes with nothing to do: drives the refresh timer and `g` resolution.
/// Short enough to feel instant, long enough to keep an idle dashboard near 0% CPU.
const TICK: Duration = Duration::from_millis(200);

/// Put the terminal back: cooked mode, off the alternate screen (ratatui's restore), and the
/// cursor shown. Safe to call more than once and from a panic or a signal; errors are ignored,
/// since `ratatui::restore` would print them with `eprintln!`, which panics when stderr is gone.
pub fn restore() {
    let mut out = io::stdout();
    let _ = out.write_all(MOUSE_OFF.as_bytes());
    let _ = ratatui::try_restore();
    let _ = execute!(out, cursor::Show);
    let _ = out.flush();
}

/// Mouse reporting of presses and the wheel only (1000) in SGR form (1006). Not crossterm's
/// EnableMouseCapture, which also asks for every motion: a stream of events for nothing.
const MOUSE_ON: &str = "\x1b[?1000h\x1b[?1006h";
const MOUSE_OFF: &str = "\x1b[?1006l\x1b[?1000l";

fn mouse_on() -> io::Result<()> {
    let mut out = io::stdout();
    out.write_all(MOUSE_ON.as_bytes())?;
    out.flush()
}

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Run the dashboard until the operator quits. `open` opens the store for the background thread.
pub fn run(mut app: App, clock: Clock, open: impl Fn() -> backwave::Result<Store> + Send + 'static) -> io::Result<()> {
    let (wake_tx, wake_rx) = mpsc::channel::<Wake>();
    let (req_tx, req_rx) = mpsc::channel::<Request>();

    // The terminal comes back whatever happens: ratatui's init installs a panic hook that
    // restores it before the message prints; the guard covers every return, a signal included
    // (SIGTERM/SIGHUP/SIGINT end the loop below rather than the process).
    let mut term = match ratatui::try_init() {
        Ok(term) => term,
        Err(e) => {
            restore();
            return Err(e);
        }
    };
    let _guard = Guard;
    execute!(io::stdout(), cursor::Hide)?;
    mouse_on()?;
    term.clear()?;

    // Whether the input thread reads keys: off while the editor has the terminal.
    let input = Arc::new(AtomicU8::new(INPUT_ON));
    let signal_input = Arc::clone(&input);
    let signals_tx = wake_tx.clone();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
    ])?;
    let signal_handle = signals.handle();
    std::thread::Builder::new().name("bw-top-signals".into()).spawn(move || {
        for signal in signals.forever() {
            // Ctrl-C in the editor reaches every process of the terminal's foreground group, us
            // included: it is the editor's key then, not a request to quit the dashboard.
            if signal == signal_hook::consts::SIGINT && signal_input.load(Ordering::Acquire) != INPUT_ON {
                continue;
            }
            let _ = signals_tx.send(Wake::Signal);
            return;
        }
    })?;

    // crossterm starts listening for SIGWINCH when its event source is first used. Use it here,
    // before the first frame, not on the input thread's first poll: a window resized between the
    // first frame and that poll (a busy machine) was never redrawn at its new size.
    event::poll(Duration::ZERO)?;
    let input_tx = wake_tx.clone();
    let input_state = Arc::clone(&input);
    std::thread::Builder::new().name("bw-top-input".into()).spawn(move || loop {
        // While the editor runs the terminal is its: this thread reads nothing (a keystroke
        // read here would be lost to the editor).
        if input_state.load(Ordering::Acquire) != INPUT_ON {
            input_state.store(INPUT_OFF, Ordering::Release);
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let wake = match event::poll(INPUT_POLL) {
            Ok(false) => continue,
            Ok(true) => match event::read() {
                Ok(Event::Key(k)) => Wake::Key(k),
                Ok(Event::Mouse(m)) => match mouse_action(m) {
                    Some(a) => Wake::Mouse(a),
                    None => continue,
                },
                Ok(Event::Resize(w, h)) => Wake::Resize(w, h),
                Ok(_) => continue,
                Err(_) => Wake::InputGone,
            },
            Err(_) => Wake::InputGone,
        };
        let gone = matches!(wake, Wake::InputGone);
        if input_tx.send(wake).is_err() || gone {
            return;
        }
    })?;

    let store_tx = wake_tx.clone();
    let worker =
        data::spawn_worker(open, app.cfg.actor.clone(), req_rx, move |r| store_tx.send(Wake::Store(r)).is_ok());

    // A pinned clock (BW_NOW) pins where time starts; the dashboard still needs it to move to
    // schedule refreshes.
    let started = std::time::Instant::now();
    let base = clock.now();
    let now = move || match clock {
        Clock::System => clock.now(),
        Clock::Manual(_) => base + started.elapsed().as_millis() as backwave::Millis,
    };
    let size = term.size()?;
    app.update(Action::Resize(size.width, size.height));
    let mut redraw = true;
    loop {
        app.update(Action::Tick(now()));
        for r in app.take_requests() {
            let _ = req_tx.send(r);
        }
        if let Some(edit) = app.take_editor() {
            let result = suspended(&input, || edit_in_editor(&edit));
            // Back on the alternate screen in raw mode, whatever the editor did to the terminal.
            term = ratatui::try_init()?;
            execute!(io::stdout(), cursor::Hide)?;
            mouse_on()?;
            term.clear()?;
            app.update(Action::Edited(result));
            redraw = true;
            continue;
        }
        if redraw {
            term.draw(|f| f.render_widget(&app, f.area()))?;
        }
        if app.quit {
            break;
        }
        let wake = match wake_rx.recv_timeout(TICK) {
            Ok(w) => w,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Relative times and the slow-store notice move with the clock.
                redraw = app.in_flight.is_some() || app.pending_g() || now() / 1000 != app.now / 1000;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        redraw = true;
        match wake {
            Wake::Key(k) => {
                if let Some(a) = app.action_for_key(k) {
                    app.update(a);
                }
            }
            Wake::Mouse(a) => app.update(a),
            Wake::Resize(w, h) => {
                term.autoresize()?;
                app.update(Action::Resize(w, h));
            }
            Wake::Store(r) => app.update(Action::Store(r)),
            Wake::Signal | Wake::InputGone => app.quit = true,
        }
    }
    signal_handle.close();
    drop(req_tx);
    // The store thread finishes its current statement; we do not wait for a slow one.
    drop(worker);
    Ok(())
}

/// A click or the wheel as an action; other mouse events (releases, drags) are nothing.
pub fn mouse_action(m: event::MouseEvent) -> Option<Action> {
    use event::{MouseButton, MouseEventKind};
    match m.kind {
        MouseEventKind::Down(MouseButton::Left) => Some(Action::Click { column: m.column, row: m.row }),
        MouseEventKind::ScrollDown => Some(Action::Wheel { down: true }),
        MouseEventKind::ScrollUp => Some(Action::Wheel { down: false }),
        _ => None,
    }
}

/// The input thread reads keys.
const INPUT_ON: u8 = 0;
/// Asked to stop reading.
const INPUT_ASKED: u8 = 1;
/// Not reading: the terminal belongs to someone else.
const INPUT_OFF: u8 = 2;
/// How long the input thread waits for a key before it looks at its switch again.
const INPUT_POLL: Duration = Duration::from_millis(50);

/// Run `f` with the dashboard off the terminal: the input thread stopped reading, raw mode and
/// the alternate screen left, the cursor shown. The caller re-enters the dashboard afterwards.
fn suspended<T>(input: &AtomicU8, f: impl FnOnce() -> T) -> T {
    input.store(INPUT_ASKED, Ordering::Release);
    let asked = std::time::Instant::now();
    while input.load(Ordering::Acquire) != INPUT_OFF && asked.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(5));
    }
    restore();
    let out = f();
    input.store(INPUT_ON, Ordering::Release);
    out
}

/// The editor as the operator set it: `$VISUAL`, then `$EDITOR`, then `vi`.
fn editor_command() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string())
}

/// Write the payload to a private temporary file, open it in the editor (run by `sh`, so an
/// `EDITOR` with arguments such as `code -w` works), and read it back. The file is removed
/// whatever happens. An editor that fails or exits non-zero gives an error, not a payload.
fn edit_in_editor(edit: &EditorRequest) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::env::temp_dir().join(format!("bw-payload-{}-{}.json", std::process::id(), edit.id.short()));
    let write = || -> io::Result<()> {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        file.write_all(&edit.payload)?;
        file.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&path);
        return Err(format!("cannot write the payload to {}: {e}", path.display()));
    }
    let editor = editor_command();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec {editor} \"$1\""))
        .arg("bw-editor")
        .arg(&path)
        .status();
    let result = match status {
        Ok(s) if s.success() => std::fs::read(&path)
            .map_err(|e| format!("cannot read the edited payload back from {}: {e}", path.display())),
        Ok(s) => Err(format!("the editor '{editor}' exited with {s}: nothing changed")),
        Err(e) => Err(format!("cannot run the editor '{editor}': {e}")),
    };
    let _ = std::fs::remove_file(&path);
    result
}
