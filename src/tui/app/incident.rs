//! The incident actions' side of [`App`]: `P` pause / resume, `X` bulk cancel, `E` payload
//! edit (the editor round trip as modes), and the `operate` check made before a dialog. Part of
//! the one state machine in `app.rs`, kept apart so that file stays readable; the store calls
//! themselves are in `tui::actions`.

use super::{App, EditorRequest, Mode};
use crate::tui::data::{Op, Request, Target, View};
use backwave::store::PauseKind;
use backwave::{Job, JobId, Millis, Permission};

impl App {
    /// Whether the actor holds `operate`, as the last refresh read it; if not, say so and ask
    /// nothing (the store refuses it anyway: this only spares a dialog that cannot succeed).
    pub(super) fn may_operate(&mut self, op: Op) -> bool {
        match &self.snapshot {
            Some(s) if !s.permissions.contains(&Permission::Operate) => {
                self.error = Some(format!(
                    "{} needs the operate permission, which {} does not hold (bw grant {} operate)",
                    op_key(op),
                    self.cfg.actor,
                    self.cfg.actor
                ));
                false
            }
            _ => true,
        }
    }

    /// The job `P` and `E` act on: the open one, else the selected one.
    fn focused_job(&self) -> Option<Job> {
        if let Some(d) = &self.nav.detail {
            let s = self.snapshot.as_ref()?;
            return s.detail.as_ref().filter(|(j, _)| j.id == d.id).map(|(j, _)| j.clone());
        }
        self.selected_job().cloned()
    }

    /// `P`: in the Queues view the selected queue, elsewhere the open or selected job's wire
    /// name; paused now (as the last refresh read it) means resume, else pause.
    pub(super) fn ask_pause(&mut self) {
        let op = Op::Pause;
        if self.cfg.read_only {
            self.error = Some(format!("{} is disabled: bw top was started with --read-only", op_key(op)));
            return;
        }
        if !self.may_operate(op) {
            return;
        }
        let Some(s) = &self.snapshot else { return };
        if self.nav.view == View::Schedules {
            return self.ask_schedule(Op::Pause);
        }
        let (kind, name) = if self.nav.view == View::Queues && self.nav.detail.is_none() {
            match s.counts.by_queue.keys().nth(self.vs().selected as usize) {
                Some(q) => (PauseKind::Queue, q.clone()),
                None => {
                    self.error = Some("no queue selected".into());
                    return;
                }
            }
        } else {
            match self.focused_job() {
                Some(j) => (PauseKind::WireName, j.wire_name),
                None => {
                    self.error = Some("select a queue (Queues view) or a job: P pauses its wire name".into());
                    return;
                }
            }
        };
        let paused = self.paused_until(kind, &name).is_some();
        let op = if paused { Op::Resume } else { Op::Pause };
        self.mode = Mode::Preparing { op };
        self.outbox.push(Request::Preview { op, target: Target::Paused { kind, name } });
    }

    /// `P` and `t` in the Schedules view: pause or resume (paused now, as the last refresh read
    /// it, means resume), or trigger, the selected schedule.
    pub(super) fn ask_schedule(&mut self, op: Op) {
        if self.cfg.read_only {
            self.error = Some(format!("{} is disabled: bw top was started with --read-only", op_key(op)));
            return;
        }
        if !self.may_operate(op) {
            return;
        }
        let Some(s) = &self.snapshot else { return };
        let Some(info) =
            (self.nav.view == View::Schedules).then(|| s.schedules.get(self.vs().selected as usize)).flatten()
        else {
            self.error = Some(format!("{}: select a schedule in the Schedules view (7)", op_key(op)));
            return;
        };
        let op = match op {
            Op::Pause if info.paused => Op::Resume,
            op => op,
        };
        let name = info.row.schedule.name.clone();
        self.mode = Mode::Preparing { op };
        self.outbox.push(Request::Preview { op, target: Target::Schedule { name } });
    }

    /// `X`: the Scheduled or Running list, as filtered, cancelled in bulk after its exact plan.
    pub(super) fn ask_cancel_matching(&mut self) {
        let op = Op::Cancel;
        if self.cfg.read_only {
            self.error = Some("X (cancel the list) is disabled: bw top was started with --read-only".into());
            return;
        }
        if !self.may_operate(op) {
            return;
        }
        let q = self.query();
        let (Some(filter), true, None) =
            (q.filter, self.nav.view.state().is_some_and(|s| !s.is_terminal()), &self.nav.detail)
        else {
            self.error = Some("X cancels the Scheduled or Running list (filter it first with /)".into());
            return;
        };
        let state = filter.states.first().map(|s| s.to_string()).unwrap_or_default();
        let described = match self.vs().filter_text.as_str() {
            "" => format!("every {state} job"),
            text => format!("every {state} job matching {text}"),
        };
        self.mode = Mode::Preparing { op };
        self.outbox.push(Request::Preview { op, target: Target::Matching { filter: Box::new(filter), described } });
    }

    /// `Some(until)` when `kind` `name` is paused now (`until` is `None` until resumed).
    pub fn paused_until(&self, kind: PauseKind, name: &str) -> Option<Option<Millis>> {
        let s = self.snapshot.as_ref()?;
        s.pauses
            .iter()
            .find(|p| p.kind == kind && p.name == name && p.until.is_none_or(|u| u > self.now))
            .map(|p| p.until)
    }

    /// `E`: open the payload of a Dead-Lettered or Quarantined job in the editor.
    pub(super) fn edit_payload(&mut self) {
        let op = Op::EditPayload;
        if self.cfg.read_only {
            self.error = Some(format!("{} is disabled: bw top was started with --read-only", op_key(op)));
            return;
        }
        if !self.may_operate(op) {
            return;
        }
        let Some(job) = self.focused_job() else {
            self.error = Some("select a Dead-Lettered or Quarantined job first: E edits its payload".into());
            return;
        };
        if !job.state.is_requeueable() {
            self.error = Some(format!(
                "E edits the payload of a Dead-Lettered or Quarantined job; {} is {}",
                job.id.short(),
                job.state
            ));
            return;
        }
        if self.nav.detail.is_some() {
            self.open_editor(job.id, job.payload);
        } else {
            // A listed job comes without its payload: the next refresh reads it, then the
            // editor opens (`payload_loaded`). Never an editor on an empty stand-in.
            self.edit_on_load = Some(job.id);
            self.dirty = true;
        }
    }

    /// The payload `E` asked for arrived with a refresh: open the editor on it, unless the
    /// operator has started something else meanwhile.
    pub(super) fn payload_loaded(&mut self, (id, payload): (JobId, Option<Vec<u8>>)) {
        if self.edit_on_load != Some(id) {
            return;
        }
        self.edit_on_load = None;
        if !matches!(self.mode, Mode::Normal) {
            return;
        }
        match payload {
            Some(p) => self.open_editor(id, p),
            None => self.error = Some(format!("job {} is gone: nothing to edit", id.short())),
        }
    }

    pub(super) fn open_editor(&mut self, id: JobId, payload: Vec<u8>) {
        let original = match &self.mode {
            Mode::SaveEdit { original, .. } | Mode::EditInvalid { original, .. } => original.clone(),
            _ => payload.clone(),
        };
        self.mode = Mode::Editing { id, original };
        self.editor = Some(EditorRequest { id, payload });
    }

    /// The editor closed. Valid JSON asks to save; anything else says why in one line and
    /// offers the editor again. The store checks the JSON again when saving.
    pub(super) fn edited(&mut self, result: Result<Vec<u8>, String>) {
        let Mode::Editing { id, original } = self.mode.clone() else { return };
        let payload = match result {
            Ok(p) => p,
            Err(e) => {
                self.mode = Mode::Normal;
                self.error = Some(e);
                return;
            }
        };
        if payload == original {
            self.mode = Mode::Normal;
            self.notice = Some("payload unchanged: nothing to save".into());
            return;
        }
        match serde_json::from_slice::<serde_json::Value>(&payload) {
            Ok(_) => self.mode = Mode::SaveEdit { id, original, payload },
            Err(e) => {
                let text = String::from_utf8_lossy(&payload);
                let shown: String = text.trim().chars().take(40).collect();
                let more = if text.trim().chars().count() > 40 { "…" } else { "" };
                let error = format!("'{shown}{more}' is not valid JSON: {e}");
                self.mode = Mode::EditInvalid { id, original, payload, error };
            }
        }
    }
}

/// The key of an operator action and its name, for messages ("x (cancel) is disabled").
pub(super) fn op_key(op: Op) -> &'static str {
    match op {
        Op::Requeue => "r (requeue)",
        Op::Cancel => "x (cancel)",
        Op::Reveal => "e (reveal failure detail)",
        Op::Pause | Op::Resume => "P (pause / resume)",
        Op::RunNow => "n (run now)",
        Op::EditPayload => "E (edit payload)",
        Op::Trigger => "t (trigger schedule)",
    }
}
