//! The dashboard's state and the one function that changes it, [`App::update`]. Keys become
//! [`Action`]s (see `keymap`), actions update state, and database work leaves as [`Request`]s in
//! an outbox for the background thread; drawing (see `view`) only reads. No terminal here, no
//! store: tests drive an `App` with actions and feed it responses.
//!
//! The state is in parts: the navigation ([`Nav`]: view, per-view position and filter, open
//! job, marks), the live feed ([`Feed`]: log, chart, throughput), the [`Mode`] (prompt, popup,
//! confirmation) and the last snapshot. What differs per screen (rows, Enter, the row the
//! actions name, the kept selection) is asked of the screen on show (`tui::screens`), never
//! matched on the view here. The incident actions' helpers (pause target, bulk cancel, the
//! editor round trip, the `operate` check) live in `app/incident.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::data::{
    How, Op, Preview, Query, Report, Request, Response, Snapshot, Target, View, GROUPS_CHANGED_MS, GROUPS_EVERY_MS,
};
pub use super::feed::{Feed, LOG_KEEP};
use super::filter::Filter;
use super::prompt::{self, InputRequest, Prompt};
use super::screens::{Open, Row, Screen};
mod incident;

use backwave::{FailureDetail, Job, JobId, Millis, Transition};
use incident::op_key;

/// What the user can ask for. Every key maps to one of these; so do the clock and the store.
#[derive(Clone, Debug)]
pub enum Action {
    Quit,
    /// `q`: back out of whatever is open, quit from the top.
    Back,
    /// Esc: back out of whatever is open; never quits (one Esc too many ended the dashboard,
    /// and `bw demo` with it).
    Close,
    NextView,
    PrevView,
    ShowView(View),
    Up,
    Down,
    PageUp,
    PageDown,
    /// The second `g` of `gg`, or Home.
    Top,
    Bottom,
    /// `g`: the first half of `gg`, or (alone, in Dead-Lettered and Quarantined) group toggle.
    G,
    ToggleGroup,
    Open,
    ToggleMark,
    Requeue,
    Cancel,
    Reveal,
    /// `P`: pause or resume the selected queue (Queues view) or the job's wire name.
    PauseResume,
    /// `X`: cancel every job of the Scheduled or Running list (its filter applied).
    CancelMatching,
    /// `n`: make the open, marked or selected Scheduled jobs due now.
    RunNow,
    /// `E`: edit the payload of the open or selected Dead-Lettered or Quarantined job.
    EditPayload,
    /// `t`: enqueue one job of the selected schedule now (Schedules view).
    Trigger,
    TogglePause,
    Help,
    StartFilter,
    /// A key of the line editor (typing, Ctrl-U, Ctrl-W, Ctrl-A/E, arrows…).
    FilterEdit(InputRequest),
    /// Up (`older`) or Down in the prompt: the filters applied before.
    FilterRecall {
        older: bool,
    },
    FilterSubmit,
    FilterCancel,
    Confirm,
    /// `f` in a group requeue's confirmation: include the jobs no live worker handles.
    ConfirmForced,
    /// `1`…`3` in a pause's confirmation: pause for [`PAUSE_FOR`]`[i]` only.
    ConfirmPauseFor(usize),
    /// `y` / `r` after a payload edit: save it, and with `requeue` requeue the job too.
    SaveEdit {
        requeue: bool,
    },
    /// `e` after a bad payload edit: back into the editor with the text as it was left.
    ReopenEditor,
    /// The editor closed (sent by the terminal loop): the file's bytes, or why there are none.
    Edited(Result<Vec<u8>, String>),
    Decline,
    /// A left click at a cell: a tab shows its view, a list row is selected (a click on the
    /// selected row opens it, as Enter).
    Click {
        column: u16,
        row: u16,
    },
    /// The mouse wheel: move the selection (scroll the detail pane).
    Wheel {
        down: bool,
    },
    /// Time passes (the event loop's tick, or a test's).
    Tick(Millis),
    Resize(u16, u16),
    Store(Response),
}

/// What has the keyboard.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Normal,
    /// Typing a filter; `input` is the line being edited.
    Filter {
        input: Prompt,
    },
    /// `q` at the top of a dashboard whose quitting stops something (`bw demo`'s workers).
    ConfirmQuit,
    /// Waiting for the store to count what an action would do.
    Preparing {
        op: Op,
    },
    Confirm(Preview),
    /// An action is running.
    Running {
        op: Op,
    },
    Results(Report),
    Help,
    /// `$EDITOR` is open on a job's payload (the terminal loop runs it); `original` is the
    /// payload as stored.
    Editing {
        id: JobId,
        original: Vec<u8>,
    },
    /// The edited payload is valid JSON: save it (y), save and requeue (r), or discard (n).
    SaveEdit {
        id: JobId,
        original: Vec<u8>,
        payload: Vec<u8>,
    },
    /// The edited payload is not JSON: `error` says why, in one line; re-open (e) or discard.
    EditInvalid {
        id: JobId,
        original: Vec<u8>,
        payload: Vec<u8>,
        error: String,
    },
}

/// A payload for the terminal loop to open in `$EDITOR` (see [`App::take_editor`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EditorRequest {
    pub id: JobId,
    pub payload: Vec<u8>,
}

/// Per-view list position, grouping and filter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewState {
    /// Index of the selected row in the whole list (jobs) or in the groups.
    pub selected: u64,
    /// Index of the first row on screen.
    pub offset: u64,
    pub grouped: bool,
    pub filter: Filter,
    pub filter_text: String,
    /// Set when Enter on another view opened this one (a queue's scheduled jobs): q and Esc
    /// go back there instead of quitting the dashboard.
    pub back_to: Option<View>,
}

/// The failure detail pane of the open job.
#[derive(Clone, Debug, PartialEq)]
pub enum Reveal {
    Hidden,
    Asked,
    Shown(Vec<(i64, FailureDetail)>),
    Refused(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Detail {
    pub id: JobId,
    pub reveal: Reveal,
    pub scroll: u16,
}

/// How the store is doing, for the footer.
#[derive(Clone, Debug, PartialEq)]
pub enum DbStatus {
    Connecting,
    Ok {
        query_ms: f64,
    },
    /// Locked by another writer past the busy timeout: retried at the next interval.
    Busy {
        since: Millis,
    },
    Failed {
        error: String,
    },
}

/// Fixed settings of one dashboard.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store as `--db` named it (a file, or a URL with its password redacted).
    pub store: String,
    pub actor: String,
    pub interval: Duration,
    pub read_only: bool,
    pub color: bool,
    /// `q` asks first: quitting stops more than the dashboard (`bw demo` stops its workers).
    pub ask_before_quit: bool,
}

/// The durations a pause's confirmation offers besides "until resumed" (keys 1, 2, 3).
pub const PAUSE_FOR: [Duration; 3] =
    [Duration::from_secs(15 * 60), Duration::from_secs(60 * 60), Duration::from_secs(4 * 60 * 60)];

/// The screen row of the tabs (see `view`).
pub const TABS_ROW: u16 = 4;

/// How long a lone `g` waits for a second one before it means "group".
pub const G_TIMEOUT_MS: Millis = 400;
/// Where the operator is: the view, each view's position, grouping and filter, the open job
/// and the marks.
#[derive(Clone, Debug)]
pub struct Nav {
    pub view: View,
    pub views: BTreeMap<View, ViewState>,
    pub detail: Option<Detail>,
    /// Marked jobs (any page, any view).
    pub marks: BTreeMap<JobId, ()>,
}

impl Nav {
    fn new() -> Nav {
        let mut views: BTreeMap<View, ViewState> = View::ALL.iter().map(|v| (*v, ViewState::default())).collect();
        for (v, vs) in views.iter_mut() {
            vs.grouped = v.grouped_by_default();
        }
        Nav { view: View::DeadLettered, views, detail: None, marks: BTreeMap::new() }
    }

    pub fn vs(&self) -> &ViewState {
        &self.views[&self.view]
    }

    fn vs_mut(&mut self) -> &mut ViewState {
        self.views.get_mut(&self.view).expect("every view has a state")
    }

    /// Whether the view on show lists groups now.
    pub fn grouped(&self) -> bool {
        self.vs().grouped && self.view.groups()
    }
}

pub struct App {
    pub cfg: Config,
    /// The app's clock, set by [`Action::Tick`]: injected, so tests pin it.
    pub now: Millis,
    pub nav: Nav,
    pub mode: Mode,
    pub feed: Feed,
    pub snapshot: Option<Snapshot>,
    pub db: DbStatus,
    /// The last error or notice, shown in the footer until the next key.
    pub error: Option<String>,
    pub notice: Option<String>,
    pub width: u16,
    pub height: u16,
    pub quit: bool,
    /// `p`: the screen is frozen (no refresh).
    pub(crate) paused: bool,
    /// A refresh is with the store; when it was sent.
    pub(crate) in_flight: Option<Millis>,
    last_refresh: Option<Millis>,
    /// Something changed that the next refresh must reflect: send one as soon as possible.
    dirty: bool,
    pending_g: Option<Millis>,
    outbox: Vec<Request>,
    /// A payload waiting to be opened in the editor by the terminal loop.
    editor: Option<EditorRequest>,
    /// `E` on a listed job: its payload is read by the next refresh, then the editor opens.
    edit_on_load: Option<JobId>,
    /// When the groups on screen were read (None: read them at the next refresh).
    groups_read_at: Option<Millis>,
    /// The count of the grouped view's state when its groups were read.
    groups_count: Option<u64>,
    /// Filters applied, oldest first, for Up/Down in the prompt.
    filter_history: Vec<String>,
}

impl App {
    pub fn new(cfg: Config, now: Millis) -> App {
        App {
            cfg,
            now,
            nav: Nav::new(),
            mode: Mode::Normal,
            feed: Feed::default(),
            snapshot: None,
            db: DbStatus::Connecting,
            error: None,
            notice: None,
            width: 120,
            height: 32,
            quit: false,
            paused: false,
            in_flight: None,
            last_refresh: None,
            dirty: true,
            pending_g: None,
            outbox: Vec::new(),
            editor: None,
            edit_on_load: None,
            groups_read_at: None,
            groups_count: None,
            filter_history: Vec::new(),
        }
    }

    /// Ask for a refresh at the next tick, whatever the interval.
    pub fn refresh_soon(&mut self) {
        self.dirty = true;
    }

    /// A lone `g` is waiting to become `gg` or "group".
    pub fn pending_g(&self) -> bool {
        self.pending_g.is_some()
    }

    /// The payload to open in `$EDITOR`, if `E` asked for one. The terminal loop takes it, runs
    /// the editor with the terminal restored, and answers with [`Action::Edited`].
    pub fn take_editor(&mut self) -> Option<EditorRequest> {
        self.editor.take()
    }

    /// Requests for the store that actions produced, oldest first.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.outbox)
    }

    pub fn vs(&self) -> &ViewState {
        self.nav.vs()
    }

    fn vs_mut(&mut self) -> &mut ViewState {
        self.nav.vs_mut()
    }

    /// The screen on show.
    pub(crate) fn screen(&self) -> &'static dyn Screen {
        self.nav.view.screen(self.nav.grouped())
    }

    /// What the selected row stands for.
    pub fn selected_row(&self) -> Option<Row> {
        self.screen().row(self, self.vs().selected)
    }

    /// Whether the terminal is large enough for the dashboard (see `view::fits`).
    pub fn fits(&self) -> bool {
        super::view::fits(self.width, self.height)
    }

    /// The action for a key pressed now: the mode's, or while the terminal is too small only
    /// quitting ([`keymap::action_when_too_small`]).
    pub fn action_for_key(&self, key: crossterm::event::KeyEvent) -> Option<Action> {
        if self.fits() {
            super::keymap::action_for(&self.mode, key)
        } else {
            super::keymap::action_when_too_small(key)
        }
    }

    /// Rows of the list area at the current size (see `view::list_rows`).
    pub fn page_rows(&self) -> usize {
        super::view::list_rows(self.height, self.filter_line_shown()).max(1)
    }

    pub fn filter_line_shown(&self) -> bool {
        matches!(self.mode, Mode::Filter { .. }) || !self.vs().filter_text.is_empty()
    }

    /// Whether the grouped view re-reads its groups now: every [`GROUPS_EVERY_MS`], and after
    /// [`GROUPS_CHANGED_MS`] once the header's count of the view's state has moved since they
    /// were read (found at 3 a.m.: the header said 43 Dead-Lettered while the groups summed to
    /// 39 for ten seconds, and a group's requeue counted more jobs than its row showed).
    fn groups_due(&self) -> bool {
        let Some(at) = self.groups_read_at else { return true };
        let age = self.now - at;
        let count = self.nav.view.state().zip(self.snapshot.as_ref()).map(|(st, s)| s.counts.total(st));
        age >= GROUPS_EVERY_MS || (age >= GROUPS_CHANGED_MS && count != self.groups_count)
    }

    /// The query the next refresh runs.
    pub fn query(&self) -> Query {
        let vs = self.vs();
        let filter = self.nav.view.state().map(|state| vs.filter.job_filter(state));
        let grouped = self.nav.grouped();
        let mut q = Query {
            view: self.nav.view,
            grouped,
            read_groups: grouped && self.groups_due(),
            filter,
            offset: vs.offset,
            limit: self.page_rows(),
            detail: self.nav.detail.as_ref().map(|d| d.id),
            payload: self.edit_on_load,
            log_cursor: self.feed.log_cursor,
            chart_cursor: self.feed.chart_cursor,
            actor: self.cfg.actor.clone(),
            wire_names: Vec::new(),
            check_names: false,
        };
        self.screen().ask(self, &mut q);
        q
    }

    /// Jobs of the current page (empty while the page is for another view).
    pub fn page_jobs(&self) -> &[Job] {
        match &self.snapshot {
            Some(s) if self.snapshot_is_for_view(s) => s.page.as_ref().map(|p| p.jobs.as_slice()).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Whether the snapshot answers the view (and grouping) on screen now.
    pub fn snapshot_is_for_view(&self, s: &Snapshot) -> bool {
        s.query.as_ref().is_some_and(|q| q.view == self.nav.view && q.grouped == self.nav.grouped())
    }

    /// The snapshot held, if it answers the view (and grouping) on screen now.
    pub fn snapshot_for_view(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref().filter(|s| self.snapshot_is_for_view(s))
    }

    /// The selected job, when it is on the page held.
    pub fn selected_job(&self) -> Option<&Job> {
        let s = self.snapshot.as_ref()?;
        let i = self.vs().selected.checked_sub(s.page_offset)?;
        self.page_jobs().get(i as usize)
    }

    /// Rows in the current list: jobs matching the filter, groups, queues or log entries.
    pub fn list_len(&self) -> u64 {
        self.screen().len(self)
    }

    /// Log entries that pass the Log view's filter, newest first (the top of the view is now).
    pub fn log_rows(&self) -> Vec<&Transition> {
        self.feed.rows(&self.nav.views[&View::Log].filter)
    }

    fn group_target(&self) -> Option<Target> {
        match self.selected_row()? {
            Row::Group(t) => Some(t),
            _ => None,
        }
    }

    /// The jobs an action applies to: the open job, else the marked ones, else the selected one.
    fn job_target(&self) -> Option<Vec<JobId>> {
        if let Some(d) = &self.nav.detail {
            return Some(vec![d.id]);
        }
        if !self.nav.marks.is_empty() {
            return Some(self.nav.marks.keys().copied().collect());
        }
        match self.selected_row()? {
            Row::Job(id) | Row::Entry { job: id, .. } => Some(vec![id]),
            _ => None,
        }
    }

    /// Apply one action. The only place state changes.
    pub fn update(&mut self, action: Action) {
        // A lone `g` followed by anything but `g` meant "group" in the views that group.
        if let Some(_at) = self.pending_g {
            if !matches!(
                action,
                Action::G | Action::Tick(_) | Action::Store(_) | Action::Resize(..) | Action::Edited(_)
            ) {
                self.pending_g = None;
                self.toggle_group_if_groupable();
            }
        }
        if matches!(action, Action::Tick(_) | Action::Store(_) | Action::Resize(..) | Action::Edited(_)) {
        } else {
            // A key clears the previous notice; errors stay until the next key too.
            self.error = None;
            self.notice = None;
        }
        match action {
            Action::Tick(now) => self.tick(now),
            Action::Resize(w, h) => {
                let rows_before = self.page_rows();
                self.width = w;
                self.height = h;
                if self.page_rows() != rows_before {
                    self.keep_selection_visible();
                    self.dirty = true;
                }
            }
            Action::Store(r) => self.on_response(r),
            Action::Edited(result) => self.edited(result),
            Action::Quit => self.quit = true,
            // Behind the too-small screen nothing is shown to act on (a mouse click included).
            _ if !self.fits() => {}
            other => self.on_key_action(other),
        }
    }

    fn on_key_action(&mut self, action: Action) {
        match self.mode.clone() {
            Mode::Help => {
                // Any key closes help; q and Esc do nothing else.
                self.mode = Mode::Normal;
            }
            Mode::Results(_) => self.mode = Mode::Normal,
            Mode::Confirm(p) => match action {
                Action::Confirm => {
                    self.mode = Mode::Running { op: p.op };
                    if p.op == Op::Reveal {
                        if let Some(d) = &mut self.nav.detail {
                            d.reveal = Reveal::Asked;
                        }
                    }
                    let how = How { force: p.force, plan: p.plan.clone(), pause_for: None };
                    self.outbox.push(Request::Run { op: p.op, target: p.target, how });
                }
                // Offered only where it changes something: a group requeue that would leave
                // jobs alone because no live worker handles them.
                Action::ConfirmForced
                    if p.op == Op::Requeue && p.would_requarantine > 0 && p.target.group_filter().is_some() =>
                {
                    self.mode = Mode::Running { op: p.op };
                    let how = How { force: true, plan: p.plan.clone(), pause_for: None };
                    self.outbox.push(Request::Run { op: p.op, target: p.target, how });
                }
                // A pause for a while (the CLI's `--for`): it ends by itself.
                Action::ConfirmPauseFor(i) if p.op == Op::Pause && i < PAUSE_FOR.len() => {
                    self.mode = Mode::Running { op: p.op };
                    let how = How { force: false, plan: None, pause_for: Some(PAUSE_FOR[i]) };
                    self.outbox.push(Request::Run { op: p.op, target: p.target, how });
                }
                Action::Decline | Action::Back => {
                    self.mode = Mode::Normal;
                    self.notice = Some(format!("{} declined: nothing changed", p.op.name()));
                }
                _ => {}
            },
            Mode::Editing { .. } => {}
            Mode::SaveEdit { id, payload, .. } => match action {
                Action::SaveEdit { requeue } => {
                    self.mode = Mode::Running { op: Op::EditPayload };
                    let target = Target::Payload { id, payload, requeue };
                    self.outbox.push(Request::Run { op: Op::EditPayload, target, how: How::default() });
                }
                Action::ReopenEditor => self.open_editor(id, payload),
                Action::Decline | Action::Back => {
                    self.mode = Mode::Normal;
                    self.notice = Some("payload edit discarded: nothing changed".into());
                }
                _ => {}
            },
            Mode::EditInvalid { id, payload, .. } => match action {
                Action::ReopenEditor => self.open_editor(id, payload),
                Action::Decline | Action::Back => {
                    self.mode = Mode::Normal;
                    self.notice = Some("payload edit discarded: nothing changed".into());
                }
                _ => {}
            },
            Mode::Preparing { .. } | Mode::Running { .. } => {
                if matches!(action, Action::Back | Action::Decline) {
                    // The store finishes what it started; the answer is shown when it comes.
                    self.notice = Some("still waiting for the store…".into());
                }
            }
            // Only the editor's own actions: nothing typed here reaches a command.
            Mode::Filter { mut input } => match action {
                Action::FilterEdit(request) => {
                    input.edit(request);
                    self.mode = Mode::Filter { input };
                }
                Action::FilterRecall { older } => {
                    input.recall(&self.filter_history, older);
                    self.mode = Mode::Filter { input };
                }
                Action::FilterCancel => self.mode = Mode::Normal,
                Action::FilterSubmit => self.apply_filter(input),
                _ => {}
            },
            Mode::ConfirmQuit => match action {
                Action::Confirm => self.quit = true,
                _ => {
                    self.mode = Mode::Normal;
                    self.notice = Some("still running: q then y quits".into());
                }
            },
            Mode::Normal => self.on_normal(action),
        }
    }

    fn on_normal(&mut self, action: Action) {
        match action {
            Action::Back | Action::Close => {
                if self.nav.detail.is_some() {
                    self.nav.detail = None;
                    self.dirty = true;
                } else if !self.nav.marks.is_empty() {
                    self.nav.marks.clear();
                    self.notice = Some("marks cleared".into());
                } else if let Some(back) = self.vs().back_to {
                    let vs = self.vs_mut();
                    vs.filter = Filter::default();
                    vs.filter_text.clear();
                    vs.back_to = None;
                    self.reset_position();
                    self.show_view(back);
                } else if self.vs().filter.is_group() {
                    let vs = self.vs_mut();
                    vs.filter = Filter::default();
                    vs.filter_text.clear();
                    vs.grouped = true;
                    self.reset_position();
                } else if matches!(action, Action::Close) {
                    // An active filter is not a level to back out of, and Esc is the key that
                    // closes popups: pressed once too often it must not end the dashboard.
                    self.notice = Some("nothing to close here: q quits".into());
                } else if self.cfg.ask_before_quit {
                    self.mode = Mode::ConfirmQuit;
                } else {
                    self.quit = true;
                }
            }
            Action::NextView => self.show_view(View::ALL[(self.nav.view.index() + 1) % View::ALL.len()]),
            Action::PrevView => {
                self.show_view(View::ALL[(self.nav.view.index() + View::ALL.len() - 1) % View::ALL.len()])
            }
            Action::ShowView(v) => self.show_view(v),
            Action::Up => self.scroll_or_move(-1),
            Action::Down => self.scroll_or_move(1),
            Action::PageUp => self.scroll_or_move(-(self.page_rows() as i64)),
            Action::PageDown => self.scroll_or_move(self.page_rows() as i64),
            Action::Top => self.move_to(0),
            Action::Bottom => {
                if self.nav.detail.is_some() {
                    let max = self.detail_max_scroll();
                    if let Some(d) = &mut self.nav.detail {
                        d.scroll = max;
                    }
                } else {
                    self.move_to(self.list_len().saturating_sub(1));
                }
            }
            Action::G => {
                if self.pending_g.take().is_some() {
                    if let Some(d) = &mut self.nav.detail {
                        d.scroll = 0;
                    } else {
                        self.move_to(0);
                    }
                } else {
                    self.pending_g = Some(self.now);
                }
            }
            Action::ToggleGroup => self.toggle_group_if_groupable(),
            Action::Open => self.open(),
            Action::ToggleMark => self.toggle_mark(),
            Action::Requeue => self.ask(Op::Requeue),
            Action::Cancel => self.ask(Op::Cancel),
            Action::Reveal => self.ask(Op::Reveal),
            Action::PauseResume => self.ask_pause(),
            Action::Trigger => self.ask_schedule(Op::Trigger),
            Action::RunNow => self.ask(Op::RunNow),
            Action::CancelMatching => self.ask_cancel_matching(),
            Action::EditPayload => self.edit_payload(),
            Action::TogglePause => {
                self.paused = !self.paused;
                if !self.paused {
                    self.dirty = true;
                }
            }
            Action::Help => self.mode = Mode::Help,
            Action::Wheel { down } => self.scroll_or_move(if down { 3 } else { -3 }),
            Action::Click { column, row } => self.click(column, row),
            // Every registered worker is listed: there is nothing to filter.
            Action::StartFilter if self.screen().unfiltered().is_some() => {
                self.notice = self.screen().unfiltered().map(String::from)
            }
            Action::StartFilter => self.mode = Mode::Filter { input: Prompt::new(&self.vs().filter_text) },
            _ => {}
        }
    }

    fn tick(&mut self, now: Millis) {
        self.now = now;
        if let Some(at) = self.pending_g {
            if now - at >= G_TIMEOUT_MS {
                self.pending_g = None;
                self.toggle_group_if_groupable();
            }
        }
        if self.paused || self.in_flight.is_some() {
            return;
        }
        let due = match self.last_refresh {
            None => true,
            Some(t) => now - t >= self.cfg.interval.as_millis() as Millis,
        };
        if self.dirty || due {
            self.outbox.push(Request::Refresh(Box::new(self.query())));
            self.in_flight = Some(now);
            self.dirty = false;
            self.last_refresh = Some(now);
        }
    }

    fn on_response(&mut self, r: Response) {
        match r {
            Response::Snapshot(mut s) => {
                self.in_flight = None;
                self.db = DbStatus::Ok { query_ms: s.query_time.as_secs_f64() * 1000.0 };
                if let Some(loaded) = s.payload.take() {
                    self.payload_loaded(loaded);
                }
                self.absorb(*s);
            }
            Response::RefreshFailed { error, busy } => {
                self.in_flight = None;
                self.db = if busy {
                    match self.db {
                        DbStatus::Busy { since } => DbStatus::Busy { since },
                        _ => DbStatus::Busy { since: self.now },
                    }
                } else {
                    DbStatus::Failed { error }
                };
            }
            Response::Preview(p) => {
                if matches!(self.mode, Mode::Preparing { .. }) {
                    // A pause holding no job yet is still a pause: it holds the next ones.
                    if p.affected == 0 && !matches!(p.op, Op::Pause | Op::Resume) {
                        self.mode = Mode::Normal;
                        self.error = Some(format!(
                            "nothing to {}: {}",
                            p.op.verb().to_lowercase(),
                            if p.skipped.is_empty() { "no job matches".to_string() } else { p.skipped.join(", ") }
                        ));
                    } else {
                        self.mode = Mode::Confirm(p);
                    }
                }
            }
            Response::PreviewFailed(e) => {
                self.mode = Mode::Normal;
                self.error = Some(e);
            }
            Response::Done(report) => {
                self.groups_read_at = None;
                self.nav.marks.clear();
                self.mode = Mode::Results(report);
                self.dirty = true;
            }
            Response::Revealed { job, details } => {
                self.mode = Mode::Normal;
                if let Some(d) = self.nav.detail.as_mut().filter(|d| d.id == job) {
                    d.reveal = Reveal::Shown(details);
                }
            }
            Response::RevealFailed { job, error } => {
                self.mode = Mode::Normal;
                if let Some(d) = self.nav.detail.as_mut().filter(|d| d.id == job) {
                    d.reveal = Reveal::Refused(error.clone());
                }
                self.error = Some(error);
            }
        }
    }

    /// Take in a refresh: the live feed takes its new log entries, chart counts and counts;
    /// the screen keeps its selected row where the list moved under it.
    fn absorb(&mut self, mut s: Snapshot) {
        match (&s.query, &self.snapshot) {
            (Some(q), _) if q.read_groups => {
                self.groups_read_at = Some(s.at);
                self.groups_count = q.view.state().map(|st| s.counts.total(st));
            }
            (Some(q), Some(prev)) => q.view.screen(q.grouped).carry(prev, &mut s),
            _ => {}
        }
        let same_list = self.snapshot.as_ref().and_then(|p| p.query.as_ref()).map(|q| (q.view, q.grouped, &q.filter))
            == s.query.as_ref().map(|q| (q.view, q.grouped, &q.filter));
        let screen = self.screen();
        // Read before the feed and the snapshot move on: the row under the selection now.
        let pinned = if self.vs().selected > 0 { screen.pin(self, same_list) } else { None };
        self.feed.absorb(&mut s);
        self.now = self.now.max(s.at);
        self.snapshot = Some(s);
        if let Some(index) = pinned.and_then(|row| screen.find(self, &row)) {
            if index != self.vs().selected {
                self.move_to(index);
            }
        }
        // The list may have shrunk under the selection (jobs requeued elsewhere).
        let len = self.list_len();
        if self.vs().selected >= len && len > 0 {
            self.move_to(len - 1);
        }
    }

    fn show_view(&mut self, v: View) {
        if v != self.nav.view {
            // The view left goes back to its default grouping: kept, a Dead-Lettered view grouped
            // an hour ago came back as groups and `r` offered to requeue a whole group to an
            // operator who expected the one job under the cursor (found on a walk, issue 39).
            let default = self.nav.view.grouped_by_default();
            let left = self.vs_mut();
            if left.grouped != default {
                left.grouped = default;
                left.selected = 0;
                left.offset = 0;
            }
            self.groups_read_at = None;
            self.nav.view = v;
            self.nav.detail = None;
            self.dirty = true;
        }
    }

    fn toggle_group_if_groupable(&mut self) {
        if self.nav.view.groups() && self.nav.detail.is_none() {
            let g = !self.vs().grouped;
            self.vs_mut().grouped = g;
            self.reset_position();
        }
    }

    fn reset_position(&mut self) {
        self.groups_read_at = None;
        let vs = self.vs_mut();
        vs.selected = 0;
        vs.offset = 0;
        self.dirty = true;
    }

    fn scroll_or_move(&mut self, by: i64) {
        if self.nav.detail.is_some() {
            let max = self.detail_max_scroll();
            if let Some(d) = &mut self.nav.detail {
                d.scroll = (d.scroll as i64 + by).clamp(0, max as i64) as u16;
            }
            return;
        }
        let len = self.list_len();
        if len == 0 {
            return;
        }
        let target = (self.vs().selected as i64 + by).clamp(0, len as i64 - 1) as u64;
        self.move_to(target);
    }

    fn move_to(&mut self, index: u64) {
        self.vs_mut().selected = index;
        self.keep_selection_visible();
    }

    /// Scroll so the selection is on screen; a new offset means a new page from the store.
    fn keep_selection_visible(&mut self) {
        let rows = self.page_rows() as u64;
        let vs = self.nav.vs_mut();
        let before = vs.offset;
        if vs.selected < vs.offset {
            vs.offset = vs.selected;
        } else if vs.selected >= vs.offset + rows {
            vs.offset = vs.selected + 1 - rows;
        }
        if vs.offset != before {
            self.dirty = true;
        }
    }

    fn open(&mut self) {
        match self.screen().open(self, self.vs().selected) {
            Some(Open::Detail(id)) => {
                self.nav.detail = Some(Detail { id, reveal: Reveal::Hidden, scroll: 0 });
                self.dirty = true;
            }
            Some(Open::List { view, filter, text, back_to }) => {
                self.show_view(view);
                let vs = self.vs_mut();
                vs.grouped = false;
                vs.filter = filter;
                vs.filter_text = text;
                if back_to.is_some() {
                    vs.back_to = back_to;
                }
                self.reset_position();
            }
            None => {}
        }
    }

    fn click(&mut self, column: u16, row: u16) {
        if row == TABS_ROW {
            let tab = self.tab_labels(self.width).into_iter().find(|(_, _, from, to)| (*from..*to).contains(&column));
            if let Some((v, ..)) = tab {
                self.show_view(v);
            }
            return;
        }
        let first = self.first_list_row();
        if self.nav.detail.is_some() || row < first || row >= first + self.page_rows() as u16 {
            return;
        }
        let index = self.vs().offset + (row - first) as u64;
        if index >= self.list_len() {
            return;
        }
        if index == self.vs().selected {
            self.open();
        } else {
            self.move_to(index);
        }
    }

    fn toggle_mark(&mut self) {
        if let Some(id) = self.selected_job().map(|j| j.id) {
            if self.nav.marks.remove(&id).is_none() {
                self.nav.marks.insert(id, ());
            }
            self.scroll_or_move(1);
        }
    }

    fn ask(&mut self, op: Op) {
        if self.cfg.read_only {
            self.error = Some(format!("{} is disabled: bw top was started with --read-only", op_key(op)));
            return;
        }
        // Refused before the plan: counting a million jobs to then say the permission is missing
        // wasted the operator's time (issue 19, finding 5).
        if matches!(op, Op::RunNow | Op::Requeue | Op::Cancel) && !self.may_operate(op) {
            return;
        }
        let target = match op {
            Op::Reveal => match &self.nav.detail {
                Some(d) => Target::Jobs(vec![d.id]),
                None => match self.selected_job() {
                    Some(j) => {
                        // Reveal shows in the detail pane: open it first.
                        let id = j.id;
                        self.nav.detail = Some(Detail { id, reveal: Reveal::Hidden, scroll: 0 });
                        self.dirty = true;
                        Target::Jobs(vec![id])
                    }
                    None => {
                        self.error = Some("select a job first: e reveals the failure detail of one job".into());
                        return;
                    }
                },
            },
            _ if self.nav.grouped() && self.nav.detail.is_none() => match self.group_target() {
                Some(t) if op == Op::Requeue => t,
                Some(_) => {
                    self.error =
                        Some(format!("{} acts on jobs, not groups: open the group (Enter) and mark jobs", op_key(op)));
                    return;
                }
                None => {
                    self.error = Some("no group selected".into());
                    return;
                }
            },
            _ => match self.job_target() {
                Some(ids) => Target::Jobs(ids),
                None => {
                    self.error = Some("no job selected".into());
                    return;
                }
            },
        };
        self.mode = Mode::Preparing { op };
        self.outbox.push(Request::Preview { op, target });
    }

    fn apply_filter(&mut self, input: Prompt) {
        match Filter::parse(input.value(), self.now) {
            Ok(f) => {
                if let Err(e) = self.screen().check_filter(&f) {
                    self.error = Some(e);
                    self.mode = Mode::Filter { input };
                    return;
                }
                prompt::remember(&mut self.filter_history, input.value());
                let vs = self.vs_mut();
                vs.filter = f;
                vs.filter_text = input.value().trim().to_string();
                // A filter typed by hand is the operator's own list: q quits from it again.
                vs.back_to = None;
                self.mode = Mode::Normal;
                self.reset_position();
            }
            Err(e) => {
                // Keep the text so it can be fixed; nothing is applied.
                self.error = Some(e);
                self.mode = Mode::Filter { input };
            }
        }
    }
}
