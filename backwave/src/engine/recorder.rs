//! Where a worker group's outcomes are written. On PostgreSQL on a thread and connection of their
//! own: the server records one batch while the dispatcher claims the next, so one group keeps two
//! server backends busy instead of taking turns on one. SQLite's writers take turns on one file
//! lock whatever their connections, so there a batch is written in place, on the dispatcher's
//! thread. Either way the dispatcher hands over one batch at a time and hears back the same way.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender};

use super::shared::{Done, Recorded};
use crate::error::{panic_message, Error, Result};
use crate::store::{Completion, Store};

pub(super) enum Recorder {
    /// Written by the dispatcher itself, on its own store.
    InPlace,
    /// Written by the recorder thread, on its own store; the answer comes to the dispatcher's
    /// inbox as [`Done::Recorded`].
    Thread(Sender<Vec<Completion>>),
}

impl Recorder {
    /// A recorder for a group whose dispatcher uses `store`: a thread with a store of its own
    /// (`open`) where two connections write side by side, else in place.
    pub fn start(
        store: &Store,
        open: impl FnOnce() -> Result<Store>,
        group: &str,
        inbox: Sender<Done>,
    ) -> Result<Recorder> {
        if !store.writes_side_by_side() {
            return Ok(Recorder::InPlace);
        }
        let own = open()?;
        let (tx, rx) = mpsc::channel::<Vec<Completion>>();
        std::thread::Builder::new()
            .name(format!("bw-{group}-record"))
            .spawn(move || {
                // Ends when the dispatcher drops its sender (or its inbox is gone).
                while let Ok(batch) = rx.recv() {
                    let result = catch_unwind(AssertUnwindSafe(|| own.complete_many(&batch))).unwrap_or_else(|p| {
                        Err(Error::Database(format!("writing outcomes panicked: {}", panic_message(&*p)).into()))
                    });
                    if inbox.send(Done::Recorded((batch, result))).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::InvalidInput(format!("cannot start the outcome writer thread: {e}")))?;
        Ok(Recorder::Thread(tx))
    }

    /// Write `batch`: the answer now when written in place, or `None` when it will come to the
    /// dispatcher's inbox. Should the recorder thread be gone, the batch is written in place.
    pub fn record(&self, store: &Store, batch: Vec<Completion>) -> Option<Recorded> {
        let batch = match self {
            Recorder::InPlace => batch,
            Recorder::Thread(tx) => match tx.send(batch) {
                Ok(()) => return None,
                Err(mpsc::SendError(batch)) => batch,
            },
        };
        let result = store.complete_many(&batch);
        Some((batch, result))
    }
}
